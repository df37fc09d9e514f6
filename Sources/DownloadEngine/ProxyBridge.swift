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

/// A forward proxy on 127.0.0.1 that AsyncHTTPClient uses in place of the real one, for what the
/// client cannot do itself. AsyncHTTPClient 1.37 reaches every URL through a proxy with `CONNECT`
/// (http included), cannot send an absolute-form target, and builds the request target from
/// Foundation's decoded path (`/caf%E9.bin` would go out as `/`).
///
/// One bridge, one listener, one way on (`Upstream`): the bridge answers `CONNECT host:port` itself
/// with 200 once that way is open (to the proxy for absolute form; to the server, straight or
/// through the proxy's `CONNECT`, over TLS for https), then reads the HTTP/1.1 requests inside
/// that tunnel and forwards each, with the target of its `X-Haul-Target` header when it has one:
/// to the proxy in absolute form (with `Proxy-Authorization`), or to the server in origin form.
/// Responses go back byte for byte, on the same connection, however many requests it carries.
/// A way that cannot be opened is answered with 502 (the transfer's probe says why).
///
/// Both sides of a connection close together; reading stops on one side while the other cannot take
/// more (no body is ever held whole).
///
/// Only haul's own client may use it: every `CONNECT` must carry the bridge's secret as its
/// `Proxy-Authorization` (the client is given it as its proxy's credentials), or it is answered
/// with 407 and closed. Any local user could otherwise reach the proxy through it with haul's
/// credentials (a tester's, as `nobody`, was let through squid as haul's user).
final class ProxyBridge: Sendable {
    let port: Int
    /// The credentials haul's client gives the bridge (`user`, `password`): random, made per bridge.
    let credentials: (user: String, password: String)
    private let listener: EventLoopFuture<any Channel>

    struct StartFailure: Error {}

    /// Listens on a loopback port. The socket is bound and listening when this returns (no wait
    /// for an event loop: connections queue in the kernel until the channel is registered).
    init(_ upstream: Upstream, group: any EventLoopGroup) throws(StartFailure) {
        let socket: Int32
        (socket, port) = try Self.listeningSocket()
        var random = SystemRandomNumberGenerator()
        let password = (0..<4).map { _ in String(random.next(), radix: 16) }.joined()
        credentials = ("haul", password)
        let expected = "Basic " + Data("haul:\(password)".utf8).base64EncodedString()
        listener = ServerBootstrap(group: group)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(BridgeHandshake(upstream, authorization: expected))
                }
            }
            .withBoundSocket(socket)
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

/// Reads the `CONNECT host:port` that opens a connection to the bridge, opens the way on, and hands
/// both channels to the handlers that forward requests.
final class BridgeHandshake: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let upstream: Upstream
    /// The `Proxy-Authorization` every `CONNECT` must carry: haul's client's.
    private let authorization: String
    private var received = ByteBuffer()
    private var started = false
    /// The connection on (to the proxy or the server), until the forwarding handlers own it.
    private var server: (any Channel)?

    init(_ upstream: Upstream, authorization: String) {
        self.upstream = upstream
        self.authorization = authorization
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
        let lines = head.split(separator: "\r\n")
        let words = (lines.first ?? "").split(separator: " ")
        guard words.count == 3, words[0] == "CONNECT", let (host, port) = Self.hostAndPort(words[1]) else {
            Self.answer(context.channel, "405 Method Not Allowed")
            return
        }
        guard Self.authorization(in: lines.dropFirst()) == authorization else {
            Self.answer(context.channel, "407 Proxy Authentication Required")
            return
        }
        started = true
        // Nothing else is read until the tunnel is up (the client sends nothing before the 200).
        try? context.channel.syncOptions?.setOption(.autoRead, value: false)
        open(context: context, host: host, port: port)
    }

    /// The value of the `Proxy-Authorization` header among `lines`, if one is there.
    static func authorization(in lines: ArraySlice<Substring>) -> String? {
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == "proxy-authorization" else { continue }
            return line[line.index(after: colon)...].trimmingWhitespace()
        }
        return nil
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
        // The client gave up before the way on was open (it has its own connect timeout).
        server?.close(promise: nil)
        server = nil
        context.fireChannelInactive()
    }

    /// Opens the way to `host:port`; requests inside the bridge's own tunnel go on in absolute form
    /// (to a proxy) or origin form (to the server).
    private func open(context: ChannelHandlerContext, host: String, port: Int) {
        let downstream = context.channel
        let upstream = upstream
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
                self.server = server
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

    /// Leaves the channel to the handlers before this one, with what the client sent early.
    private func handOver(context: ChannelHandlerContext) {
        server = nil
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
    /// The channel ended with an error, not a clean close.
    private var failed = false

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
        let abort = failed
        partner.writeAndFlush(ByteBuffer()).whenComplete { _ in
            guard abort else {
                partner.close(promise: nil)
                return
            }
            // Ended by an error (a TLS close without close_notify, a reset): the other side is reset
            // too, never closed cleanly. A clean close ends a body without a length as whole: a
            // tester's https body cut short was completed, exit 0, when its path went through here.
            guard let socket = partner as? any SocketOptionProvider else {
                partner.close(promise: nil)
                return
            }
            socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in partner.close(promise: nil) }
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failed = true
        context.close(promise: nil)
    }
}

extension BridgeGate {
    /// A gate that copies what its channel reads to `partner`.
    static func pump(to partner: any Channel) -> BridgeGate {
        BridgeGate(partner: partner, pumps: true)
    }
}
