import Foundation
import LoopbackServer
import Testing
import TestSupport

/// The real `haul` in tmux against the loopback server, driven by keys as a person drives it.
@Suite(.serialized) struct TUIEndToEndTests {
    /// Throttled so nothing finishes while a test looks at it.
    static let slow: Faults = {
        var faults = Faults()
        faults.throttleBytesPerSecond = 256 * 1024
        return faults
    }()

    static let size = 16 * 1024 * 1024

    /// Bytes the row shows as done (`1.2 MiB/16.0 MiB` → `1.2 MiB`), to see them stand still.
    static func bytesShown(_ row: String?) -> String? {
        guard let row, let slash = row.range(of: "/16.0 MiB") else { return nil }
        let before = row[..<slash.lowerBound]
        return before.split(separator: " ").suffix(2).joined(separator: " ")
    }

    @Test func rowsPauseResumeCancelAddResizeQuitAndComeBack() async throws {
        try await CLI.withServer { server, directory in
            for name in ["a.bin", "b.bin", "c.bin"] {
                server.serve("/" + name, size: Self.size, faults: Self.slow)
            }
            let state = directory + "/state"
            let command = TmuxSession.haulCommand(["-d", directory, server.url("/a.bin").absoluteString, server.url("/b.bin").absoluteString], state: state, in: directory)
            let tmux = try await TmuxSession(command)
            defer { tmux.close() }

            // Rows appear, both downloading, the first selected.
            try await tmux.waitFor("two downloading rows") { rows in
                rows.contains { $0.hasPrefix("a.bin") && $0.contains("downloading") }
                    && rows.contains { $0.hasPrefix("b.bin") && $0.contains("downloading") }
            }
            try await tmux.waitFor("a.bin's first bytes") { _ in
                Self.bytesShown(await tmux.row("a.bin")).map { $0 != "0 B" } == true && (fileLength(directory + "/a.bin.part") ?? 0) > 0
            }
            #expect(await tmux.screen()[0].hasPrefix("haul  ↓ "))
            #expect(await tmux.screen()[1].hasPrefix("NAME"))

            // p pauses the selected row: it says paused and its bytes stop.
            await tmux.keys("p")
            try await tmux.waitFor("a.bin paused") { _ in await tmux.row("a.bin")?.contains("paused") == true }
            let pausedBytes = Self.bytesShown(await tmux.row("a.bin"))
            let pausedLength = fileLength(directory + "/a.bin.part")
            #expect(pausedBytes != nil)
            #expect((pausedLength ?? 0) > 0, "the part file keeps the bytes")
            try await Task.sleep(for: .seconds(1.2))
            #expect(Self.bytesShown(await tmux.row("a.bin")) == pausedBytes)
            #expect(fileLength(directory + "/a.bin.part") == pausedLength)

            // Space resumes it: the server sees a Range request from where it stopped, with If-Range.
            await tmux.keys("Space")
            try await tmux.waitFor("a.bin downloading again") { _ in await tmux.row("a.bin")?.contains("downloading") == true }
            try await eventually("a ranged request for a.bin") {
                server.requests("/a.bin").contains { $0.range == pausedLength.map { resumeRange(keeping: $0) } && $0.ifRange != nil }
            }

            // c asks how much it deletes; y cancels and deletes the part file.
            await tmux.keys("j", "c")
            try await tmux.waitFor("the cancel question") { rows in
                rows.last { !$0.isEmpty }.map { $0.hasPrefix("Cancel (deletes ") && $0.hasSuffix("b.bin? y/n") } == true
            }
            await tmux.keys("y")
            try await tmux.waitFor("b.bin cancelled") { _ in await tmux.row("b.bin")?.contains("cancelled") == true }
            try await eventually("b.bin.part deleted") { fileLength(directory + "/b.bin.part") == nil }

            // a opens the prompt; a URL and Enter add a row.
            await tmux.keys("a")
            try await tmux.waitFor("the add prompt") { rows in rows.contains { $0.hasPrefix("Add URL:") } }
            await tmux.type(server.url("/c.bin").absoluteString)
            await tmux.keys("Enter")
            try await tmux.waitFor("c.bin added and running") { _ in await tmux.row("c.bin")?.contains("downloading") == true }
            #expect(await tmux.screen().contains("added 1 URL"))
            await tmux.keys("Escape")
            try await tmux.waitFor("the hint bar back") { rows in rows.contains { $0.hasPrefix("q quit  ? help") } }

            // A resize to 60×20 lays everything out again, with nothing left of the wider layout (at 60
            // columns the resume column goes before the speed and ETA).
            await tmux.resize(width: 60, height: 20)
            try await tmux.waitFor("the 60-column layout") { rows in
                rows.count >= 20 && rows[1].hasPrefix("NAME") && rows[1].contains("SPEED") && rows[1].contains("ETA")
                    && !rows[1].contains("RESUMED") && !rows[1].contains("PROGRESS")
            }
            let narrow = await tmux.screen()
            try #require(narrow.count >= 20)
            #expect(narrow[0].hasPrefix("haul  ↓ "))
            #expect(narrow[5..<19].allSatisfy { $0.isEmpty }, "no row of the old layout is left below the table: \(narrow)")
            #expect(narrow.contains { $0.hasPrefix("a.bin") && $0.contains("downloading") })
            #expect(narrow.contains { $0.hasPrefix("b.bin") && $0.contains("cancelled") })
            #expect(narrow[19].hasPrefix("q quit  ? help"), "the hint bar moved to the new last row: \(narrow)")
            #expect(!narrow.joined().contains("Enter details"), "a hint that no longer fits is gone")
            await tmux.resize(width: 15, height: 4)
            try await tmux.waitFor("terminal too small") { rows in rows[0].hasPrefix("terminal too") }
            await tmux.resize(width: 100, height: 30)
            try await tmux.waitFor("the full layout again") { rows in rows[1].contains("RESUMED AT") }

            // q quits (exit 0); everything is paused and checkpointed.
            let rangedBefore = server.requests("/a.bin").filter { $0.range != nil }.count
            await tmux.keys("q")
            try await tmux.waitFor("haul to exit") { rows in rows.contains("[exited 0]") }
            let stored = try await CLI.list(state: state, in: directory)
            #expect(stored.count == 3)
            #expect(stored.filter { ($0["state"] as? String) == "paused" }.count == 2, "\(stored)")

            // A restart shows the same rows and resumes them.
            let again = try await TmuxSession(TmuxSession.haulCommand([], state: state, in: directory))
            defer { again.close() }
            try await again.waitFor("the same rows, resumed") { rows in
                TmuxSession.row("a.bin", in: rows)?.contains("downloading") == true
                    && TmuxSession.row("b.bin", in: rows)?.contains("cancelled") == true
                    && TmuxSession.row("c.bin", in: rows)?.contains("downloading") == true
            }
            try await eventually("a.bin resumed with a Range request") {
                server.requests("/a.bin").filter { $0.range != nil }.count > rangedBefore
            }
            let resumedRow = await again.row("a.bin")
            #expect(resumedRow?.contains("×") == true, "the resume offset column shows the resume: \(resumedRow ?? "")")
            await again.keys("q")
            try await again.waitFor("haul to exit") { rows in rows.contains("[exited 0]") }
        }
    }

    @Test func inputFileAddsItsURLsAndColoursFollowNoColor() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/one.bin", size: Self.size, faults: Self.slow)
            server.serve("/two.bin", size: Self.size, faults: Self.slow)
            let list = directory + "/urls.txt"
            try """
            # two files
            \(server.url("/one.bin").absoluteString)

              \(server.url("/two.bin").absoluteString)
            """.write(toFile: list, atomically: true, encoding: .utf8)
            let colored = try await TmuxSession(TmuxSession.haulCommand(["-i", list], state: directory + "/state", in: directory))
            defer { colored.close() }
            try await colored.waitFor("both rows") { rows in
                TmuxSession.row("one.bin", in: rows) != nil && TmuxSession.row("two.bin", in: rows) != nil
            }
            #expect(await colored.screen(colors: true).joined().contains("\u{1B}[36m"), "downloading is drawn in cyan")
            await colored.keys("q")
            try await colored.waitFor("exit") { rows in rows.contains("[exited 0]") }

            let plain = try await TmuxSession(TmuxSession.haulCommand([], state: directory + "/state", in: directory, environment: ["NO_COLOR": "1"]))
            defer { plain.close() }
            try await plain.waitFor("both rows again") { _ in await plain.row("one.bin")?.contains("downloading") == true }
            let screen = await plain.screen(colors: true).joined()
            let colours = (1...7).flatMap { ["\u{1B}[3\($0)m", ";3\($0)m", "\u{1B}[3\($0);"] }
            #expect(!colours.contains { screen.contains($0) }, "no foreground colour under NO_COLOR")
            #expect(screen.contains("\u{1B}[7m") || screen.contains(";7m"), "the selection is still reversed")
            await plain.keys("q")
            try await plain.waitFor("exit") { rows in rows.contains("[exited 0]") }
        }
    }

    @Test func aSignalPausesRestoresTheTerminalAndExits() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/s.bin", size: Self.size, faults: Self.slow)
            // The terminal's modes are saved before and after: raw mode must not outlive haul.
            let modes = "stty -g > \(directory)/modes.before; echo before; "
                + TmuxSession.haulCommand([server.url("/s.bin").absoluteString], state: directory + "/state", in: directory)
                + "; status=$?; stty -g > \(directory)/modes.after; (exit $status)"
            let tmux = try await TmuxSession(modes)
            defer { tmux.close() }
            try await tmux.waitFor("the row") { _ in await tmux.row("s.bin")?.contains("downloading") == true }
            try await eventually("haul's pid") { Self.haulPID(in: directory) != nil }
            let pid = try #require(Self.haulPID(in: directory))
            kill(pid, SIGTERM)
            try await tmux.waitFor("exit 143 on the restored screen") { rows in rows.contains("[exited 143]") }
            let rows = await tmux.screen()
            #expect(rows.contains("before"), "the shell's screen is back: \(rows)")
            #expect(!rows.contains { $0.hasPrefix("NAME") }, "no UI left on the screen")
            let before = try String(contentsOfFile: directory + "/modes.before", encoding: .utf8)
            let after = try String(contentsOfFile: directory + "/modes.after", encoding: .utf8)
            #expect(!before.isEmpty && before == after, "terminal modes restored")
            let stored = try await CLI.list(state: directory + "/state", in: directory)
            #expect(stored.first?["state"] as? String == "paused")
        }
    }

    @Test func badInputIsRefusedBeforeAnythingStarts() async throws {
        try await CLI.withServer { _, directory in
            let list = directory + "/urls.txt"
            try "http://ok.example/a\n# fine\nftp://nope.example/b\n".write(toFile: list, atomically: true, encoding: .utf8)
            let state = directory + "/state"
            let badFile = try await HaulProcess(["-i", list], in: directory, state: state).wait()
            #expect(badFile.status == 2)
            #expect(badFile.stderr == "haul: error: \(list):3: invalid URL 'ftp://nope.example/b': unsupported scheme 'ftp' (only http and https)\n")
            let missing = try await HaulProcess(["-i", directory + "/none.txt"], in: directory, state: state).wait()
            #expect(missing.status == 2)
            #expect(missing.stderr.hasPrefix("haul: error: cannot read \(directory)/none.txt: "))
            let noTerminal = try await HaulProcess(["http://ok.example/a"], in: directory, state: state).wait()
            #expect(noTerminal.status == 2)
            #expect(noTerminal.stderr == "haul: error: the terminal UI needs a terminal on stdin and stdout (use haul get in scripts)\n")
            let badRefresh = try await HaulProcess(["--refresh", "50"], in: directory, state: state).wait()
            #expect(badRefresh.status == 2)
            #expect(!FileManager.default.fileExists(atPath: state), "nothing was created")
        }
    }

    /// The haul process whose working directory is `directory` (the tmux pane runs it under a shell).
    static func haulPID(in directory: String) -> Int32? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in entries {
            guard let pid = Int32(entry) else { continue }
            guard let cmdline = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"),
                  let executable = String(decoding: cmdline, as: UTF8.self).split(separator: "\0").first,
                  executable.hasSuffix("/haul")
            else { continue }
            let cwd = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(entry)/cwd")
            if cwd == directory || cwd.map({ URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }) == URL(fileURLWithPath: directory).resolvingSymlinksInPath().path {
                return pid
            }
        }
        return nil
    }
}
