import CSplice
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import DownloadCore

/// Which haul queue and download a part file belongs to: an extended attribute (`user.haul.queue`)
/// holding the queue's id and the download's (`mark(queue:download:)`), set when a download opens
/// the file to write it, and removed when the file is placed.
///
/// Two queues (two `--state` directories) fetching files of one name into one directory share the
/// part file's name. The lock (`PartFile`) keeps them from writing it at once; the mark keeps them
/// apart over time: a download never resumes from, restarts over, cuts or removes a part file
/// another download marked (of another queue, or of this one and removed from it, its bytes kept),
/// and fetches into a name of its own instead. Before, the second queue restarted over the first's
/// paused bytes, and the first then resumed after the second's bytes (its `If-Range` held for its
/// own resource): a file of both, placed and reported complete.
///
/// A file without a mark (a person's `NAME.part`, one haul placed under that name, one from
/// before marks, or on a file system that keeps none) is trusted only by a download whose row
/// says it has bytes (`TransferOrder.hasBytes`); any other leaves it alone too.
enum PartFileOwner {
    static let attribute = "user.haul.queue"

    /// What marks the part files of download `download` of queue `queue` (nil: no marks).
    static func mark(queue: String?, download: DownloadID) -> String? {
        queue.map { "\($0)/\(download.rawValue)" }
    }
    /// The longest mark read; a longer value is not a queue id of haul's.
    private static let longest = 64

    /// The queue the file at `path` (or open as `fd`, when not negative) is marked with; nil when
    /// it has no mark or the file system keeps none. A value haul cannot read is another's.
    static func mark(fd: Int32 = -1, path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: longest)
        let length = buffer.withUnsafeMutableBytes { haul_get_attribute(fd, path, attribute, $0.baseAddress, longest) }
        if length < 0 { return errno == ERANGE ? "?" : nil }
        return String(decoding: buffer.prefix(length), as: UTF8.self)
    }

    /// Whose a part file with bytes is, to the download marking its files `owner` (nil: this
    /// session marks nothing) whose row has bytes of its own or not (`TransferOrder.hasBytes`), by
    /// the file's `mark`: the one rule of the attempt's first look (`Transfer.run`), its open
    /// (`PartFile`) and the restore.
    enum Holder {
        /// This download's: written, resumed from, cut as ever.
        case own
        /// Another download marked it (of another queue, or of this one).
        case another
        /// No mark, and the download has no bytes of its own: not its bytes either.
        case nobody
    }

    static func holder(of mark: String?, owner: String?, hasBytes: Bool) -> Holder {
        if let mark, let owner { return mark == owner ? .own : .another }
        if hasBytes { return .own }
        return mark == nil ? .nobody : .another
    }

    /// Whether the file is another download's than `owner`'s (nil: this session marks nothing):
    /// its mark, when it names another.
    static func other(than owner: String?, fd: Int32 = -1, path: String) -> String? {
        guard let owner, let mark = mark(fd: fd, path: path), mark != owner else { return nil }
        return mark
    }

    /// Marks the open file `fd` with `owner`; a file system that keeps no marks is left as it is.
    static func set(_ fd: Int32, to owner: String) {
        _ = Array(owner.utf8).withUnsafeBytes { haul_set_attribute(fd, attribute, $0.baseAddress, $0.count) }
    }

    /// Takes the mark off the open file `fd` (a placed file is the person's, not a queue's).
    static func clear(_ fd: Int32) {
        _ = haul_remove_attribute(fd, attribute)
    }
}
