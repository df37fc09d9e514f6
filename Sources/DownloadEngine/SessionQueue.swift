import DownloadCore
import Synchronization

/// The session of this process as a `QueueControl`: what the runner's own UI, its control
/// socket's clients and `haul get` drive it through.
///
/// `DownloadSession.snapshots` has one reader; this one reads it and hands every picture to any
/// number of subscribers, each newest-wins: a subscriber that stops reading costs nothing and
/// holds nobody up.
public final class SessionQueue: QueueControl {
    public let session: DownloadSession
    private let hub = SnapshotHub()
    private let onStop: @Sendable () async -> Void
    private let onMaxActive: @Sendable (Int) -> Void
    private let reader: Task<Void, Never>

    /// `onStop` carries out `stop()`: the runner shuts the session down and exits. `onMaxActive`
    /// remembers a new number at once for the next start, whoever set it (a key, the socket).
    public init(session: DownloadSession, onStop: @escaping @Sendable () async -> Void, onMaxActive: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.session = session
        self.onStop = onStop
        self.onMaxActive = onMaxActive
        let hub = hub
        reader = Task {
            hub.publish(await session.snapshot())
            for await snapshot in session.snapshots { hub.publish(snapshot) }
            hub.finish()
        }
    }

    deinit {
        reader.cancel()
    }

    public func snapshot() async throws(QueueControlError) -> SessionSnapshot {
        await session.snapshot()
    }

    public func snapshots() -> AsyncStream<SessionSnapshot> {
        hub.subscribe()
    }

    public func schedule(_ requests: [QueueRequest]) async throws(QueueControlError) -> QueueScheduled {
        let made = try await run { () async throws(DownloadSession.TransitionError) in
            try await self.session.scheduleReporting(requests)
        }
        return QueueScheduled(ids: made.ids, notes: made.notes.map { QueueScheduled.Note(id: $0.0, text: $0.1) })
    }

    public func pause(_ id: DownloadID) async throws(QueueControlError) {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.pause(id) }
    }

    @discardableResult
    public func resume(_ id: DownloadID) async throws(QueueControlError) -> DownloadID? {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.resume(id) }
    }

    public func cancel(_ id: DownloadID) async throws(QueueControlError) {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.cancel(id) }
    }

    public func remove(_ id: DownloadID) async throws(QueueControlError) {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.remove(id) }
    }

    public func edit(_ edit: QueueEdit, _ ids: [DownloadID]) async throws(QueueControlError) -> [MadeRoom] {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.edit(edit, ids) }
    }

    public func move(_ id: DownloadID, to index: Int) async throws(QueueControlError) {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.move(id, to: index) }
    }

    public func pauseAll() async throws(QueueControlError) {
        await session.pauseAll()
    }

    public func resumeAll() async throws(QueueControlError) {
        await session.resumeAll()
    }

    public func purgePaused(only ids: [DownloadID]?) async throws(QueueControlError) {
        await session.purgePaused(only: ids.map(Set.init))
    }

    public func setMaxActive(_ count: Int) async throws(QueueControlError) {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.setMaxActive(count) }
        onMaxActive(count)
    }

    /// Stored by the session with the queue (its journal), for the next run.
    public func setLimit(_ bytesPerSecond: Int64?) async throws(QueueControlError) {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.setLimit(bytesPerSecond) }
    }

    public func setLimit(_ bytesPerSecond: Int64?, for id: DownloadID) async throws(QueueControlError) {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.setLimit(bytesPerSecond, for: id) }
    }

    public func clearCompleted() async throws(QueueControlError) -> Int {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.clearCompleted() }
    }

    public func history(_ id: DownloadID?) async throws(QueueControlError) -> [HistoryEntry] {
        try await run { () async throws(DownloadSession.TransitionError) in try await self.session.history(id) }
    }

    public func stop() async throws(QueueControlError) {
        await onStop()
    }

    /// The session's refusal in haul's words.
    private func run<T>(_ work: () async throws(DownloadSession.TransitionError) -> T) async throws(QueueControlError) -> T {
        do {
            return try await work()
        } catch {
            throw QueueControlError(.refused, error.description)
        }
    }
}

/// Hands each picture of the queue to every subscriber, newest wins for each.
final class SnapshotHub: Sendable {
    private struct State {
        var latest: SessionSnapshot?
        var subscribers: [Int: AsyncStream<SessionSnapshot>.Continuation] = [:]
        var next = 0
        var finished = false
    }

    private let state = Mutex(State())

    /// A stream of pictures, the latest first.
    func subscribe() -> AsyncStream<SessionSnapshot> {
        let (stream, continuation) = AsyncStream.makeStream(of: SessionSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let key = state.withLock { state -> Int? in
            if let latest = state.latest { continuation.yield(latest) }
            guard !state.finished else { return nil }
            defer { state.next += 1 }
            state.subscribers[state.next] = continuation
            return state.next
        }
        guard let key else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: key) }
        }
        return stream
    }

    func publish(_ snapshot: SessionSnapshot) {
        state.withLock { state in
            state.latest = snapshot
            for continuation in state.subscribers.values { continuation.yield(snapshot) }
        }
    }

    func finish() {
        let continuations = state.withLock { state in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
