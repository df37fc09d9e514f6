#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AsyncHTTPClient
import DownloadCore
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Synchronization

/// The live parts of a segmented attempt, shared by its connections and the session's checkpoints.
final class SharedBoard: Sendable {
    private let board: Mutex<SegmentBoard>

    init(_ segments: [Segment]) {
        board = Mutex(SegmentBoard(segments))
    }

    func withBoard<T>(_ body: (inout SegmentBoard) -> T) -> T {
        board.withLock { body(&$0) }
    }

    /// The parts as written so far (what a checkpoint may claim once the file is synced).
    var segments: [Segment] { withBoard { $0.segments } }
}

/// Where a response body goes.
enum BodySink: Sendable {
    /// From `position` on, never past `total`.
    case prefix(descriptor: Int32, path: String, position: Int64, total: Int64?)
    /// Into one part of a segmented download, from `position` (the part's next byte).
    case part(descriptor: Int32, path: String, board: SharedBoard, part: Int, position: Int64)
}

/// One HTTP request whose body is written to the part file on the event loop as it arrives.
///
/// This is the per-chunk path: a chunk is clamped (to the total, or to its part's end), gathered in
/// a buffer that is written with `pwrite` once it holds at least 128 KiB (or has waited 50 ms), and
/// counted in an atomic. No actor, no task switch, no allocation per chunk.
///
/// The head goes to the transfer (an async caller), which decides what the body is worth. Body
/// bytes that arrive meanwhile wait in memory (reading stops at 1 MiB), so a connection that drops
/// right after its head loses nothing that was read.
final class ResponseStream: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    /// How the body ended, besides by an error.
    enum End: Sendable {
        /// The server sent the whole body.
        case finished
        /// The sink was full (the total, or the part's end) and the rest of the body was dropped.
        case sinkFull
    }

    /// The body was cut off on purpose: the sink is full, or nobody wants it.
    private struct SinkFull: Error {}

    private struct Writer {
        var descriptor: Int32
        var path: String
        /// File offset of the first byte in `pending`.
        var position: Int64
        /// Where the next accepted byte goes (position + pending bytes).
        var accepted: Int64
        var total: Int64?
        var board: SharedBoard?
        var part: Int

        init(_ sink: BodySink) {
            switch sink {
            case .prefix(let descriptor, let path, let position, let total):
                (self.descriptor, self.path, self.position, self.total, board, part) = (descriptor, path, position, total, nil, 0)
            case .part(let descriptor, let path, let board, let part, let position):
                (self.descriptor, self.path, self.position, total, self.board, self.part) = (descriptor, path, position, nil, board, part)
            }
            accepted = position
        }
    }

    /// What a body part leads to.
    private enum Step {
        /// Read on, after `count` bytes were taken (the rate limit may make it wait).
        case took(Int)
        /// Stop reading until this completes (the bytes held before the decision are many).
        case hold(EventLoopFuture<Void>)
        case fail(any Error)
    }

    private struct State {
        var task: HTTPClient.Task<Void>?
        var cancelled = false
        var head: HTTPResponseHead?
        var headError: (any Error)?
        var headWaiter: CheckedContinuation<HTTPResponseHead, any Error>?
        var headTimer: Scheduled<Void>?
        var finalURL: URL?
        /// Body bytes read before the transfer said where they go.
        var early = ByteBuffer()
        /// Completed to read on, once the early bytes have a place (or are dropped).
        var earlyFull: EventLoopPromise<Void>?
        var discarded = false
        var writer: Writer?
        var pending: ByteBuffer
        var failure: PartFile.Failure?
        var sinkFull = false
        /// A flush of bytes left waiting in `pending` is scheduled.
        var idleFlushScheduled = false
        /// The request ended: after `write` returns the descriptor may be closed, nothing is written.
        var ended = false
        /// The error that ended the request, if one did.
        var error: (any Error)?
        /// Waits in `early(_:)` until `earlyWanted` body bytes are held.
        var bodyWaiter: CheckedContinuation<Void, any Error>?
        var earlyWanted = 1
        /// The next look for a stall, from the head on.
        var watchdog: Scheduled<Void>?
    }

    /// Bytes gathered before a `pwrite`: the fewest syscalls for the copy it costs.
    static let writeSize = 128 << 10
    /// How long bytes of a slow stream may wait in the buffer: what a `kill -9` loses of them (a
    /// fast stream fills the buffer long before, so this costs it nothing).
    static let idleFlushDelay = TimeAmount.milliseconds(50)
    /// Body bytes held while the head is decided on.
    static let earlyLimit = 1 << 20

    private let state: NIOLockedValueBox<State>
    private let progress: TransferProgress
    private let throttle: Throttle
    /// No byte for this long, while the stream is ready for more, is a stall.
    private let stallTimeout: TimeAmount
    /// When the stream is ready for the next bytes, in `NIODeadline` uptime nanoseconds: when the
    /// last chunk came plus the wait the limits gave it (`Int64.max` while reading is held).
    ///
    /// The stall is measured from here, not from the last read: a transfer a limit holds back
    /// reads nothing for as long as its share of the rate says, and a limit may change (or a
    /// download get one of its own) while it runs, which a client's fixed read timeout cannot
    /// follow.
    private let readyAt = Atomic<Int64>(0)

    init(progress: TransferProgress, throttle: Throttle, stallTimeout: TimeAmount) {
        self.progress = progress
        self.throttle = throttle
        self.stallTimeout = stallTimeout
        state = NIOLockedValueBox(State(pending: ByteBufferAllocator().buffer(capacity: Self.writeSize * 2)))
    }

    /// Sends `request`; the head must arrive within `headTimeout`.
    func start(_ request: HTTPClient.Request, on client: HTTPClient, headTimeout: TimeAmount) {
        let task = client.execute(request: request, delegate: self, eventLoop: .indifferent)
        let timer = task.eventLoop.scheduleTask(in: headTimeout) { [self] in
            headFailed(HTTPClientError.deadlineExceeded)
            task.cancel()
        }
        let cancelled = state.withLockedValue { state in
            state.task = task
            state.headTimer = timer
            return state.cancelled
        }
        if cancelled { task.cancel() }
        // Some failures end the task without telling the delegate: the head waiter hears of them here.
        task.futureResult.whenComplete { [self] result in
            if case .failure(let error) = result {
                headFailed(error)
                state.withLockedValue { state in
                    if state.error == nil { state.error = error }
                }
            } else {
                headFailed(HTTPClientError.remoteConnectionClosed)
            }
            wakeBodyWaiter()
        }
    }

    /// Stops the request; a body being written keeps what reached the file.
    func cancel() {
        let task = state.withLockedValue { state in
            state.cancelled = true
            state.watchdog?.cancel()
            state.watchdog = nil
            return state.task
        }
        task?.cancel()
    }

    /// The response head (redirects are the transfer's to follow), and the URL it answered, without `user:pass@`.
    func head() async throws -> (HTTPResponseHead, URL?) {
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponseHead, any Error>) in
                let ready: Result<HTTPResponseHead, any Error>? = state.withLockedValue { state in
                    if let head = state.head { return .success(head) }
                    if let error = state.headError { return .failure(error) }
                    state.headWaiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
        return (head, state.withLockedValue { $0.finalURL })
    }

    /// Writes the body into `sink` and returns when it ended: the server finished, or the sink
    /// filled up. Throws the write failure or the HTTP error that stopped it.
    func write(into sink: BodySink) async throws -> End {
        let (task, resume, stop) = state.withLockedValue { state -> (HTTPClient.Task<Void>?, EventLoopPromise<Void>?, Bool) in
            var writer = Writer(sink)
            var stop = false
            if state.early.readableBytes > 0 {
                let early = state.early
                state.early = ByteBuffer()
                if case .failure = Self.accept(early, into: &writer, &state, progress) { stop = true }
            }
            if state.ended || stop {
                // Nothing more will arrive (or nothing more is wanted): write what waits now.
                if let failure = Self.flush(&state.pending, &writer, progress), state.failure == nil { state.failure = failure }
            } else if let task = state.task {
                scheduleIdleFlush(&state, on: task.eventLoop)
            }
            state.writer = writer
            defer { state.earlyFull = nil }
            return (state.task, state.earlyFull, stop)
        }
        guard let task else { throw CancellationError() }
        if stop { task.cancel() }
        if resume != nil { markReady(after: .zero) }
        resume?.succeed()
        do {
            try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                cancel()
            }
        } catch {
            let (failure, full) = state.withLockedValue { ($0.failure, $0.sinkFull) }
            if let failure { throw failure }
            if full { return .sinkFull }
            throw error
        }
        if let failure = state.withLockedValue({ $0.failure }) { throw failure }
        return .finished
    }

    /// The first `count` bytes of the body, once they came (fewer when the body ended sooner), before
    /// anything is written; throws the error that ended the request first. They stay held for
    /// `write(into:)`.
    ///
    /// A resume without validators compares them with the bytes on disk before it appends anything.
    func early(_ count: Int) async throws -> [UInt8] {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLockedValue { state -> Result<Void, any Error>? in
                    state.earlyWanted = max(1, min(count, Self.earlyLimit))
                    if let ready = Self.bodyState(state) { return ready }
                    state.bodyWaiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
        return state.withLockedValue { state in
            state.early.getBytes(at: state.early.readerIndex, length: min(count, state.early.readableBytes)) ?? []
        }
    }

    /// Whether `early(_:)` has its bytes (or the body ended, or failed); nil while it waits.
    private static func bodyState(_ state: State) -> Result<Void, any Error>? {
        if state.early.readableBytes >= state.earlyWanted || state.writer != nil { return .success(()) }
        if let error = state.error { return .failure(error) }
        return state.ended ? .success(()) : nil
    }

    /// Wakes `early(_:)` once there is something to tell it.
    private func wakeBodyWaiter() {
        let (waiter, ready) = state.withLockedValue { state -> (CheckedContinuation<Void, any Error>?, Result<Void, any Error>?) in
            guard let waiter = state.bodyWaiter, let ready = Self.bodyState(state) else { return (nil, nil) }
            state.bodyWaiter = nil
            return (waiter, ready)
        }
        if let waiter, let ready { waiter.resume(with: ready) }
    }

    /// Drops the response and its body.
    func discard() {
        let promise = state.withLockedValue { state -> EventLoopPromise<Void>? in
            state.discarded = true
            state.early = ByteBuffer()
            defer { state.earlyFull = nil }
            return state.earlyFull
        }
        cancel()
        promise?.fail(SinkFull())
    }

    /// Where the next byte would go once everything buffered is written.
    var position: Int64? {
        state.withLockedValue { $0.writer?.accepted }
    }

    // MARK: Delegate (on the event loop)

    func didVisitURL(task: HTTPClient.Task<Void>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
        state.withLockedValue { $0.finalURL = request.url }
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let waiter = state.withLockedValue { state -> CheckedContinuation<HTTPResponseHead, any Error>? in
            // Too late: the head timed out or the request was stopped; nobody reads this body.
            guard state.headError == nil, !state.cancelled else { return nil }
            state.headTimer?.cancel()
            state.headTimer = nil
            state.head = head
            // From the head on, a body that stops coming is a stall.
            markReady(after: .zero)
            let loop = task.eventLoop
            state.watchdog = loop.scheduleTask(in: stallTimeout) { [self] in lookForStall(on: loop) }
            defer { state.headWaiter = nil }
            return state.headWaiter
        }
        waiter?.resume(returning: head)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        var waiter: CheckedContinuation<Void, any Error>?
        defer { waiter?.resume() }
        let step = state.withLockedValue { state -> Step in
            if state.discarded { return .fail(SinkFull()) }
            guard var writer = state.writer else {
                // Undecided: hold the bytes, and stop reading once a good many wait.
                state.early.writeImmutableBuffer(buffer)
                if state.bodyWaiter != nil, state.early.readableBytes >= state.earlyWanted {
                    waiter = state.bodyWaiter
                    state.bodyWaiter = nil
                }
                if state.early.readableBytes >= Self.earlyLimit {
                    let promise = task.eventLoop.makePromise(of: Void.self)
                    state.earlyFull = promise
                    // Not a stall: the transfer has not said where the bytes go yet.
                    readyAt.store(.max, ordering: .relaxed)
                    return .hold(promise.futureResult)
                }
                // Held bytes count against the rate limit like written ones.
                return .took(buffer.readableBytes)
            }
            defer { state.writer = writer }
            switch Self.accept(buffer, into: &writer, &state, progress) {
            case .failure(let error):
                return .fail(error)
            case .success(let count):
                scheduleIdleFlush(&state, on: task.eventLoop)
                return .took(count)
            }
        }
        switch step {
        case .fail(let error):
            return task.eventLoop.makeFailedFuture(error)
        case .hold(let future):
            return future
        case .took(let count):
            let wait = count > 0 ? throttle.reserve(count) : .zero
            markReady(after: wait)
            guard wait > .zero else { return task.eventLoop.makeSucceededVoidFuture() }
            // A limit raised or removed ends the wait early: the stall is measured from then.
            return throttle.pause(for: wait, on: task.eventLoop).map { [self] in markReady(after: .zero) }
        }
    }

    /// The stream reads again `wait` from now.
    private func markReady(after wait: Duration) {
        let parts = wait.components
        let nanoseconds = parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
        readyAt.store(Int64(NIODeadline.now().uptimeNanoseconds) + nanoseconds, ordering: .relaxed)
    }

    /// Fails the request as stalled (the client's read timeout, as the errors classify it) when it
    /// has been ready for bytes for `stallTimeout` without any; else looks again when that could be.
    private func lookForStall(on loop: any EventLoop) {
        let task = state.withLockedValue { state -> HTTPClient.Task<Void>? in
            state.watchdog = nil
            return state.ended || state.cancelled || state.discarded ? nil : state.task
        }
        guard let task else { return }
        let ready = readyAt.load(ordering: .relaxed)
        let now = Int64(NIODeadline.now().uptimeNanoseconds)
        let idle = ready == .max ? 0 : now - ready
        guard idle < stallTimeout.nanoseconds else {
            task.fail(reason: HTTPClientError.readTimeout)
            return
        }
        let next = ready == .max ? stallTimeout : .nanoseconds(stallTimeout.nanoseconds - max(0, idle))
        state.withLockedValue { state in
            guard !state.ended, !state.cancelled else { return }
            state.watchdog = loop.scheduleTask(in: next) { [self] in lookForStall(on: loop) }
        }
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        headFailed(error)
        state.withLockedValue { state in
            if state.error == nil { state.error = error }
        }
        let promise = state.withLockedValue { state -> EventLoopPromise<Void>? in
            defer { state.earlyFull = nil }
            return state.earlyFull
        }
        promise?.fail(error)
        finish()
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        headFailed(HTTPClientError.remoteConnectionClosed)
        finish()
    }

    // MARK: Helpers

    private func headFailed(_ error: any Error) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<HTTPResponseHead, any Error>? in
            guard state.head == nil, state.headError == nil else { return nil }
            state.headTimer?.cancel()
            state.headTimer = nil
            state.headError = error
            defer { state.headWaiter = nil }
            return state.headWaiter
        }
        waiter?.resume(throwing: error)
    }

    /// Writes what is still buffered: every byte accepted reaches the file, whatever ended the body.
    private func finish() {
        state.withLockedValue { state in
            Self.flushPending(&state, progress)
            state.ended = true
            state.watchdog?.cancel()
            state.watchdog = nil
        }
        wakeBodyWaiter()
    }

    /// A slow or stalled server must not leave bytes unwritten (and uncounted) for long: whatever
    /// waits in the buffer is written `idleFlushDelay` from now.
    private func scheduleIdleFlush(_ state: inout State, on loop: any EventLoop) {
        guard state.pending.readableBytes > 0, !state.idleFlushScheduled else { return }
        state.idleFlushScheduled = true
        loop.scheduleTask(in: Self.idleFlushDelay) { [self] in flushIdle() }
    }

    /// Writes bytes that waited in the buffer since the last chunk.
    private func flushIdle() {
        state.withLockedValue { state in
            state.idleFlushScheduled = false
            Self.flushPending(&state, progress)
        }
    }

    /// Writes the pending bytes unless the request ended (its descriptor may be closed by now).
    private static func flushPending(_ state: inout State, _ progress: TransferProgress) {
        guard !state.ended, var writer = state.writer else { return }
        if let failure = flush(&state.pending, &writer, progress), state.failure == nil { state.failure = failure }
        state.writer = writer
    }

    /// Takes what `writer` may have of `chunk` (clamped to the total or the part's end) into the
    /// pending buffer, writing it out once it is big enough. Fails when the sink is full (the rest
    /// of the body belongs to nobody) or a write failed; returns the bytes taken.
    private static func accept(_ chunk: ByteBuffer, into writer: inout Writer, _ state: inout State, _ progress: TransferProgress) -> Result<Int, any Error> {
        if let failure = state.failure { return .failure(failure) }
        var chunk = chunk
        let offered = Int64(chunk.readableBytes)
        let granted: Int64
        if let board = writer.board {
            let part = writer.part
            let accepted = writer.accepted
            granted = board.withBoard { $0.reserve(part: part, at: accepted, count: offered) }
        } else if let total = writer.total {
            granted = max(0, min(offered, total - writer.accepted))
        } else {
            granted = offered
        }
        if granted < offered {
            chunk = chunk.getSlice(at: chunk.readerIndex, length: Int(granted)) ?? ByteBuffer()
        }
        writer.accepted += granted
        if state.pending.readableBytes == 0, chunk.readableBytes >= writeSize {
            // Big enough already: written as it is, without a copy.
            var direct = chunk
            if let failure = flush(&direct, &writer, progress) {
                state.failure = failure
                return .failure(failure)
            }
        } else {
            state.pending.writeImmutableBuffer(chunk)
            if state.pending.readableBytes >= writeSize, let failure = flush(&state.pending, &writer, progress) {
                state.failure = failure
                return .failure(failure)
            }
        }
        if granted < offered || isFull(writer) {
            if let failure = flush(&state.pending, &writer, progress) {
                state.failure = failure
                return .failure(failure)
            }
            state.sinkFull = true
            return .failure(SinkFull())
        }
        return .success(Int(granted))
    }

    private static func isFull(_ writer: Writer) -> Bool {
        if let board = writer.board {
            let part = writer.part
            let accepted = writer.accepted
            return board.withBoard { $0.end(of: part).map { $0 <= accepted } ?? true }
        }
        if let total = writer.total { return writer.accepted >= total }
        return false
    }

    /// `pwrite`s the readable bytes of `pending` at the writer's position, retrying short writes and
    /// EINTR, then counts them.
    private static func flush(_ pending: inout ByteBuffer, _ writer: inout Writer, _ progress: TransferProgress) -> PartFile.Failure? {
        guard pending.readableBytes > 0 else { return nil }
        var code: Int32?
        var written = 0
        pending.withUnsafeReadableBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            while written < bytes.count {
                let result = pwrite(writer.descriptor, base + written, bytes.count - written, off_t(writer.position + Int64(written)))
                if result < 0 {
                    if errno == EINTR { continue }
                    code = errno
                    return
                }
                written += result
            }
        }
        pending.clear()
        writer.position += Int64(written)
        if let board = writer.board {
            let part = writer.part
            board.withBoard { $0.wrote(part: part, count: Int64(written)) }
            progress.bytesOnDisk.add(Int64(written), ordering: .relaxed)
        } else {
            progress.bytesOnDisk.store(writer.position, ordering: .relaxed)
        }
        if let code {
            // Bytes not written are no longer accepted: the next attempt fetches them again.
            writer.accepted = writer.position
            return PartFile.Failure(operation: "write", path: writer.path, code: code)
        }
        return nil
    }
}
