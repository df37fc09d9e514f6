@testable import ControlSocket
import DownloadCore
import Foundation
import LoopbackServer
import Testing

/// `GET /v1/events`: a snapshot, then only what changed; newest wins for a client that lags.
@Suite struct EventStreamTests {
    private static let request = "GET /v1/events HTTP/1.1\r\nHost: haul\r\n\r\n"

    /// The event lines of a raw answer, decoded as JSON objects.
    private func events(_ bytes: [UInt8]) throws -> (lines: [[String: Any]], ended: Bool) {
        guard let answer = parse(bytes) else { return ([], false) }
        let (lines, ended) = chunkedLines(answer.body)
        return (try lines.map { try #require(try json($0) as? [String: Any]) }, ended)
    }

    private func receiveLines(_ client: RawClient, _ count: Int) async throws -> [[String: Any]] {
        let received = await client.receive { bytes in
            guard let answer = parse(bytes) else { return false }
            return chunkedLines(answer.body).lines.count >= count
        }
        return try events(received.bytes).lines
    }

    @Test func aSnapshotFirstThenOnlyTheRowsThatChanged() async throws {
        try await ControlHarness.with { harness in
            for name in ["e1", "e2", "e3"] { harness.server.serve("/\(name)", size: 4_000_000, faults: throttled(100_000)) }
            let ids = try await harness.client.schedule(["e1", "e2", "e3"].map {
                QueueRequest(url: harness.server.url("/\($0)"), destination: .directory(harness.directory))
            }).ids
            try await harness.client.pauseAll()
            for id in ids { try await harness.wait(id) { $0.state == .paused && $0.bytesPerSecond == 0 } }
            try await Task.sleep(for: .milliseconds(300))

            let followed = Task {
                var seen: [SessionSnapshot] = []
                for await snapshot in harness.client.snapshots() { seen.append(snapshot) }
                return seen
            }
            let raw = try RawClient(harness.socketPath)
            await raw.send(Self.request)
            let first = try #require(try await receiveLines(raw, 1).first)
            #expect(first["type"] as? String == "snapshot")
            #expect((first["downloads"] as? [[String: Any]])?.count == 3 && first["max_active"] as? Int == 3)

            try await harness.client.cancel(ids[1])
            let second = try await receiveLines(raw, 2)[1]
            #expect(second["type"] as? String == "changes")
            let changed = try #require(second["downloads"] as? [[String: Any]])
            #expect(changed.count == 1 && changed.first?["id"] as? Int == Int(ids[1].rawValue), "\(second)")
            #expect(second["removed"] as? [Int] == [] && second["order"] == nil)

            try await harness.client.remove(ids[1])
            let third = try await receiveLines(raw, 3)[2]
            #expect((third["downloads"] as? [Any])?.isEmpty == true)
            #expect(third["removed"] as? [Int] == [Int(ids[1].rawValue)])
            #expect(third["order"] as? [Int] == [Int(ids[0].rawValue), Int(ids[2].rawValue)])

            // The client rebuilt the same queue from those lines; both streams end with the server.
            try await Task.sleep(for: .milliseconds(300))
            await harness.control.shutdown()
            let rest = await raw.receive()
            #expect(rest.closed)
            #expect(try events(rest.bytes).ended, "the stream's last chunk came before the close")
            let seen = await followed.value
            let last = try #require(seen.last)
            let now = try await harness.queue.snapshot()
            #expect(last.downloads == now.downloads && last.maxActive == now.maxActive)
            #expect(seen.first?.downloads.count == 3)
        }
    }

    /// A client that opens the stream and never reads: the server stops writing to it once its
    /// socket is full (no lines queue up), everybody else is answered at once and the download runs
    /// at its speed; when the client reads again, one line of changes brings it up to date.
    @Test func aClientThatNeverReadsHoldsUpNobody() async throws {
        try await ControlHarness.with({ $0.maxActive = 1 }) { harness in
            harness.server.serve("/run.bin", size: 20_000_000, faults: throttled(2_000_000))
            // A long queue makes the first line big (about 1 MB): it fills the socket on its own.
            let urls = [harness.server.url("/run.bin").absoluteString] + (0..<1500).map { harness.server.url("/q\($0).bin").absoluteString }
            let made = try await harness.curl("POST", "/v1/downloads", #"{"urls": [\#(urls.map { "\"\($0)\"" }.joined(separator: ","))], "dir": "\#(harness.directory)"}"#)
            #expect(made.status == 201, "\(made.body)")
            _ = try await harness.wait(DownloadID(1)) { $0.state == .downloading && $0.bytesOnDisk > 0 }

            let lagging = try RawClient(harness.socketPath)
            await lagging.send(Self.request)
            try await Task.sleep(for: .seconds(1))
            let backlog = await harness.control.eventBacklogs()
            try await Task.sleep(for: .seconds(1))
            let later = await harness.control.eventBacklogs()
            #expect(backlog.count == 1 && backlog == later, "nothing more is written to a full socket: \(backlog) then \(later)")
            #expect((backlog.first ?? 0) < 2 << 20, "at most about one line waits: \(backlog)")

            // Everybody else is answered at once, and the download goes on at its speed.
            let started = Date()
            let listed = try await harness.curl("GET", "/v1/downloads")
            let answeredIn = Date().timeIntervalSince(started)
            #expect(listed.status == 200 && answeredIn < 1, "answered in \(answeredIn) s")
            let before = try #require(try await harness.client.snapshot()[DownloadID(1)])
            try await Task.sleep(for: .seconds(1))
            let after = try #require(try await harness.client.snapshot()[DownloadID(1)])
            let rate = Double(after.bytesOnDisk - before.bytesOnDisk)
            #expect(rate > 1_000_000, "the download ran at \(rate) B/s beside the stuck client (throttled to 2,000,000)")
            print("control socket: a listing answered in \(answeredIn) s, the download ran at \(rate) B/s, backlog \(backlog) bytes, beside a client that never reads")

            // Reading again: the snapshot it was sent, then one line of changes up to now.
            let lines = try await receiveLines(lagging, 2)
            #expect(lines.first?["type"] as? String == "snapshot" && lines[1]["type"] as? String == "changes")
            let caughtUp = try #require((lines[1]["downloads"] as? [[String: Any]])?.first { $0["id"] as? Int == 1 })
            let sentFirst = try #require((lines.first?["downloads"] as? [[String: Any]])?.first { $0["id"] as? Int == 1 })
            #expect((caughtUp["bytesOnDisk"] as? Int ?? 0) >= Int(after.bytesOnDisk), "the line is from now, not from when the client stopped")
            // Made when the client connected, two seconds before `before` (a bound on the bytes
            // since `running` failed a loaded suite: the line came 4.8 MB, 2.4 s, after it there).
            #expect((sentFirst["bytesOnDisk"] as? Int ?? 0) <= Int(before.bytesOnDisk), "the first line is from when the client stopped reading")
        }
    }
}

