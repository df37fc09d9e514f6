import Foundation

/// What the terminal UI and the commands drive a queue through: intents in, snapshots out.
///
/// Two implementations: the session of this process (the runner's own UI and commands), and a
/// client of the runner's control socket (another login's UI, `haul add` from a script). Neither
/// side knows which one it has.
public protocol QueueControl: Sendable {
    /// The queue now.
    func snapshot() async throws(QueueControlError) -> SessionSnapshot
    /// Pictures of the queue as it changes, the current one first; newest wins (a slow reader
    /// only ever sees the latest). Ends when the queue stops (its runner exits, the connection drops).
    func snapshots() -> AsyncStream<SessionSnapshot>
    /// Queues downloads (a URL already queued for the same destination joins its download).
    func schedule(_ requests: [QueueRequest]) async throws(QueueControlError) -> QueueScheduled
    func pause(_ id: DownloadID) async throws(QueueControlError)
    /// Resumes (or retries now) a download at once: when no slot is free, the lowest running
    /// download that the queue started by itself goes back to queued with its bytes. Returns that
    /// download, if one made room.
    @discardableResult
    func resume(_ id: DownloadID) async throws(QueueControlError) -> DownloadID?
    /// Stops the download and deletes its part file.
    func cancel(_ id: DownloadID) async throws(QueueControlError)
    /// Forgets a completed, failed or cancelled download; files stay.
    func remove(_ id: DownloadID) async throws(QueueControlError)
    func move(_ id: DownloadID, to index: Int) async throws(QueueControlError)
    /// Pauses, resumes, cancels or removes every one of `ids`, all or nothing: a refused id (the
    /// first refusal is thrown) changes nothing, and the check and the change see one queue (a
    /// tester's `haul pause` of 3,000 ids, one by one, paused 2,498 and then failed on one another
    /// shell cancelled meanwhile, "nothing changed"). Returns, for a resume, the downloads that
    /// went back to queued to make room.
    func edit(_ edit: QueueEdit, _ ids: [DownloadID]) async throws(QueueControlError) -> [MadeRoom]
    func pauseAll() async throws(QueueControlError)
    func resumeAll() async throws(QueueControlError)
    /// Discards the data of paused downloads: of those of `ids` still paused, or (nil) of all.
    func purgePaused(only ids: [DownloadID]?) async throws(QueueControlError)
    func setMaxActive(_ count: Int) async throws(QueueControlError)
    /// The limit on all transfers together, in bytes per second (nil: none); stored with the queue.
    func setLimit(_ bytesPerSecond: Int64?) async throws(QueueControlError)
    /// One download's own limit, in bytes per second (nil: none); stored with it.
    func setLimit(_ bytesPerSecond: Int64?, for id: DownloadID) async throws(QueueControlError)
    /// Forgets every completed download (their files stay); how many rows went.
    func clearCompleted() async throws(QueueControlError) -> Int
    /// One download's history, oldest first (at most `HistoryEntry.keptPerDownload`); with nil,
    /// the whole queue's latest entries, oldest first (at most `HistoryEntry.recentLimit`).
    func history(_ id: DownloadID?) async throws(QueueControlError) -> [HistoryEntry]
    /// Pauses everything, checkpoints, and ends the queue's runner.
    func stop() async throws(QueueControlError)
}

/// A change `edit` makes to each of several downloads.
public enum QueueEdit: String, Sendable, Hashable, Codable, CaseIterable {
    case pause, resume, cancel, remove
}

/// A running download that went back to queued with its bytes (`id`) to make room for one a
/// person resumed (`resumed`).
public struct MadeRoom: Sendable, Hashable, Codable {
    public var id: DownloadID
    public var resumed: DownloadID

    public init(id: DownloadID, resumed: DownloadID) {
        self.id = id
        self.resumed = resumed
    }
}

/// One URL to queue, for one requester.
public struct QueueRequest: Sendable, Hashable, Codable {
    public var url: URL
    public var destination: Destination
    public var options: RequestOptions
    /// The download's own speed limit in bytes per second (`--limit-rate-each`); nil for none.
    ///
    /// A request that joins a download already in the queue never changes its limit silently: a
    /// download without one adopts it (and its history says so), one with another is refused.
    public var limit: Int64?

    public init(url: URL, destination: Destination, options: RequestOptions = RequestOptions(), limit: Int64? = nil) {
        self.url = url
        self.destination = destination
        self.options = options
        self.limit = limit
    }
}

/// What `schedule` did: the download of each request, and a line about each completed file asked
/// for again that changed on disk since (fetched again, or kept because it still matches).
public struct QueueScheduled: Sendable, Hashable, Codable {
    public struct Note: Sendable, Hashable, Codable {
        public var id: DownloadID
        public var text: String

        public init(id: DownloadID, text: String) {
            self.id = id
            self.text = text
        }
    }

    public var ids: [DownloadID]
    public var notes: [Note]

    public init(ids: [DownloadID], notes: [Note] = []) {
        self.ids = ids
        self.notes = notes
    }
}

/// Why a queue did not do what it was asked, in one sentence of haul's words.
public struct QueueControlError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The request cannot be done (an unknown id, a transition the state forbids, bad input).
        case refused
        /// The queue cannot be reached (its runner ended, the socket went away).
        case unavailable
        /// The queue is shutting down.
        case closed
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

extension SessionSnapshot: Codable {
    private enum CodingKeys: String, CodingKey {
        case downloads
        case maxActive = "max_active"
        case unsaved
        case limit
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(downloads: try container.decode([Download].self, forKey: .downloads), maxActive: try container.decode(Int.self, forKey: .maxActive))
        unsaved = try container.decodeIfPresent(String.self, forKey: .unsaved)
        limit = try container.decodeIfPresent(Int64.self, forKey: .limit)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(downloads, forKey: .downloads)
        try container.encode(maxActive, forKey: .maxActive)
        try container.encodeIfPresent(unsaved, forKey: .unsaved)
        try container.encodeIfPresent(limit, forKey: .limit)
    }
}
