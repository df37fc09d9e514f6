import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing
import TestSupport

/// What reaches the server's request line is the URL's path and query as written.
@Suite struct RequestTargetEngineTests {
    @Test func rawNonASCIIBesideAnEscapeFetchesTheResourceItNames() async throws {
        try await Harness.with { h in
            // The server matches the target byte for byte: `%25202026` would be another resource.
            h.server.serve("/docs/%C3%9Cbersicht%202026.pdf", size: 300_000)
            let id = try await h.session.schedule(try URLValidation.parse(h.server.url("/docs/").absoluteString + "Übersicht%202026.pdf"), to: .directory(h.directory))
            let done = try await h.waitCompleted(id)
            #expect(done.completedPath == h.path("Übersicht 2026.pdf"), "named by the decoded bytes")
            #expect(sha256(ofFile: h.path("Übersicht 2026.pdf")) == h.server.sha256("/docs/%C3%9Cbersicht%202026.pdf"))
            #expect(h.gets("/docs/%C3%9Cbersicht%202026.pdf").map(\.target) == ["/docs/%C3%9Cbersicht%202026.pdf"])
        }
    }

    // MARK: A path with an escape that is not UTF-8 (`/caf%E9.bin`): through the bridge

    @Test func anEscapeThatIsNotUTF8FetchesTheResourceItNamesWithTheURLsHostAndCredentials() async throws {
        try await Harness.with { h in
            h.server.serve("/dir/caf%E9.bin", size: 300_000)
            let url = try URLValidation.parse("http://u:p@127.0.0.1:\(h.server.port)/dir/caf%E9.bin?v=%FF")
            let id = try await h.session.schedule(url, to: .directory(h.directory))
            let done = try await h.waitCompleted(id)
            #expect(done.completedPath == h.path("caf%E9.bin"), "named as written: the escape is not UTF-8")
            #expect(sha256(ofFile: h.path("caf%E9.bin")) == h.server.sha256("/dir/caf%E9.bin"))
            // Every request (a retry on a starved machine included) carries the target as written.
            let gets = h.gets("/dir/caf%E9.bin")
            #expect(Set(gets.map(\.target)) == ["/dir/caf%E9.bin?v=%FF"])
            #expect(gets.first?.host == "127.0.0.1:\(h.server.port)")
            #expect(gets.first?.headers.contains("Authorization: Basic dTpw") == true, "credentials go to the URL's origin")
            #expect(gets.first?.headers.contains { $0.lowercased().hasPrefix("x-haul") } == false, "the bridge's header stays in haul")
            #expect(Set(h.server.requests().map(\.target)) == ["/dir/caf%E9.bin?v=%FF"], "the placeholder never reaches the server")
        }
    }

    /// A body without a length through the bridge, ended by a reset (over TLS: no close_notify),
    /// is cut short, never whole: the bridge closed its side cleanly, and a tester's https body was
    /// completed at 488 KiB of 1 MiB, exit 0.
    @Test(arguments: [false, true])
    func aBodyWithoutALengthEndedByAResetThroughTheBridgeIsNeverWhole(secure: Bool) async throws {
        try await FaultMatrixTests.overHTTPOrHTTPS(secure) { server, h in
            var faults = Faults()
            faults.rawResponse = Array("HTTP/1.1 200 OK\r\nConnection: close\r\nETag: \"e1\"\r\n\r\n".utf8) + [UInt8](repeating: 0x61, count: 30_000)
            faults.rawReset = true
            server.serve("/caf%E9.bin", size: 100_000, faults: faults)
            let id = try await h.session.schedule(try URLValidation.parse(server.url("/caf%E9.bin").absoluteString), to: .file(h.path("c.bin")))
            let ended = try await h.wait(id) { $0.state.isFinished || $0.failedAttempts >= 2 }
            #expect(ended.state != .completed, "a cut body taken whole")
            #expect(!FileManager.default.fileExists(atPath: h.path("c.bin")))
        }
    }

    @Test func aRedirectToAnEscapeThatIsNotUTF8IsFollowedAndPartsShareTheBridge() async throws {
        try await Harness.with { h in
            let size = 8 << 20
            h.server.serve("/caf%E9.bin", size: size, faults: throttled(16 << 20))
            h.server.redirect("/latest", to: "/caf%E9.bin")
            var options = RequestOptions()
            options.connections = 4
            let id = try await h.session.schedule(h.server.url("/latest"), to: .file(h.path("out.bin")), options: options)
            try await h.waitCompleted(id, timeout: 60)
            #expect(sha256(ofFile: h.path("out.bin")) == h.server.sha256("/caf%E9.bin"))
            let gets = h.gets("/caf%E9.bin")
            #expect(gets.count > 1, "fetched in parts: \(gets.map { $0.range ?? "-" })")
            #expect(Set(gets.map(\.target)) == ["/caf%E9.bin"])
        }
    }

    @Test func anEscapeThatIsNotUTF8OverHTTPSIsSentByTheBridgeOverTLSAndTrustedAsDirect() async throws {
        let tls = try await TLSFixture()
        defer { tls.remove() }
        let server = try await LoopbackServer.start(tls: tls.files)
        defer { Task { await server.shutdown() } }
        server.serve("/caf%E9.bin", size: 500_000)
        let url = try URLValidation.parse(server.url("/caf%E9.bin").absoluteString)
        // Without the CA: the sentence of a direct request, at once, not retried.
        try await Harness.with({ $0.connectTimeout = .seconds(30) }) { h in
            let started = ContinuousClock.now
            let id = try await h.session.schedule(url, to: .file(h.path("s.bin")))
            let done = try await h.wait(id) { $0.state.isFinished }
            // Well under the 30 s connect timeout (no wait for it, no retry); 0.5 s alone, up to 11 s
            // in a loaded full suite on 2 cores.
            #expect(started.duration(to: .now) < .seconds(20))
            #expect(done.state == .failed(reason:
                "TLS: the server's certificate is not trusted (self-signed, expired, or from a CA this system does not trust);"
                    + " --ca-certificate FILE trusts the CA in FILE"))
            #expect(done.failedAttempts <= 1)
        }
        #expect(server.requests().isEmpty, "nothing was sent to an untrusted server")
        try await Harness.with({ $0.caCertificatePath = tls.files.certificatePath }) { h in
            let id = try await h.session.schedule(url, to: .file(h.path("s.bin")))
            try await h.waitCompleted(id)
            #expect(sha256(ofFile: h.path("s.bin")) == server.sha256("/caf%E9.bin"))
        }
        #expect(Set(server.requests().map(\.target)) == ["/caf%E9.bin"])
        #expect(server.requests().first?.host == "127.0.0.1:\(server.port)")
    }

    @Test func anEscapeThatIsNotUTF8GoesThroughAProxyInAbsoluteFormAndOverHTTPSThroughConnect() async throws {
        try await Harness.with { h in
            let proxy = try TunnelProxy(tunnellingTo: h.server.port)
            defer { proxy.stop() }
            h.server.serve("/caf%E9.bin", size: 100_000)
            try await Harness.with({ $0.proxies = ProxySettings(http: .init(host: "127.0.0.1", port: proxy.port, user: "u", password: "p")) }) { p in
                let id = try await p.session.schedule(try URLValidation.parse("http://files.haul-test.invalid/caf%E9.bin"), to: .file(p.path("c.bin")))
                try await p.waitCompleted(id)
                #expect(sha256(ofFile: p.path("c.bin")) == h.server.sha256("/caf%E9.bin"))
            }
            #expect(Set(proxy.requestLines) == ["GET http://files.haul-test.invalid/caf%E9.bin HTTP/1.1"])
            #expect(proxy.requestHeads.first?.contains("Proxy-Authorization: Basic dTpw") == true)
            #expect(proxy.requestHeads.first?.contains("Host: files.haul-test.invalid\r\n") == true)
        }
        let tls = try await TLSFixture()
        defer { tls.remove() }
        let server = try await LoopbackServer.start(tls: tls.files)
        defer { Task { await server.shutdown() } }
        server.serve("/caf%E9.bin", size: 100_000)
        let proxy = try TunnelProxy(tunnellingTo: server.port)
        defer { proxy.stop() }
        try await Harness.with({
            $0.caCertificatePath = tls.files.certificatePath
            $0.proxies = ProxySettings(https: .init(host: "127.0.0.1", port: proxy.port, user: "u", password: "p"))
        }) { h in
            let id = try await h.session.schedule(try URLValidation.parse(server.url("/caf%E9.bin").absoluteString), to: .file(h.path("s.bin")))
            try await h.waitCompleted(id)
            #expect(sha256(ofFile: h.path("s.bin")) == server.sha256("/caf%E9.bin"))
        }
        #expect(Set(proxy.requestLines) == ["CONNECT 127.0.0.1:\(server.port) HTTP/1.1"])
        #expect(proxy.requestHeads.first?.contains("Proxy-Authorization: Basic dTpw") == true)
        #expect(Set(server.requests().map(\.target)) == ["/caf%E9.bin"])
        #expect(server.requests().first?.headers.contains { $0.lowercased().hasPrefix("proxy-") } == false, "the proxy's credentials stay with the proxy")
    }

    @Test func anEscapeThatIsNotUTF8SaysWhyTheWayFailedAsADirectRequestWould() async throws {
        let gone = try RefusingPort()
        defer { gone.close() }
        let port = gone.port
        try await Harness.with { h in
            let id = try await h.session.schedule(try URLValidation.parse("http://127.0.0.1:\(port)/caf%E9.bin"), to: .file(h.path("x.bin")))
            let waiting = try await h.wait(id) { if case .waiting = $0.state { return true } else { return false } }
            guard case .waiting(_, let reason) = waiting.state else { return }
            #expect(reason == "connection refused")
        }
        let proxy = try TunnelProxy(tunnellingTo: 9, refusing: [443: "403 Forbidden"])
        defer { proxy.stop() }
        try await Harness.with({ $0.proxies = ProxySettings(https: .init(host: "127.0.0.1", port: proxy.port)) }) { h in
            let id = try await h.session.schedule(try URLValidation.parse("https://files.haul-test.invalid/caf%E9.bin"), to: .file(h.path("x.bin")))
            let done = try await h.wait(id) { $0.state.isFinished }
            #expect(done.state == .failed(reason: "proxy refused CONNECT to files.haul-test.invalid:443: 403"))
        }
    }

    /// The property, through the real HTTP client: for paths and queries made of escapes (UTF-8 or
    /// not), raw non-ASCII, reserved and forbidden characters, every URL that is accepted (all of
    /// them: those with an escape that is not UTF-8 go through the bridge) arrives at the server
    /// with exactly its written target.
    @Test func everyAcceptedURLArrivesWithItsTargetAsWritten() async throws {
        try await Harness.with({ $0.maxActive = 16; $0.maxTries = 1 }) { h in
            var expected: Set<String> = []
            var ids: [DownloadID] = []
            let base = h.server.url("/").absoluteString
            // Every 151st triple of pieces: a spread of combinations, the same on every run.
            let count = Self.pieces.count
            for index in stride(from: 0, to: count * count * count, by: 151) {
                let text = base + Self.pieces[index % count] + Self.pieces[index / count % count] + Self.pieces[index / count / count]
                guard let url = try? URLValidation.parse(text) else { continue }
                guard expected.insert(RequestTarget.expected(url)).inserted else { continue }
                // Nothing is served: each answers 404 at once and fails, having shown its target.
                ids.append(try await h.session.schedule(url, to: .file(h.path("f\(ids.count)"))))
            }
            #expect(ids.count > 300, "the pieces must reach the interesting cases")
            #expect(expected.contains { $0.contains("%E9") && !$0.contains("?") }, "escapes that are not UTF-8 in the path")
            for id in ids { try await h.wait(id, timeout: 60) { $0.state.isFinished } }
            let received = Set(h.server.requests().map(\.target))
            #expect(received == expected, "missing: \(expected.subtracting(received).prefix(5)), unexpected: \(received.subtracting(expected).prefix(5))")
        }
    }

    static let pieces = [
        "%20", "%25", "%2F", "%3F", "%23", "%C3%A9", "%e2%82%ac", "%41", "%E9", "%C3", "%", "Ü", "é", "テ", "👍", "/", "?", "&", "=", ";", "+",
        "{", "}", "|", "^", "`", "\"", "<", ">", "[", "]", "a", "b.bin", "-", "_", "~", "!", "$", "'", "(", ")", "*", ",", ":", "@",
    ]
}
