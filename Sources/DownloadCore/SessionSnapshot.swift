import Foundation

/// An immutable picture of the whole queue, published on every change.
public struct SessionSnapshot: Sendable, Hashable {
    /// Every download, in queue order.
    public var downloads: [Download] {
        get { rows }
        set {
            rows = newValue
            positions = Self.positions(newValue)
        }
    }
    private var rows: [Download]
    /// How many downloads may transfer at once.
    public var maxActive: Int
    /// Why the latest changes could not be saved to the queue, while they cannot; nil once a commit
    /// succeeds. What the picture shows beyond the last commit is then not stored.
    public var unsaved: String?
    /// The download directory's file system: free space and the floor under which downloads wait
    /// (nil until the session first looked, or when it cannot be read).
    public var space: DiskReading?
    /// The limit on all transfers together, in bytes per second; nil when there is none.
    public var limit: Int64?
    /// Bytes per second all transfers received together over the last seconds (finished ones
    /// included), as the session measured it; nil when not measured (the rows' speeds are summed).
    public var throughput: Double?
    /// Where each download is in `downloads` (a lookup per id must not scan a long queue).
    private var positions: [DownloadID: Int]

    public init(downloads: [Download], maxActive: Int) {
        rows = downloads
        self.maxActive = maxActive
        positions = Self.positions(downloads)
    }

    /// Puts `download` in place of the one with its id, if that is in the queue: where each
    /// download is stays as it was, so nothing is looked up again (a long queue's snapshot shows a
    /// few rows as they were published last).
    public mutating func replace(_ download: Download) {
        guard let index = positions[download.id] else { return }
        // Through the backing store: `downloads`' observer would index every row again.
        rows[index] = download
    }

    /// The download with this id, if it is still in the queue.
    public subscript(id: DownloadID) -> Download? {
        positions[id].map { rows[$0] }
    }

    private static func positions(_ downloads: [Download]) -> [DownloadID: Int] {
        var positions: [DownloadID: Int] = [:]
        positions.reserveCapacity(downloads.count)
        for index in downloads.indices where positions[downloads[index].id] == nil {
            positions[downloads[index].id] = index
        }
        return positions
    }

    /// The speed of all transfers together: the session's `throughput`, else the sum of the rows'
    /// smoothed speeds.
    public var totalBytesPerSecond: Double {
        throughput ?? downloads.reduce(0) { $0 + $1.bytesPerSecond }
    }

    /// Bytes that resumes did not have to fetch again, over the whole queue.
    public var totalBytesSavedByResume: Int64 {
        downloads.reduce(0) { $0 + $1.bytesSavedByResume }
    }

    /// How many downloads show each word (`Download.shownWord`).
    public var countsByState: [String: Int] {
        downloads.reduce(into: [:]) { $0[$1.shownWord, default: 0] += 1 }
    }
}
