import AsyncHTTPClient
import Crypto
import Foundation
import LoopbackServer
import NIOCore
import NIOHTTP1
import Testing

/// The loopback server's HTTP semantics, checked with a plain AsyncHTTPClient.
@Suite struct LoopbackServerTests {
    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    /// Runs `body` with a started server and a client that follows no redirects.
    func withServer(_ body: (LoopbackServer, HTTPClient) async throws -> Void) async throws {
        let server = try await LoopbackServer.start()
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .init(redirectConfiguration: .disallow))
        do {
            try await body(server, client)
        } catch {
            try? await client.shutdown()
            await server.shutdown()
            throw error
        }
        try await client.shutdown()
        await server.shutdown()
    }

    func fetch(_ client: HTTPClient, _ url: URL, method: HTTPMethod = .GET, headers: [(String, String)] = []) async throws -> Reply {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 64 * 1024 * 1024)
        var names: [String: String] = [:]
        for header in response.headers { names[header.name.lowercased()] = header.value }
        return Reply(status: Int(response.status.code), headers: names, body: Array(body.readableBytesView))
    }

    /// A server that cannot start says why in the system's words (as `haul demo` prints it), not
    /// in the networking library's description of its error.
    @Test func aPortInUseIsSaidInWords() async throws {
        let first = try await LoopbackServer.start()
        do {
            let second = try await LoopbackServer.start(port: first.port)
            await second.shutdown()
            Issue.record("a second server started on port \(first.port)")
        } catch {
            #expect(LoopbackServer.words(for: error) == "address already in use", "\(error)")
        }
        await first.shutdown()
    }

    @Test func contentIsDeterministicPositionDependentAndVersioned() {
        let whole = LoopbackContent.bytes(seed: 7, version: 1, range: 0..<4096)
        #expect(LoopbackContent.bytes(seed: 7, version: 1, range: 1001..<3333) == Array(whole[1001..<3333]))
        #expect(LoopbackContent.bytes(seed: 7, version: 2, range: 0..<4096) != whole)
        #expect(LoopbackContent.bytes(seed: 8, version: 1, range: 0..<4096) != whole)
        // No short period: the second kilobyte differs from the first.
        #expect(Array(whole[0..<1024]) != Array(whole[1024..<2048]))
        #expect(Set(whole).count > 200)
        #expect(LoopbackContent.sha256(seed: 7, version: 1, size: 4096) == LoopbackContent.hex(SHA256.hash(data: whole)))
    }

    @Test func fullGetWithValidators() async throws {
        try await withServer { server, client in
            server.serve("/f", size: 100_000)
            let reply = try await fetch(client, server.url("/f"))
            #expect(reply.status == 200)
            #expect(reply.body == server.content("/f"))
            #expect(reply.headers["content-length"] == "100000")
            #expect(reply.headers["accept-ranges"] == "bytes")
            let etag = try #require(reply.headers["etag"])
            #expect(etag.hasPrefix("\"") && etag.hasSuffix("\""))
            #expect(reply.headers["last-modified"]?.hasSuffix("GMT") == true)
            let log = server.requests("/f")
            #expect(log.count == 1)
            #expect(log.first?.bodyBytesSent == 100_000)
            #expect(log.first?.finished == true)
        }
    }

    @Test func rangesOfEveryForm() async throws {
        try await withServer { server, client in
            server.serve("/r", size: 1000)
            let content = server.content("/r")
            let open = try await fetch(client, server.url("/r"), headers: [("Range", "bytes=100-")])
            #expect(open.status == 206)
            #expect(open.headers["content-range"] == "bytes 100-999/1000")
            #expect(open.body == Array(content[100...]))
            let closed = try await fetch(client, server.url("/r"), headers: [("Range", "bytes=10-19")])
            #expect(closed.headers["content-range"] == "bytes 10-19/1000")
            #expect(closed.body == Array(content[10...19]))
            let suffix = try await fetch(client, server.url("/r"), headers: [("Range", "bytes=-50")])
            #expect(suffix.headers["content-range"] == "bytes 950-999/1000")
            #expect(suffix.body == Array(content[950...]))
            let beyond = try await fetch(client, server.url("/r"), headers: [("Range", "bytes=1000-")])
            #expect(beyond.status == 416)
            #expect(beyond.headers["content-range"] == "bytes */1000")
            let several = try await fetch(client, server.url("/r"), headers: [("Range", "bytes=0-1,5-6")])
            #expect(several.status == 200)
            #expect(server.requests("/r").map(\.range) == ["bytes=100-", "bytes=10-19", "bytes=-50", "bytes=1000-", "bytes=0-1,5-6"])
        }
    }

    @Test func ifRangeHonoursOnlyTheCurrentValidator() async throws {
        try await withServer { server, client in
            server.serve("/v", size: 500)
            let first = try await fetch(client, server.url("/v"))
            let etag = try #require(first.headers["etag"])
            let date = try #require(first.headers["last-modified"])
            #expect(try await fetch(client, server.url("/v"), headers: [("Range", "bytes=100-"), ("If-Range", etag)]).status == 206)
            #expect(try await fetch(client, server.url("/v"), headers: [("Range", "bytes=100-"), ("If-Range", date)]).status == 206)
            server.change("/v")
            let stale = try await fetch(client, server.url("/v"), headers: [("Range", "bytes=100-"), ("If-Range", etag)])
            #expect(stale.status == 200)
            #expect(stale.body == server.content("/v"))
            #expect(stale.headers["etag"] != etag)
            #expect(try await fetch(client, server.url("/v"), headers: [("Range", "bytes=100-"), ("If-Range", date)]).status == 200)
        }
    }

    @Test func ifMatchFailsWith412() async throws {
        try await withServer { server, client in
            server.serve("/m", size: 10)
            let etag = try #require(try await fetch(client, server.url("/m")).headers["etag"])
            #expect(try await fetch(client, server.url("/m"), headers: [("If-Match", etag)]).status == 200)
            #expect(try await fetch(client, server.url("/m"), headers: [("If-Match", "\"other\"")]).status == 412)
            #expect(try await fetch(client, server.url("/m"), headers: [("If-Match", "*")]).status == 200)
        }
    }

    @Test func headSendsHeadersOnly() async throws {
        try await withServer { server, client in
            server.serve("/h", size: 12345)
            let reply = try await fetch(client, server.url("/h"), method: .HEAD)
            #expect(reply.status == 200)
            #expect(reply.headers["content-length"] == "12345")
            #expect(reply.body.isEmpty)
            #expect(server.requests("/h").first?.method == "HEAD")
        }
    }

    @Test func faultsShapeTheResponses() async throws {
        try await withServer { server, client in
            var faults = Faults()
            faults.failFirst = 2
            faults.retryAfter = "3"
            server.serve("/busy", size: 10, faults: faults)
            let busy = try await fetch(client, server.url("/busy"))
            #expect(busy.status == 503)
            #expect(busy.headers["retry-after"] == "3")
            #expect(try await fetch(client, server.url("/busy")).status == 503)
            #expect(try await fetch(client, server.url("/busy")).status == 200)

            var bare = Faults.noValidators
            bare.ignoreRange = true
            server.serve("/bare", size: 100, faults: bare)
            let reply = try await fetch(client, server.url("/bare"), headers: [("Range", "bytes=10-")])
            #expect(reply.status == 200)
            #expect(reply.headers["etag"] == nil && reply.headers["last-modified"] == nil)
            #expect(reply.headers["accept-ranges"] == "none")

            var chunked = Faults()
            chunked.chunked = true
            chunked.weakETag = true
            server.serve("/chunked", size: 70_000, faults: chunked)
            let body = try await fetch(client, server.url("/chunked"))
            #expect(body.headers["content-length"] == nil)
            #expect(body.headers["transfer-encoding"] == "chunked")
            #expect(body.headers["etag"]?.hasPrefix("W/\"") == true)
            #expect(body.body == server.content("/chunked"))

            var wrong = Faults()
            wrong.rangeOffsetError = 5
            server.serve("/wrong", size: 100, faults: wrong)
            #expect(try await fetch(client, server.url("/wrong"), headers: [("Range", "bytes=10-")]).headers["content-range"] == "bytes 15-99/100")

            var gone = Faults()
            gone.fixedStatus = 410
            server.serve("/gone", size: 100, faults: gone)
            #expect(try await fetch(client, server.url("/gone")).status == 410)
            #expect(try await fetch(client, server.url("/nothing")).status == 404)
        }
    }

    @Test func aShortBodyEndsTheConnectionEarly() async throws {
        try await withServer { server, client in
            var faults = Faults()
            faults.closeAfterBytes = 1000
            server.serve("/short", size: 5000, faults: faults)
            await #expect(throws: (any Error).self) { _ = try await fetch(client, server.url("/short")) }
            let log = server.requests("/short")
            #expect(log.first?.bodyBytesSent == 1000)
            #expect(log.first?.finished == false)
            let second = try await fetch(client, server.url("/short"))
            #expect(second.body.count == 5000, "the fault hits one response")
        }
    }

    @Test func throttlingSlowsTheBody() async throws {
        try await withServer { server, client in
            var faults = Faults()
            faults.throttleBytesPerSecond = 100_000
            server.serve("/slow", size: 50_000, faults: faults)
            let started = ContinuousClock.now
            let reply = try await fetch(client, server.url("/slow"))
            let elapsed = started.duration(to: .now)
            #expect(reply.body.count == 50_000)
            #expect(elapsed >= .milliseconds(400), "50 kB at 100 kB/s takes about half a second")
        }
    }

    @Test func redirectsPointOnward() async throws {
        try await withServer { server, client in
            server.redirect("/old", to: "/new", status: 301)
            let reply = try await fetch(client, server.url("/old"))
            #expect(reply.status == 301)
            #expect(reply.headers["location"] == "/new")
        }
    }
}
