/// Byte counts, speeds and durations as people read them.
public enum Format {
    private static let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]

    /// `0 B`, `999 B`, `1.0 KiB`, `12.3 MiB`, `512 GiB`: three significant digits at most.
    public static func bytes(_ count: Int64) -> String {
        if count < 1024 { return "\(max(0, count)) B" }
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        let text = value >= 100 ? String(Int(value.rounded(.down))) : decimal(value)
        return "\(text) \(units[unit])"
    }

    /// `1.2 MiB of 4.0 MiB`; in bytes when the two would read alike (`99999 B of 100000 B`: a
    /// tester's failed row said `body ended at 97.6 KiB of 97.6 KiB`).
    public static func bytesApart(_ count: Int64, _ total: Int64) -> String {
        let (a, b) = (bytes(count), bytes(total))
        return a == b && count != total ? "\(count) B of \(total) B" : "\(a) of \(b)"
    }

    /// `1.5 MiB/s`; `-` when nothing moves.
    public static func speed(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite, bytesPerSecond >= 1 else { return "-" }
        return bytes(Int64(bytesPerSecond)) + "/s"
    }

    /// `45s`, `3m07s`, `2h05m`, `3d04h`; `-` when unknown.
    public static func duration(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite, seconds >= 0 else { return "-" }
        let total = Int64(seconds.rounded(.up))
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m\(twoDigits(total % 60))s" }
        if total < 86400 { return "\(total / 3600)h\(twoDigits(total % 3600 / 60))m" }
        let days = total / 86400
        return days > 999 ? ">999d" : "\(days)d\(twoDigits(total % 86400 / 3600))h"
    }

    /// `42%`; `-` when the total is unknown.
    public static func percent(_ fraction: Double?) -> String {
        guard let fraction, fraction.isFinite else { return "-" }
        return "\(Int((min(1, max(0, fraction)) * 100).rounded(.down)))%"
    }

    private static func decimal(_ value: Double) -> String {
        // One decimal below 100, truncated rather than rounded so 1023.96 KiB never reads "1024.0".
        let tenths = Int64((value * 10).rounded(.down))
        return "\(tenths / 10).\(tenths % 10)"
    }

    private static func twoDigits(_ value: Int64) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }
}
