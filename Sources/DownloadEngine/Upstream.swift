import DownloadCore
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// How a connection reaches the server of a request: the way haul's loopback bridge opens for the
/// requests AsyncHTTPClient hands it, or (`origin(via: proxy, tls: false)`) the client's own
/// `CONNECT` through a proxy, as a probe opens it again.
enum UpstreamRoute: Sendable, Hashable {
    /// Plain http through a proxy: requests go to the proxy in absolute form (`GET http://host/path`).
    case absoluteForm(via: ProxySettings.Server)
    /// Requests go to the server in origin form (`GET /path`), over TLS when `tls`: straight, or
    /// through the proxy's `CONNECT` tunnel. For targets the client cannot express.
    case origin(via: ProxySettings.Server?, tls: Bool)

    /// The proxy on the way, if any.
    var proxy: ProxySettings.Server? {
        switch self {
        case .absoluteForm(let proxy): proxy
        case .origin(let proxy, _): proxy
        }
    }
}

/// Opens the connection a request to `host:port` travels on, the way an `UpstreamRoute` says: to the
/// proxy, through its `CONNECT` tunnel, or straight to the server, then TLS with the server.
///
/// The bridge uses it for every connection; after a failure the transfer opens it once more (a
/// probe) to learn why, since AsyncHTTPClient reports every refusal of its proxy (or of the bridge)
/// without a reason. Nothing is shared between the two: no map of refusals to race on.
struct Upstream: Sendable {
    var route: UpstreamRoute
    var connectTimeout: TimeAmount
    /// For `origin(tls: true)`: the session's trust roots, full verification.
    var tls: NIOSSLContext?

    init(route: UpstreamRoute, connectTimeout: TimeAmount, tls: NIOSSLContext? = nil) {
        self.route = route
        self.connectTimeout = connectTimeout
        self.tls = tls
    }

    /// Why the way to the server could not be opened, besides the connection and TLS errors of
    /// the server itself.
    enum Failure: Error, Sendable {
        /// The proxy could not be reached.
        case proxyUnreachable(ProxySettings.Server, any Error)
        /// The proxy answered `CONNECT` with this status (and `Proxy-Authenticate` for a 407).
        case refused(status: Int, reasonPhrase: String, authenticate: String?)
        /// The proxy closed the connection without answering `CONNECT`.
        case closedByProxy
        /// The proxy did not answer `CONNECT` in time.
        case proxyTimedOut
        /// The TLS handshake with the server did not end in time.
        case handshakeTimedOut
        /// No TLS context could be made.
        case noTLS
    }

    /// The TLS client settings of a session: its trust roots (`--ca-certificate`), else the
    /// system's; full verification; HTTP/1.1 only, as AsyncHTTPClient offers it.
    static func tlsContext(trusting certificates: [NIOSSLCertificate]?) -> NIOSSLContext? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let certificates { configuration.trustRoots = .certificates(certificates) }
        configuration.applicationProtocols = ["http/1.1"]
        configuration.shutdownTimeout = HTTPClients.tlsShutdownTimeout
        configuration.minimumTLSVersion = .tlsv12
        return try? NIOSSLContext(configuration: configuration)
    }

    /// The connection, on `loop`, ready to carry requests; fails with a `Failure`, or with the
    /// server's own connection or TLS error.
    func open(host: String, port: Int, on loop: any EventLoop) -> EventLoopFuture<any Channel> {
        let first: (host: String, port: Int) = route.proxy.map { ($0.host, $0.port) } ?? (host, port)
        let route = route
        let connected = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(connectTimeout)
            .connect(host: first.host, port: first.port)
            .flatMapErrorThrowing { error in
                if let proxy = route.proxy { throw Failure.proxyUnreachable(proxy, error) }
                throw error
            }
        return connected.flatMap { channel in
            let ready = self.prepare(channel, host: host, port: port)
            // However it ends, a connection that is not handed on is closed.
            ready.whenFailure { _ in channel.close(promise: nil) }
            return ready.map { channel }
        }
    }

    /// `CONNECT` through the proxy and TLS with the server, as the route asks, within the connect
    /// timeout.
    private func prepare(_ channel: any Channel, host: String, port: Int) -> EventLoopFuture<Void> {
        let loop = channel.eventLoop
        let done = loop.makePromise(of: Void.self)
        let timer = loop.scheduleTask(in: connectTimeout) {
            done.fail(route.proxy != nil && !tunnelled(channel) ? Failure.proxyTimedOut : Failure.handshakeTimedOut)
        }
        done.futureResult.whenComplete { _ in timer.cancel() }
        // What a proxy sent after accepting `CONNECT` is the server's: it goes on through TLS. (The
        // one route with `CONNECT` and no TLS is the probe of the client's own, which closes at once.)
        var steps = loop.makeSucceededFuture(ByteBuffer())
        if case .origin(let proxy?, _) = route {
            steps = Self.connect(channel, to: host, port: port, authorization: proxy.authorization)
        }
        if case .origin(_, true) = route {
            steps.flatMap { early in self.handshake(channel, host: host, early: early) }.cascade(to: done)
        } else {
            steps.map { _ in }.cascade(to: done)
        }
        return done.futureResult
    }

    /// Whether the proxy has accepted the `CONNECT` (its answer reader is gone).
    private func tunnelled(_ channel: any Channel) -> Bool {
        (try? channel.pipeline.syncOperations.handler(type: ConnectAnswerReader.self)) == nil
    }

    /// Sends `CONNECT host:port` and succeeds once the proxy accepted it, with the bytes that came
    /// after its answer.
    private static func connect(_ channel: any Channel, to host: String, port: Int, authorization: String?) -> EventLoopFuture<ByteBuffer> {
        let answered = channel.eventLoop.makePromise(of: ByteBuffer.self)
        let target = "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        let reader = ConnectAnswerReader { status, reasonPhrase, authenticate, rest in
            guard let status else {
                answered.fail(Failure.closedByProxy)
                return
            }
            guard (200..<300).contains(status) else {
                answered.fail(Failure.refused(status: status, reasonPhrase: reasonPhrase, authenticate: authenticate))
                return
            }
            answered.succeed(rest)
        }
        do {
            try channel.pipeline.syncOperations.addHandler(reader)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        var head = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization { head += "Proxy-Authorization: \(authorization)\r\n" }
        channel.writeAndFlush(ByteBuffer(string: head + "\r\n"), promise: nil)
        return answered.futureResult
    }

    /// TLS with the server, verified as AsyncHTTPClient verifies it: the name sent (SNI) and checked
    /// is the host, or none for an IP address (its certificate is checked for the address).
    private func handshake(_ channel: any Channel, host: String, early: ByteBuffer) -> EventLoopFuture<Void> {
        guard let tls else { return channel.eventLoop.makeFailedFuture(Failure.noTLS) }
        let done = channel.eventLoop.makePromise(of: Void.self)
        let isAddress = (try? SocketAddress(ipAddress: host, port: 0)) != nil
        do {
            let watcher = HandshakeWatcher(done)
            try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: isAddress ? nil : host))
            try channel.pipeline.syncOperations.addHandler(watcher)
            if early.readableBytes > 0 { channel.pipeline.syncOperations.fireChannelRead(NIOAny(early)) }
        } catch {
            done.fail(error)
        }
        return done.futureResult
    }

    /// Opens the connection once and closes it: nil when it opened, else why it did not.
    func probe(host: String, port: Int, group: any EventLoopGroup) async -> (any Error)? {
        do {
            let channel = try await open(host: host, port: port, on: group.next()).get()
            try? await channel.close()
            return nil
        } catch {
            return error
        }
    }

    /// Completes `done` when the TLS handshake completed (and leaves), or with the error that ended it.
    private final class HandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        private let done: EventLoopPromise<Void>

        init(_ done: EventLoopPromise<Void>) {
            self.done = done
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            context.fireUserInboundEventTriggered(event)
            guard case .handshakeCompleted? = event as? TLSUserEvent else { return }
            // Out of the way before anyone reads through the connection.
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            done.succeed()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            done.fail(error)
            context.fireErrorCaught(error)
        }

        func channelInactive(context: ChannelHandlerContext) {
            done.fail(ChannelError.eof)
            context.fireChannelInactive()
        }
    }
}

/// Reads the proxy's answer to a `CONNECT` (status line and headers), then gets out of the way;
/// `done` gets the status (nil when the proxy closed first), reason phrase, `Proxy-Authenticate`
/// and the bytes after the head.
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
            .map { String($0.dropFirst("proxy-authenticate:".count)).trimmingWhitespace() }
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

extension ProxySettings.Server {
    /// `Proxy-Authorization` for this proxy, when its URL has `user:password@`.
    var authorization: String? {
        user.map { user in "Basic " + Data("\(user):\(password ?? "")".utf8).base64EncodedString() }
    }
}
