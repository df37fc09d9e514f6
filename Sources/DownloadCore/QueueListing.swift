import Foundation

/// One download as `haul list --json` and the control socket's `GET /v1/downloads` print it.
///
/// One shape for both, so a script reads the same object whichever way it asks. Keys are written
/// sorted and nulls written out, as `haul list --json` always did.
public struct QueueListing: Sendable, Hashable, Encodable {
    public var id: Int64
    public var state: String
    public var bytes: Int64
    public var total: Int64?
    public var resumedFrom: Int64?
    public var resumes: Int
    public var restarts: Int
    public var path: String
    public var url: String
    public var error: String?
    public var checksum: String?
    /// Names only: values may be credentials.
    public var headerNames: [String]
    /// Smoothed bytes a second, for a live queue (the socket); absent from a stored one (`haul list`).
    public var speed: Int64?
    /// The hook of the download's ending (`--on-complete`, `--on-fail`); null when none ran.
    public var hook: HookRun?
    /// The download's own speed limit in bytes a second (`--limit-rate-each`); null for none.
    public var limit: Int64?

    private enum CodingKeys: String, CodingKey {
        case id, state, bytes, total, resumes, restarts, path, url, error, checksum, speed, hook, limit
        case resumedFrom = "resumed_from"
        case headerNames = "header_names"
    }

    /// The object for `download`; `live` adds its speed.
    public static func object(for download: Download, live: Bool = false) -> QueueListing {
        QueueListing(
            id: download.id.rawValue,
            state: download.state.word,
            bytes: download.bytesOnDisk,
            total: download.totalBytes,
            resumedFrom: download.resumeOffset,
            resumes: download.resumeCount,
            restarts: download.restartCount,
            path: path(download),
            url: download.url.redactingPassword,
            error: error(download),
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
        try container.encode(path, forKey: .path)
        try container.encode(url, forKey: .url)
        try container.encode(error, forKey: .error)
        try container.encode(checksum, forKey: .checksum)
        try container.encode(headerNames, forKey: .headerNames)
        try container.encodeIfPresent(speed, forKey: .speed)
        try container.encode(hook, forKey: .hook)
        try container.encode(limit, forKey: .limit)
    }

    /// The finished file, else the part file the bytes are in.
    public static func path(_ download: Download) -> String {
        download.completedPath ?? download.partPath
    }

    /// What went wrong, or why the download waits, in one line; nil when nothing did.
    public static func error(_ download: Download) -> String? {
        switch download.state {
        case .failed(let reason), .waiting(_, let reason), .waitingForSpace(let reason): reason
        case .completed, .cancelled: nil
        case .paused where download.pausedByShutdown: "stopped when haul exited; resumes when haul runs the queue or gets it again"
        case .queued, .downloading, .paused: download.lastError
        }
    }
}
