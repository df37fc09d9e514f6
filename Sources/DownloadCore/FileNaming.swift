import Foundation

/// Safe local file names from what a server or a URL proposes.
public enum FileNaming {
    /// Longest name haul produces, in UTF-8 bytes: room is left under NAME_MAX (255) for `.part`
    /// and a `.N` suffix, so that every file haul writes fits.
    public static let maxNameBytes = 240

    /// A name that is safe to create in a directory: no `/` or `\`, no `.` or `..`, no control,
    /// zero-width or bidi characters, no leading or trailing spaces, no leading `-` or `.` (shown
    /// as `_-rf`, `_.bashrc`), at most `maxNameBytes` bytes. Nil when nothing usable is left.
    ///
    /// Invisible characters would let a server disguise a name (`invoice\u{202E}fdp.exe`) or make
    /// two names that look the same; a leading `-` turns the name into an option for the next
    /// command that is given it, and a leading `.` hides the file (or makes it a shell's dotfile).
    public static func sanitize(_ proposed: String) -> String? {
        isPlain(proposed) ? proposed : sanitizedInFull(proposed)
    }

    /// Whether `name` is one that `sanitize` keeps as it is, seen in one pass over its bytes: ASCII
    /// letters, digits and `._-+~=,@%`, not first `.` or `-`, and not too long (most names a URL
    /// gives; the whole way takes it apart into arrays and strings anew).
    static func isPlain(_ name: String) -> Bool {
        var count = 0
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "_"), UInt8(ascii: "+"), UInt8(ascii: "~"), UInt8(ascii: "="), UInt8(ascii: ","), UInt8(ascii: "@"),
                 UInt8(ascii: "%"):
                break
            case UInt8(ascii: "."), UInt8(ascii: "-"):
                if count == 0 { return false }
            default:
                return false
            }
            count += 1
        }
        return count > 0 && count <= maxNameBytes
    }

    /// `sanitize` the whole way, for any name.
    static func sanitizedInFull(_ proposed: String) -> String? {
        // Only the last path component counts: "../../etc/passwd" and "C:\x\y" name "passwd" and "y".
        let lastComponent = proposed.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var name = String(String.UnicodeScalarView(lastComponent.unicodeScalars.filter { !TerminalText.isControl($0) && !isInvisible($0) }))
        name = name.trimmingWhitespace(newlines: true)
        guard name != ".", name != "..", !name.isEmpty else { return nil }
        if name.hasPrefix("-") || name.hasPrefix(".") { name = "_" + name }
        name = truncate(name, toBytes: maxNameBytes)
        return name.isEmpty ? nil : name
    }

    /// The name for a URL: its last path segment as written, percent-decoded (an escape that is not
    /// UTF-8 stays as written) and made safe, else `index.html`.
    public static func name(for url: URL) -> String {
        // The URL's own path, as written (`URLComponents` would parse the URL anew: ten times the
        // time, for the same text).
        let path = url.path(percentEncoded: true)
        let bytes = path.utf8
        let slash = UInt8(ascii: "/")
        // The last segment that is not empty.
        guard let last = bytes.lastIndex(where: { $0 != slash }) else { return "index.html" }
        let start = bytes[..<last].lastIndex(of: slash).map(bytes.index(after:)) ?? bytes.startIndex
        return sanitize(RequestTarget.decode(path[start...last])) ?? "index.html"
    }

    /// `name` cut to at most `limit` UTF-8 bytes on a character boundary, keeping a short extension.
    public static func truncate(_ name: String, toBytes limit: Int) -> String {
        guard name.utf8.count > limit else { return name }
        var suffix = ""
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            let candidate = String(name[dot...])
            if candidate.utf8.count <= 16 { suffix = candidate }
        }
        var stem = ""
        let stemSource = suffix.isEmpty ? name : String(name.dropLast(suffix.count))
        for character in stemSource {
            if stem.utf8.count + character.utf8.count + suffix.utf8.count > limit { break }
            stem.append(character)
        }
        return stem + suffix
    }

    /// How many names a placement tries (`name`, `name.1` … `name.9999`) before it gives up.
    public static let placementAttempts = 10_000

    /// `name`, then `name.1`, `name.2` … : the candidates tried so that nothing is overwritten.
    public static func candidate(_ name: String, attempt: Int) -> String {
        attempt == 0 ? name : "\(name).\(attempt)"
    }

    /// The candidate of `name` that `fileName` is: 0 for `NAME`, 2 for `NAME.2`; nil for another
    /// name, or one past the names a placement tries.
    public static func attempt(ofName fileName: String, for name: String) -> Int? {
        if fileName == name { return 0 }
        let prefix = Array(name.utf8) + [UInt8(ascii: ".")]
        let bytes = Array(fileName.utf8)
        guard bytes.starts(with: prefix) else { return nil }
        let digits = bytes.dropFirst(prefix.count)
        guard (1...4).contains(digits.count), digits.first != UInt8(ascii: "0"),
              digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let attempt = Int(String(decoding: digits, as: UTF8.self)), attempt < placementAttempts else { return nil }
        return attempt
    }

    /// The candidate of `name` whose part file `partName` is: 0 for `NAME.part`, 2 for
    /// `NAME.2.part`; nil for another name's part file, or a shortened one that is not `NAME`'s.
    public static func attempt(ofPartName partName: String, for name: String) -> Int? {
        if partName == Self.partName(for: name) { return 0 }
        let stem = Array(partName.utf8.dropLast(".part".utf8.count))
        let prefix = Array(name.utf8) + [UInt8(ascii: ".")]
        guard partName.utf8.count > ".part".utf8.count, partName.hasSuffix(".part"), stem.starts(with: prefix) else { return nil }
        let digits = stem.dropFirst(prefix.count)
        guard (1...6).contains(digits.count), digits.first != UInt8(ascii: "0"),
              digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let attempt = Int(String(decoding: digits, as: UTF8.self)),
              Self.partName(for: candidate(name, attempt: attempt)) == partName else { return nil }
        return attempt
    }
}

/// Making text from servers and users safe for a terminal or a log.
public enum TerminalText {
    /// C0 controls, DEL, C1 controls, and the bidirectional overrides that can disguise a name.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// `text` with every control character (ESC of an escape sequence included) shown as `?`.
    public static func sanitize(_ text: String) -> String {
        // Most text has nothing to replace: returned as it is, without a copy.
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { isControl($0) ? "?" : $0 }))
    }
}

extension URL {
    /// The URL with any password replaced by `***`, for display and logs.
    public var redactingPassword: String {
        // Most URLs have none: said without taking the URL apart again (`URLComponents` parses it
        // anew, several thousand instructions, and a small file's URL is shown four times).
        guard password(percentEncoded: true) != nil,
              var components = URLComponents(url: self, resolvingAgainstBaseURL: false),
              components.password != nil
        else { return absoluteString }
        components.password = "***"
        return components.string ?? absoluteString
    }

    /// A key under which two spellings of one resource compare equal: scheme and host lower-cased,
    /// the default port and the fragment dropped.
    public var coalescingKey: String {
        guard var components = URLComponents(url: self, resolvingAgainstBaseURL: false) else {
            return absoluteString
        }
        components.scheme = components.scheme?.lowercased()
        components.host = components.host?.lowercased()
        if (components.scheme == "http" && components.port == 80) || (components.scheme == "https" && components.port == 443) {
            components.port = nil
        }
        components.fragment = nil
        // The path as written: decoded, one that is not UTF-8 (`/caf%E9.bin`) would read as empty.
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        return components.string ?? absoluteString
    }
}
