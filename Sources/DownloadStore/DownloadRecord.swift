import DownloadCore
import Foundation
import GRDB

/// One row of the `download` table: a download as the queue last committed it.
struct DownloadRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "download"

    var id: Int64
    var url: String
    var destinationKind: String
    var destinationPath: String
    var partPath: String
    /// Where the file was written at completion.
    var completedPath: String?
    /// The kind of state, in the store's own words (`StateKind`), never the screen's.
    var state: StateKind
    /// Why it waits or failed.
    var stateReason: String?
    var waitingUntil: Date?
    var position: Int
    /// The last checkpoint: the part file was fsync'd at least this far.
    var bytesOnDisk: Int64
    var totalBytes: Int64?
    var etag: String?
    var lastModified: String?
    /// The validators came within a second of the file's change: they do not verify a resume.
    var recentlyChanged: Bool
    var contentType: String?
    var finalURL: String?
    var serverFileName: String?
    var resumeOffset: Int64?
    var resumeCount: Int
    var bytesSavedByResume: Int64
    var unverifiedResume: Bool
    var overlapChecked: Bool
    var restartCount: Int
    var restartReason: String?
    var lastStatus: Int?
    var lastError: String?
    var failedAttempts: Int
    /// When a transfer last worked on it: purging for disk space takes the least recently used first.
    var lastActive: Date?
    var pausedByShutdown: Bool
    /// Extra request headers, one `Name: value` per line.
    var requestHeaders: String?
    /// `sha-256=HEX` the finished file must match.
    var checksum: String?
    /// The durable parts of a segmented download (`start-next-end,…`); nil for a prefix.
    var segments: String?
    var writtenSegments: String?
    /// Connections the download may open (`--connections`).
    var connections: Int
    /// The boot the checkpoint was taken in; after a reboot only a synced checkpoint is trusted.
    var checkpointBootID: String?
    /// False when the checkpoint was taken without an fsync (`--no-fsync`): not trusted after a reboot.
    var checkpointSynced: Bool
    /// `size:mtime` of each completed file when it was placed, comma-separated.
    var completedStamps: String?
    /// The completed files a fetch again replaces, a JSON array of paths.
    var replacing: String?
    /// The hook run for how the download ended (`HookRun.encoded`: `complete exit 0 1.25`); NULL for none.
    var hook: String?
    /// The download's own speed limit in bytes per second; NULL for none.
    var speedLimit: Int64?
    var createdAt: Date
    var updatedAt: Date
    var completedAt: Date?

    enum Columns {
        static let id = Column(CodingKeys.id)
        static let position = Column(CodingKeys.position)
        static let state = Column(CodingKeys.state)
        static let createdAt = Column(CodingKeys.createdAt)
        static let completedAt = Column(CodingKeys.completedAt)
    }

    static let requesters = hasMany(RequesterRecord.self)
}

/// One row of the `requester` table: a further requester of a coalesced download, who gets its own
/// copy when the download completes.
struct RequesterRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "requester"

    var id: Int64?
    var downloadId: Int64
    /// Order among the download's requesters (the first requester lives in `download` itself).
    var position: Int
    var destinationKind: String
    var destinationPath: String
    /// Where its copy was written at completion.
    var completedPath: String?

    enum Columns {
        static let downloadId = Column(CodingKeys.downloadId)
        static let position = Column(CodingKeys.position)
    }
}

extension DownloadRecord {
    /// Read column by column: a queue of 10,000 rows decoded through `Codable` took a third of
    /// the terminal UI's start.
    init(row: Row) throws {
        id = row["id"]
        url = row["url"]
        destinationKind = row["destinationKind"]
        destinationPath = row["destinationPath"]
        partPath = row["partPath"]
        completedPath = row["completedPath"]
        let stored: String = row["state"]
        // Read as text first: a word this version does not know is reported, never a crash.
        guard let kind = StateKind(rawValue: stored) else { throw UnreadableState(id: id, stored: stored) }
        state = kind
        stateReason = row["stateReason"]
        waitingUntil = StoredDate.date(row, "waitingUntil")
        position = row["position"]
        bytesOnDisk = row["bytesOnDisk"]
        totalBytes = row["totalBytes"]
        etag = row["etag"]
        lastModified = row["lastModified"]
        recentlyChanged = row["recentlyChanged"]
        contentType = row["contentType"]
        finalURL = row["finalURL"]
        serverFileName = row["serverFileName"]
        resumeOffset = row["resumeOffset"]
        resumeCount = row["resumeCount"]
        bytesSavedByResume = row["bytesSavedByResume"]
        unverifiedResume = row["unverifiedResume"]
        overlapChecked = row["overlapChecked"]
        restartCount = row["restartCount"]
        restartReason = row["restartReason"]
        lastStatus = row["lastStatus"]
        lastError = row["lastError"]
        failedAttempts = row["failedAttempts"]
        lastActive = StoredDate.date(row, "lastActive")
        pausedByShutdown = row["pausedByShutdown"]
        requestHeaders = row["requestHeaders"]
        checksum = row["checksum"]
        segments = row["segments"]
        writtenSegments = row["writtenSegments"]
        connections = row["connections"]
        checkpointBootID = row["checkpointBootID"]
        checkpointSynced = row["checkpointSynced"]
        completedStamps = row["completedStamps"]
        replacing = row["replacing"]
        hook = row["hook"]
        speedLimit = row["speedLimit"]
        createdAt = try StoredDate.required(row, "createdAt", download: id)
        updatedAt = try StoredDate.required(row, "updatedAt", download: id)
        completedAt = StoredDate.date(row, "completedAt")
    }

    /// The row for `download` at `position`, as new at `now` (`upsert` keeps a stored row's
    /// creation and completion times).
    init(_ download: Download, position: Int, bootID: String?, synced: Bool, now: Date) {
        id = download.id.rawValue
        url = download.url.absoluteString
        (destinationKind, destinationPath) = Self.encode(download.destination)
        partPath = download.partPath
        completedPath = download.completedPaths.first
        state = StateKind(download.state)
        switch download.state {
        case .waiting(let until, let reason):
            stateReason = reason
            waitingUntil = until
        case .waitingForSpace(let reason):
            // `waiting` with no time: it waits for room, not for a timer.
            stateReason = reason
            waitingUntil = nil
        case .failed(let reason):
            stateReason = reason
            waitingUntil = nil
        default:
            stateReason = nil
            waitingUntil = nil
        }
        self.position = position
        bytesOnDisk = download.bytesOnDisk
        totalBytes = download.totalBytes
        etag = download.etag
        lastModified = download.lastModified
        recentlyChanged = download.recentlyChanged
        contentType = download.contentType
        finalURL = download.finalURL?.absoluteString
        serverFileName = download.serverFileName
        resumeOffset = download.resumeOffset
        resumeCount = download.resumeCount
        bytesSavedByResume = download.bytesSavedByResume
        unverifiedResume = download.unverifiedResume
        overlapChecked = download.overlapChecked
        restartCount = download.restartCount
        restartReason = download.restartReason
        lastStatus = download.lastStatus
        lastError = download.lastError
        failedAttempts = download.failedAttempts
        lastActive = download.lastActive
        pausedByShutdown = download.pausedByShutdown
        requestHeaders = download.options.headers.isEmpty ? nil : download.options.headers.map(\.description).joined(separator: "\n")
        checksum = download.options.checksum?.description
        segments = download.segments.isEmpty ? nil : Segments.encode(download.segments)
        writtenSegments = download.writtenSegments.isEmpty ? nil : Segments.encode(download.writtenSegments)
        connections = download.options.connections
        checkpointBootID = bootID
        checkpointSynced = synced
        completedStamps = download.completedStamps.isEmpty ? nil : download.completedStamps.map(\.encoded).joined(separator: ",")
        replacing = download.replacing.isEmpty ? nil : (try? JSONEncoder().encode(Replacing(paths: download.replacing, stamps: download.replacingStamps.map(\.encoded))))
            .map { String(decoding: $0, as: UTF8.self) }
        hook = download.hook?.encoded
        speedLimit = download.limit
        createdAt = now
        updatedAt = now
        completedAt = download.state == .completed ? now : nil
    }

    /// The download this row describes; nil when the row cannot be read back (a URL that no longer
    /// parses), which the caller reports rather than guessing.
    func download(requesters: [RequesterRecord]) -> Download? {
        guard let parsedURL = URL(string: url), let destination = Self.decode(destinationKind, destinationPath) else { return nil }
        var download = Download(id: DownloadID(id), url: parsedURL, destination: destination, partPath: partPath)
        switch state {
        case .queued: download.state = .queued
        case .downloading: download.state = .downloading
        case .paused: download.state = .paused
        // A retry without its time (never written so) is due: when the row was written.
        case .waitingForRetry: download.state = .waiting(until: waitingUntil ?? updatedAt, reason: stateReason ?? "")
        case .waitingForSpace: download.state = .waitingForSpace(reason: stateReason ?? SpaceShortage.belowFloor.words(nil))
        case .completed: download.state = .completed
        case .failed: download.state = .failed(reason: stateReason ?? lastError ?? "failed")
        case .cancelled: download.state = .cancelled
        }
        let extras = requesters.sorted { $0.position < $1.position }
        download.extraDestinations = extras.compactMap { Self.decode($0.destinationKind, $0.destinationPath) }
        download.bytesOnDisk = bytesOnDisk
        download.totalBytes = totalBytes
        download.etag = etag
        download.lastModified = lastModified
        download.recentlyChanged = recentlyChanged
        download.contentType = contentType
        download.finalURL = finalURL.flatMap(URL.init(string:))
        download.serverFileName = serverFileName
        download.resumeOffset = resumeOffset
        download.resumeCount = resumeCount
        download.bytesSavedByResume = bytesSavedByResume
        download.unverifiedResume = unverifiedResume
        download.overlapChecked = overlapChecked
        download.restartCount = restartCount
        download.restartReason = restartReason
        download.lastStatus = lastStatus
        download.lastError = lastError
        download.failedAttempts = failedAttempts
        download.lastActive = lastActive
        download.pausedByShutdown = pausedByShutdown
        for line in (requestHeaders ?? "").split(separator: "\n") {
            guard let field = try? HeaderField.parse(String(line)) else { return nil }
            download.options.headers.append(field)
        }
        if let checksum {
            guard let parsed = try? Checksum.parse(checksum) else { return nil }
            download.options.checksum = parsed
        }
        download.options.connections = max(1, connections)
        if let segments {
            // Unreadable parts become one that cannot tile the file, so recovery empties the part
            // file and starts over rather than taking its holes for a prefix.
            download.segments = Segments.decode(segments).flatMap { $0.isEmpty ? nil : $0 } ?? [Segment(start: -1, next: -1, end: -1)]
        }
        // Unreadable written parts are simply not used: the synced ones still describe the file.
        download.writtenSegments = writtenSegments.flatMap(Segments.decode) ?? []
        if let completedPath {
            download.completedPaths = [completedPath] + extras.compactMap(\.completedPath)
        }
        // Unreadable stamps are dropped: the session then checks the file by its size alone.
        let stamps = (completedStamps ?? "").split(separator: ",").compactMap(FileStamp.init(encoded:))
        // A completed download not placed yet keeps its part file's one stamp.
        if stamps.count == download.completedPaths.count || (download.completedPaths.isEmpty && stamps.count == 1) {
            download.completedStamps = stamps
        }
        if let replacing {
            if let decoded = try? JSONDecoder().decode(Replacing.self, from: Data(replacing.utf8)) {
                download.replacing = decoded.paths
                let stamps = decoded.stamps.compactMap { FileStamp(encoded: Substring($0)) }
                if stamps.count == decoded.paths.count { download.replacingStamps = stamps }
            } else if let paths = try? JSONDecoder().decode([String].self, from: Data(replacing.utf8)) {
                // As stored before the stamps were: the paths alone.
                download.replacing = paths
            }
        }
        // An unreadable hook status is dropped: the row shows none rather than a guess.
        download.hook = hook.flatMap(HookRun.init(encoded:))
        // A limit below the least one haul sets is no limit it could have written.
        download.limit = speedLimit.flatMap { $0 >= QueueLimits.minimumRate ? $0 : nil }
        return download
    }

    static func encode(_ destination: Destination) -> (String, String) {
        switch destination {
        case .file(let path): ("file", path)
        case .directory(let path): ("directory", path)
        }
    }

    static func decode(_ kind: String, _ path: String) -> Destination? {
        switch kind {
        case "file": .file(path)
        case "directory": .directory(path)
        default: nil
        }
    }
}

/// The `replacing` column: the files a fetch again replaces and their stamps when placed.
private struct Replacing: Codable {
    var paths: [String]
    var stamps: [String]
}
