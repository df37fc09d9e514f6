@testable import DownloadCore
import Foundation
import Testing

/// A URL's path and query go on the wire as written: only what may not be raw is encoded.
@Suite struct RequestTargetTests {
    @Test(arguments: [
        // Raw non-ASCII beside an escape: the `%` of the escape is never encoded again.
        ("http://h.test/Übersicht%202026.pdf", "/%C3%9Cbersicht%202026.pdf"),
        ("http://h.test/%C3%9Cbersicht%202026.pdf", "/%C3%9Cbersicht%202026.pdf"),
        // A lone `%` is a percent sign; `%25` stays `%25`.
        ("http://h.test/100%.zip", "/100%25.zip"),
        ("http://h.test/100%25.zip", "/100%25.zip"),
        ("http://h.test/a%2", "/a%252"),
        // Escapes keep their case and meaning (`%2F` is not a slash, `%41` not an A).
        ("http://h.test/a%2Fb/%41%7e", "/a%2Fb/%41%7e"),
        // What RFC 3986 never allows raw is encoded; what it allows stays.
        ("http://h.test/a{b}|c\"d<e>^`\\[f]", "/a%7Bb%7D%7Cc%22d%3Ce%3E%5E%60%5C%5Bf%5D"),
        ("http://h.test/a;b=c,d:e@f!$&'()*+~-._", "/a;b=c,d:e@f!$&'()*+~-._"),
        // The query likewise, `?` and `/` in it included; the fragment is never sent.
        ("http://h.test/p?q=Ü%20x&r=%E9&s=a/b?c", "/p?q=%C3%9C%20x&r=%E9&s=a/b?c"),
        ("http://h.test/p#Ü", "/p"),
        ("http://h.test", "/"),
        ("http://h.test?x=1", "/?x=1"),
        ("http://h.test/テスト資料.pdf", "/%E3%83%86%E3%82%B9%E3%83%88%E8%B3%87%E6%96%99.pdf"),
    ])
    func theTargetIsTheURLAsWrittenWithOnlyWhatMayNotBeRawEncoded(input: String, target: String) throws {
        let url = try URLValidation.parse(input)
        #expect(RequestTarget.expected(url) == target)
        #expect(RequestTarget.sent(url) == target, "what the HTTP client puts in the request line")
        #expect(url.host == "h.test")
    }

    @Test(arguments: [
        ("http://h.test/caf%E9.bin", "/caf%E9.bin", "http://h.test:80/caf%25E9.bin"),
        ("http://h.test/dir/%FF%FE/x?q=%E9", "/dir/%FF%FE/x?q=%E9", "http://h.test:80/dir/%25FF%25FE/x?q=%E9"),
        // Every escape of the path is written `%25` in the placeholder, UTF-8 ones too.
        ("https://u:p@h.test/%C3x%20y#frag", "/%C3x%20y", "http://h.test:443/%25C3x%2520y"),
        ("https://h.test:8443/caf%E9.bin", "/caf%E9.bin", "http://h.test:8443/caf%25E9.bin"),
        ("http://[::1]:8080/caf%E9.bin", "/caf%E9.bin", "http://[::1]:8080/caf%25E9.bin"),
    ])
    func anEscapeThatIsNotUTF8IsAcceptedAndGoesOutThroughAPlaceholder(input: String, target: String, placeholder: String) throws {
        // The HTTP client would ask for `/` (Foundation cannot decode the path): the bridge sends it.
        let url = try URLValidation.parse(input)
        #expect(RequestTarget.expected(url) == target)
        #expect(!RequestTarget.isExpressible(url))
        #expect(RequestTarget.problem(url) == nil)
        let stand = try #require(RequestTarget.placeholder(for: url))
        #expect(stand.absoluteString == placeholder)
        #expect(RequestTarget.isExpressible(stand), "the client sends the placeholder as it is")
    }

    @Test func theHostHeaderIsTheURLsOwn() throws {
        #expect(RequestTarget.authority(try #require(URL(string: "https://h.test/caf%E9.bin"))) == "h.test")
        #expect(RequestTarget.authority(try #require(URL(string: "https://h.test:443/caf%E9.bin"))) == "h.test")
        #expect(RequestTarget.authority(try #require(URL(string: "https://h.test:80/caf%E9.bin"))) == "h.test:80")
        #expect(RequestTarget.authority(try #require(URL(string: "http://[::1]:8080/x"))) == "[::1]:8080")
        #expect(RequestTarget.authority(try #require(URL(string: "http://[::1]/x"))) == "[::1]")
        // The plain host's fast way gives what the full parse gives, or leaves it to it.
        for text in [
            "http://127.0.0.1:18950/small/f0001.bin", "https://Mirror.Example.ORG/a%20b", "http://h-1.test./x?y=%41",
            "http://ex%41mple.test/x", "http://user:p%40ss@h.test/x", "http://[::1]:8080/x", "http://b%C3%BCcher.test/",
            "http://h.test#frag", "http://h_x.test/", "HTTP://H.TEST:80/",
        ] {
            let url = try #require(URL(string: text))
            let full = URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedHost ?? url.host ?? ""
            if let plain = RequestTarget.plainHost(url) { #expect(plain == full, "\(text)") }
        }
        #expect(RequestTarget.plainHost(try #require(URL(string: "http://ex%41mple.test/x"))) == nil)
        #expect(RequestTarget.plainHost(try #require(URL(string: "http://127.0.0.1:18950/x"))) == "127.0.0.1")
    }

    @Test func aRedirectToAnEscapeThatIsNotUTF8IsFollowedAndARawLocationIsEncoded() throws {
        let base = try #require(URL(string: "http://h.test/a/b"))
        let raw = Redirects.decide(status: 302, location: "Übersicht%202026.pdf", from: base, visited: [base], allowDowngrade: false)
        #expect(raw == .follow(try #require(URL(string: "http://h.test/a/%C3%9Cbersicht%202026.pdf"))))
        let latin = Redirects.decide(status: 302, location: "/caf%E9.bin", from: base, visited: [base], allowDowngrade: false)
        #expect(latin == .follow(try #require(URL(string: "http://h.test/caf%E9.bin"))))
    }

    @Test(arguments: [
        ("http://h.test/dir/Übersicht%202026.pdf", "Übersicht 2026.pdf"),
        ("http://h.test/caf%C3%A9.bin?x=1", "café.bin"),
        ("http://h.test/a%2Fb", "b"),
        ("http://h.test/%2E%2E", "index.html"),
        ("http://h.test/", "index.html"),
        ("http://h.test/100%25.zip", "100%.zip"),
        ("http://h.test/x%1B%5B31m.txt", "x[31m.txt"),
        // Not UTF-8: the escape stays as written in the name, as curl -O names it.
        ("http://h.test/caf%E9.bin", "caf%E9.bin"),
    ])
    func theFileNameComesFromTheDecodedBytesMadeSafe(input: String, name: String) throws {
        #expect(FileNaming.name(for: try URLValidation.parse(input)) == name)
    }

    @Test func decodingKeepsAnEscapeThatIsNotUTF8AsWritten() {
        #expect(RequestTarget.decode("caf%E9.bin") == "caf%E9.bin")
        #expect(RequestTarget.decode("%C3%A9%E9%41") == "é%E9A")
        #expect(RequestTarget.decode("%C3%A9%A9") == "é%A9")
        #expect(RequestTarget.decode("%F0%9F%91%8D") == "👍")
        #expect(RequestTarget.decode("%") == "%")
        #expect(RequestTarget.decode("%4") == "%4")
    }

    /// Random paths and queries made of escapes (UTF-8 or not), raw non-ASCII, reserved and
    /// forbidden characters: every URL accepted is sent as written (by the client, or through a
    /// placeholder it can send), and named by its decoded bytes.
    @Test func anyAcceptedURLIsSentAsWrittenAndNamedByItsDecodedBytes() {
        var rng = SplitMix64(state: 0x7A26_E700)
        var accepted = 0
        var bridged = 0
        for round in 0..<3_000 {
            let text = "http://h.test/" + Self.randomPath(&rng)
            guard let url = try? URLValidation.parse(text) else { continue }
            accepted += 1
            let target = RequestTarget.expected(url)
            if RequestTarget.sent(url) != target {
                // Not the client's to send: a placeholder it can send, for the same server.
                bridged += 1
                let placeholder = RequestTarget.placeholder(for: url)
                #expect(placeholder.map(RequestTarget.isExpressible) == true, "round \(round): \(text.debugDescription)")
                #expect(placeholder?.host == "h.test" && placeholder?.port == 80, "round \(round)")
            }
            #expect(target.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "round \(round): a raw byte in \(target)")
            // Encoding is idempotent: the target names itself.
            #expect(RequestTarget.encode("http://h.test" + target) == "http://h.test" + target, "round \(round)")
            let name = FileNaming.name(for: url)
            #expect(!name.contains("/") && !name.unicodeScalars.contains(where: TerminalText.isControl), "round \(round): \(name.debugDescription)")
        }
        #expect(accepted > 2_000, "the generator must reach the interesting cases")
        #expect(bridged > 300, "escapes that are not UTF-8 are accepted")
    }

    /// `encode` keeps a text with nothing to encode as it is and looks for `://` in bytes: the
    /// same answer as encoding every byte of every part the first way (`reference`), for texts
    /// built from the pieces that matter, with and without a scheme and an authority.
    @Test func encodingGivesWhatEncodingEveryByteGave() {
        var rng = SplitMix64(state: 0xE2C0_DE01)
        var unchanged = 0
        for round in 0..<3_000 {
            let path = Self.randomPath(&rng)
            for text in ["http://h.test/" + path, "https://ü.test:8080/" + path, path, "http://h.test", "x://a" + path] {
                let expected = Self.reference(text)
                #expect(RequestTarget.encode(text) == expected, "round \(round): \(text.debugDescription)")
                if expected == text { unchanged += 1 }
            }
        }
        #expect(unchanged > 3_000, "the generator must reach texts with nothing to encode")
    }

    /// How `encode` worked before its fast paths: a `://` found by characters, and every byte of
    /// the rest looked at.
    static func reference(_ text: String) -> String {
        func part(_ part: Substring) -> String {
            let bytes = Array(part.utf8)
            let notRaw = Set("\"<>[\\]^`{|}".utf8)
            func isHex(_ byte: UInt8) -> Bool { (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66) }
            var out = ""
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "%") {
                    if index + 2 < bytes.count, isHex(bytes[index + 1]), isHex(bytes[index + 2]) {
                        out += String(decoding: bytes[index...index + 2], as: UTF8.self)
                        index += 3
                        continue
                    }
                    out += "%25"
                } else if byte >= 0x80 || byte <= 0x20 || byte == 0x7F || notRaw.contains(byte) {
                    out += String(format: "%%%02X", byte)
                } else {
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                }
                index += 1
            }
            return out
        }
        guard let authority = text.range(of: "://") else { return part(Substring(text)) }
        let rest = text[authority.upperBound...]
        guard let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) else { return text }
        return String(text[..<end]) + part(text[end...])
    }

    static let pieces = [
        "%", "%2", "%20", "%25", "%2F", "%E9", "%C3%A9", "%C3", "%FF", "%e2%82%ac", "%F0%9F%91%8D", "%41", "%zz",
        "Ü", "é", "テ", "👍", "/", "?", "&", "=", ";", "+", "{", "}", "|", "\\", "^", "`", "\"", "<", ">", "[", "]",
        "a", "b.bin", "-", "_", "~", "!", "$", "'", "(", ")", "*", ",", ":", "@", "#", " ",
    ]

    static func randomPath(_ rng: inout SplitMix64) -> String {
        (0..<Int.random(in: 0...10, using: &rng)).map { _ in pieces.randomElement(using: &rng) ?? "" }.joined()
    }
}
