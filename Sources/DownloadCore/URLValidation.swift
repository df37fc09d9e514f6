import Foundation

/// Turning what a person typed into a URL haul can fetch, with a one-line reason when it cannot.
public enum URLValidation {
    public struct Invalid: Error, Hashable, CustomStringConvertible {
        public var input: String
        public var reason: String

        public init(input: String, reason: String) {
            self.input = input
            self.reason = reason
        }

        public var description: String {
            "invalid URL '\(TerminalText.sanitize(URLValidation.redactingPassword(input)))': \(reason)"
        }
    }

    /// An absolute http(s) URL with a host, and no control characters (a CR/LF would let a URL
    /// smuggle a header into the request).
    public static func parse(_ text: String) throws(Invalid) -> URL {
        if text.unicodeScalars.contains(where: TerminalText.isControl) {
            throw Invalid(input: text, reason: "contains control characters")
        }
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else { throw Invalid(input: text, reason: "empty") }
        // A byte search: `contains(" ")` took Foundation's substring search, 9,400 instructions a URL.
        guard !trimmed.utf8.contains(UInt8(ascii: " ")) else { throw Invalid(input: text, reason: "contains spaces") }
        // What may not be raw is percent-encoded first, escapes kept: the target goes out as written.
        guard let components = URLComponents(string: RequestTarget.encode(trimmed)), let url = components.url else {
            throw Invalid(input: text, reason: "not a URL")
        }
        guard let scheme = components.scheme?.lowercased() else {
            throw Invalid(input: text, reason: "no scheme (use http:// or https://)")
        }
        guard scheme == "http" || scheme == "https" else {
            throw Invalid(input: text, reason: "unsupported scheme '\(scheme)' (only http and https)")
        }
        guard let host = components.host, !host.isEmpty else {
            throw Invalid(input: text, reason: "no host")
        }
        if let problem = portProblem(url) ?? portProblem(written: trimmed) { throw Invalid(input: text, reason: problem) }
        if let problem = RequestTarget.problem(url) { throw Invalid(input: text, reason: problem) }
        return url
    }

    /// Why `url`'s port is not one a connection can go to (0, or above 65535, which the URL
    /// parser takes); nil when it has none or a good one. A port that does not fit in 16 bits
    /// stopped haul with a trap in SwiftNIO's address for an IP literal over https.
    public static func portProblem(_ url: URL) -> String? {
        guard let port = url.port, !(1...65535).contains(port) else { return nil }
        return "port \(port) is not between 1 and 65535"
    }

    /// Why the port written in `text` is not one (a tester's `:99999999999999999999` does not fit
    /// an integer: the URL parser dropped it and haul connected to port 80); nil when none is
    /// written, or a good one.
    public static func portProblem(written text: String) -> String? {
        guard let port = writtenPort(text), !port.isEmpty else { return nil }
        let digits = port.drop { $0 == "0" }
        if digits.utf8.count <= 5, port.allSatisfy(\.isASCII), let number = Int(digits), (1...65535).contains(number) { return nil }
        return "port \(TerminalText.sanitize(String(port.prefix(24)))) is not between 1 and 65535"
    }

    /// The authority of `scheme://authority/…` as written: up to the first `/`, `?` or `#`.
    private static func authority(_ text: String) -> Substring? {
        guard let schemeEnd = text.range(of: "://") else { return nil }
        let rest = text[schemeEnd.upperBound...]
        return rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex)]
    }

    /// The port as written in `text` (`scheme://[userinfo@]host:PORT/…`, `[v6]:PORT`); nil when
    /// none is written.
    static func writtenPort(_ text: String) -> Substring? {
        guard var host = authority(text) else { return nil }
        if let at = host.lastIndex(of: "@") { host = host[host.index(after: at)...] }
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            host = host[host.index(after: close)...]
            return host.hasPrefix(":") ? host.dropFirst() : nil
        }
        guard let colon = host.lastIndex(of: ":") else { return nil }
        return host[host.index(after: colon)...]
    }

    /// `text` with the password of a `user:password@` written in it shown as `***`, as haul shows
    /// URLs everywhere (a tester: refusals of a bad URL printed it).
    public static func redactingPassword(_ text: String) -> String {
        guard let authority = authority(text), let at = authority.lastIndex(of: "@"),
              let colon = authority[..<at].firstIndex(of: ":") else { return text }
        return String(text[..<authority.index(after: colon)]) + "***" + String(text[at...])
    }
}
