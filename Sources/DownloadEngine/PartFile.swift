import DownloadCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `<destination>.part` file a transfer streams into: an open descriptor and plain `write(2)`.
///
/// Not thread-safe: exactly one transfer owns it at a time.
final class PartFile {
    /// An I/O failure, with the `errno` that caused it.
    struct Failure: Error, CustomStringConvertible {
        var operation: String
        var path: String
        var code: Int32

        /// ENOSPC or EDQUOT: room may come back (a file deleted), and the download waits for it.
        var isOutOfSpace: Bool { Self.roomWords(code) != nil }
        /// EFBIG: the file system takes no file this large; no amount of waiting helps.
        var isTooLarge: Bool { code == EFBIG }
        /// A read-only or forbidden destination: it pauses too, for a person to fix and resume.
        var isUnwritable: Bool { code == EROFS || code == EACCES || code == EPERM }
        /// The download pauses with this failure's reason (the bytes so far stay a valid prefix).
        var pausesDownload: Bool { isTooLarge || isUnwritable }
        /// What ran out, in the row's words (`SpaceShortage.writeFailed`).
        var spaceWords: String { Self.roomWords(code) ?? "disk full" }
        /// What ran out when a write failed with `code` (ENOSPC, EDQUOT), in the row's words; nil
        /// for any other failure.
        static func roomWords(_ code: Int32) -> String? {
            switch code {
            case ENOSPC: "disk full"
            case EDQUOT: "over quota"
            default: nil
            }
        }
        /// Another process holds the part file's lock (`lock`): it is writing the file now.
        var isBusy: Bool { operation == Self.lockOperation && code == EWOULDBLOCK }
        static let lockOperation = "lock"
        /// The file holds bytes another download marked as its own (`PartFileOwner`), or, for a
        /// download that takes no unmarked file, bytes without a mark (`isUnmarked`).
        var isForeign: Bool { operation == Self.ownerOperation }
        /// A foreign file without a mark (`code` says which).
        var isUnmarked: Bool { isForeign && code == Self.unmarked }
        static let ownerOperation = "owner"
        static let unmarked: Int32 = 1

        var description: String {
            if isBusy { return "another program is writing \(TerminalText.sanitize(path)) (another haul queue?); waiting for it" }
            if isUnmarked { return "\(TerminalText.sanitize(path)) holds bytes this download did not write (left alone)" }
            if isForeign { return "\(TerminalText.sanitize(path)) is another download's part file (left alone)" }
            if isOutOfSpace { return "\(spaceWords) (\(String(cString: strerror(code))))" }
            if isTooLarge { return "file too large for its file system (\(String(cString: strerror(code)))); paused" }
            let text = "cannot \(operation) \(TerminalText.sanitize(path)): \(String(cString: strerror(code)))"
            return isUnwritable ? text + " (paused until it is writable)" : text
        }
    }

    let path: String
    /// The open descriptor, which the response streams write to with `pwrite`.
    private(set) var descriptor: Int32
    /// Bytes in the file, which is also where the next write goes.
    private(set) var length: Int64

    /// Opens (creating when missing) the part file for writing at its end, locks it, and marks it
    /// with `owner`, its download's mark (`PartFileOwner`; nil: no mark).
    ///
    /// The lock (`flock`, held while the file is open) keeps two processes from writing one part
    /// file: two haul queues fetching files of one name into one directory, for one. Without it,
    /// each wrote the other's file, and one moved the other's bytes into place as its own. A file
    /// with bytes that another download marked (of this queue or another) is not written
    /// (`isForeign`): they are that download's.
    init(path: String, owner: String? = nil, adoptsUnmarked: Bool = true) throws(Failure) {
        self.path = path
        var fd: Int32 = -1
        var info = stat()
        // The name must still lead to the file locked: one another process moved away (into
        // place) between the open and the lock is not this part file any more; open the name again.
        for _ in 0..<3 {
            // Never through a symbolic link, nor into a FIFO, a device or a directory: what stands at
            // the name is not a part file haul wrote (a tester's link at a paused download's part
            // file was written through: a file outside the directory rewritten, and a wrong file
            // completed, exit 0; a FIFO hung the open).
            fd = DirectoryLock.change(path) { open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o644) }
            guard fd >= 0 else {
                let code = errno
                if code == ELOOP || code == ENXIO || code == EISDIR { throw Self.notAPartFile(path) }
                throw Failure(operation: "open", path: path, code: code)
            }
            if let failure = Self.lock(fd, path: path) {
                Self.closeDescriptor(fd)
                throw failure
            }
            guard fstat(fd, &info) == 0 else {
                let code = errno
                Self.closeDescriptor(fd)
                throw Failure(operation: "stat", path: path, code: code)
            }
            guard info.st_mode & S_IFMT == S_IFREG else {
                Self.closeDescriptor(fd)
                throw Self.notAPartFile(path)
            }
            var named = stat()
            if stat(path, &named) == 0, named.st_dev == info.st_dev, named.st_ino == info.st_ino { break }
            Self.closeDescriptor(fd)
            fd = -1
        }
        guard fd >= 0 else { throw Failure(operation: Failure.lockOperation, path: path, code: EWOULDBLOCK) }
        // A new (empty) file is marked at once; one with bytes is written only when it is this
        // download's (`PartFileOwner.holder`; `adoptsUnmarked`: its row has bytes of its own).
        let mark = info.st_size > 0 ? PartFileOwner.mark(fd: fd, path: path) : nil
        if info.st_size > 0 {
            let holder = PartFileOwner.holder(of: mark, owner: owner, hasBytes: adoptsUnmarked)
            guard holder == .own else {
                Self.closeDescriptor(fd)
                throw Failure(operation: Failure.ownerOperation, path: path, code: holder == .nobody ? Failure.unmarked : 0)
            }
        }
        if let owner, mark == nil { PartFileOwner.set(fd, to: owner) }
        descriptor = fd
        length = Int64(info.st_size)
    }

    deinit {
        if descriptor >= 0 { Self.closeDescriptor(descriptor) }
    }

    /// Takes the exclusive lock of the open file `fd`: the busy failure when another holder keeps
    /// it past `patience`; nil when taken, or when the file system has no locks to give (nothing
    /// is refused for want of them).
    ///
    /// A lock haul let go can stay held a moment longer: a child process started meanwhile (a
    /// hook, or any program spawned by the process) holds a copy of every descriptor until its
    /// `exec` closes them, and the lock goes with the last copy. A loaded CI run saw a file's own
    /// placement refused so. Callers on the file-work threads wait out that moment (`patience`);
    /// an attempt on the cooperative pool does not wait (a busy file is retried later).
    static func lock(_ fd: Int32, path: String, patience: Duration = .zero) -> Failure? {
        let deadline = ContinuousClock.now + patience
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            guard errno == EWOULDBLOCK else { return nil }
            guard ContinuousClock.now < deadline else { return Failure(operation: Failure.lockOperation, path: path, code: EWOULDBLOCK) }
            usleep(5_000)
        }
        return nil
    }

    /// How long the file-work threads wait for a lock another holder may let go of at once.
    static let lockPatience: Duration = .seconds(1)

    /// What `holding` found.
    enum Held<T> {
        /// `body` ran, with the file locked.
        case done(T)
        /// Another process kept the file locked past `lockPatience`: it is writing it.
        case busy(Failure)
        /// The file could not be opened (this `errno`: `ENOENT` when there is none).
        case unopened(Int32)
        /// The file is another download's (`PartFileOwner`): `body` did not run.
        case foreign(Failure)
    }

    /// Runs `body` with the file at `path` open (`flags`) and locked, the lock held until `body`
    /// returns: what a file-work thread does to a part file no other process may be writing
    /// (replace, cut, remove, place it), and that no other download than `owner` marked (nil: not
    /// looked at). Waits out a lock let go a moment later (`lockPatience`).
    static func holding<T>(_ path: String, flags: Int32 = O_RDONLY, owner: String?, _ body: (Int32) -> T) -> Held<T> {
        let fd = open(path, flags | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return .unopened(errno) }
        defer { closeDescriptor(fd) }
        if let busy = lock(fd, path: path, patience: lockPatience) { return .busy(busy) }
        if PartFileOwner.other(than: owner, fd: fd, path: path) != nil {
            return .foreign(Failure(operation: Failure.ownerOperation, path: path, code: 0))
        }
        return .done(body(fd))
    }

    /// The size and modification time of the file this descriptor writes (whatever name it has
    /// now); nil when closed or unreadable.
    var stamp: FileStamp? {
        guard descriptor >= 0 else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        return FileSync.stamp(of: info)
    }

    /// Cuts the file to `offset` bytes; the next write goes there.
    func truncate(to offset: Int64) throws(Failure) {
        guard ftruncate(descriptor, off_t(offset)) == 0 else { throw Failure(operation: "truncate", path: path, code: errno) }
        length = offset
    }

    /// A response stream wrote the file up to `end` (front to back).
    func wrote(upTo end: Int64) {
        length = end
    }

    /// Whether the file at `path` could be removed now: its directory is writable, on a file system
    /// not mounted read-only.
    static func removable(_ path: String) -> Bool {
        let directory = DiskWatch.directory(of: path)
        var info = statvfs()
        guard statvfs(directory, &info) == 0, info.f_flag & UInt(ST_RDONLY) == 0 else { return false }
        return access(directory, W_OK) == 0
    }

    /// `count` bytes of the file at `path` from `offset`; nil when they cannot all be read.
    static func bytes(of path: String, at offset: Int64, count: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { closeDescriptor(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let result = bytes.withUnsafeMutableBytes { buffer in
                pread(fd, buffer.baseAddress.map { $0 + done }, count - done, off_t(offset + Int64(done)))
            }
            if result < 0, errno == EINTR { continue }
            guard result > 0 else { return nil }
            done += result
        }
        return bytes
    }

    /// Replaces the file at `path` with one holding just `bytes`, durably: they are written to a
    /// file beside it and fsync'd, that file is renamed over `path`, and the directory is fsync'd.
    ///
    /// A restart from zero does this with the new version's first bytes, so that the old bytes stay
    /// on disk until their replacement is (a crash in between finds one version or the other,
    /// never an emptied file). The new file carries `owner`'s mark, and another download's file is
    /// never replaced. Blocking: run it with `FileSync.run`.
    static func replace(_ path: String, with bytes: [UInt8], owner: String?) -> Result<Void, Failure> {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        // Made anew (never reused: it would keep another's extended attributes). A file of that
        // name is removed only when it is this download's own leftover (its mark: a crash between
        // its write and its rename); anything else there is left alone and the next name taken
        // (a tester's `NAME.part.new`, a person's, was deleted). Not behind `DirectoryLock`: the
        // removal may free its blocks.
        var temporary = ""
        var fd: Int32 = -1
        var attempt = 0
        var removed = false
        while fd < 0 {
            temporary = (slash == nil ? "" : directory + "/") + FileNaming.partName(for: name, suffix: attempt == 0 ? ".new" : ".new\(attempt)")
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 { break }
            let code = errno
            guard code == EEXIST, attempt < 100 else { return .failure(Failure(operation: "create", path: temporary, code: code)) }
            if !removed, let owner, PartFileOwner.mark(path: temporary) == owner {
                removed = true
                if unlink(temporary) == 0 { continue }
            }
            attempt += 1
            removed = false
        }
        func fail(_ operation: String) -> Result<Void, Failure> {
            let code = errno
            closeDescriptor(fd)
            unlink(temporary)
            return .failure(Failure(operation: operation, path: temporary, code: code))
        }
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                pwrite(fd, buffer.baseAddress.map { $0 + done }, bytes.count - done, off_t(done))
            }
            if result < 0, errno == EINTR { continue }
            guard result > 0 else { return fail("write") }
            done += result
        }
        if let owner { PartFileOwner.set(fd, to: owner) }
        guard fsync(fd) == 0 else { return fail("sync") }
        closeDescriptor(fd)
        // The file replaced is nobody's now: another process writing it holds its lock.
        let renamed = { rename(temporary, path) == 0 ? 0 : errno }
        let code: Int32
        switch holding(path, owner: owner, { _ in renamed() }) {
        case .done(let result): code = result
        case .busy(let refusal), .foreign(let refusal):
            unlink(temporary)
            return .failure(refusal)
        case .unopened: code = renamed()
        }
        guard code == 0 else {
            unlink(temporary)
            return .failure(Failure(operation: "rename", path: temporary, code: code))
        }
        // The rename is durable once the directory is; a failure here leaves a valid file either way.
        FileSync.syncDirectories(of: [path])
        return .success(())
    }

    /// The length of the part file at `path`; 0 when there is none.
    static func existingLength(_ path: String) throws(Failure) -> Int64 {
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFREG else { throw notAPartFile(path) }
            return Int64(info.st_size)
        }
        if errno == ENOENT { return 0 }
        throw Failure(operation: "stat", path: path, code: errno)
    }

    /// What stands at a part file's name is not a file (a symbolic link, a FIFO, a directory …):
    /// left alone, as bytes this download did not write, and the download goes on in a part file
    /// of its own.
    static func notAPartFile(_ path: String) -> Failure {
        Failure(operation: Failure.ownerOperation, path: path, code: Failure.unmarked)
    }

    func close() {
        if descriptor >= 0 {
            Self.closeDescriptor(descriptor)
            descriptor = -1
        }
    }

    private static func closeDescriptor(_ fd: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(fd)
        #else
        _ = Darwin.close(fd)
        #endif
    }
}

/// A part file's removal for the command line (`haul cancel` or a purge while no haul runs the
/// queue): as a running queue removes one, never while another process is writing it, and never
/// one another download than `owner` marked.
public enum PartFileRemoval {
    /// Removes the part file at `path` of download `download` of queue `queue`, unless another
    /// process is writing it or another download marked it; false when it stays.
    @discardableResult
    public static func remove(_ path: String, of download: DownloadID, queue: String?, onlyMarked: Bool = false) -> Bool {
        FileSync.removePart(path, owner: PartFileOwner.mark(queue: queue, download: download), onlyMarked: onlyMarked)
    }
}
