import NIOCore
import NIOHTTP1
import Synchronization

/// What a connection's task receives from its gate: whole requests, or a refusal to answer once
/// before the connection closes.
enum ControlInbound: Sendable {
    case request(HTTPRequestHead, ByteBuffer)
    /// Unparseable, too large, too slow, or another user's: answer with this status and sentence,
    /// then close.
    case refuse(HTTPResponseStatus, String)
}

/// Turns the parts of each request into one whole request, and guards the connection: a body over
/// the limit is refused as soon as its length says so or its bytes pass it (never buffered further),
/// bytes that are not HTTP are refused, and a request that does not arrive in full in time is
/// refused (partly sent) or the connection closed (idle).
///
/// The deadline runs only while no request waits for its answer: a long answer (the event stream)
/// is never cut by it.
final class RequestGate: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = ControlInbound
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        case idle
        case receiving(HTTPRequestHead, ByteBuffer)
        /// A refusal was sent up: everything that comes after is dropped unread.
        case refused
    }

    private let limits: ControlServer.Limits
    private var refusal: (HTTPResponseStatus, String)?
    private var state = State.idle
    /// Requests passed on whose answers have not ended yet.
    private var unanswered = 0
    private var deadline: Scheduled<Void>?
    private var started = false

    private let writability: Writability

    init(limits: ControlServer.Limits, refusal: (HTTPResponseStatus, String)?, writability: Writability) {
        self.limits = limits
        self.refusal = refusal
        self.writability = writability
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writability.set(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Nobody waits for a socket that is gone: the next write fails and ends the stream.
        writability.set(true)
        context.fireChannelInactive()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // An accepted channel may already be active; the first message waits until the pipeline
        // above this handler is complete.
        if context.channel.isActive {
            context.eventLoop.assumeIsolated().execute { self.start(context: context) }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        start(context: context)
    }

    private func start(context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        if let (status, sentence) = refusal {
            refusal = nil
            refuse(context: context, status, sentence)
        } else {
            arm(context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch (state, unwrapInboundIn(data)) {
        case (.refused, _):
            break
        case (.idle, .head(let head)):
            if let length = head.headers.first(name: "content-length").flatMap({ Int($0) }), length > limits.maxBody {
                refuse(context: context, .payloadTooLarge, "the body is \(length) bytes; at most \(limits.maxBody) are taken")
                return
            }
            if head.headers.first(name: "expect")?.lowercased() == "100-continue" {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
            }
            state = .receiving(head, context.channel.allocator.buffer(capacity: 0))
        case (.receiving(let head, var body), .body(var chunk)):
            guard body.readableBytes + chunk.readableBytes <= limits.maxBody else {
                refuse(context: context, .payloadTooLarge, "the body is over \(limits.maxBody) bytes")
                return
            }
            state = .idle
            body.writeBuffer(&chunk)
            state = .receiving(head, body)
        case (.receiving(let head, let body), .end):
            state = .idle
            unanswered += 1
            deadline?.cancel()
            deadline = nil
            context.fireChannelRead(wrapInboundOut(.request(head, body)))
        case (.idle, .body), (.idle, .end), (.receiving, .head):
            refuse(context: context, .badRequest, "the request is not HTTP/1.1")
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard case .refused = state else {
            // The HTTP decoder's errors: the bytes are not a request.
            refuse(context: context, .badRequest, "the request is not HTTP/1.1")
            return
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            unanswered = max(0, unanswered - 1)
            if unanswered == 0 { arm(context: context) }
        }
        context.write(data, promise: promise)
    }

    private func refuse(context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ sentence: String) {
        state = .refused
        deadline?.cancel()
        deadline = nil
        context.fireChannelRead(wrapInboundOut(.refuse(status, sentence)))
        // The async channel hands reads on at the end of a read; a refusal from the timer or at the
        // start comes outside of one.
        context.fireChannelReadComplete()
    }

    /// Starts the wait for the next request, if none is being answered.
    private func arm(context: ChannelHandlerContext) {
        guard case .refused = state else {
            deadline?.cancel()
            deadline = context.eventLoop.assumeIsolated().scheduleTask(in: limits.requestTimeout) {
                self.expired(context: context)
            }
            return
        }
    }

    private func expired(context: ChannelHandlerContext) {
        deadline = nil
        guard unanswered == 0 else { return }
        switch state {
        case .receiving:
            refuse(context: context, .requestTimeout, "the request did not arrive in full within \(limits.requestTimeout.seconds) s")
        case .idle:
            context.close(promise: nil)
        case .refused:
            break
        }
    }
}

/// Whether a connection's socket takes more bytes, for a task to wait on.
final class Writability: Sendable {
    private struct State {
        var writable = true
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func set(_ writable: Bool) {
        let waiters = state.withLock { state in
            state.writable = writable
            guard writable else { return [CheckedContinuation<Void, Never>]() }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the socket takes more bytes (or is gone).
    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if !state.writable { state.waiters.append(continuation) }
                return state.writable
            }
            if now { continuation.resume() }
        }
    }
}

extension TimeAmount {
    /// Whole seconds, for sentences.
    var seconds: Int64 { nanoseconds / 1_000_000_000 }
}
