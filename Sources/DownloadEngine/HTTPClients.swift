import AsyncHTTPClient
import DownloadCore
import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// The HTTP clients of a session: one that connects directly and, per proxy, one for https URLs
/// (AsyncHTTPClient takes its proxy per client), and the clients of haul's loopback bridges, all
/// with the same timeouts and trust roots.
///
/// A bridge (`ProxyBridge`) is started on first use: for plain http through a proxy (absolute
/// form), and for a URL whose target the client cannot express (`/caf%E9.bin`), which then goes
/// out as a placeholder with its target in `X-Haul-Target`. Any other URL never meets one.
struct HTTPClients: Sendable {
    struct Settings: Sendable {
        var connectTimeout: TimeAmount
        var readTimeout: TimeAmount
        var caCertificates: [NIOSSLCertificate]?
        var proxies: ProxySettings
    }

    /// How a request for one URL goes out.
    struct Route: Sendable {
        var client: HTTPClient
        /// The bridge's way to the server, when the client goes through a bridge.
        var upstream: Upstream?
        /// The request goes out as `RequestTarget.placeholder`, its target in `X-Haul-Target`.
        var setsTarget: Bool
    }

    /// The clients that reach one proxy for https, and the bridge they reach it through.
    private struct Proxied: Sendable {
        var https: HTTPClient
        /// Nil only if no loopback port could be had: then AsyncHTTPClient's own CONNECT is used.
        var bridge: ProxyBridge?
    }

    private let direct: HTTPClient
    private let proxied: [ProxySettings.Server: Proxied]
    private let proxies: ProxySettings
    private let bridges: Bridges

    init(_ settings: Settings) {
        proxies = settings.proxies
        direct = Self.client(settings, proxy: nil)
        bridges = Bridges(settings)
        var proxied: [ProxySettings.Server: Proxied] = [:]
        for server in [settings.proxies.http, settings.proxies.https].compactMap({ $0 }) where proxied[server] == nil {
            guard let bridge = try? ProxyBridge(.tunnel(server), group: HTTPClient.defaultEventLoopGroup, connectTimeout: settings.connectTimeout) else {
                // No bridge: one client straight to the proxy (CONNECT for every URL).
                proxied[server] = Proxied(https: Self.client(settings, proxy: server), bridge: nil)
                continue
            }
            // The bridge adds the proxy's credentials itself.
            proxied[server] = Proxied(https: Self.client(settings, proxy: .init(host: "127.0.0.1", port: bridge.port)), bridge: bridge)
        }
        self.proxied = proxied
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
                return Route(client: client, upstream: upstream, setsTarget: !expressible)
            }
            return expressible ? proxied[proxy].map { Route(client: $0.https, upstream: nil, setsTarget: false) } : nil
        }
        if expressible {
            guard let proxy else { return Route(client: direct, upstream: nil, setsTarget: false) }
            return proxied[proxy].map { Route(client: $0.https, upstream: nil, setsTarget: false) }
        }
        guard let (client, upstream) = bridges.client(for: .origin(via: proxy, tls: https)) else { return nil }
        return Route(client: client, upstream: upstream, setsTarget: true)
    }

    /// The proxy a request to `url` goes through, if any.
    func proxy(for url: URL) -> ProxySettings.Server? {
        proxies.server(for: url)
    }

    /// The proxy `url` goes through and why it last refused a tunnel to the URL's host, if it did.
    func proxyRefusal(for url: URL) -> (proxy: ProxySettings.Server, refusal: ProxyRefusal?)? {
        guard let server = proxies.server(for: url), let clients = proxied[server], let host = url.host else { return nil }
        let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        return (server, clients.bridge?.refusal(host: host, port: port))
    }

    func shutdown() async {
        try? await direct.shutdown()
        for clients in proxied.values {
            try? await clients.https.shutdown()
            await clients.bridge?.shutdown()
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
        private let started = Mutex<[BridgeRoute: Started]>([:])

        init(_ settings: Settings) {
            self.settings = settings
        }

        /// The client that goes through the bridge for `route`, and the bridge's way on; nil when
        /// no bridge can start.
        func client(for route: BridgeRoute) -> (HTTPClient, Upstream)? {
            started.withLock { started in
                if let bridged = started[route] { return (bridged.client, bridged.upstream) }
                var upstream = Upstream(route: route, connectTimeout: settings.connectTimeout, tls: nil)
                if case .origin(_, true) = route {
                    // The bridge speaks TLS with the server in the client's place, trusting what it trusts.
                    guard let tls = started.values.lazy.compactMap(\.upstream.tls).first ?? Upstream.tlsContext(trusting: settings.caCertificates) else { return nil }
                    upstream.tls = tls
                }
                guard let bridge = try? ProxyBridge(.forward(upstream), group: HTTPClient.defaultEventLoopGroup, connectTimeout: settings.connectTimeout) else { return nil }
                // The bridge adds the proxy's credentials itself.
                let client = HTTPClients.client(settings, proxy: .init(host: "127.0.0.1", port: bridge.port))
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

    private static func client(_ settings: Settings, proxy: ProxySettings.Server?) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            // Followed by the transfer itself, which checks every hop (`Redirects`).
            redirectConfiguration: .disallow,
            timeout: .init(connect: settings.connectTimeout, read: settings.readTimeout),
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
        if let certificates = settings.caCertificates {
            // Like curl's --cacert: these roots replace the system's.
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates(certificates)
            configuration.tlsConfiguration = tls
        }
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
