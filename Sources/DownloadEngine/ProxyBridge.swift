#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A forward proxy on 127.0.0.1 that AsyncHTTPClient uses in place of the real one, for what the
/// client cannot do itself. AsyncHTTPClient 1.37 reaches every URL through a proxy with `CONNECT`
/// (http included), cannot send an absolute-form target, and builds the request target from
/// Foundation's decoded path (`/caf%E9.bin` would go out as `/`).
///
/// One bridge, one listener, one mode:
/// - `forward` (`Upstream`): it answers `CONNECT host:port` itself with 200, once the way to the
///   server is open (`Upstream.open`: the proxy for absolute form; the server, straight or through
///   the proxy's `CONNECT`, over TLS for https), then reads the HTTP/1.1 requests inside that tunnel
///   and forwards each, with the target of its `X-Haul-Target` header when it has one: to the proxy
///   in absolute form (with `Proxy-Authorization`), or to the server in origin form. Responses go
///   back byte for byte, on the same connection, however many requests it carries.
/// - `tunnel` (https URLs through a proxy): it forwards the `CONNECT` to the real proxy and, once
///   accepted, copies bytes both ways. It exists to learn why a proxy refused: AsyncHTTPClient
///   reports every refusal as `invalidProxyResponse`, without the status, so the bridge remembers
///   it by target (`refusal`).
///
/// Both sides of a connection close together; reading stops on one side while the other cannot take
/// more (no body is ever held whole).
final class ProxyBridge: Sendable {
    enum Mode: Sendable {
        case forward(Upstream)
        case tunnel(ProxySettings.Server)
    }

    let port: Int
    private let listener: EventLoopFuture<any Channel>
    private let refusals = ProxyRefusals()

    struct StartFailure: Error {}

    /// Listens on a loopback port. The socket is bound and listening when this returns (no wait
    /// for an event loop: connections queue in the kernel until the channel is registered).
    init(_ mode: Mode, group: any EventLoopGroup, connectTimeout: TimeAmount) throws(StartFailure) {
        let socket: Int32
        (socket, port) = try Self.listeningSocket()
        let refusals = refusals
        listener = ServerBootstrap(group: group)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connection = BridgeConnection(mode: mode, connectTimeout: connectTimeout, refusals: refusals)
                    try channel.pipeline.syncOperations.addHandler(BridgeHandshake(connection))
                }
            }
            .withBoundSocket(socket)
    }

    /// Why the proxy last refused a `CONNECT` to `host:port`, if it did.
    func refusal(host: String, port: Int) -> ProxyRefusal? {
        refusals["\(host):\(port)"]
    }

    /// Stops listening; open connections end with their clients.
    func shutdown() async {
        try? await listener.get().close()
    }

    /// A TCP socket on 127.0.0.1 with a port of the kernel's choice, listening.
    private static func listeningSocket() throws(StartFailure) -> (Int32, Int) {
        #if canImport(Glibc)
        let kind = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        #else
        let kind = SOCK_STREAM
        #endif
        let descriptor = socket(AF_INET, kind, 0)
        guard descriptor >= 0 else { throw StartFailure() }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(descriptor, address, length) == 0 && listen(descriptor, 128) == 0 && getsockname(descriptor, address, &length) == 0
            }
        }
        guard ready else {
            close(descriptor)
            throw StartFailure()
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }
}

/// Why the real proxy would not carry a request, as the bridge saw it.
enum ProxyRefusal: Sendable, Hashable {
    /// The proxy answered `CONNECT` with this status (and `Proxy-Authenticate` for a 407).
    case refused(status: Int, reasonPhrase: String, authenticate: String?)
    /// The proxy could not be reached.
    case unreachable(String)
}

/// The latest refusal of each `CONNECT` target (`host:port`), shared by the bridge's connections.
final class ProxyRefusals: Sendable {
    private let byTarget = Mutex<[String: ProxyRefusal]>([:])

    subscript(target: String) -> ProxyRefusal? {
        get { byTarget.withLock { $0[target] } }
        set { byTarget.withLock { $0[target] = newValue } }
    }
}

/// What one connection from AsyncHTTPClient to the bridge needs to know.
struct BridgeConnection {
    let mode: ProxyBridge.Mode
    let connectTimeout: TimeAmount
    let refusals: ProxyRefusals

    func record(_ target: String, _ refusal: ProxyRefusal?) {
        refusals[target] = refusal
    }
}

/// Reads the `CONNECT host:port` that opens a connection to the bridge, opens the way on, and hands
/// both channels to the handlers of the bridge's mode.
final class BridgeHandshake: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let connection: BridgeConnection
    private var received = ByteBuffer()
    private var started = false
    /// The connection on (to the proxy or the server), until the handlers of the mode own it.
    private var proxy: (any Channel)?

    init(_ connection: BridgeConnection) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.writeBuffer(&bytes)
        guard !started else { return }
        guard let end = received.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else {
            if received.readableBytes > 16 * 1024 { Self.answer(context.channel, "431 Request Header Fields Too Large") }
            return
        }
        let headLength = end.upperBound - received.readableBytesView.startIndex
        let head = received.readString(length: headLength) ?? ""
        let words = (head.split(separator: "\r\n", maxSplits: 1).first ?? "").split(separator: " ")
        guard words.count == 3, words[0] == "CONNECT", let (host, port) = Self.hostAndPort(words[1]) else {
            Self.answer(context.channel, "405 Method Not Allowed")
            return
        }
        started = true
        // Nothing else is read until the tunnel is up (the client sends nothing before the 200).
        try? context.channel.syncOptions?.setOption(.autoRead, value: false)
        switch connection.mode {
        case .forward(let upstream):
            openForward(context: context, upstream: upstream, host: host, port: port)
        case .tunnel(let proxy):
            connectUpstream(context: context, proxy: proxy, target: String(words[1]))
        }
    }

    /// `host` and `port` of a `CONNECT` target: `files.example:443`, `[::1]:8443` (no brackets kept).
    static func hostAndPort(_ target: Substring) -> (String, Int)? {
        guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]), (1...65535).contains(port) else { return nil }
        var host = target[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return host.isEmpty ? nil : (String(host), port)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The client gave up before the tunnel was up (a proxy that does not answer CONNECT).
        proxy?.close(promise: nil)
        proxy = nil
        context.fireChannelInactive()
    }

    /// The way to the server opened by `upstream`; requests inside the bridge's own tunnel go on
    /// in absolute form (to a proxy) or origin form (to the server).
    private func openForward(context: ChannelHandlerContext, upstream: Upstream, host: String, port: Int) {
        let downstream = context.channel
        upstream.open(host: host, port: port, on: context.eventLoop).assumeIsolated().whenComplete { result in
            switch result {
            case .failure:
                // AsyncHTTPClient says only `invalidProxyResponse`: the transfer opens the way
                // once more (`Upstream.probe`) to say why.
                Self.answer(downstream, "502 Bad Gateway")
            case .success(let server):
                guard downstream.isActive else {
                    server.close(promise: nil)
                    return
                }
                let form: RequestForwarder.Form
                switch upstream.route {
                case .absoluteForm(let proxy):
                    let name = host.contains(":") ? "[\(host)]" : host
                    form = .absolute(authority: port == 80 ? name : "\(name):\(port)", authorization: proxy.authorization)
                case .origin:
                    form = .origin
                }
                self.proxy = server
                self.forward(context: context, to: server, form: form)
            }
        }
    }

    private func forward(context: ChannelHandlerContext, to server: any Channel, form: RequestForwarder.Form) {
        let downstream = context.channel
        do {
            try server.pipeline.syncOperations.addHandler(BridgeGate.pump(to: downstream))
            let pipeline = downstream.pipeline.syncOperations
            try pipeline.addHandler(BridgeGate(partner: server))
            try pipeline.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)))
            try pipeline.addHandler(RequestForwarder(form: form, server: server))
        } catch {
            server.close(promise: nil)
            context.close(promise: nil)
            return
        }
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n\r\n")), promise: nil)
        handOver(context: context)
    }

    private func connectUpstream(context: ChannelHandlerContext, proxy upstream: ProxySettings.Server, target: String) {
        let downstream = context.channel
        let connection = connection
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(connection.connectTimeout)
            .connect(host: upstream.host, port: upstream.port)
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .failure(let error):
                    connection.record(target, .unreachable("cannot reach the proxy \(upstream): \(Transfer.describe(error))"))
                    Self.answer(downstream, "502 Bad Gateway")
                case .success(let proxy):
                    guard downstream.isActive else {
                        proxy.close(promise: nil)
                        return
                    }
                    self.proxy = proxy
                    self.openTunnel(context: context, proxy: proxy, target: target, authorization: upstream.authorization)
                }
            }
    }

    /// https: the `CONNECT` goes on to the proxy; its answer decides.
    private func openTunnel(context: ChannelHandlerContext, proxy: any Channel, target: String, authorization: String?) {
        let downstream = context.channel
        let connection = connection
        let answer = ConnectAnswerReader { [self] status, reasonPhrase, authenticate, rest in
            let status = status ?? 502
            guard (200..<300).contains(status) else {
                connection.record(target, .refused(status: status, reasonPhrase: reasonPhrase, authenticate: authenticate))
                // AsyncHTTPClient turns a 407 into proxyAuthenticationRequired, anything else into
                // invalidProxyResponse; the transfer asks the bridge for the status.
                Self.answer(downstream, "\(status) \(status == 407 ? "Proxy Authentication Required" : "Refused")")
                proxy.close(promise: nil)
                return
            }
            connection.record(target, nil)
            do {
                try proxy.pipeline.syncOperations.addHandler(BridgeGate.pump(to: downstream))
                try downstream.pipeline.syncOperations.addHandler(BridgeGate.pump(to: proxy))
            } catch {
                proxy.close(promise: nil)
                downstream.close(promise: nil)
                return
            }
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n\r\n")), promise: nil)
            // Bytes the proxy sent after its answer (the server's first TLS bytes) go on in order.
            if rest.readableBytes > 0 { downstream.writeAndFlush(rest, promise: nil) }
            handOver(context: context)
        }
        do {
            try proxy.pipeline.syncOperations.addHandler(answer)
        } catch {
            proxy.close(promise: nil)
            context.close(promise: nil)
            return
        }
        var head = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization { head += "Proxy-Authorization: \(authorization)\r\n" }
        proxy.writeAndFlush(ByteBuffer(string: head + "\r\n"), promise: nil)
    }

    /// Leaves the channel to the handlers before this one, with what the client sent early.
    private func handOver(context: ChannelHandlerContext) {
        proxy = nil
        let rest = received
        received = ByteBuffer()
        let channel = context.channel
        context.pipeline.syncOperations.removeHandler(self).assumeIsolated().whenSuccess {
            if rest.readableBytes > 0 { channel.pipeline.syncOperations.fireChannelRead(NIOAny(rest)) }
            try? channel.syncOptions?.setOption(.autoRead, value: true)
        }
    }

    /// Answers the client's `CONNECT` with `status` and closes.
    private static func answer(_ channel: any Channel, _ status: String) {
        let text = "HTTP/1.1 \(status)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        channel.writeAndFlush(ByteBuffer(string: text)).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// Reads the proxy's answer to a forwarded `CONNECT` (status line and headers), then gets out of
/// the way; `done` gets the status (nil when the proxy closed first), reason phrase,
/// `Proxy-Authenticate` and the bytes after the head.
final class ConnectAnswerReader: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private var received = ByteBuffer()
    private var done: ((Int?, String, String?, ByteBuffer) -> Void)?

    init(_ done: @escaping (Int?, String, String?, ByteBuffer) -> Void) {
        self.done = done
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        received.writeBuffer(&bytes)
        guard let end = received.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else {
            if received.readableBytes > 64 * 1024 { context.close(promise: nil) }
            return
        }
        let head = received.readString(length: end.upperBound - received.readableBytesView.startIndex) ?? ""
        let lines = head.split(separator: "\r\n")
        let status = lines.first.map { $0.split(separator: " ", maxSplits: 2) } ?? []
        let code = status.count >= 2 ? Int(status[1]) ?? 502 : 502
        let phrase = status.count == 3 ? String(status[2]) : ""
        let authenticate = lines.dropFirst().first { $0.lowercased().hasPrefix("proxy-authenticate:") }
            .map { String($0.dropFirst("proxy-authenticate:".count)).trimmingCharacters(in: .whitespaces) }
        let rest = received
        received = ByteBuffer()
        let callback = done
        done = nil
        context.pipeline.syncOperations.removeHandler(self).assumeIsolated().whenSuccess {
            callback?(code, phrase, authenticate, rest)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Closed before answering.
        let callback = done
        done = nil
        callback?(nil, "", nil, ByteBuffer())
        context.fireChannelInactive()
    }
}

/// Forwards each request read inside the bridge's own tunnel: to a proxy in absolute form, or to
/// the server in origin form; the target is that of the request's `X-Haul-Target` header when it
/// has one (the exact target, which the client could not express), else the client's.
///
/// Bodies pass through (re-chunked when chunked); haul sends none, but a request is never cut.
final class RequestForwarder: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart

    enum Form {
        /// `GET http://authority/path` to a proxy, with the proxy's credentials.
        case absolute(authority: String, authorization: String?)
        /// `GET /path` to the server; no proxy header goes on.
        case origin
    }

    /// The header that carries the exact target from the transfer to the bridge; never forwarded.
    static let targetHeader = "X-Haul-Target"

    private let form: Form
    private let server: any Channel
    private var chunked = false

    init(form: Form, server: any Channel) {
        self.form = form
        self.server = server
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            var target = head.headers.first(name: Self.targetHeader) ?? head.uri
            // Only a target of printable ASCII goes into a request line: never a space or a CR.
            guard target.hasPrefix("/") || head.headers.first(name: Self.targetHeader) == nil,
                  target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                server.close(promise: nil)
                context.close(promise: nil)
                return
            }
            if case .absolute(let authority, _) = form, target.hasPrefix("/") {
                // The target stays byte for byte as given, behind the scheme and authority.
                target = "http://\(authority)\(target)"
            }
            var text = "\(head.method.rawValue) \(target) HTTP/\(head.version.major).\(head.version.minor)\r\n"
            chunked = false
            for (name, value) in head.headers {
                let lowered = name.lowercased()
                if lowered == "proxy-authorization" || lowered == "proxy-connection" || lowered == Self.targetHeader.lowercased() { continue }
                if lowered == "transfer-encoding", value.lowercased().contains("chunked") { chunked = true }
                text += "\(name): \(value)\r\n"
            }
            if case .absolute(_, let authorization?) = form { text += "Proxy-Authorization: \(authorization)\r\n" }
            server.write(ByteBuffer(string: text + "\r\n"), promise: nil)
        case .body(let body):
            if chunked {
                server.write(ByteBuffer(string: String(body.readableBytes, radix: 16) + "\r\n"), promise: nil)
                server.write(body, promise: nil)
                server.write(ByteBuffer(string: "\r\n"), promise: nil)
            } else {
                server.write(body, promise: nil)
            }
        case .end:
            if chunked { server.write(ByteBuffer(string: "0\r\n\r\n"), promise: nil) }
            server.flush()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        server.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A request the decoder cannot read: nothing sensible can be forwarded.
        server.close(promise: nil)
        context.close(promise: nil)
    }
}

/// Lets its channel read only while the partner channel can take more, copies what its channel
/// reads to the partner unchanged (as a pump), and closes the partner with its channel.
///
/// With `autoRead`, NIO asks for the next read after each batch: holding that request back while
/// the partner's outbound buffer is full is what keeps a fast side from filling memory.
final class BridgeGate: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Sent to a channel whose partner became writable again.
    struct PartnerWritable: Sendable {}

    private let partner: any Channel
    /// Copies the bytes read to the partner (else they go on down this channel's pipeline).
    private let pumps: Bool
    private var readPending = false

    init(partner: any Channel, pumps: Bool = false) {
        self.partner = partner
        self.pumps = pumps
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard pumps else {
            context.fireChannelRead(data)
            return
        }
        partner.write(unwrapInboundIn(data), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if pumps { partner.flush() }
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        if partner.isWritable {
            context.read()
        } else {
            readPending = true
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is PartnerWritable else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        if readPending, partner.isWritable {
            readPending = false
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            // Same event loop: the partner's gate runs now.
            partner.pipeline.fireUserInboundEventTriggered(PartnerWritable())
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // What this side sent last (a response before the proxy closed) still reaches the other
        // side: an empty write completes after every write before it.
        let partner = partner
        partner.writeAndFlush(ByteBuffer()).whenComplete { _ in partner.close(promise: nil) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

extension BridgeGate {
    /// A gate that copies what its channel reads to `partner`.
    static func pump(to partner: any Channel) -> BridgeGate {
        BridgeGate(partner: partner, pumps: true)
    }
}
