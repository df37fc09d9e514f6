import Foundation

/// Who answered a request that went to a proxy in absolute form: the proxy itself (its own error
/// page: a policy refusal, a name it could not resolve), or the server behind it.
///
/// Told by what proxies put in their own answers, measured with squid 5.7 and tinyproxy 1.11:
/// 1. `X-Squid-Error` (squid's own pages): the proxy.
/// 2. `Proxy-Status` (RFC 9209), its last member (the intermediary nearest haul): `error=` says that
///    intermediary made the answer, `received-status=` that it passed on the server's.
/// 3. A `Server` product named in the last `Via` entry (squid's page: `Server: squid/5.7` and
///    `Via: 1.1 vm (squid/5.7)`), or `Server: tinyproxy` (its pages have no `Via`): the proxy.
/// 4. Any other `Via`: a proxy passed the answer on (RFC 9110 asks it to add `Via`): the server.
/// 5. Nothing of these: either; the message says both.
public enum ResponseSource: Sendable, Hashable {
    /// The proxy (`host:port`) answered itself.
    case proxy(String)
    /// Nothing tells the proxy's own answer from the server's.
    case proxyOrServer(String)

    /// Who answered, from the response's `headers`, for a request through `proxy` (`host:port`);
    /// nil for the server behind it.
    public static func of(headers: [(name: String, value: String)], proxy: String) -> ResponseSource? {
        func values(_ name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name }.map(\.value)
        }
        if !values("x-squid-error").isEmpty { return .proxy(proxy) }
        if let last = lastMember(values("proxy-status").joined(separator: ",")) {
            let parameters = last.split(separator: ";").dropFirst().map { $0.split(separator: "=").first?.trimmingWhitespace().lowercased() ?? "" }
            if parameters.contains("error") { return .proxy(proxy) }
            if parameters.contains("received-status") { return nil }
        }
        let product = values("server").first.map { $0.trimmingWhitespace().prefix { $0 != "/" && $0 != " " }.lowercased() } ?? ""
        let via = lastMember(values("via").joined(separator: ","))
        if product.count >= 3, via?.lowercased().contains(product) == true || product == "tinyproxy" { return .proxy(proxy) }
        return via == nil ? .proxyOrServer(proxy) : nil
    }

    /// The last member of a comma-separated list (commas in quotes or comments do not count).
    static func lastMember(_ list: String) -> String? {
        var start = list.startIndex
        var quoted = false
        var depth = 0
        for index in list.indices {
            switch list[index] {
            case "\"": quoted.toggle()
            case "(" where !quoted: depth += 1
            case ")" where !quoted: depth = max(0, depth - 1)
            case "," where !quoted && depth == 0: start = list.index(after: index)
            default: break
            }
        }
        let last = list[start...].trimmingWhitespace()
        return last.isEmpty ? nil : last
    }

    /// ` (from the proxy host:port)`, or ` (… or the server behind it)` for a 403 (a proxy's
    /// refusal read as the server's misleads most); "" otherwise, and for a 407 (always the proxy's,
    /// and said so).
    func suffix(status: Int) -> String {
        switch self {
        case _ where status == 407: ""
        case .proxy(let proxy): " (from the proxy \(proxy))"
        case .proxyOrServer(let proxy) where status == 403: " (from the proxy \(proxy) or the server behind it)"
        case .proxyOrServer: ""
        }
    }
}
