import DownloadCore
import Foundation
import Testing
@testable import TerminalUI

/// The hooks' words in the row and the details pane (issue 18, item 6).
@Suite struct RenderHooksTests {
    init() {
        #expect(utf8Locale, "the C.UTF-8 locale is needed to measure the middle dot")
    }

    static let statuses: [(HookStatus, String)] = [
        (.pending, "completed   ████████████████████ 100%            1000 B hook pending"),
        (.exited(code: 0, seconds: 1.25), "1000 B hook ran"),
        (.exited(code: 3, seconds: 0.1), "1000 B hook failed (exit 3)"),
        (.timedOut(limit: 600), "1000 B hook timed out"),
        (.couldNotStart(reason: "cannot run /bin/x: No such file or directory"), "1000 B hook could not start"),
    ]

    /// Completed downloads, one per hook status, and a failed one whose on-fail hook ran.
    static var downloads: [Download] {
        var downloads = statuses.enumerated().map { index, entry in
            var download = Fixture.download(Int64(index + 1), "file-\(index + 1).bin", .completed, done: 1000, total: 1000)
            download.hook = HookRun(event: .complete, status: entry.0)
            return download
        }
        var failed = Fixture.download(9, "missing.bin", .failed(reason: "HTTP 404 Not Found"))
        failed.hook = HookRun(event: .fail, status: .exited(code: 0, seconds: 0.5))
        downloads.append(failed)
        return downloads
    }

    @Test func eachRowSaysHowItsHookWent() {
        // The words go where a running row has its speed, ETA and resume offset, and are cut at the edge.
        let text = render(Fixture.state(width: 120, height: 20, downloads: Self.downloads)).text
        for (_, words) in Self.statuses {
            #expect(text.contains(words), "\(words) in\n\(text)")
        }
        #expect(text.contains("0 B/? HTTP 404 Not Found · hook ran"), "\(text)")
    }

    @Test func theDetailsNameTheHookAndWhereItsOutputWent() {
        var failing = Fixture.download(1, "report.pdf", .completed, done: 2048, total: 2048)
        failing.completedPaths = ["/downloads/report.pdf"]
        failing.hook = HookRun(event: .complete, status: .exited(code: 3, seconds: 0.25))
        failing.lastStatus = 200
        var state = Fixture.state(width: 80, height: 12, downloads: [failing])
        state.showDetails = true
        let lines = render(state).lines.map(\.text)
        let details = lines.drop { !$0.hasPrefix("─ #1") }.prefix(9).map { $0.replacingOccurrences(of: " +$", with: "", options: .regularExpression) }
        #expect(details.joined(separator: "\n") == """
            ─ #1 report.pdf ────────────────────────────────────────────────────────────────
            URL        https://user:***@example.com/files/1
            Saved to   /downloads/report.pdf
            Validators none: a resume is trusted only when the length matches
            Status     completed  HTTP 200 · 2.0 KiB of 2.0 KiB
            Limit      none of its own (l sets one) · none for all (L sets one)
            Resumes    never resumed
            Last error none
            Hook       on-complete failed (exit 3, 0.2 s), see haul.log
            """)
    }

    @Test("the details pane has words for every status", arguments: [
        (HookStatus.pending, "on-complete pending (runs again at the next start if haul stops before it ends)"),
        (.exited(code: 0, seconds: 12), "on-complete ran (exit 0, 12 s)"),
        (.signalled(signal: 9, seconds: 1), "on-complete failed (killed by signal 9, 1.0 s), see haul.log"),
        (.timedOut(limit: 30), "on-complete timed out after 30 s, killed, see haul.log"),
        (.couldNotStart(reason: "no on-complete hook is set in this run"), "on-complete could not start: no on-complete hook is set in this run"),
    ])
    func detailsWords(_ status: HookStatus, _ words: String) {
        var download = Fixture.download(1, "a.bin", .completed, done: 10, total: 10)
        download.hook = HookRun(event: .complete, status: status)
        var state = Fixture.state(width: 200, height: 14, downloads: [download])
        state.showDetails = true
        #expect(render(state).text.contains("Hook       " + words), "\(render(state).text)")
    }

    @Test func tinyAndNarrowScreensWithHooksFit() {
        for (width, height) in [(0, 0), (1, 1), (20, 5), (40, 12), (80, 24)] {
            for details in [false, true] {
                var state = Fixture.state(width: width, height: height, downloads: Self.downloads)
                state.showDetails = details
                let frame = render(state)
                #expect(frame.lines.count == height)
                #expect(frame.lines.allSatisfy { ScreenText.width($0.text) <= width }, "\(width)×\(height)")
            }
        }
    }
}
