import DownloadCore
import Testing

/// Whether a proxy answered a plain-http request itself, by the headers it puts in its own answers.
@Suite struct ResponseSourceTests {
    static let proxy = "127.0.0.1:3128"

    @Test(arguments: [
        // squid 5.7's own page, and an origin's 403 squid passed on (both as measured).
        (["Server: squid/5.7", "X-Squid-Error: ERR_ACCESS_DENIED 0", "Via: 1.1 vm (squid/5.7)"], ResponseSource.proxy(proxy)),
        (["Server: BaseHTTP/0.6 Python/3.11.7", "X-Cache: MISS from vm", "Via: 1.1 vm (squid/5.7)"], nil),
        // tinyproxy 1.11's own page (no Via), and an origin's it passed on.
        (["Server: tinyproxy/1.11.1", "Content-Type: text/html"], .proxy(proxy)),
        (["Via: 1.1 vm (tinyproxy/1.11.1)", "Server: BaseHTTP/0.6 Python/3.11.7"], nil),
        // RFC 9209: the last member is the intermediary nearest haul.
        (["Proxy-Status: cache.example; error=http_request_denied"], .proxy(proxy)),
        (["Proxy-Status: origin-cdn; error=connection_refused, cache.example; received-status=502"], nil),
        (["proxy-status: a; details=\"x, y\"; error=dns_error"], .proxy(proxy)),
        // A product named in the last Via entry only: an earlier hop's is not the proxy's.
        (["Server: Varnish", "Via: 1.1 varnish (Varnish/6.0)"], .proxy(proxy)),
        (["Server: squid/5.7", "Via: 1.1 rev (squid/5.7), 1.1 gw (ATS/9.2)"], nil),
        // Nothing says whose it is.
        (["Server: nginx"], .proxyOrServer(proxy)),
        ([], .proxyOrServer(proxy)),
    ])
    func whoAnsweredIsToldByTheProxysOwnHeaders(lines: [String], source: ResponseSource?) {
        let headers = lines.map { line in
            let parts = line.split(separator: ":", maxSplits: 1)
            return (name: String(parts[0]), value: parts.count > 1 ? String(parts[1]).trimmingCharacters(in: .whitespaces) : "")
        }
        #expect(ResponseSource.of(headers: headers, proxy: Self.proxy) == source, "\(lines)")
    }

    @Test func theStatusTextNamesTheProxyAndSaysBothOnlyForA403() {
        var facts = ResponseFacts(status: 403, reasonPhrase: "Forbidden")
        facts.source = .proxy(Self.proxy)
        #expect(facts.failureText == "HTTP 403 Forbidden (from the proxy 127.0.0.1:3128)")
        facts.source = .proxyOrServer(Self.proxy)
        #expect(facts.failureText == "HTTP 403 Forbidden (from the proxy 127.0.0.1:3128 or the server behind it)")
        facts.status = 404
        facts.reasonPhrase = "Not Found"
        #expect(facts.failureText == "HTTP 404 Not Found", "a 404 is the server's as a rule")
        // squid cannot resolve the name: a retry says whose 503 it is.
        var unavailable = ResponseFacts(status: 503, reasonPhrase: "Service Unavailable")
        unavailable.source = .proxy(Self.proxy)
        #expect(ResumeRules.decide(plan: .fresh(discarding: nil), response: unavailable, knownTotal: nil, validators: Validators())
            == .retry(reason: "HTTP 503 Service Unavailable (from the proxy 127.0.0.1:3128)", retryAfter: nil))
        // A 407 is always the proxy's, and says so already.
        var authentication = ResponseFacts(status: 407, reasonPhrase: "Proxy Authentication Required")
        authentication.source = .proxy(Self.proxy)
        #expect(authentication.failureText.hasPrefix("HTTP 407 Proxy Authentication Required: the proxy wants"))
        authentication.sentProxyCredentials = true
        #expect(authentication.failureText == "HTTP 407 Proxy Authentication Required: the proxy refused the credentials given in the proxy URL for it")
    }
}
