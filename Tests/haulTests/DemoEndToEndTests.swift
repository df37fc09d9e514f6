import Foundation
import Testing
import TestSupport

/// `haul demo` as a newcomer runs it, and the UI settings a person changes with keys.
@Suite(.serialized) struct DemoEndToEndTests {
    @Test func demoShowsItsRowsAndQuitsCleanly() async throws {
        let scratch = try TemporaryDirectory("haul-demo-test")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        // Its temporary queue goes under TMPDIR, so the test can see it made and removed.
        let command = TmuxSession.haulCommand(["demo"], state: directory + "/not-used", in: directory, environment: ["TMPDIR": directory])
        let tmux = try await TmuxSession(command)
        defer { tmux.close() }

        // How soon is the benchmark's to say (Tests/Benchmarks/tui.sh), not a timed test's on a
        // shared machine: here the rows only have to come.
        let started = Date()
        try await tmux.waitFor("the demo's rows", timeout: 30) { rows in
            rows.contains { $0.hasPrefix("large-pause-an") && $0.contains("downloading") }
                && rows.contains { $0.hasPrefix("release-notes.pdf") }
        }
        print("DEMO-START: rows after \(String(format: "%.2f", Date().timeIntervalSince(started))) s")
        let screen = await tmux.screen()
        #expect(screen.contains { $0.hasPrefix("demo: space pause/resume · Enter details") }, "the keys to try: \(screen)")
        // Names are cut to the column at 100 columns, in the middle: their first 14 characters
        // show, then `…` and their ends (`large-pause-an…me.iso`).
        let names = ["large-pause-an…me.iso", "changes-while-", "fails-twice-th", "no-ranges-server",
                     "dataset-2026-1", "no-content-length", "podcast-episod…42.mp3", "download ", "linux-6.12-doc", "weak-etag-mirror",
                     "photos-2026", "release-notes"]
        for name in names {
            #expect(screen.contains { $0.hasPrefix(name) }, "row \(name)")
        }
        #expect(screen.dropFirst(2).filter { $0.contains(" downloading ") }.count == 4, "four at once in the demo")
        #expect(screen.first?.contains("4 at once") == true)
        // Bytes move.
        try await tmux.waitFor("progress") { _ in
            await tmux.row("large-pause-an").map { !$0.contains(" 0 B/") && $0.contains("MiB/128 MiB") } == true
        }
        let temporary = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("haul-demo-") }
        #expect(temporary.count == 1, "one temporary queue: \(temporary)")

        // Pausing the large one keeps it paused; the demo is a real queue.
        await tmux.keys("Space")
        try await tmux.waitFor("paused") { _ in await tmux.row("large-pause-an")?.contains("paused") == true }

        await tmux.keys("q")
        try await tmux.waitFor("the demo to exit") { rows in rows.contains("[exited 0]") }
        let last = await tmux.screen()
        #expect(last.contains { $0.hasPrefix("haul demo: server stopped; removed ") }, "\(last)")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("haul-demo-") }
        #expect(left.isEmpty, "the temporary queue and files are gone: \(left)")
    }

    @Test func aNamedDemoQueueResumesOnTheNextRun() async throws {
        let scratch = try TemporaryDirectory("haul-demo-test")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let state = directory + "/demo-state"
        let first = try await TmuxSession(TmuxSession.haulCommand(["demo", "--state", state], state: state, in: directory))
        defer { first.close() }
        try await first.waitFor("bytes of the large one") { _ in
            (fileLength(state + "/downloads/large-pause-and-resume-me.iso.part") ?? 0) > 1_000_000
        }
        await first.keys("q")
        try await first.waitFor("exit") { rows in rows.contains("[exited 0]") }
        #expect(await first.screen().contains { $0.hasPrefix("haul demo: server stopped; the queue stays in") })
        let kept = try #require(fileLength(state + "/downloads/large-pause-and-resume-me.iso.part"))

        let second = try await TmuxSession(TmuxSession.haulCommand(["demo", "--state", state], state: state, in: directory))
        defer { second.close() }
        // Same port, same URLs: it resumes from the bytes kept and the row says where.
        try await second.waitFor("the resume offset") { _ in
            await second.row("large-pause-an")?.contains("×1") == true
        }
        #expect((fileLength(state + "/downloads/large-pause-and-resume-me.iso.part") ?? 0) >= kept)
        await second.keys("q")
        try await second.waitFor("exit") { rows in rows.contains("[exited 0]") }
    }

    @Test func fewerAndMoreAtOnceAreRememberedUnlessAFlagSaysOtherwise() async throws {
        let scratch = try TemporaryDirectory("haul-demo-test")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let state = directory + "/state"
        let first = try await TmuxSession(TmuxSession.haulCommand([], state: state, in: directory))
        defer { first.close() }
        try await first.waitFor("the header") { rows in rows.first?.contains("3 at once") == true }
        await first.keys(">", ">")
        try await first.waitFor("five at once") { rows in rows.first?.contains("5 at once") == true }
        await first.keys("q")
        try await first.waitFor("exit") { rows in rows.contains("[exited 0]") }

        let second = try await TmuxSession(TmuxSession.haulCommand([], state: state, in: directory))
        defer { second.close() }
        try await second.waitFor("five remembered") { rows in rows.first?.contains("5 at once") == true }
        await second.keys("q")
        try await second.waitFor("exit") { rows in rows.contains("[exited 0]") }

        let flagged = try await TmuxSession(TmuxSession.haulCommand(["-j", "2"], state: state, in: directory))
        defer { flagged.close() }
        try await flagged.waitFor("the flag wins") { rows in rows.first?.contains("2 at once") == true }
        await flagged.keys("q")
        try await flagged.waitFor("exit") { rows in rows.contains("[exited 0]") }
    }
}
