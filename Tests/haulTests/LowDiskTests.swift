import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Issue 18: low disk space with the real binary on a small tmpfs. The queue waits at the floor with
/// its bytes, goes on by itself when there is room, and purges only what it may.
@Suite(.serialized) struct LowDiskTests {
    static let mib = 1 << 20

    /// A tmpfs of `megabytes` at `directory/disk`; nil (the reason printed) where mounting is not
    /// allowed. CI runs as root, where it is. Unmounted by `unmount` (TestSupport).
    static func disk(_ directory: String, megabytes: Int) async throws -> String? {
        let disk = directory + "/disk"
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        guard try await FullDiskTests.mountTmpfs(disk, megabytes: megabytes) else { return nil }
        return disk
    }

    /// Whether the download to `path` completed: the file has its `size` and no part file is
    /// left. Cheap enough to poll (a digest is compared once, after).
    static func placed(_ path: String, size: Int) -> Bool {
        fileLength(path) == Int64(size) && fileLength(path + ".part") == nil
    }

    /// A body held at `offset` until the test releases it.
    static func held(at offset: Int) -> Faults {
        var faults = Faults()
        faults.holdAt = [offset]
        return faults
    }

    static func free(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfFileSystem(forPath: path)
        return try #require((attributes[.systemFreeSize] as? NSNumber)?.intValue)
    }

    /// Fills `disk` with a file of its own until `left` bytes are free.
    static func fill(_ disk: String, leaving left: Int, name: String = "filler") throws -> String {
        let path = disk + "/" + name
        let size = try free(disk) - left
        #expect(size > 0)
        // Written in place (not through a temporary file, which would need the room twice).
        #expect(throws: Never.self) { try Data(count: max(0, size)).write(to: URL(fileURLWithPath: path)) }
        return path
    }

    @Test("18.1: a download under the floor waits with its bytes and goes on by itself with Range and If-Range once a filler is deleted")
    func aDownloadWaitsAtTheFloorAndGoesOnWhenThereIsRoom() async throws {
        try await CLI.withServer { server, directory in
            guard let disk = try await Self.disk(directory, megabytes: 24) else { return }
            defer { unmount(disk) }
            server.serve("/big.bin", size: 8 * Self.mib, faults: Self.held(at: 2 * Self.mib))
            let part = disk + "/big.bin.part"
            let haul = try HaulProcess(
                ["get", server.url("/big.bin").absoluteString, "-o", disk + "/big.bin", "--min-free", "4M"],
                in: directory, state: directory + "/.state"
            )
            try await eventually("2 MiB on disk") { fileLength(part) == Int64(2 * Self.mib) }
            // Another program takes the room: 3 MiB left, under the 4 MiB floor.
            let filler = try Self.fill(disk, leaving: 3 * Self.mib)
            try await eventually(timeout: 10, "the download waits for disk space") { haul.stdoutSoFar.contains("waiting for disk space (") }
            server.release("/big.bin")
            let waitLine = haul.stdoutSoFar.split(separator: "\n").first { $0.contains("waiting for disk space") }.map(String.init) ?? ""
            #expect(waitLine.contains("free, floor 4.0 MiB)"), "says what is free and the floor: \(waitLine)")
            #expect(waitLine.contains("bytes kept"), "\(waitLine)")
            #expect(fileLength(part) == Int64(2 * Self.mib), "the bytes stay")
            try await Task.sleep(for: .seconds(3))
            #expect(server.requests("/big.bin").count == 1, "no new request while there is no room")

            try FileManager.default.removeItem(atPath: filler)
            let run = try await haul.wait(timeout: 60)
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            #expect(sha256(ofFile: disk + "/big.bin") == server.sha256("/big.bin"))
            let gets = server.requests("/big.bin")
            #expect(gets.count == 2, "\(gets.map(\.range))")
            #expect(gets.last?.range == resumeRange(keeping: 2 * Self.mib), "resumed where it waited")
            #expect(gets.last?.ifRange != nil, "with a validator")
            let log = try String(contentsOfFile: directory + "/.state/haul.log", encoding: .utf8)
            #expect(log.contains("waiting for disk space"), "the log says why it stopped")
        }
    }

    @Test("18.1: a file larger than the free space waits before it starts, and one larger than the disk says so, then goes on when the disk grows")
    func aFileThatCannotFitWaitsBeforeItStarts() async throws {
        try await CLI.withServer { server, directory in
            guard let disk = try await Self.disk(directory, megabytes: 24) else { return }
            defer { unmount(disk) }
            server.serve("/twelve.bin", size: 12 * Self.mib)
            server.serve("/huge.bin", size: 32 * Self.mib)
            let filler = try Self.fill(disk, leaving: 8 * Self.mib)
            let haul = try HaulProcess(
                ["get", server.url("/twelve.bin").absoluteString, server.url("/huge.bin").absoluteString, "-d", disk],
                in: directory, state: directory + "/.state"
            )
            try await eventually(timeout: 10, "both wait") {
                let out = haul.stdoutSoFar
                return out.contains("[1] waiting for disk space (needs 12.0 MiB, ") && out.contains("[2] waiting for disk space (needs 32.0 MiB; the file system holds 24.0 MiB in all)")
            }
            #expect(CLI.files(disk) == ["filler"], "not a byte written, no part file: \(CLI.files(disk))")
            // Room for the smaller one: it starts by itself; the larger one waits on.
            try FileManager.default.removeItem(atPath: filler)
            try await eventually(timeout: 15, "the smaller one completes") { Self.placed(disk + "/twelve.bin", size: 12 * Self.mib) }
            #expect(sha256(ofFile: disk + "/twelve.bin") == server.sha256("/twelve.bin"))
            #expect(fileLength(disk + "/huge.bin.part") == nil, "the larger one has not started")
            #expect(haul.isRunning)
            // The file system grows (a tmpfs remounted larger): it goes on by itself.
            guard try await FullDiskTests.mountTmpfs(disk, megabytes: 64, remount: true) else { return }
            let run = try await haul.wait(timeout: 60)
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            #expect(sha256(ofFile: disk + "/huge.bin") == server.sha256("/huge.bin"))
        }
    }

    @Test("18.1: two files that each fit but not together: one waits for the other, they never fill the disk between them")
    func twoFilesThatFitOnlyOneAtATimeTakeTurns() async throws {
        try await CLI.withServer { server, directory in
            guard let disk = try await Self.disk(directory, megabytes: 16) else { return }
            defer { unmount(disk) }
            // Each body is held halfway until the test lets it go: the one that takes the room is still
            // running when the other's answer comes. (Unheld, a loaded machine could see the first
            // complete before the second answered; that one then waits for room with nothing promised.)
            for name in ["f", "g"] { server.serve("/\(name).bin", size: 10 * Self.mib, faults: Self.held(at: 5 * Self.mib)) }
            let haul = try HaulProcess(
                ["get", server.url("/f.bin").absoluteString, server.url("/g.bin").absoluteString, "-d", disk, "--min-free", "1M"],
                in: directory, state: directory + "/.state"
            )
            // Both answer at once; one takes the room, the other waits, saying why.
            let promised = try await eventually(timeout: 20, "the other waits for the room promised to the first") {
                haul.stdoutSoFar.contains("of it promised to running downloads)")
            }
            if !promised { Issue.record("haul printed:\n\(haul.stdoutSoFar)") }
            // A release is kept for a body not yet started: the other goes past the hold too.
            for name in ["f", "g"] { server.release("/\(name).bin") }
            let tookTurns = try await eventually(timeout: 20, "one completes and the other waits") {
                haul.stdoutSoFar.contains("of it promised to running downloads)") && haul.stdoutSoFar.contains("] completed")
            }
            if !tookTurns { Issue.record("haul printed:\n\(haul.stdoutSoFar)") }
            let out = haul.stdoutSoFar
            let done = out.contains("[1] completed") ? "f" : "g"
            let other = done == "f" ? "g" : "f"
            #expect(sha256(ofFile: disk + "/\(done).bin") == server.sha256("/\(done).bin"))
            #expect(fileLength(disk + "/\(other).bin.part") == nil, "the other wrote nothing: \(out)")
            // The finished file moves elsewhere: the other goes on by itself.
            try FileManager.default.removeItem(atPath: disk + "/\(done).bin")
            let run = try await haul.wait(timeout: 60)
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            #expect(sha256(ofFile: disk + "/\(other).bin") == server.sha256("/\(other).bin"))
        }
    }

    @Test("18, review: haul stop says so when the runner could not save its latest changes, and exits 1")
    func stopSaysWhatCouldNotBeSaved() async throws {
        try await CLI.withServer { server, directory in
            guard let disk = try await Self.disk(directory, megabytes: 4) else { return }
            defer { unmount(disk) }
            server.serve("/a.bin", size: 1000)
            let state = disk + "/.state"
            let runner = try HaulProcess(["start", "--foreground", "-d", directory], in: directory, state: state)
            defer { runner.send(SIGKILL) }
            try await eventually("the runner serves its socket") { FileManager.default.fileExists(atPath: state + "/haul.sock") }
            // The queue's own disk fills up to the last block, then a download is added through the runner.
            _ = try await ChildProcess.run("/bin/dd", ["if=/dev/zero", "of=" + disk + "/filler", "bs=4096"], in: directory).status
            let add = try await HaulProcess(["add", server.url("/a.bin").absoluteString, "-d", directory], in: directory, state: state).wait()
            #expect(add.status == 0 || add.status == 1, "\(add.stdout) \(add.stderr)")
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait()
            #expect(stop.status == 1, "\(stop.stdout) \(stop.stderr)")
            #expect(stop.stderr.contains("but it could not save its latest changes (cannot save the queue: the disk holding the queue is full)"), "\(stop.stderr)")
            #expect(stop.stderr.split(separator: "\n").count == 1)
        }
    }

    @Test("18.3: --purge-when-low purges paused partial data least recently used first, keeps the rows, and never touches running or completed files")
    func purgeWhenLowTakesTheLeastRecentlyUsedFirst() async throws {
        try await CLI.withServer { server, directory in
            guard let disk = try await Self.disk(directory, megabytes: 24) else { return }
            defer { unmount(disk) }
            for name in ["a", "b", "c"] { server.serve("/\(name).bin", size: 4 * Self.mib, faults: Self.held(at: 2 * Self.mib)) }
            server.serve("/done.bin", size: Self.mib)
            let state = directory + "/.state"
            let urls = ["done", "a", "b", "c"].map { server.url("/\($0).bin").absoluteString }
            let runner = try HaulProcess(
                ["start", "--foreground", "-j", "4", "-d", disk, "--min-free", "4M", "--purge-when-low"] + urls, in: directory, state: state
            )
            defer { runner.send(SIGKILL) }
            try await eventually("the three reach 2 MiB and the small one completes") {
                ["a", "b", "c"].allSatisfy { fileLength(disk + "/\($0).bin.part") == Int64(2 * Self.mib) }
                    && Self.placed(disk + "/done.bin", size: Self.mib)
            }
            // Paused in the order b, a, c: b is the least recently used, then a.
            for id in ["3", "2", "4"] {
                let pause = try await HaulProcess(["pause", id], in: directory, state: state).wait()
                #expect(pause.status == 0, "\(pause.stderr)")
                try await Task.sleep(for: .milliseconds(300))
            }
            for name in ["a", "b", "c"] { server.release("/\(name).bin") }
            // 1 MiB short of the 4 MiB floor: one 2 MiB partial is enough, the least recently used.
            _ = try Self.fill(disk, leaving: 3 * Self.mib)
            try await eventually(timeout: 15, "b is purged") { fileLength(disk + "/b.bin.part") == nil }
            try await Task.sleep(for: .seconds(3))
            var rows = try await CLI.list(state: state, in: directory)
            #expect(rows.count == 4, "every row stays")
            func row(_ name: String) -> [String: Any] { rows.first { ($0["url"] as? String)?.hasSuffix("/\(name).bin") == true } ?? [:] }
            #expect(row("b")["state"] as? String == "paused" && row("b")["bytes"] as? Int == 0, "\(row("b"))")
            #expect((row("b")["error"] as? String)?.hasPrefix("purged when disk space ran low: 2.0 MiB of partial data discarded") == true, "\(row("b"))")
            #expect(row("a")["bytes"] as? Int == 2 * Self.mib && row("c")["bytes"] as? Int == 2 * Self.mib, "only as much as was lacking")
            #expect(fileLength(disk + "/a.bin.part") == Int64(2 * Self.mib) && fileLength(disk + "/c.bin.part") == Int64(2 * Self.mib))
            // Short again: a goes next, c (the most recently used) stays.
            _ = try Self.fill(disk, leaving: 3 * Self.mib, name: "filler2")
            try await eventually(timeout: 15, "a is purged") { fileLength(disk + "/a.bin.part") == nil }
            try await Task.sleep(for: .seconds(3))
            rows = try await CLI.list(state: state, in: directory)
            #expect(row("a")["bytes"] as? Int == 0 && row("c")["bytes"] as? Int == 2 * Self.mib, "\(rows)")
            #expect(sha256(ofFile: disk + "/done.bin") == server.sha256("/done.bin"), "a completed file is never touched")
            #expect(row("done")["state"] as? String == "completed")
            let log = try String(contentsOfFile: state + "/haul.log", encoding: .utf8)
            let purges = log.split(separator: "\n").filter { $0.contains("purged") }
            #expect(purges.count == 2 && purges.first?.contains("id=3") == true && purges.last?.contains("id=2") == true, "each purge logged: \(purges)")
            // A purged row resumes from zero and ends with the right file once there is room.
            for name in ["filler", "filler2"] { try FileManager.default.removeItem(atPath: disk + "/" + name) }
            let resume = try await HaulProcess(["resume", "3"], in: directory, state: state).wait()
            #expect(resume.status == 0, "\(resume.stderr)")
            try await eventually(timeout: 20, "b completes") { Self.placed(disk + "/b.bin", size: 4 * Self.mib) }
            #expect(sha256(ofFile: disk + "/b.bin") == server.sha256("/b.bin"))
            #expect(server.requests("/b.bin").last?.range == nil, "fetched from zero")
            let stop = try await HaulProcess(["stop"], in: directory, state: state).wait()
            #expect(stop.status == 0, "\(stop.stderr)")
        }
    }

    @Test("18.2: X in the UI purges paused downloads, keeps them paused at 0 B, and a resume fetches each whole")
    func purgeInTheUIKeepsTheRows() async throws {
        try await CLI.withServer { server, directory in
            for name in ["one", "two"] { server.serve("/\(name).bin", size: 3 * Self.mib, faults: Self.held(at: Self.mib)) }
            let state = directory + "/state"
            let urls = ["one", "two"].map { server.url("/\($0).bin").absoluteString }
            let tmux = try await TmuxSession(TmuxSession.haulCommand(["-d", directory] + urls, state: state, in: directory))
            defer { tmux.close() }
            try await tmux.waitFor("both hold 1 MiB") { _ in
                ["one", "two"].allSatisfy { fileLength(directory + "/\($0).bin.part") == Int64(Self.mib) }
            }
            await tmux.keys("P")
            try await tmux.waitFor("both paused") { rows in
                TmuxSession.row("one.bin", in: rows)?.contains("paused") == true && TmuxSession.row("two.bin", in: rows)?.contains("paused") == true
            }
            for name in ["one", "two"] { server.release("/\(name).bin") }
            await tmux.keys("X")
            try await tmux.waitFor("the purge asks first") { rows in rows.contains { $0.contains("Purge 2 paused downloads (deletes 2.0 MiB of partial data; the downloads stay)?") } }
            await tmux.keys("y")
            try await tmux.waitFor("the purge says what came back") { rows in
                rows.contains { $0.contains("purged 2 paused downloads: 2.0 MiB freed; they stay in the queue") }
            }
            try await tmux.waitFor("the rows stay, paused at 0 B") { rows in
                ["one.bin", "two.bin"].allSatisfy { TmuxSession.row($0, in: rows)?.contains("paused") == true && TmuxSession.row($0, in: rows)?.contains(" 0 B") == true }
            }
            #expect(fileLength(directory + "/one.bin.part") == nil && fileLength(directory + "/two.bin.part") == nil, "the data is gone")
            // The details pane says what happened to it.
            await tmux.keys("Enter")
            let screen = await tmux.screen()
            #expect(TmuxSession.row("one.bin", in: screen)?.contains("purged: 1.0 MiB") == true, "the row says it was purged: \(screen.joined(separator: "\n"))")
            try await tmux.waitFor("the details say purged") { rows in rows.contains { $0.hasPrefix("Purged") && $0.contains("purged: 1.0 MiB of partial data discarded") } }
            await tmux.keys("Enter")
            await tmux.keys("R")
            try await tmux.waitFor("both complete") { _ in
                ["one", "two"].allSatisfy { Self.placed(directory + "/\($0).bin", size: 3 * Self.mib) }
            }
            for name in ["one", "two"] {
                #expect(sha256(ofFile: directory + "/\(name).bin") == server.sha256("/\(name).bin"))
                #expect(server.requests("/\(name).bin").last?.range == nil, "\(name) fetched whole, from zero")
            }
        }
    }
}
