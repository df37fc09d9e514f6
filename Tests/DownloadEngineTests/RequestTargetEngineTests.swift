import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing

/// What reaches the server's request line is the URL's path and query as written.
@Suite struct RequestTargetEngineTests {
    @Test func rawNonASCIIBesideAnEscapeFetchesTheResourceItNames() async throws {
        try await Harness.with { h in
            // The server matches the target byte for byte: `%25202026` would be another resource.
            h.server.serve("/docs/%C3%9Cbersicht%202026.pdf", size: 300_000)
            let id = try await h.session.schedule(try URLValidation.parse(h.server.url("/docs/").absoluteString + "Übersicht%202026.pdf"), to: .directory(h.directory))
            let done = try await h.waitCompleted(id)
            #expect(done.completedPath == h.path("Übersicht 2026.pdf"), "named by the decoded bytes")
            #expect(sha256(ofFile: h.path("Übersicht 2026.pdf")) == h.server.sha256("/docs/%C3%9Cbersicht%202026.pdf"))
            #expect(h.gets("/docs/%C3%9Cbersicht%202026.pdf").map(\.target) == ["/docs/%C3%9Cbersicht%202026.pdf"])
        }
    }

    /// The property, through the real HTTP client: for paths and queries made of escapes (UTF-8 or
    /// not), raw non-ASCII, reserved and forbidden characters, every URL that is accepted arrives at
    /// the server with exactly its written target.
    @Test func everyAcceptedURLArrivesWithItsTargetAsWritten() async throws {
        try await Harness.with({ $0.maxActive = 16; $0.maxTries = 1 }) { h in
            var expected: Set<String> = []
            var ids: [DownloadID] = []
            let base = h.server.url("/").absoluteString
            // Every 151st triple of pieces: a spread of combinations, the same on every run.
            let count = Self.pieces.count
            for index in stride(from: 0, to: count * count * count, by: 151) {
                let text = base + Self.pieces[index % count] + Self.pieces[index / count % count] + Self.pieces[index / count / count]
                guard let url = try? URLValidation.parse(text) else { continue }
                guard expected.insert(RequestTarget.expected(url)).inserted else { continue }
                // Nothing is served: each answers 404 at once and fails, having shown its target.
                ids.append(try await h.session.schedule(url, to: .file(h.path("f\(ids.count)"))))
            }
            #expect(ids.count > 300, "the pieces must reach the interesting cases")
            for id in ids { try await h.wait(id, timeout: 60) { $0.state.isFinished } }
            let received = Set(h.server.requests().map(\.target))
            #expect(received == expected, "missing: \(expected.subtracting(received).prefix(5)), unexpected: \(received.subtracting(expected).prefix(5))")
        }
    }

    static let pieces = [
        "%20", "%25", "%2F", "%3F", "%23", "%C3%A9", "%e2%82%ac", "%41", "%E9", "%C3", "%", "Ü", "é", "テ", "👍", "/", "?", "&", "=", ";", "+",
        "{", "}", "|", "^", "`", "\"", "<", ">", "[", "]", "a", "b.bin", "-", "_", "~", "!", "$", "'", "(", ")", "*", ",", ":", "@",
    ]
}
