import Foundation

/// What a download asks of its server beyond the URL: extra request headers and the digest its
/// bytes must have. Stored with the download, so every attempt (a resume after a restart too)
/// sends the same headers and a completion is always checked.
public struct RequestOptions: Sendable, Hashable, Codable {
    public var headers: [HeaderField]
    public var checksum: Checksum?
    /// At most this many connections fetch parts of the file at once (`--connections`); 1 fetches
    /// it front to back.
    public var connections: Int

    public init(headers: [HeaderField] = [], checksum: Checksum? = nil, connections: Int = 1) {
        self.headers = headers
        self.checksum = checksum
        self.connections = connections
    }
}

/// One `Name: value` request header given by the user.
public struct HeaderField: Sendable, Hashable, Codable, CustomStringConvertible {
    public var name: String
    public var value: String

    public struct Invalid: Error, Hashable, CustomStringConvertible {
        public var description: String
    }

    /// Headers haul sets itself: resuming depends on them, so a user value would break the creed.
    public static let reserved: Set<String> = [
        "range", "if-range", "accept-encoding", "host", "content-length", "transfer-encoding", "connection",
    ]

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// `Name: value`, as curl's `-H` takes it; refused with a one-line reason when it has no colon,
    /// a name that is not an HTTP token, a control character (CR/LF would smuggle a header), or
    /// names a header that resuming depends on.
    public static func parse(_ text: String) throws(Invalid) -> HeaderField {
        if text.unicodeScalars.contains(where: { TerminalText.isControl($0) && $0 != "\t" }) {
            throw Invalid(description: "header '\(TerminalText.sanitize(text))' contains control characters (CR/LF not allowed)")
        }
        guard let colon = text.firstIndex(of: ":") else {
            throw Invalid(description: "header '\(text)' is not 'Name: value'")
        }
        let name = String(text[..<colon])
        let value = text[text.index(after: colon)...].trimmingWhitespace()
        guard !name.isEmpty, name.unicodeScalars.allSatisfy(isTokenCharacter) else {
            throw Invalid(description: "header name '\(name)' is not a valid HTTP field name")
        }
        guard !reserved.contains(name.lowercased()) else {
            throw Invalid(description: "header '\(name)' is set by haul itself (resuming depends on it)")
        }
        return HeaderField(name: name, value: value)
    }

    public var description: String { "\(name): \(value)" }

    /// RFC 9110 `tchar`.
    static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9": true
        case "!", "#", "$", "%", "&", "'", "*", "+", "-", ".", "^", "_", "`", "|", "~": true
        default: false
        }
    }

    /// `base` with each header of `overrides` replacing the ones of the same name (case-insensitive).
    public static func merged(_ base: [HeaderField], _ overrides: [HeaderField]) -> [HeaderField] {
        let replaced = Set(overrides.map { $0.name.lowercased() })
        return base.filter { !replaced.contains($0.name.lowercased()) } + overrides
    }
}

/// The digest a finished file must have: `sha-256=HEX` or `sha-512=HEX`.
public struct Checksum: Sendable, Hashable, Codable, CustomStringConvertible {
    public enum Algorithm: String, Sendable, Hashable, CaseIterable, Codable {
        case sha256 = "sha-256"
        case sha512 = "sha-512"

        /// Hex digits of a digest.
        public var hexLength: Int {
            switch self {
            case .sha256: 64
            case .sha512: 128
            }
        }
    }

    public struct Invalid: Error, Hashable, CustomStringConvertible {
        public var description: String
    }

    public var algorithm: Algorithm
    /// Lower-case hex.
    public var hex: String

    public init(algorithm: Algorithm, hex: String) {
        self.algorithm = algorithm
        self.hex = hex.lowercased()
    }

    /// `sha-256=HEX` (also `sha256=`, and `sha-512`); the hex is checked for length and digits.
    public static func parse(_ text: String) throws(Invalid) -> Checksum {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2 else {
            throw Invalid(description: "checksum '\(TerminalText.sanitize(text))' is not ALGORITHM=HEX (for example sha-256=…)")
        }
        let name = parts[0].lowercased().replacingOccurrences(of: "-", with: "")
        guard let algorithm = Algorithm.allCases.first(where: { $0.rawValue.replacingOccurrences(of: "-", with: "") == name }) else {
            throw Invalid(description: "checksum algorithm '\(TerminalText.sanitize(parts[0]))' is not supported (use sha-256 or sha-512)")
        }
        let hex = parts[1].lowercased()
        guard hex.count == algorithm.hexLength, hex.allSatisfy(\.isHexDigit) else {
            throw Invalid(description: "\(algorithm.rawValue) checksum must be \(algorithm.hexLength) hex digits")
        }
        return Checksum(algorithm: algorithm, hex: hex)
    }

    public var description: String { "\(algorithm.rawValue)=\(hex)" }
}

/// Sizes and rates as people type them: `500K`, `2M`, `1.5G`, `100000` (bytes; K = 1024).
public enum ByteCount {
    public struct Invalid: Error, Hashable, CustomStringConvertible {
        public var description: String
    }

    public static func parse(_ text: String, what: String) throws(Invalid) -> Int64 {
        var digits = text.trimmingWhitespace()
        if digits.hasSuffix("/s") { digits.removeLast(2) }
        if digits.uppercased().hasSuffix("B") { digits.removeLast() }
        // 2M, 2MB and 2MiB all mean 2 × 1024 × 1024.
        if digits.hasSuffix("i") { digits.removeLast() }
        var multiplier: Double = 1
        if let last = digits.last?.uppercased(), let power = ["K": 1, "M": 2, "G": 3, "T": 4][last] {
            multiplier = pow(1024, Double(power))
            digits.removeLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let number = Double(digits), number.isFinite, number > 0 else {
            throw Invalid(description: "\(what) '\(TerminalText.sanitize(text))' is not a size like 500K or 2M")
        }
        let value = number * multiplier
        guard value >= 1, value <= Double(QueueLimits.maximumRate) else {
            throw Invalid(description: "\(what) '\(TerminalText.sanitize(text))' is out of range")
        }
        return Int64(value)
    }
}
