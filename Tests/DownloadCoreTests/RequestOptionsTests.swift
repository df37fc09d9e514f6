import DownloadCore
import Foundation
import Testing

/// Parsing what people type for headers, checksums, rates and proxies, and the queue rules for
/// downloads added without running them.
@Suite struct RequestOptionsTests {
    @Test func headersParseLikeCurl() throws {
        #expect(try HeaderField.parse("X-Token: abc def") == HeaderField(name: "X-Token", value: "abc def"))
        #expect(try HeaderField.parse("Accept:application/json") == HeaderField(name: "Accept", value: "application/json"))
        #expect(try HeaderField.parse("X-Empty:") == HeaderField(name: "X-Empty", value: ""))
        #expect(try HeaderField.parse("Cookie: a=b: c") == HeaderField(name: "Cookie", value: "a=b: c"))
    }

    @Test(arguments: [
        ("no colon here", "is not 'Name: value'"),
        (": value", "is not a valid HTTP field name"),
        ("Bad Name: x", "is not a valid HTTP field name"),
        ("X-A: b\r\nX-B: c", "control characters"),
        ("X-A: b\nc", "control characters"),
        ("X-A: \u{1B}[31mred", "control characters"),
        ("Range: bytes=5-", "set by haul itself"),
        ("if-range: x", "set by haul itself"),
        ("Accept-Encoding: gzip", "set by haul itself"),
        ("Host: evil", "set by haul itself"),
    ])
    func badHeadersAreRefused(text: String, reason: String) {
        #expect(throws: HeaderField.Invalid.self) { try HeaderField.parse(text) }
        do {
            _ = try HeaderField.parse(text)
        } catch {
            #expect(error.description.contains(reason), "\(error.description)")
        }
    }

    @Test func laterHeadersReplaceEarlierOnesOfTheSameName() {
        let base = [HeaderField(name: "X-From", value: "config"), HeaderField(name: "Accept", value: "*/*")]
        let merged = HeaderField.merged(base, [HeaderField(name: "x-from", value: "flag")])
        #expect(merged == [HeaderField(name: "Accept", value: "*/*"), HeaderField(name: "x-from", value: "flag")])
    }

    @Test func checksumsParse() throws {
        let hex = String(repeating: "aB", count: 32)
        #expect(try Checksum.parse("sha-256=\(hex)") == Checksum(algorithm: .sha256, hex: hex.lowercased()))
        #expect(try Checksum.parse("SHA256=\(hex)").algorithm == .sha256)
        #expect(try Checksum.parse("sha-512=\(hex)\(hex)").algorithm == .sha512)
        #expect(try Checksum.parse("sha-256=\(hex)").description == "sha-256=\(hex.lowercased())")
        for bad in ["sha-256", "md5=abc", "sha-256=\(hex)0", "sha-256=\(String(repeating: "g", count: 64))", "sha-512=\(hex)", ""] {
            #expect(throws: Checksum.Invalid.self, "\(bad)") { try Checksum.parse(bad) }
        }
    }

    @Test func ratesAndSizesParse() throws {
        #expect(try ByteCount.parse("500K", what: "rate") == 512_000)
        #expect(try ByteCount.parse("2M", what: "rate") == 2 * 1024 * 1024)
        #expect(try ByteCount.parse("1.5G", what: "rate") == Int64(1.5 * 1024 * 1024 * 1024))
        #expect(try ByteCount.parse("100000", what: "rate") == 100_000)
        #expect(try ByteCount.parse("2MiB", what: "rate") == 2 * 1024 * 1024)
        #expect(try ByteCount.parse("64k/s", what: "rate") == 64 * 1024)
        for bad in ["", "fast", "-1", "0", "1e3", "K", "2 M", "nan", "9999999999G"] {
            #expect(throws: ByteCount.Invalid.self, "\(bad)") { try ByteCount.parse(bad, what: "rate") }
        }
    }

    @Test func proxiesAreReadLikeCurl() throws {
        let settings = try ProxySettings.from(environment: [
            "http_proxy": "http://user:p%40ss@proxy.lan:3128",
            "HTTPS_PROXY": "secure.lan",
            "no_proxy": "localhost, .internal.example, 10.0.0.1:8080",
        ])
        #expect(settings.http == ProxySettings.Server(host: "proxy.lan", port: 3128, user: "user", password: "p@ss"))
        #expect(settings.https == ProxySettings.Server(host: "secure.lan", port: 1080))
        #expect(settings.http?.description == "proxy.lan:3128", "never the credentials")
        let url = { (text: String) in URL(string: text)! }
        #expect(settings.server(for: url("http://example.com/a")) == settings.http)
        #expect(settings.server(for: url("https://example.com/a")) == settings.https)
        #expect(settings.server(for: url("http://localhost:8000/a")) == nil)
        #expect(settings.server(for: url("https://a.internal.example/x")) == nil)
        #expect(settings.server(for: url("https://internal.example/x")) == nil)
        #expect(settings.server(for: url("https://notinternal.example/x")) == settings.https)
        #expect(settings.server(for: url("http://10.0.0.1/x")) == settings.http, "10.0.0.1:8080 is for that port only")
        #expect(settings.server(for: url("http://10.0.0.1:8080/x")) == nil)
        #expect(settings.server(for: url("http://10.0.0.1:8081/x")) == settings.http)
    }

    /// A proxy's credentials are decoded once, as curl does (a tester's `100%25` was decoded twice,
    /// to an empty password, and `u%25x` to no credentials at all); an IPv6 address loses its
    /// brackets (`[::1]` was looked up as a host name, and retried for minutes).
    @Test func proxyCredentialsAreDecodedOnceAndAnIPv6AddressIsAnAddress() throws {
        let decoded = try ProxySettings.from(environment: ["http_proxy": "http://u%25x:100%25@proxy.lan:3128", "https_proxy": "http://u:a%2541b@h:1"])
        #expect(decoded.http == ProxySettings.Server(host: "proxy.lan", port: 3128, user: "u%x", password: "100%"))
        #expect(decoded.https?.password == "a%41b")
        let six = try ProxySettings.from(environment: ["http_proxy": "http://[::1]:19943"])
        #expect(six.http == ProxySettings.Server(host: "::1", port: 19943))
    }

    @Test func upperCaseHTTPProxyIsIgnoredAndAllProxyFillsIn() throws {
        let settings = try ProxySettings.from(environment: ["HTTP_PROXY": "http://evil:1", "ALL_PROXY": "http://all:8080"])
        #expect(settings.http == ProxySettings.Server(host: "all", port: 8080))
        #expect(settings.https == ProxySettings.Server(host: "all", port: 8080))
        #expect(try ProxySettings.from(environment: ["HTTP_PROXY": "http://evil:1"]).http == nil)
        #expect(try ProxySettings.from(environment: ["no_proxy": "*", "http_proxy": "p:1"]).server(for: URL(string: "http://x/")!) == nil)
        #expect(throws: ProxySettings.Invalid.self) { try ProxySettings.from(environment: ["https_proxy": "socks5://h:1"]) }
        #expect(throws: ProxySettings.Invalid.self) { try ProxySettings.from(environment: ["http_proxy": "http://"]) }
        // A port past 65535 went to that port modulo 65536 (a tester's :85036 reached 19500).
        do {
            _ = try ProxySettings.from(environment: ["http_proxy": "http://127.0.0.1:85036"])
            Issue.record("a proxy port of 85036 was taken")
        } catch {
            #expect(error.description == "http_proxy: port 85036 is not between 1 and 65535")
        }
    }

    // MARK: The queue rules for `haul add` and the offline commands

    let url = URL(string: "http://example.test/file.bin")!

    @Test func aHeldScheduleQueuesWithoutStarting() throws {
        var machine = SessionStateMachine()
        let options = RequestOptions(headers: [HeaderField(name: "X-A", value: "1")])
        let (id, actions) = try machine.schedule(url: url, destination: .directory("/d"), options: options, hold: true)
        #expect(actions.isEmpty)
        #expect(machine.download(id)?.state == .queued)
        #expect(machine.download(id)?.options == options)
        #expect(machine.held.contains(id))
        // Scheduled again for real, it starts, and its order carries the options.
        let (again, started) = try machine.schedule(url: url, destination: .directory("/d"))
        #expect(again == id)
        guard case .startTransfer(let order)? = started.first else {
            Issue.record("not started: \(started)")
            return
        }
        #expect(order.options == options)
    }

    @Test func aHeldResumeQueuesAPausedDownloadWithoutStartingIt() throws {
        var machine = SessionStateMachine()
        var paused = Download(id: DownloadID(1), url: url, destination: .directory("/d"), partPath: "/d/file.bin.part")
        paused.state = .paused
        paused.pausedByShutdown = true
        machine.restore([paused], nextID: 2, holdPending: true)
        #expect(try machine.resume(DownloadID(1), hold: true).isEmpty)
        #expect(machine.download(DownloadID(1))?.state == .queued)
        #expect(machine.download(DownloadID(1))?.pausedByShutdown == false)
        #expect(machine.startQueued().isEmpty, "held: only a process running the queue starts it")
    }

    @Test func pausingADownloadPausedByAQuitKeepsItPausedNextTime() throws {
        var machine = SessionStateMachine()
        var paused = Download(id: DownloadID(1), url: url, destination: .directory("/d"), partPath: "/d/file.bin.part")
        paused.state = .paused
        paused.pausedByShutdown = true
        machine.restore([paused], nextID: 2, holdPending: true)
        #expect(try machine.pause(DownloadID(1)).isEmpty)
        #expect(machine.download(DownloadID(1))?.pausedByShutdown == false)
    }

    @Test func aChecksumIsAdoptedOnceAndADifferentOneRefused() throws {
        var machine = SessionStateMachine()
        let first = Checksum(algorithm: .sha256, hex: String(repeating: "1", count: 64))
        let other = Checksum(algorithm: .sha256, hex: String(repeating: "2", count: 64))
        let (id, _) = try machine.schedule(url: url, destination: .directory("/d"), hold: true)
        _ = try machine.schedule(url: url, destination: .directory("/d"), options: RequestOptions(checksum: first), hold: true)
        #expect(machine.download(id)?.options.checksum == first)
        #expect(throws: SessionStateMachine.TransitionError.invalidArgument(
            "download \(id) of this URL is already checked against \(first); to check it against another, cancel it, or remove it once it failed (its bytes stay)"
        )) {
            try machine.schedule(url: url, destination: .directory("/d"), options: RequestOptions(checksum: other), hold: true)
        }
        #expect(machine.download(id)?.options.checksum == first)
    }
}
