import DownloadCore
import Foundation
import Testing
import TestSupport

/// A seeded generator, so a failing input can be replayed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Row 15 of the fault matrix: the parsers of what servers and people send, fed random input for a
/// bounded number of rounds. None may crash, and each answer keeps its promise.
@Suite struct FuzzTests {
    /// Fragments that real headers are made of, so random input reaches the parsers' deeper paths.
    static let pieces = [
        "bytes ", "bytes=", "-", "/", "*", "0", "1", "9", "42", "18446744073709551615", "-1", " ", ",", ";", "=", "\"", "'", "\\",
        "attachment", "inline", "filename", "filename*", "UTF-8''", "iso-8859-1'en'", "%", "%2F", "%00", "%1B", "%E2%82%AC", "%ZZ",
        "..", "/", "W/", "sha-256", "sha-512", "Mon, 01 Jan 2026 00:00:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", "\r", "\n", "\u{1B}[2J",
        "\u{0}", "\u{7F}", "\u{202E}", "é", "€", "👍", "http://", "https://", "h.test", ":", "@", "?", "#", "Authorization", "X-A",
    ]

    static func randomText(_ rng: inout SplitMix64) -> String {
        var text = ""
        for _ in 0..<Int.random(in: 0...12, using: &rng) {
            if Bool.random(using: &rng) {
                text += pieces.randomElement(using: &rng) ?? ""
            } else {
                let scalar = Unicode.Scalar(UInt32.random(in: 0...0x2FF, using: &rng)) ?? " "
                text.unicodeScalars.append(scalar)
            }
        }
        return text
    }

    @Test func headerParsersSurviveRandomInput() async throws {
        // On a thread of its own: the suite's two cooperative threads stay free for the tests that
        // wait on time (a busy pool would starve them for seconds).
        let failures = await onOwnThread { Self.fuzzHeaderParsers(rounds: 2_000) }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }

    /// The broken promises of `rounds` random inputs, each naming its round and input.
    static func fuzzHeaderParsers(rounds: Int) -> [String] {
        var failures: [String] = []
        func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { failures.append(message()) }
        }
        var rng = SplitMix64(state: 0x5EED_0001)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        for round in 0..<rounds {
            let text = Self.randomText(&rng)
            if let range = ContentRange(text) {
                if let bounds = range.range {
                    expect(bounds.lowerBound >= 0, "round \(round): \(text.debugDescription)")
                    if let total = range.total { expect(bounds.upperBound < total, "round \(round): \(text.debugDescription)") }
                }
            }
            if let seconds = RetryAfter.seconds(from: text, now: now) {
                expect(seconds >= 0 && seconds.isFinite, "round \(round): \(text.debugDescription)")
            }
            _ = HTTPDate.parse(text)
            _ = HTTPDate.seconds(text)
            if let proposed = ContentDisposition.fileName(from: text), let name = FileNaming.sanitize(proposed) {
                expect(!name.isEmpty && name != "." && name != "..", "round \(round): \(text.debugDescription)")
                expect(!name.contains("/") && !name.unicodeScalars.contains(where: TerminalText.isControl), "round \(round): \(text.debugDescription)")
                expect(name.utf8.count <= 255, "round \(round)")
            }
            if let field = try? HeaderField.parse(text) {
                expect(!field.name.isEmpty, "round \(round): \(text.debugDescription)")
                expect(!(field.name + field.value).contains { $0 == "\r" || $0 == "\n" }, "round \(round): a header may never carry CR/LF")
            }
            _ = try? Checksum.parse(text)
            if let url = try? URLValidation.parse(text) {
                expect(["http", "https"].contains(url.scheme?.lowercased() ?? ""), "round \(round): \(text.debugDescription)")
                expect(!url.absoluteString.unicodeScalars.contains(where: TerminalText.isControl), "round \(round)")
            }
            if let parts = Segments.decode(text) {
                _ = Segments.isValid(parts, total: Int64(round))
            }
            let base = URL(string: "https://h.test/a/b")
            if let base, case .follow(let target) = Redirects.decide(status: 302, location: text, from: base, visited: [base], allowDowngrade: false) {
                expect(target.scheme == "https", "round \(round): no downgrade: \(text.debugDescription)")
            }
            expect(!TerminalText.sanitize(text).unicodeScalars.contains(where: TerminalText.isControl), "round \(round)")
        }
        return failures
    }
}
