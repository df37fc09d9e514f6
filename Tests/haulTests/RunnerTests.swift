import Foundation
import LoopbackServer
import Testing
import TestSupport

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

    /// The UI in tmux running the queue at `directory/state`, downloading `name` (32 MiB at
    /// 512 KiB/s) until its first bytes are on disk; the session and the runner's pid.
    static func runnerUI(downloading name: String, _ server: LoopbackServer, in directory: String) async throws -> (TmuxSession, Int32) {
        var faults = Faults()
        faults.throttleBytesPerSecond = 512 * 1024
        server.serve("/" + name, size: 32 * 1024 * 1024, faults: faults)
        let state = directory + "/state"
        let tmux = try await TmuxSession(TmuxSession.haulCommand(["-d", directory, server.url("/" + name).absoluteString], state: state, in: directory))
        try await tmux.waitFor("the download runs") { _ in (fileLength(directory + "/" + name + ".part") ?? 0) > 0 }
        return (tmux, try #require(runnerPID(state)))
    }

    @Test("17: a hang-up leaves the runner downloading, same pid, until SIGTERM pauses and checkpoints")
    func aHangUpDetachesAndTheQueueGoesOn() async throws {
        try await CLI.withServer { server, directory in
            let state = directory + "/state"
            let (tmux, pid) = try await Self.runnerUI(downloading: "long.bin", server, in: directory)
            defer { tmux.close() }

            // The tmux server goes away, as a dropped SSH connection does: a hang-up.
            await tmux.hangUp()
            try await Task.sleep(for: .milliseconds(500))
            #expect(Self.alive(pid), "the runner outlives its terminal")
            let before = fileLength(directory + "/long.bin.part") ?? 0
            try await Task.sleep(for: .seconds(1.5))
            let after = fileLength(directory + "/long.bin.part") ?? 0
            #expect(after > before, "the part file keeps growing: \(before) then \(after)")
            #expect(Self.runnerPID(state) == pid, "the lock still holds the runner's pid")
            let log = (try? String(contentsOfFile: state + "/haul.log", encoding: .utf8)) ?? ""
            #expect(log.contains("terminal gone: detached, the queue goes on"), "\(log.suffix(500))")

            // A later login attaches to it and sees the same row downloading.
            let later = try await TmuxSession(TmuxSession.haulCommand([], state: state, in: directory))
            defer { later.close() }
            try await later.waitFor("the attached UI shows the row downloading") { _ in await later.row("long.bin")?.contains("downloading") == true }
            #expect(await later.screen().contains { $0.contains("attached to the queue haul (pid \(pid)) runs") })
            await later.keys("D")
            try await later.waitFor("D leaves the attached UI") { lines in lines.contains { $0.contains("[exited 0]") } }
            #expect(Self.alive(pid), "leaving an attached UI leaves the runner running")

            // SIGTERM keeps its meaning: pause everything, checkpoint, exit.
            kill(pid, SIGTERM)
            try await eventually(timeout: 5, "the runner exits") { !Self.alive(pid) }
            let rows = try await CLI.list(state: state, in: directory)
            let row = try #require(rows.first)
            #expect(row["state"] as? String == "paused")
            #expect((row["bytes"] as? NSNumber)?.int64Value == fileLength(directory + "/long.bin.part"), "the checkpoint is the part file")
        }
    }

    @Test("17: D hands the queue to a runner in the background and gives the terminal back; the downloads resume there with Range and If-Range")
    func theDetachKeyHandsTheQueueOver() async throws {
        try await CLI.withServer { server, directory in
            let state = directory + "/state"
            let (tmux, uiPID) = try await Self.runnerUI(downloading: "d.bin", server, in: directory)
            defer { tmux.close() }
            await tmux.keys("D")
            try await tmux.waitFor("the terminal is given back") { lines in lines.contains { $0.contains("[exited 0]") } }
            let screen = await tmux.screen().joined(separator: "\n")
            #expect(screen.contains("haul: detached: the queue goes on in the background (pid "), "\(screen)")
            try await eventually("a new runner holds the queue") { Self.runnerPID(state).map { $0 != uiPID && Self.alive($0) } == true }
            let runner = try #require(Self.runnerPID(state))
            try await eventually("the download resumed in the background with Range and If-Range") {
                server.requests("/d.bin").count >= 2 && server.requests("/d.bin").last?.ifRange != nil
                    && server.requests("/d.bin").last?.range?.hasPrefix("bytes=") == true
            }
            let before = fileLength(directory + "/d.bin.part") ?? 0
            try await Task.sleep(for: .seconds(1))
            #expect((fileLength(directory + "/d.bin.part") ?? 0) > before, "the part file grows with no UI")

            // haul stop: paused, checkpointed, the runner gone within 3 s.
            let started = ContinuousClock.now
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(stop.status == 0, "\(stop.stdout) \(stop.stderr)")
            #expect(ContinuousClock.now - started < .seconds(3))
            #expect(!Self.alive(runner))
            let rows = try await CLI.list(state: state, in: directory)
            #expect(rows.first?["state"] as? String == "paused")
            let kept = fileLength(directory + "/d.bin.part")
            #expect((rows.first?["bytes"] as? NSNumber)?.int64Value == kept, "the checkpoint is the part file")

            // haul start: a runner in the background resumes it from there, with If-Range.
            let start = try await HaulProcess(["start"], in: directory, state: state).wait(timeout: 20)
            #expect(start.status == 0, "\(start.stderr)")
            #expect(start.stdout.contains("runs in the background (pid "), "\(start.stdout)")
            try await eventually("resumed from the bytes kept") {
                server.requests("/d.bin").last.map { $0.range == kept.map { resumeRange(keeping: $0) } && $0.ifRange != nil } == true
            }
            let again = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(again.status == 0)
            let none = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(none.status == 1)
            #expect(none.stderr == "haul: no haul runs the queue at \(state)\n")
        }
    }

    /// Two UIs started at the same instant on a new queue: one runs it, the other waits a moment
    /// for its socket and attaches (a tester's second exited 2, `queue in use`, its URL never added).
    @Test("17: two UIs started at the same instant: one runs the queue, the other attaches, both URLs queued")
    func twoUIsStartedAtOnceBothGetTheQueue() async throws {
        try await CLI.withServer { server, directory in
            var faults = Faults()
            faults.throttleBytesPerSecond = 256 * 1024
            for name in ["a.bin", "b.bin"] { server.serve("/" + name, size: 8 * 1024 * 1024, faults: faults) }
            let state = directory + "/state"
            async let first = TmuxSession(TmuxSession.haulCommand(["-d", directory, server.url("/a.bin").absoluteString], state: state, in: directory))
            async let second = TmuxSession(TmuxSession.haulCommand(["-d", directory, server.url("/b.bin").absoluteString], state: state, in: directory))
            let (one, two) = try await (first, second)
            defer {
                one.close()
                two.close()
            }
            for ui in [one, two] {
                try await ui.waitFor("both rows in each UI") { _ in
                    let a = await ui.row("a.bin")
                    let b = await ui.row("b.bin")
                    return a != nil && b != nil
                }
            }
            #expect(!(await two.screen()).contains { $0.contains("queue in use") })
            #expect(!(await one.screen()).contains { $0.contains("queue in use") })
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(stop.status == 0, "\(stop.stderr)")
        }
    }

    /// A UI attached to a queue whose UI hands it over with D follows it to the new runner (a
    /// tester's ended, saying the runner had, as the queue went on in the background).
    @Test("17: an attached UI follows the queue when its UI hands it over with D")
    func anAttachedUIFollowsAHandOver() async throws {
        try await CLI.withServer { server, directory in
            let state = directory + "/state"
            let (first, uiPID) = try await Self.runnerUI(downloading: "h.bin", server, in: directory)
            defer { first.close() }
            let second = try await TmuxSession(TmuxSession.haulCommand([], state: state, in: directory))
            defer { second.close() }
            try await second.waitFor("attached") { _ in await second.row("h.bin")?.contains("downloading") == true }
            await first.keys("D")
            try await first.waitFor("the terminal is given back") { lines in lines.contains { $0.contains("[exited 0]") } }
            try await eventually("a new runner holds the queue") { Self.runnerPID(state).map { $0 != uiPID && Self.alive($0) } == true }
            let runner = try #require(Self.runnerPID(state))
            try await second.waitFor("attached to the new runner") { lines in
                lines.contains { $0.contains("attached to the queue haul (pid \(runner)) runs") }
            }
            try await second.waitFor("still downloading there") { _ in await second.row("h.bin")?.contains("downloading") == true }
            #expect(!(await second.screen()).contains { $0.contains("[exited") }, "the attached UI is still up")
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(stop.status == 0, "\(stop.stderr)")
        }
    }

    @Test("17: other shells steer the running queue live, a second UI attaches, and a kill -9 of the runner ends it in one line")
    func otherShellsAndUIsSteerTheRunningQueue() async throws {
        try await CLI.withServer { server, directory in
            var faults = Faults()
            faults.throttleBytesPerSecond = 256 * 1024
            for name in ["one.bin", "two.bin"] { server.serve("/" + name, size: 32 * 1024 * 1024, faults: faults) }
            server.serve("/small.bin", size: 300_000)
            let state = directory + "/state"
            let first = try await TmuxSession(TmuxSession.haulCommand(["-d", directory, server.url("/one.bin").absoluteString], state: state, in: directory))
            defer { first.close() }
            try await first.waitFor("one.bin runs") { _ in await first.row("one.bin")?.contains("downloading") == true }
            let runner = try #require(Self.runnerPID(state))
            let socket = state + "/haul.sock"
            var info = stat()
            #expect(stat(socket, &info) == 0 && info.st_mode & 0o777 == 0o600, "the socket is the user's alone")

            // haul add from another shell: downloading within 2 s, shown in the UI.
            let added = ContinuousClock.now
            let add = try await HaulProcess(["add", "-d", directory, server.url("/two.bin").absoluteString], in: directory, state: state).wait()
            #expect(add.status == 0, "\(add.stderr)")
            #expect(add.stdout.hasPrefix("2\t"), "\(add.stdout)")
            try await eventually("the runner asks for two.bin") { !server.requests("/two.bin").isEmpty }
            #expect(ContinuousClock.now - added < .seconds(2), "the added download started within 2 s")
            try await first.waitFor("two.bin downloading in the UI") { _ in await first.row("two.bin")?.contains("downloading") == true }

            // haul pause: paused in the UI within a second.
            let paused = ContinuousClock.now
            let pause = try await HaulProcess(["pause", "2"], in: directory, state: state).wait()
            #expect(pause.status == 0 && pause.stdout == "paused 2\n", "\(pause.stdout) \(pause.stderr)")
            try await first.waitFor("two.bin paused in the UI") { _ in await first.row("two.bin")?.contains("paused") == true }
            #expect(ContinuousClock.now - paused < .seconds(1.5))
            let refused = try await HaulProcess(["remove", "1"], in: directory, state: state).wait()
            #expect(refused.status == 2, "\(refused.stderr)")
            // Said with the state the runner shows (it said `it is queued` of a running download).
            #expect(refused.stderr == "haul: error: cannot remove download 1: it is downloading\n", "\(refused.stderr)")

            // haul list --json asks the runner: bytes grow between two calls, with the speed.
            let before = try await CLI.list(state: state, in: directory)
            try await Task.sleep(for: .seconds(1))
            let after = try await CLI.list(state: state, in: directory)
            let bytes = { (rows: [[String: Any]]) in (rows.first { ($0["id"] as? Int) == 1 }?["bytes"] as? NSNumber)?.int64Value ?? 0 }
            #expect(bytes(after) > bytes(before), "\(bytes(before)) then \(bytes(after))")
            #expect(after.first?["speed"] != nil, "live rows carry their speed")

            // haul get hands its URL to the runner and follows it to the end.
            let get = try await HaulProcess(["get", "-d", directory, server.url("/small.bin").absoluteString], in: directory, state: state).wait()
            #expect(get.status == 0, "\(get.stdout) \(get.stderr)")
            #expect(sha256(ofFile: directory + "/small.bin") == server.sha256("/small.bin"))
            // What the runner trusts is its own: a get's trust options are refused, not dropped.
            let trusting = try await HaulProcess(["get", "--allow-downgrade", "-d", directory, server.url("/two.bin").absoluteString], in: directory, state: state).wait()
            #expect(trusting.status == 2 && trusting.stderr.contains("give --ca-certificate and --allow-downgrade to the haul that runs the queue"), "\(trusting.stderr)")
            try await first.waitFor("small.bin completed in the UI") { _ in await first.row("small.bin")?.contains("completed") == true }

            // A second UI attaches: both redraw, and a key in one shows in the other.
            let second = try await TmuxSession(TmuxSession.haulCommand([], state: state, in: directory))
            defer { second.close() }
            try await second.waitFor("the attached UI shows the rows") { _ in await second.row("one.bin")?.contains("downloading") == true }
            await second.keys("p")
            try await first.waitFor("the second UI's pause in the first") { _ in await first.row("one.bin")?.contains("paused") == true }
            try await second.waitFor("and in the second") { _ in await second.row("one.bin")?.contains("paused") == true }
            await second.keys("Space")
            try await first.waitFor("resumed from the second UI") { _ in await first.row("one.bin")?.contains("downloading") == true }

            // kill -9 of the runner: the attached UI says so in one line and exits; the terminal is restored.
            try await Task.sleep(for: .milliseconds(500))
            kill(runner, SIGKILL)
            try await second.waitFor("the attached UI ends") { lines in lines.contains { $0.contains("[exited 1]") } }
            let screen = await second.screen().filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
            #expect(screen.contains { $0.hasPrefix("haul: the queue's runner (pid \(runner)) ended") }, "\(screen)")
            #expect(!screen.contains { $0.hasPrefix("NAME") }, "the table is gone: \(screen)")

            // The next runner resumes from the bytes on disk.
            let onDisk = fileLength(directory + "/one.bin.part") ?? 0
            let start = try await HaulProcess(["start"], in: directory, state: state).wait(timeout: 20)
            #expect(start.status == 0, "\(start.stderr)")
            try await eventually("one.bin resumed") { server.requests("/one.bin").last?.range?.hasPrefix("bytes=") == true }
            let resumedAt = Int64(server.requests("/one.bin").last?.range?.dropFirst("bytes=".count).split(separator: "-").first ?? "") ?? -1
            #expect(resumedAt > 0 && onDisk - resumedAt <= 1024 * 1024, "resumed at \(resumedAt) with \(onDisk) on disk")
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(stop.status == 0)
        }
    }
}

/// A `haul get` that follows a runner's downloads: removed by another shell, or stopped by a signal.
@Suite struct FollowingGetTests {
    /// A runner started on `directory/state`, and a `haul get` of `path` (served at `rate` bytes a
    /// second) following it.
    static func following(_ path: String, size: Int, rate: Int, _ server: LoopbackServer, in directory: String) async throws -> (String, HaulProcess) {
        var faults = Faults()
        faults.throttleBytesPerSecond = rate
        server.serve(path, size: size, faults: faults)
        let state = directory + "/state"
        let start = try await HaulProcess(["start"], in: directory, state: state).wait(timeout: 20)
        #expect(start.status == 0, "\(start.stderr)")
        return (state, try HaulProcess(["get", "-d", directory, server.url(path).absoluteString], in: directory, state: state))
    }

    /// Ctrl-C pauses the downloads it asked for and each says where, as when the get runs the queue
    /// itself (a tester's ended without a line).
    @Test func aSignalPausesTheFollowedDownloadsAndSaysWhere() async throws {
        try await CLI.withServer { server, directory in
            let (state, get) = try await Self.following("/slow.bin", size: 4_000_000, rate: 100_000, server, in: directory)
            try await eventually("bytes on disk") { (fileLength(directory + "/slow.bin.part") ?? 0) > 0 }
            get.send(SIGINT)
            let run = try await get.wait(timeout: 20)
            #expect(run.status == 130)
            #expect(run.stdout.contains("[1] paused at "), "\(run.stdout)")
            let rows = try await CLI.list(state: state, in: directory)
            #expect(rows.first?["state"] as? String == "paused")
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(stop.status == 0, "\(stop.stderr)")
        }
    }

    /// The get was stopped (SIGSTOP) while its row completed and was removed, so the pictures it
    /// reads next may no longer hold the completion (newest wins). It says so in a line, or says
    /// `completed` and exits 0; before, it ended with a progress line and exit 1, not a word why
    /// (a tester's `haul remove` from another shell).
    @Test func aFollowedRowRemovedByAnotherShellIsSaid() async throws {
        try await CLI.withServer { server, directory in
            let (state, get) = try await Self.following("/gone.bin", size: 300_000, rate: 200_000, server, in: directory)
            try await eventually("the get's download runs") { !server.requests("/gone.bin").isEmpty }
            get.send(SIGSTOP)
            try await eventually(timeout: 20, "completed", every: .milliseconds(200)) {
                try await CLI.list(state: state, in: directory).first { ($0["id"] as? Int) == 1 }?["state"] as? String == "completed"
            }
            let removed = try await HaulProcess(["remove", "1"], in: directory, state: state).wait()
            #expect(removed.status == 0, "\(removed.stderr)")
            get.send(SIGCONT)
            let run = try await get.wait(timeout: 20)
            #expect(sha256(ofFile: directory + "/gone.bin") == server.sha256("/gone.bin"))
            let said = run.stdout.contains("[1] removed from the queue by another command before haul get saw it end")
            let completed = run.stdout.contains("[1] completed")
            let honest = run.status == 0 ? completed : run.status == 1 && said
            #expect(honest, "exit \(run.status): \(run.stdout) \(run.stderr)")
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait(timeout: 20)
            #expect(stop.status == 0, "\(stop.stderr)")
        }
    }
}

/// Issue 18, item 5: the queue's holder is who holds its lock, whatever the binary is called.
@Suite struct RenamedBinaryTests {
    @Test("18.5: a haul renamed or copied still holds the queue: list shows it running, edits refuse naming it")
    func aRenamedHaulIsStillTheHolder() async throws {
        try await CLI.withServer { server, directory in
            var faults = Faults()
            faults.throttleBytesPerSecond = 256 * 1024
            server.serve("/r.bin", size: 8 * 1024 * 1024, faults: faults)
            let copy = directory + "/fetcher"
            try FileManager.default.copyItem(atPath: HaulProcess.binary.path, toPath: copy)
            let state = directory + "/state"
            let renamed = try ChildProcess(
                copy, ["get", "-d", directory, server.url("/r.bin").absoluteString],
                environment: ProcessInfo.processInfo.environment.merging(["HAUL_STATE_DIR": state]) { $1 }
            )
            defer { renamed.send(SIGKILL) }
            try await eventually("the renamed haul downloads") { (fileLength(directory + "/r.bin.part") ?? 0) > 0 }
            let rows = try await CLI.list(state: state, in: directory)
            #expect(rows.first?["state"] as? String == "downloading", "not 'queued (interrupted)': \(rows)")
            let pause = try await HaulProcess(["pause", "1"], in: directory, state: state).wait()
            #expect(pause.status == 2)
            #expect(pause.stderr.contains("haul (pid \(renamed.pid)) is running this queue"), "\(pause.stderr)")
            renamed.send(SIGINT)
            #expect(await renamed.wait() == ChildProcess.Termination(status: 130, signalled: false))
        }
    }
}
