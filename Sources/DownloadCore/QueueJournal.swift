import Foundation

/// Where a session writes its queue so that a crash loses nothing.
///
/// The session calls `commit` before it publishes the change, from one serial queue outside the
/// cooperative thread pool (a commit may block on the disk).
public protocol QueueJournal: Sendable {
    /// Writes the changes in one transaction, or throws and writes nothing.
    func commit(_ changes: QueueChanges) throws
    /// Whether `commit` keeps `QueueChanges.history` for `history(_:)` to read back; a journal that
    /// does not leaves the session to keep its run's entries in memory.
    var keepsHistory: Bool { get }
    /// One download's stored history, oldest first (its last `HistoryEntry.keptPerDownload`); with
    /// nil, the queue's latest `HistoryEntry.recentLimit` entries, oldest first.
    func history(_ id: DownloadID?) throws -> [HistoryEntry]
}

extension QueueJournal {
    public var keepsHistory: Bool { false }

    public func history(_ id: DownloadID?) throws -> [HistoryEntry] { [] }
}

/// A commit the journal could not make, said in the project's words.
public struct JournalFailure: Error, CustomStringConvertible, Sendable, Hashable {
    /// Why, in one line ("the disk holding the queue is full").
    public var description: String
    /// Whether trying again soon may succeed (a busy database), unlike a full or read-only disk.
    public var transient: Bool
    /// The disk holding the queue is full or failing: no bad input (a command exits 1).
    public var diskFault: Bool

    public init(_ description: String, transient: Bool = false, diskFault: Bool = false) {
        self.description = description
        self.transient = transient
        self.diskFault = diskFault
    }
}

/// One transaction's worth of queue changes.
public struct QueueChanges: Sendable, Hashable {
    /// Downloads to insert or update, whole. Their `bytesOnDisk` is a checkpoint: the part file was
    /// fsync'd at least that far before it was put here (written, for those in `unsynced`).
    public var saved: [Download] = []
    /// Queue positions that changed (every saved download's position is here too).
    public var positions: [DownloadID: Int] = [:]
    public var removed: [DownloadID] = []
    /// The boot these checkpoints were taken in (`/proc/sys/kernel/random/boot_id`).
    public var bootID: String?
    /// Saved downloads whose checkpoint was taken without an fsync (`--no-fsync`): the bytes were
    /// written, not synced, so after a reboot they are not trusted.
    public var unsynced: Set<DownloadID> = []
    /// What happened to downloads since the last commit, oldest first: appended to each one's
    /// history, which keeps its last `HistoryEntry.keptPerDownload` (entries of a download that is
    /// not in the queue are dropped).
    public var history: [HistoryEntry] = []
    /// The queue's limit on all transfers together, when it changed: remembered for the next run.
    public var limit: LimitSetting?
    /// Every saved row differs from what the journal holds only by its parts as written (the page
    /// cache's word, trusted after a crash in the same boot only), and nothing else changes: the
    /// journal need not wait for the disk to commit it (a power loss may take it back, which
    /// costs nothing a reboot would not).
    public var writtenPartsOnly = false

    /// A new value of the queue's global speed limit.
    public struct LimitSetting: Sendable, Hashable {
        /// Bytes per second; nil for none.
        public var bytesPerSecond: Int64?

        public init(_ bytesPerSecond: Int64?) {
            self.bytesPerSecond = bytesPerSecond
        }
    }

    public init() {}

    public var isEmpty: Bool { saved.isEmpty && positions.isEmpty && removed.isEmpty && history.isEmpty && limit == nil }
}

/// A queue as the journal last committed it.
public struct StoredQueue: Sendable, Hashable {
    /// Every download, in queue order; `bytesOnDisk` is the last checkpoint.
    public var downloads: [Download]
    /// The boot each download's checkpoint was taken in.
    public var checkpointBoots: [DownloadID: String]
    /// Downloads whose checkpoint was not fsync'd (`--no-fsync`).
    public var unsyncedCheckpoints: Set<DownloadID>
    /// Each download's stored position (the order of `downloads` is by position, then id).
    public var positions: [DownloadID: Int] = [:]
    /// The first id never used (ids are not reused, even after a removal).
    public var nextID: Int64

    public init(
        downloads: [Download] = [], checkpointBoots: [DownloadID: String] = [:], unsyncedCheckpoints: Set<DownloadID> = [],
        nextID: Int64 = 1
    ) {
        self.downloads = downloads
        self.checkpointBoots = checkpointBoots
        self.unsyncedCheckpoints = unsyncedCheckpoints
        self.nextID = nextID
    }
}
