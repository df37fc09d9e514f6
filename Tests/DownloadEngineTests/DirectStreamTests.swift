#if os(Linux)
@testable import DownloadEngine
import AsyncHTTPClient
import DownloadCore
import Foundation
import Glibc
import LoopbackServer
import NIOCore
import NIOHTTP1
import Testing
import TestSupport

/// `DirectStream` on its own, against the loopback server and a real file: the body reaches the
/// file whole past the bytes held in memory (spliced from there on), a limit, a cut and a cancel
/// behave as through AsyncHTTPClient. (Every session test over plain http goes this way too.)
@Suite struct DirectStreamTests {
    // Generous: the suite runs many tests at once on 2 cores; no test here is about a timeout.
    static let timeouts = DirectStream.Timeouts(connect: .seconds(10), head: .seconds(30), stall: .seconds(30))

    /// A stream for `path` of `server` and an empty file to write into.
    static func open(_ server: LoopbackServer, _ path: String, in scratch: TemporaryDirectory, headers: HTTPHeaders = HTTPHeaders(), writesBack: Bool = false)
        -> (DirectStream, TransferProgress, Int32, String) {
        let file = scratch.path + "/body.part"
        let descriptor = Glibc.open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        let progress = TransferProgress(writesBack: writesBack)
        let stream = DirectStream(url: server.url(path), headers: headers, progress: progress, throttle: Throttle(), timeouts: timeouts)
        return (stream, progress, descriptor, file)
    }

    @Test("a body far larger than the bytes held in memory reaches the file whole, with and without its early writeback", arguments: [false, true])
    func aBodyFarLargerThanTheHeldBytesReachesTheFileWhole(writesBack: Bool) async throws {
        let server = try await LoopbackServer.start()
        defer { Task { await server.shutdown() } }
        let scratch = try TemporaryDirectory("haul-direct")
        // Past two writeback steps.
        let size = 2 * EarlyWriteback.step + 3 * 1024 * 1024
        server.serve("/big.bin", size: size)
        let (stream, progress, descriptor, file) = Self.open(server, "/big.bin", in: scratch, writesBack: writesBack)
        #expect((progress.writeback != nil) == writesBack)
        defer { close(descriptor) }
        let (head, answered) = try await stream.head()
        #expect(head.status == .ok && head.headers.first(name: "Content-Length") == "\(size)")
        #expect(answered == server.url("/big.bin"))
        let end = try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 0, total: Int64(size)))
        #expect(end == .finished || end == .sinkFull)
        #expect(stream.position == Int64(size))
        #expect(progress.bytesOnDisk.load(ordering: .relaxed) == Int64(size))
        #expect(sha256(ofFile: file) == server.sha256("/big.bin"))
        #expect(server.requests("/big.bin").first?.headers.contains("Connection: close") == false)
        #expect(IdleConnections.shared.count(IdleConnections.key(server.url("/"))) == 1, "the connection is kept for the next request")
    }

    @Test func aWholeBodyLeavesItsConnectionForTheNextRequestToTheSameServer() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { await server.shutdown() } }
        let scratch = try TemporaryDirectory("haul-direct")
        let key = IdleConnections.key(server.url("/"))
        for (index, name) in ["a", "b", "c"].enumerated() {
            server.serve("/\(name).bin", size: 300_000 + index)
            let (stream, _, descriptor, file) = Self.open(server, "/\(name).bin", in: scratch)
            defer { close(descriptor) }
            #expect(try await stream.head().0.status == .ok)
            let end = try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 0, total: Int64(300_000 + index)))
            #expect(end == .finished || end == .sinkFull)
            #expect(sha256(ofFile: file) == server.sha256("/\(name).bin"))
            try await waitUntil(timeout: 20, "request \(name)'s connection to be kept") { IdleConnections.shared.count(key) == 1 }
        }
        let ports = server.clientPorts()
        #expect(ports.count == 3 && Set(ports).count == 1, "three requests on one connection: \(ports)")
    }

    /// The server closes a kept connection just as the next request goes out on it (its keep-alive
    /// ran out): the request goes once more on a new connection, within the same stream.
    @Test func aKeptConnectionTheServerClosedIsReplacedUnseen() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { await server.shutdown() } }
        let scratch = try TemporaryDirectory("haul-direct")
        let key = IdleConnections.key(server.url("/"))
        server.serve("/t.bin", size: 200_000)
        server.redirect("/r", to: "/t.bin", closeAfter: true)
        let (first, _, firstDescriptor, firstFile) = Self.open(server, "/r", in: scratch)
        defer { close(firstDescriptor) }
        #expect(try await first.head().0.status == .found)
        _ = try await first.write(into: .prefix(descriptor: firstDescriptor, path: firstFile, position: 0, total: nil))
        try await waitUntil(timeout: 20, "the redirect's connection to be kept") { IdleConnections.shared.count(key) == 1 }
        let file = scratch.path + "/t.part"
        let descriptor = Glibc.open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        defer { close(descriptor) }
        let stream = DirectStream(url: server.url("/t.bin"), headers: HTTPHeaders(), progress: TransferProgress(), throttle: Throttle(), timeouts: Self.timeouts)
        #expect(try await stream.head().0.status == .ok)
        _ = try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 0, total: 200_000))
        #expect(sha256(ofFile: file) == server.sha256("/t.bin"))
        // Met by the close on the kept connection (status 0: the server closes the redirect's
        // connection at the next request on it, logged without its ports), then answered on a new one.
        #expect(server.requests("/t.bin").map(\.status) == [0, 200])
        let ports = server.clientPorts()
        #expect(ports.count == 2 && ports[0] != ports[1], "the redirect's connection, then a new one: \(ports)")
    }

    /// A connection is kept only after a body that ended at its length on a connection the server
    /// keeps: not after `Connection: close`, a body the sink cut short, or a cancel.
    @Test func aConnectionIsKeptOnlyAfterAWholeBodyTheServerLetsGoOn() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { await server.shutdown() } }
        let scratch = try TemporaryDirectory("haul-direct")
        let key = IdleConnections.key(server.url("/"))
        let size = 3 * 1024 * 1024
        server.serve("/k.bin", size: size)

        var closing = HTTPHeaders()
        closing.add(name: "Connection", value: "close")
        let (said, _, saidDescriptor, saidFile) = Self.open(server, "/k.bin", in: scratch, headers: closing)
        defer { close(saidDescriptor) }
        #expect(try await said.head().0.headers.first(name: "Connection") == "close")
        _ = try await said.write(into: .prefix(descriptor: saidDescriptor, path: saidFile, position: 0, total: Int64(size)))
        #expect(sha256(ofFile: saidFile) == server.sha256("/k.bin"))

        let (cut, _, cutDescriptor, cutFile) = Self.open(server, "/k.bin", in: scratch)
        defer { close(cutDescriptor) }
        _ = try await cut.head()
        #expect(try await cut.write(into: .prefix(descriptor: cutDescriptor, path: cutFile, position: 0, total: 1000)) == .sinkFull)

        let (cancelled, _, cancelledDescriptor, _) = Self.open(server, "/k.bin", in: scratch)
        defer { close(cancelledDescriptor) }
        _ = try await cancelled.head()
        cancelled.cancel()
        // Each stream has ended once its thread let go of its connection: give them the time.
        try await Task.sleep(for: .milliseconds(300))
        #expect(IdleConnections.shared.count(key) == 0)
        #expect(Set(server.clientPorts()).count == 3, "a connection each")
    }

    @Test func aRangeAskedForIsWrittenWhereItBelongs() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { await server.shutdown() } }
        let scratch = try TemporaryDirectory("haul-direct")
        let size = 3 * 1024 * 1024
        server.serve("/r.bin", size: size)
        var headers = HTTPHeaders()
        headers.add(name: "Range", value: "bytes=1000-")
        let (stream, _, descriptor, file) = Self.open(server, "/r.bin", in: scratch, headers: headers)
        defer { close(descriptor) }
        let (head, _) = try await stream.head()
        #expect(head.status == .partialContent)
        _ = try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 1000, total: Int64(size)))
        let written = try #require(FileManager.default.contents(atPath: file))
        #expect(written.count == size)
        #expect(Array(written.suffix(from: 1000)) == Array(server.content("/r.bin").suffix(from: 1000)), "the range at its offset")
    }

    @Test func aBodyCutShortFailsAndKeepsWhatCame() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { await server.shutdown() } }
        let scratch = try TemporaryDirectory("haul-direct")
        let size = 4 * 1024 * 1024
        var faults = Faults()
        faults.closeAfterBytes = 3 * 1024 * 1024
        server.serve("/cut.bin", size: size, faults: faults)
        let (stream, progress, descriptor, file) = Self.open(server, "/cut.bin", in: scratch)
        defer { close(descriptor) }
        _ = try await stream.head()
        await #expect(throws: HTTPParserError.invalidEOFState) {
            _ = try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 0, total: Int64(size)))
        }
        let kept = progress.bytesOnDisk.load(ordering: .relaxed)
        #expect(kept == 3 * 1024 * 1024, "every byte that came is on disk")
        let written = try #require(FileManager.default.contents(atPath: file))
        #expect(Array(written) == Array(server.content("/cut.bin").prefix(Int(kept))), "and they are the right ones")
    }

    @Test func aCancelStopsTheBodyAtOnceAndKeepsWhatCame() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { await server.shutdown() } }
        let scratch = try TemporaryDirectory("haul-direct")
        // 64 MiB at 2 MiB/s: half a minute, so the cancel comes mid-body however loaded the machine
        // is (8 MiB ran out under a tester's load before a 1.5 s sleep ended), while bytes still flow.
        let size = 64 * 1024 * 1024
        var faults = Faults()
        faults.throttleBytesPerSecond = 2 * 1024 * 1024
        server.serve("/slow.bin", size: size, faults: faults)
        let (stream, progress, descriptor, file) = Self.open(server, "/slow.bin", in: scratch)
        defer { close(descriptor) }
        _ = try await stream.head()
        let writing = Task { try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 0, total: Int64(size))) }
        try await waitUntil(timeout: 20, "1 MiB on disk") { progress.bytesOnDisk.load(ordering: .relaxed) >= 1024 * 1024 }
        let cancelled = ContinuousClock.now
        stream.cancel()
        await #expect(throws: HTTPClientError.cancelled) { try await writing.value }
        // The rest of the body takes half a minute; the task here may run seconds late on a loaded
        // suite (CI measured 1.22 s against a bound of 1 s, then 2.27 s against 2).
        #expect(ContinuousClock.now - cancelled < .seconds(5), "no wait for the rest of the body")
        let kept = progress.bytesOnDisk.load(ordering: .relaxed)
        #expect(kept > 0 && kept < Int64(size))
        let written = try #require(FileManager.default.contents(atPath: file))
        #expect(written.count == Int(kept))
        #expect(Array(written) == Array(server.content("/slow.bin").prefix(Int(kept))))
    }

    @Test func aClosedPortAndANameThatDoesNotResolveSayWhy() async throws {
        let refused = DirectStream(url: try #require(URL(string: "http://127.0.0.1:1/x")), headers: HTTPHeaders(), progress: TransferProgress(), throttle: Throttle(), timeouts: Self.timeouts)
        await #expect(throws: IOError.self) { _ = try await refused.head() }
        let unknown = DirectStream(url: try #require(URL(string: "http://no-such-host.invalid/x")), headers: HTTPHeaders(), progress: TransferProgress(), throttle: Throttle(), timeouts: Self.timeouts)
        await #expect(throws: DirectStream.HostNotFound.self) { _ = try await unknown.head() }
        #expect(Transfer.describe(DirectStream.HostNotFound()) == "host name not found")
    }

    @Test func localhostIsReachedWhicheverFamilyTheServerListensOn() async throws {
        let server = try await LoopbackServer.start()
        defer { Task { await server.shutdown() } }
        let scratch = try TemporaryDirectory("haul-direct")
        server.serve("/l.bin", size: 1000)
        let url = try #require(URL(string: "http://localhost:\(server.port)/l.bin"))
        let stream = DirectStream(url: url, headers: HTTPHeaders(), progress: TransferProgress(), throttle: Throttle(), timeouts: Self.timeouts)
        let file = scratch.path + "/l.part"
        let descriptor = Glibc.open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        defer { close(descriptor) }
        #expect(try await stream.head().0.status == .ok)
        _ = try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 0, total: 1000))
        #expect(sha256(ofFile: file) == server.sha256("/l.bin"))
    }

    @Test func tcpUrgentDataMidBodyNeitherEndsNorStallsIt() async throws {
        // splice(2) stops at TCP's urgent mark (0 or EAGAIN while the socket is readable), where a
        // read goes on past it: the stream must read on, never take the mark for the end.
        let before = [UInt8]((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let after = [UInt8]((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        let server = try RawServer { client in
            var request = [UInt8](repeating: 0, count: 4096)
            _ = read(client, &request, request.count)
            RawServer.send(client, Array("HTTP/1.0 200 OK\r\n\r\n".utf8) + before)
            usleep(300_000)
            var urgent: UInt8 = 0x55
            _ = Glibc.send(client, &urgent, 1, Int32(MSG_OOB | MSG_NOSIGNAL))
            usleep(300_000)
            RawServer.send(client, after)
        }
        let scratch = try TemporaryDirectory("haul-direct")
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/u.bin"))
        let stream = DirectStream(url: url, headers: HTTPHeaders(), progress: TransferProgress(), throttle: Throttle(), timeouts: Self.timeouts)
        let file = scratch.path + "/u.part"
        let descriptor = Glibc.open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        defer { close(descriptor) }
        _ = try await stream.head()
        // A stream that spins at the mark is stopped, so the test fails rather than hangs.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(20))
            stream.cancel()
        }
        defer { watchdog.cancel() }
        let end = try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 0, total: nil))
        #expect(end == .finished)
        let written = try #require(FileManager.default.contents(atPath: file))
        #expect(written.count == before.count + after.count, "every byte but the urgent one")
        #expect(Array(written) == before + after)
    }

    /// A server that says 408 on a kept connection as it times it out: the request goes once more
    /// on a new connection, and the 408 is never taken for its answer.
    @Test func a408OnAKeptConnectionIsNoAnswerTheRequestGoesOnANewOne() async throws {
        let body = Array("0123456789".utf8)
        let server = try RawServer(connections: 2) { client, number in
            var request = [UInt8](repeating: 0, count: 4096)
            _ = read(client, &request, request.count)
            let ok = Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
            RawServer.send(client, ok)
            guard number == 0 else { return }
            // The second request on this connection meets the server's timeout, said and closed.
            _ = read(client, &request, request.count)
            RawServer.send(client, Array("HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
        }
        let scratch = try TemporaryDirectory("haul-direct")
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/x.bin"))
        let key = IdleConnections.key(url)
        for round in 1...2 {
            let stream = DirectStream(url: url, headers: HTTPHeaders(), progress: TransferProgress(), throttle: Throttle(), timeouts: Self.timeouts)
            let file = scratch.path + "/x\(round).part"
            let descriptor = Glibc.open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            defer { close(descriptor) }
            #expect(try await stream.head().0.status == .ok, "round \(round)")
            _ = try await stream.write(into: .prefix(descriptor: descriptor, path: file, position: 0, total: Int64(body.count)))
            #expect(FileManager.default.contents(atPath: file) == Data(body), "round \(round)")
            if round == 1 { try await waitUntil(timeout: 20, "the first connection to be kept") { IdleConnections.shared.count(key) == 1 } }
        }
    }

    @Test func theRequestNamesTheTargetAsWrittenAndTheHost() throws {
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: "haul/test")
        let url = try #require(URL(string: "http://[::1]:8080/caf%E9.bin?a=%20"))
        let text = String(decoding: DirectStream.request(url, headers: headers), as: UTF8.self)
        #expect(text == "GET /caf%E9.bin?a=%20 HTTP/1.1\r\nHost: [::1]:8080\r\nUser-Agent: haul/test\r\n\r\n")
    }
}
/// A TCP server on 127.0.0.1 that hands its one connection to `serve` on a thread, then closes it.
final class RawServer: Sendable {
    let port: Int
    private let listener: Int32

    convenience init(_ serve: @escaping @Sendable (Int32) -> Void) throws {
        try self.init(connections: 1) { client, _ in serve(client) }
    }

    /// Hands each of its first `connections` connections, in turn, to `serve` with its number.
    init(connections: Int, _ serve: @escaping @Sendable (Int32, Int) -> Void) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 4) == 0 else { throw RawServerError() }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread {
            for number in 0..<connections {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                serve(client, number)
                close(client)
            }
        }.start()
    }

    deinit { close(listener) }

    static func send(_ fd: Int32, _ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress.map { $0 + sent }, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if result <= 0 { return }
            sent += result
        }
    }
}

struct RawServerError: Error {}
#endif
