import AsyncHTTPClient
import DownloadCore
import Foundation
import NIOCore
import NIOSSL

/// The HTTP clients of a session: one that connects directly and, per proxy, one for http URLs and
/// one for https URLs (AsyncHTTPClient takes its proxy per client), all with the same timeouts and
/// trust roots.
///
/// The proxied clients reach their proxy through a `ProxyBridge` on 127.0.0.1, so that plain http
/// goes to the proxy in absolute form and a refused `CONNECT` can be said with its status.
struct HTTPClients: Sendable {
    struct Settings: Sendable {
        var connectTimeout: TimeAmount
        var readTimeout: TimeAmount
        var caCertificates: [NIOSSLCertificate]?
        var proxies: ProxySettings
    }

    /// The clients that reach one proxy, and the bridge they reach it through.
    private struct Proxied: Sendable {
        var http: HTTPClient
        var https: HTTPClient
        /// Nil only if no loopback port could be had: then AsyncHTTPClient's own CONNECT is used.
        var bridge: ProxyBridge?
    }

    private let direct: HTTPClient
    private let proxied: [ProxySettings.Server: Proxied]
    private let proxies: ProxySettings

    init(_ settings: Settings) {
        proxies = settings.proxies
        direct = Self.client(settings, proxy: nil)
        var proxied: [ProxySettings.Server: Proxied] = [:]
        for server in [settings.proxies.http, settings.proxies.https].compactMap({ $0 }) where proxied[server] == nil {
            guard let bridge = try? ProxyBridge(upstream: server, group: HTTPClient.defaultEventLoopGroup, connectTimeout: settings.connectTimeout) else {
                // No bridge: one client straight to the proxy (CONNECT for every URL).
                let client = Self.client(settings, proxy: server)
                proxied[server] = Proxied(http: client, https: client, bridge: nil)
                continue
            }
            func via(_ port: Int) -> HTTPClient {
                // The bridge adds the proxy's credentials itself.
                Self.client(settings, proxy: ProxySettings.Server(host: "127.0.0.1", port: port))
            }
            proxied[server] = Proxied(http: via(bridge.absoluteFormPort), https: via(bridge.tunnelPort), bridge: bridge)
        }
        self.proxied = proxied
    }

    /// The client for a request to `url` (by its scheme and `no_proxy`).
    func client(for url: URL) -> HTTPClient {
        guard let server = proxies.server(for: url), let clients = proxied[server] else { return direct }
        return url.scheme?.lowercased() == "https" ? clients.https : clients.http
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
            try? await clients.http.shutdown()
            if clients.https !== clients.http { try? await clients.https.shutdown() }
            await clients.bridge?.shutdown()
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
