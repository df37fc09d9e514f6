import Foundation

/// The path and query of a URL as they go on the wire: byte for byte as given.
///
/// Like curl and wget, haul never decodes an escape and never encodes a `%` that starts one; it
/// percent-encodes only what may not appear raw in a URL (non-ASCII as UTF-8, and the ASCII
/// characters RFC 3986 leaves out). Foundation's `URL(string:)` instead encodes every `%` of a
/// string that holds one raw non-ASCII character (`Ü%20` would go out as `%C3%9C%2520`), so the
/// text is encoded here first.
public enum RequestTarget {
    /// The URL text with its path, query and fragment percent-encoded where they may not be raw.
    ///
    /// The scheme and authority are left alone (a host is not a path: no escape belongs there).
    ///
    /// Looked through as UTF-8 bytes, and a part with nothing to encode is kept as it is: every URL
    /// of a list is validated before anything starts, and this took 29,000 of the 68,000
    /// instructions a URL's validation cost (callgrind; 5,000 now).
    public static func encode(_ text: String) -> String {
        let bytes = text.utf8
        guard let authority = afterScheme(bytes) else { return encodePart(Substring(text)) }
        guard let end = bytes[authority...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) else {
            return text
        }
        return String(text[..<end]) + encodePart(text[end...])
    }

    /// Where what follows the first `://` starts; nil without one. (The standard library's
    /// `firstRange(of:)` took 18,000 instructions a URL here; all of `encode` takes 5,300 with
    /// this loop: callgrind, `haul add -i` of 1,000 URLs.)
    private static func afterScheme(_ bytes: String.UTF8View) -> String.Index? {
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if bytes[index] == UInt8(ascii: ":") {
                let first = bytes.index(after: index)
                if first != bytes.endIndex, bytes[first] == UInt8(ascii: "/") {
                    let second = bytes.index(after: first)
                    if second != bytes.endIndex, bytes[second] == UInt8(ascii: "/") { return bytes.index(after: second) }
                }
            }
            index = bytes.index(after: index)
        }
        return nil
    }

    /// `part` with every byte that may not appear raw percent-encoded, escapes kept as they are.
    static func encodePart(_ part: Substring) -> String {
        let bytes = Array(part.utf8)
        if !needsEncoding(bytes) { return String(part) }
        var out = ""
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                // An escape stays as given; a lone `%` is a literal percent sign.
                if index + 2 < bytes.count, isHex(bytes[index + 1]), isHex(bytes[index + 2]) {
                    out.append(String(decoding: bytes[index...index + 2], as: UTF8.self))
                    index += 3
                    continue
                }
                out += "%25"
            } else if !isRaw(byte) {
                out += String(format: "%%%02X", byte)
            } else {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            }
            index += 1
        }
        return out
    }

    /// Whether `byte` may appear raw in a path or query: printable ASCII but the characters
    /// Foundation's URL parser (and RFC 3986) do not take raw (`"<>[\]^`{|}`).
    private static func isRaw(_ byte: UInt8) -> Bool {
        guard byte > 0x20, byte < 0x7F else { return false }
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "["), UInt8(ascii: "\\"), UInt8(ascii: "]"),
             UInt8(ascii: "^"), UInt8(ascii: "`"), UInt8(ascii: "{"), UInt8(ascii: "|"), UInt8(ascii: "}"):
            return false
        default:
            return true
        }
    }

    /// Whether `encodePart` would change `bytes`: a byte that may not be raw, or a `%` that starts
    /// no escape.
    private static func needsEncoding(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, isHex(bytes[index + 1]), isHex(bytes[index + 2]) else { return true }
                index += 3
                continue
            }
            if !isRaw(byte) { return true }
            index += 1
        }
        return false
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }

    /// The target the URL names: its path (`/` when empty) and query, exactly as they are written.
    public static func expected(_ url: URL) -> String {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.absoluteString }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        return path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    /// The target haul's HTTP client (AsyncHTTPClient 1.37) puts in the request line for `url`.
    ///
    /// It takes the path only when Foundation can decode it: a path with an escape that is not
    /// UTF-8 (`/caf%E9.bin`) decodes to nothing, and the client would ask for `/` instead.
    public static func sent(_ url: URL) -> String {
        let path = url.path.isEmpty ? "/" : (URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? url.path)
        return path + (url.query.map { "?" + $0 } ?? "")
    }

    /// Whether the HTTP client puts exactly `expected(url)` in the request line; when it does not, a
    /// request for `url` goes out with a `placeholder(for:)` and the target is set by haul's loopback
    /// bridge (`/caf%E9.bin`, as curl and wget send it).
    public static func isExpressible(_ url: URL) -> Bool {
        sent(url) == expected(url)
    }

    /// A URL the HTTP client can express for a request to `url` whose request line is set by the
    /// bridge: plain `http` with the port written out (the bridge speaks TLS itself for `https`), the
    /// same host, the query as written, and the path with every `%` written `%25`.
    ///
    /// The path decodes to ASCII, so the client keeps it; and a server that ever saw it would take it
    /// for a literal name (`/caf%25E9.bin` is `caf%E9.bin`), never for the resource, nor for `/`.
    /// Nil when no such URL can be made.
    public static func placeholder(for url: URL) -> URL? {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true), let scheme = components.scheme?.lowercased() else { return nil }
        components.percentEncodedPath = components.percentEncodedPath.replacingOccurrences(of: "%", with: "%25")
        components.port = components.port ?? (scheme == "https" ? 443 : 80)
        components.scheme = "http"
        components.user = nil
        components.password = nil
        components.fragment = nil
        guard let placeholder = components.url, isExpressible(placeholder) else { return nil }
        return placeholder
    }

    /// The `Host` header of a request to `url`, as the HTTP client writes it: the host (an IPv6
    /// address in brackets) and the port when it is not the scheme's default.
    public static func authority(_ url: URL) -> String {
        let host = plainHost(url) ?? URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedHost ?? url.host ?? ""
        let standard = url.scheme?.lowercased() == "https" ? 443 : 80
        return url.port.map { $0 == standard ? host : "\(host):\($0)" } ?? host
    }

    /// The host when it is written as it reads (letters, digits, `-` and `.`, no escape in the
    /// authority): `percentEncodedHost` without parsing the URL again, which cost 1.5 % of a
    /// thousand small files' time (three parses a file). Nil: the full way decides.
    static func plainHost(_ url: URL) -> String? {
        guard let host = url.host, !host.isEmpty, host.utf8.allSatisfy({ byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."): true
            default: false
            }
        }) else { return nil }
        // `ex%41mple.test` reads as a plain host too, but is written escaped.
        let text = url.absoluteString.utf8
        guard let colon = text.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let authority = text[colon...].dropFirst(3).prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        return authority.contains(UInt8(ascii: "%")) ? nil : host
    }

    /// Why `url` cannot be requested exactly as written, or nil when it can (by the HTTP client
    /// itself, or through the bridge with a placeholder).
    public static func problem(_ url: URL) -> String? {
        guard !isExpressible(url), placeholder(for: url) == nil else { return nil }
        return "its target cannot be sent as written"
    }

    /// The bytes of the escaped character at `index` (a lead byte and as many continuation escapes
    /// as it announces), and where it ends; nil when no escape starts there.
    private static func escapedCharacter(_ bytes: [UInt8], at index: Int) -> (bytes: [UInt8], end: Int)? {
        guard index + 2 < bytes.count, bytes[index] == UInt8(ascii: "%"), let lead = hexByte(bytes[index + 1], bytes[index + 2]) else { return nil }
        let length = switch lead {
        case 0xC0...0xDF: 2
        case 0xE0...0xEF: 3
        case 0xF0...0xF7: 4
        default: 1
        }
        var sequence = [lead]
        var next = index + 3
        while sequence.count < length, next + 2 < bytes.count, bytes[next] == UInt8(ascii: "%"),
              let byte = hexByte(bytes[next + 1], bytes[next + 2]), byte & 0xC0 == 0x80 {
            sequence.append(byte)
            next += 3
        }
        return (sequence, next)
    }

    /// The byte `%HL` stands for; nil unless both are hex digits (no sign, unlike `UInt8(_:radix:)`).
    static func hexByte(_ high: UInt8, _ low: UInt8) -> UInt8? {
        guard let high = hexValue(high), let low = hexValue(low) else { return nil }
        return high << 4 | low
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The text `segment` stands for, its escapes decoded; an escape that starts no valid UTF-8
    /// character stays as written (`caf%E9.bin` stays so), so a name never holds an invalid one.
    public static func decode(_ segment: Substring) -> String {
        let bytes = Array(segment.utf8)
        var out = ""
        var index = 0
        while index < bytes.count {
            if let (sequence, end) = escapedCharacter(bytes, at: index) {
                if let text = String(validating: sequence, as: UTF8.self) {
                    out += text
                    index = end
                } else {
                    out += String(decoding: bytes[index..<index + 3], as: UTF8.self)
                    index += 3
                }
                continue
            }
            // A raw character of the segment: copy all of its bytes.
            var end = index + 1
            while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
            out += String(decoding: bytes[index..<end], as: UTF8.self)
            index = end
        }
        return out
    }
}
