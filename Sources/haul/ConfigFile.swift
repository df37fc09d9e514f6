import DownloadCore
import Foundation

/// What a run uses: the defaults, then the configuration file, then the flags.
struct Settings: Sendable, Equatable {
    var state: String?
    var directory: String?
    /// nil: what `<` and `>` saved in the queue, else 3.
    var maxActive: Int?
    var maxTries = 20
    var connectTimeout = 10
    var stallTimeout = 30
    var limitRate: Int64?
    /// Each added download's own limit (`--limit-rate-each`); nil for none.
    var limitRateEach: Int64?
    /// Connections per file, and the most to one host (`--connections`).
    var connections = 1
    var headers: [HeaderField] = []
    var userAgent: String?
    var caCertificate: String?
    var fsync = true
    var allowDowngrade = false
    var refresh: Double = 10
    var ascii = false
    /// Clicks select rows and the wheel scrolls (`--no-mouse` leaves the mouse to the terminal).
    var mouse = true
    /// From the environment (`http_proxy` …), like curl.
    var proxies = ProxySettings()
    /// Free space to keep where downloads go (`--min-free`).
    var minFree: SpaceFloor = .automatic
    /// Purge paused downloads' partial data when free space stays under the floor.
    var purgeWhenLow = false
    /// The hooks' programs (absolute once checked by `SessionOptions.apply`) and their time limit in seconds.
    var onComplete: String?
    var onFail: String?
    var hookTimeout = 600

    static let defaultMaxActive = 3
}

/// `$XDG_CONFIG_HOME/haul/config` (else `~/.config/haul/config`): `key = value` lines, `#` comments.
///
/// Keys are the long option names: `dir`, `state`, `max-active`, `max-tries`, `connect-timeout`,
/// `stall-timeout`, `limit-rate`, `limit-rate-each`, `connections`, `header` (repeatable), `user-agent`, `ca-certificate`, `fsync`,
/// `allow-downgrade`, `refresh`, `ascii`, `mouse`, `min-free`, `purge-when-low`, `on-complete`, `on-fail`, `hook-timeout`. Paths may start with `~/`; other relative paths are taken from the home
/// directory. An unknown key or a bad value is an error naming the file and line.
enum ConfigFile {
    static let keys = [
        "dir", "state", "max-active", "max-tries", "connect-timeout", "stall-timeout", "limit-rate", "limit-rate-each",
        "connections", "header", "user-agent", "ca-certificate", "fsync", "allow-downgrade", "refresh", "ascii",
        "mouse", "min-free", "purge-when-low", "on-complete", "on-fail", "hook-timeout",
    ]

    /// The file to read: `--config`, else `$HAUL_CONFIG`, else the XDG location; `explicit` when
    /// the person named it (then it must exist).
    static func location(option: String?, environment: [String: String]) -> (path: String, explicit: Bool)? {
        if let option, !option.isEmpty { return (option, true) }
        if let named = environment["HAUL_CONFIG"], !named.isEmpty { return (named, true) }
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") { return (xdg + "/haul/config", false) }
        guard let home = environment["HOME"], !home.isEmpty else { return nil }
        return (home + "/.config/haul/config", false)
    }

    /// Whether `path` is a file (not a directory) this process may read.
    static func isReadableFile(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) != S_IFDIR else { return false }
        return access(path, R_OK) == 0
    }

    /// The settings `text` makes of `base`; `name` is the file's name for errors.
    static func apply(_ text: String, name: String, to base: Settings, home: String?) throws(UsageError) -> Settings {
        var settings = base
        for (index, rawLine) in LocalPath.lines(of: text).enumerated() {
            let line = rawLine.trimmingWhitespace()
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let place = "\(TerminalText.sanitize(name)):\(index + 1)"
            guard let equals = line.firstIndex(of: "=") else {
                throw UsageError(message: "\(place): expected 'key = value'")
            }
            let key = line[..<equals].trimmingWhitespace().lowercased()
            guard !key.isEmpty else { throw UsageError(message: "\(place): expected 'key = value' (no key before '=')") }
            let value = line[line.index(after: equals)...].trimmingWhitespace()
            do throws(UsageError) {
                try set(key, value, in: &settings, home: home)
            } catch {
                throw UsageError(message: "\(place): \(error.message)")
            }
        }
        return settings
    }

    private static func set(_ key: String, _ value: String, in settings: inout Settings, home: String?) throws(UsageError) {
        switch key {
        case "dir": settings.directory = try path(value, home: home)
        case "state": settings.state = try path(value, home: home)
        case "max-active": settings.maxActive = try OptionCheck.integer(value, key, in: OptionCheck.maxActive)
        case "max-tries": settings.maxTries = try OptionCheck.integer(value, key, in: OptionCheck.maxTries)
        case "connect-timeout": settings.connectTimeout = try OptionCheck.integer(value, key, in: OptionCheck.seconds)
        case "stall-timeout": settings.stallTimeout = try OptionCheck.integer(value, key, in: OptionCheck.seconds)
        case "limit-rate": settings.limitRate = try OptionCheck.rate(value, key)
        case "limit-rate-each": settings.limitRateEach = try OptionCheck.rateOrNone(value, key)
        case "connections": settings.connections = try OptionCheck.integer(value, key, in: OptionCheck.connections)
        case "header": settings.headers = HeaderField.merged(settings.headers, [try OptionCheck.header(value)])
        case "user-agent": settings.userAgent = try OptionCheck.userAgent(value)
        case "ca-certificate": settings.caCertificate = try path(value, home: home)
        case "fsync": settings.fsync = try boolean(value, key)
        case "allow-downgrade": settings.allowDowngrade = try boolean(value, key)
        case "refresh": settings.refresh = try OptionCheck.refresh(value, key)
        case "ascii": settings.ascii = try boolean(value, key)
        case "mouse": settings.mouse = try boolean(value, key)
        case "min-free": settings.minFree = try OptionCheck.floor(value, key)
        case "purge-when-low": settings.purgeWhenLow = try boolean(value, key)
        // A program is checked by the commands that run the queue (`haul list` never runs one).
        case "on-complete": settings.onComplete = try program(value, home: home)
        case "on-fail": settings.onFail = try program(value, home: home)
        case "hook-timeout": settings.hookTimeout = try OptionCheck.duration(value, key)
        case "checksum", "output":
            throw UsageError(message: "'\(key)' belongs to one download: give it as --\(key) on the command line")
        default:
            throw UsageError(message: "unknown key '\(TerminalText.sanitize(key))' (known: \(keys.joined(separator: ", ")))")
        }
    }

    private static func boolean(_ value: String, _ key: String) throws(UsageError) -> Bool {
        switch value.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw UsageError(message: "\(key) must be true or false, not '\(TerminalText.sanitize(value))'")
        }
    }

    /// A hook's program: a name without a slash is looked up in PATH later; a path is taken as
    /// `path` takes it.
    private static func program(_ value: String, home: String?) throws(UsageError) -> String {
        guard value.contains("/") || value.hasPrefix("~") else {
            guard !value.isEmpty else { throw UsageError(message: "empty program") }
            return value
        }
        return try path(value, home: home)
    }

    private static func path(_ value: String, home: String?) throws(UsageError) -> String {
        guard !value.isEmpty else { throw UsageError(message: "empty path") }
        if value == "~" || value.hasPrefix("~/") {
            guard let home else { throw UsageError(message: "~ needs HOME") }
            return home + value.dropFirst()
        }
        if value.hasPrefix("/") { return value }
        guard let home else { throw UsageError(message: "relative path '\(value)' needs HOME") }
        return (home as NSString).appendingPathComponent(value)
    }
}

/// The checks every option goes through, from a flag or from the configuration file.
enum OptionCheck {
    static let maxActiveLimit = QueueLimits.maxActive.upperBound
    static let maxActive = QueueLimits.maxActive
    static let maxTries = 1...10_000
    static let connections = QueueLimits.connections
    /// Timeouts, in seconds.
    static let seconds = 1...3600

    static func integer(_ text: String, _ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int {
        let trimmed = text.trimmingWhitespace()
        guard let value = Int(trimmed) else {
            // Digits too many for a number: out of range, not a word.
            let digits = trimmed.hasPrefix("-") ? trimmed.dropFirst() : Substring(trimmed)
            if !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }) {
                throw UsageError(message: "\(name) must be between \(range.lowerBound) and \(range.upperBound)")
            }
            throw UsageError(message: "\(name) must be a whole number, not '\(TerminalText.sanitize(text))'")
        }
        return try integer(value, name, in: range)
    }

    static func integer(_ value: Int, _ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard range.contains(value) else {
            throw UsageError(message: "\(name) must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return value
    }

    static func rate(_ text: String, _ name: String) throws(UsageError) -> Int64 {
        // Not "no limit" here: without a rate, the limit the queue keeps holds; it is lifted where
        // it was set.
        if text.trimmingWhitespace() == "0" {
            throw UsageError(message: "\(name) must be at least 1K (a limit the queue keeps is lifted with 0 at the UI's L key, or PUT /v1/limit)")
        }
        let value = try byteCount(text, name)
        // Below 1 KiB/s a single network read would take over a minute to pay for.
        guard value >= QueueLimits.minimumRate else { throw UsageError(message: "\(name) must be at least 1K") }
        return value
    }

    /// A rate as `rate` takes it, or none for `0` (`--limit-rate-each`).
    static func rateOrNone(_ text: String, _ name: String) throws(UsageError) -> Int64? {
        if text.trimmingWhitespace() == "0" { return nil }
        let value = try byteCount(text, name)
        guard value >= QueueLimits.minimumRate else { throw UsageError(message: "\(name) must be at least 1K, or 0 for none") }
        return value
    }

    private static func byteCount(_ text: String, _ name: String) throws(UsageError) -> Int64 {
        do {
            return try ByteCount.parse(text, what: name)
        } catch {
            throw UsageError(message: error.description)
        }
    }

    static func floor(_ text: String, _ name: String) throws(UsageError) -> SpaceFloor {
        do {
            return try SpaceFloor.parse(text, what: name)
        } catch {
            throw UsageError(message: error.description)
        }
    }

    static func header(_ text: String) throws(UsageError) -> HeaderField {
        do {
            return try HeaderField.parse(text)
        } catch {
            throw UsageError(message: error.description)
        }
    }

    static func userAgent(_ text: String) throws(UsageError) -> String {
        guard !text.unicodeScalars.contains(where: TerminalText.isControl) else {
            throw UsageError(message: "user-agent contains control characters")
        }
        return text
    }

    /// Redraws a second, 1 to 10; `name` as the person wrote it (`refresh` in the config).
    static func refresh(_ text: String, _ name: String) throws(UsageError) -> Double {
        guard let value = Double(text.trimmingWhitespace()), value.isFinite else {
            throw UsageError(message: "\(name) must be a number, not '\(TerminalText.sanitize(text))'")
        }
        guard value >= 1, value <= 10 else { throw UsageError(message: "\(name) must be between 1 and 10") }
        return value
    }

    /// Hook time limits, in seconds: a second to a day.
    static let hookTimeout = 1...86_400

    /// `30s`, `10m`, `1h` or plain seconds, in seconds.
    static func duration(_ text: String, _ name: String) throws(UsageError) -> Int {
        let trimmed = text.trimmingWhitespace().lowercased()
        let units: [(suffix: String, seconds: Int)] = [("min", 60), ("s", 1), ("m", 60), ("h", 3600)]
        var digits = trimmed
        var unit = 1
        if let match = units.first(where: { trimmed.hasSuffix($0.suffix) }) {
            digits = String(trimmed.dropLast(match.suffix.count))
            unit = match.seconds
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let value = Int(digits) else {
            throw UsageError(message: "\(name) must be a duration like 30s, 10m, 1h or a number of seconds, not '\(TerminalText.sanitize(text))'")
        }
        let (seconds, overflow) = value.multipliedReportingOverflow(by: unit)
        guard !overflow, hookTimeout.contains(seconds) else {
            throw UsageError(message: "\(name) must be between 1 second and 24 hours")
        }
        return seconds
    }

    /// The absolute path of a hook's program: one given with a slash, taken from `working`; a
    /// bare name, looked up in `path` as a shell would. It must be an executable file: a hook
    /// that cannot run is said at the start, not after a download of hours.
    static func program(_ text: String, _ name: String, in working: String, path: String?) throws(UsageError) -> String {
        let shown = TerminalText.sanitize(text)
        // No shell runs it: `notify-send done` is a program of that name, which nobody has.
        let noShell = text.contains(where: \.isWhitespace) ? " (a hook is one program, run without a shell and without arguments: put the command in a script)" : ""
        guard !text.isEmpty else { throw UsageError(message: "\(name) needs a program") }
        if text.contains("/") {
            let absolute = LocalPath.absolute(text, in: working)
            if let problem = executableProblem(absolute) { throw UsageError(message: "\(name): \(shown) \(problem)\(noShell)") }
            return absolute
        }
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
            // An empty entry is the working directory, as for a shell.
            let candidate = LocalPath.absolute((directory.isEmpty ? "." : String(directory)) + "/" + text, in: working)
            if executableProblem(candidate) == nil { return candidate }
        }
        throw UsageError(message: "\(name): no program '\(shown)' in PATH\(noShell)")
    }

    /// Why `path` cannot be run as a program; nil when it can.
    private static func executableProblem(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return "does not exist" }
        if (info.st_mode & S_IFMT) == S_IFDIR { return "is a directory" }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return "is not a regular file" }
        guard access(path, X_OK) == 0 else { return "is not executable" }
        return nil
    }

    static func checksum(_ text: String) throws(UsageError) -> Checksum {
        do {
            return try Checksum.parse(text)
        } catch {
            throw UsageError(message: error.description)
        }
    }
}
