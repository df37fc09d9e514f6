@testable import DownloadCore
import Foundation
import Testing

/// The pure rules of issue 16's smaller faults: names without invisible characters or a leading
/// `-` or `.`, redirects to other schemes, and refused credentials.
@Suite struct FileRulesTests {
    // MARK: Names

    @Test func invisibleCharactersAreRemovedFromNames() throws {
        let invisible: [Unicode.Scalar] = [
            "\u{200B}", "\u{200C}", "\u{200D}", "\u{2060}", "\u{FEFF}",
            "\u{200E}", "\u{200F}", "\u{061C}", "\u{202A}", "\u{202B}", "\u{202C}", "\u{202D}", "\u{202E}",
            "\u{2066}", "\u{2067}", "\u{2068}", "\u{2069}",
        ]
        for scalar in invisible {
            let name = "in" + String(Character(scalar)) + "voice.pdf"
            #expect(FileNaming.sanitize(name) == "invoice.pdf", "U+\(String(scalar.value, radix: 16, uppercase: true))")
        }
        #expect(FileNaming.sanitize("\u{200B}") == nil, "nothing visible is left")
        // Letters that join (Arabic, Devanagari) are not what is removed: only the marks above.
        #expect(FileNaming.sanitize("مرحبا.txt") == "مرحبا.txt")
    }

    @Test func aLeadingDashOrDotIsMadeVisible() {
        #expect(FileNaming.sanitize("-rf") == "_-rf")
        #expect(FileNaming.sanitize(".bashrc") == "_.bashrc")
        #expect(FileNaming.sanitize("\u{200B}-rf") == "_-rf", "a hidden character cannot hide the dash")
        #expect(FileNaming.sanitize(" .profile") == "_.profile")
        #expect(FileNaming.sanitize("a-b.c") == "a-b.c")
        #expect(FileNaming.sanitize("..") == nil)
        #expect(FileNaming.name(for: URL(string: "http://h/dir/.bashrc")!) == "_.bashrc")
        #expect(FileNaming.name(for: URL(string: "http://h/-rf%E2%80%8B")!) == "_-rf")
    }

    // MARK: Redirects and credentials

    @Test func aRedirectToAnotherSchemeIsRefusedForItsScheme() {
        let from = URL(string: "http://h/a")!
        for location in ["file:///etc/passwd", "ftp://h/x", "data:text/plain,hi"] {
            let decision = Redirects.decide(status: 302, location: location, from: from, visited: [from], allowDowngrade: false)
            #expect(decision == .refuse(reason: "refused a redirect to \(location): only http and https"))
        }
        let bad = Redirects.decide(status: 302, location: "http://", from: from, visited: [from], allowDowngrade: false)
        #expect(bad == .refuse(reason: "HTTP 302 redirect to an invalid URL 'http://'"))
    }

    /// A port out of 16 bits: refused with the reason, never followed (it stopped haul with a trap).
    @Test func aRedirectToAPortOutOfRangeIsRefused() {
        let from = URL(string: "https://h/a")!
        let decision = Redirects.decide(status: 302, location: "https://127.0.0.1:70000/x", from: from, visited: [from], allowDowngrade: false)
        #expect(decision == .refuse(reason: "HTTP 302 redirect to 'https://127.0.0.1:70000/x': port 70000 is not between 1 and 65535"))
        #expect(Redirects.decide(status: 302, location: "https://127.0.0.1:65535/x", from: from, visited: [from], allowDowngrade: false)
            == .follow(URL(string: "https://127.0.0.1:65535/x")!))
    }

    @Test func a401ToCredentialsGivenSaysTheyWereRefused() {
        var facts = ResponseFacts(status: 401, reasonPhrase: "Unauthorized", authenticate: "Basic realm=\"files\"")
        #expect(facts.failureText.contains("the server wants Basic (realm \"files\") credentials"))
        facts.sentCredentials = true
        #expect(facts.failureText == "HTTP 401 Unauthorized: the server refused the credentials given for Basic (realm \"files\")")
        facts.authenticate = nil
        #expect(facts.failureText == "HTTP 401 Unauthorized: the server refused the credentials given for this URL")
    }
}

/// The quick ways of naming agree with the whole ones.
@Suite struct FileNamingShortcutTests {
    /// Every name the one-pass check calls plain comes out of the whole way unchanged: all names
    /// of up to three characters over letters, digits, the plain punctuation and the characters
    /// next to it, and names at the length limit.
    @Test func aPlainNameIsOneTheWholeWayKeeps() throws {
        let alphabet = Array("aZ09._-+~=,@% /\\\u{7F}\u{1B}é\u{200B}:*!")
        var names = alphabet.map { String($0) }
        for a in alphabet { for b in alphabet { names.append(String([a, b])) } }
        for a in alphabet { for b in alphabet { for c in alphabet { names.append(String([a, b, c])) } } }
        names += [String(repeating: "a", count: FileNaming.maxNameBytes), String(repeating: "a", count: FileNaming.maxNameBytes + 1) + ".bin"]
        var plain = 0
        for name in names where FileNaming.isPlain(name) {
            plain += 1
            #expect(FileNaming.sanitizedInFull(name) == name, "\(name)")
        }
        #expect(plain > 1000, "the check calls some names plain")
        #expect(!FileNaming.isPlain(String(repeating: "a", count: FileNaming.maxNameBytes + 1)))
        for name in names { #expect(FileNaming.sanitize(name) == FileNaming.sanitizedInFull(name), "\(name)") }
    }

    /// A URL's name comes from its last segment that is not empty, as written, as splitting the
    /// path `URLComponents` reads would give it.
    @Test(arguments: [
        "http://h/a/b.bin", "http://h/caf%E9%20z.bin", "http://h/a/b.bin?x=1#f", "http://h/", "http://h", "http://h/a;p=1/b;q",
        "http://u:p@h:80/%2F..%2Fetc", "http://h/a//", "http://h//", "http://[::1]:8/x%20y", "https://h/%E5%90%8D", "http://h/a%2Fb",
        "http://h/.%2e/x", "http://h/a%20b", "http://h/~u/%7e", "http://h/dir/.bashrc", "http://h/-rf%E2%80%8B", "http://h/a/%2E%2E",
    ])
    func aURLsNameIsItsLastSegment(_ text: String) throws {
        let url = try #require(URL(string: text))
        let path = URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? url.path
        let segment = path.split(separator: "/").last ?? ""
        #expect(FileNaming.name(for: url) == FileNaming.sanitize(RequestTarget.decode(segment)) ?? "index.html")
    }
}
