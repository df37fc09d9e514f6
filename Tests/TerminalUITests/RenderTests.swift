import DownloadCore
import Foundation
import Testing
@testable import TerminalUI

@Suite struct RenderTests {
    init() {
        #expect(utf8Locale, "the C.UTF-8 locale is needed to measure CJK and emoji")
    }

    static let sizes = [(0, 0), (1, 1), (20, 5), (40, 12), (80, 24), (200, 50)]

    /// Every size, overlay and mode: exactly `height` lines, none wider than the screen, nothing a
    /// terminal would interpret.
    @Test(arguments: [true, false])
    func everyFrameFitsItsScreen(unicode: Bool) {
        var overlays: [Overlay?] = [nil, .help, .confirm(Confirmation(kind: .purge([:]), question: "Purge? y/n"))]
        var prompt = Prompt()
        prompt.text = Array("https://example.com/" + String(repeating: "x", count: 300) + Fixture.hostileName)
        prompt.cursor = 150
        prompt.error = "invalid URL: " + Fixture.hostileName
        overlays.append(.prompt(prompt))
        // The views of issue 19: find and limit prompts, logs (hostile text in them), the help scrolled.
        overlays.append(.prompt(Prompt(.find, text: "日本🎉" + Fixture.hostileName)))
        overlays.append(.prompt(Prompt(.limitAll, text: "200K")))
        overlays.append(.prompt(Prompt(.limitDownload(DownloadID(4)), text: "1M")))
        overlays.append(.confirm(Confirmation(kind: .clearCompleted, question: "Clear 1 completed row from the queue (the files stay)?")))
        let entries = HistoryEntry.Kind.allCases.enumerated().map { index, kind in
            HistoryEntry(download: DownloadID(Int64(index % 7 + 1)), time: Fixture.now.addingTimeInterval(Double(index * -4000)), kind: kind, text: "日本語 🎉 " + Fixture.hostileName + String(repeating: " long", count: index))
        }
        var log = LogView(download: DownloadID(2))
        log.entries = entries
        var recent = LogView(download: nil)
        recent.entries = entries
        recent.error = Fixture.hostileName
        overlays += [.log(LogView(download: DownloadID(3))), .log(log), .log(recent)]
        for (width, height) in Self.sizes + [(40, 10), (19, 5), (20, 4), (21, 6), (33, 7), (67, 20), (99, 30), (113, 30)] {
            for (index, overlay) in overlays.enumerated() {
                for details in [false, true] {
                    var state = Fixture.state(width: width, height: height, unicode: unicode)
                    state.overlay = overlay
                    state.showDetails = details
                    state.helpTop = details ? 100 : 3
                    state.message = details ? StatusMessage(Fixture.hostileName, isError: true) : nil
                    // Narrowed and sorted tables too.
                    state.overlay = nil
                    switch index % 3 {
                    case 1: _ = state.handle([.char("s"), .char("s"), .char("s"), .char("S")])
                    case 2: _ = state.handle([.char("/"), .char("n"), .enter] + [.char("1")])
                    default: break
                    }
                    state.overlay = overlay
                    let frame = render(state)
                    #expect(frame.lines.count == height, "\(width)x\(height)")
                    for line in frame.lines {
                        #expect(line.width <= width, "\(width)x\(height) \(overlay.map { "\($0)" } ?? "table"): \(line.text)")
                        let bad = line.text.unicodeScalars.filter { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value) }
                        #expect(bad.isEmpty, "\(width)x\(height): control characters in \(line.text.debugDescription)")
                        if !unicode {
                            #expect(line.text.unicodeScalars.allSatisfy { $0.isASCII }, "\(line.text)")
                        }
                    }
                    if let cursor = frame.cursor {
                        #expect(cursor.x >= 0 && cursor.x < width && cursor.y >= 0 && cursor.y < height)
                    }
                }
            }
        }
    }

    @Test func tinyScreensSayTheyAreTooSmall() {
        #expect(render(Fixture.state(width: 0, height: 0)).lines.isEmpty)
        #expect(render(Fixture.state(width: 1, height: 1)).text == "…")
        #expect(render(Fixture.state(width: 1, height: 1, unicode: false)).text == "~")
        let frame = render(Fixture.state(width: 19, height: 30))
        #expect(frame.lines[0].text == "terminal too small")
        #expect(frame.lines.dropFirst().allSatisfy { $0.text.isEmpty })
        #expect(render(Fixture.state(width: 80, height: 4)).lines[0].text == "terminal too small")
    }

    @Test func smallestUsableScreen() {
        let frame = render(Fixture.state(width: 20, height: 5))
        #expect(frame.lines.map(\.text) == [
            "haul  ↓ 5.2 MiB/s …",
            "NAME            DONE",
            // Names are cut in the middle, their ends kept.
            "ubuntu-24.….iso  40%",
            "日本語のフ….zip    -",
            "q quit  ? help",
        ])
    }

    @Test(arguments: [(40, 12), (80, 24), (120, 30), (200, 50)])
    func screensMatchTheirRecordings(width: Int, height: Int) throws {
        var state = Fixture.state(width: width, height: height)
        state.showDetails = height >= 24
        try Snapshot.check(render(state), named: "table-\(width)x\(height)")
    }

    @Test func helpAndPromptMatchTheirRecordings() throws {
        var help = Fixture.state(width: 80, height: 24)
        help.overlay = .help
        try Snapshot.check(render(help), named: "help-80x24")
        var prompt = Prompt()
        prompt.text = Array("ftp://example.com/file")
        prompt.cursor = prompt.text.count
        prompt.error = "invalid URL 'ftp://example.com/file': unsupported scheme 'ftp' (only http and https)"
        var adding = Fixture.state(width: 80, height: 24, unicode: false)
        adding.overlay = .prompt(prompt)
        try Snapshot.check(render(adding), named: "prompt-ascii-80x24")
    }

    /// CJK and emoji take two cells each: every row's state word starts in the same column.
    @Test func wideCharactersLineUp() {
        for width in [80, 120, 200] {
            let frame = render(Fixture.state(width: width, height: 20))
            let columns = Columns.fitting(width)
            for line in frame.lines[2..<9] {
                let text = line.text
                let name = ScreenText.prefix(text, columns.name)
                #expect(ScreenText.width(name) == columns.name, "\(width): \(text)")
                let rest = String(text.unicodeScalars.dropFirst(name.unicodeScalars.count))
                let word = rest.split(separator: " ").first.map(String.init) ?? ""
                #expect(["downloading", "queued", "paused", "waiting", "completed", "failed", "cancelled"].contains(word), "\(width): \(text)")
            }
        }
    }

    @Test func hostileNamesAreDefused() {
        let frame = render(Fixture.state(width: 120, height: 20))
        let row = frame.lines[5].text
        #expect(row.hasPrefix("evilname  .bin"), "\(row)")
        #expect(!frame.text.contains("pwned"))
        #expect(!frame.text.contains("2J"))
    }

    @Test func waitingAndFailedRowsSayWhy() {
        let frame = render(Fixture.state(width: 120, height: 20))
        #expect(frame.lines[5].text.contains("retry in 12s: connection refused"))
        #expect(frame.lines[7].text.contains("HTTP 404 Not Found"))
        var later = Fixture.state(width: 120, height: 20)
        later.now = Fixture.now.addingTimeInterval(5)
        #expect(render(later).lines[5].text.contains("retry in 7s: connection refused"))
        // Too narrow for the reason beside the bytes: it takes the bytes' place.
        let narrow = render(Fixture.state(width: 60, height: 20))
        #expect(narrow.lines[5].text.contains("retry in 12s"), "\(narrow.lines[5].text)")
    }

    @Test func rowsShowProgressBytesSpeedAndResumeOffset() {
        let row = render(Fixture.state(width: 120, height: 20)).lines[2].text
        #expect(row.contains("downloading"))
        #expect(row.contains("40%"))
        #expect(row.contains("2.2 GiB/5.5 GiB"))
        #expect(row.contains("5.2 MiB/s"))
        #expect(row.contains("10m55s"))
        #expect(row.contains("1.2 GiB ×2"))
        #expect(row.contains("████████············  40%"))
        let ascii = render(Fixture.state(width: 120, height: 20, unicode: false)).lines[2].text
        #expect(ascii.contains("########............  40%") && ascii.contains("1.2 GiB x2"), "\(ascii)")
    }

    @Test func anAttemptWithoutAResponseSaysConnecting() {
        var downloads = Fixture.downloads
        downloads[0].connecting = true
        let row = render(Fixture.state(width: 120, height: 20, downloads: downloads)).lines[2].text
        #expect(row.contains("connecting…"), "\(row)")
        #expect(!row.contains("5.2 MiB/s"))
        #expect(row.hasSuffix("1.2 GiB ×2"), "the resume offset stays")
        downloads[0].state = .paused
        #expect(!render(Fixture.state(width: 120, height: 20, downloads: downloads)).lines[2].text.contains("connecting"))
    }

    /// A finished file being placed holds no slot: its row and the header say `finishing`, so the
    /// rows counted as downloading never pass how many run at once.
    @Test func aFileBeingPlacedSaysFinishingAndIsNotCountedAsDownloading() {
        var placed = Fixture.download(8, "placed.bin", .downloading, done: 4096, total: 4096)
        placed.finishing = true
        var downloads = Fixture.downloads
        downloads.append(placed)
        let frame = render(Fixture.state(width: 200, height: 20, downloads: downloads))
        let header = frame.lines[0].text
        #expect(header.contains("1 downloading · 1 finishing · 1 waiting"), "\(header)")
        let row = frame.lines.map(\.text).first { $0.contains("placed.bin") } ?? ""
        #expect(row.contains(" finishing "), "\(row)")
        #expect(!row.contains("downloading"), "\(row)")
        placed.finishing = false
        downloads[downloads.count - 1] = placed
        #expect(render(Fixture.state(width: 200, height: 20, downloads: downloads)).lines[0].text.contains("2 downloading · 1 waiting"))
    }

    @Test func headerCountsStatesSpeedSavingsAndFreeSpace() {
        let header = render(Fixture.state(width: 200, height: 20)).lines[0].text
        #expect(header.hasPrefix("haul  ↓ 5.2 MiB/s  1 downloading · 1 waiting · 1 queued · 1 paused · 1 failed · 1 completed · 1 cancelled"), "\(header)")
        #expect(header.contains("resumes saved 1.2 GiB"))
        #expect(header.contains("39.1 GiB free"))
        #expect(header.contains("3 at once"))
    }

    /// The session's measured speed wins over the rows' sum (small files finish between the
    /// samples that give a row its speed).
    @Test func theHeaderShowsTheSessionsMeasuredSpeed() {
        var state = Fixture.state(width: 200, height: 20)
        var snapshot = state.snapshot
        snapshot.throughput = 3 * 1024 * 1024
        state.apply(snapshot)
        #expect(render(state).lines[0].text.hasPrefix("haul  ↓ 3.0 MiB/s  "), "\(render(state).lines[0].text)")
        snapshot.throughput = 0
        state.apply(snapshot)
        #expect(render(state).lines[0].text.hasPrefix("haul  ↓ 0 B/s  "))
    }

    @Test func detailsMaskThePasswordAndShowTheHistory() {
        var state = Fixture.state(width: 120, height: 30)
        state.showDetails = true
        let text = render(state).text
        #expect(text.contains("https://user:***@example.com/files/1"))
        #expect(!text.contains("secret"))
        #expect(text.contains("ETag \"abc123\""))
        #expect(text.contains("HTTP 206"))
        #expect(text.contains("2 resumes, latest from 1.2 GiB"))
    }

    @Test func detailsSayAResumeWithoutValidatorWasCheckedByOverlap() {
        var state = Fixture.state(width: 160, height: 30)
        var snapshot = state.snapshot
        snapshot.downloads[0].overlapChecked = true
        state.apply(snapshot)
        state.showDetails = true
        #expect(render(state).text.contains("(no validator: checked by overlap)"))
        // Validators it had but could not trust are said as such (a tester's row said `no validator`
        // of a strong ETag that came with a file changed within its second).
        snapshot.downloads[0].recentlyChanged = true
        state.apply(snapshot)
        #expect(render(state).text.contains("(validators of a change within their second: checked by overlap)"))
        snapshot.downloads[0].recentlyChanged = false
        snapshot.downloads[0].etag = "W/\"x\""
        snapshot.downloads[0].lastModified = nil
        state.apply(snapshot)
        #expect(render(state).text.contains("(a weak ETag alone: checked by overlap)"))
    }

    /// The details' status says "no response yet" only while one may come: a 404 or a 503 is
    /// not kept as the download's status (its failure or wait names it), and it did answer.
    @Test func theDetailsSayNoResponseYetOnlyWhileOneMayCome() {
        func status(_ state: DownloadState) -> String {
            var view = Fixture.state(width: 100, height: 30, downloads: [Fixture.download(1, "x.bin", state)])
            view.showDetails = true
            return render(view).lines.map(\.text).first { $0.hasPrefix("Status") } ?? ""
        }
        #expect(status(.queued).contains("no response yet"))
        #expect(status(.paused).contains("no response yet"))
        #expect(!status(.failed(reason: "HTTP 404 Not Found")).contains("no response yet"))
        #expect(status(.failed(reason: "HTTP 404 Not Found")).contains("failed  0 B of unknown size"))
        #expect(!status(.waiting(until: Fixture.now, reason: "HTTP 503 Service Unavailable")).contains("no response yet"))
    }

    @Test func hintsAndHelpComeFromTheKeyTable() {
        let frame = render(Fixture.state(width: 200, height: 50))
        let hints = frame.lines[49].text
        for binding in KeyMap.bindings where binding.hint != nil {
            let key = KeyMap.firstLabel(binding, unicode: true)
            #expect(hints.contains("\(key) \(binding.hint ?? "")"), "\(hints)")
        }
        let narrow = render(Fixture.state(width: 80, height: 24)).lines[23].text
        #expect(narrow.hasPrefix("q quit  ? help  "), "quit and help never fall off: \(narrow)")
        // The demo cannot detach, so its hints do not offer it (seen in the demo's details view).
        var demo = Fixture.state(width: 200, height: 50)
        demo.cannotDetach = "the demo cannot detach"
        let demoHints = render(demo).lines[49].text
        #expect(hints.contains("D detach") && !demoHints.contains("D detach"), "\(demoHints)")
        #expect(demoHints.contains("/ find  s sort"), "\(demoHints)")
        var state = Fixture.state(width: 200, height: 50)
        state.overlay = .help
        let help = render(state).text
        for binding in KeyMap.bindings {
            #expect(help.contains(binding.summary))
        }
    }

    @Test func theSelectionStaysVisibleWhenScrolling() {
        let many = (1...40).map { Fixture.download(Int64($0), "file-\($0).bin", .queued) }
        var state = Fixture.state(width: 80, height: 10, downloads: many)
        _ = state.handle([.end])
        var frame = render(state)
        #expect(frame.lines[8].text.hasPrefix("file-40.bin"))
        #expect(frame.lines[8].spans.first?.style.reverse == true)
        _ = state.handle([.pageUp])
        frame = render(state)
        #expect(state.selectedDownload?.displayName == "file-33.bin")
        #expect(frame.text.contains("file-33.bin"))
        _ = state.handle([.home])
        #expect(render(state).lines[2].text.hasPrefix("file-1.bin"))
    }

    @Test func aLongNameNeverHidesWhatACancelDeletesOrTheAnswerKeys() {
        var downloads = Fixture.downloads
        downloads[4].state = .paused
        var state = Fixture.state(width: 80, height: 24, downloads: downloads)
        _ = state.handle([.down, .down, .down, .down])
        _ = state.handle([.char("c")])
        let bottom = render(state).lines[23].text
        #expect(bottom.hasPrefix("Cancel (deletes 117 MiB of downloaded data): very-long-name-"), "\(bottom)")
        #expect(bottom.hasSuffix("… y/n"), "\(bottom)")
        #expect(ScreenText.width(bottom) == 80)
    }

    /// Esc closes the details pane and the taller table scrolls back so no row is left blank.
    @Test func closingTheDetailsPaneScrollsBack() {
        let many = (1...40).map { Fixture.download(Int64($0), "file-\($0).bin", .queued) }
        var state = Fixture.state(width: 80, height: 30, downloads: many)
        _ = state.handle([.enter, .end])
        #expect(state.scrollTop == 40 - 18)
        _ = state.handle([.escape])
        #expect(state.scrollTop == 40 - 27)
        #expect(render(state).lines[28].text.hasPrefix("file-40.bin"))
    }

    @Test func theCursorSitsAfterTheTypedText() {
        var state = Fixture.state(width: 80, height: 24)
        var prompt = Prompt()
        prompt.text = Array("http://a")
        prompt.cursor = 4
        state.overlay = .prompt(prompt)
        let frame = render(state)
        #expect(frame.lines[23].text == "Add URL: http://a")
        #expect(frame.cursor == Point(x: 13, y: 23))
    }
}

/// Whole screens compared with files in Snapshots/; `HAUL_RECORD_SNAPSHOTS=1 swift test` re-records.
enum Snapshot {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Snapshots")

    static func check(_ frame: Frame, named name: String) throws {
        let file = directory.appendingPathComponent(name + ".txt")
        let text = frame.lines.map { $0.text }.joined(separator: "\n") + "\n"
        if ProcessInfo.processInfo.environment["HAUL_RECORD_SNAPSHOTS"] == "1" {
            try text.write(to: file, atomically: true, encoding: .utf8)
            return
        }
        let recorded = try? String(contentsOf: file, encoding: .utf8)
        #expect(recorded != nil, "no recording \(name).txt: run HAUL_RECORD_SNAPSHOTS=1 swift test")
        #expect(recorded == text, "\(name) differs from its recording:\n\(text)")
    }
}

@Suite struct SegmentedRowTests {
    @Test func aSegmentedRowShowsItsConnectionsAndCombinedProgress() throws {
        var download = Download(id: DownloadID(1), url: try #require(URL(string: "http://h/big.iso")), destination: .directory("/d"), partPath: "/d/big.iso.part")
        download.state = .downloading
        download.totalBytes = 100 << 20
        download.bytesOnDisk = 50 << 20
        download.bytesPerSecond = Double(16 << 20)
        download.connections = 8
        let text = render(Fixture.state(width: 100, height: 10, downloads: [download])).lines.map(\.text).joined(separator: "\n")
        let row = try #require(text.split(separator: "\n").first { $0.hasPrefix("big.iso") })
        #expect(row.contains("8 conns"), "\(row)")
        #expect(row.contains("50%"), "\(row)")
        #expect(row.contains("16.0 MiB/s"), "\(row)")
        download.connections = 1
        let single = render(Fixture.state(width: 100, height: 10, downloads: [download])).lines.map(\.text).joined(separator: "\n")
        #expect(single.contains("downloading") && !single.contains("conns"))
    }
}
