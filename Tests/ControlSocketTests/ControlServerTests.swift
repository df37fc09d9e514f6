@testable import ControlSocket
import DownloadCore
import Foundation
import LoopbackServer
import Logging
import NIOCore
import Testing
import TestSupport

/// The socket as any client sees it: curl, another user, and clients that misbehave.
@Suite struct ControlServerTests {
    @Test func theSocketIsTheUsersOnlyAndAStaleOneIsReplaced() async throws {
        let scratch = try TemporaryDirectory("haul-control")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let path = directory + "/haul.sock"
        close(try ListeningSocket.bind(path))
        try await ControlHarness.withQueue { queue in
            let server = try await ControlServer.start(socketPath: path, queue: queue, logger: Logger(label: "test"))
            var status = stat()
            #expect(lstat(path, &status) == 0)
            #expect(status.st_mode & S_IFMT == S_IFSOCK)
            #expect(status.st_mode & 0o777 == 0o600)
            #expect(await ControlClient.connect(socketPath: path) != nil)
            await server.shutdown()
            #expect(!FileManager.default.fileExists(atPath: path), "the socket file goes with the server")
        }
        // Anything but a socket is somebody's file: never removed.
        #expect(FileManager.default.createFile(atPath: path, contents: Data("mine".utf8)))
        try await ControlHarness.withQueue { queue in
            await #expect(throws: ControlServer.Failure(description: "cannot listen on \(path): something else is there (not a socket)")) {
                _ = try await ControlServer.start(socketPath: path, queue: queue, logger: Logger(label: "test"))
            }
        }
        #expect(FileManager.default.contents(atPath: path) == Data("mine".utf8))
    }

    /// Connections that arrive while the server stops are closed, never dropped unfinished: a
    /// loaded CI run crashed the whole process so (`Deinited NIOAsyncWriter without calling
    /// finish()`, swift-nio#2813: an accepted connection left in the listening channel's stream).
    @Test func connectionsArrivingAsTheServerStopsAreClosedCleanly() async throws {
        let scratch = try TemporaryDirectory("haul-control")
        defer { withExtendedLifetime(scratch) {} }
        let path = scratch.path + "/haul.sock"
        try await ControlHarness.withQueue { queue in
            for _ in 0..<20 {
                let server = try await ControlServer.start(socketPath: path, queue: queue, logger: Logger(label: "test"))
                let clients = (0..<16).compactMap { _ in try? RawClient(path) }
                await server.shutdown()
                #expect(!FileManager.default.fileExists(atPath: path))
                withExtendedLifetime(clients) {}
            }
        }
    }

    /// The listening socket is held by one descriptor while the server runs (NIO's copy; the one
    /// bound is closed at once, never a second time later) and by none after it stops.
    @Test func theListeningSocketIsHeldByOneDescriptorAndNoneAfterTheServer() async throws {
        let scratch = try TemporaryDirectory("haul-control")
        defer { withExtendedLifetime(scratch) {} }
        let path = scratch.path + "/haul.sock"
        try await ControlHarness.withQueue { queue in
            let server = try await ControlServer.start(socketPath: path, queue: queue, logger: Logger(label: "test"))
            let inode = try #require(Self.socketInode(listeningAt: path))
            #expect(Self.descriptors(of: inode) == 1)
            #expect(await ControlClient.connect(socketPath: path) != nil)
            await server.shutdown()
            #expect(Self.descriptors(of: inode) == 0)
        }
    }

    @Test func aFailureToListenIsSaidInWordsNotTypes() {
        #expect(ListeningSocket.reason(of: IOError(errnoCode: EADDRINUSE, reason: "bind")) == "address already in use")
        #expect(ListeningSocket.reason(of: ChannelError.ioOnClosedChannel) == "the socket could not be set up")
    }

    /// The inode of the listening Unix socket at `path` (`/proc/net/unix`).
    private static func socketInode(listeningAt path: String) -> String? {
        // Read to the end: /proc says the file is empty to anything that asks its size first, and
        // one read gives a page of it (a full run has more sockets open than fit).
        guard let handle = FileHandle(forReadingAtPath: "/proc/net/unix"), let data = try? handle.readToEnd() else { return nil }
        try? handle.close()
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 8, fields[7] == path { return String(fields[6]) }
        }
        return nil
    }

    /// How many of this process's descriptors are the socket with `inode`.
    private static func descriptors(of inode: String) -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) == "socket:[\(inode)]" }.count
    }

    @Test func curlSpeaksEveryEndpoint() async throws {
        try await ControlHarness.with { harness in
            harness.server.serve("/c.bin", size: 200_000)
            harness.server.serve("/slow.bin", size: 8_000_000, faults: throttled(100_000))
            let sum = harness.server.sha256("/c.bin")

            let added = try await harness.curl("POST", "/v1/downloads", #"{"url": "\#(harness.server.url("/c.bin"))", "dir": "\#(harness.directory)", "checksum": "sha-256=\#(sum)", "headers": ["X-A: b"], "connections": 2}"#)
            #expect(added.status == 201, "\(added.body)")
            let ids = try #require((try json(added.body) as? [String: Any])?["ids"] as? [Int])
            let id = DownloadID(Int64(try #require(ids.first)))
            try await harness.wait(id) { $0.state == .completed }

            let many = try await harness.curl("POST", "/v1/downloads", #"{"urls": ["\#(harness.server.url("/slow.bin"))", "\#(harness.server.url("/other.bin"))"], "dir": "\#(harness.directory)"}"#)
            #expect(many.status == 201, "\(many.body)")
            let slow = DownloadID(Int64(try #require(((try json(many.body) as? [String: Any])?["ids"] as? [Int])?.first)))
            try await harness.wait(slow) { $0.state == .downloading && $0.bytesPerSecond > 0 }

            let list = try await harness.curl("GET", "/v1/downloads")
            #expect(list.status == 200)
            let objects = try #require(try json(list.body) as? [[String: Any]])
            #expect(objects.count == 3)
            let first = try #require(objects.first)
            #expect(Set(first.keys) == [
                "id", "state", "bytes", "total", "resumed_from", "resumes", "restarts", "restart_reason", "path", "url", "error", "waiting_for",
                "checksum", "header_names", "speed", "hook", "limit",
            ])
            #expect(first["checksum"] as? String == "sha-256=\(sum)" && first["header_names"] as? [String] == ["X-A"] && first["state"] as? String == "completed")
            #expect((objects[1]["speed"] as? Int ?? 0) > 0, "a live speed for the running download")
            // The same objects as `haul list --json` prints, but for the speed.
            let snapshot = try await harness.client.snapshot()
            let listed = try #require(try JSONSerialization.jsonObject(with: QueueListing.json(snapshot.downloads.map { QueueListing.object(for: $0) })) as? [[String: Any]])
            #expect(listed.map { $0["path"] as? String } == objects.map { $0["path"] as? String })

            let whole = try await harness.curl("GET", "/v1/snapshot")
            #expect(whole.status == 200)
            let decoded = try JSONDecoder().decode(SessionSnapshot.self, from: Data(whole.body.utf8))
            #expect(decoded.downloads.map(\.id) == snapshot.downloads.map(\.id) && decoded.maxActive == snapshot.maxActive)

            let ok = #"{"ok":true}"#
            for (method, path, body) in [
                ("POST", "/v1/downloads/\(slow)/pause", nil), ("POST", "/v1/downloads/\(slow)/resume", nil),
                ("POST", "/v1/downloads/\(slow)/move", #"{"to": 0}"#), ("PUT", "/v1/max-active", #"{"max_active": 2}"#),
                ("POST", "/v1/pause-all", nil), ("POST", "/v1/resume-all", nil), ("POST", "/v1/downloads/\(slow)/cancel", nil),
                ("POST", "/v1/purge", nil), ("DELETE", "/v1/downloads/\(slow)", nil),
            ] as [(String, String, String?)] {
                if path.hasSuffix("/\(slow)") { try await harness.wait(slow) { $0.state == .cancelled } }
                let answer = try await harness.curl(method, path, body)
                #expect(answer.status == 200 && answer.body == ok, "\(method) \(path): \(answer.status) \(answer.body)")
            }
            #expect(try await harness.client.snapshot().maxActive == 2)
            #expect(try await harness.client.snapshot()[slow] == nil)

            for (method, path, body, status, sentence) in [
                ("GET", "/v1/nothing", nil, 404, "no such path: /v1/nothing"),
                ("GET", "/v1/downloads/1/pause", nil, 405, "GET is not allowed here (use POST)"),
                ("DELETE", "/v1/downloads", nil, 405, "DELETE is not allowed here (use GET, POST)"),
                ("POST", "/v1/downloads/abc/pause", nil, 404, "no download abc"),
                ("POST", "/v1/downloads", "{", 400, "the body is not valid JSON"),
                ("POST", "/v1/downloads", #"{"url": "ftp://h/x", "dir": "/tmp"}"#, 400, "invalid URL 'ftp://h/x': unsupported scheme 'ftp' (only http and https)"),
                ("POST", "/v1/downloads", #"{"url": "http://h/x", "dir": "tmp"}"#, 400, "dir must be an absolute path, not 'tmp'"),
                ("POST", "/v1/downloads", #"{"url": "http://h/x", "dir": "/tmp", "headers": ["Range: bytes=1-"]}"#, 400, "header 'Range' is set by haul itself (resuming depends on it)"),
                ("POST", "/v1/downloads", #"{"url": "http://h/x", "dir": "/tmp", "connections": 17}"#, 400, "connections must be between 1 and 16"),
                ("POST", "/v1/downloads", #"{"urls": ["http://h/x", "http://h/y"], "output": "/tmp/x"}"#, 400, "output takes a single URL; use dir for several"),
                ("POST", "/v1/downloads", #"{"url": 5}"#, 400, "'url' has the wrong type"),
                ("POST", "/v1/downloads", #"{"url": "http://h/x", "dir": "/tmp", "limit": 9223372036854775807}"#, 400, "limit must be at most 1125899906842624 bytes a second (1024T), or 0 for none"),
                ("PUT", "/v1/max-active", #"{"max_active": 0}"#, 400, "max_active must be between 1 and 32"),
                ("POST", "/v1/downloads/1/move", #"{}"#, 400, "'to' is missing"),
                ("POST", "/v1/downloads/\(id)/pause", nil, 409, "cannot pause download \(id): it is completed"),
            ] as [(String, String, String?, Int, String)] {
                let answer = try await harness.curl(method, path, body)
                #expect(answer.status == status, "\(method) \(path): \(answer.body)")
                #expect(try json(answer.body) as? [String: String] == ["error": sentence], "\(method) \(path)")
            }

            let stop = try await harness.curl("POST", "/v1/stop")
            #expect(stop.status == 202 && stop.body == ok)
            try await waitUntil(timeout: 10, "stop reached the queue") { harness.stopped.count.count == 1 }
        }
    }

    /// `POST /v1/edit` changes several downloads all or nothing: one refused id leaves every other
    /// as it was (a tester's `haul pause` of 3,000 ids, sent one by one, paused 2,498 and then said
    /// nothing changed).
    @Test func anEditOfSeveralDownloadsIsAllOrNothing() async throws {
        try await ControlHarness.with { harness in
            for name in ["a", "b", "c"] { harness.server.serve("/\(name).bin", size: 8_000_000, faults: throttled(50_000)) }
            let added = try await harness.curl("POST", "/v1/downloads", #"{"urls": ["\#(harness.server.url("/a.bin"))", "\#(harness.server.url("/b.bin"))", "\#(harness.server.url("/c.bin"))"], "dir": "\#(harness.directory)"}"#)
            #expect(added.status == 201, "\(added.body)")
            let ids = try #require((try json(added.body) as? [String: Any])?["ids"] as? [Int])
            try #require(ids.count == 3)
            let last = DownloadID(Int64(ids[2]))
            #expect(try await harness.curl("POST", "/v1/downloads/\(last)/cancel").status == 200)
            try await harness.wait(last) { $0.state == .cancelled }

            let refused = try await harness.curl("POST", "/v1/edit", #"{"edit": "pause", "ids": \#(ids)}"#)
            #expect(refused.status == 409, "\(refused.body)")
            #expect(try json(refused.body) as? [String: String] == ["error": "cannot pause download \(last): it is cancelled"])
            let untouched = try await harness.client.snapshot()
            #expect(ids.dropLast().allSatisfy { untouched[DownloadID(Int64($0))]?.state != .paused }, "nothing paused")

            let paused = try await harness.curl("POST", "/v1/edit", #"{"edit": "pause", "ids": \#(Array(ids.dropLast()))}"#)
            #expect(paused.status == 200 && paused.body == #"{"displaced":[],"ok":true}"#, "\(paused.body)")
            let now = try await harness.client.snapshot()
            #expect(ids.dropLast().allSatisfy { now[DownloadID(Int64($0))]?.state == .paused })
            // Through the client, as `haul pause` sends them.
            _ = try await harness.client.edit(.resume, ids.dropLast().map { DownloadID(Int64($0)) })
            let resumed = try await harness.client.snapshot()
            #expect(ids.dropLast().allSatisfy { resumed[DownloadID(Int64($0))]?.state != .paused })

            for (body, status, sentence) in [
                (#"{"edit": "pause", "ids": [99]}"#, 404, "no download 99"),
                (#"{"edit": "explode", "ids": [1]}"#, 400, "edit must be one of pause, resume, cancel, remove"),
                (#"{"edit": "pause", "ids": []}"#, 400, "ids must name at least one download"),
                (#"{"edit": "pause", "ids": [0]}"#, 400, "ids must be download ids (from 1)"),
                (#"{"edit": "pause"}"#, 400, "'ids' is missing"),
            ] {
                let answer = try await harness.curl("POST", "/v1/edit", body)
                #expect(answer.status == status, "\(body): \(answer.body)")
                #expect(try json(answer.body) as? [String: String] == ["error": sentence], "\(body)")
            }
            #expect(try await harness.curl("GET", "/v1/edit").status == 405)
        }
    }

    @Test func anotherUserIsRefusedByTheUIDCheckItself() async throws {
        try await ControlHarness.with { harness in
            // Let nobody reach and open the socket: only the peer check stands in the way.
            #expect(chmod(harness.directory, 0o755) == 0 && chmod(harness.socketPath, 0o666) == 0)
            let refused = try await harness.curl("GET", "/v1/downloads", as: 65534)
            #expect(refused.status == 403, "\(refused.body)")
            #expect(try json(refused.body) as? [String: String] == ["error": "only the user running this queue may steer it"])
            let mine = try await harness.curl("GET", "/v1/downloads")
            #expect(mine.status == 200 && mine.body == "[]")
        }
    }

    @Test func garbageAndOversizedBodiesAreRefusedAndTheServerCarriesOn() async throws {
        try await ControlHarness.with { harness in
            let garbage = try RawClient(harness.socketPath)
            await garbage.send("\u{01}\u{02}NOT HTTP AT ALL\r\n\r\n")
            let refusedGarbage = await garbage.receive()
            #expect(refusedGarbage.closed)
            #expect(parse(refusedGarbage.bytes)?.status == 400)

            // 3 MB announced: refused from the length, before the body.
            let large = try RawClient(harness.socketPath)
            await large.send("POST /v1/downloads HTTP/1.1\r\nHost: haul\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n\r\n")
            let sent = await large.send([UInt8](repeating: UInt8(ascii: " "), count: 3_000_000))
            let refusedLarge = await large.receive()
            #expect(parse(refusedLarge.bytes)?.status == 413, "sent all: \(sent)")
            #expect(try json(parse(refusedLarge.bytes)?.body ?? "") as? [String: String] == ["error": "the body is 3000000 bytes; at most 1048576 are taken"])
            #expect(refusedLarge.closed)

            // Chunked, with no length: refused once the bytes pass 1 MiB.
            let chunked = try RawClient(harness.socketPath)
            await chunked.send("POST /v1/downloads HTTP/1.1\r\nHost: haul\r\nTransfer-Encoding: chunked\r\n\r\n")
            let chunk = "10000\r\n" + String(repeating: "x", count: 0x10000) + "\r\n"
            for _ in 0..<20 { guard await chunked.send(chunk) else { break } }
            let refusedChunked = await chunked.receive()
            #expect(parse(refusedChunked.bytes)?.status == 413)

            let after = try await harness.curl("GET", "/v1/downloads")
            #expect(after.status == 200 && after.body == "[]")
        }
    }

    @Test func halfSentRequestsAndIdleConnectionsAreClosedAfterTheTimeout() async throws {
        var limits = ControlServer.Limits()
        limits.requestTimeout = .seconds(2)
        try await ControlHarness.with(limits: limits) { harness in
            // Half a request: refused after the timeout.
            let half = try RawClient(harness.socketPath)
            await half.send("POST /v1/downloads HTTP/1.1\r\nHost: haul\r\nContent-Length: 100\r\n\r\n{\"url\":")
            let started = Date()
            let refusedHalf = await half.receive()
            #expect(parse(refusedHalf.bytes)?.status == 408)
            #expect(refusedHalf.closed && Date().timeIntervalSince(started) < 5)

            // An idle connection is closed after the timeout too; keep-alive works before that.
            let idle = try RawClient(harness.socketPath)
            await idle.send("GET /v1/downloads HTTP/1.1\r\nHost: haul\r\n\r\nGET /v1/snapshot HTTP/1.1\r\nHost: haul\r\n\r\n")
            let twice = await idle.receive(timeout: 5)
            #expect(twice.closed)
            #expect(String(decoding: twice.bytes, as: UTF8.self).components(separatedBy: "HTTP/1.1 200 OK").count == 3)

            let after = try await harness.curl("GET", "/v1/downloads")
            #expect(after.status == 200 && after.body == "[]")
        }
    }
}
