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
        /// fsync each file before it is reported completed.
        public var syncOnCompletion: Bool = true
        public var logger: Logger = Logger(label: "haul.engine", factory: { _ in SwiftLogNoOpLogHandler() })

        public init() {}
    }

    /// The newest snapshot after every change; a slow reader only ever sees the latest picture.
    ///
    /// One reader at a time; `snapshot()` answers anybody.
    public nonisolated let snapshots: AsyncStream<SessionSnapshot>
    private let continuation: AsyncStream<SessionSnapshot>.Continuation
    private let configuration: Configuration
    private let client: HTTPClient
    private var machine: SessionStateMachine
    private var transfers: [DownloadID: RunningTransfer] = [:]
    /// The last piece of work queued on each part file: a new piece waits for it, so two attempts (or
    /// an attempt and a delete) never touch one file at once.
    private var fileTails: [String: Task<Void, Never>] = [:]
    private var retryTimers: [DownloadID: Task<Void, Never>] = [:]
    private var ticker: Task<Void, Never>?
    private let clockOrigin = ContinuousClock.now
    private var isShutDown = false

    private struct RunningTransfer {
        var attempt: AttemptID
        var task: Task<Void, Never>
        var progress: TransferProgress
    }

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
        machine = SessionStateMachine(configuration: .init(
            maxActive: max(1, configuration.maxActive), maxTries: max(1, configuration.maxTries), backoff: configuration.backoff
        ))
        var httpConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: 10, allowCycles: false),
            timeout: .init(connect: Self.timeAmount(configuration.connectTimeout), read: Self.timeAmount(configuration.stallTimeout)),
            decompression: .disabled
        )
        // HTTP/2 costs about twice the CPU for bulk bodies.
        httpConfiguration.httpVersion = .http1Only
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: httpConfiguration)
        (snapshots, continuation) = AsyncStream.makeStream(of: SessionSnapshot.self, bufferingPolicy: .bufferingNewest(1))
    }

    // MARK: Intents

    /// Queues `url` for `destination`, or attaches to the download already fetching it.
    @discardableResult
    public func schedule(_ url: URL, to destination: Destination) async throws(TransitionError) -> DownloadID {
        try checkOpen()
        let (id, actions) = try machine.schedule(url: url, destination: destination)
        configuration.logger.info("schedule", metadata: ["id": "\(id)", "url": "\(url.redactingPassword)"])
        await perform(actions)
        return id
    }

    /// Stops the download and keeps its bytes; returns once no more bytes will be written.
    public func pause(_ id: DownloadID) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.pause(id))
    }

    public func resume(_ id: DownloadID) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.resume(id))
    }

    /// Stops the download and deletes its part file; returns once the file is gone.
    public func cancel(_ id: DownloadID) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.cancel(id))
    }

    /// Forgets a completed, failed or cancelled download; files stay.
    public func remove(_ id: DownloadID) throws(TransitionError) {
        try checkOpen()
        try machine.remove(id)
        retryTimers.removeValue(forKey: id)?.cancel()
        publish()
    }

    public func pauseAll() async {
        guard !isShutDown else { return }
        await perform(machine.pauseAll())
    }

    public func resumeAll() async {
        guard !isShutDown else { return }
        await perform(machine.resumeAll())
    }

    /// Cancels every paused download and frees its disk space.
    public func purgePaused() async {
        guard !isShutDown else { return }
        await perform(machine.purgePaused())
    }

    public func move(_ id: DownloadID, to index: Int) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.move(id, to: index))
    }

    public func setMaxActive(_ count: Int) async throws(TransitionError) {
        try checkOpen()
        await perform(try machine.setMaxActive(count))
    }

    /// The current picture, for callers that do not follow `snapshots`.
    public func snapshot() -> SessionSnapshot {
        machine.snapshot
    }

    /// Pauses everything (bytes kept), waits for the transfers to stop and releases the HTTP client.
    ///
    /// Must be called before the session is dropped.
    public func shutdown() async {
        guard !isShutDown else { return }
        // Closed first: no intent, retry timer or freed slot can start anything from here on.
        isShutDown = true
        await perform(machine.pauseAll())
        for timer in retryTimers.values { timer.cancel() }
        retryTimers.removeAll()
        ticker?.cancel()
        ticker = nil
        for transfer in transfers.values { transfer.task.cancel() }
        for tail in fileTails.values { await tail.value }
        try? await client.shutdown()
        continuation.finish()
    }

    // MARK: Carrying out actions

    /// Carries out the machine's actions in two phases.
    ///
    /// First everything that needs no waiting happens at once, while the actions still match the
    /// machine (no other intent can run in between): tasks are cancelled, deletes and starts are
    /// queued on their part files, timers are set, files are placed. Only then does it wait for the
    /// stopped transfers and the deletes, so that `pause` and `cancel` return when the bytes are still
    /// or gone. An intent arriving during that wait sees a machine and a set of transfers that agree.
    private func perform(_ actions: [Action]) async {
        var waits: [Task<Void, Never>] = []
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
            case .deletePartFile(_, let path):
                waits.append(enqueueFileWork(on: path) { _ = unlink(path) })
            case .finalize(let id):
                finalize(id)
            case .scheduleRetry(let id, let token, let date):
                guard !isShutDown else { continue }
                retryTimers.removeValue(forKey: id)?.cancel()
                retryTimers[id] = Task { [weak self] in
                    let delay = max(0, date.timeIntervalSinceNow)
                    try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
                    guard !Task.isCancelled else { return }
                    await self?.retryTimerFired(id, token: token)
                }
            }
        }
        publish()
        // Each stopped transfer publishes its final byte count itself when it ends.
        for task in waits { await task.value }
    }

    private func start(_ order: SessionStateMachine.TransferOrder) {
        let progress = TransferProgress()
        let id = order.id
        let attempt = order.attempt
        let transfer = Transfer(
            order: order, client: client, progress: progress, userAgent: configuration.userAgent,
            headTimeout: Self.timeAmount(configuration.connectTimeout + configuration.stallTimeout),
            stallSeconds: configuration.stallTimeout.components.seconds,
            syncOnCompletion: configuration.syncOnCompletion,
            basis: { [weak self] in await self?.resumeBasis(id) },
            responded: { [weak self] info in await self?.transferResponded(id, attempt: attempt, info: info) }
        )
        configuration.logger.debug("start", metadata: ["id": "\(id)", "attempt": "\(attempt)"])
        let task = enqueueFileWork(on: order.partPath) { [weak self] in
            let (outcome, bytes) = await transfer.run()
            await self?.transferEnded(id, attempt: attempt, outcome: outcome, bytesOnDisk: bytes)
        }
        transfers[id] = RunningTransfer(attempt: attempt, task: task, progress: progress)
        startTicker()
    }

    /// Runs `work` after everything queued earlier on `path` has finished.
    private func enqueueFileWork(on path: String, _ work: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let previous = fileTails[path]
        let task = Task {
            await previous?.value
            await work()
        }
        fileTails[path] = task
        return task
    }

    private func resumeBasis(_ id: DownloadID) -> (validators: Validators, knownTotal: Int64?)? {
        machine.resumeBasis(id)
    }

    private func transferResponded(_ id: DownloadID, attempt: AttemptID, info: SessionStateMachine.ResponseInfo) {
        machine.transferResponded(id, attempt: attempt, info: info)
        configuration.logger.info("response", metadata: ["id": "\(id)", "status": "\(info.status)", "disposition": "\(info.disposition)"])
        publish()
    }

    private func transferEnded(_ id: DownloadID, attempt: AttemptID, outcome: SessionStateMachine.Outcome, bytesOnDisk: Int64) async {
        if transfers[id]?.attempt == attempt { transfers[id] = nil }
        configuration.logger.info("attempt ended", metadata: ["id": "\(id)", "attempt": "\(attempt)", "outcome": "\(outcome)"])
        let actions = machine.transferFinished(
            id, attempt: attempt, outcome: outcome, bytesOnDisk: bytesOnDisk, now: Date(), jitter: Double.random(in: 0..<1)
        )
        await perform(actions)
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
    /// disk (a 416 completes it without fetching a byte).
    private func finalize(_ id: DownloadID) {
        guard let download = machine.download(id) else { return }
        let name = download.serverFileName ?? FileNaming.name(for: download.url)
        var extras: [String] = []
        do {
            for extra in download.extraDestinations {
                extras.append(try FilePlacement.place(download.partPath, at: extra, name: name, move: false))
            }
            let primary = try FilePlacement.place(download.partPath, at: download.destination, name: name, move: true)
            machine.finalized(id, paths: [primary] + extras)
        } catch {
            for path in extras { unlink(path) }
            machine.finalizeFailed(id, reason: error.description)
        }
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
            if machine.transferProgressed(id, attempt: transfer.attempt, bytesOnDisk: bytes, at: time) {
                changed = true
            }
        }
        if changed { publish() }
        return true
    }

    private func publish() {
        continuation.yield(machine.snapshot)
    }

    private func checkOpen() throws(TransitionError) {
        if isShutDown { throw .invalidArgument("the session is shut down") }
    }

    private static func timeAmount(_ duration: Duration) -> TimeAmount {
        let parts = duration.components
        return .nanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
    }
}
