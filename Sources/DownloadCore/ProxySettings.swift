import Foundation

/// Proxies from the environment, read the way curl reads them.
///
/// `http_proxy` (lower case only: `HTTP_PROXY` can be set by a CGI request's `Proxy:` header) for
/// http URLs; `https_proxy` or `HTTPS_PROXY` for https URLs; `all_proxy`/`ALL_PROXY` for either when
/// the specific one is unset; `no_proxy`/`NO_PROXY`: comma-separated host names, domain suffixes
/// (`example.com` and `.example.com` both match `a.example.com`), IP addresses, or `*` for all.
public struct ProxySettings: Sendable, Hashable {
    public struct Server: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public var user: String?
        public var password: String?

        public init(host: String, port: Int, user: String? = nil, password: String? = nil) {
            self.host = host
            self.port = port
            self.user = user
            self.password = password
        }

        /// `host:port` (`[::1]:3128`), never the credentials.
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    public struct Invalid: Error, Hashable, CustomStringConvertible {
        public var description: String
    }

    public var http: Server?
    public var https: Server?
    public var noProxy: [String] = []

    public init(http: Server? = nil, https: Server? = nil, noProxy: [String] = []) {
        self.http = http
        self.https = https
        self.noProxy = noProxy
    }

    /// The proxies `environment` names; a malformed one is refused with the variable's name.
    public static func from(environment: [String: String]) throws(Invalid) -> ProxySettings {
        func value(_ names: String...) -> (String, String)? {
            for name in names {
                if let text = environment[name]?.trimmingWhitespace(), !text.isEmpty { return (name, text) }
            }
            return nil
        }
        var settings = ProxySettings()
        let all = value("all_proxy", "ALL_PROXY")
        if let (name, text) = value("http_proxy") ?? all { settings.http = try parse(text, variable: name) }
        if let (name, text) = value("https_proxy", "HTTPS_PROXY") ?? all { settings.https = try parse(text, variable: name) }
        if let (_, text) = value("no_proxy", "NO_PROXY") {
            settings.noProxy = text.split(separator: ",").map { $0.trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
        }
        return settings
    }

    /// `[http://][user:password@]host[:port]` (port 1080 when absent, as curl).
    static func parse(_ text: String, variable: String) throws(Invalid) -> Server {
        let withScheme = text.contains("://") ? text : "http://" + text
        guard let components = URLComponents(string: withScheme), let host = components.host, !host.isEmpty else {
            throw Invalid(description: "\(variable) is not a proxy URL like http://host:port")
        }
        guard components.scheme?.lowercased() == "http" else {
            throw Invalid(description: "\(variable): only http:// proxies are supported")
        }
        // A port past 65535 was taken modulo 65536 (a tester's :85036 went to 19500).
        if let problem = URLValidation.portProblem(written: withScheme) {
            throw Invalid(description: "\(variable): \(problem)")
        }
        // `user` and `password` come decoded once (a tester's `100%25` was decoded again, to an
        // empty password); an IPv6 address comes in its brackets, which no resolver takes.
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return Server(host: bare, port: components.port ?? 1080, user: components.user, password: components.password)
    }

    /// The proxy for `url`, nil to connect directly.
    public func server(for url: URL) -> Server? {
        guard let host = url.host?.lowercased() else { return nil }
        let https = url.scheme?.lowercased() == "https"
        if bypasses(host, port: url.port ?? (https ? 443 : 80)) { return nil }
        return https ? self.https : http
    }

    /// Whether `no_proxy` sends `host:port` direct. An entry with a port (`localhost:9999`) is for
    /// that port only (a tester's also sent `localhost:19901` direct; curl does not).
    func bypasses(_ host: String, port: Int) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return noProxy.contains { entry in
            if entry == "*" { return true }
            var pattern = entry
            if let colon = pattern.lastIndex(of: ":"), !pattern.contains("["), pattern.filter({ $0 == ":" }).count == 1 {
                guard Int(pattern[pattern.index(after: colon)...]) == port else { return false }
                pattern = String(pattern[..<colon])
            }
            if pattern.hasPrefix(".") { pattern.removeFirst() }
            return bare == pattern || bare.hasSuffix("." + pattern)
        }
    }
}
