import AsyncHTTPClient
import DownloadCore
import Foundation
import Logging
import NIOCore

/// The queue of downloads of one process: intents in, snapshots out.
///
/// The actor feeds every intent and transfer event to the pure `SessionStateMachine` and carries out
/// the actions it returns. Transfers run outside the actor; they report bytes through atomics that a
/// ticker samples about ten times a second, so the actor is never on the per-chunk path.
public actor DownloadSession {
    public typealias Action = SessionStateMachine.Action
    public typealias TransitionError = SessionStateMachine.TransitionError

    public struct Configuration: Sendable {
        public var maxActive: Int = 3
        public var maxTries: Int = 20
        public var backoff: Backoff = .standard
        public var connectTimeout: Duration = .seconds(10)
        /// No byte for this long counts as a stall (a retryable error).
        public var stallTimeout: Duration = .seconds(30)
        /// How often bytes are sampled and snapshots published while data flows.
        public var progressInterval: Duration = .milliseconds(100)
        public var userAgent: String = "haul/0.1"
        /// Bytes per second for every transfer together; nil for no limit. `setLimit(_:)` changes
        /// it while transfers run.
        public var limitBytesPerSecond: Int64?
        /// Follow a redirect from https to http (`--allow-downgrade`); refused by default.
        public var allowDowngrade: Bool = false
        /// A PEM file of CA certificates that replace the system's trust roots (like curl's --cacert).
        public var caCertificatePath: String?
        /// Proxies by scheme, and the hosts that bypass them.
        public var proxies = ProxySettings()
        /// fsync each file before it is reported completed.
        public var syncOnCompletion: Bool = true
        /// How often the bytes of each running download are fsync'd and checkpointed in the journal.
        /// Without `syncOnCompletion` the checkpoint is not fsync'd: it is stored as unsynced, which
        /// is trusted until a reboot.
        public var checkpointInterval: Duration = .seconds(1)
        /// How often the parts of a segmented download are recorded as written, without an fsync:
        /// what a `kill -9` in this boot resumes from (its parts' bytes are in the page cache).
        public var writtenPartsInterval: Duration = .milliseconds(100)
        /// The free space that must stay on each file system downloads write to (`--min-free`).
        public var minFree: SpaceFloor = .automatic
        /// Discard the partial data of paused downloads, least recently used first, when a file
        /// system stays under its floor (`--purge-when-low`). Their rows stay.
        public var purgeWhenLow: Bool = false
        /// The download directory: its free space and floor go in every snapshot (the header).
        public var spaceDirectory: String?
        /// How often the file systems downloads write to are read.
        public var spaceCheckInterval: Duration = .seconds(2)
        /// The programs run when a download completes or fails, and their time limit.
        public var hooks = HookSettings()
        public var logger: Logger = Logger(label: "haul.engine", factory: { _ in SwiftLogNoOpLogHandler() })
        /// The queue's id (kept in its database): with a download's id, it marks the part files the
        /// download writes, and no download resumes from, replaces, cuts or removes one another
        /// marked (`PartFileOwner`). Nil: no marks (the part files of two queues are told apart by
        /// their locks only while written).
        public var queueID: String?

        public init() {}
    }

    /// The newest snapshot after every change; a slow reader only ever sees the latest picture.
    ///
    /// One reader at a time; `snapshot()` answers anybody.
    public nonisolated let snapshots: AsyncStream<SessionSnapshot>
    private let continuation: AsyncStream<SessionSnapshot>.Continuation
    private let configuration: Configuration
    private let clients: HTTPClients
    /// The limit on every transfer together (none until one is set).
    private let limiter: RateLimiter
    private let hosts = HostConnections()
    private var machine: SessionStateMachine
    private var transfers: [DownloadID: RunningTransfer] = [:]
    /// The last piece of work queued on each part file: a new piece waits for it, so two attempts (or
    /// an attempt and a delete) never touch one file at once.
    private var fileTails: [String: (task: Task<Void, Never>, number: UInt64)] = [:]
    private var fileWorkCount: UInt64 = 0
    private var retryTimers: [DownloadID: Task<Void, Never>] = [:]
    private var ticker: Task<Void, Never>?
    private let clockOrigin = ContinuousClock.now
    private var lastCheckpoint = ContinuousClock.now
    private var lastWrittenParts = ContinuousClock.now
    private var isShutDown = false
    private var shutdownTask: Task<Void, Never>?
    /// Reads the file systems every `spaceCheckInterval` once anything was done.
    private var spaceWatch: Task<Void, Never>?
    /// A space check is running; `spaceCheckAgain` asks it to look once more when done.
    private var spaceChecking = false
    private var spaceCheckAgain = false
    /// What each running attempt said it will still write, and where: its rest when it checked,
    /// and the download's bytes then.
    private var spaceClaims: [DownloadID: SpaceClaim] = [:]
    /// The checksum each finished transfer's file was checked against, until its file is placed: a
    /// checksum adopted after that check (while the file waited for room where a copy goes) is
    /// checked before the placement (a tester's wrong one was said verified, exit 0).
    private var digestChecked: [DownloadID: Checksum] = [:]
    /// The least free space above its floor on a file system where a download ran, at the last check.
    private var lastHeadroom: Int64?
    /// When the last space check began, and the check a completion asked for within
    /// `spaceCheckGap` of it: a thousand small files finishing cost ten checks a second, not a
    /// thousand (each reads every queued download's file system).
    private var lastSpaceCheck: ContinuousClock.Instant?
    private var spaceCheckLater: Task<Void, Never>?
    private static let spaceCheckGap = Duration.milliseconds(100)

    private struct SpaceClaim {
        var attempt: AttemptID
        var filesystem: UInt64
        var rest: Int64
        var bytesThen: Int64
    }
    /// The hooks running, by their run's token.
    private var hookRuns: [UInt64: Task<Void, Never>] = [:]
    /// Set once a shutdown stopped waiting for hooks: one that ends later changes nothing (its row
    /// stays pending, and the next start runs it again).
    private var hooksAbandoned = false

    // Journal state. A change is committed before the snapshot that shows it is published: what
    // is synced, committed, dirty and shown lives in the pure `ledger`; the session carries out
    // its actions.
    private let journal: (any QueueJournal)?
    private let journalQueue = DispatchQueue(label: "haul.journal")
    /// This boot's id (`BootID`).
    private let boot: String?
    /// What every checkpoint stores of its boot (`BootStamp`): `boot`, with the mounts part files
    /// were opened on (`noteMount`).
    private var bootID: String?
    /// The mounts part files were opened on, by device.
    private var mounts: [UInt64: Set<UInt64>] = [:]
    /// The directories whose mount is in `mounts`.
    private var mountedDirectories: Set<String> = []
    private var ledger: DurabilityLedger
    /// Callers waiting for their publish to be committed (and shown), by its token.
    private var waiters: [(token: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    /// Every publish up to this token is committed (and shown, when it asked).
    private var settledToken: UInt64 = 0
    /// Completed downloads whose rows no commit has saved yet (the queue's disk is full): placed
    /// after the next commit that succeeds, never before.
    private var placementsAwaitingCommit: Set<DownloadID> = []
    /// Completed downloads restored unplaced: their placement may find files the previous process
    /// made for their other requesters (`FilePlacement.earlierPlacement`).
    private var recoveredUnplaced: Set<DownloadID> = []
    /// Asks for a commit every few seconds while placements wait for one: nothing else may come
    /// to ask (a runner with nothing else running), and room may come back any time.
    private var placementRetry: Task<Void, Never>?
    /// The publish that will show what a throttled snapshot did not.
    private var trailingShow: Task<Void, Never>?
    /// The commit that will write the rows that waited for their download's next change (`writeLater`).
    private var rowsLater: Task<Void, Never>?
    /// The snapshot published last.
    private var published = SessionSnapshot(downloads: [], maxActive: 0)
    /// The history of this run, by download, when the journal keeps none (or there is none).
    private var historyInMemory: [DownloadID: [HistoryEntry]] = [:]
    /// The latest of those entries, over every download, oldest first.
    private var recentInMemory: [HistoryEntry] = []
    /// What each checkpoint sync in flight must still find to count: the transfer's truncation
    /// count and parts board, as read before the sync began.
    private var syncGuards: [DownloadID: SyncGuard] = [:]

    private struct SyncGuard {
        var progress: TransferProgress
        var truncations: Int
        var board: SharedBoard?
    }

    private struct RunningTransfer {
        var attempt: AttemptID
        var task: Task<Void, Never>
        var progress: TransferProgress
        /// The download's own limit, shared by the attempt's connections: changed live by `setLimit(_:for:)`.
        var limiter: RateLimiter
    }

    /// A session; with a `journal`, every change is committed there before it is published.
    public init(configuration: Configuration = .init(), journal: (any QueueJournal)? = nil) {
        self.configuration = configuration
        self.journal = journal
        boot = BootID.current()
        bootID = boot
        ledger = DurabilityLedger(configuration: .init(syncs: configuration.syncOnCompletion))
        machine = SessionStateMachine(configuration: .init(
            maxActive: max(1, configuration.maxActive), maxTries: max(1, configuration.maxTries), backoff: configuration.backoff,
            hooks: configuration.hooks.events, limit: configuration.limitBytesPerSecond
        ))
        limiter = RateLimiter(bytesPerSecond: machine.configuration.limit)
        clients = HTTPClients(.init(
            connectTimeout: Self.timeAmount(configuration.connectTimeout),
            // Checked by the command line before a session exists; an unreadable file trusts nothing.
            caCertificates: configuration.caCertificatePath.map { path in (try? TrustRoots.load(path)) ?? [] },
            proxies: configuration.proxies
        ))
        (snapshots, continuation) = AsyncStream.makeStream(of: SessionSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        published = machine.snapshot
    }

    // MARK: Intents

    /// Queues `url` for `destination`, or attaches to the download already fetching it.
    @discardableResult
    public func schedule(_ url: URL, to destination: Destination, options: RequestOptions = RequestOptions()) async throws(TransitionError) -> DownloadID {
        let ids = try await schedule([Request(url: url, destination: destination, options: options)])
        guard let id = ids.first else { throw .invalidArgument("nothing was scheduled") }
        return id
    }

    /// One download to schedule with `schedule(_:)`.
    public typealias Request = QueueRequest

    /// Queues many downloads at once, committed together (one transaction for a thousand URLs).
    /// Stops at the first refused request: those before it stay queued, and its error is thrown.
    public func schedule(_ requests: [Request]) async throws(TransitionError) -> [DownloadID] {
        try await scheduleReporting(requests).ids
    }

    /// `schedule(_:)`, also saying, one line each, what became of completed files asked for again
    /// that changed on disk since (fetched again, or kept because they still match their checksum).
    public func scheduleReporting(_ requests: [Request]) async throws(TransitionError) -> (ids: [DownloadID], notes: [(DownloadID, String)]) {
        try checkOpen()
        var ids: [DownloadID] = []
        var notes: [(DownloadID, String)] = []
        var actions: [Action] = []
        var refusal: TransitionError?
        for request in requests {
            // A file this requester already has is not fetched again; one that changed is.
            switch await completedFile(request.url, for: request.destination, asked: request.options.checksum) {
            case .none:
                break
            case .have(let id):
                ids.append(id)
                // Completed by a haul that stopped before its hook reported: run it now.
                actions += machine.runPendingHooks(only: [id])
                continue
            case .kept(let id, let note):
                ids.append(id)
                notes.append((id, note))
                continue
            case .changed(let id, let note, let index, let seen, let checksum):
                do {
                    actions += try machine.fetchAgain(id, seen: seen.map { (index, $0) }, checksum: checksum)
                    ledger.emptied(id)
                    configuration.logger.notice("fetch again", metadata: ["id": "\(id)", "why": "\(note)"])
                    ids.append(id)
                    notes.append((id, note))
                    continue
                } catch {
                    // Changed state while the file was looked at: scheduled as any other request.
                }
            }
            do {
                let (id, more) = try machine.schedule(url: request.url, destination: request.destination, options: request.options, limit: request.limit)
                configuration.logger.info("schedule", metadata: ["id": "\(id)", "url": "\(request.url.redactingPassword)"])
                ids.append(id)
                actions += more
            } catch {
                refusal = error
                break
            }
        }
        await perform(actions)
        if let refusal { throw refusal }
        return (ids, notes)
    }

    /// What a completed download of a URL asked for again is worth to its requester.
    private enum CompletedFile {
        /// None, or its file is gone: the URL is scheduled as usual.
        case none
        /// The file is as it was placed.
        case have(DownloadID)
        /// The file changed but still matches the download's checksum: kept, and said so.
        case kept(DownloadID, note: String)
        /// The file changed (size or modification time): fetched again, and said so. `seen` is the
        /// changed file's stamp (requester `index`), which it must still have to be replaced.
        case changed(DownloadID, note: String, index: Int, seen: FileStamp?, checksum: Checksum? = nil)
    }

    /// The completed download of `url` for this requester, and whether its file is still the one
    /// placed: same size and modification time as when it was completed, or, with a checksum, the
    /// same digest.
    ///
    /// A file truncated or replaced after completion must never be reported `completed` again;
    /// nor one that misses a checksum `asked` now that it was never checked against (a tester: the
    /// old version was reported completed, exit 0, for the new version's digest).
    private func completedFile(_ url: URL, for destination: Destination, asked: Checksum?) async -> CompletedFile {
        guard let done = machine.completedDownload(of: url, for: destination) else { return .none }
        let requesters = [done.destination] + done.extraDestinations
        guard let index = requesters.firstIndex(of: destination), index < done.completedPaths.count else { return .none }
        let path = done.completedPaths[index]
        let shown = TerminalText.sanitize(path)
        guard let now = FileSync.stamp(path) else {
            // Gone (a person removed it): fetched again by this row, not by a second one (a tester:
            // two completed rows then named one file).
            return .changed(done.id, note: "\(shown) is gone: fetching it again", index: index, seen: nil, checksum: asked)
        }
        // Completed before stamps were kept: its length was the file's size.
        let placed = index < done.completedStamps.count ? done.completedStamps[index] : FileStamp(size: done.bytesOnDisk, modified: nil)
        if case .directory = destination, machine.isAnotherDownloadsFile(path, besides: done.id) {
            // Not seen as this download's: the new copy goes beside it, never over it.
            return .changed(done.id, note: "\(shown) is another download's file now: fetching it again beside it", index: index, seen: nil, checksum: asked)
        }
        if let asked, asked != done.options.checksum {
            // Reads the whole file: only for a checksum it was never checked against.
            guard await FileDigest.hex(of: path, asked.algorithm) == asked.hex else {
                return .changed(
                    done.id, note: "\(shown) does not match the \(asked.algorithm.rawValue) asked for: fetching it again", index: index, seen: now,
                    checksum: asked
                )
            }
            if placed.change(to: now) != nil { machine.restamp(done.id, index: index, now) }
            return .have(done.id)
        }
        guard let change = placed.change(to: now) else {
            // The checksum it was checked against, asked again: read, as `--checksum` says. A file
            // edited in place with its time put back, or another of the same size and time moved
            // onto its name, keeps its stamp (a tester's was said completed, exit 0, for the
            // digest its bytes missed).
            if let asked, await FileDigest.hex(of: path, asked.algorithm) != asked.hex {
                return .changed(
                    done.id, note: "\(shown) no longer matches its \(asked.algorithm.rawValue) (its size and modification time unchanged): fetching it again",
                    index: index, seen: now, checksum: asked
                )
            }
            return .have(done.id)
        }
        if let checksum = done.options.checksum {
            // Reads the whole file: only for a file whose stamp says it changed.
            if await FileDigest.hex(of: path, checksum.algorithm) == checksum.hex {
                machine.restamp(done.id, index: index, now)
                return .kept(done.id, note: "\(shown) changed on disk (\(change)) but still matches its \(checksum.algorithm.rawValue): kept")
            }
            return .changed(done.id, note: "\(shown) changed on disk and no longer matches its \(checksum.algorithm.rawValue): fetching it again", index: index, seen: now)
        }
        return .changed(done.id, note: "\(shown) changed on disk (\(change)): fetching it again", index: index, seen: now)
    }

    /// Stops the download and keeps its bytes; returns once no more bytes will be written.
    public func pause(_ id: DownloadID) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.pause(id))
    }

    /// A person's resume (or retry now): the download takes a slot at once. When none is free,
    /// the lowest running download the queue started by itself goes back to queued with its bytes
    /// (stopped and checkpointed like a pause); that download is returned. When every running
    /// download was started by a person, this one takes the next free slot, before the rest of
    /// the queue.
    @discardableResult
    public func resume(_ id: DownloadID) async throws(TransitionError) -> DownloadID? {
        try checkOpen()
        let (actions, displaced) = try machine.resumeNow(id)
        if let displaced {
            configuration.logger.notice("back to queued", metadata: ["id": "\(displaced)", "why": "room for \(id), resumed by a person"])
        }
        await perform(actions)
        return displaced
    }

    /// Stops the download and deletes its part file; returns once the file is gone.
    public func cancel(_ id: DownloadID) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.cancel(id))
    }

    /// Forgets a completed, failed or cancelled download; files stay.
    public func remove(_ id: DownloadID) async throws(TransitionError) {
        try checkOpen()
        try machine.remove(id)
        forgetRemoved(id)
        await settled(publish())
    }

    /// What the session holds of a download the machine forgot, besides the machine.
    private func forgetRemoved(_ id: DownloadID) {
        retryTimers.removeValue(forKey: id)?.cancel()
        ledger.forgot(id)
        historyInMemory[id] = nil
        recentInMemory.removeAll { $0.download == id }
        digestChecked[id] = nil
    }

    /// Pauses, resumes, cancels or removes every one of `ids`, all or nothing: each is tried on a
    /// copy of the queue first, and the copy is the queue the change is made to (nothing runs in
    /// between: no suspension before the change), so a refused id (the first refusal is thrown)
    /// changes nothing. A tester's `haul pause` of 3,000 ids, sent one by one, paused 2,498 and then
    /// failed on one another shell cancelled meanwhile, saying nothing changed.
    /// - Returns: for a resume, the downloads that went back to queued to make room.
    public func edit(_ edit: QueueEdit, _ ids: [DownloadID]) async throws(TransitionError) -> [MadeRoom] {
        try checkOpen()
        var trial = machine
        for id in ids { _ = try Self.apply(edit, id, to: &trial) }
        var actions: [Action] = []
        var displaced: [MadeRoom] = []
        for id in ids {
            let (made, room) = try Self.apply(edit, id, to: &machine)
            actions += made
            if let room {
                displaced.append(MadeRoom(id: room, resumed: id))
                configuration.logger.notice("back to queued", metadata: ["id": "\(room)", "why": "room for \(id), resumed by a person"])
            }
            if edit == .remove { forgetRemoved(id) }
        }
        if edit == .remove {
            await settled(publish())
        } else {
            await perform(actions)
        }
        return displaced
    }

    private static func apply(_ edit: QueueEdit, _ id: DownloadID, to machine: inout SessionStateMachine) throws(TransitionError) -> ([Action], DownloadID?) {
        switch edit {
        case .pause: return (try machine.pause(id), nil)
        case .resume: return try machine.resumeNow(id)
        case .cancel: return (try machine.cancel(id), nil)
        case .remove:
            try machine.remove(id)
            return ([], nil)
        }
    }

    public func pauseAll() async {
        guard !isShutDown else { return }
        await perform(machine.pauseAll())
    }

    public func resumeAll() async {
        guard !isShutDown else { return }
        await perform(machine.resumeAll())
    }

    /// Discards the partial data of every paused download and keeps the downloads (paused at 0 B).
    ///
    /// - Returns: the bytes freed.
    @discardableResult
    public func purgePaused(only ids: Set<DownloadID>? = nil) async -> Int64 {
        guard !isShutDown else { return 0 }
        // A part file that cannot be removed (its file system read-only, its directory not
        // writable) keeps its row as it is: a tester's row said `purged: 800 KiB … discarded`, and
        // the answer `freed`, of a file still there.
        let candidates = machine.purgeable(only: ids)
        let stuck = await FileSync.run { Set(candidates.filter { !PartFile.removable($0.1) }.map(\.0)) }
        for id in stuck {
            configuration.logger.notice("not purged", metadata: ["id": "\(id)", "why": "its part file cannot be removed (read-only file system or directory)"])
        }
        let (actions, purged) = machine.purgePaused(only: ids, sparing: stuck)
        for (id, bytes) in purged {
            configuration.logger.notice("purged", metadata: ["id": "\(id)", "bytes": "\(bytes)", "why": "asked"])
        }
        await perform(actions)
        // The space is back: downloads waiting for it may start.
        await checkSpace()
        return purged.reduce(0) { $0 + $1.1 }
    }

    public func move(_ id: DownloadID, to index: Int) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.move(id, to: index))
    }

    public func setMaxActive(_ count: Int) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.setMaxActive(count))
    }

    /// Sets the limit on every transfer together (nil or 0: none), at once for running transfers,
    /// and stores it with the queue for the next run.
    public func setLimit(_ bytesPerSecond: Int64?) async throws(TransitionError) {
        try checkOpen()
        try machine.setLimit(bytesPerSecond)
        limiter.setRate(machine.configuration.limit)
        ledger.limitDidChange()
        configuration.logger.notice("limit", metadata: ["bytes_per_second": "\(machine.configuration.limit.map(String.init) ?? "none")"])
        await settled(publish())
    }

    /// Sets one download's own limit (nil or 0: none), at once for its running transfer (every
    /// connection of it together), stored with it.
    public func setLimit(_ bytesPerSecond: Int64?, for id: DownloadID) async throws(TransitionError) {
        try checkOpen()
        try machine.setLimit(bytesPerSecond, for: id)
        transfers[id]?.limiter.setRate(machine.download(id)?.limit)
        await settled(publish())
    }

    /// Forgets every completed download in one commit (their files stay); returns how many.
    public func clearCompleted() async throws(TransitionError) -> Int {
        try checkOpen()
        let cleared = machine.clearCompleted()
        for id in cleared {
            ledger.forgot(id)
            historyInMemory[id] = nil
        }
        let gone = Set(cleared)
        recentInMemory.removeAll { gone.contains($0.download) }
        if !cleared.isEmpty { configuration.logger.info("cleared completed", metadata: ["count": "\(cleared.count)"]) }
        await settled(publish())
        return cleared.count
    }

    /// One download's history, oldest first (its last `HistoryEntry.keptPerDownload`); with nil,
    /// the queue's latest `HistoryEntry.recentLimit` entries, oldest first. What happened but is
    /// not committed yet is included.
    public func history(_ id: DownloadID?) async throws(TransitionError) -> [HistoryEntry] {
        if let id, machine.download(id) == nil { throw .unknownDownload(id) }
        takeHistory()
        guard let journal, journal.keepsHistory else {
            return Self.latest(id.map { historyInMemory[$0] ?? [] } ?? recentInMemory, id: id)
        }
        // In line with the commits: the read goes on the journal's serial queue behind every commit
        // already handed to it, and the outbox holds what no commit took yet. (A commit between
        // two tries of a busy database holds its entries for a moment: they show again after.)
        let pending = ledger.pendingHistory(id)
        let stored = await withCheckedContinuation { (continuation: CheckedContinuation<[HistoryEntry], Never>) in
            journalQueue.async { continuation.resume(returning: (try? journal.history(id)) ?? []) }
        }
        return Self.latest(stored + pending, id: id)
    }

    /// The last entries a history answer holds: one download's kept ones, or the queue's recent ones.
    private static func latest(_ entries: [HistoryEntry], id: DownloadID?) -> [HistoryEntry] {
        Array(entries.suffix(id == nil ? HistoryEntry.recentLimit : HistoryEntry.keptPerDownload))
    }

    /// Stamps what the machine noted since the last call with the time now, for the next commit.
    private func takeHistory() {
        let entries = machine.takeHistory(at: Date())
        guard !entries.isEmpty else { return }
        if let journal, journal.keepsHistory {
            ledger.note(entries)
        } else {
            for entry in entries {
                historyInMemory[entry.download, default: []].append(entry)
                if let count = historyInMemory[entry.download]?.count, count > HistoryEntry.keptPerDownload {
                    historyInMemory[entry.download]?.removeFirst(count - HistoryEntry.keptPerDownload)
                }
            }
            recentInMemory += entries
            if recentInMemory.count > HistoryEntry.recentLimit { recentInMemory.removeFirst(recentInMemory.count - HistoryEntry.recentLimit) }
        }
    }

    /// The latest published picture (committed, when there is a journal), for callers that do not
    /// follow `snapshots`.
    public func snapshot() -> SessionSnapshot {
        published
    }

    /// Stops everything this process runs (bytes kept, each marked to resume on the next start),
    /// waits for the transfers to stop, commits the final checkpoints and releases the HTTP client.
    ///
    /// Must be called before the session is dropped; a second call waits for the first.
    public func shutdown() async {
        if let shutdownTask {
            await shutdownTask.value
            return
        }
        // Closed first: no intent, retry timer or freed slot can start anything from here on.
        isShutDown = true
        let task = Task { await self.closeDown() }
        shutdownTask = task
        await task.value
    }

    private func closeDown() async {
        spaceWatch?.cancel()
        spaceWatch = nil
        spaceCheckLater?.cancel()
        spaceCheckLater = nil
        await perform(machine.stopAll())
        await waitForHooks(upTo: configuration.hooks.shutdownWait)
        for timer in retryTimers.values { timer.cancel() }
        retryTimers.removeAll()
        ticker?.cancel()
        ticker = nil
        trailingShow?.cancel()
        trailingShow = nil
        rowsLater?.cancel()
        rowsLater = nil
        placementRetry?.cancel()
        placementRetry = nil
        for transfer in transfers.values { transfer.task.cancel() }
        for tail in fileTails.values { await tail.task.value }
        ledger.flushing = true
        await settled(publish())
        await clients.shutdown()
        continuation.finish()
    }

    // MARK: Restoring a queue

    /// Loads the queue a journal stored, reconciles each download with its part file, and starts
    /// what may run.
    ///
    /// The bytes on disk are the truth (what `write` accepted before a `kill -9` survives in the
    /// page cache); after a reboot only the fsync'd checkpoint is (see `QueueRecovery`). With
    /// `startPending` false (`haul get`), downloads that were queued or running stay queued for
    /// the process that runs the whole queue, unless scheduled again here.
    ///
    /// - Returns: one line per download that needed attention, for the log and the user.
    @discardableResult
    public func restore(_ stored: StoredQueue, startPending: Bool) async -> [String] {
        guard machine.all.isEmpty, !isShutDown else { return [] }
        let boot = boot
        let queue = configuration.queueID
        let plans = await FileSync.run { () -> [(QueueRecovery.Plan, synced: Bool)] in
            // The files completed rows name: never another download's placed file.
            let held = Set(stored.downloads.flatMap { $0.state == .completed ? $0.completedPaths : [] })
            let found = stored.downloads.map { download in
                var partLength = FileSync.length(download.partPath)
                // A part file that is not this download's is not taken on, cut or placed: another
                // download marked it (a finished file's name taken since its own was placed before
                // a crash: then looked for as placed), or it is unmarked and the row has no bytes
                // of its own (a person's `NAME.part` beside a download that never ran: before, the
                // restore took on its length and the next attempt restarted over it; after a
                // reboot, it was cut to nothing here).
                let owner = PartFileOwner.mark(queue: queue, download: download.id)
                if let length = partLength, length > 0, download.state != .cancelled,
                   PartFileOwner.holder(of: PartFileOwner.mark(path: download.partPath), owner: owner, hasBytes: download.hasBytesOfItsOwn) != .own {
                    partLength = nil
                }
                var destinationLength: Int64?
                if case .file(let path) = download.destination { destinationLength = FileSync.length(path) }
                // Placed, and the process died before the commit that named the files.
                var candidates: [[StampedFile]] = []
                if partLength == nil, QueueRecovery.placementStamp(download) != nil {
                    candidates = (0...download.extraDestinations.count).map { QueueRecovery.unheld(Self.placementCandidates(download, requester: $0), held: held) }
                }
                let checkpointBoot = stored.checkpointBoots[download.id]
                // Unsynced bytes are the page cache's: trusted in this boot on the mount that held
                // them, not once the file system was mounted again.
                let mount = checkpointBoot?.contains(";") == true ? MountID.of(DiskWatch.directory(of: download.partPath)) : nil
                let plan = QueueRecovery.plan(
                    download, partLength: partLength, checkpointBoot: checkpointBoot,
                    checkpointSynced: !stored.unsyncedCheckpoints.contains(download.id),
                    currentBoot: BootStamp.current(checkpoint: checkpointBoot, boot: boot, mount: mount),
                    destinationFileLength: destinationLength, placedCandidates: candidates.first ?? [],
                    extraCandidates: Array(candidates.dropFirst())
                )
                if let length = plan.truncateTo { _ = FileSync.cut(download.partPath, to: length, owner: owner) }
                // What the checkpoint will claim from now on must be on stable storage.
                let synced = partLength != nil && FileSync.syncNow(download.partPath)
                return (plan, synced)
            }
            // A file two downloads found is neither's: both start over.
            let contested = QueueRecovery.contested(found.map(\.0))
            return found.map { plan, synced in
                contested.contains(plan.download.id) ? (QueueRecovery.contestedPlan(plan.download), synced) : (plan, synced)
            }
        }
        // A shutdown (a signal) may have come while the part files were looked at.
        guard !isShutDown else { return [] }
        var notes: [String] = []
        // The plans are in the stored order, one per download.
        for (row, (plan, synced)) in zip(stored.downloads, plans) {
            let download = plan.download
            ledger.restored(download, stored: row, synced: synced, storedUnsynced: stored.unsyncedCheckpoints.contains(download.id))
            if let note = plan.note {
                notes.append("[\(download.id)] \(note)")
                configuration.logger.notice("recovery", metadata: ["id": "\(download.id)", "note": "\(note)"])
            }
        }
        ledger.restoredOrder(stored.downloads.map(\.id), positions: stored.positions)
        machine.restore(plans.map(\.0.download), nextID: stored.nextID, holdPending: !startPending)
        for (row, (plan, _)) in zip(stored.downloads, plans) where plan.download.restartCount > row.restartCount {
            machine.noteRestartAtStart(row.id, reason: plan.download.restartReason ?? "its bytes could not be trusted")
        }
        var actions: [Action] = []
        for (plan, _) in plans where plan.needsFinalize || plan.placed != nil {
            machine.needsPlacing(plan.download.id)
            if let placed = plan.placed {
                // Moved already: only recorded.
                let files = [placed] + plan.placedExtras
                actions += machine.finalized(plan.download.id, paths: files.map(\.path), stamps: files.map(\.stamp))
            } else {
                // The previous process may have made files for other requesters before it died.
                recoveredUnplaced.insert(plan.download.id)
                actions += await finalize(plan.download.id)
            }
        }
        // Hooks a stopped haul left pending (committed, never reported): they run again. `haul
        // get` runs only those of the downloads it asks for (see `scheduleReporting`).
        if startPending { actions += machine.runPendingHooks() }
        await perform(actions + machine.startQueued())
        return notes
    }
    // MARK: Carrying out actions

    /// Carries out the machine's actions in two phases.
    ///
    /// First everything that needs no waiting happens at once, while the actions still match the
    /// machine (no other intent can run in between): tasks are cancelled, deletes and starts are
    /// queued on their part files, timers are set, files are placed. Only then does it wait for the
    /// stopped transfers and the deletes, so that `pause` and `cancel` return when the bytes are still
    /// or gone. An intent arriving during that wait sees a machine and a set of transfers that agree.
    ///
    /// `soon`: the commit may wait a few milliseconds for other changes (a transfer's event, not a
    /// person's intent).
    private func perform(_ actions: [Action], soon: Bool = false) async {
        watchSpace()
        var waits: [Task<Void, Never>] = []
        var finalizing: [DownloadID] = []
        var hooks: [(DownloadID, HookEvent, UInt64)] = []
        for action in actions {
            switch action {
            case .startTransfer(let order):
                // A shut-down session starts nothing; the order is dropped with the session.
                guard !isShutDown, machine.runningAttempt(order.id) == order.attempt else { continue }
                start(order)
            case .stopTransfer(let id, let attempt):
                guard let running = transfers[id], running.attempt == attempt else { continue }
                running.task.cancel()
                waits.append(running.task)
            case .deletePartFile(let id, let path, let onlyMarked):
                // On the file-work threads: removing a large file frees its blocks, which can take
                // most of a second, never on the cooperative pool's few threads.
                let logger = configuration.logger
                let owner = PartFileOwner.mark(queue: configuration.queueID, download: id)
                waits.append(enqueueFileWork(on: path) {
                    // Left where another program writes it, or another download marked it (a file of
                    // the same name).
                    if await !FileSync.run({ FileSync.removePart(path, owner: owner, onlyMarked: onlyMarked) }) {
                        logger.notice("part file left", metadata: ["path": "\(path)", "why": "another program is writing it, another download marked it, or it cannot be removed"])
                    }
                })
            case .finalize(let id):
                // After the commit below: the row says `completed` before the part file moves, so
                // a crash in between finds the bytes and places them, never fetching them again.
                finalizing.append(id)
            case .scheduleRetry(let id, let token, let date):
                guard !isShutDown else { continue }
                retryTimers.removeValue(forKey: id)?.cancel()
                retryTimers[id] = Task { [weak self] in
                    let delay = max(0, date.timeIntervalSinceNow)
                    try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
                    guard !Task.isCancelled else { return }
                    await self?.retryTimerFired(id, token: token)
                }
            case .runHook(let id, let event, let token):
                // After the commit below: a crash before the hook ran finds the row pending.
                hooks.append((id, event, token))
            }
        }
        if !finalizing.isEmpty {
            // Committed, not shown: nobody sees `completed` before the file is in place, and a
            // crash from here on finds a completed row with its bytes and places them.
            await settled(publish(showing: false, soon: soon, awaited: true))
            if ledger.failure != nil {
                // Not committed (the queue's disk is full): the file stays a part file, the row
                // `finishing`, until a commit saves it (`commit`). Placed now, a crash or an exit
                // would leave a queue that knows nothing of it, and the next run fetched it again
                // beside itself (found by use: `NAME.1`).
                placementsAwaitingCommit.formUnion(finalizing)
                retryPlacementsLater()
            } else {
                var freed: [Action] = []
                for id in finalizing { freed += await finalize(id) }
                await perform(freed, soon: soon)
            }
        }
        let published = publish(soon: soon)
        if !hooks.isEmpty {
            // The row with its hook pending is committed first: the hook may run twice (a crash
            // after it ran), never not at all.
            await settled(published)
            for (id, event, token) in hooks { startHook(id, event, token: token) }
        }
        // Each stopped transfer publishes its final byte count itself when it ends: wait for that
        // publish too (the last in line), so that the caller's next snapshot shows the bytes kept.
        for task in waits { await task.value }
        await settled(waits.isEmpty ? published : ledger.newestToken)
    }

    // MARK: Hooks

    /// Starts the `event` hook of download `id` in a task of its own: nothing in the queue waits
    /// for it. Its end is fed back as `hookEnded`.
    private func startHook(_ id: DownloadID, _ event: HookEvent, token: UInt64) {
        guard !hooksAbandoned, let program = configuration.hooks.programs[event], let download = machine.download(id) else { return }
        let invocation = HookRunner.invocation(for: download, event: event, program: program)
        let settings = configuration.hooks
        configuration.logger.info("hook started", metadata: [
            "id": "\(id)", "event": "\(event.option)", "program": "\(program)", "path": "\(invocation.path)",
        ])
        let logger = configuration.logger
        let output: @Sendable (String) -> Void = { line in
            // Through haul's log: capped per run, rotated, control characters stripped.
            logger.info("hook output", metadata: ["id": "\(id)", "event": "\(event.option)", "line": "\(line)"])
        }
        hookRuns[token] = Task { [weak self] in
            let status = await HookRunner.run(invocation, settings: settings, output: output)
            await self?.hookEnded(id, event: event, token: token, status: status)
        }
    }

    private func hookEnded(_ id: DownloadID, event: HookEvent, token: UInt64, status: HookStatus) async {
        hookRuns[token] = nil
        let run = HookRun(event: event, status: status)
        let metadata: Logger.Metadata = ["id": "\(id)", "event": "\(event.option)", "status": "\(run.summary)"]
        if run.succeeded {
            configuration.logger.notice("hook ran", metadata: metadata)
        } else {
            configuration.logger.warning("hook ran", metadata: metadata)
        }
        // A shutdown that stopped waiting has committed its last rows: this one stays pending.
        guard !hooksAbandoned else { return }
        machine.hookEnded(id, token: token, status: status)
        await settled(publish())
    }

    /// Waits for the running hooks, at most `limit`; the ones still running then are left running
    /// on their own, their rows pending.
    private func waitForHooks(upTo limit: Duration) async {
        let running = Array(hookRuns.values)
        if !running.isEmpty {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for task in running { await task.value }
                }
                group.addTask { try? await Task.sleep(for: limit) }
                await group.next()
                group.cancelAll()
            }
        }
        hooksAbandoned = true
        if !hookRuns.isEmpty {
            configuration.logger.notice("hooks left running", metadata: ["count": "\(hookRuns.count)", "note": "their rows stay pending and run again at the next start"])
        }
    }

    /// Adds the mount of `path`'s directory to what checkpoints store of their boot, before the
    /// first byte is written there: a recovery in this boot then trusts unsynced bytes only on
    /// that mount, never on the file system mounted again (`BootStamp`). One look per directory.
    private func noteMount(of path: String) {
        let directory = DiskWatch.directory(of: path)
        guard let boot, !mountedDirectories.contains(directory) else { return }
        mountedDirectories.insert(directory)
        guard let mount = MountID.of(directory), mounts[mount.device]?.contains(mount.id) != true else { return }
        mounts[mount.device, default: []].insert(mount.id)
        bootID = BootStamp.string(boot: boot, mounts: mounts)
    }

    private func start(_ order: SessionStateMachine.TransferOrder) {
        noteMount(of: order.partPath)
        let progress = TransferProgress(writesBack: configuration.syncOnCompletion)
        let id = order.id
        let attempt = order.attempt
        let own = RateLimiter(bytesPerSecond: order.limit)
        let transfer = Transfer(
            order: order, clients: clients, allowDowngrade: configuration.allowDowngrade, progress: progress, hosts: hosts,
            throttle: Throttle(limiter, own),
            userAgent: configuration.userAgent,
            headTimeout: Self.timeAmount(configuration.connectTimeout + configuration.stallTimeout),
            stallTimeout: Self.timeAmount(configuration.stallTimeout),
            syncOnCompletion: configuration.syncOnCompletion,
            owner: PartFileOwner.mark(queue: configuration.queueID, download: id),
            floor: configuration.minFree,
            claimSpace: { [weak self] needs, reading in await self?.claimSpace(id, attempt: attempt, needs: needs, reading: reading) ?? 0 },
            prepare: { [weak self] preparation in await self?.prepareAttempt(id, attempt: attempt, preparation) },
            began: { [weak self] start in await self?.transferBegan(id, attempt: attempt, start) },
            responded: { [weak self] info in await self?.transferResponded(id, attempt: attempt, info: info) },
            split: { [weak self] parts in await self?.transferSplit(id, attempt: attempt, parts: parts) ?? false },
            discardVersion: { [weak self] in await self?.transferDiscards(id) },
            written: { [weak self] bytes in await self?.transferWritten(id, attempt: attempt, bytes: bytes) }
        )
        configuration.logger.debug("start", metadata: ["id": "\(id)", "attempt": "\(attempt)"])
        let path = order.partPath
        let syncedOnCompletion = configuration.syncOnCompletion
        let task = enqueueFileWork(on: path) { [weak self] in
            var result = await transfer.run()
            // The bytes an attempt leaves become a checkpoint only once they are on stable storage.
            // (Another queue's part file holds none of this download's: nothing to sync.)
            let synced = switch result.outcome {
            case .completed: syncedOnCompletion
            case .partFileTaken: true
            default: await FileSync.sync(path)
            }
            // A checksum asked for while the attempt ran (adopted by its download) is checked here,
            // off the actor: the attempt checked only the one it started with.
            var checked = order.options.checksum
            while let wanted = await self?.transferEnded(id, attempt: attempt, result: result, synced: synced, checked: checked) {
                if let mismatch = await FileDigest.mismatch(path, wanted) { result.outcome = .fatal(reason: mismatch) }
                checked = wanted
            }
        }
        transfers[id] = RunningTransfer(attempt: attempt, task: task, progress: progress, limiter: own)
        startTicker()
    }

    /// Runs `work` after everything queued earlier on `path` has finished.
    ///
    /// The last piece of each file is forgotten when it ends: a finished task kept for each of a
    /// thousand files held its frames (7 MiB, measured with heaptrack).
    private func enqueueFileWork(on path: String, _ work: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let previous = fileTails[path]?.task
        fileWorkCount &+= 1
        let number = fileWorkCount
        let task = Task {
            await previous?.value
            await work()
            self.fileWorkEnded(on: path, number)
        }
        fileTails[path] = (task, number)
        return task
    }

    private func fileWorkEnded(on path: String, _ number: UInt64) {
        if fileTails[path]?.number == number { fileTails[path] = nil }
    }

    /// An attempt starts (`Transfer.prepare`): what describes its part file now; the room it
    /// claims (as `Transfer.spaceShortage` claims it, for the rest of a known size); and, when it
    /// may go on and fetches front to back, its first request noted (as `transferBegan`).
    private func prepareAttempt(_ id: DownloadID, attempt: AttemptID, _ preparation: Transfer.Preparation) -> Transfer.Prepared? {
        guard let basis = machine.resumeBasis(id) else { return nil }
        let have = basis.segments.isEmpty ? preparation.startLength : Segments.bytesOnDisk(basis.segments)
        let needs = basis.knownTotal.map { $0 - have } ?? 0
        let sizeKnown = basis.knownTotal != nil
        var shortage: Transfer.Outcome?
        if Transfer.claims(needs: needs, sizeKnown: sizeKnown), var reading = preparation.reading {
            reading.promised = claimSpace(id, attempt: attempt, needs: sizeKnown ? needs : nil, reading: reading)
            shortage = Transfer.shortage(reading, needs: needs, sizeKnown: sizeKnown)
        }
        var firstRequest: RequestPlan?
        if shortage == nil, basis.segments.isEmpty {
            let plan = ResumeRules.plan(partLength: preparation.startLength, knownTotal: basis.knownTotal, validators: basis.validators)
            transferBegan(id, attempt: attempt, .request(plan))
            firstRequest = plan
        }
        return Transfer.Prepared(basis: basis, shortage: shortage, firstRequest: firstRequest)
    }

    /// Notes the request an attempt sends; committed with the next change (its response, or its end).
    private func transferBegan(_ id: DownloadID, attempt: AttemptID, _ start: SessionStateMachine.AttemptStart) {
        machine.transferBegan(id, attempt: attempt, start)
        // Stamped now: the commit that takes it may come a while later.
        takeHistory()
    }

    /// The attempt splits the file into `parts`; they are committed before it writes past the first
    /// part's bytes. The first part claims no more than is synced.
    private func transferSplit(_ id: DownloadID, attempt: AttemptID, parts: [Segment]) async -> Bool {
        guard machine.runningAttempt(id) == attempt, !isShutDown else { return false }
        machine.recordSegments(id, ledger.split(id, parts))
        await settled(publish())
        return true
    }

    /// The attempt throws its parts away (the resource changed): committed before the file is emptied.
    private func transferDiscards(_ id: DownloadID) async {
        machine.discardVersion(id)
        ledger.emptied(id)
        await settled(publish())
    }

    /// The attempt wrote every byte and syncs its file next: its slot goes to the next in line at
    /// once. The sync does not wait for a commit (the row says `finishing` with the next one).
    private func transferWritten(_ id: DownloadID, attempt: AttemptID, bytes: Int64) async {
        let actions = machine.transferWritten(id, attempt: attempt, bytesOnDisk: bytes)
        let starts = actions.compactMap { action -> SessionStateMachine.TransferOrder? in
            if case .startTransfer(let order) = action { return order }
            return nil
        }
        guard starts.count == actions.count else {
            // Anything besides starts goes the whole way (the commit included).
            await perform(actions, soon: true)
            return
        }
        for order in starts where !isShutDown && machine.runningAttempt(order.id) == order.attempt {
            start(order)
        }
        publish(soon: true)
    }

    /// A body of unknown length or larger than `DurabilityLedger.smallBody` waits here until its
    /// row (with the response's validators) is committed: its bytes reach the disk faster than the
    /// machine counts them, and a crash, or a disk that fills before the next commit can be
    /// written, would leave bytes that no resume may trust without them.
    private func transferResponded(_ id: DownloadID, attempt: AttemptID, info: SessionStateMachine.ResponseInfo) async {
        machine.transferResponded(id, attempt: attempt, info: info)
        switch info.disposition {
        case .fresh, .restarted:
            // The part file was cut to zero: nothing of the new version is synced yet.
            ledger.emptied(id)
        case .resumed(let offset, _):
            ledger.resumed(id, from: offset)
        }
        configuration.logger.info("response", metadata: ["id": "\(id)", "status": "\(info.status)", "disposition": "\(Self.logWords(info.disposition))"])
        let small = info.total.map { $0 <= DurabilityLedger.smallBody } ?? false
        let token = publish(soon: true, awaited: !small)
        if !small { await settled(token) }
    }

    /// How the log spells an outcome: as `String(describing:)` does, which takes the long road of
    /// reflection (`Mirror`) for an enum; the cases nearly every attempt ends with are spelled here.
    private static func logWords(_ outcome: SessionStateMachine.Outcome) -> String {
        switch outcome {
        case .completed: "completed"
        case .stopped: "stopped"
        default: "\(outcome)"
        }
    }

    private static func logWords(_ disposition: Disposition) -> String {
        if case .fresh = disposition { return "fresh" }
        return "\(disposition)"
    }

    /// The end of an attempt, unless it completed and its download adopted a checksum other than
    /// `checked` meanwhile: then nothing is done and that checksum is returned, for the file to be
    /// checked against it first (a tester: a `--checksum` that joined a running download was never
    /// checked, and the row said completed, with the digest, of a file that missed it; exit 0).
    private func transferEnded(_ id: DownloadID, attempt: AttemptID, result: Transfer.Result, synced: Bool, checked: Checksum?) async -> Checksum? {
        let outcome = result.outcome
        if outcome == .completed, machine.runningAttempt(id) == attempt, let wanted = machine.download(id)?.options.checksum, wanted != checked {
            return wanted
        }
        if outcome == .completed, machine.runningAttempt(id) == attempt { digestChecked[id] = checked }
        let bytesOnDisk = result.bytesOnDisk
        if transfers[id]?.attempt == attempt { transfers[id] = nil }
        if spaceClaims[id]?.attempt == attempt { spaceClaims[id] = nil }
        // A cancelled download's file is going; a removed one has none.
        let gone = machine.download(id).map { $0.state == .cancelled } ?? true
        if synced, !gone, let parts = result.segments, outcome != .completed { machine.recordSegments(id, parts) }
        ledger.attemptEnded(id, bytes: bytesOnDisk, synced: synced, cancelled: gone)
        configuration.logger.info("attempt ended", metadata: ["id": "\(id)", "attempt": "\(attempt)", "outcome": "\(Self.logWords(outcome))"])
        // The jitter spreads retries only: a completion draws none (each draw is a `getrandom`
        // system call, one per file of a thousand small ones).
        let jitter = outcome == .completed ? 0 : Double.random(in: 0..<1)
        let actions = machine.transferFinished(
            id, attempt: attempt, outcome: outcome, bytesOnDisk: bytesOnDisk, now: Date(), jitter: jitter,
            partStamp: result.partStamp
        )
        await perform(actions, soon: true)
        if case .noSpace = outcome {
            configuration.logger.notice("waiting for disk space", metadata: ["id": "\(id)", "reason": "\(machine.download(id)?.state.reason ?? "")"])
        }
        // A finished file may have been the last to fit; or its part file's room is free now.
        if outcome == .completed { await checkSpaceSoon() }
        return nil
    }

    // MARK: Disk space

    /// Records what attempt `attempt` of `id` will still write on the file system of `reading`
    /// (`needs`; nil when unknown), and returns what the other running attempts there will still
    /// write: their claims, less what they wrote since, else the rest of their known size.
    private func claimSpace(_ id: DownloadID, attempt: AttemptID, needs: Int64?, reading: DiskReading) -> Int64 {
        let bytesNow = machine.download(id)?.bytesOnDisk ?? 0
        if let needs { spaceClaims[id] = SpaceClaim(attempt: attempt, filesystem: reading.filesystem, rest: needs, bytesThen: bytesNow) }
        var promised: Int64 = 0
        for (other, transfer) in transfers where other != id {
            guard let download = machine.download(other) else { continue }
            if let claim = spaceClaims[other], claim.attempt == transfer.attempt {
                guard claim.filesystem == reading.filesystem else { continue }
                promised += max(0, claim.rest - max(0, download.bytesOnDisk - claim.bytesThen))
            } else if let total = download.totalBytes,
                      DiskWatch.reading(near: download.partPath, floor: .bytes(0))?.filesystem == reading.filesystem {
                promised += max(0, total - download.bytesOnDisk)
            }
        }
        return promised
    }

    /// Starts reading the file systems every `spaceCheckInterval` (once; stopped by shutdown).
    private func watchSpace() {
        guard spaceWatch == nil, !isShutDown else { return }
        spaceWatch = Task { [weak self] in
            while !Task.isCancelled {
                guard let wait = await self?.checkSpaceAndTime() else { return }
                try? await Task.sleep(for: wait)
            }
        }
    }

    /// `checkSpace`, then how long until the next look: `spaceCheckInterval`, or sooner when the
    /// running downloads would cross a floor before then at their speed (half the time they need,
    /// at least 100 ms), so a fast download stops near the floor, not far past it.
    private func checkSpaceAndTime() async -> Duration {
        await checkSpace()
        let most = configuration.spaceCheckInterval
        let running = Set(transfers.keys)
        guard !running.isEmpty else { return most }
        let speed = running.reduce(0.0) { $0 + (machine.download($1)?.bytesPerSecond ?? 0) }
        guard speed > 0, let headroom = lastHeadroom else { return most }
        let seconds = Double(max(0, headroom)) / speed / 2
        return min(most, max(.milliseconds(100), .milliseconds(Int64(seconds * 1000))))
    }

    /// Reads the file systems of the running, queued and waiting downloads (and of the paused ones,
    /// to purge) and of the download directory, and carries out what the machine decides: running
    /// downloads under the floor wait, waiting ones with room start again.
    ///
    /// One check at a time: a check asked for meanwhile runs once the current one is done, with
    /// readings taken after its deletes.
    public func checkSpace() async {
        guard !isShutDown else { return }
        lastSpaceCheck = .now
        guard !spaceChecking else {
            spaceCheckAgain = true
            return
        }
        spaceChecking = true
        defer { spaceChecking = false }
        repeat {
            spaceCheckAgain = false
            let purge = configuration.purgeWhenLow
            let list = machine.spaceWatchList(includePaused: purge)
            let floor = configuration.minFree
            let directory = configuration.spaceDirectory
            let (readings, header) = await FileSync.run {
                (DiskWatch.readings(list, floor: floor), directory.flatMap { DiskWatch.reading(directory: $0, floor: floor) })
            }
            guard !isShutDown else { return }
            // The least room above a floor where a download runs, for when to look again.
            lastHeadroom = readings.filter { machine.runningAttempt($0.key) != nil }.values.map { $0.free - $0.floor }.min()
            let check = machine.spaceChecked(readings, directory: header, purgeWhenLow: purge)
            for (id, bytes) in check.purged {
                let reading = readings[id].map { "\(Format.bytes($0.free)) free, floor \(Format.bytes($0.floor))" } ?? ""
                configuration.logger.notice("purged", metadata: ["id": "\(id)", "bytes": "\(bytes)", "why": "disk space low (\(reading))"])
            }
            for action in check.actions {
                if case .stopTransfer(let id, _) = action {
                    configuration.logger.notice("waiting for disk space", metadata: ["id": "\(id)", "reason": "\(machine.download(id)?.state.reason ?? "")"])
                }
            }
            // Not a person's intent: a long queue may show it with the next throttled snapshot.
            if check.changed { await perform(check.actions, soon: true) }
        } while spaceCheckAgain && !isShutDown
    }

    /// A space check now, or, within `spaceCheckGap` of the last one, once that gap has passed.
    private func checkSpaceSoon() async {
        if let last = lastSpaceCheck, last.duration(to: .now) < Self.spaceCheckGap {
            guard spaceCheckLater == nil, !isShutDown else { return }
            let wait = Self.spaceCheckGap - last.duration(to: .now)
            spaceCheckLater = Task { [weak self] in
                try? await Task.sleep(for: wait)
                await self?.spaceCheckLaterFired()
            }
            return
        }
        await checkSpace()
    }

    private func spaceCheckLaterFired() async {
        spaceCheckLater = nil
        await checkSpace()
    }

    private func retryTimerFired(_ id: DownloadID, token: UInt64) async {
        retryTimers[id] = nil
        guard !isShutDown else { return }
        await perform(machine.retryTimerFired(id, token: token))
    }

    /// Gives every extra requester its own copy of the finished part file (a hard link when
    /// possible), then moves the part file to the first requester's destination.
    ///
    /// The move comes last so that any failure leaves the bytes in the part file: the download
    /// fails with the reason, the copies made so far are removed, and a retry finds everything on
    /// disk (it fetches the last 4 KiB again to compare them, no more).
    /// - Returns: what follows the placement (its hook).
    ///
    /// The file work (a copy of gigabytes where links are impossible) runs on the file-work
    /// threads, never on the actor: intents and snapshots go on meanwhile.
    private func finalize(_ id: DownloadID) async -> [Action] {
        guard var download = machine.download(id) else { return [] }
        // A checksum the file was not checked against (adopted while it waited for room to be
        // placed, or after a restart of haul) is checked first, off the actor; one adopted meanwhile
        // is checked too.
        while let wanted = download.options.checksum, digestChecked[id] != wanted {
            let path = download.partPath
            if let mismatch = await FileDigest.mismatch(path, wanted) {
                digestChecked[id] = nil
                return machine.finalizeFailed(id, reason: mismatch, discardingVersion: false)
            }
            digestChecked[id] = wanted
            guard let now = machine.download(id) else { return [] }
            download = now
        }
        let name = download.fileName
        let first = download.firstAttempt
        let replacing = download.replacing
        let replacingStamps = download.replacingStamps.count == replacing.count ? download.replacingStamps : []
        // A file another completed row names is never replaced in a directory, whatever its stamp
        // (two files can have one: a size and a modification time from the same tick of a coarse
        // clock; a tester's fetch again replaced another row's file so).
        let othersFiles = replacing.map { machine.isAnotherDownloadsFile($0, besides: id) }
        // Files an earlier placement made for other requesters can only be there after a crash
        // (a failed placement removes its own): looked for only then, never among the files other
        // rows name. Looked for always, a second requester was told `completed` of another URL's
        // file of the same size finished in the same tick (a tester, without any crash).
        let earlier: Set<String>? = recoveredUnplaced.contains(id) ? machine.filesOfOtherDownloads(besides: id) : nil
        let destinations = [download.destination] + download.extraDestinations
        let source = download.partPath
        let owner = PartFileOwner.mark(queue: configuration.queueID, download: id)
        // What the transfer wrote and synced, as it ended (or as a previous process committed it).
        let written = download.completedPaths.isEmpty && download.completedStamps.count == 1 ? download.completedStamps[0] : nil
        let sync = configuration.syncOnCompletion
        // A copy onto another file system keeps the floor there, as a download there does (a
        // tester's copy for another requester went under --min-free, and --purge-when-low then
        // purged a paused download's bytes to make up for it). Not for a file fetched again in
        // place of its old one, whose room comes back with it.
        // Only where a copy may be made: another requester, or a destination outside the part
        // file's directory (a file with one requester, beside its part file, costs no look).
        let home = DiskWatch.directory(of: source)
        let elsewhere = destinations.count > 1 || destinations.contains { destination in
            switch destination {
            case .directory(let directory): directory != home
            case .file(let path): DiskWatch.directory(of: path) != home
            }
        }
        if replacing.isEmpty, elsewhere {
            let size = download.totalBytes ?? download.bytesOnDisk
            let floor = configuration.minFree
            if let short = await FileSync.run({ Self.copyWithoutRoom(source, to: destinations, size: size, floor: floor) }) {
                configuration.logger.notice("waiting for disk space", metadata: ["id": "\(id)", "reason": "a copy of \(size) bytes to \(short.path) would go under the floor"])
                return machine.placementLacksRoom(id, at: short.path, shortage: .cannotFit(needs: size), reading: short.reading)
            }
        }
        // The few names a placement most likely takes are looked at first, more when it gets past
        // those (`FilePlacement.Failure.needsMoreClaims`, nothing changed).
        var looked = SessionStateMachine.claimWindow
        var placed: Result<(paths: [String], stamps: [FileStamp]), FilePlacement.Failure>
        while true {
            placed = await place(
                source, to: destinations, name: name, first: first, claimed: claimedNames(destinations, name: name, first: first, ownPart: source, count: looked), looked: looked,
                written: written, replacing: replacing, replacingStamps: replacingStamps, othersFiles: othersFiles, earlier: earlier, owner: owner, sync: sync
            )
            guard case .failure(let error) = placed, error.needsMoreClaims, looked < FileNaming.placementAttempts else { break }
            looked = SessionStateMachine.widerClaimWindow(after: looked)
        }
        switch placed {
        case .success(let placed):
            digestChecked[id] = nil
            recoveredUnplaced.remove(id)
            return machine.finalized(id, paths: placed.paths, stamps: placed.stamps)
        case .failure(let error):
            if let noRoom = error.noRoom {
                let floor = configuration.minFree
                let reading = await FileSync.run { DiskWatch.reading(near: noRoom.path, floor: floor) }
                configuration.logger.notice("waiting for disk space", metadata: ["id": "\(id)", "reason": "\(error.description)"])
                return machine.placementLacksRoom(id, at: noRoom.path, shortage: .writeFailed(noRoom.words), reading: reading)
            }
            if error.unwritable { return machine.placementPaused(id, reason: error.description + " (paused until it is writable)") }
            recoveredUnplaced.remove(id)
            return machine.finalizeFailed(id, reason: error.description, discardingVersion: error.partFileChanged)
        }
    }

    /// Per directory of `destinations`: the names other downloads of the queue hold, of the first
    /// `count` a placement tries.
    private func claimedNames(_ destinations: [Destination], name: String, first: Int, ownPart: String, count: Int) -> [String: Set<String>] {
        Dictionary(
            destinations.compactMap { destination in
                if case .directory(let directory) = destination { (directory, machine.claimedNames(in: directory, name: name, first: first, ownPart: ownPart, count: count)) } else { nil }
            },
            uniquingKeysWith: { first, _ in first }
        )
    }

    /// Places the synced part file `source` at `destinations` (the first moved, the others linked
    /// or copied), off the actor; see `finalize`.
    private nonisolated func place(
        _ source: String, to destinations: [Destination], name: String, first: Int, claimed: [String: Set<String>], looked: Int,
        written: FileStamp?, replacing: [String], replacingStamps: [FileStamp], othersFiles: [Bool], earlier: Set<String>?, owner: String?, sync: Bool
    ) async -> Result<(paths: [String], stamps: [FileStamp]), FilePlacement.Failure> {
        let claims = { @Sendable (destination: Destination) -> Set<String> in
            if case .directory(let directory) = destination { claimed[directory] ?? [] } else { [] }
        }
        return await FileSync.run { () -> Result<(paths: [String], stamps: [FileStamp]), FilePlacement.Failure> in
            let place = { () -> Result<(paths: [String], stamps: [FileStamp]), FilePlacement.Failure> in
                // The name must still lead to the file the transfer wrote: another program that
                // wrote or replaced the part file since would have its bytes placed as this download's.
                if let written, let now = FileSync.stamp(source), let change = written.change(to: now) {
                    return .failure(.partFileChanged(source, change))
                }
                // A download fetched again replaces its files where they are: at an exact path (`-o`)
                // always, as `curl -o` would; in a directory (`-d`) only a file still as haul last saw
                // it (as placed, or as changed when the fetch again was decided). One written again
                // since is a person's: the new version goes beside it (`name.1`).
                let targets = destinations.enumerated().map { index, destination -> Destination in
                    guard replacing.indices.contains(index) else { return destination }
                    if case .directory = destination {
                        guard replacingStamps.indices.contains(index), !othersFiles[index], FileSync.stamp(replacing[index]) == replacingStamps[index] else { return destination }
                    }
                    return .file(replacing[index])
                }
                let primaryTarget = targets[0]
                let extraTargets = targets.dropFirst()
                var extras: [String] = []
                // Only for other requesters: a file with one requester costs no look.
                let sourceStamp = extraTargets.isEmpty || earlier == nil ? nil : FileSync.stamp(source)
                do throws(FilePlacement.Failure) {
                    for extra in extraTargets {
                        // A file an earlier placement of this one made for the requester (a process
                        // that died before its move) is taken, never placed again beside itself.
                        // Never the part file itself, which has its stamp (a tester's requester named
                        // by it was told `completed` of it, and the move took it away).
                        if let sourceStamp, let others = earlier,
                           let found = FilePlacement.earlierPlacement(of: sourceStamp, at: extra, name: name, besides: others.union(extras + [source])) {
                            extras.append(found)
                            continue
                        }
                        extras.append(try FilePlacement.place(source, at: extra, name: name, claimed: claims(extra), looked: looked, move: false))
                    }
                    let primary = try FilePlacement.place(source, at: primaryTarget, name: name, first: first, claimed: claims(primaryTarget), looked: looked, move: true)
                    let paths = [primary] + extras
                    // Taken after the move: what a later request compares the files with.
                    return .success((paths, paths.compactMap(FileSync.stamp)))
                } catch {
                    for path in extras { unlink(path) }
                    return .failure(error)
                }
            }
            // Locked until it is placed: no other process starts writing it meanwhile; never
            // another queue's file (after a crash, one of the same name and size may be there).
            // Once placed, its queue's mark comes off (the file is the person's): not before, or a
            // placement that fails would leave the bytes unmarked, for another queue to take.
            let result: Result<(paths: [String], stamps: [FileStamp]), FilePlacement.Failure>
            switch PartFile.holding(source, owner: owner, { fd in
                let placed = place()
                if owner != nil, case .success = placed { PartFileOwner.clear(fd) }
                return placed
            }) {
            case .done(let placed): result = placed
            // Another process writing it may have changed its bytes: the version is forgotten, so a
            // retry trusts none of them (kept as the file is: a retry that found it complete by its
            // length alone could place another's bytes).
            case .busy: return .failure(.partFileChanged(source, "another program is writing it"))
            case .foreign: return .failure(.partFileChanged(source, "another download marked it as its own"))
            case .unopened: result = place()
            }
            // The names are durable before a commit says where the files are: a power cut after
            // `completed` left the file under its part file's name (a tester, with ext4's shutdown
            // ioctl), and the next run fetched it again beside it.
            if sync, case .success(let placed) = result, let failed = FileSync.syncDirectories(of: placed.paths + [source]) {
                return .failure(.directoryNotSynced(failed.directory, failed.code, placed: placed.paths))
            }
            return result
        }
    }

    /// The first of `destinations` on another file system than `source` (where the file is copied,
    /// not linked or moved) whose room above its floor is less than `size`, and its reading.
    private static func copyWithoutRoom(_ source: String, to destinations: [Destination], size: Int64, floor: SpaceFloor) -> (path: String, reading: DiskReading)? {
        guard let home = DiskWatch.reading(near: source, floor: floor) else { return nil }
        for destination in destinations {
            let path = switch destination {
            case .directory(let directory): directory + "/"
            case .file(let file): file
            }
            guard let reading = DiskWatch.reading(near: path, floor: floor), reading.filesystem != home.filesystem, !reading.fits(size) else { continue }
            return (path, reading)
        }
        return nil
    }

    // MARK: Progress

    private func startTicker() {
        guard ticker == nil, !isShutDown else { return }
        let interval = configuration.progressInterval
        ticker = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let self, await self.tick() else { return }
            }
        }
    }

    /// Samples every running transfer; returns false (and stops the ticker) when none runs.
    private func tick() -> Bool {
        guard !transfers.isEmpty else {
            ticker = nil
            return false
        }
        let elapsed = clockOrigin.duration(to: .now).components
        let time = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        var changed = false
        for (id, transfer) in transfers {
            let bytes = transfer.progress.bytesOnDisk.load(ordering: .relaxed)
            let connections = transfer.progress.connections.load(ordering: .relaxed)
            if machine.transferProgressed(id, attempt: transfer.attempt, bytesOnDisk: bytes, at: time, connections: connections) {
                changed = true
            }
        }
        // Shown with the next change of a row, never a publish of its own: a stalled transfer's
        // falling speed published every tick, and each commit started right after the one
        // before, whose show then waited (`DurabilityLedger.beginCommit`).
        machine.sampleThroughput(at: time)
        if journal != nil, lastCheckpoint.duration(to: .now) >= configuration.checkpointInterval {
            lastCheckpoint = .now
            checkpointRunning()
        } else if journal != nil, lastWrittenParts.duration(to: .now) + configuration.progressInterval / 2 >= configuration.writtenPartsInterval {
            lastWrittenParts = .now
            recordWrittenParts()
        }
        if changed { publish(soon: true) }
        return true
    }

    /// fsyncs the part files of the running downloads that grew, all in one pass, then lets the
    /// journal claim the bytes counted before the pass began, in one commit. The syncs run on
    /// their own threads: the transfers keep writing meanwhile and never wait for them. Without
    /// `syncOnCompletion` (`--no-fsync`) nothing is synced: the bytes written are claimed at once,
    /// marked unsynced.
    private func checkpointRunning() {
        var samples: [DurabilityLedger.Sample] = []
        var guards: [DownloadID: SyncGuard] = [:]
        for (id, transfer) in transfers where !ledger.syncing.contains(id) {
            let progress = transfer.progress
            // Read the truncation count first: a truncation after it makes the bytes void.
            let truncations = progress.truncations.load(ordering: .sequentiallyConsistent)
            // The parts as written so far, read before the sync like the byte count.
            let board = progress.board
            let parts = board?.segments
            let bytes = parts.map(Segments.bytesOnDisk) ?? progress.bytesOnDisk.load(ordering: .sequentiallyConsistent)
            guard let path = machine.download(id)?.partPath else { continue }
            let order = DurabilityLedger.SyncOrder(id: id, attempt: transfer.attempt, path: path, bytes: bytes, parts: parts)
            samples.append(.init(order, truncating: truncations % 2 != 0))
            guards[id] = SyncGuard(progress: progress, truncations: truncations, board: board)
        }
        let (actions, claimed) = ledger.checkpointDue(samples)
        for order in claimed {
            if let parts = order.parts { machine.recordSyncedSegments(order.id, parts) }
        }
        if !claimed.isEmpty { publish(soon: true) }
        for case .sync(let orders) in actions {
            for order in orders { syncGuards[order.id] = guards[order.id] }
            Task { [weak self] in
                let results = await FileSync.syncAll(orders.map(\.path))
                await self?.checkpointsSynced(orders, results)
            }
        }
    }

    /// A checkpoint pass ended: each synced file's bytes count unless its file was cut (or its
    /// parts thrown away) since they were counted, or its attempt ended.
    private func checkpointsSynced(_ orders: [DurabilityLedger.SyncOrder], _ results: [Bool]) {
        var accepted = false
        for (order, synced) in zip(orders, results) {
            let check = syncGuards.removeValue(forKey: order.id)
            let valid = synced && check.map { check in
                check.progress.truncations.load(ordering: .sequentiallyConsistent) == check.truncations && check.progress.board === check.board
            } ?? false
            let current = machine.runningAttempt(order.id) == order.attempt
            if case .accepted(let parts) = ledger.synced(order, valid: valid, current: current) {
                if let parts { machine.recordSyncedSegments(order.id, parts) }
                accepted = true
            }
        }
        if accepted { publish(soon: true) }
    }

    /// Records the parts of each segmented transfer as written, unsynced: a small commit about ten
    /// times a second, where a checkpoint's fsync comes once a second. A part file with holes cannot tell
    /// how far each part got, so without this a `kill -9` would fetch up to a second of every
    /// connection again.
    private func recordWrittenParts() {
        for (id, transfer) in transfers {
            // The board is gone (nil) before a restart empties the file: nothing of the old version
            // is recorded after the store forgot its parts.
            guard let parts = transfer.progress.board?.segments, let download = machine.download(id) else { continue }
            let recorded = download.writtenSegments.isEmpty ? download.segments : download.writtenSegments
            guard Segments.bytesOnDisk(parts) > Segments.bytesOnDisk(recorded) else { continue }
            machine.recordWrittenSegments(id, attempt: transfer.attempt, parts)
            publish(soon: true)
        }
    }

    // MARK: Journal and snapshots

    /// Asks for what changed to be committed, then shown; returns the token that `settled` waits
    /// for. The ledger groups the requests: one commit is in flight at a time and everything asked
    /// for meanwhile shares the next; `soon` (a transfer's event) lets the commit wait a few
    /// milliseconds for others and lets its snapshot be throttled on a long queue, unless nothing
    /// runs or is being placed (`isQuiet`): then nothing else is coming, and it goes at once.
    @discardableResult
    private func publish(showing: Bool = true, soon: Bool = false, awaited: Bool = false) -> UInt64 {
        // Stamped with the time of the change, not of the commit that takes it.
        takeHistory()
        let (token, actions) = ledger.publish(showing: showing, soon: soon, awaited: awaited, quiet: machine.isQuiet)
        carryOut(actions)
        return token
    }

    /// Returns once the publish `token` is committed. Its snapshot is shown then too, unless the
    /// ledger throttled that show (a transfer's event): it comes with a later commit.
    private func settled(_ token: UInt64) async {
        guard token > settledToken else { return }
        await withCheckedContinuation { continuation in waiters.append((token, continuation)) }
    }

    private func carryOut(_ actions: [DurabilityLedger.Action]) {
        for action in actions {
            switch action {
            case .commit(let token, let delay):
                Task {
                    if delay > .zero { try? await Task.sleep(for: delay) }
                    await self.commit(token)
                }
            case .sync:
                // Checkpoint passes are started where they are asked for (`checkpointRunning`).
                break
            case .showLater(let delay):
                guard trailingShow == nil, !isShutDown else { continue }
                trailingShow = Task { [weak self] in
                    try? await Task.sleep(for: delay)
                    await self?.showTrailing()
                }
            case .writeLater(let delay):
                guard rowsLater == nil, !isShutDown else { continue }
                rowsLater = Task { [weak self] in
                    try? await Task.sleep(for: delay)
                    await self?.writeWaitingRows()
                }
            }
        }
    }

    /// Carries out commit `token`: takes the changes (and the snapshot that shows exactly them),
    /// writes them, publishes the snapshot, settles the publishes it covers.
    private func commit(_ token: UInt64) async {
        takeHistory()
        guard let (commit, actions) = ledger.beginCommit(token, machine: &machine, journaled: journal != nil, bootID: bootID, now: .now) else { return }
        carryOut(actions)
        // Taken with the changes: it shows exactly what this commit writes.
        let snapshot = commit.show ? visibleSnapshot() : nil
        var failure: JournalFailure?
        if let journal, !commit.changes.isEmpty {
            failure = await write(commit.changes, to: journal, tries: commit.tries)
            if let failure { configuration.logger.error("journal commit failed", metadata: ["error": "\(failure.description)"]) }
        }
        let next = ledger.commitEnded(commit, failure: failure, now: .now)
        if ledger.failure == nil, !placementsAwaitingCommit.isEmpty, !isShutDown {
            // Saved at last: the completed rows held back are placed now. (Not while shutting
            // down: the rows are saved, and the next start places their files.)
            let held = placementsAwaitingCommit.sorted { $0.rawValue < $1.rawValue }
            placementsAwaitingCommit = []
            placementRetry?.cancel()
            placementRetry = nil
            Task { await self.perform(held.map { .finalize($0) }) }
        }
        if var shown = snapshot {
            shown.unsaved = ledger.failure
            published = shown
            continuation.yield(shown)
        }
        settledToken = max(settledToken, commit.token)
        let due = waiters.filter { $0.token <= commit.token }
        waiters.removeAll { $0.token <= commit.token }
        for waiter in due { waiter.continuation.resume() }
        carryOut(next)
    }

    /// Writes `changes` on the journal's serial queue (a commit may block on the disk). A busy
    /// database may pass: up to `tries` tries, 50 ms apart and doubling (about three seconds),
    /// before the change is shown anyway (the ledger writes its rows again with the next commit).
    private func write(_ changes: QueueChanges, to journal: any QueueJournal, tries: Int) async -> JournalFailure? {
        var delayMilliseconds = 50
        var failure: JournalFailure?
        for _ in 0..<max(1, tries) {
            failure = await withCheckedContinuation { continuation in
                journalQueue.async {
                    do {
                        try journal.commit(changes)
                        continuation.resume(returning: nil)
                    } catch let error as JournalFailure {
                        continuation.resume(returning: error)
                    } catch {
                        // Not a failure in haul's words (the store throws only those): never a
                        // library's words on screen.
                        continuation.resume(returning: JournalFailure("the queue's database refused the write"))
                    }
                }
            }
            guard let failure, failure.transient else { break }
            try? await Task.sleep(for: .milliseconds(delayMilliseconds))
            delayMilliseconds *= 2
        }
        return failure
    }

    /// Starts the commits that retry while placements wait for one (`placementRetry`).
    private func retryPlacementsLater() {
        guard placementRetry == nil, !isShutDown else { return }
        placementRetry = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(2))
                guard !Task.isCancelled, let self, await self.retryPlacements() else { return }
            }
        }
    }

    /// One retry: a commit of what waits (the rows a failed commit left to write); false when
    /// nothing waits any more.
    private func retryPlacements() async -> Bool {
        guard !placementsAwaitingCommit.isEmpty, !isShutDown else {
            placementRetry = nil
            return false
        }
        await settled(publish(showing: false))
        return !placementsAwaitingCommit.isEmpty
    }

    private func showTrailing() {
        trailingShow = nil
        guard !isShutDown else { return }
        let (_, actions) = ledger.trailingShowDue()
        carryOut(actions)
    }

    private func writeWaitingRows() {
        rowsLater = nil
        guard !isShutDown else { return }
        let (_, actions) = ledger.waitingRowsDue()
        carryOut(actions)
    }

    /// The machine's picture, with downloads being placed, and paused or requeued downloads whose
    /// transfer has not stopped yet, shown as they were last published.
    ///
    /// A download being placed is not `completed` to anybody until its file has its name (a script
    /// waiting for `completed` opens it): it shows as it was last published, with every byte it
    /// synced and no speed, since its transfer is over (it holds no slot), marked `finishing` (the
    /// screen's counts of downloading rows stay within how many run at once).
    ///
    /// A pause (or a requeue when fewer may run at once) is decided before the transfer stops
    /// writing: until it has, the byte count is the ticker's last sample, and `paused at X` would
    /// claim a stale figure. The row shows `paused` or `queued` with the bytes the stopped transfer
    /// reports, which are those on disk.
    private func visibleSnapshot() -> SessionSnapshot {
        let snapshot = machine.snapshot
        let placing = machine.placing
        let stopping = transfers.keys.filter { id in
            guard machine.runningAttempt(id) == nil, let state = machine.download(id)?.state else { return false }
            return state == .paused || state == .queued
        }
        guard !placing.isEmpty || !stopping.isEmpty else { return snapshot }
        var shown = snapshot
        for id in stopping {
            if let before = published[id] { shown.replace(before) }
        }
        for id in placing {
            guard var before = published[id] else { continue }
            if before.state == .downloading, let now = snapshot[id] {
                before.bytesOnDisk = now.bytesOnDisk
                before.totalBytes = now.totalBytes
                before.bytesPerSecond = 0
                before.connections = 0
                before.connecting = false
                before.finishing = true
            }
            shown.replace(before)
        }
        return shown
    }

    private func checkOpen() throws(TransitionError) {
        if isShutDown { throw .invalidArgument("the session is shut down") }
    }

    /// Where the placement of `download`'s file for requester `requester` (0: the first, then its
    /// other destinations in order) may have put it, with the stamps found there: the file it was
    /// to replace, then its exact path, or the names a placement tries in its directory.
    private static func placementCandidates(_ download: Download, requester: Int) -> [StampedFile] {
        var found: [StampedFile] = []
        if download.replacing.indices.contains(requester), let stamp = FileSync.stamp(download.replacing[requester]) {
            found.append(StampedFile(path: download.replacing[requester], stamp: stamp))
        }
        let destination = requester == 0 ? download.destination : download.extraDestinations[requester - 1]
        let first = requester == 0 ? download.firstAttempt : 0
        found += FilePlacement.candidates(at: destination, name: download.fileName, first: first).filter { candidate in !found.contains { $0.path == candidate.path } }
        return found
    }

    private static func timeAmount(_ duration: Duration) -> TimeAmount {
        let parts = duration.components
        return .nanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }
}
