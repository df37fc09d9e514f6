import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Format {
    /// `2026-11-24 10:27:16.871` in UTC, to the nearest millisecond, with `separator` between the
    /// date and the time: what the store writes (as GRDB does) and the log's stamp (with `T`).
    ///
    /// Computed, not formatted through Foundation's styles: those load ICU's calendar data (about
    /// 5 MiB of a small process's memory) and cost tens of microseconds a call.
    public static func utc(_ date: Date, separator: String = " ") -> String {
        let total = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let (seconds, remainder) = total.quotientAndRemainder(dividingBy: 1000)
        let milliseconds = remainder < 0 ? Int(remainder + 1000) : Int(remainder)
        var time = time_t(remainder < 0 ? seconds - 1 : seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let year = Int(parts.tm_year) + 1900
        guard (0...9999).contains(year) else {
            return pad(year, 4) + "-" + pad(Int(parts.tm_mon) + 1, 2) + "-" + pad(Int(parts.tm_mday), 2) + separator
                + pad(Int(parts.tm_hour), 2) + ":" + pad(Int(parts.tm_min), 2) + ":" + pad(Int(parts.tm_sec), 2) + "." + pad(milliseconds, 3)
        }
        // Digit by digit into the string's own storage: a store commit writes a few dates a row and
        // the log one a line (twenty a file on a thousand small files), and fourteen small strings
        // joined cost ten times as much as this.
        let mark = separator.utf8.count == 1 ? separator.utf8.first : nil
        let length = mark == nil ? 22 + separator.utf8.count : 23
        return String(unsafeUninitializedCapacity: length) { text in
            var at = 0
            func put(_ value: Int, _ width: Int, then next: UInt8? = nil) {
                var rest = value
                for index in stride(from: at + width - 1, through: at, by: -1) {
                    text[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                at += width
                if let next {
                    text[at] = next
                    at += 1
                }
            }
            put(year, 4, then: UInt8(ascii: "-"))
            put(Int(parts.tm_mon) + 1, 2, then: UInt8(ascii: "-"))
            put(Int(parts.tm_mday), 2, then: mark)
            if mark == nil {
                for byte in separator.utf8 {
                    text[at] = byte
                    at += 1
                }
            }
            put(Int(parts.tm_hour), 2, then: UInt8(ascii: ":"))
            put(Int(parts.tm_min), 2, then: UInt8(ascii: ":"))
            put(Int(parts.tm_sec), 2, then: UInt8(ascii: "."))
            put(milliseconds, 3)
            return at
        }
    }

    /// The date `utc(_:separator:)` wrote (a space or `T` between date and time, up to nine digits
    /// of fraction, or none); nil for any other text, which the caller reads another way.
    public static func utcDate(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 19, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
              bytes[10] == UInt8(ascii: " ") || bytes[10] == UInt8(ascii: "T"),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                let digit = Int(bytes[index]) - Int(UInt8(ascii: "0"))
                guard (0...9).contains(digit) else { return nil }
                value = value * 10 + digit
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 else { return nil }
        var fraction = 0.0
        if bytes.count > 19 {
            let digits = bytes.count - 20
            guard bytes[19] == UInt8(ascii: "."), (1...9).contains(digits), let value = number(20..<bytes.count) else { return nil }
            fraction = Double(value) / pow(10, Double(digits))
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let seconds = timegm(&parts)
        // timegm normalizes: 31 February comes back as a March day, which is not what was written.
        guard parts.tm_mday == Int32(day), parts.tm_mon == Int32(month - 1) else { return nil }
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
