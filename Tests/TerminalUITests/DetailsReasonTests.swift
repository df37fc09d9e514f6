import DownloadCore
import Foundation
import Testing
import TerminalUI

/// A failure's reason in the details pane wraps rather than being cut (issue 16, item 10): a
/// checksum mismatch names two full digests for a person to compare.
@Suite struct DetailsReasonTests {
    @Test func aChecksumMismatchShowsBothFullDigestsInTheDetails() {
        let expected = String(repeating: "ab", count: 64)
        let actual = String(repeating: "cd", count: 64)
        let reason = "sha-512 mismatch: expected \(expected), got \(actual) (kept as .part)"
        for width in [40, 80, 100] {
            var state = Fixture.state(width: width, height: 30, downloads: [Fixture.download(1, "sum.bin", .failed(reason: reason))])
            state.showDetails = true
            let lines = render(state).lines.map(\.text)
            // The reason's lines, label and indent taken off, joined again.
            guard let first = lines.firstIndex(where: { $0.hasPrefix("Failed") }) else {
                Issue.record("no Failed line at \(width) columns: \(lines)")
                continue
            }
            let shown = lines[first...].prefix { $0.hasPrefix("Failed") || $0.hasPrefix("           ") && !$0.allSatisfy { $0 == " " } }
                .map { String($0.dropFirst(11)).trimmingCharacters(in: .whitespaces) }.joined()
            #expect(shown.contains(expected) && shown.contains(actual), "at \(width) columns: \(lines.joined(separator: "\n"))")
            #expect(lines.allSatisfy { ScreenText.width($0) <= width })
        }
    }
}
