import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Issue 19's views with the real binary in tmux: find among 200 rows, a sort by speed, the
/// header and help at 80×24, and terminals the UI cannot draw on.
@Suite(.serialized) struct TableViewsEndToEndTests {
    static func throttled(_ bytesPerSecond: Int) -> Faults {
        var faults = Faults()
        faults.throttleBytesPerSecond = bytesPerSecond
        return faults
    }

    /// The last line with anything on it (capture-pane ends with an empty one).
    static func bottom(_ rows: [String]) -> String {
        rows.last { !$0.isEmpty } ?? ""
    }

    @Test func findNarrowsTwoHundredRowsEscapeRestoresThemAndASortPutsTheFastestFirst() async throws {
        try await CLI.withServer { server, directory in
            // Three run (slow, fast, middling, in queue order); two hundred wait behind them.
            let racers = [("race-slow.bin", 32 * 1024), ("race-fast.bin", 768 * 1024), ("race-mid.bin", 192 * 1024)]
            var urls: [String] = []
            for (name, rate) in racers {
                server.serve("/" + name, size: 64 << 20, faults: Self.throttled(rate))
                urls.append(server.url("/" + name).absoluteString)
            }
            for index in 0..<200 {
                let path = "/file-\(index).bin"
                server.serve(path, size: 1024, faults: Self.throttled(1024))
                urls.append(server.url(path).absoluteString)
            }
            let list = directory + "/urls.txt"
            try urls.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
            let command = TmuxSession.haulCommand(["-d", directory, "-j", "3", "-i", list], state: directory + "/state", in: directory)
            let tmux = try await TmuxSession(command)
            defer { tmux.close() }
            try await tmux.waitFor("203 rows, three running", timeout: 60) { rows in
                rows[0].contains("3 downloading · 200 queued") && rows.contains { $0.hasPrefix("race-fast.bin") && $0.contains("downloading") }
            }
            // The table scrolls: the bottom line says where the selection is.
            let bottom = Self.bottom(await tmux.screen())
            #expect(bottom.hasSuffix("row 1 of 203"), "\(bottom)")

            // `/` narrows as the text is typed; the header says how many match.
            await tmux.keys("/")
            try await tmux.waitFor("the find prompt") { rows in Self.bottom(rows).hasPrefix("Find:") }
            await tmux.type("race")
            try await tmux.waitFor("three rows of 203") { rows in
                rows[0].contains("filter: race (3 of 203)") && rows.filter { $0.hasPrefix("file-") }.isEmpty
                    && rows.filter { $0.hasPrefix("race-") }.count == 3
            }
            await tmux.keys("Enter")
            try await tmux.waitFor("the filter kept after Enter") { rows in rows.contains { $0.contains("3 of 203 rows match; Esc shows all") } }

            // s three times: name, progress, speed. Once the speeds have settled, the fastest is first.
            try await tmux.waitFor("the speeds apart", timeout: 30) { _ in
                guard let fast = await tmux.row("race-fast.bin"), let mid = await tmux.row("race-mid.bin") else { return false }
                return fast.contains("KiB/s") && mid.contains("KiB/s")
            }
            await tmux.keys("s", "s", "s")
            try await tmux.waitFor("sorted by speed, fastest first") { rows in
                rows.contains { $0.hasPrefix("sorted by speed, fastest first") } && rows[1].contains("SPEED▼")
                    && rows.firstIndex { $0.hasPrefix("race-fast.bin") } == 2
            }
            let order = await tmux.screen().filter { $0.hasPrefix("race-") }.map { String($0.prefix(13)) }
            #expect(order == ["race-fast.bin", "race-mid.bin ", "race-slow.bin"], "\(order)")

            // Esc shows every row again; the queue's order did not change with the sort.
            await tmux.keys("Escape")
            try await tmux.waitFor("all rows back") { rows in
                rows.contains { $0.hasPrefix("showing all 203 rows") } && rows.contains { $0.hasPrefix("file-") } && !rows[0].contains("filter:")
            }
            await tmux.keys("s", "s", "s", "s")
            try await tmux.waitFor("queue order") { rows in rows.contains { $0.hasPrefix("in queue order") } }
            let queueOrder = await tmux.screen().dropFirst(2).prefix(4).map { String($0.prefix(13)) }
            #expect(queueOrder == ["race-slow.bin", "race-fast.bin", "race-mid.bin ", "file-0.bin   "], "\(queueOrder)")
            await tmux.keys("q")
            try await tmux.waitFor("haul quit") { rows in rows.contains { $0.contains("[exited 0]") } }
        }
    }

    @Test func atEightyByTwentyFourAFailureIsCountedAndTheHelpScrollsToQuit() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/running.bin", size: 64 << 20, faults: Self.throttled(64 * 1024))
            server.serve("/waiting.bin", size: 1 << 20, faults: Self.throttled(64 * 1024))
            var gone = Faults()
            gone.fixedStatus = 404
            server.serve("/gone.bin", size: 10, faults: gone)
            let urls = ["/running.bin", "/gone.bin", "/waiting.bin"].map { server.url($0).absoluteString }
            let command = TmuxSession.haulCommand(["-d", directory, "-j", "2"] + urls, state: directory + "/state", in: directory)
            let tmux = try await TmuxSession(command, width: 80, height: 24)
            defer { tmux.close() }
            try await tmux.waitFor("the failure counted in the header at 80 columns") { rows in
                rows[0].contains("1 failed") && rows[0].contains("2 at once") && TmuxSession.row("gone.bin", in: rows)?.contains("failed") == true
            }
            // y copies the selected file's path with OSC 52: tmux (set-clipboard on) keeps it as a buffer.
            _ = await tmux.command("set-option", "-g", "set-clipboard", "on")
            await tmux.keys("y")
            try await tmux.waitFor("the copy said") { rows in rows.contains { $0.hasPrefix("copied with OSC 52") } }
            try await eventually("the path in tmux's buffer") { await tmux.command("show-buffer") == directory + "/running.bin" }
            // F1, as in htop: the curses side reads function keys.
            await tmux.keys("F1")
            try await tmux.waitFor("the help, cut") { rows in rows.contains { $0.contains("keys 1-") } && rows.contains { $0.contains("scroll") } }
            let screen = await tmux.screen()
            #expect(!screen.contains { $0.contains("q/F10/Ctrl-C") }, "\(screen.joined(separator: "\n"))")
            await tmux.keys("PageDown")
            await tmux.keys("PageDown")
            try await tmux.waitFor("q in the help after scrolling") { rows in rows.contains { $0.contains("q/F10/Ctrl-C  quit") } }
            // Any other key closes it; F10 then quits.
            await tmux.keys("x")
            try await tmux.waitFor("the table back") { rows in rows[1].hasPrefix("NAME") }
            await tmux.keys("F10")
            try await tmux.waitFor("haul quit") { rows in rows.contains { $0.contains("[exited 0]") } }
        }
    }

    @Test(arguments: [("dumb", "TERM=dumb cannot move the cursor, which the terminal UI needs"), ("no-such-terminal", "TERM=no-such-terminal is a terminal type this system has no terminfo entry for")])
    func aTerminalTheUICannotDrawOnIsRefusedInOneLine(term: String, words: String) async throws {
        try await CLI.withServer { server, directory in
            let state = directory + "/state"
            let command = TmuxSession.haulCommand([server.url("/a.bin").absoluteString], state: state, in: directory, environment: ["TERM": term])
            let tmux = try await TmuxSession(command, width: 200, height: 10)
            defer { tmux.close() }
            try await tmux.waitFor("the exit") { rows in rows.contains { $0.contains("[exited") } }
            let lines = await tmux.screen().filter { !$0.isEmpty }
            #expect(lines == ["haul: error: \(words); use haul get, or set TERM=xterm-256color", "[exited 2]"], "\(lines)")
            #expect(!FileManager.default.fileExists(atPath: state), "nothing was created")
            #expect(server.requests().isEmpty)
        }
    }

    @Test func theLimitKeyBringsTheServersRateNearItAndTheLimitSurvivesARestart() async throws {
        try await CLI.withServer { server, directory in
            for name in ["a.bin", "b.bin"] {
                server.serve("/" + name, size: 256 << 20, faults: Self.throttled(1 << 20))
            }
            let urls = ["/a.bin", "/b.bin"].map { server.url($0).absoluteString }
            let state = directory + "/state"
            let tmux = try await TmuxSession(TmuxSession.haulCommand(["-d", directory] + urls, state: state, in: directory))
            defer { tmux.close() }
            try await tmux.waitFor("both running") { rows in rows[0].contains("2 downloading") }
            let unlimited = try await server.deliveryRate(over: .seconds(2))
            #expect(unlimited > 1_200_000, "before the limit: \(unlimited) B/s")

            await tmux.keys("L")
            try await tmux.waitFor("the limit prompt") { rows in Self.bottom(rows).hasPrefix("Limit all downloads to") }
            await tmux.type("200K")
            await tmux.keys("Enter")
            try await tmux.waitFor("the limit confirmed") { rows in
                rows.contains { $0.hasPrefix("limit for all downloads: 200 KiB/s") } && rows[0].contains("limit 200 KiB/s")
            }
            // Within 5 s the client takes near 200 KiB/s, as its part files grow (the server's count
            // of its writes, less the kernel's queues it can see, measured 1.2-1.4 times that on
            // this machine while haul's files grew at 1.0 times it).
            try await Task.sleep(for: .seconds(2))
            let limited = try await sampledRate(over: .seconds(3)) { totalLength(ofFilesIn: directory, endingIn: ".part") }
            #expect(limited > 200 * 1024 * 0.6 && limited < 200 * 1024 * 1.4, "with the limit: \(limited) B/s")

            // Quit and start again without --limit-rate: the queue remembered it.
            await tmux.keys("q")
            try await tmux.waitFor("haul quit") { rows in rows.contains { $0.contains("[exited 0]") } }
            let again = try await TmuxSession(TmuxSession.haulCommand(["-d", directory], state: state, in: directory))
            defer { again.close() }
            try await again.waitFor("the limit after a restart") { rows in rows[0].contains("2 downloading") && rows[0].contains("limit 200 KiB/s") }
            try await Task.sleep(for: .seconds(2))
            let restarted = try await sampledRate(over: .seconds(3)) { totalLength(ofFilesIn: directory, endingIn: ".part") }
            #expect(restarted > 200 * 1024 * 0.6 && restarted < 200 * 1024 * 1.4, "after the restart: \(restarted) B/s")
            await again.keys("q")
            try await again.waitFor("haul quit") { rows in rows.contains { $0.contains("[exited 0]") } }
        }
    }

    @Test func theClearKeyLeavesNoCompletedRowsAndKeepsTheirFiles() async throws {
        try await CLI.withServer { server, directory in
            let small = ["one.bin", "two.bin", "three.bin"]
            for name in small { server.serve("/" + name, size: 64 * 1024) }
            server.serve("/slow.bin", size: 64 << 20, faults: Self.throttled(64 * 1024))
            let urls = (small + ["slow.bin"]).map { server.url("/" + $0).absoluteString }
            let tmux = try await TmuxSession(TmuxSession.haulCommand(["-d", directory, "-j", "4"] + urls, state: directory + "/state", in: directory))
            defer { tmux.close() }
            try await tmux.waitFor("three completed") { rows in rows[0].contains("3 completed") }
            await tmux.keys("C")
            try await tmux.waitFor("the question") { rows in
                Self.bottom(rows).hasPrefix("Clear 3 completed rows from the queue (the files stay)? y/n")
            }
            await tmux.keys("y")
            try await tmux.waitFor("no completed row") { rows in
                rows.contains { $0.hasPrefix("cleared 3 completed rows; their files stay") }
                    && !rows.contains { $0.contains("completed  ") || $0.hasPrefix("one.bin") }
                    && !rows[0].contains("completed") && TmuxSession.row("slow.bin", in: rows) != nil
            }
            for name in small {
                #expect(fileLength(directory + "/" + name) == Int64(64 * 1024), "\(name) stays on disk")
                #expect(sha256(ofFile: directory + "/" + name) == server.sha256("/" + name))
            }
            await tmux.keys("q")
            try await tmux.waitFor("haul quit") { rows in rows.contains { $0.contains("[exited 0]") } }
        }
    }
}
