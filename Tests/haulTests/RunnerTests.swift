import Foundation
import LoopbackServer
import Testing

/// The queue outlives the terminal (issue 17): the first haul on a queue is its runner, and a
/// hang-up leaves it downloading without a terminal.
@Suite(.serialized) struct RunnerTests {
    /// The pid in the queue's lock file.
    static func runnerPID(_ state: String) -> Int32? {
        (try? String(contentsOfFile: state + "/lock", encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    static func alive(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0
    }

    @Test("17: a hang-up leaves the runner downloading, same pid, until SIGTERM pauses and checkpoints")
    func aHangUpDetachesAndTheQueueGoesOn() async throws {
        try await CLI.withServer { server, directory in
            var faults = Faults()
            faults.throttleBytesPerSecond = 512 * 1024
            server.serve("/long.bin", size: 32 * 1024 * 1024, faults: faults)
            let state = directory + "/state"
            let tmux = try TmuxSession(TmuxSession.haulCommand(["-d", directory, server.url("/long.bin").absoluteString], state: state, in: directory))
            defer { tmux.close() }
            try await tmux.waitFor("the download runs") { _ in (CLI.length(directory + "/long.bin.part") ?? 0) > 0 }
            let pid = try #require(Self.runnerPID(state))

            // The tmux server goes away, as a dropped SSH connection does: a hang-up.
            tmux.hangUp()
            try await Task.sleep(for: .milliseconds(500))
            #expect(Self.alive(pid), "the runner outlives its terminal")
            let before = CLI.length(directory + "/long.bin.part") ?? 0
            try await Task.sleep(for: .seconds(1.5))
            let after = CLI.length(directory + "/long.bin.part") ?? 0
            #expect(after > before, "the part file keeps growing: \(before) then \(after)")
            #expect(Self.runnerPID(state) == pid, "the lock still holds the runner's pid")
            let log = (try? String(contentsOfFile: state + "/haul.log", encoding: .utf8)) ?? ""
            #expect(log.contains("terminal gone: detached, the queue goes on"), "\(log.suffix(500))")

            // SIGTERM keeps its meaning: pause everything, checkpoint, exit.
            kill(pid, SIGTERM)
            try await CLI.waitUntil(timeout: 5, "the runner exits") { !Self.alive(pid) }
            let rows = try await CLI.list(state: state, in: directory)
            let row = try #require(rows.first)
            #expect(row["state"] as? String == "paused")
            #expect((row["bytes"] as? NSNumber)?.int64Value == CLI.length(directory + "/long.bin.part"), "the checkpoint is the part file")
        }
    }

    @Test("17: D hands the queue to a runner in the background and gives the terminal back; the downloads resume there with Range and If-Range")
    func theDetachKeyHandsTheQueueOver() async throws {
        try await CLI.withServer { server, directory in
            var faults = Faults()
            faults.throttleBytesPerSecond = 512 * 1024
            server.serve("/d.bin", size: 32 * 1024 * 1024, faults: faults)
            let state = directory + "/state"
            let tmux = try TmuxSession(TmuxSession.haulCommand(["-d", directory, server.url("/d.bin").absoluteString], state: state, in: directory))
            defer { tmux.close() }
            try await tmux.waitFor("the download runs") { _ in (CLI.length(directory + "/d.bin.part") ?? 0) > 0 }
            let uiPID = try #require(Self.runnerPID(state))
            tmux.keys("D")
            try await tmux.waitFor("the terminal is given back") { lines in lines.contains { $0.contains("[exited 0]") } }
            let screen = tmux.screen().joined(separator: "\n")
            #expect(screen.contains("haul: detached: the queue goes on in the background (pid "), "\(screen)")
            try await CLI.waitUntil("a new runner holds the queue") { Self.runnerPID(state).map { $0 != uiPID && Self.alive($0) } == true }
            let runner = try #require(Self.runnerPID(state))
            try await CLI.waitUntil("the download resumed in the background with Range and If-Range") {
                server.requests("/d.bin").count >= 2 && server.requests("/d.bin").last?.ifRange != nil
                    && server.requests("/d.bin").last?.range?.hasPrefix("bytes=") == true
            }
            let before = CLI.length(directory + "/d.bin.part") ?? 0
            try await Task.sleep(for: .seconds(1))
            #expect((CLI.length(directory + "/d.bin.part") ?? 0) > before, "the part file grows with no UI")

            // haul stop: paused, checkpointed, the runner gone within 3 s.
            let started = ContinuousClock.now
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(stop.status == 0, "\(stop.stdout) \(stop.stderr)")
            #expect(ContinuousClock.now - started < .seconds(3))
            #expect(!Self.alive(runner))
            let rows = try await CLI.list(state: state, in: directory)
            #expect(rows.first?["state"] as? String == "paused")
            let kept = CLI.length(directory + "/d.bin.part")
            #expect((rows.first?["bytes"] as? NSNumber)?.int64Value == kept, "the checkpoint is the part file")

            // haul start: a runner in the background resumes it from there, with If-Range.
            let start = try await HaulProcess(["start"], in: directory, state: state).wait(timeout: 20)
            #expect(start.status == 0, "\(start.stderr)")
            #expect(start.stdout.contains("runs in the background (pid "), "\(start.stdout)")
            try await CLI.waitUntil("resumed from the bytes kept") {
                server.requests("/d.bin").last.map { $0.range == "bytes=\(kept ?? -1)-" && $0.ifRange != nil } == true
            }
            let again = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(again.status == 0)
            let none = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(none.status == 1)
            #expect(none.stderr == "haul: no haul runs the queue at \(state)\n")
        }
    }
}
