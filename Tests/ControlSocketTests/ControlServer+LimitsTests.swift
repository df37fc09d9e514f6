@testable import ControlSocket
import DownloadCore
import Foundation
import LoopbackServer
import Testing

/// The routes for limits, clearing completed rows, history and a resume that makes room: with
/// curl, and through `ControlClient`.
@Suite struct ControlServerLimitsTests {
    @Test func limitsAreSetAndCheckedWithCurl() async throws {
        try await ControlHarness.with { harness in
            harness.server.serve("/slow", size: 4_000_000, faults: throttled(100_000))
            let id = try #require(try await harness.client.schedule([QueueRequest(url: harness.server.url("/slow"), destination: .directory(harness.directory))]).ids.first)

            let ok = #"{"ok":true}"#
            let set = try await harness.curl("PUT", "/v1/limit", #"{"limit": 204800}"#)
            #expect(set.status == 200 && set.body == ok, "\(set)")
            #expect(try await harness.client.snapshot().limit == 204_800)
            let own = try await harness.curl("PUT", "/v1/downloads/\(id)/limit", #"{"limit": 102400}"#)
            #expect(own.status == 200 && own.body == ok, "\(own)")
            #expect(try await harness.client.snapshot()[id]?.limit == 102_400)
            // Null and 0 mean none.
            #expect(try await harness.curl("PUT", "/v1/limit", #"{"limit": null}"#).status == 200)
            #expect(try await harness.client.snapshot().limit == nil)
            #expect(try await harness.curl("PUT", "/v1/downloads/\(id)/limit", #"{"limit": 0}"#).status == 200)
            #expect(try await harness.client.snapshot()[id]?.limit == nil)

            for (method, path, body, status, error) in [
                ("PUT", "/v1/limit", #"{"limit": 100}"#, 400, "limit must be at least 1024 bytes a second (1K), or 0 for none"),
                ("PUT", "/v1/limit", #"{"limit": "200K"}"#, 400, "'limit' has the wrong type"),
                // Found by use: Int64.max crashed the runner (its pacing overflowed).
                ("PUT", "/v1/limit", #"{"limit": 9223372036854775807}"#, 400, "limit must be at most 1125899906842624 bytes a second (1024T), or 0 for none"),
                ("PUT", "/v1/downloads/\(id)/limit", #"{"limit": 9223372036854775807}"#, 400, "limit must be at most 1125899906842624 bytes a second (1024T), or 0 for none"),
                ("PUT", "/v1/limit", #"{}"#, 400, "'limit' is missing"),
                ("PUT", "/v1/limit", "", 400, "the body is empty; a JSON object is expected"),
                ("POST", "/v1/limit", #"{"limit": 2048}"#, 405, "POST is not allowed here (use PUT)"),
                ("PUT", "/v1/downloads/999/limit", #"{"limit": 2048}"#, 404, "no download 999"),
                ("PUT", "/v1/downloads/x/limit", #"{"limit": 2048}"#, 404, "no download x"),
                ("POST", "/v1/downloads/\(id)/limit", #"{"limit": 2048}"#, 405, "POST is not allowed here (use PUT)"),
                ("PUT", "/v1/downloads/\(id)/limit", #"{"limit": -5}"#, 400, "limit must be at least 1024 bytes a second (1K), or 0 for none"),
                ("GET", "/v1/clear-completed", nil, 405, "GET is not allowed here (use POST)"),
                ("POST", "/v1/history", nil, 405, "POST is not allowed here (use GET)"),
                ("GET", "/v1/downloads/999/history", nil, 404, "no download 999"),
            ] as [(String, String, String?, Int, String)] {
                let answer = try await harness.curl(method, path, body)
                #expect(answer.status == status, "\(method) \(path): \(answer)")
                #expect(try json(answer.body) as? [String: String] == ["error": error], "\(method) \(path): \(answer.body)")
            }
            // Nothing changed by the refusals.
            #expect(try await harness.client.snapshot().limit == nil)
            #expect(try await harness.client.snapshot()[id]?.limit == nil)

            // A completed download has nothing to limit: 409.
            harness.server.serve("/small", size: 1000)
            let small = try #require(try await harness.client.schedule([QueueRequest(url: harness.server.url("/small"), destination: .directory(harness.directory))]).ids.first)
            try await harness.wait(small) { $0.state == .completed }
            let finished = try await harness.curl("PUT", "/v1/downloads/\(small)/limit", #"{"limit": 2048}"#)
            #expect(finished.status == 409)
            #expect(try json(finished.body) as? [String: String] == ["error": "cannot limit download \(small): it is completed"])
        }
    }

    @Test func clearingHistoryAndAResumeThatMakesRoomThroughTheClient() async throws {
        try await ControlHarness.with({ $0.maxActive = 1 }) { harness in
            harness.server.serve("/done", size: 1000)
            harness.server.serve("/long", size: 8_000_000, faults: throttled(200_000))
            harness.server.serve("/next", size: 8_000_000, faults: throttled(200_000))
            let done = try #require(try await harness.client.schedule([QueueRequest(url: harness.server.url("/done"), destination: .directory(harness.directory))]).ids.first)
            try await harness.wait(done) { $0.state == .completed }
            let made = try await harness.client.schedule([
                QueueRequest(url: harness.server.url("/long"), destination: .directory(harness.directory)),
                QueueRequest(url: harness.server.url("/next"), destination: .directory(harness.directory), limit: 4096),
            ])
            let (long, next) = (made.ids[0], made.ids[1])
            #expect(try await harness.client.snapshot()[next]?.limit == 4096, "the request's own limit went with the form")
            try await harness.wait(long) { $0.state == .downloading && $0.bytesOnDisk > 0 }

            // The resume answers with the download that made room; curl sees it as "displaced".
            try await harness.client.pause(next)
            #expect(try await harness.client.resume(next) == long)
            try await harness.wait(long) { $0.state == .queued }
            try await harness.client.pause(next)
            let resumed = try await harness.curl("POST", "/v1/downloads/\(next)/resume")
            #expect(resumed.status == 200)
            #expect(resumed.body == #"{"displaced":\#(long),"ok":true}"#)

            // History, one download's and the queue's, as entries and as JSON lines.
            let history = try await harness.client.history(long)
            #expect(history.map(\.kind).prefix(3) == [.added, .started, .response])
            #expect(history.contains { $0.kind == .paused && $0.text == "back to queued with its bytes, to make room for download \(next) (resumed by a person)" })
            let raw = try await harness.curl("GET", "/v1/downloads/\(long)/history")
            #expect(raw.status == 200)
            let lines = try #require(try json(raw.body) as? [[String: Any]])
            #expect(lines.count == history.count)
            #expect(Set(lines.first?.keys.map { $0 } ?? []) == ["id", "time", "kind", "text"])
            #expect(lines.first?["kind"] as? String == "added" && lines.first?["id"] as? Int == Int(long.rawValue))
            #expect((lines.first?["time"] as? String)?.hasSuffix("Z") == true)
            let recent = try await harness.client.history(nil)
            #expect(Set(recent.map(\.download)) == [done, long, next])

            // Clearing completed rows: how many, and the rows are gone.
            #expect(try await harness.client.clearCompleted() == 1)
            #expect(try await harness.client.snapshot()[done] == nil)
            let again = try await harness.curl("POST", "/v1/clear-completed")
            #expect(again.status == 200 && again.body == #"{"cleared":0}"#, "\(again)")

            try await harness.client.setLimit(300 * 1024)
            try await harness.client.setLimit(8192, for: long)
            #expect(try await harness.client.snapshot().limit == 300 * 1024)
            #expect(try await harness.client.snapshot()[long]?.limit == 8192)
            await #expect(throws: QueueControlError(.refused, "limit must be at least 1024 bytes a second (1K), or 0 for none")) {
                try await harness.client.setLimit(10)
            }
        }
    }

    @Test func theEventStreamCarriesTheLimit() async throws {
        let before = SessionSnapshot(downloads: [], maxActive: 3)
        var after = before
        after.limit = 204_800
        let line = try #require(EventLine.changes(from: before, to: after), "a new limit is a change")
        let encoded = try #require(String(data: Wire.encode(line), encoding: .utf8))
        #expect(encoded.contains(#""limit":204800"#))
        #expect(line.applied(to: before).limit == 204_800)
        #expect(EventLine.snapshot(after).applied(to: nil).limit == 204_800)
        // Removed, it is written as null: a client sees it go.
        let removed = try #require(EventLine.changes(from: after, to: before))
        #expect(String(data: Wire.encode(removed), encoding: .utf8)?.contains(#""limit":null"#) == true)
        #expect(removed.applied(to: after).limit == nil)
        #expect(EventLine.changes(from: after, to: after) == nil)
    }

    /// An attached screen's header shows the session's measured speed, not its rows' sum.
    @Test func theEventStreamCarriesTheSessionsSpeed() throws {
        let before = SessionSnapshot(downloads: [], maxActive: 3)
        var after = before
        after.throughput = 1_500_000
        let line = try #require(EventLine.changes(from: before, to: after), "a new speed is a change")
        let encoded = try #require(String(data: Wire.encode(line), encoding: .utf8))
        #expect(encoded.contains(#""throughput":1500000"#), "\(encoded)")
        let decoded = try JSONDecoder().decode(EventLine.self, from: Wire.encode(line))
        #expect(decoded.applied(to: before).totalBytesPerSecond == 1_500_000)
        #expect(EventLine.snapshot(after).applied(to: nil).throughput == 1_500_000)
    }
}
