import DownloadCore
import Foundation
import Testing
@testable import TerminalUI

/// The keys of the table's views, transition by transition: find, kinds, sort, limits, clear,
/// logs, copy, the help's scrolling, function keys and the mouse.
@Suite struct ReducerViewsTests {
    init() {
        #expect(utf8Locale, "the C.UTF-8 locale is needed to measure CJK and emoji")
    }

    static func names(_ state: ViewState) -> [String] {
        state.rows.map(\.displayName)
    }

    static func type(_ text: String) -> [[Key]] {
        // One key a batch: typed, not pasted.
        text.map { [Key.char($0)] }
    }

    static func handle(_ state: inout ViewState, _ batches: [[Key]]) -> [Command] {
        batches.flatMap { state.handle($0) }
    }

    @Test func findNarrowsAsItIsTypedAndEscapeShowsEveryRowAgain() {
        var state = Fixture.state(width: 100, height: 30)
        #expect(state.rows.count == 7)
        #expect(state.handle([.char("/")]).isEmpty)
        guard case .prompt(let prompt) = state.overlay else {
            Issue.record("no find prompt")
            return
        }
        #expect(prompt.purpose == .find)
        _ = Self.handle(&state, Self.type("IS"))
        // Live, ignoring case, on the name or the URL: "ubuntu-…iso" and "cancelled.img" does not.
        #expect(Self.names(state) == ["ubuntu-24.04.1-desktop-amd64.iso", "missing.bin"])
        #expect(render(state).lines[0].text.contains("filter: IS (2 of 7)"), "\(render(state).lines[0].text)")
        _ = state.handle([.enter])
        #expect(state.overlay == nil)
        #expect(state.filter == "IS")
        #expect(state.message?.text == "2 of 7 rows match; Esc shows all")
        // The selection is on a shown row.
        #expect(state.selected == DownloadID(1))
        _ = state.handle([.down])
        #expect(state.selected == DownloadID(6))
        // `/` again edits the same text; Esc in the prompt clears the filter.
        _ = state.handle([.function(3)])
        guard case .prompt(let again) = state.overlay else {
            Issue.record("F3 opens find")
            return
        }
        #expect(String(again.text) == "IS")
        _ = state.handle([.escape])
        #expect(state.filter.isEmpty && state.rows.count == 7 && state.overlay == nil)
        // Esc in the table clears a filter before it closes the details pane.
        _ = Self.handle(&state, [[.char("/")]] + Self.type("zip") + [[.enter]])
        #expect(Self.names(state) == ["日本語のファイル名.zip"])
        state.showDetails = true
        _ = state.handle([.escape])
        #expect(state.rows.count == 7 && state.showDetails)
        #expect(state.message?.text == "showing all 7 rows")
        _ = state.handle([.escape])
        #expect(!state.showDetails)
    }

    @Test func aFilterThatMatchesNothingSaysSoAndKeysNeedingARowExplain() {
        var state = Fixture.state(width: 100, height: 30)
        _ = Self.handle(&state, [[.char("/")]] + Self.type("nothing-like-this") + [[.enter]])
        #expect(state.rows.isEmpty && state.selected == nil)
        #expect(render(state).text.contains("No row matches: Esc shows all 7."))
        #expect(state.handle([.char("p")]).isEmpty)
        #expect(state.message == StatusMessage("no row shown: Esc shows them all", isError: true))
    }

    @Test func numberKeysShowOneKindOfRowAndZeroShowsAll() {
        var state = Fixture.state(width: 100, height: 30)
        let expected: [(Character, [Int64])] = [("1", [1, 4]), ("2", [2]), ("3", [3]), ("4", [6]), ("5", [5, 7])]
        for (key, ids) in expected {
            _ = state.handle([.char(key)])
            #expect(state.rows.map(\.id.rawValue) == ids, "\(key)")
        }
        #expect(state.kind == .done)
        #expect(render(state).lines[0].text.contains("done only (2 of 7)"))
        #expect(state.message?.text == "showing done rows only: 2 of 7 (0 shows all)")
        // The same key again, or 0, shows every row.
        _ = state.handle([.char("5")])
        #expect(state.kind == nil && state.rows.count == 7)
        _ = state.handle([.char("4")])
        _ = state.handle([.char("0")])
        #expect(state.kind == nil && state.rows.count == 7)
        // A kind and a filter together.
        _ = state.handle([.char("1")])
        _ = Self.handle(&state, [[.char("/")]] + Self.type("ubuntu") + [[.enter]])
        #expect(state.rows.map(\.id.rawValue) == [1])
        #expect(render(state).lines[0].text.contains("filter: ubuntu, active only (1 of 7)"), "\(render(state).lines[0].text)")
    }

    static func racing() -> [Download] {
        (1...5).map { index in
            var download = Fixture.download(Int64(index), "file-\(index).bin", .downloading, done: Int64(index) * 100, total: 1000 * Int64(6 - index))
            download.bytesPerSecond = [300, 900, 100, 900, 500][index - 1]
            return download
        }
    }

    @Test func sortOrdersTheViewNeverTheQueue() {
        var state = Fixture.state(width: 120, height: 30, downloads: Self.racing())
        let queue = state.snapshot.downloads.map(\.id)
        let orders: [(SortKey, [Int64])] = [
            (.name, [1, 2, 3, 4, 5]),
            (.progress, [5, 4, 3, 2, 1]),
            // Ties keep the queue's order.
            (.speed, [2, 4, 5, 1, 3]),
            (.eta, [5, 4, 2, 1, 3]),
            (.size, [1, 2, 3, 4, 5]),
            (.state, [1, 2, 3, 4, 5]),
            (.queue, [1, 2, 3, 4, 5]),
        ]
        for (key, ids) in orders {
            #expect(state.handle([.char("s")]).isEmpty)
            #expect(state.sorting.key == key)
            #expect(state.rows.map(\.id.rawValue) == ids, "\(key)")
            #expect(state.snapshot.downloads.map(\.id) == queue)
        }
        // F6 is s; S reverses and the column says which way.
        _ = state.handle([.function(6), .function(6), .function(6)])
        #expect(state.sorting.key == .speed)
        #expect(state.message?.text == "sorted by speed, fastest first (S reverses; the queue's order is unchanged)")
        #expect(render(state).lines[1].text.contains("SPEED▼"))
        _ = state.handle([.char("S")])
        #expect(state.rows.map(\.id.rawValue) == [3, 1, 5, 2, 4])
        #expect(state.message?.text == "sorted by speed, slowest first")
        #expect(render(state).lines[1].text.contains("SPEED▲"))
        // The rows follow new speeds; the selection stays on its download.
        state.selected = DownloadID(5)
        var snapshot = state.snapshot
        snapshot.downloads[4].bytesPerSecond = 50
        state.apply(snapshot)
        #expect(state.rows.first?.id == DownloadID(5))
        #expect(state.selected == DownloadID(5))
        // Moving in the queue needs the queue's order on screen.
        #expect(state.handle([.char("+")]).isEmpty)
        #expect(state.message?.isError == true)
    }

    @Test func speedLimitsAreAskedForCheckedAndConfirmed() {
        var state = Fixture.state(width: 100, height: 30)
        _ = state.handle([.char("L")])
        #expect(render(state).lines[29].text.hasPrefix("Limit all downloads to (2M, 500K, 0 for none): "))
        _ = Self.handle(&state, Self.type("fast"))
        #expect(state.handle([.enter]).isEmpty)
        guard case .prompt(let refused) = state.overlay else {
            Issue.record("a bad limit keeps the prompt")
            return
        }
        #expect(refused.error == "limit 'fast' is not a size like 500K or 2M")
        _ = state.handle([.ctrl("u")])
        _ = Self.handle(&state, Self.type("512"))
        #expect(state.handle([.enter]).isEmpty)
        guard case .prompt(let small) = state.overlay else { return }
        #expect(small.error == "a limit must be at least 1K (0 for none)")
        _ = state.handle([.ctrl("u")])
        _ = Self.handle(&state, Self.type("200K"))
        #expect(state.handle([.enter]) == [.setLimit(200 * 1024)])
        #expect(state.message?.text == "limit for all downloads: 200 KiB/s")
        #expect(render(state).lines[0].text.contains("limit 200 KiB/s"), "\(render(state).lines[0].text)")
        _ = Self.handle(&state, [[.char("L")]] + Self.type("0") + [[.enter]])
        #expect(state.message?.text == "no limit for all downloads")
        #expect(state.snapshot.limit == nil)
        // An empty answer changes nothing.
        #expect(Self.handle(&state, [[.char("L")], [.enter]]).isEmpty)
        #expect(state.message?.text == "limit unchanged")
        // The selected download's own limit.
        let commands = Self.handle(&state, [[.char("l")]] + Self.type("1.5M") + [[.enter]])
        #expect(commands == [.setDownloadLimit(DownloadID(1), 1_572_864)])
        #expect(state.message?.text == "limit for ubuntu-24.04.1-desktop-amd64.iso: 1.5 MiB/s")
        #expect(Self.handle(&state, [[.char("l")]] + Self.type("none") + [[.enter]]) == [.setDownloadLimit(DownloadID(1), nil)])
        // A finished row has no speed to limit.
        state.selected = DownloadID(5)
        _ = state.handle([.char("l")])
        #expect(state.overlay == nil)
        #expect(state.message == StatusMessage("completed: no speed to limit", isError: true))
    }

    @Test func clearingCompletedRowsAsksFirst() {
        var state = Fixture.state(width: 100, height: 30)
        #expect(state.handle([.char("C")]).isEmpty)
        #expect(state.overlay == .confirm(Confirmation(kind: .clearCompleted, question: "Clear 1 completed row from the queue (the files stay)?")))
        #expect(state.handle([.char("n")]).isEmpty)
        #expect(state.message?.text == "nothing deleted")
        _ = state.handle([.char("C")])
        #expect(state.handle([.char("y")]) == [.clearCompleted])
        var none = Fixture.state(width: 100, height: 30, downloads: Self.racing())
        #expect(none.handle([.char("C")]).isEmpty)
        #expect(none.overlay == nil)
        #expect(none.message?.text == "no completed rows to clear")
    }

    static func entries(_ count: Int, for id: DownloadID) -> [HistoryEntry] {
        (0..<count).map { index in
            HistoryEntry(download: id, time: Fixture.now.addingTimeInterval(Double(index - count)), kind: .response, text: "HTTP 206 entry \(index)")
        }
    }

    @Test func theLogOpensReadsAndScrolls() {
        var state = Fixture.state(width: 100, height: 12)
        state.timeZone = TimeZone(identifier: "UTC") ?? .current
        #expect(state.handle([.char("h")]) == [.loadHistory(DownloadID(1))])
        #expect(state.openLog?.download == DownloadID(1))
        #expect(render(state).lines[2].text.contains("reading"))
        // Entries for another log than the one open are not shown in it.
        state.received(Self.entries(3, for: DownloadID(2)), for: DownloadID(2))
        #expect(render(state).lines[2].text.contains("reading"))
        state.received(Self.entries(40, for: DownloadID(1)), for: DownloadID(1))
        var lines = render(state).lines.map(\.text)
        // The newest at the bottom, with the time of day.
        #expect(lines[1].hasPrefix("─ log of #1 ubuntu-24.04.1-desktop-amd64.iso"))
        #expect(lines[10].hasPrefix("07:59:59 response  HTTP 206 entry 39"), "\(lines[10])")
        _ = state.handle([.up])
        lines = render(state).lines.map(\.text)
        #expect(lines[10].contains("entry 38"))
        _ = state.handle([.home])
        #expect(render(state).lines[2].text.contains("entry 0"))
        _ = state.handle([.end])
        #expect(render(state).lines[10].text.contains("entry 39"))
        // Any other key closes it.
        #expect(state.handle([.char("q")]).isEmpty)
        #expect(state.overlay == nil)
        // H: the whole queue's events, each with its download's name.
        #expect(state.handle([.char("H")]) == [.loadHistory(nil)])
        state.received([HistoryEntry(download: DownloadID(2), time: Fixture.now, kind: .restarted, text: "restarted from zero: the server ignores ranges (200)")], for: nil)
        #expect(render(state).lines[2].text.contains("日本語のファイル名.zip restarted from zero"), "\(render(state).lines[2].text)")
        state.received([], for: nil, error: "the queue's runner ended")
        #expect(render(state).lines[2].text.contains("cannot read the log: the queue's runner ended"))
    }

    @Test func yCopiesTheSelectedFilesPathWhenItIsClean() {
        var state = Fixture.state(width: 100, height: 30)
        #expect(state.handle([.char("y")]) == [.copy("/downloads/ubuntu-24.04.1-desktop-amd64.iso")])
        // The hostile name's path has escape sequences: never put on a clipboard.
        state.selected = DownloadID(4)
        #expect(state.handle([.char("y")]).isEmpty)
        #expect(state.message == StatusMessage("the path has control characters: not copied", isError: true))
    }

    @Test func theHelpScrollsToItsLastLineAtEightyByTwentyFour() {
        var state = Fixture.state(width: 80, height: 24)
        _ = state.handle([.function(1)])
        #expect(state.overlay == .help)
        var text = render(state).text
        #expect(!text.contains("q/F10/Ctrl-C"))
        #expect(text.contains("keys 1-21 of \(HelpText.count)"))
        _ = state.handle([.down])
        #expect(state.helpTop == 1)
        _ = state.handle([.pageDown, .pageDown, .pageDown])
        #expect(state.overlay == .help)
        text = render(state).text
        #expect(text.contains("q/F10/Ctrl-C  quit"), "\(text)")
        #expect(text.contains("mouse"))
        _ = state.handle([.pageUp, .pageUp, .pageUp, .pageUp])
        #expect(state.helpTop == 0)
        // Any other key closes it, q included (it does not quit from the help).
        #expect(state.handle([.char("q")]).isEmpty)
        #expect(state.overlay == nil)
        // At the smallest screen every line is still reachable.
        var small = Fixture.state(width: 20, height: 5)
        _ = small.handle([.char("?")])
        for _ in 0..<HelpText.count { _ = small.handle([.down]) }
        #expect(render(small).lines[3].text.hasPrefix("  mouse"), "\(render(small).text)")
    }

    @Test func functionKeysDoWhatHtopUsersExpect() {
        var state = Fixture.state(width: 100, height: 30)
        _ = state.handle([.function(9)])
        guard case .confirm(let confirmation) = state.overlay else {
            Issue.record("F9 asks to cancel")
            return
        }
        #expect(confirmation.kind == .cancel(DownloadID(1)))
        _ = state.handle([.char("n")])
        #expect(state.handle([.function(10)]) == [.quit])
    }

    @Test func clicksSelectRowsAndTheWheelMovesTheSelection() {
        var state = Fixture.state(width: 100, height: 30)
        // Row 2 of the screen is the first table row.
        _ = state.handle([.click(x: 5, y: 4)])
        #expect(state.selected == DownloadID(3))
        // A click on the header, the titles or below the rows changes nothing.
        _ = state.handle([.click(x: 5, y: 0), .click(x: 5, y: 1), .click(x: 5, y: 20)])
        #expect(state.selected == DownloadID(3))
        _ = state.handle([.wheelDown])
        #expect(state.selected == DownloadID(6))
        _ = state.handle([.wheelUp, .wheelUp])
        #expect(state.selected == DownloadID(1))
        // A click answers no to a question.
        _ = state.handle([.char("c")])
        #expect(state.handle([.click(x: 1, y: 3)]).isEmpty)
        #expect(state.overlay == nil && state.message?.text == "nothing deleted")
    }

    @Test func settingsChangedByAKeyAreConfirmed() {
        var state = Fixture.state(width: 100, height: 30)
        #expect(state.handle([.char(">")]) == [.setMaxActive(4)])
        #expect(state.message?.text == "4 at once")
        #expect(state.handle([.char("<")]) == [.setMaxActive(3)])
        #expect(state.message?.text == "3 at once")
    }

    @Test func aScrollingTableSaysWhichRowIsSelected() {
        let many = (1...200).map { Fixture.download(Int64($0), "file-\($0).bin", .queued) }
        var state = Fixture.state(width: 80, height: 24, downloads: many)
        #expect(render(state).lines[23].text.hasSuffix("row 1 of 200"))
        _ = state.handle([.pageDown])
        #expect(render(state).lines[23].text.hasSuffix("row 22 of 200"), "\(render(state).lines[23].text)")
        // A message keeps the indicator.
        _ = state.handle([.char("5")])
        let fits = Fixture.state(width: 80, height: 24, downloads: Array(many.prefix(5)))
        #expect(!render(fits).lines[23].text.contains("row 1 of"))
        #expect(state.rows.isEmpty && !render(state).lines[23].text.contains("row 1 of"))
    }

    @Test func aDueRetrySaysItWaitsForASlot() {
        var due = Fixture.download(9, "late.bin", .waiting(until: Fixture.now.addingTimeInterval(-3), reason: "connection refused"))
        due.lastError = "connection refused"
        var state = Fixture.state(width: 140, height: 30, downloads: [due])
        #expect(render(state).text.contains("0 B/? retry due: waits for a free slo"), "\(render(state).text)")
        state.showDetails = true
        #expect(render(state).text.contains("Waiting    retry due: waits for a free slot (connection refused)"), "\(render(state).text)")
    }

    @Test func theHeaderKeepsFailuresWaitsAndHowManyRunBeforeTotals() {
        for width in [60, 80] {
            let header = render(Fixture.state(width: width, height: 24)).lines[0].text
            #expect(header.contains("1 failed"), "\(width): \(header)")
            #expect(header.contains("1 waiting") || width < 80, "\(width): \(header)")
            #expect(header.contains("3 at once") || width < 80, "\(width): \(header)")
            #expect(!header.contains("free"), "totals go first: \(header)")
        }
        let wide = render(Fixture.state(width: 200, height: 24)).lines[0].text
        #expect(wide.hasSuffix("3 at once  resumes saved 1.2 GiB  39.1 GiB free"), "\(wide)")
    }

    @Test func narrowTablesDropTheResumeColumnBeforeSpeedAndETA() {
        for width in [60, 70] {
            let titles = render(Fixture.state(width: width, height: 24)).lines[1].text
            #expect(titles.contains("SPEED") && titles.contains("ETA") && !titles.contains("RESUMED"), "\(width): \(titles)")
        }
        #expect(render(Fixture.state(width: 52, height: 24)).lines[1].text.contains("SPEED"))
    }

    @Test func theDetailsPaneWrapsLongPathsAndURLsWhole() throws {
        let long = "/downloads/" + String(repeating: "deep/", count: 20) + "日本語 file.iso"
        var download = Fixture.download(1, "x", .paused, done: 10, total: 100)
        download.destination = .file(long)
        download.url = try #require(URL(string: "https://example.com/" + String(repeating: "segment/", count: 15) + "file.iso"))
        var state = Fixture.state(width: 60, height: 40, downloads: [download])
        state.showDetails = true
        let lines = render(state).lines.map(\.text)
        let saving = lines.drop { !$0.hasPrefix("Saving to") }.prefix { $0.hasPrefix("Saving to") || $0.hasPrefix("           ") }
        let joined = saving.map { String($0.dropFirst(11)).replacingOccurrences(of: " +$", with: "", options: .regularExpression) }.joined()
        #expect(joined == long, "\(lines.joined(separator: "\n"))")
        #expect(lines.contains { $0.hasPrefix("URL        https://example.com/segment/") })
        #expect(lines.contains { $0.hasSuffix("segment/file.iso") || $0.contains("file.iso") })
    }

    @Test func theNewViewsMatchTheirRecordings() throws {
        var found = Fixture.state(width: 80, height: 24)
        _ = Self.handle(&found, [[.char("s")], [.char("s")], [.char("s")], [.char("/")]] + Self.type("n"))
        try Snapshot.check(render(found), named: "find-sorted-80x24")
        var log = Fixture.state(width: 80, height: 24)
        log.timeZone = TimeZone(identifier: "UTC") ?? .current
        _ = log.handle([.char("h")])
        let id = DownloadID(1)
        let words = [
            (HistoryEntry.Kind.added, "added by haul get"),
            (.started, "attempt 1 from 0 B"),
            (.response, "HTTP 200, 5.5 GiB, ETag \"abc123\""),
            (.error, "connection reset by peer at 1.2 GiB"),
            (.waiting, "retry in 1s: connection reset by peer"),
            (.started, "attempt 2 from 1.2 GiB: Range bytes=1300000000-, If-Range \"abc123\""),
            (.response, "HTTP 206 from 1.2 GiB"),
            (.resumed, "resumed at 1.2 GiB (validator checked)"),
            (.setting, "limit 500 KiB/s"),
        ]
        log.received(words.enumerated().map { HistoryEntry(download: id, time: Fixture.now.addingTimeInterval(Double($0.offset * 7 - 70)), kind: $0.element.0, text: $0.element.1) }, for: id)
        try Snapshot.check(render(log), named: "log-80x24")
    }
}
