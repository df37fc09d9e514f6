import Foundation

/// Which end of a download a hook runs at: `--on-complete` or `--on-fail`.
public enum HookEvent: String, Sendable, Hashable, Codable, CaseIterable {
    case complete
    case fail

    /// The option and configuration key that names its program.
    public var option: String { "on-\(rawValue)" }

    /// `HAUL_STATE` for the hook: the state the download ended in.
    public var stateWord: String {
        switch self {
        case .complete: "completed"
        case .fail: "failed"
        }
    }
}

/// How a download's hook went, as far as the queue knows.
public enum HookStatus: Sendable, Hashable {
    /// Committed with the download's end, not yet known to have run: the hook is running, or its
    /// haul stopped before it ended, and the next haul that runs the queue runs it again.
    case pending
    /// The program exited with `code` (0: it ran) after `seconds`.
    case exited(code: Int32, seconds: Double)
    /// The program was ended by `signal` (not by haul's time limit) after `seconds`.
    case signalled(signal: Int32, seconds: Double)
    /// Still running at the time limit of `limit` seconds: its process group was killed.
    case timedOut(limit: Double)
    /// The program could not be started (gone since haul started, not executable …).
    case couldNotStart(reason: String)
}

/// A download's hook: which one, and how it went.
///
/// Stored with the download (the `hook` column), shown in its row and details, and sent in every
/// JSON shape of the download (`haul list --json`, `haul get --json`, the socket's events) as one
/// object: `{"event": "complete", "status": "failed", "exit": 3, "seconds": 0.1, "text": "hook failed (exit 3, 0.1 s)"}`.
public struct HookRun: Sendable, Hashable, Codable {
    public var event: HookEvent
    public var status: HookStatus

    public init(event: HookEvent, status: HookStatus) {
        self.event = event
        self.status = status
    }

    /// One word for the status: `pending`, `ran`, `failed`, `timed out`, `could not start`.
    public var word: String {
        switch status {
        case .pending: "pending"
        case .exited(0, _): "ran"
        case .exited, .signalled: "failed"
        case .timedOut: "timed out"
        case .couldNotStart: "could not start"
        }
    }

    /// The status in a few words: `ran (exit 0, 1.2 s)`, `failed (exit 3, 0.1 s)`, `timed out
    /// after 10 min, killed`, `could not start: …`, `pending`.
    public var summary: String {
        switch status {
        case .pending: "pending"
        case .exited(let code, let seconds): "\(word) (exit \(code), \(Self.seconds(seconds)))"
        case .signalled(let signal, let seconds): "failed (killed by signal \(signal), \(Self.seconds(seconds)))"
        case .timedOut(let limit): "timed out after \(Self.limit(limit)), killed"
        case .couldNotStart(let reason): "could not start: \(reason)"
        }
    }

    /// The line the log and `haul get` show: `hook ran (exit 0, 1.2 s)`.
    public var text: String { "hook \(summary)" }

    /// The few words a row has room for: `hook ran`, `hook failed (exit 3)`, `hook failed (signal
    /// 9)`, `hook timed out`, `hook could not start`, `hook pending`; the details say the rest.
    public var short: String {
        switch status {
        case .exited(let code, _) where code != 0: "hook failed (exit \(code))"
        case .signalled(let signal, _): "hook failed (signal \(signal))"
        default: "hook \(word)"
        }
    }

    /// Whether the hook ran and exited 0.
    public var succeeded: Bool {
        if case .exited(0, _) = status { return true }
        return false
    }

    /// Whether it is still to run (or running).
    public var isPending: Bool { status == .pending }

    /// `1.2 s`, `45 s`.
    static func seconds(_ value: Double) -> String {
        value < 10 ? String(format: "%.1f s", value) : "\(Int(value.rounded())) s"
    }

    /// A time limit as given: `10 min`, `30 s`, `1 h`, `90 s`.
    public static func limit(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded())
        if whole >= 3600, whole % 3600 == 0 { return "\(whole / 3600) h" }
        if whole >= 60, whole % 60 == 0 { return "\(whole / 60) min" }
        return "\(whole) s"
    }

    // MARK: Stored form

    /// A compact line for the store: `complete pending`, `fail exit 3 0.125`, `complete signal 9 0.5`,
    /// `complete timeout 600`, `fail nostart REASON`.
    public var encoded: String {
        let status: String
        switch self.status {
        case .pending: status = "pending"
        case .exited(let code, let seconds): status = "exit \(code) \(seconds)"
        case .signalled(let signal, let seconds): status = "signal \(signal) \(seconds)"
        case .timedOut(let limit): status = "timeout \(limit)"
        case .couldNotStart(let reason): status = "nostart \(reason)"
        }
        return "\(event.rawValue) \(status)"
    }

    /// The value `encoded` wrote; nil for anything else (the row then shows no hook).
    public init?(encoded: String) {
        let words = encoded.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard words.count >= 2, let event = HookEvent(rawValue: words[0]) else { return nil }
        let rest = words.count > 2 ? words[2] : ""
        let numbers = rest.split(separator: " ").map(String.init)
        switch words[1] {
        case "pending":
            self.init(event: event, status: .pending)
        case "exit", "signal":
            guard numbers.count == 2, let number = Int32(numbers[0]), let seconds = Double(numbers[1]) else { return nil }
            self.init(event: event, status: words[1] == "exit" ? .exited(code: number, seconds: seconds) : .signalled(signal: number, seconds: seconds))
        case "timeout":
            guard let limit = Double(rest) else { return nil }
            self.init(event: event, status: .timedOut(limit: limit))
        case "nostart":
            self.init(event: event, status: .couldNotStart(reason: rest))
        default:
            return nil
        }
    }

    // MARK: JSON

    private enum CodingKeys: String, CodingKey {
        case event, status, exit, signal, seconds, limit, reason, text
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(event, forKey: .event)
        try container.encode(word, forKey: .status)
        switch status {
        case .pending:
            break
        case .exited(let code, let seconds):
            try container.encode(code, forKey: .exit)
            try container.encode(seconds, forKey: .seconds)
        case .signalled(let signal, let seconds):
            try container.encode(signal, forKey: .signal)
            try container.encode(seconds, forKey: .seconds)
        case .timedOut(let limit):
            try container.encode(limit, forKey: .limit)
        case .couldNotStart(let reason):
            try container.encode(reason, forKey: .reason)
        }
        try container.encode(text, forKey: .text)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        event = try container.decode(HookEvent.self, forKey: .event)
        let word = try container.decode(String.self, forKey: .status)
        let seconds = try container.decodeIfPresent(Double.self, forKey: .seconds) ?? 0
        switch word {
        case "pending":
            status = .pending
        case "ran", "failed":
            if let signal = try container.decodeIfPresent(Int32.self, forKey: .signal) {
                status = .signalled(signal: signal, seconds: seconds)
            } else {
                status = .exited(code: try container.decode(Int32.self, forKey: .exit), seconds: seconds)
            }
        case "timed out":
            status = .timedOut(limit: try container.decode(Double.self, forKey: .limit))
        case "could not start":
            status = .couldNotStart(reason: try container.decode(String.self, forKey: .reason))
        default:
            throw DecodingError.dataCorruptedError(forKey: .status, in: container, debugDescription: "unknown hook status '\(word)'")
        }
    }
}
