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
            tmux.close()
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
}
