import Foundation

/// One download as `haul list --json`, `haul get --json` (each line, with its `event`) and the
/// control socket's `GET /v1/downloads` print it.
///
/// One shape and one encoder for all three, so a script reads the same object whichever way it
/// asks. Keys are written sorted and nulls written out, as `haul list --json` always did.
public struct QueueListing: Sendable, Hashable, Encodable {
    public var id: Int64
    public var state: String
    public var bytes: Int64
    public var total: Int64?
    public var resumedFrom: Int64?
    public var resumes: Int
    public var restarts: Int
    /// Why the last restart from zero happened; null when it never restarted.
    public var restartReason: String?
    public var path: String
    public var url: String
    public var error: String?
    /// What a `waiting` download waits for (`Waiting`); null in the other states.
    public var waitingFor: Waiting?
    public var checksum: String?
    /// Names only: values may be credentials.
    public var headerNames: [String]
    /// Smoothed bytes a second, for a live queue (the socket); absent from a stored one (`haul list`).
    public var speed: Int64?
    /// The hook of the download's ending (`--on-complete`, `--on-fail`); null when none ran.
    public var hook: HookRun?
    /// The download's own speed limit in bytes a second (`--limit-rate-each`); null for none.
    public var limit: Int64?

    /// What a `waiting` download waits for, in `waiting_for`.
    public enum Waiting: String, Sendable, Hashable, Encodable {
        /// Its retry's time, which has not come.
        case retry = "retry"
        /// Its retry's time came: it waits for a free slot (the row's `retry due: waits for a free slot`).
        case retryDue = "retry due"
        /// Room on its file system.
        case diskSpace = "disk space"

        /// What `state` waits for at `now`; nil when it does not wait.
        public init?(_ state: DownloadState, at now: Date) {
            switch state {
            case .waiting: self = state.isRetryDue(at: now) ? .retryDue : .retry
            case .waitingForSpace: self = .diskSpace
            case .queued, .downloading, .paused, .completed, .failed, .cancelled: return nil
            }
        }
    }

    private enum CodingKeys: String, CodingKey {
        case id, state, bytes, total, resumes, restarts, path, url, error, checksum, speed, hook, limit
        case resumedFrom = "resumed_from"
        case restartReason = "restart_reason"
        case waitingFor = "waiting_for"
        case headerNames = "header_names"
    }

    /// The object for `download` at `now`; `live` adds its speed.
    public static func object(for download: Download, live: Bool = false, now: Date = Date()) -> QueueListing {
        QueueListing(
            id: download.id.rawValue,
            state: stateWord(download),
            bytes: download.bytesOnDisk,
            total: download.totalBytes,
            resumedFrom: download.resumeOffset,
            resumes: download.resumeCount,
            restarts: download.restartCount,
            restartReason: download.restartReason,
            path: path(download),
            url: download.url.redactingPassword,
            error: error(download),
            waitingFor: Waiting(download.state, at: now),
            checksum: download.options.checksum?.description,
            headerNames: download.options.headers.map(\.name),
            speed: live ? Int64(download.bytesPerSecond.rounded()) : nil,
            hook: download.hook,
            limit: download.limit
        )
    }

    /// A JSON array of `objects`, one line.
    public static func json(_ objects: [QueueListing]) -> Data {
        (try? makeEncoder().encode(objects)) ?? Data("[]".utf8)
    }

    /// One line of `haul get --json`: `event` (`state`, `progress`, `resumed`, `restarted`, `hook`)
    /// and the download's object, the same keys and values as `haul list --json` gives it.
    public static func eventLine(_ event: String, _ download: Download, now: Date = Date()) -> Data {
        (try? makeEncoder().encode(Event(event: event, download: object(for: download, live: true, now: now)))) ?? Data("{}".utf8)
    }

    /// A line of `haul get --json` about no one download's state (`note`, `unsaved`), through the
    /// same encoder: `{"event": EVENT, KEY: VALUE, …}` with `id` a number.
    public static func eventLine(_ event: String, id: DownloadID? = nil, _ fields: [String: String]) -> Data {
        (try? makeEncoder().encode(Notice(event: event, id: id?.rawValue, fields: fields))) ?? Data("{}".utf8)
    }

    /// Sorted keys, slashes escaped: byte for byte what JSONSerialization wrote for `haul list --json`.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(state, forKey: .state)
        try container.encode(bytes, forKey: .bytes)
        // Written as null, never left out: the list's objects always had every key.
        try container.encode(total, forKey: .total)
        try container.encode(resumedFrom, forKey: .resumedFrom)
        try container.encode(resumes, forKey: .resumes)
        try container.encode(restarts, forKey: .restarts)
        try container.encode(restartReason, forKey: .restartReason)
        try container.encode(path, forKey: .path)
        try container.encode(url, forKey: .url)
        try container.encode(error, forKey: .error)
        try container.encode(waitingFor, forKey: .waitingFor)
        try container.encode(checksum, forKey: .checksum)
        try container.encode(headerNames, forKey: .headerNames)
        try container.encodeIfPresent(speed, forKey: .speed)
        try container.encode(hook, forKey: .hook)
        try container.encode(limit, forKey: .limit)
    }

    /// The finished file, else the part file the bytes are in.
    /// The state's word; `downloading` for a completed row whose file was not placed yet (a commit
    /// saves that row before the move, and a kill -9 can end haul between them): as a runner shows
    /// it, until its file has its name (a tester's `haul list` after a kill said `completed` of part
    /// files, some moved away already).
    public static func stateWord(_ download: Download) -> String {
        download.state == .completed && download.completedPaths.isEmpty ? DownloadState.downloading.word : download.state.word
    }

    public static func path(_ download: Download) -> String {
        download.completedPath ?? download.partPath
    }

    /// `haul list`'s line under a download: what went wrong (`error: …`), why it stopped with the
    /// haul that ran it (`paused: …`: nothing went wrong), or why it waits for room (its own words,
    /// `waiting for disk space (…)`); nil when there is nothing to say.
    public static func note(_ download: Download) -> String? {
        guard let text = error(download) else { return nil }
        switch download.state {
        case .paused where download.pausedByShutdown: return "paused: " + text
        case .waitingForSpace: return text
        default: return "error: " + text
        }
    }

    /// What went wrong, or why the download waits, in one line; nil when nothing did.
    public static func error(_ download: Download) -> String? {
        switch download.state {
        case .failed(let reason), .waiting(_, let reason), .waitingForSpace(let reason): reason
        case .completed, .cancelled: nil
        case .paused where download.pausedByShutdown: "stopped when haul exited; resumes when haul runs the queue or gets it again"
        // A running download's last error is over, or being tried again: `list` said `error: HTTP
        // 404 Not Found` under a row downloading after a resume (found by use). The details and
        // the history keep it.
        case .downloading: nil
        case .queued, .paused: download.lastError
        }
    }
}

/// A `haul get --json` line: the event's name beside the download's keys, in one object.
private struct Event: Encodable {
    var event: String
    var download: QueueListing

    private enum CodingKeys: String, CodingKey {
        case event
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(event, forKey: .event)
        // The same keyed container: the download's keys land beside `event`, not under a key.
        try download.encode(to: encoder)
    }
}

/// A `haul get --json` line with text fields of its own.
private struct Notice: Encodable {
    var event: String
    var id: Int64?
    var fields: [String: String]

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }

        init(stringValue: String) {
            self.stringValue = stringValue
        }

        init?(intValue: Int) {
            nil
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(event, forKey: Key(stringValue: "event"))
        try container.encodeIfPresent(id, forKey: Key(stringValue: "id"))
        for (key, value) in fields {
            try container.encode(value, forKey: Key(stringValue: key))
        }
    }
}
