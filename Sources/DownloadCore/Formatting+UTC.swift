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
        return pad(Int(parts.tm_year) + 1900, 4) + "-" + pad(Int(parts.tm_mon) + 1, 2) + "-" + pad(Int(parts.tm_mday), 2) + separator
            + pad(Int(parts.tm_hour), 2) + ":" + pad(Int(parts.tm_min), 2) + ":" + pad(Int(parts.tm_sec), 2) + "." + pad(milliseconds, 3)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
