import DownloadCore
import Foundation
import Testing
@testable import TerminalUI

/// Row 15 of the fault matrix: random key sequences (pastes, resizes and new snapshots between
/// them) drive the reducer and the renderer for a bounded number of rounds. Nothing may crash,
/// every command names a download of the queue, and every frame fits its screen.
@Suite struct KeyFuzzTests {
    /// A seeded generator (Knuth's MMIX LCG, high bits out), so a failing round can be replayed.
    struct SeededKeys: RandomNumberGenerator {
        var state: UInt64

        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return (state >> 32) | (state << 32)
        }
    }

    static let keys: [Key] = [
        .up, .down, .left, .right, .pageUp, .pageDown, .home, .end, .enter, .escape, .backspace, .delete, .tab,
        .ctrl("l"), .ctrl("c"), .ctrl("u"), .ctrl("a"), .ctrl("e"), .ctrl("w"),
        .function(1), .function(3), .function(6), .function(9), .function(10), .function(12),
        .click(x: 3, y: 2), .click(x: 0, y: 5), .click(x: 70, y: 40), .wheelUp, .wheelDown,
    ] + "pPrcCxXaAyYnNqQ?hjkJK<>+-du /:h\u{1B}\u{7}é€👍sSlL0123456789H/".map { Key.char($0) }

    @Test func randomKeysNeverCrashAndOnlyNameQueuedDownloads() async {
        // On a thread of its own: the suite's two cooperative threads stay free for the tests that
        // wait on time (a busy pool would starve them for seconds).
        let failures = await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: Self.fuzzKeys(rounds: 100)) }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }

    /// The broken promises of `rounds` rounds of random keys, each naming its round.
    static func fuzzKeys(rounds: Int) -> [String] {
        var failures: [String] = []
        func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { failures.append(message()) }
        }
        var rng = SeededKeys(state: 0xF00D)
        for round in 0..<rounds {
            let count = Int.random(in: 0...Fixture.downloads.count, using: &rng)
            let downloads = Array(Fixture.downloads.shuffled(using: &rng).prefix(count))
            var width = Int.random(in: 1...160, using: &rng)
            var height = Int.random(in: 1...50, using: &rng)
            var state = Fixture.state(width: width, height: height, downloads: downloads, unicode: Bool.random(using: &rng))
            for _ in 0..<40 {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0:
                    width = Int.random(in: 1...160, using: &rng)
                    height = Int.random(in: 1...50, using: &rng)
                    state.resize(width: width, height: height)
                case 1:
                    let kept = downloads.filter { _ in Bool.random(using: &rng) }
                    state.apply(SessionSnapshot(downloads: kept, maxActive: 3))
                default:
                    let batch = (0..<Int.random(in: 1...8, using: &rng)).compactMap { _ in Self.keys.randomElement(using: &rng) }
                    let ids = Set(state.snapshot.downloads.map(\.id))
                    for command in state.handle(batch) {
                        switch command {
                        case .pause(let id), .resume(let id), .cancel(let id), .remove(let id), .move(let id, _):
                            expect(ids.contains(id), "round \(round): \(command) for a download not shown")
                        case .setMaxActive(let n):
                            expect((1...32).contains(n), "round \(round): \(command)")
                        case .add(let urls):
                            expect(urls.allSatisfy { ["http", "https"].contains($0.scheme ?? "") }, "round \(round)")
                        case .setDownloadLimit(let id, let limit):
                            expect(ids.contains(id), "round \(round): \(command) for a download not shown")
                            expect(limit.map { $0 >= 1024 } ?? true, "round \(round): \(command)")
                        case .setLimit(let limit):
                            expect(limit.map { $0 >= 1024 } ?? true, "round \(round): \(command)")
                        case .loadHistory(let id):
                            expect(id.map { ids.contains($0) } ?? true, "round \(round): \(command)")
                        case .copy(let text):
                            expect(ScreenText.clean(text) == text, "round \(round): \(command)")
                        default:
                            break
                        }
                    }
                }
                // Rows shown are rows of the queue, and the selection is one of them.
                expect(state.rows.allSatisfy { state.snapshot[$0.id] != nil }, "round \(round): a row not in the queue")
                expect(state.selected.map { id in state.rows.contains { $0.id == id } } ?? state.rows.isEmpty, "round \(round): selection not shown")
                let frame = render(state)
                expect(frame.lines.count == height, "round \(round): \(width)x\(height)")
                expect(frame.lines.allSatisfy { $0.width <= width }, "round \(round): \(width)x\(height)")
            }
        }
        return failures
    }
}
