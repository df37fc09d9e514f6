import Foundation

/// A parsed `Content-Range` header of a 206 or 416 response.
public struct ContentRange: Sendable, Hashable {
    /// First and last byte of the body, inclusive; nil for the `bytes */total` form of a 416.
    public var range: ClosedRange<Int64>?
    /// The complete length, nil when the server sent `*`.
    public var total: Int64?

    public init(range: ClosedRange<Int64>?, total: Int64?) {
        self.range = range
        self.total = total
    }

    /// Parses `bytes 0-99/1000`, `bytes 0-99/*` and `bytes */1000`; nil for anything else.
    public init?(_ value: String) {
        let trimmed = value.trimmingWhitespace()
        guard trimmed.lowercased().hasPrefix("bytes") else { return nil }
        let rest = trimmed.dropFirst("bytes".count).trimmingWhitespace()
        let halves = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let totalText = halves[1].trimmingWhitespace()
        if totalText == "*" {
            total = nil
        } else {
            guard let value = Self.number(totalText) else { return nil }
            total = value
        }
        let rangeText = halves[0].trimmingWhitespace()
        if rangeText == "*" {
            guard total != nil else { return nil }
            range = nil
            return
        }
        let bounds = rangeText.split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Self.number(bounds[0]), let last = Self.number(bounds[1]),
              first <= last
        else { return nil }
        if let total, last >= total { return nil }
        range = first...last
    }

    private static func number(_ text: some StringProtocol) -> Int64? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }
}

/// `Retry-After`: delay seconds or an HTTP date.
public enum RetryAfter {
    /// Seconds to wait from `now`, never negative; nil when the value is neither form.
    public static func seconds(from value: String, now: Date) -> Double? {
        let trimmed = value.trimmingWhitespace()
        if let seconds = Int64(trimmed), seconds >= 0 {
            return Double(seconds)
        }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

/// HTTP dates (RFC 9110's IMF-fixdate, plus the two obsolete forms).
public enum HTTPDate {
    private static let formats = ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"]

    public static func parse(_ text: String) -> Date? {
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    /// Seconds since 1970 of an HTTP date: an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, what
    /// servers send) read in place, the obsolete forms through `parse`.
    public static func seconds(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { bytes -> Int64? in
            guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[25] == UInt8(ascii: " "),
                  bytes[26] == UInt8(ascii: "G"), bytes[27] == UInt8(ascii: "M"), bytes[28] == UInt8(ascii: "T") else { return nil }
            func number(_ from: Int, _ count: Int) -> Int64? {
                var value: Int64 = 0
                for index in from..<(from + count) {
                    let digit = bytes[index] &- UInt8(ascii: "0")
                    guard digit < 10 else { return nil }
                    value = value * 10 + Int64(digit)
                }
                return value
            }
            let month = String(decoding: bytes[8..<11], as: UTF8.self)
            guard let day = number(5, 2), let year = number(12, 4), let hour = number(17, 2), let minute = number(20, 2),
                  let second = number(23, 2), let monthIndex = months.firstIndex(of: month),
                  (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
            return daysSince1970(year: year, month: Int64(monthIndex) + 1, day: day) * 86_400 + hour * 3_600 + minute * 60 + second
        } ?? parse(text).map { Int64($0.timeIntervalSince1970.rounded(.down)) }
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`).
    private static func daysSince1970(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    public static func format(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}

/// The file name in a `Content-Disposition` header.
public enum ContentDisposition {
    /// `filename*` (RFC 5987/8187, UTF-8 or ISO-8859-1) wins over `filename`; the result is raw and
    /// still has to go through `FileNaming.sanitize`.
    public static func fileName(from value: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in parameters(of: value) {
            switch parameter.name {
            case "filename*": extended = decodeExtended(parameter.value)
            case "filename": plain = parameter.value
            default: continue
            }
        }
        return extended ?? plain
    }

    /// Splits `type; a=b; c="d;e"` into lower-cased names and unquoted values, respecting quotes.
    static func parameters(of value: String) -> [(name: String, value: String)] {
        var result: [(String, String)] = []
        var chars = Array(value)[...]
        // Skip the disposition type.
        while let first = chars.first, first != ";" { chars = chars.dropFirst() }
        while !chars.isEmpty {
            chars = chars.dropFirst()  // the ';'
            var name = ""
            while let first = chars.first, first != "=", first != ";" {
                name.append(first)
                chars = chars.dropFirst()
            }
            guard chars.first == "=" else { continue }
            chars = chars.dropFirst()
            while chars.first == " " { chars = chars.dropFirst() }
            var parsed = ""
            if chars.first == "\"" {
                chars = chars.dropFirst()
                while let first = chars.first, first != "\"" {
                    if first == "\\", chars.count > 1 {
                        chars = chars.dropFirst()
                    }
                    if let next = chars.first { parsed.append(next) }
                    chars = chars.dropFirst()
                }
                chars = chars.dropFirst()
                while let first = chars.first, first != ";" { chars = chars.dropFirst() }
            } else {
                while let first = chars.first, first != ";" {
                    parsed.append(first)
                    chars = chars.dropFirst()
                }
                parsed = parsed.trimmingWhitespace()
            }
            result.append((name.trimmingWhitespace().lowercased(), parsed))
        }
        return result
    }

    /// `UTF-8''na%C3%AFve.txt` → `naïve.txt`.
    static func decodeExtended(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        var bytes: [UInt8] = []
        var iterator = Array(parts[2].utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(), let value = RequestTarget.hexByte(high, low) else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        switch charset {
        case "utf-8": return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1": return String(bytes.map { Character(Unicode.Scalar($0)) })
        default: return nil
        }
    }
}
