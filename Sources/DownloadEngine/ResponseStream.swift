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
/// This is the per-chunk path: a chunk is clamped (to the total, or to its part's end), queued as
/// it is (a small one copied into a buffer of ours), and the queue is written with one `pwritev`
/// once it holds at least 128 KiB (or has waited 50 ms); the bytes on disk are counted in an
/// atomic. No actor, no task switch, no copy of a large chunk, no allocation per chunk.
///
/// The head goes to the transfer (an async caller), which decides what the body is worth. Body
/// bytes that arrive meanwhile wait in memory (reading stops at 1 MiB), so a connection that drops
/// right after its head loses nothing that was read.
///
/// What happens to the response is decided by a `BodyRelay` (a pure machine); this class carries
/// out its actions: the writes, the continuations and the promise, the timers.
final class ResponseStream: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void
    typealias Relay = BodyRelay<CheckedContinuation<HTTPResponseHead, any Error>, CheckedContinuation<Void, any Error>, EventLoopPromise<Void>>

    /// How the body ended, besides by an error.
    enum End: Sendable {
        /// The server sent the whole body.
        case finished
        /// The sink was full (the total, or the part's end) and the rest of the body was dropped.
        case sinkFull
    }

    /// The machine and the handles its actions need, behind one lock.
    private struct State {
        var relay = Relay()
        var task: HTTPClient.Task<Void>?
        var headTimer: Scheduled<Void>?
        /// The next look for a stall, from the head on.
        var watchdog: Scheduled<Void>?
        var finalURL: URL?
    }

    /// How long bytes of a slow stream may wait in the queue: what a `kill -9` loses of them (a
    /// fast stream fills it long before, so this costs it nothing).
    static let idleFlushDelay = TimeAmount.milliseconds(50)

    private let state = NIOLockedValueBox(State())
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
            return state.relay.cancelled
        }
        if cancelled { task.cancel() }
        // Some failures end the task without telling the delegate: the head waiter hears of them here.
        task.futureResult.whenComplete { [self] result in
            if case .failure(let error) = result {
                headFailed(error)
                state.withLockedValue { $0.relay.failed(error) }
            } else {
                headFailed(HTTPClientError.remoteConnectionClosed)
            }
            wakeEarly()
        }
    }

    /// Stops the request; a body being written keeps what reached the file.
    func cancel() {
        let task = state.withLockedValue { state -> HTTPClient.Task<Void>? in
            _ = state.relay.cancel()
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
                if let ready = state.withLockedValue({ $0.relay.awaitHead(continuation) }) { continuation.resume(with: ready) }
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
            let start = state.relay.relay(to: sink)
            var stop = start.stopRequest
            // A write that fails stops the request too.
            if let write = start.write, case .stop = perform(write, &state.relay) { stop = true }
            if let task = state.task { armIdleFlush(&state, on: task.eventLoop) }
            return (state.task, start.resume, stop)
        }
        guard let task else { throw CancellationError() }
        if stop { task.cancel() }
        if resume != nil { markReady(after: .zero) }
        resume?.succeed()
        var taskError: (any Error)?
        do {
            try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                cancel()
            }
        } catch {
            taskError = error
        }
        return try state.withLockedValue { $0.relay.outcome(taskError: taskError) }.get()
    }

    /// The first `count` bytes of the body, once they came (fewer when the body ended sooner), before
    /// anything is written; throws the error that ended the request first. They stay held for
    /// `write(into:)`.
    ///
    /// A resume without validators compares them with the bytes on disk before it appends anything.
    func early(_ count: Int) async throws -> [UInt8] {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if let ready = state.withLockedValue({ $0.relay.awaitEarly(count, continuation) }) { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
        return state.withLockedValue { $0.relay.earlyBytes(count) }
    }

    /// Wakes `early(_:)` once there is something to tell it.
    private func wakeEarly() {
        if let (waiter, ready) = state.withLockedValue({ $0.relay.wakeEarly() }) { waiter.resume(with: ready) }
    }

    /// Drops the response and its body.
    func discard() {
        let pause = state.withLockedValue { $0.relay.drop() }
        cancel()
        pause?.fail(SinkFull())
    }

    /// Where the next byte would go once everything queued is written.
    var position: Int64? {
        state.withLockedValue { $0.relay.position }
    }

    // MARK: Delegate (on the event loop)

    func didVisitURL(task: HTTPClient.Task<Void>, _ request: HTTPClient.Request, _ head: HTTPResponseHead) {
        state.withLockedValue { $0.finalURL = request.url }
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let waiter = state.withLockedValue { state -> CheckedContinuation<HTTPResponseHead, any Error>? in
            guard case .settled(let waiter) = state.relay.headArrived(head) else { return nil }
            state.headTimer?.cancel()
            state.headTimer = nil
            // From the head on, a body that stops coming is a stall.
            markReady(after: .zero)
            let loop = task.eventLoop
            state.watchdog = loop.scheduleTask(in: stallTimeout) { [self] in lookForStall(on: loop) }
            return waiter
        }
        waiter?.resume(returning: head)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let loop = task.eventLoop
        let (received, paused) = state.withLockedValue { state -> (Relay.Received, EventLoopFuture<Void>?) in
            var received = state.relay.received(buffer)
            switch received {
            case .write(let write):
                received = perform(write, &state.relay)
                armIdleFlush(&state, on: loop)
            case .pause:
                // Completed by `write(into:)`, failed by `discard()` or the request's end.
                let promise = loop.makePromise(of: Void.self)
                state.relay.paused(promise)
                // Not a stall: the transfer has not said where the bytes go yet.
                readyAt.store(.max, ordering: .relaxed)
                return (received, promise.futureResult)
            case .readOn:
                armIdleFlush(&state, on: loop)
            case .stop:
                break
            }
            return (received, nil)
        }
        switch received {
        case .stop(let error):
            return loop.makeFailedFuture(error)
        case .pause(let wake):
            wake?.resume()
            // Held (no file to write them to yet) is received all the same: the bytes count against
            // the limits, once they may be written (a tester's small files, read whole before their
            // file was open, took no time under a limit). Not all of them yet: a CI run fetched 64 KiB
            // of small files over https in 2 s under 16 KiB/s.
            let held = paused ?? loop.makeSucceededVoidFuture()
            let wait = buffer.readableBytes > 0 ? throttle.reserve(buffer.readableBytes) : .zero
            guard wait > .zero else { return held }
            return held.flatMap { [self] in
                markReady(after: wait)
                return throttle.pause(for: wait, on: loop).map { [self] in markReady(after: .zero) }
            }
        case .readOn(let took, let wake):
            wake?.resume()
            let wait = took > 0 ? throttle.reserve(took) : .zero
            markReady(after: wait)
            guard wait > .zero else { return loop.makeSucceededVoidFuture() }
            // A limit raised or removed ends the wait early: the stall is measured from then.
            return throttle.pause(for: wait, on: loop).map { [self] in markReady(after: .zero) }
        case .write:
            // `perform` answers with what follows the write, never with another write.
            return loop.makeSucceededVoidFuture()
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
            return state.relay.watchesForStall ? state.task : nil
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
            guard state.relay.watchesForStall else { return }
            state.watchdog = loop.scheduleTask(in: next) { [self] in lookForStall(on: loop) }
        }
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        ended(error)
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        ended(nil)
    }

    // MARK: Helpers

    private func headFailed(_ error: any Error) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<HTTPResponseHead, any Error>? in
            guard case .settled(let waiter) = state.relay.headFailed(error) else { return nil }
            state.headTimer?.cancel()
            state.headTimer = nil
            return waiter
        }
        waiter?.resume(throwing: error)
    }

    /// The request ended (`error`: how, nil when the body finished): every byte taken reaches the
    /// file, and whoever waits hears.
    private func ended(_ error: (any Error)?) {
        let end = state.withLockedValue { state -> Relay.End in
            let end = state.relay.ended(error)
            if end.settledHead {
                state.headTimer?.cancel()
                state.headTimer = nil
            }
            if let write = end.write { _ = perform(write, &state.relay) }
            state.watchdog?.cancel()
            state.watchdog = nil
            return end
        }
        end.failHead?.resume(throwing: error ?? HTTPClientError.remoteConnectionClosed)
        if let error { end.failPause?.fail(error) }
        wakeEarly()
    }

    /// A slow or stalled server must not leave bytes unwritten (and uncounted) for long: whatever
    /// waits in the queue is written `idleFlushDelay` from now.
    private func armIdleFlush(_ state: inout State, on loop: any EventLoop) {
        guard state.relay.armIdleFlush() else { return }
        loop.scheduleTask(in: Self.idleFlushDelay) { [self] in
            self.state.withLockedValue { locked in
                if let write = locked.relay.idleFlushDue() { _ = perform(write, &locked.relay) }
            }
        }
    }

    /// Carries out `write` (see `TransferProgress.carryOut`).
    private func perform(_ write: Relay.Write, _ relay: inout Relay) -> Relay.Received {
        progress.carryOut(write, on: &relay)
    }

    /// Writes `buffers` (`count` bytes in all) at `offset` of `descriptor` with as few `pwritev`
    /// calls as it takes; returns the bytes written and the errno that stopped it, if one did.
    static func gather(_ buffers: [ByteBuffer], count: Int, to descriptor: Int32, at offset: Int64) -> (Int, Int32?) {
        var done = 0
        while done < count {
            let result = withVectors(buffers, skipping: done) { vectors in
                pwritev(descriptor, vectors.baseAddress, Int32(vectors.count), off_t(offset + Int64(done)))
            }
            if result < 0 {
                if errno == EINTR { continue }
                return (done, errno)
            }
            if result == 0 { return (done, EIO) }
            done += result
        }
        return (done, nil)
    }

    /// Calls `body` with the readable bytes of `buffers` as `iovec`s, past the first `skip` bytes.
    ///
    /// The pointers stay valid for the call because `buffers` keeps every storage alive meanwhile
    /// (`withUnsafeReadableBytesWithStorageManagement` documents this use).
    private static func withVectors<T>(_ buffers: [ByteBuffer], skipping skip: Int, _ body: (UnsafeBufferPointer<iovec>) -> T) -> T {
        // Linux takes at most 1024 vectors a call (UIO_MAXIOV); a queue never holds nearly as many.
        let limit = min(buffers.count, 1024)
        return withUnsafeTemporaryAllocation(of: iovec.self, capacity: max(1, limit)) { vectors in
            var used = 0
            var skip = skip
            for buffer in buffers where used < limit {
                buffer.withUnsafeReadableBytesWithStorageManagement { bytes, _ in
                    guard bytes.count > skip, let base = bytes.baseAddress else {
                        skip -= min(skip, bytes.count)
                        return
                    }
                    vectors[used] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base + skip), iov_len: bytes.count - skip)
                    used += 1
                    skip = 0
                }
            }
            return body(UnsafeBufferPointer(rebasing: vectors[0..<used]))
        }
    }
}

extension TransferProgress {
    /// Carries out `write` (`pwritev`, retrying short writes and EINTR), tells `relay`, counts what
    /// reached the file, and returns what follows for the chunk that led to it. Both streams write so.
    func carryOut<Head, Body, Pause>(_ write: BodyRelay<Head, Body, Pause>.Write, on relay: inout BodyRelay<Head, Body, Pause>) -> BodyRelay<Head, Body, Pause>.Received {
        let (written, code) = ResponseStream.gather(write.buffers, count: write.count, to: write.descriptor, at: write.position)
        return wrote(write, written: written, error: code, on: &relay)
    }

    /// `written` bytes of `write` reached the file, then errno `code` stopped it (however they got
    /// there: a `pwritev`, a splice): tells `relay`, counts them on disk and for the early writeback,
    /// and returns what follows.
    func wrote<Head, Body, Pause>(
        _ write: BodyRelay<Head, Body, Pause>.Write, written: Int, error code: Int32?, on relay: inout BodyRelay<Head, Body, Pause>
    ) -> BodyRelay<Head, Body, Pause>.Received {
        let (received, grown) = relay.wrote(write, written: written, error: code)
        writeback?.wrote(written, at: write.position, to: write.descriptor)
        switch grown {
        case .none: break
        case .at(let position): bytesOnDisk.store(position, ordering: .relaxed)
        case .added(let count): bytesOnDisk.add(count, ordering: .relaxed)
        }
        return received
    }
}
