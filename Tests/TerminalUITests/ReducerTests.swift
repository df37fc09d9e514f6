import DownloadCore
import Foundation
import Testing
@testable import TerminalUI

@Suite struct ReducerTests {
    init() {
        #expect(utf8Locale, "the C.UTF-8 locale is needed to measure CJK and emoji")
    }

    /// The fixture with row `index` selected.
    func state(selecting index: Int) -> ViewState {
        var state = Fixture.state(width: 100, height: 30)
        _ = state.handle(Array(repeating: .down, count: index))
        return state
    }

    func id(_ index: Int) -> DownloadID {
        Fixture.downloads[index].id
    }

    @Test func aQueueThatCannotBeSavedIsSaidOnTheMessageLineUntilItIsAgain() {
        var state = state(selecting: 0)
        var snapshot = state.snapshot
        snapshot.unsaved = "cannot save the queue: the disk holding the queue is full"
        state.apply(snapshot)
        #expect(state.message == StatusMessage("cannot save the queue: the disk holding the queue is full: what is shown is not stored; the bytes on disk are kept", isError: true))
        #expect(render(state).lines.contains { $0.text.hasPrefix("cannot save the queue") })
        // Said once, not again for every snapshot while it lasts.
        state.message = nil
        state.apply(snapshot)
        #expect(state.message == nil)
        snapshot.unsaved = nil
        state.apply(snapshot)
        #expect(state.message == StatusMessage("the queue is saved again"))
    }

    @Test func spaceAndPTogglePauseAndResume() {
        var state = state(selecting: 0)
        #expect(state.handle([.char(" ")]) == [.pause(id(0))])
        #expect(state.handle([.char("p")]) == [.pause(id(0))])
        state = self.state(selecting: 1)
        #expect(state.handle([.char("p")]) == [.pause(id(1))])
        state = self.state(selecting: 2)
        #expect(state.handle([.char(" ")]) == [.resume(id(2))])
        state = self.state(selecting: 3)
        #expect(state.handle([.char(" ")]) == [.pause(id(3))])
        state = self.state(selecting: 5)
        #expect(state.handle([.char(" ")]) == [.resume(id(5))])
        state = self.state(selecting: 4)
        #expect(state.handle([.char(" ")]).isEmpty)
        #expect(state.message?.isError == true)
    }

    @Test func rResumesOrRetries() {
        // A queued row (1) too: a resume means now.
        for (index, expected) in [(1, true), (2, true), (3, true), (5, true), (0, false), (4, false), (6, false)] {
            var state = state(selecting: index)
            let commands = state.handle([.char("r")])
            #expect(commands == (expected ? [.resume(id(index))] : []), "row \(index)")
            #expect((state.message != nil) == !expected, "row \(index)")
        }
    }

    @Test func cancelAsksAndSaysHowMuchIsDeleted() {
        var state = state(selecting: 2)
        #expect(state.handle([.char("c")]).isEmpty)
        guard case .confirm(let confirmation) = state.overlay else {
            Issue.record("no confirmation")
            return
        }
        #expect(confirmation.question == "Cancel (deletes 47.6 MiB of downloaded data): 🎉 party 🎉.tar.gz?")
        #expect(state.handle([.char("y")]) == [.cancel(id(2))])
        #expect(state.overlay == nil)

        _ = state.handle([.char("c")])
        #expect(state.handle([.char("n")]).isEmpty)
        #expect(state.overlay == nil)
        #expect(state.message?.text == "nothing deleted")

        var completed = self.state(selecting: 4)
        #expect(completed.handle([.char("c")]).isEmpty)
        #expect(completed.overlay == nil)
        #expect(completed.message?.isError == true)
    }

    /// The question says what a cancel deletes now, not when it was asked: a tester's said 608 KiB
    /// while the download went on to 1.2 MiB, all of it deleted by the `y`.
    @Test func theCancelQuestionSaysTheBytesOnDiskNow() throws {
        var state = state(selecting: 0)
        _ = state.handle([.char("c")])
        guard case .confirm(let asked) = state.overlay else {
            Issue.record("no confirmation")
            return
        }
        #expect(asked.question.hasPrefix("Cancel (deletes \(Format.bytes(Fixture.downloads[0].bytesOnDisk)) of downloaded data)"), "\(asked.question)")
        var snapshot = state.snapshot
        var grown = try #require(snapshot[id(0)])
        grown.bytesOnDisk += 700 * 1024 * 1024
        snapshot.replace(grown)
        state.apply(snapshot)
        guard case .confirm(let now) = state.overlay else {
            Issue.record("the question went away")
            return
        }
        #expect(now.kind == asked.kind)
        #expect(now.question.hasPrefix("Cancel (deletes \(Format.bytes(grown.bytesOnDisk)) of downloaded data)"), "\(now.question)")
        #expect(render(state).lines.contains { $0.text.contains(Format.bytes(grown.bytesOnDisk)) })
    }

    /// A terminal too small to show anything but "terminal too small" acts on no key it cannot show:
    /// a tester's `c` then `y` at 15×4 cancelled a download and deleted its bytes, and `X` then `y`
    /// purged a paused one, the questions never on screen. Quitting (which keeps every byte) works.
    @Test func aTerminalTooSmallActsOnNoKeyItCannotShow() {
        var state = state(selecting: 2)
        state.resize(width: 15, height: 4)
        for keys in [[Key.char("c"), .char("y")], [.char("X"), .char("y")], [.char(" ")], [.char("r")], [.char("d")], [.function(9), .char("Y")], [.char("C"), .char("y")]] {
            #expect(state.handle(keys).isEmpty, "\(keys)")
            #expect(state.overlay == nil, "\(keys)")
        }
        #expect(state.handle([.ctrl("l")]) == [.redraw])
        // A question asked on a larger screen waits for one that shows it: no answer is taken blind.
        state.resize(width: 100, height: 30)
        _ = state.handle([.char("c")])
        state.resize(width: 15, height: 4)
        #expect(state.handle([.char("y")]).isEmpty)
        state.resize(width: 100, height: 30)
        #expect(state.handle([.char("y")]) == [.cancel(id(2))])
        // Quitting keeps every byte, and works at any size.
        state.resize(width: 15, height: 4)
        #expect(state.handle([.char("q")]) == [.quit])
    }

    @Test func removeTakesOnlyFinishedRows() {
        for index in 0..<7 {
            var state = state(selecting: index)
            let finished = Fixture.downloads[index].state.isFinished
            #expect(state.handle([.char("d")]) == (finished ? [.remove(id(index))] : []))
            #expect(state.handle([.delete]) == (finished ? [.remove(id(index))] : []))
        }
    }

    /// The purge is of the downloads its question counted: one paused after it was asked (from
    /// another shell) keeps its bytes. A tester's `y` to `Purge 1 paused download (… 120 KiB …)`
    /// purged a second one paused meanwhile, 298 KiB in all.
    @Test func aPurgeIsOfTheDownloadsItsQuestionCounted() throws {
        var state = state(selecting: 0)
        let paused = try #require(Fixture.downloads.first { $0.state == .paused })
        _ = state.handle([.char("X")])
        var later = state.snapshot
        let index = try #require(later.downloads.firstIndex { $0.state == .downloading })
        later.downloads[index].state = .paused
        state.apply(later)
        #expect(state.handle([.char("y")]) == [.purgePaused([paused.id])])
        #expect(state.message?.text == "purged 1 paused download: 47.6 MiB freed; it stays in the queue")

        // Resumed, and paused again with more bytes: not the bytes asked about.
        _ = state.handle([.char("X")])
        var more = state.snapshot
        let again = try #require(more.downloads.firstIndex { $0.id == paused.id })
        more.downloads[again].bytesOnDisk += 1_000
        state.apply(more)
        #expect(state.handle([.char("y")]) == [.purgePaused([later.downloads[index].id])], "not the one holding other bytes now")
        // Resumed meanwhile: nothing is purged.
        _ = state.handle([.char("X")])
        var resumed = state.snapshot
        for index in resumed.downloads.indices where resumed.downloads[index].state == .paused { resumed.downloads[index].state = .queued }
        state.apply(resumed)
        #expect(state.handle([.char("y")]).isEmpty)
        #expect(state.message?.text == "nothing purged: the downloads asked about are no longer paused")
    }

    @Test func wholeQueueKeys() throws {
        var state = state(selecting: 0)
        #expect(state.handle([.char("P")]) == [.pauseAll])
        #expect(state.handle([.char("R")]) == [.resumeAll])
        #expect(state.handle([.char("X")]).isEmpty)
        guard case .confirm(let confirmation) = state.overlay else {
            Issue.record("no confirmation")
            return
        }
        #expect(confirmation.question == "Purge 1 paused download (deletes 47.6 MiB of partial data; the download stays)?")
        let paused = try #require(Fixture.downloads.first { $0.state == .paused })
        #expect(state.handle([.char("y")]) == [.purgePaused([paused.id])])
        #expect(state.message?.text == "purged 1 paused download: 47.6 MiB freed; it stays in the queue")

        var nothingPaused = ViewState(snapshot: SessionSnapshot(downloads: [Fixture.downloads[0]], maxActive: 3))
        #expect(nothingPaused.handle([.char("X")]).isEmpty)
        #expect(nothingPaused.overlay == nil)
        #expect(nothingPaused.message?.text == "no paused downloads to purge")
    }

    @Test func moveAndConcurrency() {
        var state = state(selecting: 2)
        #expect(state.handle([.char("+")]) == [.move(id(2), to: 1)])
        #expect(state.handle([.char("-")]) == [.move(id(2), to: 3)])
        var top = self.state(selecting: 0)
        #expect(top.handle([.char("+")]).isEmpty)
        var bottom = self.state(selecting: 6)
        #expect(bottom.handle([.char("-")]).isEmpty)
        // Typed faster than snapshots arrive: each press counts.
        #expect(state.handle([.char(">"), .char(">"), .char(">")]) == [.setMaxActive(4), .setMaxActive(5), .setMaxActive(6)])
        #expect(state.handle([.char("<")]) == [.setMaxActive(5)])
        var one = ViewState(snapshot: SessionSnapshot(downloads: [], maxActive: 1))
        #expect(one.handle([.char("<")]).isEmpty)
        #expect(one.message?.isError == true)
    }

    @Test func selectionKeys() {
        var state = state(selecting: 0)
        _ = state.handle([.char("j"), .down])
        #expect(state.selected == id(2))
        _ = state.handle([.char("k")])
        #expect(state.selected == id(1))
        _ = state.handle([.up, .up, .up])
        #expect(state.selected == id(0))
        _ = state.handle([.end])
        #expect(state.selected == id(6))
        _ = state.handle([.down])
        #expect(state.selected == id(6))
        _ = state.handle([.pageUp])
        #expect(state.selected == id(0))
        _ = state.handle([.pageDown])
        #expect(state.selected == id(6))
        _ = state.handle([.home])
        #expect(state.selected == id(0))
    }

    @Test func overlaysAndSmallKeys() {
        var state = state(selecting: 0)
        #expect(state.handle([.enter]).isEmpty)
        #expect(state.showDetails)
        _ = state.handle([.escape])
        #expect(!state.showDetails)
        _ = state.handle([.char("?")])
        #expect(state.overlay == .help)
        #expect(state.handle([.char("q")]).isEmpty, "a key closes the help; it does not quit")
        #expect(state.overlay == nil)
        #expect(state.handle([.ctrl("l")]) == [.redraw])
        #expect(state.handle([.char("z")]).isEmpty)
        #expect(state.handle([.char("q")]) == [.quit])
        #expect(state.handle([.ctrl("c")]) == [.quit], "Ctrl-C is a key in raw mode, and quits like q")
    }

    @Test func addPromptEditsAndSubmits() {
        var state = state(selecting: 0)
        _ = state.handle([.char("a")])
        #expect(state.handle("http://b.example/x".map { .char($0) }).isEmpty)
        // Move left past "x", type "y", delete the "x" after the cursor: ".../y".
        _ = state.handle([.left, .char("y"), .delete])
        guard case .prompt(let prompt) = state.overlay else {
            Issue.record("no prompt")
            return
        }
        #expect(String(prompt.text) == "http://b.example/y")
        #expect(state.handle([.enter]) == [.add([URL(string: "http://b.example/y")].compactMap { $0 })])
        #expect(state.overlay == nil)
        #expect(state.message?.text == "added 1 URL")
    }

    @Test func aPastedListAddsEveryURL() {
        var state = state(selecting: 0)
        _ = state.handle([.char("a")])
        // A paste arrives as one batch: a newline inside it separates URLs, and only an Enter
        // that ends a batch (typed, or the paste's last newline) submits.
        let paste: [Key] = "http://a.example/1".map { .char($0) } + [.enter] + "https://b.example/2".map { .char($0) }
        #expect(state.handle(paste).isEmpty, "the paste is not submitted at its newline")
        let both = [URL(string: "http://a.example/1"), URL(string: "https://b.example/2")].compactMap { $0 }
        #expect(state.handle([.enter]) == [.add(both)])
        _ = state.handle([.char("a")])
        #expect(state.handle(paste + [.enter]) == [.add(both)], "a paste ending in a newline submits")
    }

    @Test func aBadURLIsRefusedInline() {
        var state = state(selecting: 0)
        _ = state.handle([.char("a")])
        _ = state.handle("http://ok.example ftp://x".map { .char($0) })
        #expect(state.handle([.enter]).isEmpty)
        guard case .prompt(let prompt) = state.overlay else {
            Issue.record("the prompt closed on a bad URL")
            return
        }
        #expect(prompt.error == "invalid URL 'ftp://x': unsupported scheme 'ftp' (only http and https)")
        _ = state.handle([.ctrl("u")])
        guard case .prompt(let cleared) = state.overlay else { return }
        #expect(cleared.text.isEmpty)
        _ = state.handle([.backspace, .char("h")])
        _ = state.handle([.escape])
        #expect(state.overlay == nil)
        #expect(state.handle([.char("q")]) == [.quit], "keys go back to the table after Esc")
    }

    @Test func theSelectionFollowsItsRowAndFallsToANeighbour() {
        var state = state(selecting: 2)
        var downloads = Fixture.downloads
        downloads.swapAt(0, 2)
        state.apply(SessionSnapshot(downloads: downloads, maxActive: 3))
        #expect(state.selected == id(2))
        downloads.remove(at: 0)
        state.apply(SessionSnapshot(downloads: downloads, maxActive: 3))
        #expect(state.selected == downloads[0].id)
        state.apply(SessionSnapshot(downloads: [], maxActive: 3))
        #expect(state.selected == nil)
        #expect(state.handle([.char("p")]).isEmpty)
        #expect(state.message?.isError == true)
    }

    @Test func keysWithoutASelectionDoNothingButSaySo() {
        var state = ViewState(snapshot: SessionSnapshot(downloads: [], maxActive: 3))
        for key in [Key.char("p"), .char("r"), .char("c"), .char("d"), .char("+"), .char("-")] {
            state.message = nil
            #expect(state.handle([key]).isEmpty)
            #expect(state.message != nil)
        }
    }
}

@Suite struct ScreenTextTests {
    init() {
        #expect(utf8Locale, "the C.UTF-8 locale is needed to measure CJK and emoji")
    }

    @Test func cleanStripsSequencesAndControls() {
        #expect(ScreenText.clean("\u{1B}[1;31mred\u{1B}[0m") == "red")
        #expect(ScreenText.clean("a\u{1B}]0;title\u{07}b") == "ab")
        #expect(ScreenText.clean("a\u{1B}]8;;http://x\u{1B}\\b") == "ab")
        #expect(ScreenText.clean("a\u{1B}Pdcs\u{1B}\\b") == "ab")
        #expect(ScreenText.clean("a\u{9B}31mb") == "ab")
        #expect(ScreenText.clean("a\u{1B}(Bb") == "ab")
        #expect(ScreenText.clean("tab\there\nline\r") == "tab here line ")
        #expect(ScreenText.clean("\u{7F}\u{0}\u{202E}x\u{2066}") == "x")
        #expect(ScreenText.clean("café 日本", unicode: false) == "caf? ??")
        // Sequences terminals draw narrower than wcwidth counts are taken apart; unprintable
        // scalars (wcwidth -1) are dropped.
        #expect(ScreenText.clean("❤\u{FE0F}") == "❤")
        #expect(ScreenText.clean("👨\u{200D}👩\u{200D}👧") == "👨👩👧")
        #expect(ScreenText.clean("👍\u{1F3FD}") == "👍")
        #expect(ScreenText.clean("a\u{2028}b\u{0378}c") == "abc")
    }

    @Test func widthsComeFromWcwidth() {
        #expect(ScreenText.width("abc") == 3)
        #expect(ScreenText.width("日本") == 4)
        #expect(ScreenText.width("🎉") == 2)
        #expect(ScreenText.width("e\u{301}") == 1)
        #expect(ScreenText.fit("日本語", 5) == "日本…")
        #expect(ScreenText.fit("日本語", 5, pad: true) == "日本…")
        #expect(ScreenText.fit("日本語", 4, pad: true) == "日… ")
        #expect(ScreenText.fit("abc", 5, pad: true) == "abc  ")
        #expect(ScreenText.suffix("abc日本", 4) == "日本")
        // Names are cut in the middle: two that differ at their ends stay apart.
        #expect(ScreenText.fitMiddle("file-with-a-rather-long-name-1.bin", 21) == "file-with-a-ra…-1.bin")
        #expect(ScreenText.fitMiddle("file-with-a-rather-long-name-40.bin", 21) == "file-with-a-ra…40.bin")
        #expect(ScreenText.fitMiddle("file-with-a-rather-long-name-40.bin", 21, unicode: false) == "file-with-a-ra~40.bin")
        #expect(ScreenText.fitMiddle("short.bin", 21) == "short.bin")
        #expect(ScreenText.width(ScreenText.fitMiddle("日本語のファイル名.iso", 15)) <= 15)
        #expect(ScreenText.fitMiddle("abcdefgh", 4) == "abc…", "too narrow for two ends: cut at the end")
        #expect(ScreenText.prefix("日本", 3) == "日")
    }
}
