import AsyncHTTPClient
import DownloadCore
import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// The HTTP clients of a session: one that connects directly, one per proxy that reaches it with
/// its own `CONNECT` (https), and the clients of haul's loopback bridges, all with the same timeouts
/// and trust roots.
///
/// A bridge (`ProxyBridge`) is started on first use: for plain http through a proxy (absolute
/// form), and for a URL whose target the client cannot express (`/caf%E9.bin`), which then goes
/// out as a placeholder with its target in `X-Haul-Target`. Any other URL never meets one.
struct HTTPClients: Sendable {
    struct Settings: Sendable {
        var connectTimeout: TimeAmount
        var caCertificates: [NIOSSLCertificate]?
        var proxies: ProxySettings
    }

    /// How a request for one URL goes out.
    struct Route: Sendable {
        /// Who opens the way to the server, and how (`Upstream`, as a probe opens it again).
        enum Way: Sendable {
            /// The client connects to the server itself.
            case direct
            /// The client connects to the proxy and asks it for a tunnel (`CONNECT`) itself.
            case proxyConnect(Upstream)
            /// The client goes through one of haul's bridges, which opens the way so.
            case bridge(Upstream)
        }

        var client: HTTPClient
        var way: Way
        /// The request goes out as `RequestTarget.placeholder`, its target in `X-Haul-Target`.
        var setsTarget: Bool
    }

    private let direct: HTTPClient
    /// Per proxy, a client that reaches it with its own `CONNECT`.
    private let tunnelling: [ProxySettings.Server: HTTPClient]
    private let proxies: ProxySettings
    let connectTimeout: TimeAmount
    private let bridges: Bridges

    init(_ settings: Settings) {
        proxies = settings.proxies
        connectTimeout = settings.connectTimeout
        direct = Self.client(settings, proxy: nil)
        bridges = Bridges(settings)
        var tunnelling: [ProxySettings.Server: HTTPClient] = [:]
        for server in [settings.proxies.http, settings.proxies.https].compactMap({ $0 }) where tunnelling[server] == nil {
            tunnelling[server] = Self.client(settings, proxy: server)
        }
        self.tunnelling = tunnelling
    }

    /// The route of a request to `url` (by its scheme, `no_proxy`, and whether the client can
    /// express its target); nil when it cannot be sent as written (no bridge could start).
    func route(for url: URL) -> Route? {
        let https = url.scheme?.lowercased() == "https"
        let proxy = proxies.server(for: url)
        let expressible = RequestTarget.isExpressible(url)
        if let proxy, !https {
            // Absolute form through a bridge; the bridge sets an exact target too.
            if let (client, upstream) = bridges.client(for: .absoluteForm(via: proxy)) {
                return Route(client: client, way: .bridge(upstream), setsTarget: !expressible)
            }
            // No bridge: the client's own CONNECT (which squid refuses for port 80).
            return expressible ? tunnelled(through: proxy) : nil
        }
        if expressible {
            guard let proxy else { return Route(client: direct, way: .direct, setsTarget: false) }
            return tunnelled(through: proxy)
        }
        guard let (client, upstream) = bridges.client(for: .origin(via: proxy, tls: https)) else { return nil }
        return Route(client: client, way: .bridge(upstream), setsTarget: true)
    }

    private func tunnelled(through proxy: ProxySettings.Server) -> Route? {
        tunnelling[proxy].map { client in
            Route(client: client, way: .proxyConnect(Upstream(route: .origin(via: proxy, tls: false), connectTimeout: connectTimeout)), setsTarget: false)
        }
    }

    /// The proxy a request to `url` goes through, if any.
    func proxy(for url: URL) -> ProxySettings.Server? {
        proxies.server(for: url)
    }

    func shutdown() async {
        try? await direct.shutdown()
        for client in tunnelling.values {
            try? await client.shutdown()
        }
        await bridges.shutdown()
    }

    /// haul's bridges and their clients, each started on first use.
    private final class Bridges: Sendable {
        private struct Started: Sendable {
            var bridge: ProxyBridge
            var client: HTTPClient
            var upstream: Upstream
        }

        private let settings: Settings
        private let started = Mutex<[UpstreamRoute: Started]>([:])

        init(_ settings: Settings) {
            self.settings = settings
        }

        /// The client that goes through the bridge for `route`, and the bridge's way on; nil when
        /// no bridge can start.
        func client(for route: UpstreamRoute) -> (HTTPClient, Upstream)? {
            started.withLock { started in
                if let bridged = started[route] { return (bridged.client, bridged.upstream) }
                var upstream = Upstream(route: route, connectTimeout: settings.connectTimeout)
                if case .origin(_, true) = route {
                    // The bridge speaks TLS with the server in the client's place, trusting what it trusts.
                    guard let tls = started.values.lazy.compactMap(\.upstream.tls).first ?? Upstream.tlsContext(trusting: settings.caCertificates) else { return nil }
                    upstream.tls = tls
                }
                guard let bridge = try? ProxyBridge(upstream, group: HTTPClient.defaultEventLoopGroup) else { return nil }
                // The bridge adds the proxy's credentials itself; the client gives the bridge its own.
                let client = HTTPClients.client(settings, proxy: .init(host: "127.0.0.1", port: bridge.port, user: bridge.credentials.user, password: bridge.credentials.password))
                started[route] = Started(bridge: bridge, client: client, upstream: upstream)
                return (client, upstream)
            }
        }

        func shutdown() async {
            let all = started.withLock { started in
                defer { started = [:] }
                return Array(started.values)
            }
            for bridged in all {
                try? await bridged.client.shutdown()
                await bridged.bridge.shutdown()
            }
        }
    }

    /// How long a TLS connection haul closes (a download paused, cancelled or stopped at exit) waits
    /// for the server's `close_notify` before it closes anyway. NIOSSL's default, 5 s, held every
    /// exit with an https download running until the 1.8 s watchdog (`Interruption`) ended it:
    /// `HTTPClient.shutdown` waits for its connections to close.
    static let tlsShutdownTimeout = TimeAmount.milliseconds(100)

    private static func client(_ settings: Settings, proxy: ProxySettings.Server?) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            // Followed by the transfer itself, which checks every hop (`Redirects`).
            redirectConfiguration: .disallow,
            // No read timeout: each response measures its own stalls from when it is ready for more
            // bytes (`ResponseStream`), which a speed limit that changes while it runs cannot upset.
            timeout: .init(connect: settings.connectTimeout, read: nil),
            decompression: .disabled
        )
        // HTTP/2 costs about twice the CPU for bulk bodies.
        configuration.httpVersion = .http1Only
        // The session's maxActive is the limit. AsyncHTTPClient's default of 8 connections per host
        // would leave a ninth download to one host waiting for a connection until it timed out.
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        // A refused connection or a failed TLS handshake is reported at once: haul retries with its
        // own backoff and says why on the row. AsyncHTTPClient would otherwise try again silently
        // until the connect timeout, and the row would say "connecting…" for ten seconds.
        configuration.connectionPool.retryConnectionEstablishment = false
        var tls = TLSConfiguration.makeClientConfiguration()
        // Like curl's --cacert: these roots replace the system's.
        if let certificates = settings.caCertificates { tls.trustRoots = .certificates(certificates) }
        tls.shutdownTimeout = Self.tlsShutdownTimeout
        // TLS 1.2 at least, as curl: 1.0 and 1.1 were accepted without a word (a tester).
        tls.minimumTLSVersion = .tlsv12
        configuration.tlsConfiguration = tls
        if let proxy {
            let authorization = proxy.user.map { HTTPClient.Authorization.basic(username: $0, password: proxy.password ?? "") }
            configuration.proxy = .server(host: proxy.host, port: proxy.port, authorization: authorization)
        }
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }
}

/// Certificates for `--ca-certificate`.
public enum TrustRoots {
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    /// The PEM certificates in the file at `path`, or a one-line reason.
    static func load(_ path: String) throws(Invalid) -> [NIOSSLCertificate] {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw Invalid(description: "the CA certificate file \(TerminalText.sanitize(path)) is a directory")
        }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw Invalid(description: "cannot read the CA certificate file \(TerminalText.sanitize(path))")
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw Invalid(description: "\(TerminalText.sanitize(path)) holds no PEM certificate")
        }
        guard !certificates.isEmpty else { throw Invalid(description: "\(TerminalText.sanitize(path)) holds no PEM certificate") }
        return certificates
    }

    /// Checks the file before anything else happens (bad input is refused up front).
    public static func check(_ path: String) throws(Invalid) {
        _ = try load(path)
    }
}
