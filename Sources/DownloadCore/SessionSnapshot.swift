import Foundation

/// An immutable picture of the whole queue, published on every change.
public struct SessionSnapshot: Sendable, Hashable {
    /// Every download, in queue order.
    public var downloads: [Download]
    /// How many downloads may transfer at once.
    public var maxActive: Int

    public init(downloads: [Download], maxActive: Int) {
        self.downloads = downloads
        self.maxActive = maxActive
    }

    /// The download with this id, if it is still in the queue.
    public subscript(id: DownloadID) -> Download? {
        downloads.first { $0.id == id }
    }

    /// Sum of all smoothed speeds.
    public var totalBytesPerSecond: Double {
        downloads.reduce(0) { $0 + $1.bytesPerSecond }
    }

    /// Bytes that resumes did not have to fetch again, over the whole queue.
    public var totalBytesSavedByResume: Int64 {
        downloads.reduce(0) { $0 + $1.bytesSavedByResume }
    }

    /// How many downloads are in each state word.
    public var countsByState: [String: Int] {
        downloads.reduce(into: [:]) { $0[$1.state.word, default: 0] += 1 }
    }
}
