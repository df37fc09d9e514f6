import DownloadCore
import Foundation
import Testing
@testable import TerminalUI

/// Low disk space and purges in the header, the row and the details pane (issue 18, items 1, 2, 6).
@Suite struct RenderDiskTests {
    static let mib: Int64 = 1 << 20

    init() {
        #expect(utf8Locale, "the C.UTF-8 locale is needed to measure CJK and emoji")
    }

    /// A waiting row with a CJK name, a purged paused one with an emoji, and one downloading.
    static var downloads: [Download] {
        let waiting = Fixture.download(1, "資料-2026.iso", .waitingForSpace(reason: "waiting for disk space (196 KiB free, floor 245 KiB)"), done: 4 * mib, total: 16 * mib)
        var purged = Fixture.download(2, "🎬 film.mkv", .paused)
        purged.lastError = "purged when disk space ran low: 2.0 MiB of partial data discarded; resuming fetches it from zero"
        var running = Fixture.download(3, "plain.bin", .downloading, done: mib, total: 2 * mib)
        running.bytesPerSecond = 100_000
        return [waiting, purged, running]
    }

    static func state(width: Int, height: Int, free: Int64) -> ViewState {
        var state = Fixture.state(width: width, height: height, downloads: downloads)
        state.snapshot.space = DiskReading(free: free, capacity: 24 * mib, floor: 245 * 1024, filesystem: 1)
        return state
    }

    @Test func underTheFloorTheHeaderWarnsFirstInTheWarningColour() throws {
        let frame = render(Self.state(width: 100, height: 10, free: 196 * 1024))
        let header = try #require(frame.lines.first)
        #expect(header.text.hasPrefix("haul  ↓ 97.6 KiB/s  disk low: 196 KiB free, floor 245 KiB  1 downloading"), "\(header.text)")
        let warning = header.spans.first { $0.text.contains("disk low") }
        #expect(warning?.style == Style(color: .yellow, bold: true, reverse: true))
        // Above the floor: the free space is a plain fact among the others.
        let fine = render(Self.state(width: 100, height: 10, free: 20 * Self.mib)).lines.first?.text ?? ""
        #expect(fine.hasSuffix("  20.0 MiB free") && !fine.contains("disk low"), "\(fine)")
        // At 40 columns the warning is what is left, before every count.
        let narrow = render(Self.state(width: 40, height: 10, free: 0)).lines.first?.text ?? ""
        #expect(narrow.hasPrefix("haul  ↓ 97.6 KiB/s  disk low: 0 B free"), "\(narrow)")
        let narrower = render(Self.state(width: 30, height: 10, free: 0)).lines.first?.text ?? ""
        #expect(narrower.hasPrefix("haul  ↓ 97.6 KiB/s  disk low"), "\(narrower)")
    }

    @Test func theRowsSayWhyTheyWaitAndThatTheyWerePurged() {
        // Where the speed, ETA and resume offset would go; the details pane has the rest.
        let text = render(Self.state(width: 160, height: 10, free: 196 * 1024)).text
        #expect(text.contains("4.0 MiB/16.0 MiB waiting for disk space (196 KiB…"), "\(text)")
        #expect(text.contains("0 B/? purged when disk space ran low:…"), "\(text)")
    }

    @Test func theDetailsPaneWrapsTheWholeReason() {
        var state = Self.state(width: 60, height: 20, free: 0)
        state.showDetails = true
        var lines = render(state).lines.map(\.text)
        #expect(lines.contains { $0.hasPrefix("Waiting    waiting for disk space (196 KiB free, floor") }, "\(lines.joined(separator: "\n"))")
        state.selected = DownloadID(2)
        lines = render(state).lines.map(\.text)
        let purged = lines.drop { !$0.hasPrefix("Purged") }.prefix(3).map { String($0.dropFirst(11)) }.joined()
        #expect(purged.hasPrefix("purged when disk space ran low: 2.0 MiB of partial data discarded; resuming fetches it from zero"),
                "wrapped, not cut: \(lines.joined(separator: "\n"))")
    }

    @Test func everySizeFits() {
        for (width, height) in [(0, 0), (1, 1), (20, 5), (40, 10), (80, 24), (200, 50)] {
            for details in [false, true] {
                for free in [0, 20 * Self.mib] {
                    var state = Self.state(width: width, height: height, free: free)
                    state.showDetails = details
                    let frame = render(state)
                    #expect(frame.lines.count == height)
                    #expect(frame.lines.allSatisfy { ScreenText.width($0.text) <= width }, "\(width)×\(height)")
                }
            }
        }
    }
}
