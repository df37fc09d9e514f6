import Foundation

/// The queue's rules as a pure value: it takes intents and transfer events and returns the actions
/// the owner (the `DownloadSession` actor) must carry out.
///
/// It never performs I/O and never reads a clock: every time it needs comes in as an argument, so each
/// transition is testable on its own. Events of an attempt that is no longer the download's running
/// attempt ("late events": bytes or completion arriving after pause or cancel) change nothing but the
/// byte count of a stopped download.
public struct SessionStateMachine: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// How many downloads transfer at once.
        public var maxActive: Int
        /// Failed attempts in a row after which a download fails for good.
        public var maxTries: Int
        /// Attempts ending in a protocol error (`Outcome.protocolError`) without progress between
        /// them (other failures do not reset the count) after which a download fails for good: the
        /// first and two retries.
        ///
        /// A server that breaks HTTP or TLS rarely mends itself within minutes, but a proxy or a load
        /// balancer may have sent one bad answer; two retries cover that without waiting 15 minutes.
        public var maxProtocolTries: Int
        public var backoff: Backoff
        /// False for a machine that only edits a stored queue (`haul add`, `haul pause` …): nothing
        /// it holds ever starts, so it never looks for what could.
        public var startsTransfers: Bool
        /// The ends of a download that have a hook (`--on-complete`, `--on-fail`) in this run.
        public var hooks: Set<HookEvent>
        /// The limit on every transfer together, in bytes per second (`--limit-rate`); nil for none.
        public var limit: Int64?

        public init(
            maxActive: Int = 3, maxTries: Int = 20, maxProtocolTries: Int = 3, backoff: Backoff = .standard, startsTransfers: Bool = true,
            hooks: Set<HookEvent> = [], limit: Int64? = nil
        ) {
            self.maxActive = maxActive
            self.maxTries = maxTries
            self.maxProtocolTries = maxProtocolTries
            self.backoff = backoff
            self.startsTransfers = startsTransfers
            self.hooks = hooks
            self.limit = QueueLimits.rate(limit)
        }
    }

    /// What a transfer needs to know to make one attempt.
    ///
    /// It carries no validators: those describe the bytes in the part file, which the previous
    /// attempt may still change after this one is ordered, so the transfer reads them
    /// (`resumeBasis`) once that attempt has ended.
    public struct TransferOrder: Sendable, Hashable {
        public var id: DownloadID
        public var attempt: AttemptID
        public var url: URL
        public var partPath: String
        public var options: RequestOptions = RequestOptions()
        /// The download's own speed limit (bytes per second), beside the queue's; nil for none.
        public var limit: Int64?
        /// Whether the download's row says it has bytes (a checkpoint, validators, a length or
        /// parts): a part file without a queue's mark is then its own, as before marks were kept.
        /// One that says none never restarts over a file it finds: it did not write it (a person's
        /// `NAME.part`, a file haul delivered under that name, another download's kept bytes).
        public var hasBytes = false
    }

    /// What the owner must do, in order.
    public enum Action: Sendable, Hashable {
        /// Start an HTTP attempt; it must not touch the part file before the previous attempt ended.
        case startTransfer(TransferOrder)
        /// Stop the attempt and keep every byte it wrote.
        case stopTransfer(DownloadID, AttemptID)
        /// Delete the part file (cancel and purge only). `onlyMarked`: the download has no bytes of
        /// its own (`Download.hasBytesOfItsOwn`), so only a file carrying its mark is its own; an
        /// unmarked one there is a person's or another's (a tester's cancel deleted it).
        case deletePartFile(DownloadID, path: String, onlyMarked: Bool = false)
        /// Move the finished part file to its destination(s), then report `finalized` or
        /// `finalizeFailed`. The download holds no transfer slot meanwhile (`placing`).
        case finalize(DownloadID)
        /// Call `retryTimerFired(id, token:)` at `date`.
        case scheduleRetry(DownloadID, token: UInt64, at: Date)
        /// Run the download's `event` hook once the change that asked for it is committed (never
        /// before: a crash in between must find the row with its hook pending), without holding
        /// up anything else; then report `hookEnded(id, token:, status:)`.
        case runHook(DownloadID, HookEvent, token: UInt64)
    }

    /// Why an intent was refused.
    public enum TransitionError: Error, Hashable, CustomStringConvertible {
        case unknownDownload(DownloadID)
        case illegal(DownloadID, state: String, intent: String)
        case destinationInUse(String)
        case invalidArgument(String)

        public var description: String {
            switch self {
            case .unknownDownload(let id): "no download \(id)"
            case .illegal(let id, let state, let intent): "cannot \(intent) download \(id): it is \(state)"
            case .destinationInUse(let path): "another download already writes to \(path)"
            case .invalidArgument(let text): text
            }
        }
    }

    /// How an attempt ended, with the bytes in the part file when it did.
    public enum Outcome: Sendable, Hashable {
        case completed
        /// Connection error, timeout, 408/429/5xx, short body, stall. `progressed` when the attempt
        /// wrote bytes (then the count of failures in a row starts again).
        case retryable(reason: String, retryAfter: Double?, progressed: Bool)
        case fatal(reason: String)
        /// The server's answer broke HTTP or TLS (an invalid header, a conflicting Content-Length,
        /// TLS on a plain port …): retried like `retryable`, but at most `maxProtocolTries` attempts
        /// end so, without progress between them, before the download fails with the reason.
        case protocolError(reason: String)
        /// The disk refused the bytes for good until somebody acts: read-only, forbidden, a file
        /// too large for its file system. Pause with the reason; the part file is a valid prefix.
        case cannotWrite(reason: String)
        /// No room: free space under the floor, a known size that cannot fit, or a write that
        /// failed with ENOSPC or EDQUOT. Wait for space (never fail), bytes kept; `reading` is the
        /// file system as it was then, when it could be read.
        case noSpace(SpaceShortage, reading: DiskReading?)
        /// The attempt was stopped from outside (pause, cancel, shutdown).
        case stopped
        /// The part file at `path` is not this download's: another haul queue's or download's (its
        /// mark names them), or, for a download without bytes of its own, a file it did not write.
        /// Its bytes are left alone, and the download starts over in a part file of its own.
        case partFileTaken(path: String, marked: Bool)
    }

    /// What the first response of an attempt established.
    public struct ResponseInfo: Sendable, Hashable {
        public var status: Int
        public var total: Int64?
        public var validators: Validators
        public var finalURL: URL?
        public var serverFileName: String?
        public var disposition: Disposition
        /// The media type the response said its body has (`text/html`), lower-cased, without parameters.
        public var contentType: String?
        /// A resume without validators whose overlap with the bytes on disk was compared and matched.
        public var checkedByOverlap = false

        public init(
            status: Int, total: Int64?, validators: Validators, finalURL: URL?, serverFileName: String?, disposition: Disposition,
            contentType: String? = nil
        ) {
            self.contentType = contentType
            self.status = status
            self.total = total
            self.validators = validators
            self.finalURL = finalURL
            self.serverFileName = serverFileName
            self.disposition = disposition
        }
    }

    public private(set) var configuration: Configuration
    /// Every download by id; records which ids each change touched, for the journal.
    private var downloads = TrackedDownloads()
    /// Queue order; every id in `downloads` appears exactly once.
    public private(set) var order: [DownloadID] = [] {
        didSet { orderChanges &+= 1 }
    }
    /// How often `order` changed, for `startEligible`'s walk.
    private var orderChanges = 0
    /// The attempt transferring each `downloading` download.
    private var running: [DownloadID: AttemptID] = [:]
    /// Part files found to be other downloads' or nobody's (`partFileTaken`): no download of this
    /// queue is moved to one of these names while the machine lives.
    private var foreignParts: Set<String> = []
    /// Running attempts that wrote every byte and are syncing their file (`transferWritten`): they
    /// hold no slot. Always some of `running`'s (`stopRunning`).
    private var syncing: Set<DownloadID> = []
    /// The running attempts that hold a slot: those not syncing.
    private var activeCount: Int {
        running.count - syncing.count
    }
    /// The latest attempt of each download, running or not: its late `finished` still reports bytes.
    private var latestAttempt: [DownloadID: AttemptID] = [:]
    /// The retry timer each `waiting` download expects; other tokens are stale.
    private var retryTokens: [DownloadID: UInt64] = [:]
    /// Attempts of each download that ended in a protocol error since its last progress (reset by
    /// bytes written, completion or a resume intent, not by other failures); not persisted: a new
    /// process gives the server new tries.
    private var protocolErrors: [DownloadID: Int] = [:]
    private var speedMeters: [DownloadID: SpeedMeter] = [:]
    /// Bytes the transfers of this session received, finished ones included (`throughput`).
    private var received: Int64 = 0
    /// The bytes on disk each running attempt was last known to have, from which it receives.
    private var receivedFrom: [DownloadID: Int64] = [:]
    /// `received` over the last seconds: the header's speed. The rows' speeds do not add up to it
    /// for small files (each meter needs two samples a tick apart; a file done in a quarter of a
    /// second shows none), so a queue of them said `0 B/s` while it fetched megabytes a second.
    private var throughputMeter = SpeedMeter()
    /// Completed downloads whose files are being placed. They hold no slot: their transfer is over
    /// and its bytes are synced, so the next download starts while the row is committed and the
    /// file is moved (or copied, across file systems); the row shows `completed` once placed.
    public private(set) var placing: Set<DownloadID> = []
    /// Restored downloads this process does not run unless asked (`haul get` for other URLs): they
    /// stay queued for the process that runs the whole queue.
    public private(set) var held: Set<DownloadID> = []
    /// Downloads by `URL.coalescingKey`, oldest first, kept with every insertion and removal
    /// (computing a key parses the URL: too slow to do for every download on every schedule).
    private var byKey: [String: [DownloadID]] = [:]
    /// What each `waitingForSpace` download waits for.
    private var spaceWaits: [DownloadID: SpaceWait] = [:]
    /// Downloads waiting for room to place their finished file: where a copy found none (the
    /// file system the space check reads for them, not their part file's).
    private var placementRoom: [DownloadID: String] = [:]
    /// The file system of each download's part file, as last read by `spaceChecked`.
    private var filesystems: [DownloadID: UInt64] = [:]
    /// File systems under their floor at the last check, with how many checks in a row found them so.
    private var lowFilesystems: [UInt64: Int] = [:]
    /// The download directory's file system at the last check, for the header.
    public private(set) var space: DiskReading?
    /// The hook run each download expects to hear from; a report with another token is stale (the
    /// download was retried, fetched again or cancelled while its hook ran).
    private var hookTokens: [DownloadID: UInt64] = [:]
    /// `waiting` downloads whose retry time came while no slot was free: they stay `waiting` (the
    /// row says why) and take the next free slot in queue order, like a queued download.
    private var dueRetries: Set<DownloadID> = []
    /// How many retries fell due, for `startEligible`'s walk.
    private var retriesDue = 0
    /// Where `startEligible` walks the queue from: before it, no download was queued or due a
    /// retry when the walk last ended, and none has become so while `walkMarks` still hold (a long
    /// queue of finished rows is not walked again on every event).
    private var walkFrom = 0
    /// `orderChanges`, `downloads.queuedInsertions` and `retriesDue` as the last walk left them.
    private var walkMarks = WalkMarks()

    private struct WalkMarks: Equatable {
        var order = -1
        var queued = -1
        var retries = -1
    }
    /// Downloads whose running attempt a person started (a resume that means now): never sent back
    /// to queued to make room for another person's resume.
    private var startedByPerson: Set<DownloadID> = []
    /// Downloads a person resumed while every running download was a person's too: they start at
    /// the next free slot, before anything else queued, oldest request first.
    private var firstInLine: [DownloadID] = []
    /// What happened to downloads since the owner last took it (`takeHistory`), oldest first.
    private var pendingHistory: [PendingEntry] = []

    private struct PendingEntry: Sendable {
        var download: DownloadID
        var kind: HistoryEntry.Kind
        var text: String
    }
    private var nextID: Int64 = 1
    private var nextAttempt: UInt64 = 1
    private var nextToken: UInt64 = 1

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    // MARK: Reading

    public func download(_ id: DownloadID) -> Download? {
        downloads[id]
    }

    /// Every download in queue order.
    public var all: [Download] {
        order.compactMap { downloads[$0] }
    }

    /// No transfer runs and no finished file is being placed: no transfer's event is on its way.
    public var isQuiet: Bool {
        running.isEmpty && placing.isEmpty
    }

    public var snapshot: SessionSnapshot {
        var snapshot = SessionSnapshot(downloads: all, maxActive: configuration.maxActive)
        snapshot.space = space
        snapshot.limit = configuration.limit
        snapshot.throughput = throughput
        return snapshot
    }

    /// Bytes per second all transfers received together over the last seconds (`sampleThroughput`);
    /// 0 while none runs.
    public var throughput: Double {
        running.isEmpty ? 0 : throughputMeter.bytesPerSecond
    }

    /// Records what the transfers received so far at `time` (seconds on a monotonic clock, as
    /// `transferProgressed` takes it), after the ticks' `transferProgressed`.
    ///
    /// - Returns: whether `throughput` changed.
    @discardableResult
    public mutating func sampleThroughput(at time: Double) -> Bool {
        let before = throughput
        throughputMeter.record(bytes: received, at: time)
        return throughput != before
    }

    /// `id` has `bytes` on disk: what it has more than last known was received.
    private mutating func receive(_ id: DownloadID, upTo bytes: Int64) {
        if let from = receivedFrom[id], bytes > from { received += bytes - from }
        receivedFrom[id] = bytes
    }

    /// What happened since the last call, as entries stamped `time` (the owner's clock: the machine
    /// reads none), oldest first; entries of downloads no longer in the queue are left out.
    public mutating func takeHistory(at time: Date) -> [HistoryEntry] {
        guard !pendingHistory.isEmpty else { return [] }
        defer { pendingHistory = [] }
        return pendingHistory.compactMap { entry in
            guard downloads[entry.download] != nil else { return nil }
            return HistoryEntry(download: entry.download, time: time, kind: entry.kind, text: entry.text)
        }
    }

    /// Records that `kind` happened to `id`, in `text` (haul's words).
    private mutating func note(_ id: DownloadID, _ kind: HistoryEntry.Kind, _ text: String) {
        pendingHistory.append(PendingEntry(download: id, kind: kind, text: text))
    }

    /// What describes the bytes in the part file of an attempt's download.
    public struct ResumeBasis: Sendable, Hashable {
        public var validators: Validators
        public var knownTotal: Int64?
        /// The durable parts of a segmented download; empty for a prefix.
        public var segments: [Segment]
        /// The media type of the response that started the bytes, when it said.
        public var contentType: String?
    }

    /// The validators, total and parts that describe the bytes in the part file of `id` now.
    public func resumeBasis(_ id: DownloadID) -> ResumeBasis? {
        guard let download = downloads[id] else { return nil }
        return ResumeBasis(
            validators: Validators(etag: download.etag, lastModified: download.lastModified, recentlyChanged: download.recentlyChanged),
            knownTotal: download.totalBytes, segments: download.segments, contentType: download.contentType
        )
    }

    /// The ids of the downloads changed (or removed) since the last call, for the journal.
    public mutating func takeTouched() -> Set<DownloadID> {
        downloads.takeTouched()
    }

    /// The attempt currently transferring `id`, if any.
    public func runningAttempt(_ id: DownloadID) -> AttemptID? {
        running[id]
    }

    /// The newest completed download of `url` for exactly this requester, if any.
    public func completedDownload(of url: URL, for destination: Destination) -> Download? {
        (byKey[url.coalescingKey] ?? []).reversed().lazy.compactMap { downloads[$0] }.first { download in
            download.state == .completed
                && (download.destination == destination || download.extraDestinations.contains(destination))
        }
    }

    // MARK: Restoring

    /// Loads a persisted queue into an empty machine; nothing starts until `startQueued()`.
    ///
    /// A download that was downloading or waiting when its process ended goes back to `queued`, and
    /// so does one paused by a shutdown. With `holdPending`, those stay out of the running: they are
    /// `held` until somebody schedules or resumes them.
    public mutating func restore(_ restored: [Download], nextID: Int64, holdPending: Bool) {
        guard downloads.isEmpty else { return }
        for var download in restored where downloads[download.id] == nil {
            download.bytesPerSecond = 0
            switch download.state {
            case .downloading, .waiting, .waitingForSpace, .queued:
                download.state = .queued
                if holdPending { held.insert(download.id) }
            case .paused where download.pausedByShutdown && !holdPending:
                download.state = .queued
                download.pausedByShutdown = false
            case .paused, .completed, .failed, .cancelled:
                break
            }
            downloads[download.id] = download
            order.append(download.id)
            byKey[download.url.coalescingKey, default: []].append(download.id)
        }
        self.nextID = max(nextID, (downloads.keys.map(\.rawValue).max() ?? 0) + 1)
    }

    /// Notes in a restored download's history that the start-up found it must start over from
    /// zero, and why (`QueueRecovery`: its part file went missing, or cannot be trusted after a
    /// reboot).
    public mutating func noteRestartAtStart(_ id: DownloadID, reason: String) {
        guard downloads[id] != nil else { return }
        note(id, .restarted, "restarted from zero at start: \(reason)")
    }

    /// Starts queued downloads while slots are free (after `restore`).
    public mutating func startQueued() -> [Action] {
        startEligible()
    }

    // MARK: Intents

    /// Adds `url` to the queue, or attaches `destination` to the download already fetching it.
    ///
    /// A queued, downloading, waiting, paused or failed download of the same URL is reused: one URL
    /// never has two transfers. A paused or failed one resumes. The first requester's headers are
    /// kept, unless the download failed and the request gives headers: those are its own then. A
    /// checksum is adopted when the download had none, and a different one is refused. More
    /// connections than the download has are taken (from its next attempt on).
    ///
    /// With `hold`, the download is queued but not started (`haul add`: the queue is edited while
    /// no process runs it).
    ///
    /// `limit` is the download's own speed limit (nil: none asked). A download joined keeps its
    /// limit: it adopts the request's when it had none (its history says so), and a request asking
    /// for another one is refused, so that no requester lowers or raises it unseen.
    public mutating func schedule(
        url: URL, destination: Destination, options: RequestOptions = RequestOptions(), limit: Int64? = nil, hold: Bool = false
    ) throws(TransitionError) -> (DownloadID, [Action]) {
        let key = url.coalescingKey
        if let problem = QueueLimits.rateProblem(limit, "the limit") { throw .invalidArgument(problem) }
        let limit = QueueLimits.rate(limit)
        if let existing = (byKey[key] ?? []).first(where: { id in
            guard let download = downloads[id] else { return false }
            let state = download.state
            // Completed and still being placed, for this destination: its file is on its way to
            // its name. A tester's `haul start -i` at that moment made a second row, fetched again
            // into `NAME.1`.
            let placingHere = state == .completed && placing.contains(id)
                && (download.destination == destination || download.extraDestinations.contains(destination))
            return state.isPending || state == .paused || isFailed(state) || placingHere
        }), var download = downloads[existing] {
            if let checksum = options.checksum, let current = download.options.checksum, current != checksum {
                // Said with the way out (found by use: a wrong checksum seemed final).
                throw .invalidArgument(
                    "download \(existing) of this URL is already checked against \(current); to check it against another, cancel it, or remove it once it failed (its bytes stay)"
                )
            }
            // A file being placed was checked against the checksum it had when its transfer ended:
            // another one could no longer be checked before it is placed (a tester's wrong one was
            // said verified, exit 0). Once it is completed, asked again, its file is read for it.
            if let checksum = options.checksum, download.options.checksum != checksum, download.state == .completed {
                throw .invalidArgument(
                    "download \(existing) of this URL is being placed: ask for it again with --checksum once it is completed, and its file is checked"
                )
            }
            if let limit, let current = download.limit, current != limit {
                throw .invalidArgument(
                    "download \(existing) of this URL is already limited to \(Format.speed(Double(current))) (asked: \(Format.speed(Double(limit)))): change its limit instead"
                )
            }
            var joined = "asked for again"
            if download.destination != destination, !download.extraDestinations.contains(destination) {
                // Its own part file is no requester's file (a tester's `-o` naming it was told
                // `completed` of it, exit 0, and the move took it away).
                if case .file(let path) = destination, path == download.partPath {
                    throw .invalidArgument("\(path) is the part file download \(existing) of this URL writes: choose another path")
                }
                try checkDestinationFree(destination, ignoring: existing)
                download.extraDestinations.append(destination)
                joined = "asked for again, also for \(Self.words(destination))"
            }
            if download.options.checksum == nil, let checksum = options.checksum {
                download.options.checksum = checksum
            }
            note(existing, .added, joined)
            // A failed download tried again with headers of its own takes them: nobody else's
            // transfer runs with the old ones (a tester's `-H 'Authorization: …'` after a 401 was
            // dropped, and the 401's advice to give that very header came back every time).
            if isFailed(download.state), !options.headers.isEmpty, options.headers != download.options.headers {
                download.options.headers = options.headers
                note(existing, .setting, "headers of the request that tried it again: \(options.headers.map(\.name).joined(separator: ", "))")
            }
            if download.limit == nil, let limit {
                download.limit = limit
                note(existing, .setting, "limited to \(Format.speed(Double(limit))) by a request that joined it")
            }
            // More connections asked for are taken from the next attempt on (a tester's paused
            // download asked for again with `--connections 8` went on over one, without a word);
            // fewer leave it as it is.
            if options.connections > download.options.connections {
                download.options.connections = options.connections
                note(existing, .setting, "\(options.connections) connections, asked for by a request that joined it")
            }
            if download != downloads[existing] { downloads[existing] = download }
            var actions: [Action] = []
            if download.state == .paused || isFailed(download.state) {
                actions += try resume(existing, hold: hold)
            }
            if hold { return (existing, actions) }
            held.remove(existing)
            return (existing, actions + startEligible())
        }
        try checkDestinationFree(destination, ignoring: nil)
        let id = DownloadID(nextID)
        nextID += 1
        var download = Download(id: id, url: url, destination: destination, partPath: partPath(for: url, destination: destination))
        download.options = options
        download.limit = limit
        downloads[id] = download
        note(id, .added, "added for \(Self.words(destination))" + (limit.map { ", at most \(Format.speed(Double($0)))" } ?? ""))
        order.append(id)
        byKey[key, default: []].append(id)
        if hold {
            held.insert(id)
            return (id, [])
        }
        return (id, startEligible())
    }

    /// Stops a download and keeps its bytes. Pausing a paused download does nothing.
    public mutating func pause(_ id: DownloadID) throws(TransitionError) -> [Action] {
        try pause(id, history: "paused")
    }

    /// `pause`, saying in the download's history why (`history`).
    private mutating func pause(_ id: DownloadID, history: String) throws(TransitionError) -> [Action] {
        var download = try existing(id)
        var actions: [Action] = []
        switch download.state {
        case .paused:
            // Paused by a quit, paused now by a person: it no longer resumes on the next start.
            if download.pausedByShutdown {
                download.pausedByShutdown = false
                downloads[id] = download
            }
            return []
        case .queued, .waiting, .waitingForSpace:
            retryTokens[id] = nil
            spaceWaits[id] = nil
            dueRetries.remove(id)
        case .downloading:
            if let attempt = stopRunning(id) {
                actions.append(.stopTransfer(id, attempt))
            }
            startedByPerson.remove(id)
            download.bytesPerSecond = 0
        case .completed, .failed, .cancelled:
            throw .illegal(id, state: refusedState(download), intent: "pause")
        }
        held.remove(id)
        firstInLine.removeAll { $0 == id }
        download.state = .paused
        download.pausedByShutdown = false
        downloads[id] = download
        note(id, .paused, history)
        return actions + startEligible()
    }

    /// Puts a paused download back in the queue, retries a failed one, or cuts a wait short; it
    /// starts in queue order (see `resumeNow` for a person's resume).
    ///
    /// With `hold`, it goes back to `queued` but does not start (the queue is edited while no
    /// process runs it).
    public mutating func resume(_ id: DownloadID, hold: Bool = false) throws(TransitionError) -> [Action] {
        let download = try existing(id)
        switch download.state {
        case .queued, .downloading:
            // A held download is queued but out of the running: resuming it lets it run.
            guard !hold, held.remove(id) != nil else { return [] }
            return startEligible()
        case .paused, .failed, .waiting, .waitingForSpace:
            requeue(id)
            if hold {
                held.insert(id)
                return []
            }
            held.remove(id)
            return startEligible()
        case .completed, .cancelled:
            throw .illegal(id, state: refusedState(download), intent: "resume")
        }
    }

    /// A paused, failed or waiting download back to `queued`, with a new count of tries.
    private mutating func requeue(_ id: DownloadID) {
        guard var download = downloads[id] else { return }
        retryTokens[id] = nil
        spaceWaits[id] = nil
        dueRetries.remove(id)
        // A person's resume means try now, even on a disk last seen low: the transfer looks at
        // the disk before any request and says why it waits, with today's figures.
        filesystems[id] = nil
        protocolErrors[id] = nil
        download.failedAttempts = 0
        download.pausedByShutdown = false
        // A retry starts a new ending: the failure's hook (run or not) is history.
        forgetHook(&download)
        download.state = .queued
        downloads[id] = download
    }

    /// A person's resume (or retry now): the download takes a slot at once, wherever it is in the
    /// queue.
    ///
    /// When no slot is free, the lowest running download (in queue order) that the queue started
    /// by itself goes back to `queued` with its bytes (stopped like a pause, checkpointed, resumed
    /// later with `Range` and `If-Range`) and is returned as `displaced`. When every running
    /// download was started by a person, this one stays queued and takes the next free slot,
    /// before everything else queued. A running download stays as it is.
    public mutating func resumeNow(_ id: DownloadID) throws(TransitionError) -> (actions: [Action], displaced: DownloadID?) {
        let download = try existing(id)
        switch download.state {
        case .downloading:
            return ([], nil)
        case .completed, .cancelled:
            throw .illegal(id, state: refusedState(download), intent: "resume")
        case .queued:
            held.remove(id)
            // Now, even on a disk last seen low: the transfer looks before any request.
            filesystems[id] = nil
        case .paused, .failed, .waiting, .waitingForSpace:
            held.remove(id)
            requeue(id)
        }
        guard configuration.startsTransfers else { return ([], nil) }
        var actions: [Action] = []
        var displaced: DownloadID?
        if activeCount >= configuration.maxActive,
           let lowest = order.last(where: { running[$0] != nil && !syncing.contains($0) && !startedByPerson.contains($0) }),
           let attempt = stopRunning(lowest), var stopped = downloads[lowest] {
            actions.append(.stopTransfer(lowest, attempt))
            speedMeters[lowest] = nil
            stopped.state = .queued
            stopped.bytesPerSecond = 0
            stopped.connecting = false
            downloads[lowest] = stopped
            note(lowest, .paused, "back to queued with its bytes, to make room for download \(id) (resumed by a person)")
            displaced = lowest
        }
        if activeCount < configuration.maxActive {
            firstInLine.removeAll { $0 == id }
            if let start = start(id) {
                startedByPerson.insert(id)
                actions.append(start)
            }
        } else if !firstInLine.contains(id) {
            firstInLine.append(id)
        }
        return (actions + startEligible(), displaced)
    }

    /// Stops a download and deletes its partial data: the only intent that throws bytes away.
    public mutating func cancel(_ id: DownloadID) throws(TransitionError) -> [Action] {
        var download = try existing(id)
        let ownBytes = download.hasBytesOfItsOwn
        var actions: [Action] = []
        switch download.state {
        case .cancelled:
            return []
        case .completed:
            throw .illegal(id, state: refusedState(download), intent: "cancel")
        case .downloading:
            if let attempt = stopRunning(id) {
                actions.append(.stopTransfer(id, attempt))
            }
        case .queued, .paused, .waiting, .waitingForSpace, .failed:
            break
        }
        retryTokens[id] = nil
        spaceWaits[id] = nil
        protocolErrors[id] = nil
        dueRetries.remove(id)
        held.remove(id)
        firstInLine.removeAll { $0 == id }
        forgetHook(&download)
        download.state = .cancelled
        download.bytesOnDisk = 0
        download.bytesPerSecond = 0
        // No bytes kept, so no resume picked any up and no part is written (a tester's cancelled row
        // said `resumed_from` 622592, as purge does not).
        download.forgetResume()
        download.segments = []
        download.writtenSegments = []
        downloads[id] = download
        note(id, .cancelled, "cancelled: its partial data deleted")
        actions.append(.deletePartFile(id, path: download.partPath, onlyMarked: !ownBytes))
        return actions + startEligible()
    }

    /// Forgets a completed, failed or cancelled download; its files stay where they are.
    public mutating func remove(_ id: DownloadID) throws(TransitionError) {
        let download = try existing(id)
        guard download.state.isFinished else {
            throw .illegal(id, state: download.state.word, intent: "remove")
        }
        // Completed but not yet placed: its bytes are still in the part file, about to move.
        guard download.state != .completed || !download.completedPaths.isEmpty else {
            throw .illegal(id, state: "being placed", intent: "remove")
        }
        forget(download)
        order.removeAll { $0 == id }
    }

    /// Forgets every completed download at once (files stay, as `remove` of each would leave
    /// them); a completed download whose file is still being placed stays. Returns those forgotten.
    public mutating func clearCompleted() -> [DownloadID] {
        let cleared = order.filter { id in
            guard let download = downloads[id] else { return false }
            return download.state == .completed && !download.completedPaths.isEmpty
        }
        guard !cleared.isEmpty else { return [] }
        for id in cleared {
            if let download = downloads[id] { forget(download) }
        }
        // One pass over the order, not one per row: a queue may hold thousands of finished rows.
        let gone = Set(cleared)
        order.removeAll { gone.contains($0) }
        return cleared
    }

    /// Drops `download` from everything but `order` (the caller's).
    private mutating func forget(_ download: Download) {
        let id = download.id
        downloads[id] = nil
        protocolErrors[id] = nil
        hookTokens[id] = nil
        byKey[download.url.coalescingKey]?.removeAll { $0 == id }
        latestAttempt[id] = nil
        speedMeters[id] = nil
        filesystems[id] = nil
        startedByPerson.remove(id)
    }

    /// Pauses everything that is queued, downloading or waiting.
    public mutating func pauseAll() -> [Action] {
        var actions: [Action] = []
        // Lowest priority first, so that no freed slot starts a download that is about to be paused.
        for id in order.reversed() where downloads[id]?.state.isPending == true {
            actions += (try? pause(id, history: "paused (pause all)")) ?? []
        }
        return actions
    }

    /// Pauses everything this process runs because it is shutting down: the downloads are marked
    /// `pausedByShutdown`, so the next process that runs the queue resumes them. Held downloads stay
    /// as they are.
    public mutating func stopAll() -> [Action] {
        var actions: [Action] = []
        for id in order.reversed() where downloads[id]?.state.isPending == true && !held.contains(id) {
            actions += (try? pause(id, history: "paused by the queue's shutdown: resumes when haul next runs the queue")) ?? []
            downloads[id]?.pausedByShutdown = true
        }
        return actions
    }

    /// Resumes every paused download.
    public mutating func resumeAll() -> [Action] {
        var actions: [Action] = []
        for id in order where downloads[id]?.state == .paused {
            actions += (try? resume(id)) ?? []
        }
        return actions
    }

    /// Discards the partial data of every paused download and keeps the downloads: each stays in
    /// the queue, paused at 0 B and marked purged (its `lastError` says how much went), and a
    /// resume fetches it from zero. A person wanted the space back, not to lose the downloads.
    ///
    /// `only`: of these downloads alone (those a person was asked about), when they are still
    /// paused; nil: of every paused one.
    ///
    /// - Returns: the deletes, and each download purged with the bytes it held.
    public mutating func purgePaused(only ids: Set<DownloadID>? = nil, sparing: Set<DownloadID> = []) -> (actions: [Action], purged: [(DownloadID, Int64)]) {
        var actions: [Action] = []
        var purged: [(DownloadID, Int64)] = []
        for id in order where ids?.contains(id) ?? true {
            if sparing.contains(id) { continue }
            guard let (action, freed) = purge(id, why: Download.purgedWords) else { continue }
            actions.append(action)
            purged.append((id, freed))
        }
        return (actions, purged)
    }

    /// The paused downloads with bytes (not purged yet), and their part files: what a purge of
    /// `ids` (nil: all) would empty.
    public func purgeable(only ids: Set<DownloadID>? = nil) -> [(DownloadID, String)] {
        order.compactMap { id in
            guard ids?.contains(id) ?? true, let download = downloads[id], download.state == .paused, !download.isPurged else { return nil }
            return (id, download.partPath)
        }
    }

    /// Empties `id` when it is paused: no validator, no parts, no resume is trusted again.
    private mutating func purge(_ id: DownloadID, why: String) -> (Action, freed: Int64)? {
        // Purged already and nothing fetched since: its note says what went.
        guard var download = downloads[id], download.state == .paused, !download.isPurged else { return nil }
        let freed = download.bytesOnDisk
        let ownBytes = download.hasBytesOfItsOwn
        download.forgetVersion()
        download.bytesPerSecond = 0
        download.pausedByShutdown = false
        download.lastError = "\(why): \(Format.bytes(freed)) of partial data discarded; resuming fetches it from zero"
        downloads[id] = download
        note(id, .paused, download.lastError ?? why)
        return (.deletePartFile(id, path: download.partPath, onlyMarked: !ownBytes), freed)
    }

    // MARK: Disk space

    /// What a `waitingForSpace` download needs before it may start again.
    private struct SpaceWait: Sendable, Hashable {
        var shortage: SpaceShortage
        /// Free space when it stopped: after a failed write, room must have come back since (a
        /// quota's limit does not show in the file system's free space).
        var freeThen: Int64?
        /// A finished file's copy waits: the bytes it needs there (the whole file).
        var copy: Int64?
    }

    /// The downloads whose file system the owner must read for `spaceChecked`: those running,
    /// queued or waiting for space, and (to purge) the paused ones holding bytes. Part file paths.
    public func spaceWatchList(includePaused: Bool) -> [(DownloadID, String)] {
        order.compactMap { id in
            guard let download = downloads[id] else { return nil }
            switch download.state {
            case .waitingForSpace:
                return (id, placementRoom[id] ?? download.partPath)
            case .downloading where !placing.contains(id), .queued:
                return (id, download.partPath)
            // Due: it starts at the next free slot, unless its file system is low.
            case .waiting where dueRetries.contains(id):
                return (id, download.partPath)
            case .paused where includePaused && download.bytesOnDisk > 0:
                return (id, download.partPath)
            default:
                return nil
            }
        }
    }

    /// The owner read the file systems of `spaceWatchList` (`readings`; a download missing could
    /// not be read) and of the download directory (`directory`, for the header).
    ///
    /// Running downloads under the floor stop and wait, bytes kept; queued ones there do not
    /// start; waiting ones whose rest fits start again. With `purgeWhenLow`, a file system found
    /// under its floor twice in a row gets back what it lacks from the partial data of paused
    /// downloads on it, least recently used first; their rows stay, paused at 0 B.
    ///
    /// - Returns: the actions, each download purged with the bytes it held, and whether anything
    ///   a snapshot shows changed.
    public mutating func spaceChecked(
        _ readings: [DownloadID: DiskReading], directory: DiskReading?, purgeWhenLow: Bool
    ) -> SpaceCheck {
        var changed = false
        // The header's reading: the download directory's, unless a file system downloads wait on
        // is under its floor (then the one furthest under it).
        let lowest = readings.values.filter(\.isLow).min { $0.free - $0.floor < $1.free - $1.floor }
        let shown = lowest.flatMap { low in directory?.isLow == true ? nil : low } ?? directory
        if space != shown {
            space = shown
            changed = true
        }
        var low: [UInt64: DiskReading] = [:]
        for (id, reading) in readings {
            if filesystems[id] != reading.filesystem { filesystems[id] = reading.filesystem }
            if reading.isLow { low[reading.filesystem] = reading }
        }
        lowFilesystems = Dictionary(uniqueKeysWithValues: low.keys.map { ($0, (lowFilesystems[$0] ?? 0) + 1) })
        var actions: [Action] = []
        // Running downloads under the floor stop first, lowest in the queue first (no freed slot
        // starts a download about to stop).
        for id in order.reversed() {
            // A syncing download writes nothing more: it finishes.
            guard let reading = readings[id], reading.isLow, let attempt = running[id], !syncing.contains(id), var download = downloads[id] else { continue }
            stopRunning(id)
            speedMeters[id] = nil
            actions.append(.stopTransfer(id, attempt))
            wait(&download, .belowFloor, reading)
            downloads[id] = download
            note(id, .waiting, download.state.reason ?? "waiting for disk space")
            changed = true
        }
        var purged: [(DownloadID, Int64)] = []
        if purgeWhenLow {
            for (filesystem, count) in lowFilesystems where count >= 2 {
                guard let reading = low[filesystem] else { continue }
                purged += purgeLeastRecentlyUsed(on: filesystem, lacking: reading.floor - reading.free, readings, actions: &actions)
            }
        }
        // What running downloads will still write, by file system: a waiting download starts
        // only when its rest fits beside theirs (and beside those started before it here).
        var promised: [UInt64: Int64] = [:]
        for (id, reading) in readings where running[id] != nil {
            promised[reading.filesystem, default: 0] += downloads[id].map(Self.rest) ?? 0
        }
        for id in order {
            guard let wait = spaceWaits[id], var reading = readings[id], var download = downloads[id] else { continue }
            reading.promised = promised[reading.filesystem] ?? 0
            if fits(download, wait, reading) {
                spaceWaits[id] = nil
                if placementRoom.removeValue(forKey: id) != nil {
                    // Its file is whole: placed again, without a transfer.
                    download.state = .completed
                    placing.insert(id)
                    actions.append(.finalize(id))
                    promised[reading.filesystem, default: 0] += wait.copy ?? 0
                } else {
                    download.state = .queued
                    promised[reading.filesystem, default: 0] += Self.rest(download)
                }
            } else {
                let words = Self.remainingShortage(download, wait, reading).words(reading)
                guard download.state != .waitingForSpace(reason: words) else { continue }
                download.state = .waitingForSpace(reason: words)
            }
            downloads[id] = download
            changed = true
        }
        let started = startEligible()
        return SpaceCheck(actions: actions + started, purged: purged, changed: changed || !purged.isEmpty || !started.isEmpty)
    }

    /// What `spaceChecked` decided.
    public struct SpaceCheck: Sendable {
        public var actions: [Action]
        /// Each download purged, with the bytes it held.
        public var purged: [(DownloadID, Int64)]
        public var changed: Bool
    }

    /// What `download` will still write, when its size is known (else nothing is counted).
    private static func rest(_ download: Download) -> Int64 {
        download.totalBytes.map { max(0, $0 - download.bytesOnDisk) } ?? 0
    }

    /// Whether the waiting `download` may start again on a file system read as `reading`.
    private func fits(_ download: Download, _ wait: SpaceWait, _ reading: DiskReading) -> Bool {
        guard !reading.isLow else { return false }
        switch Self.remainingShortage(download, wait, reading) {
        case .cannotFit(let needs): return reading.fits(needs)
        case .belowFloor: return reading.fits(0)
        // Room must have come back since the failed write.
        case .writeFailed: return false
        }
    }

    /// What the waiting `download` lacks on a file system read as `reading`: room since its failed
    /// write, else the rest of its file when its size is known (which must fit above the floor
    /// beside what is promised), else free space above the floor.
    private static func remainingShortage(_ download: Download, _ wait: SpaceWait, _ reading: DiskReading) -> SpaceShortage {
        if case .writeFailed = wait.shortage, let then = wait.freeThen, reading.free <= then { return wait.shortage }
        // A copy of a finished file needs all of it there.
        if let copy = wait.copy { return .cannotFit(needs: copy) }
        if case .cannotFit(let needs) = wait.shortage, download.totalBytes == nil { return .cannotFit(needs: needs) }
        let rest = rest(download)
        return rest > 0 ? .cannotFit(needs: rest) : .belowFloor
    }

    /// Puts `download` in `waitingForSpace` for `shortage`, read as `reading`.
    private mutating func wait(_ download: inout Download, _ shortage: SpaceShortage, _ reading: DiskReading?, copy: Int64? = nil) {
        placementRoom[download.id] = nil
        let words = shortage.words(reading)
        // The state carries the words, not `lastError`: nothing says "waiting for disk space"
        // once it no longer does.
        download.state = .waitingForSpace(reason: words)
        download.bytesPerSecond = 0
        download.connecting = false
        retryTokens[download.id] = nil
        spaceWaits[download.id] = SpaceWait(shortage: shortage, freeThen: reading?.free, copy: copy)
    }

    /// Purges paused downloads on `filesystem`, least recently used first, until `lacking` bytes
    /// came back (or none is left); their deletes go to `actions`.
    private mutating func purgeLeastRecentlyUsed(
        on filesystem: UInt64, lacking: Int64, _ readings: [DownloadID: DiskReading], actions: inout [Action]
    ) -> [(DownloadID, Int64)] {
        let candidates = order.enumerated().compactMap { position, id -> (Download, Int)? in
            guard readings[id]?.filesystem == filesystem, let download = downloads[id], download.state == .paused, download.bytesOnDisk > 0 else { return nil }
            return (download, position)
        }.sorted { left, right in
            // Never used (nil) first, then the oldest use; the queue's order breaks ties.
            switch (left.0.lastActive, right.0.lastActive) {
            case (nil, nil): left.1 < right.1
            case (nil, _): true
            case (_, nil): false
            case (let a?, let b?): a == b ? left.1 < right.1 : a < b
            }
        }
        // Discarding everything there would still leave it under the floor (a floor the file
        // system cannot give, or room taken by others): nothing is discarded for nothing.
        guard candidates.reduce(Int64(0), { $0 + $1.0.bytesOnDisk }) >= lacking else { return [] }
        var freed: Int64 = 0
        var purged: [(DownloadID, Int64)] = []
        for (download, _) in candidates where freed < lacking {
            guard let (delete, bytes) = purge(download.id, why: Download.purgedWords + " when disk space ran low") else { continue }
            actions.append(delete)
            freed += bytes
            purged.append((download.id, bytes))
        }
        return purged
    }

    /// Moves a download to `index` in the queue (clamped). A running download keeps running.
    public mutating func move(_ id: DownloadID, to index: Int) throws(TransitionError) -> [Action] {
        _ = try existing(id)
        order.removeAll { $0 == id }
        order.insert(id, at: min(max(0, index), order.count))
        return startEligible()
    }

    /// Changes how many downloads transfer at once; the lowest in the queue beyond the new limit go
    /// back to `queued` with their bytes.
    public mutating func setMaxActive(_ count: Int) throws(TransitionError) -> [Action] {
        guard count >= 1 else { throw .invalidArgument("at least one download must be allowed to run") }
        configuration.maxActive = count
        var actions: [Action] = []
        // A syncing download holds no slot: it is done with the network and finishes as it is.
        var active = order.filter { downloads[$0]?.state == .downloading && !syncing.contains($0) }
        while active.count > count, let id = active.popLast() {
            if let attempt = stopRunning(id) {
                actions.append(.stopTransfer(id, attempt))
            }
            downloads[id]?.state = .queued
            downloads[id]?.bytesPerSecond = 0
            note(id, .paused, "back to queued with its bytes: \(count) may run at once")
        }
        return actions + startEligible()
    }

    // MARK: Speed limits

    /// Sets the limit on every transfer together (nil or 0: none). Running downloads note it.
    public mutating func setLimit(_ bytesPerSecond: Int64?) throws(TransitionError) {
        if let problem = QueueLimits.rateProblem(bytesPerSecond, "the limit") { throw .invalidArgument(problem) }
        let limit = QueueLimits.rate(bytesPerSecond)
        guard limit != configuration.limit else { return }
        configuration.limit = limit
        let words = limit.map { "all downloads together limited to \(Format.speed(Double($0)))" } ?? "the limit on all downloads together removed"
        for id in order where running[id] != nil { note(id, .setting, words) }
    }

    /// Sets one download's own limit (nil or 0: none), beside the queue's: a transfer goes no
    /// faster than the lower of the two. A completed or cancelled download has nothing to limit.
    public mutating func setLimit(_ bytesPerSecond: Int64?, for id: DownloadID) throws(TransitionError) {
        var download = try existing(id)
        if download.state == .completed || download.state == .cancelled {
            throw .illegal(id, state: refusedState(download), intent: "limit")
        }
        if let problem = QueueLimits.rateProblem(bytesPerSecond, "the limit") { throw .invalidArgument(problem) }
        let limit = QueueLimits.rate(bytesPerSecond)
        guard limit != download.limit else { return }
        download.limit = limit
        downloads[id] = download
        note(id, .setting, limit.map { "limited to \(Format.speed(Double($0)))" } ?? "its own limit removed")
    }

    // MARK: Transfer events

    /// The attempt got its response head and decided how its body relates to the bytes on disk.
    ///
    /// Applied even when the attempt was paused meanwhile: it reports what the part file now holds
    /// (a restart has already truncated it), and attempts on one part file never overlap, so the
    /// latest report is the truth the next attempt must resume from. Only a cancelled download,
    /// whose bytes are gone, ignores it.
    public mutating func transferResponded(_ id: DownloadID, attempt: AttemptID, info: ResponseInfo) {
        guard var download = downloads[id], download.state != .cancelled else { return }
        note(id, .response, Self.words(info))
        switch info.disposition {
        case .fresh: break
        case .restarted(let reason): note(id, .restarted, "restarted from zero: \(reason)")
        case .resumed(let offset, let verified): note(id, .resumed, Self.resumeWords(offset, verified: verified, overlap: info.checkedByOverlap))
        }
        if running[id] == attempt { download.connecting = false }
        // A purge's note says a resume fetches from zero: true until this answer (a tester's row
        // kept saying it several resumes later, over the bytes fetched since).
        if download.lastError?.hasPrefix(Download.purgedWords) == true { download.lastError = nil }
        download.lastStatus = info.status
        download.finalURL = info.finalURL
        if let total = info.total { download.totalBytes = total }
        switch info.disposition {
        case .fresh:
            adoptNewVersion(&download, info: info)
        case .restarted(let reason):
            adoptNewVersion(&download, info: info)
            download.restartCount += 1
            download.restartReason = reason
        case .resumed(let offset, let verified):
            download.resumeCount += 1
            download.resumeOffset = offset
            download.bytesSavedByResume += offset
            download.unverifiedResume = !verified
            download.overlapChecked = info.checkedByOverlap
            download.bytesOnDisk = offset
        }
        // What the response writes is received from here (a restart emptied the file).
        if running[id] == attempt { receivedFrom[id] = download.bytesOnDisk }
        downloads[id] = download
    }

    /// The attempt sent its first request (`start`: what it asked for); notes it in the history.
    public mutating func transferBegan(_ id: DownloadID, attempt: AttemptID, _ start: AttemptStart) {
        guard latestAttempt[id] == attempt, downloads[id] != nil else { return }
        note(id, .started, Self.words(start))
    }

    /// Bytes on disk of a running attempt, sampled at `time` on a monotonic clock (seconds).
    ///
    /// - Returns: whether anything visible changed.
    @discardableResult
    public mutating func transferProgressed(
        _ id: DownloadID, attempt: AttemptID, bytesOnDisk: Int64, at time: Double, connections: Int? = nil
    ) -> Bool {
        guard running[id] == attempt, !syncing.contains(id), var download = downloads[id] else { return false }
        receive(id, upTo: bytesOnDisk)
        var meter = speedMeters[id] ?? SpeedMeter()
        meter.record(bytes: bytesOnDisk, at: time)
        speedMeters[id] = meter
        let speed = meter.bytesPerSecond
        let connections = connections ?? download.connections
        guard download.bytesOnDisk != bytesOnDisk || download.bytesPerSecond != speed || download.connections != connections else { return false }
        download.bytesOnDisk = bytesOnDisk
        download.bytesPerSecond = speed
        download.connections = connections
        downloads[id] = download
        return true
    }

    /// The parts of a segmented download as now durable: the attempt split the file (every part
    /// empty but the first), a checkpoint fsync'd them, or the attempt ended. A cancelled or
    /// completed download has no parts.
    public mutating func recordSegments(_ id: DownloadID, _ segments: [Segment]) {
        guard var download = downloads[id], download.state != .cancelled, download.state != .completed else { return }
        download.segments = segments
        download.writtenSegments = []
        downloads[id] = download
    }

    /// The parts a checkpoint sampled, now fsync'd. They were read before the sync began, so written
    /// parts recorded while it ran (a slow disk takes a second) may be further along: those stay
    /// when they are ahead of the synced parts, part by part; otherwise they go. Clearing them
    /// always took the row back to the sample until the next record, and a `kill -9` then fetched
    /// everything written during the sync again.
    public mutating func recordSyncedSegments(_ id: DownloadID, _ segments: [Segment]) {
        guard var download = downloads[id], download.state != .cancelled, download.state != .completed else { return }
        download.segments = segments
        if !Segments.isAhead(download.writtenSegments, of: segments) { download.writtenSegments = [] }
        downloads[id] = download
    }

    /// The parts of the running attempt as written so far, not synced: trusted after a crash in this
    /// boot only (see `QueueRecovery`). Ignored unless `attempt` still runs.
    public mutating func recordWrittenSegments(_ id: DownloadID, attempt: AttemptID, _ segments: [Segment]) {
        guard running[id] == attempt, var download = downloads[id], !download.segments.isEmpty else { return }
        download.writtenSegments = segments
        downloads[id] = download
    }

    /// The parts of a segmented download are about to be thrown away (the resource changed): forget
    /// the version, so that nothing stored can make the emptied part file look like a resumable one.
    public mutating func discardVersion(_ id: DownloadID) {
        guard var download = downloads[id], download.state != .cancelled else { return }
        download.forgetVersion()
        downloads[id] = download
    }

    /// Attempt `attempt` of `id` wrote every byte (`bytesOnDisk` in all) and now syncs its file,
    /// then ends with `transferFinished`. It holds no slot meanwhile: it needs nothing more from
    /// the network, and a slow sync (a large file, a slow disk) keeps no other download waiting.
    /// The row says `finishing`, with no speed; it is still `downloading` (nothing is completed
    /// before its bytes are durable and its row committed). Returns the downloads that start.
    public mutating func transferWritten(_ id: DownloadID, attempt: AttemptID, bytesOnDisk: Int64) -> [Action] {
        guard running[id] == attempt, !syncing.contains(id), var download = downloads[id], download.state == .downloading else { return [] }
        syncing.insert(id)
        speedMeters[id] = nil
        receive(id, upTo: bytesOnDisk)
        download.bytesOnDisk = bytesOnDisk
        download.bytesPerSecond = 0
        download.connections = 0
        download.connecting = false
        download.finishing = true
        downloads[id] = download
        return startEligible()
    }

    /// An attempt ended. `now` and `jitter` (0..<1) time the next retry of a retryable failure.
    ///
    /// `partStamp`: the finished part file's stamp (`completed`), kept as the one completed stamp
    /// while the file has no completed path, and committed so: after a crash between the file's
    /// move and the commit that names it, recovery knows the placed file by it (`QueueRecovery`).
    public mutating func transferFinished(
        _ id: DownloadID, attempt: AttemptID, outcome: Outcome, bytesOnDisk: Int64, now: Date, jitter: Double,
        partStamp: FileStamp? = nil
    ) -> [Action] {
        guard var download = downloads[id] else { return [] }
        guard running[id] == attempt else {
            // A late event: the download was paused, requeued or cancelled while this attempt ran.
            // Only the byte count of a stopped download is news; the state stays as the intent left it.
            if latestAttempt[id] == attempt, download.state != .cancelled, download.state != .downloading {
                // Stopped while it synced: no longer finishing.
                download.finishing = false
                download.bytesOnDisk = bytesOnDisk
                download.connections = 0
                download.lastActive = now
                downloads[id] = download
            }
            return []
        }
        stopRunning(id)
        speedMeters[id] = nil
        receive(id, upTo: bytesOnDisk)
        receivedFrom[id] = nil
        download.finishing = false
        download.lastActive = now
        download.bytesOnDisk = bytesOnDisk
        download.bytesPerSecond = 0
        download.connections = 0
        startedByPerson.remove(id)
        var actions: [Action] = []
        switch outcome {
        case .completed:
            download.state = .completed
            download.totalBytes = bytesOnDisk
            download.completedStamps = partStamp.map { [$0] } ?? []
            download.segments = []
            download.writtenSegments = []
            download.failedAttempts = 0
            protocolErrors[id] = nil
            placing.insert(id)
            actions.append(.finalize(id))
        case .retryable(let reason, let retryAfter, let progressed):
            download.failedAttempts = progressed ? 1 : download.failedAttempts + 1
            // Only progress gives the server its protocol tries back: a drop between two broken
            // answers does not.
            if progressed { protocolErrors[id] = nil }
            download.lastError = reason
            if download.failedAttempts >= configuration.maxTries {
                protocolErrors[id] = nil
                download.state = .failed(reason: "\(reason) (gave up after \(download.failedAttempts) tries)")
            } else {
                actions.append(scheduleRetry(&download, reason: reason, retryAfter: retryAfter, now: now, jitter: jitter))
            }
        case .protocolError(let reason):
            download.failedAttempts += 1
            let inARow = protocolErrors[id, default: 0] + 1
            download.lastError = reason
            if inARow >= configuration.maxProtocolTries || download.failedAttempts >= configuration.maxTries {
                // Said as the server's fault in one sentence: the count of tries adds nothing to it.
                protocolErrors[id] = nil
                download.state = .failed(reason: reason)
            } else {
                protocolErrors[id] = inARow
                actions.append(scheduleRetry(&download, reason: reason, retryAfter: nil, now: now, jitter: jitter))
            }
        case .fatal(let reason):
            download.lastError = reason
            download.state = .failed(reason: reason)
        case .cannotWrite(let reason):
            download.lastError = reason
            download.state = .paused
            note(id, .error, reason)
            note(id, .paused, "paused: the part file cannot be written")
        case .noSpace(let shortage, let reading):
            if let reading { filesystems[id] = reading.filesystem }
            // Before its first byte, what the file needs is its length: the row says so (a tester's
            // said `0 B of unknown size` beside `needs 5.0 MiB`).
            if case .cannotFit(let needs) = shortage, download.totalBytes == nil, bytesOnDisk == 0 { download.totalBytes = needs }
            wait(&download, shortage, reading)
            note(id, .waiting, download.state.reason ?? "waiting for disk space")
        case .stopped:
            download.lastError = "interrupted"
            download.state = .paused
            note(id, .paused, "interrupted")
        case .partFileTaken(let path, let marked):
            // Another's bytes: never resumed from, replaced, cut or removed. Nothing of this
            // download was in that file, so nothing of it is lost; it starts over in a name of its
            // own at once (not a failure: the name was taken, the server did nothing wrong).
            foreignParts.insert(path)
            download.forgetVersion()
            let fresh = partPathAvoidingForeign(download)
            download.partPath = fresh
            download.state = .queued
            download.lastError = nil
            download.restartCount += 1
            let whose = marked ? "is another download's part file" : "holds bytes this download did not write"
            download.restartReason = "\(path) \(whose) (left alone); fetching into \(fresh)"
            note(id, .restarted, "restarted from zero: \(download.restartReason ?? "")")
        }
        if case .failed(let reason) = download.state {
            note(id, .failed, reason)
            if let hook = endHook(&download, .fail) { actions.append(hook) }
        }
        downloads[id] = download
        return actions + startEligible()
    }

    /// Makes `download` wait for its next attempt (backoff, or `retryAfter` seconds) and returns the timer.
    private mutating func scheduleRetry(_ download: inout Download, reason: String, retryAfter: Double?, now: Date, jitter: Double) -> Action {
        let delay = configuration.backoff.delay(failures: download.failedAttempts, retryAfter: retryAfter, jitter: jitter)
        let until = now.addingTimeInterval(delay)
        let token = nextToken
        nextToken += 1
        retryTokens[download.id] = token
        download.state = .waiting(until: until, reason: reason)
        note(download.id, .waiting, "retry in \(Format.duration(delay)): \(reason)")
        return .scheduleRetry(download.id, token: token, at: until)
    }

    /// A retry timer fired; a stale token (the download was paused, resumed or cancelled since) does nothing.
    ///
    /// The retry is due: it takes the next free slot in queue order, before queued downloads below
    /// it. While none is free it stays `waiting` with its time (now past) and reason, so the row
    /// says what it waits for, instead of passing for a download that never started.
    public mutating func retryTimerFired(_ id: DownloadID, token: UInt64) -> [Action] {
        guard retryTokens[id] == token, case .waiting = downloads[id]?.state else { return [] }
        retryTokens[id] = nil
        dueRetries.insert(id)
        retriesDue &+= 1
        return startEligible()
    }

    /// Whether `id` is a retry whose time came, waiting for a free slot.
    public func isDueRetry(_ id: DownloadID) -> Bool {
        dueRetries.contains(id)
    }

    /// The owner placed the finished file at `paths` (the first requester's first), which looked
    /// like `stamps` then.
    public mutating func finalized(_ id: DownloadID, paths: [String], stamps: [FileStamp] = []) -> [Action] {
        var actions: [Action] = []
        if var download = downloads[id] {
            download.completedPaths = paths
            download.completedStamps = stamps.count == paths.count ? stamps : []
            download.replacing = []
            download.replacingStamps = []
            if download.state == .completed {
                note(id, .completed, "completed: \(Format.bytes(download.bytesOnDisk)) at \(paths.first ?? download.destination.path)")
            }
            // The file is in place: only now is there something for the hook to look at.
            if download.state == .completed, let hook = endHook(&download, .complete) { actions.append(hook) }
            downloads[id] = download
        }
        placing.remove(id)
        return actions + startEligible()
    }

    /// Fetches a completed download again: its file changed on disk since it was placed (truncated,
    /// replaced, rewritten). The new file goes back where the old ones were (`replacing`).
    ///
    /// The same row, not a new one: the queue keeps one download per URL and requester, and the
    /// next request finds this one, completed again, with its new stamps.
    ///
    /// `seen`: the requester whose file was found changed, and its stamp then.
    /// `checksum`: the one the new version must match (asked with the request that fetches it again).
    public mutating func fetchAgain(
        _ id: DownloadID, seen: (index: Int, stamp: FileStamp)? = nil, checksum: Checksum? = nil
    ) throws(TransitionError) -> [Action] {
        var download = try existing(id)
        guard download.state == .completed, !download.completedPaths.isEmpty else {
            throw .illegal(id, state: download.state.word, intent: "fetch again")
        }
        download.replacing = download.completedPaths
        var stamps = download.completedStamps.count == download.completedPaths.count ? download.completedStamps : []
        if let seen, stamps.indices.contains(seen.index) { stamps[seen.index] = seen.stamp }
        download.replacingStamps = stamps
        download.completedPaths = []
        download.completedStamps = []
        // Nothing of the old version is kept: the request is a fresh one, without a validator.
        download.forgetVersion()
        forgetHook(&download)
        download.state = .queued
        download.lastStatus = nil
        download.failedAttempts = 0
        if let checksum { download.options.checksum = checksum }
        note(id, .added, checksum == nil ? "fetched again: its file changed on disk" : "fetched again: its file does not match the checksum asked for")
        // Another download may have taken the part file's name since this one completed.
        if downloads.partClaims(download.partPath) > 0 {
            download.partPath = partPath(for: download.url, destination: download.destination)
        }
        downloads[id] = download
        held.remove(id)
        return startEligible()
    }

    /// The completed file of requester `index` changed on disk but still matches the checksum: it
    /// is kept, with `stamp` as what it looks like now.
    public mutating func restamp(_ id: DownloadID, index: Int, _ stamp: FileStamp) {
        guard var download = downloads[id], download.state == .completed, download.completedStamps.indices.contains(index) else { return }
        download.completedStamps[index] = stamp
        downloads[id] = download
    }

    /// The placement of `id`'s finished file found no room at `path` (a copy for a requester on
    /// another file system, `shortage` the write that failed, `reading` that file system then): it
    /// waits for room there, its file whole, and is placed again once the file fits (`spaceChecked`).
    /// A tester's row said `failed` (a full disk never fails a download), and the first requester's
    /// file was never placed.
    public mutating func placementLacksRoom(_ id: DownloadID, at path: String, shortage: SpaceShortage, reading: DiskReading?) -> [Action] {
        placing.remove(id)
        guard var download = downloads[id], download.state == .completed else { return startEligible() }
        wait(&download, shortage, reading, copy: download.totalBytes ?? download.bytesOnDisk)
        placementRoom[id] = path
        if let reading { filesystems[id] = reading.filesystem }
        downloads[id] = download
        note(id, .waiting, download.state.reason ?? "waiting for disk space")
        return startEligible()
    }

    /// The placement of `id`'s finished file found its destination read-only or forbidden
    /// (`reason`): it pauses with its file whole, as a part file that cannot be written does, for a
    /// person to fix and resume (a tester's row said `failed`).
    public mutating func placementPaused(_ id: DownloadID, reason: String) -> [Action] {
        placing.remove(id)
        guard var download = downloads[id], download.state == .completed else { return startEligible() }
        download.state = .paused
        download.lastError = reason
        note(id, .error, reason)
        note(id, .paused, "paused: its file cannot be placed")
        downloads[id] = download
        return startEligible()
    }

    /// The owner could not place the finished file; the bytes stay in the part file.
    ///
    /// `discardingVersion`: the part file is not the one the transfer wrote (another program wrote
    /// or replaced it): the download forgets its version, so a retry trusts none of those bytes
    /// (it checks them against the server's before keeping any, or starts over).
    public mutating func finalizeFailed(_ id: DownloadID, reason: String, discardingVersion: Bool = false) -> [Action] {
        placing.remove(id)
        var actions: [Action] = []
        if var download = downloads[id], download.state == .completed {
            if discardingVersion {
                download.forgetVersion()
                download.completedStamps = []
            }
            download.state = .failed(reason: reason)
            download.lastError = reason
            note(id, .failed, reason)
            if let hook = endHook(&download, .fail) { actions.append(hook) }
            downloads[id] = download
        }
        return actions + startEligible()
    }

    // MARK: Hooks

    /// The hook of `event` for a download that just ended so: marked pending (committed with the
    /// ending, so a crash before it ran finds it) and returned as an action; nil without such a
    /// hook in this run, when an earlier run's status is forgotten too.
    private mutating func endHook(_ download: inout Download, _ event: HookEvent) -> Action? {
        forgetHook(&download)
        guard configuration.hooks.contains(event) else { return nil }
        download.hook = HookRun(event: event, status: .pending)
        return runHook(download.id, event)
    }

    private mutating func runHook(_ id: DownloadID, _ event: HookEvent) -> Action {
        let token = nextToken
        nextToken += 1
        hookTokens[id] = token
        return .runHook(id, event, token: token)
    }

    private mutating func forgetHook(_ download: inout Download) {
        download.hook = nil
        hookTokens[download.id] = nil
    }

    /// Runs again the hooks a stopped process left pending (after `restore`): its row was committed
    /// with its ending, and the hook had not reported back. With `ids`, only those downloads'.
    ///
    /// A pending hook whose event has no hook in this run cannot run: it says so rather than stay
    /// pending for ever.
    public mutating func runPendingHooks(only ids: Set<DownloadID>? = nil) -> [Action] {
        var actions: [Action] = []
        for id in order where ids?.contains(id) ?? true {
            guard var download = downloads[id], let hook = download.hook, hook.isPending, hookTokens[id] == nil else { continue }
            let ended = hook.event == .complete ? download.state == .completed && !download.completedPaths.isEmpty : isFailed(download.state)
            guard ended else { continue }
            if configuration.hooks.contains(hook.event) {
                actions.append(runHook(id, hook.event))
            } else {
                download.hook?.status = .couldNotStart(reason: "no \(hook.event.option) hook is set in this run")
                downloads[id] = download
            }
        }
        return actions
    }

    /// A hook run ended with `status`. Ignored when the download was retried, fetched again,
    /// cancelled or removed since (another `token`, or none).
    public mutating func hookEnded(_ id: DownloadID, token: UInt64, status: HookStatus) {
        guard hookTokens[id] == token, var download = downloads[id], download.hook?.isPending == true else { return }
        hookTokens[id] = nil
        download.hook?.status = status
        downloads[id] = download
    }

    /// Marks a restored download whose completed file still has to be placed (see `QueueRecovery`).
    public mutating func needsPlacing(_ id: DownloadID) {
        guard downloads[id]?.state == .completed else { return }
        placing.insert(id)
    }

    // MARK: Helpers

    private func existing(_ id: DownloadID) throws(TransitionError) -> Download {
        guard let download = downloads[id] else { throw .unknownDownload(id) }
        return download
    }

    /// The state an intent refused for `download` names: `being placed` for a completed download
    /// whose file is not in place yet (a list shows it `downloading` until then; a tester's cancel
    /// was refused as `completed` of a row listed `downloading`).
    private func refusedState(_ download: Download) -> String {
        download.state == .completed && placing.contains(download.id) ? "being placed" : download.state.word
    }

    private func isFailed(_ state: DownloadState) -> Bool {
        if case .failed = state { return true }
        return false
    }

    /// A new version of the resource starts at byte zero: take its validators and forget the old ones.
    private func adoptNewVersion(_ download: inout Download, info: ResponseInfo) {
        download.forgetVersion()
        download.etag = info.validators.etag
        download.lastModified = info.validators.lastModified
        download.recentlyChanged = info.validators.recentlyChanged
        download.contentType = info.contentType
        download.serverFileName = info.serverFileName
        download.totalBytes = info.total
    }

    /// Ends `id`'s running attempt (and its sync, if it syncs); returns it.
    @discardableResult
    private mutating func stopRunning(_ id: DownloadID) -> AttemptID? {
        syncing.remove(id)
        return running.removeValue(forKey: id)
    }

    /// Starts downloads while slots are free: those a person resumed first, then queued downloads
    /// and due retries in queue order.
    private mutating func startEligible() -> [Action] {
        guard configuration.startsTransfers, activeCount < configuration.maxActive,
              downloads.hasQueued || !dueRetries.isEmpty else { return [] }
        var actions: [Action] = []
        while let id = firstInLine.first, activeCount < configuration.maxActive {
            firstInLine.removeFirst()
            guard downloads.isQueued(id), !held.contains(id), let start = start(id) else { continue }
            startedByPerson.insert(id)
            actions.append(start)
        }
        var index = walkMarks == currentWalkMarks ? min(walkFrom, order.count) : 0
        // The first download the walk leaves queued or due a retry: the next walk starts there.
        var firstLeft: Int?
        while index < order.count, activeCount < configuration.maxActive {
            let id = order[index]
            defer {
                if firstLeft == nil, downloads.isQueued(id) || dueRetries.contains(id) { firstLeft = index }
                index += 1
            }
            // The indexes first: a long queue of paused rows is walked without copying a download.
            guard downloads.isQueued(id) || dueRetries.contains(id), !held.contains(id) else { continue }
            // Its file system was under the floor at the last look: it would only stop again.
            if let filesystem = filesystems[id], lowFilesystems[filesystem] != nil { continue }
            guard let start = start(id) else { continue }
            startedByPerson.remove(id)
            actions.append(start)
        }
        walkFrom = firstLeft ?? index
        walkMarks = currentWalkMarks
        return actions
    }

    private var currentWalkMarks: WalkMarks {
        WalkMarks(order: orderChanges, queued: downloads.queuedInsertions, retries: retriesDue)
    }

    /// Starts an attempt of `id`, queued or a due retry; nil when it is neither.
    private mutating func start(_ id: DownloadID) -> Action? {
        guard var download = downloads[id] else { return nil }
        switch download.state {
        case .queued: break
        case .waiting where dueRetries.contains(id): break
        default:
            dueRetries.remove(id)
            return nil
        }
        dueRetries.remove(id)
        retryTokens[id] = nil
        let attempt = AttemptID(rawValue: nextAttempt)
        nextAttempt += 1
        download.state = .downloading
        download.connecting = true
        download.finishing = false
        downloads[id] = download
        receivedFrom[id] = download.bytesOnDisk
        // After a pause of every transfer, the speed is measured anew.
        if running.isEmpty { throughputMeter.reset() }
        running[id] = attempt
        latestAttempt[id] = attempt
        speedMeters[id] = SpeedMeter()
        return .startTransfer(TransferOrder(
            id: id, attempt: attempt, url: download.url, partPath: download.partPath, options: download.options, limit: download.limit,
            hasBytes: download.hasBytesOfItsOwn
        ))
    }

    /// Whether the download still owns its part file: everything but completed and cancelled (a failed
    /// download keeps its bytes for a retry).
    fileprivate static func ownsPartFile(_ download: Download) -> Bool {
        download.state != .completed && download.state != .cancelled
    }

    /// Downloads that own a part file may not share a destination file or a part file, nor take
    /// one's part file for the other's file: `-o D/a.bin.part` beside a paused download of `a.bin`
    /// was placed over its bytes, which then resumed from the other file (a tester: exit 0, a wrong
    /// file).
    private func checkDestinationFree(_ destination: Destination, ignoring: DownloadID?) throws(TransitionError) {
        guard case .file(let path) = destination else { return }
        // The claims of every owner (an index: a long queue is not scanned), less those of `ignoring`.
        let part = Self.partPath(ofFile: path)
        var claims = downloads.fileClaims(path) + downloads.partClaims(part) + downloads.partClaims(path) + downloads.fileClaims(part)
        if let ignoring, let own = downloads[ignoring], Self.ownsPartFile(own) {
            let files = TrackedDownloads.files(of: own)
            claims -= files.filter { $0 == path || $0 == part }.count + (own.partPath == part ? 1 : 0) + (own.partPath == path ? 1 : 0)
        }
        if claims > 0 { throw .destinationInUse(path) }
    }

    /// `<file>.part`, or `<dir>/<name from the URL>.part` with `.1`, `.2` … when another download
    /// already owns that part file.
    private func partPath(for url: URL, destination: Destination) -> String {
        switch destination {
        case .file(let path):
            return Self.partPath(ofFile: path)
        case .directory(let directory):
            return freePartPath(in: directory, for: FileNaming.name(for: url))
        }
    }

    /// The first of `NAME.part`, `NAME.1.part`, `NAME.2.part` … in `directory` (empty: a bare name)
    /// that no download of the queue owns or will write as its file, and that is not in `avoiding`.
    private func freePartPath(in directory: String, for name: String, avoiding: Set<String> = []) -> String {
        var attempt = 0
        while true {
            let partName = FileNaming.partName(for: FileNaming.candidate(name, attempt: attempt))
            let candidate = directory.isEmpty ? partName : Self.join(directory, partName)
            if downloads.partClaims(candidate) == 0, downloads.fileClaims(candidate) == 0, !avoiding.contains(candidate) { return candidate }
            attempt += 1
        }
    }

    /// A part file name for `download` that no download of the queue claims and that is not one
    /// found taken (`foreignParts`), beside the file it will become (`freePartPath`).
    private func partPathAvoidingForeign(_ download: Download) -> String {
        switch download.destination {
        case .file(let path):
            guard let slash = path.lastIndex(of: "/") else { return freePartPath(in: "", for: path, avoiding: foreignParts) }
            let directory = slash == path.startIndex ? "/" : String(path[..<slash])
            return freePartPath(in: directory, for: String(path[path.index(after: slash)...]), avoiding: foreignParts)
        case .directory(let directory):
            return freePartPath(in: directory, for: FileNaming.name(for: download.url), avoiding: foreignParts)
        }
    }

    /// The files completed downloads other than `id` were placed as (for a placement after a crash,
    /// which may find its own earlier files: never one of theirs).
    public func filesOfOtherDownloads(besides id: DownloadID) -> Set<String> {
        let own = downloads[id].map { $0.state == .completed ? Set($0.completedPaths) : [] } ?? []
        return downloads.placedFiles.subtracting(own)
    }

    /// Whether a completed download other than `id` was placed as `path`: a file of this one's that a
    /// person removed, the name then taken by another's (a tester: fetched again, it replaced the
    /// other's file, and two rows named one file).
    public func isAnotherDownloadsFile(_ path: String, besides id: DownloadID) -> Bool {
        let own = downloads[id].map { $0.state == .completed && $0.completedPaths.contains(path) } ?? false
        return downloads.placedClaims(path) - (own ? 1 : 0) > 0
    }

    /// Of the names a placement of `name` in `directory` tries (`first`, then `name`, `name.1` …, the
    /// first `count`), those another download of the queue holds: its part file, the exact file it
    /// will write, or the name its part file is for (`NAME` of `NAME.part`; `ownPart`, the placing
    /// download's own, is not another's). A placement never takes one (a tester: a file placed as
    /// `x.iso.part` beside a paused download of `x.iso` whose part file a person had deleted was
    /// resumed from, a wrong file; one placed as `report.pdf` was replaced by a queued `-o
    /// report.pdf`; a file the server named `same.bin` took the name a running download of
    /// `…/same.bin` had been shown writing, `same.bin.part`, and that one became `same.bin.1`).
    ///
    /// A placement first looks at the few names it will most likely take (`claimWindow`): 65
    /// names cost a thousand small files 4 % of haul's CPU samples, one placement in all of them.
    /// `FilePlacement.place` asks for more when it gets past them, up to every name it may try
    /// (`FileNaming.placementAttempts`: a tester's placement past 64 names took one a queued `-o`
    /// held, and two rows named one file).
    public func claimedNames(in directory: String, name: String, first: Int, ownPart: String? = nil, count: Int) -> Set<String> {
        var claimed: Set<String> = []
        for attempt in [first] + Array(0..<count) {
            let candidate = FileNaming.candidate(name, attempt: attempt)
            let path = Self.join(directory, candidate)
            let part = Self.join(directory, FileNaming.partName(for: candidate))
            let partHeld = downloads.partClaims(part) - (part == ownPart ? 1 : 0)
            if downloads.partClaims(path) > 0 || downloads.fileClaims(path) > 0 || partHeld > 0 { claimed.insert(path) }
        }
        return claimed
    }

    /// How many names (`name`, `name.1` … besides `first`) a placement looks at first.
    public static let claimWindow = 4

    /// How many it looks at after `looked` were not enough.
    public static func widerClaimWindow(after looked: Int) -> Int {
        min(FileNaming.placementAttempts, looked * 16)
    }

    /// The part file beside the file at `path`: `path.part`, or a shorter name when that one would
    /// not fit NAME_MAX (see `FileNaming.partName`).
    public static func partPath(ofFile path: String, suffix: String = ".part") -> String {
        guard let slash = path.lastIndex(of: "/") else { return FileNaming.partName(for: path, suffix: suffix) }
        return String(path[...slash]) + FileNaming.partName(for: String(path[path.index(after: slash)...]), suffix: suffix)
    }

    static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}

/// The machine's downloads by id, remembering which ids were written since the journal last asked,
/// so a commit looks at the few downloads that changed, not the whole queue.
///
/// It also counts, for the downloads that own a part file, the part files and destination files
/// they claim, so that a new download's names are checked without scanning the queue.
struct TrackedDownloads: Sendable {
    private var storage: [DownloadID: Download] = [:]
    private var touched: Set<DownloadID> = []
    private var parts: [String: Int] = [:]
    private var files: [String: Int] = [:]
    /// The files completed downloads were placed as.
    private var placed: [String: Int] = [:]
    /// The downloads whose state is `queued`.
    private var queued: Set<DownloadID> = []
    /// How many times a download became queued.
    private(set) var queuedInsertions = 0

    subscript(id: DownloadID) -> Download? {
        get { storage[id] }
        set {
            let old = storage[id]
            storage[id] = newValue
            touched.insert(id)
            if newValue?.state == .queued {
                if queued.insert(id).inserted { queuedInsertions &+= 1 }
            } else if old?.state == .queued {
                queued.remove(id)
            }
            if Self.claimsDiffer(old, newValue) {
                if let old { count(old, by: -1) }
                if let newValue { count(newValue, by: 1) }
            }
        }
    }

    func isQueued(_ id: DownloadID) -> Bool { queued.contains(id) }

    var hasQueued: Bool { !queued.isEmpty }

    /// Owners of the part file at `path`.
    func partClaims(_ path: String) -> Int { parts[path] ?? 0 }

    /// Owners that will write a file at `path` (as a destination or a further requester's copy).
    func fileClaims(_ path: String) -> Int { files[path] ?? 0 }

    /// Completed downloads placed as `path`.
    func placedClaims(_ path: String) -> Int { placed[path] ?? 0 }

    /// The files completed downloads were placed as.
    var placedFiles: Set<String> { Set(placed.compactMap { $0.value > 0 ? $0.key : nil }) }

    static func files(of download: Download) -> [String] {
        ([download.destination] + download.extraDestinations).compactMap { destination in
            if case .file(let path) = destination { return path }
            return nil
        }
    }

    private static func claimsDiffer(_ old: Download?, _ new: Download?) -> Bool {
        guard let old, let new else { return old != nil || new != nil }
        return SessionStateMachine.ownsPartFile(old) != SessionStateMachine.ownsPartFile(new) || old.partPath != new.partPath
            || old.destination != new.destination || old.extraDestinations != new.extraDestinations
            || (old.state == .completed) != (new.state == .completed) || old.completedPaths != new.completedPaths
    }

    private mutating func count(_ download: Download, by delta: Int) {
        if download.state == .completed {
            for path in download.completedPaths {
                placed[path, default: 0] += delta
                if placed[path] == 0 { placed[path] = nil }
            }
        }
        guard SessionStateMachine.ownsPartFile(download) else { return }
        parts[download.partPath, default: 0] += delta
        if parts[download.partPath] == 0 { parts[download.partPath] = nil }
        for path in Self.files(of: download) {
            files[path, default: 0] += delta
            if files[path] == 0 { files[path] = nil }
        }
    }

    var values: Dictionary<DownloadID, Download>.Values { storage.values }
    var keys: Dictionary<DownloadID, Download>.Keys { storage.keys }
    var isEmpty: Bool { storage.isEmpty }

    mutating func takeTouched() -> Set<DownloadID> {
        defer { touched = [] }
        return touched
    }
}
