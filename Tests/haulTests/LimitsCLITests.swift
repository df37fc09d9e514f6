import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Issue 19 on the real binary: per-download limits as options, the global limit set on a running
/// queue and kept for the next runner, a resume that takes a slot now, and a due retry in `haul list`.
@Suite(.serialized) struct LimitsCLITests {
    func haul(_ arguments: [String], in directory: String, state: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> HaulProcess.Run {
        try await CLI.haul(arguments, in: directory, state: state, timeout: 30, sourceLocation: sourceLocation)
    }

    /// `curl --unix-socket` on the runner's socket: the status and the body.
    static func socket(_ state: String, _ method: String, _ path: String, _ body: String? = nil, in directory: String) async throws -> (status: Int, body: String) {
        let output = directory + "/.curl-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: output) }
        var arguments = ["-sS", "--max-time", "10", "--unix-socket", state + "/haul.sock", "-X", method, "-o", output, "-w", "%{http_code}"]
        if let body { arguments += ["--data-binary", body] }
        let (_, code) = try await ChildProcess.output("/usr/bin/curl", arguments + ["http://haul" + path])
        return (Int(code) ?? 0, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    /// The runner's whole queue (`GET /v1/snapshot`), parsed.
    static func snapshot(_ state: String, in directory: String) async throws -> [String: Any] {
        let answer = try await socket(state, "GET", "/v1/snapshot", in: directory)
        #expect(answer.status == 200)
        return try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
    }

    @Test("19: --limit-rate-each and limit-rate-each give added downloads their own limit; a request joining one never changes it")
    func eachDownloadsOwnLimitFromTheCommandLine() async throws {
        try await CLI.withServer { server, directory in
            let state = directory + "/.state"
            let a = server.url("/a.iso").absoluteString
            #expect(try await haul(["add", a, "--limit-rate-each", "500K"], in: directory, state: state).status == 0)
            try FileManager.default.createDirectory(atPath: directory + "/.config/haul", withIntermediateDirectories: true)
            try "limit-rate-each = 1M\n".write(toFile: directory + "/.config/haul/config", atomically: true, encoding: .utf8)
            #expect(try await haul(["add", server.url("/b.iso").absoluteString], in: directory, state: state).status == 0)
            #expect(try await haul(["add", server.url("/c.iso").absoluteString, "--limit-rate-each", "0"], in: directory, state: state).status == 0)
            let rows = try await CLI.list(state: state, in: directory)
            #expect(rows.map { ($0["limit"] as? NSNumber)?.int64Value } == [500 * 1024, 1024 * 1024, nil], "\(rows)")

            // The same URL with the same limit, or none asked: the same download. Another limit: refused, nothing changed.
            let same = try await haul(["add", a, "--limit-rate-each", "500K"], in: directory, state: state)
            #expect(same.status == 0 && same.stdout.hasPrefix("1\t"), "\(same.stdout) \(same.stderr)")
            let other = try await haul(["add", a, "--limit-rate-each", "2M"], in: directory, state: state)
            #expect(other.status == 2)
            #expect(other.stderr == "haul: error: download 1 of this URL is already limited to 500 KiB/s (asked: 2.0 MiB/s): change its limit instead\n")
            #expect(try await CLI.list(state: state, in: directory).count == 3)
            #expect(server.requests().isEmpty)
        }
    }

    @Test("19: a global limit set on the running queue brings a fast download near it (measured by the loopback server), and the next runner keeps it; --limit-rate wins for its run")
    func theGlobalLimitHoldsAndIsRemembered() async throws {
        try await CLI.withServer { server, directory in
            var fast = Faults()
            fast.throttleBytesPerSecond = 8 * 1024 * 1024
            server.serve("/fast.bin", size: 128 * 1024 * 1024, faults: fast)
            let state = directory + "/state"
            let start = try await haul(["start", "-d", directory, server.url("/fast.bin").absoluteString], in: directory, state: state)
            #expect(start.status == 0, "\(start.stderr)")
            try await eventually("the download runs") { (fileLength(directory + "/fast.bin.part") ?? 0) > 0 }

            let set = try await Self.socket(state, "PUT", "/v1/limit", #"{"limit": 204800}"#, in: directory)
            #expect(set.status == 200, "\(set.body)")
            #expect(try await Self.snapshot(state, in: directory)["limit"] as? Int == 204_800)
            try await Task.sleep(for: .seconds(1))
            let rate = try await server.deliveryRate("/fast.bin", over: .seconds(4))
            #expect((140 * 1024...260 * 1024).contains(rate), "\(Int(rate / 1024)) KiB/s, limited to 200")

            // --limit-rate wins for its run, and is not remembered: the runner after it has 200K again.
            #expect(try await haul(["stop"], in: directory, state: state).status == 0)
            #expect(try await haul(["start", "--limit-rate", "1M"], in: directory, state: state).status == 0)
            #expect(try await Self.snapshot(state, in: directory)["limit"] as? Int == 1024 * 1024)
            #expect(try await haul(["stop"], in: directory, state: state).status == 0)
            #expect(try await haul(["start"], in: directory, state: state).status == 0)
            #expect(try await Self.snapshot(state, in: directory)["limit"] as? Int == 204_800)
            #expect(try await haul(["stop"], in: directory, state: state).status == 0)
        }
    }

    @Test("19: haul list says a due retry waits for a free slot; haul resume takes a slot at once and names the download sent back to queued")
    func aDueRetryAndAResumeThatMeansNow() async throws {
        try await CLI.withServer { server, directory in
            var failing = Faults()
            failing.failFirst = 1
            server.serve("/r.bin", size: 50_000, faults: failing)
            var slow = Faults()
            slow.throttleBytesPerSecond = 256 * 1024
            for name in ["/a.bin", "/b.bin"] { server.serve(name, size: 32 * 1024 * 1024, faults: slow) }
            let state = directory + "/state"
            let urls = ["/r.bin", "/a.bin", "/b.bin"].map { server.url($0).absoluteString }
            #expect(try await haul(["start", "-j", "1", "-d", directory] + urls, in: directory, state: state).status == 0)
            // r fails (503) and waits about a second; a takes the slot; r comes due with none free.
            try await eventually("a runs") { (fileLength(directory + "/a.bin.part") ?? 0) > 0 }
            #expect(server.requests("/r.bin").count == 1)
            // Its backoff is a second (±25 %): due well before two.
            try await Task.sleep(for: .seconds(2))
            let list = try await haul(["list"], in: directory, state: state)
            let lines = list.stdout.split(separator: "\n").map(String.init)
            let row = try #require(lines.firstIndex { $0.hasPrefix("1 ") }, "\(list.stdout)")
            #expect(lines[row].contains("waiting"), "\(lines[row])")
            #expect(lines[row + 1] == "    retry due: waits for a free slot", "\(list.stdout)")
            #expect(lines[row + 2] == "    error: HTTP 503 Service Unavailable", "\(list.stdout)")
            #expect(server.requests("/r.bin").count == 1, "not started: no slot")
            // The JSON (haul get --json's object too) says the retry is due, not merely a retry.
            let due = try await CLI.list(state: state, in: directory)
            #expect(due.first?["waiting_for"] as? String == "retry due", "\(due)")
            #expect(due.dropFirst().allSatisfy { $0["waiting_for"] is NSNull }, "\(due)")

            // b paused by a person, then resumed: it takes a's slot at once, a keeps its bytes.
            #expect(try await haul(["pause", "3"], in: directory, state: state).stdout == "paused 3\n")
            let resume = try await haul(["resume", "3"], in: directory, state: state)
            #expect(resume.status == 0, "\(resume.stderr)")
            #expect(resume.stdout == "downloading 3\n[2] back to queued with its bytes, to make room for 3\n", "said as it runs now")
            let rows = try await CLI.list(state: state, in: directory)
            #expect(rows.map { $0["state"] as? String } == ["waiting", "queued", "downloading"], "\(rows)")
            #expect((rows[1]["bytes"] as? NSNumber)?.int64Value ?? 0 > 0, "a kept its bytes")
            // b runs on a person's resume: resuming a now makes no room, it waits at the front.
            let again = try await haul(["resume", "2"], in: directory, state: state)
            #expect(again.stdout == "queued 2\n", "\(again.stdout)")
            #expect(try await haul(["stop"], in: directory, state: state).status == 0)
        }
    }
}
