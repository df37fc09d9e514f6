import AsyncHTTPClient
import DownloadCore
import NIOCore
import NIOHTTP1

/// The body was cut off on purpose: the sink is full, or nobody wants the rest.
struct SinkFull: Error {}

/// What one response goes through on its way to the part file, as a pure machine: its head is
/// awaited; its first body bytes are held while the transfer decides what they are worth; then
/// every byte the sink takes is relayed to the file, queued without a copy and written in large
/// gathers, until the body ends.
///
/// Events in, actions out, like `SessionStateMachine`: `ResponseStream` keeps one behind its lock
/// and carries the actions out on the event loop (the writes, promises, continuations and timers),
/// so every transition is tested here without a socket or a file. The waiters are type parameters
/// for that reason (the stream's are continuations and a promise; the tests' are numbers).
struct BodyRelay<HeadWaiter, BodyWaiter, Pause> {
    /// The response head, as far as it came.
    enum Head {
        /// Not here yet; the transfer may be waiting for it.
        case awaited(HeadWaiter?)
        case arrived(HTTPResponseHead)
        /// It never will: it timed out, or the request failed or ended first.
        case failed(any Error)
    }

    /// Where the body's bytes go.
    enum Body {
        /// The transfer has not said yet: they are held in memory.
        case holding(Holding)
        /// Into the part file.
        case relaying(Relaying)
        /// Nobody wants them: the next chunk stops the request.
        case dropped
    }

    /// How far the request is from its end.
    enum Ending {
        /// Bytes may still come.
        case open
        /// The request failed, and the client has not told the delegate yet.
        case failing(any Error)
        /// The client is done with the delegate (the body finished, or `error` ended it): nothing
        /// is written after this, because the transfer may close the descriptor once it hears.
        case ended(error: (any Error)?)

        var error: (any Error)? {
            switch self {
            case .open: nil
            case .failing(let error): error
            case .ended(let error): error
            }
        }
    }

    /// Body bytes held before the transfer says where they go.
    struct Holding {
        var bytes = ByteBuffer()
        /// How many held bytes `early(_:)` waits for.
        var wanted = 1
        var waiter: BodyWaiter?
        /// Reading is paused (too many bytes are held) until this completes.
        var pause: Pause?
    }

    /// Where the body is written, and what is queued for the next write.
    struct Relaying {
        var descriptor: Int32
        var path: String
        var limit: Limit
        /// File offset of the first queued byte.
        var position: Int64
        /// Where the next byte taken goes (`position` plus the queued bytes).
        var accepted: Int64
        /// Bytes taken and not written yet, in order: slices of the client's buffers (no copy) and,
        /// for small chunks, a buffer of our own they are copied into.
        var queued: [ByteBuffer] = []
        var queuedBytes = 0
        /// Whether the last queued buffer is our own (small chunks are appended to it).
        var lastIsOwn = false
        /// Our own buffer, kept for the next small chunk once written.
        var spare: ByteBuffer?
        /// A write of what waits in the queue is due `idleFlushDelay` from when it was armed.
        var idleFlushArmed = false
        /// Why the sink takes no more bytes, once it does not.
        var stop: Stop?
    }

    /// How far a sink may be written.
    enum Limit {
        /// Up to the total (nil: no end).
        case total(Int64?)
        /// Up to the end of one part of a segmented file (which other connections may move).
        case part(SharedBoard, Int)
    }

    /// Why the sink takes no more bytes.
    enum Stop {
        /// It is full (the total, or its part's end): the rest of the body belongs to nobody.
        case full
        case failed(PartFile.Failure)
    }

    /// Bytes to write with one `pwritev`, then to report with `wrote(_:written:error:)`.
    struct Write {
        var descriptor: Int32
        var position: Int64
        var buffers: [ByteBuffer]
        var count: Int
        /// Whether the last buffer is our own (it comes back for the next small chunks).
        var ownLast: Bool
        /// The bytes of the chunk that led to the write, for the rate limit (0: none).
        var took: Int
    }

    /// What the stream does after a body chunk.
    enum Received {
        /// Read on: `took` bytes count against the rate limit. `wake` has its early bytes.
        case readOn(took: Int, wake: BodyWaiter?)
        /// Stop reading until the pause that `paused(_:)` gets completes (many bytes are held).
        case pause(wake: BodyWaiter?)
        /// Write these bytes, then hand them to `wrote(_:written:error:)` to know what follows.
        case write(Write)
        /// Stop the request: the sink is full, nobody wants the body, or a write failed.
        case stop(any Error)
    }

    /// What the stream does once the transfer says where the body goes.
    struct Start {
        var write: Write?
        /// The pause to complete: reading goes on.
        var resume: Pause?
        /// The sink is already full (or failed): the request is stopped.
        var stopRequest = false
    }

    /// What the stream does once the request ended.
    struct End {
        var write: Write?
        /// The head is settled now (its timer goes); `failHead` hears that none came.
        var settledHead = false
        var failHead: HeadWaiter?
        var failPause: Pause?
    }

    /// Bytes gathered before a write: the fewest syscalls for what they cost.
    static var writeSize: Int { 128 << 10 }
    /// A chunk smaller than this is copied into our own buffer, not queued as a slice.
    static var copyBelow: Int { 16 << 10 }
    /// Slices of the client's buffers queued at most: NIO reuses up to four receive buffers
    /// while nobody else holds them, so holding three keeps it from allocating new ones.
    static var maxSlices: Int { 3 }
    /// Body bytes held while the head is decided on.
    static var earlyLimit: Int { 1 << 20 }

    private(set) var head: Head = .awaited(nil)
    private(set) var body: Body = .holding(Holding())
    private(set) var ending: Ending = .open
    /// The transfer stopped the request.
    private(set) var cancelled = false

    // MARK: Head

    /// Whether an event settled the head.
    enum Settled {
        /// It was settled before (or the request was stopped): nothing to do.
        case ignored
        /// Settled now: the head timer goes, and the waiter (if any) hears.
        case settled(HeadWaiter?)
    }

    /// The head arrived; too late when it timed out or the request was stopped (nobody reads this
    /// body). Once settled, the stall watch starts.
    mutating func headArrived(_ head: HTTPResponseHead) -> Settled {
        guard case .awaited(let waiter) = self.head, !cancelled else { return .ignored }
        self.head = .arrived(head)
        return .settled(waiter)
    }

    /// No head will come, because of `error`.
    mutating func headFailed(_ error: any Error) -> Settled {
        guard case .awaited(let waiter) = head else { return .ignored }
        head = .failed(error)
        return .settled(waiter)
    }

    /// The transfer waits for the head: the answer now, or nil once `waiter` is kept for it.
    mutating func awaitHead(_ waiter: HeadWaiter) -> Result<HTTPResponseHead, any Error>? {
        switch head {
        case .arrived(let head): return .success(head)
        case .failed(let error): return .failure(error)
        case .awaited:
            head = .awaited(waiter)
            return nil
        }
    }

    // MARK: The body

    /// A chunk of the body arrived.
    mutating func received(_ chunk: ByteBuffer) -> Received {
        switch body {
        case .dropped:
            return .stop(SinkFull())
        case .holding(var holding):
            body = .dropped
            if holding.bytes.readableBytes == 0 {
                // The first bytes are held as they came (their buffer has room for what follows).
                holding.bytes = chunk
            } else {
                holding.bytes.writeImmutableBuffer(chunk)
            }
            var wake: BodyWaiter?
            if holding.waiter != nil, holding.bytes.readableBytes >= holding.wanted {
                wake = holding.waiter
                holding.waiter = nil
            }
            let full = holding.bytes.readableBytes >= Self.earlyLimit
            body = .holding(holding)
            // Held bytes count against the rate limit like written ones.
            return full ? .pause(wake: wake) : .readOn(took: chunk.readableBytes, wake: wake)
        case .relaying(var relaying):
            body = .dropped
            defer { body = .relaying(relaying) }
            return Self.take(chunk, into: &relaying)
        }
    }

    /// A chunk of `count` bytes that is not in memory: it waits in a pipe, to be spliced into the
    /// file (`DirectStream`). Taken as `received` takes one (clamped to the total or the part's
    /// end), but never queued: the answer is the write of the granted bytes (no buffers; `count`
    /// bytes to move from the pipe at `position`) or a stop. Only while relaying with nothing
    /// queued (`flushQueue()` first); anything else stops the request.
    mutating func receivedInPipe(_ count: Int) -> Received {
        guard case .relaying(var relaying) = body, relaying.queuedBytes == 0 else { return .stop(SinkFull()) }
        body = .dropped
        defer { body = .relaying(relaying) }
        if let stop = relaying.stop {
            if case .failed(let failure) = stop { return .stop(failure) }
            return .stop(SinkFull())
        }
        let offered = Int64(count)
        let granted = Self.grant(offered, to: relaying)
        relaying.accepted += granted
        if granted < offered || Self.isFull(relaying) { relaying.stop = .full }
        guard granted > 0 else { return .stop(SinkFull()) }
        return .write(Write(descriptor: relaying.descriptor, position: relaying.position, buffers: [], count: Int(granted), ownLast: false, took: Int(granted)))
    }

    /// What waits in the queue, to be written now (before a splice, or when the stream waits).
    mutating func flushQueue() -> Write? {
        guard case .relaying(var relaying) = body, relaying.queuedBytes > 0, !isEnded else { return nil }
        let write = Self.takeWrite(&relaying, took: 0)
        body = .relaying(relaying)
        return write
    }

    /// Reading is paused until `pause` completes (see `Received.pause`).
    mutating func paused(_ pause: Pause) {
        guard case .holding(var holding) = body else { return }
        holding.pause = pause
        body = .holding(holding)
    }

    /// The transfer says where the body goes: the held bytes are taken first.
    mutating func relay(to sink: BodySink) -> Start {
        var start = Start()
        let held: ByteBuffer
        switch body {
        case .holding(let holding):
            held = holding.bytes
            start.resume = holding.pause
        case .relaying, .dropped:
            // Said once, and never after a discard; nothing to take.
            held = ByteBuffer()
        }
        var relaying = Self.relaying(sink)
        relaying.queued.reserveCapacity(Self.maxSlices + 2)
        if held.readableBytes > 0 {
            switch Self.take(held, into: &relaying) {
            case .write(let write):
                start.write = write
            case .stop:
                start.stopRequest = true
            case .readOn, .pause:
                break
            }
        }
        if start.write == nil, relaying.queuedBytes > 0, relaying.stop != nil || isEnded {
            // Nothing more will arrive, or nothing more is wanted: what waits is written now.
            start.write = Self.takeWrite(&relaying, took: 0)
        }
        if relaying.stop != nil { start.stopRequest = true }
        body = .relaying(relaying)
        return start
    }

    /// `write` was carried out: `written` bytes reached the file, then `error` (an errno) stopped it.
    /// Returns what follows for the chunk that led to it, and the progress to publish.
    mutating func wrote(_ write: Write, written: Int, error: Int32?) -> (Received, Progress) {
        guard case .relaying(var relaying) = body else { return (.stop(SinkFull()), .none) }
        body = .dropped
        defer { body = .relaying(relaying) }
        relaying.position += Int64(written)
        var buffers = write.buffers
        if write.ownLast, var own = buffers.popLast() {
            // Our buffer comes back for the next small chunks (no allocation for them).
            own.clear()
            relaying.spare = own
        }
        if relaying.queued.isEmpty {
            buffers.removeAll(keepingCapacity: true)
            relaying.queued = buffers
        }
        let progress: Progress
        switch relaying.limit {
        case .part(let board, let part):
            board.withBoard { $0.wrote(part: part, count: Int64(written)) }
            progress = .added(Int64(written))
        case .total:
            progress = .at(relaying.position)
        }
        if let error {
            // Bytes not written are no longer taken: the next attempt fetches them again.
            relaying.accepted = relaying.position
            let failure = PartFile.Failure(operation: "write", path: relaying.path, code: error)
            if case .failed = relaying.stop {} else { relaying.stop = .failed(failure) }
        }
        switch relaying.stop {
        case .failed(let failure): return (.stop(failure), progress)
        case .full: return (.stop(SinkFull()), progress)
        case nil: return (.readOn(took: write.took, wake: nil), progress)
        }
    }

    /// How the bytes on disk grew with a write.
    enum Progress: Equatable {
        case none
        /// The file is written up to here (front to back).
        case at(Int64)
        /// This many more bytes of a part were written.
        case added(Int64)
    }

    /// Arms the write of bytes left waiting (`idleFlushDelay` from now); false when nothing waits
    /// or one is armed already.
    mutating func armIdleFlush() -> Bool {
        guard case .relaying(var relaying) = body, relaying.queuedBytes > 0, !relaying.idleFlushArmed, !isEnded else { return false }
        relaying.idleFlushArmed = true
        body = .relaying(relaying)
        return true
    }

    /// The armed write is due: what waited since the last chunk, unless the request ended (its
    /// descriptor may be closed by now).
    mutating func idleFlushDue() -> Write? {
        guard case .relaying(var relaying) = body else { return nil }
        relaying.idleFlushArmed = false
        let write = isEnded || relaying.queuedBytes == 0 ? nil : Self.takeWrite(&relaying, took: 0)
        body = .relaying(relaying)
        return write
    }

    /// Nobody wants the body: returns the pause to fail (reading stops for good).
    mutating func drop() -> Pause? {
        switch body {
        case .holding(let holding):
            body = .dropped
            return holding.pause
        case .relaying(var relaying):
            // Not a path the transfer takes; what was taken is still written at the end.
            if relaying.stop == nil { relaying.stop = .full }
            body = .relaying(relaying)
            return nil
        case .dropped:
            return nil
        }
    }

    /// The transfer stops the request; false when it had already.
    mutating func cancel() -> Bool {
        defer { cancelled = true }
        return !cancelled
    }

    // MARK: Early bytes

    /// `early(_:)` waits for `count` held bytes: the answer now, or nil once `waiter` is kept.
    mutating func awaitEarly(_ count: Int, _ waiter: BodyWaiter) -> Result<Void, any Error>? {
        if case .holding(var holding) = body {
            holding.wanted = max(1, min(count, Self.earlyLimit))
            body = .holding(holding)
        }
        if let ready = earlyState { return ready }
        if case .holding(var holding) = body {
            holding.waiter = waiter
            body = .holding(holding)
            return nil
        }
        return .success(())
    }

    /// The first `count` held bytes (fewer when fewer came).
    func earlyBytes(_ count: Int) -> [UInt8] {
        guard case .holding(let holding) = body else { return [] }
        return holding.bytes.getBytes(at: holding.bytes.readerIndex, length: min(count, holding.bytes.readableBytes)) ?? []
    }

    /// The waiter of `early(_:)` and its answer, once there is one to give.
    mutating func wakeEarly() -> (BodyWaiter, Result<Void, any Error>)? {
        guard case .holding(var holding) = body, let waiter = holding.waiter, let ready = earlyState else { return nil }
        holding.waiter = nil
        body = .holding(holding)
        return (waiter, ready)
    }

    /// Whether `early(_:)` has its answer: its bytes (or the body ended, or failed); nil while it waits.
    private var earlyState: Result<Void, any Error>? {
        switch body {
        case .holding(let holding) where holding.bytes.readableBytes >= holding.wanted: return .success(())
        case .relaying: return .success(())
        default: break
        }
        if let error = ending.error { return .failure(error) }
        return isEnded ? .success(()) : nil
    }

    // MARK: The end

    /// The request failed (the client's task says so, perhaps before the delegate hears).
    mutating func failed(_ error: any Error) {
        if case .open = ending { ending = .failing(error) }
    }

    /// The client is done with the delegate: `error` ended the request (nil: the body finished).
    /// What is queued is written (every byte taken reaches the file), and whoever waits hears.
    mutating func ended(_ error: (any Error)?) -> End {
        var end = End()
        if case .settled(let waiter) = headFailed(error ?? HTTPClientError.remoteConnectionClosed) {
            end.failHead = waiter
            end.settledHead = true
        }
        if case .ended = ending {} else {
            if case .relaying(var relaying) = body {
                if relaying.queuedBytes > 0 { end.write = Self.takeWrite(&relaying, took: 0) }
                body = .relaying(relaying)
            }
            ending = .ended(error: ending.error ?? error)
        }
        if error != nil, case .holding(var holding) = body, let pause = holding.pause {
            holding.pause = nil
            body = .holding(holding)
            end.failPause = pause
        }
        return end
    }

    /// Whether the client is done with the delegate.
    var isEnded: Bool {
        if case .ended = ending { return true }
        return false
    }

    /// Whether a body that stops coming is still worth watching for a stall.
    var watchesForStall: Bool {
        if isEnded || cancelled { return false }
        if case .dropped = body { return false }
        return true
    }

    /// Whether bytes wait in the queue for a write.
    var hasQueued: Bool {
        if case .relaying(let relaying) = body { return relaying.queuedBytes > 0 }
        return false
    }

    /// Where the next byte would go once everything queued is written; nil before `relay(to:)`.
    var position: Int64? {
        if case .relaying(let relaying) = body { return relaying.accepted }
        return nil
    }

    /// How the body ended, once the request did (`taskError`: the error the client's task failed with).
    func outcome(taskError: (any Error)?) -> Result<ResponseStream.End, any Error> {
        if case .relaying(let relaying) = body {
            if case .failed(let failure) = relaying.stop { return .failure(failure) }
            if taskError != nil, case .full = relaying.stop { return .success(.sinkFull) }
        }
        if let taskError { return .failure(taskError) }
        return .success(.finished)
    }

    // MARK: Helpers

    private static func relaying(_ sink: BodySink) -> Relaying {
        switch sink {
        case .prefix(let descriptor, let path, let position, let total):
            Relaying(descriptor: descriptor, path: path, limit: .total(total), position: position, accepted: position)
        case .part(let descriptor, let path, let board, let part, let position):
            Relaying(descriptor: descriptor, path: path, limit: .part(board, part), position: position, accepted: position)
        }
    }

    /// Takes what the sink may have of `chunk` (clamped to the total or the part's end) into the
    /// queue, and says whether to write now or stop.
    private static func take(_ chunk: ByteBuffer, into relaying: inout Relaying) -> Received {
        if let stop = relaying.stop {
            if case .failed(let failure) = stop { return .stop(failure) }
            return .stop(SinkFull())
        }
        let offered = Int64(chunk.readableBytes)
        let granted = grant(offered, to: relaying)
        if granted > 0 {
            let taken = granted < offered ? chunk.getSlice(at: chunk.readerIndex, length: Int(granted)) ?? ByteBuffer() : chunk
            queue(taken, into: &relaying)
        }
        relaying.accepted += granted
        if granted < offered || isFull(relaying) { relaying.stop = .full }
        if relaying.stop != nil {
            guard relaying.queuedBytes > 0 else { return .stop(SinkFull()) }
            return .write(takeWrite(&relaying, took: Int(granted)))
        }
        if relaying.queuedBytes >= writeSize || relaying.queued.count > maxSlices {
            return .write(takeWrite(&relaying, took: Int(granted)))
        }
        return .readOn(took: Int(granted), wake: nil)
    }

    /// How many of `offered` bytes the sink takes next: up to the total, or what the board grants
    /// the part.
    private static func grant(_ offered: Int64, to relaying: Relaying) -> Int64 {
        switch relaying.limit {
        case .part(let board, let part):
            let accepted = relaying.accepted
            return board.withBoard { $0.reserve(part: part, at: accepted, count: offered) }
        case .total(let total?):
            return max(0, min(offered, total - relaying.accepted))
        case .total(nil):
            return offered
        }
    }

    /// Queues `chunk`: a large one as it is, a small one copied into our own buffer (so a slow
    /// stream of small chunks is written in large writes all the same).
    private static func queue(_ chunk: ByteBuffer, into relaying: inout Relaying) {
        relaying.queuedBytes += chunk.readableBytes
        if chunk.readableBytes >= copyBelow {
            relaying.queued.append(chunk)
            relaying.lastIsOwn = false
        } else if relaying.lastIsOwn {
            // Ours alone: appended in place.
            relaying.queued[relaying.queued.count - 1].writeImmutableBuffer(chunk)
        } else {
            var own = relaying.spare ?? ByteBufferAllocator().buffer(capacity: copyBelow)
            relaying.spare = nil
            own.writeImmutableBuffer(chunk)
            relaying.queued.append(own)
            relaying.lastIsOwn = true
        }
    }

    private static func takeWrite(_ relaying: inout Relaying, took: Int) -> Write {
        let write = Write(
            descriptor: relaying.descriptor, position: relaying.position, buffers: relaying.queued, count: relaying.queuedBytes,
            ownLast: relaying.lastIsOwn, took: took
        )
        // The queue is handed over whole (and comes back with `wrote`): the buffers have one owner.
        relaying.queued = []
        relaying.queuedBytes = 0
        relaying.lastIsOwn = false
        return write
    }

    private static func isFull(_ relaying: Relaying) -> Bool {
        switch relaying.limit {
        case .part(let board, let part):
            let accepted = relaying.accepted
            return board.withBoard { $0.end(of: part).map { $0 <= accepted } ?? true }
        case .total(let total?):
            return relaying.accepted >= total
        case .total(nil):
            return false
        }
    }
}

extension BodyRelay: Sendable where HeadWaiter: Sendable, BodyWaiter: Sendable, Pause: Sendable {}
extension BodyRelay.Head: Sendable where HeadWaiter: Sendable {}
extension BodyRelay.Body: Sendable where BodyWaiter: Sendable, Pause: Sendable {}
extension BodyRelay.Holding: Sendable where BodyWaiter: Sendable, Pause: Sendable {}
extension BodyRelay.Relaying: Sendable {}
extension BodyRelay.Limit: Sendable {}
extension BodyRelay.Stop: Sendable {}
extension BodyRelay.Ending: Sendable {}
extension BodyRelay.Write: Sendable {}
