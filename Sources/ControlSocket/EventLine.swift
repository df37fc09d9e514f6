import DownloadCore
import Foundation

/// One line of `GET /v1/events`: the whole queue first, then what changed since the line before.
///
/// `{"type":"snapshot","downloads":[…],"max_active":3,"unsaved":null,"limit":null}`, then
/// `{"type":"changes","downloads":[rows that changed],"removed":[ids],"order":[ids],"max_active":3,"unsaved":null,"limit":null}`
/// with `order` only when the queue's order changed (a download added, moved or removed).
struct EventLine: Sendable, Hashable, Codable {
    enum Kind: String, Sendable, Hashable, Codable {
        case snapshot
        case changes
    }

    var type: Kind
    var downloads: [Download]
    var maxActive: Int
    var unsaved: String?
    var removed: [DownloadID]?
    var order: [DownloadID]?
    /// The download directory's free space and floor (`SessionSnapshot.space`).
    var space: DiskReading?
    /// The limit on every transfer together, bytes per second (`SessionSnapshot.limit`); null for none.
    var limit: Int64?
    /// What all transfers receive together, bytes per second (`SessionSnapshot.throughput`).
    var throughput: Double?

    private enum CodingKeys: String, CodingKey {
        case type, downloads, unsaved, removed, order, space, limit, throughput
        case maxActive = "max_active"
    }

    /// The whole queue.
    static func snapshot(_ snapshot: SessionSnapshot) -> EventLine {
        EventLine(
            type: .snapshot, downloads: snapshot.downloads, maxActive: snapshot.maxActive, unsaved: snapshot.unsaved, space: snapshot.space,
            limit: snapshot.limit, throughput: snapshot.throughput
        )
    }

    /// What changed from `old` to `new`; nil when nothing did.
    static func changes(from old: SessionSnapshot, to new: SessionSnapshot) -> EventLine? {
        let changed = new.downloads.filter { old[$0.id] != $0 }
        let removed = old.downloads.map(\.id).filter { new[$0] == nil }
        let order = new.downloads.map(\.id)
        let reordered = order != old.downloads.map(\.id)
        guard !changed.isEmpty || reordered || new.maxActive != old.maxActive || new.unsaved != old.unsaved || new.space != old.space
            || new.limit != old.limit || new.throughput != old.throughput else { return nil }
        return EventLine(type: .changes, downloads: changed, maxActive: new.maxActive, unsaved: new.unsaved,
                         removed: removed, order: reordered ? order : nil, space: new.space, limit: new.limit, throughput: new.throughput)
    }

    /// The queue this line describes: the line's own for a snapshot, else `previous` with the changes.
    func applied(to previous: SessionSnapshot?) -> SessionSnapshot {
        guard type == .changes, let previous else {
            var snapshot = SessionSnapshot(downloads: downloads, maxActive: maxActive)
            snapshot.unsaved = unsaved
            snapshot.space = space
            snapshot.limit = limit
            snapshot.throughput = throughput
            return snapshot
        }
        var rows = Dictionary(previous.downloads.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for download in downloads { rows[download.id] = download }
        for id in removed ?? [] { rows[id] = nil }
        let gone = Set(removed ?? [])
        let ids = order ?? (previous.downloads.map(\.id).filter { !gone.contains($0) }
            + downloads.map(\.id).filter { previous[$0] == nil })
        var snapshot = SessionSnapshot(downloads: ids.compactMap { rows[$0] }, maxActive: maxActive)
        snapshot.unsaved = unsaved
        snapshot.space = space
        snapshot.limit = limit
        snapshot.throughput = throughput
        return snapshot
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(downloads, forKey: .downloads)
        try container.encode(maxActive, forKey: .maxActive)
        // Written as null when there is none: a client must see a problem go away.
        try container.encode(unsaved, forKey: .unsaved)
        try container.encodeIfPresent(removed, forKey: .removed)
        try container.encodeIfPresent(order, forKey: .order)
        try container.encodeIfPresent(space, forKey: .space)
        // Null when there is none, like `unsaved`: a client must see a limit go away.
        try container.encode(limit, forKey: .limit)
        try container.encodeIfPresent(throughput, forKey: .throughput)
    }
}

/// The bodies the socket sends and takes besides downloads and snapshots.
enum Wire {
    /// `{"error": "one sentence"}`.
    struct Failure: Codable {
        var error: String
    }

    struct Done: Codable {
        var ok = true
    }

    struct Move: Codable {
        var to: Int
    }

    /// `{"ids": [1, 3]}`: the downloads a purge is for (no body: every paused one).
    struct Purge: Codable {
        var ids: [Int64]
    }

    struct MaxActive: Codable {
        var maxActive: Int

        private enum CodingKeys: String, CodingKey {
            case maxActive = "max_active"
        }
    }

    /// `{"limit": 204800}`, `{"limit": null}` or `{"limit": 0}` (none): the key must be there.
    struct Limit: Codable {
        var limit: Int64?

        private enum CodingKeys: String, CodingKey {
            case limit
        }

        init(limit: Int64?) {
            self.limit = limit
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            guard container.contains(.limit) else {
                throw DecodingError.keyNotFound(CodingKeys.limit, .init(codingPath: [], debugDescription: "limit"))
            }
            limit = try container.decodeIfPresent(Int64.self, forKey: .limit)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(limit, forKey: .limit)
        }
    }

    /// The answer to a resume: `{"ok": true}`, with `"displaced": ID` when a running download went
    /// back to queued to make room.
    struct Resumed: Codable {
        var ok = true
        var displaced: DownloadID?
    }

    /// `{"edit": "pause", "ids": [1, 3]}`: one change to several downloads, all or nothing.
    struct Edit: Codable {
        var edit: String
        var ids: [Int64]
    }

    /// The answer to an edit: `{"ok": true, "displaced": [{"id": 3, "resumed": 5}, …]}`, the running
    /// downloads that went back to queued to make room for those resumed.
    struct Edited: Codable {
        var ok = true
        var displaced: [MadeRoom]
    }

    /// The answer to `POST /v1/clear-completed`: how many rows went.
    struct Cleared: Codable {
        var cleared: Int
    }

    /// One history entry: `{"id": 3, "time": "2026-11-24T10:00:00.125Z", "kind": "response", "text": "HTTP 206 …"}`.
    struct HistoryLine: Codable {
        var id: DownloadID
        var time: String
        var kind: String
        var text: String

        init(_ entry: HistoryEntry) {
            id = entry.download
            time = Self.formatter().string(from: entry.time)
            kind = entry.kind.rawValue
            text = entry.text
        }

        /// The entry; nil for a line this version cannot read (a kind a newer haul wrote).
        var entry: HistoryEntry? {
            guard let kind = HistoryEntry.Kind(rawValue: kind), let date = Self.formatter().date(from: time) else { return nil }
            return HistoryEntry(download: id, time: date, kind: kind, text: text)
        }

        /// ISO 8601 in UTC with milliseconds (one per call: the formatter is not `Sendable`).
        private static func formatter() -> ISO8601DateFormatter {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter
        }
    }

    static func encoder() -> JSONEncoder {
        QueueListing.makeEncoder()
    }

    static func encode(_ value: some Encodable) -> Data {
        (try? encoder().encode(value)) ?? Data("{}".utf8)
    }
}
