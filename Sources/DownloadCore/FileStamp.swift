/// What a completed file looked like when haul placed it: its size and modification time.
///
/// A later request for the same URL compares the file on disk with its stamp: a file truncated,
/// replaced or rewritten since is not reported `completed` again (see `DownloadSession.schedule`).
public struct FileStamp: Sendable, Hashable, Codable {
    public var size: Int64
    /// The modification time in nanoseconds since 1970; nil for a file completed before stamps were
    /// kept (only its size is compared).
    public var modified: Int64?

    public init(size: Int64, modified: Int64?) {
        self.size = size
        self.modified = modified
    }

    /// How the file at `current` differs from this stamp, in words; nil when it does not.
    public func change(to current: FileStamp) -> String? {
        if current.size != size { return "\(current.size) bytes, was \(size)" }
        if let modified, let now = current.modified, now != modified { return "modified since it was completed" }
        return nil
    }

    /// `size` or `size:modified`, for the store.
    public var encoded: String {
        modified.map { "\(size):\($0)" } ?? "\(size)"
    }

    /// The stamp `encoded` wrote; nil for anything else.
    public init?(encoded text: Substring) {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count <= 2, let size = Int64(fields[0]), size >= 0 else { return nil }
        var modified: Int64?
        if fields.count == 2 {
            guard let value = Int64(fields[1]) else { return nil }
            modified = value
        }
        self.init(size: size, modified: modified)
    }
}

/// A file at `path`, as it looked then (`stamp`): where recovery finds a placed file.
public struct StampedFile: Sendable, Hashable {
    public var path: String
    public var stamp: FileStamp

    public init(path: String, stamp: FileStamp) {
        self.path = path
        self.stamp = stamp
    }
}
