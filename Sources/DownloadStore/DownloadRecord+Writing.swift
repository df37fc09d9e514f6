import DownloadCore
import Foundation
import GRDB

/// Writing a download row column by column, through one cached statement.
///
/// A commit may save a thousand rows, and every download is saved several times (queued, started,
/// responded, completed, placed). Through `Codable` and `save` each row cost a keyed encoder, a
/// dictionary of columns and a statement built anew; profiled on 1,000 small files that was a
/// quarter of haul's CPU time.
extension DownloadRecord {
    /// Every column, in the order `arguments` binds them.
    static let columnNames = [
        "id", "url", "destinationKind", "destinationPath", "partPath", "completedPath", "state", "stateReason", "waitingUntil",
        "position", "bytesOnDisk", "totalBytes", "etag", "lastModified", "contentType", "finalURL", "serverFileName",
        "resumeOffset", "resumeCount", "bytesSavedByResume", "unverifiedResume", "overlapChecked", "restartCount",
        "restartReason", "lastStatus", "lastError", "failedAttempts", "lastActive", "pausedByShutdown", "requestHeaders",
        "checksum", "segments", "writtenSegments", "connections", "checkpointBootID", "checkpointSynced", "completedStamps",
        "replacing", "hook", "speedLimit", "createdAt", "updatedAt", "completedAt",
    ]

    /// The values of `columnNames`, in that order.
    var values: [(any DatabaseValueConvertible)?] {
        [
            id, url, destinationKind, destinationPath, partPath, completedPath, state.rawValue, stateReason, StoredDate.text(waitingUntil),
            position, bytesOnDisk, totalBytes, etag, lastModified, contentType, finalURL, serverFileName,
            resumeOffset, resumeCount, bytesSavedByResume, unverifiedResume, overlapChecked, restartCount,
            restartReason, lastStatus, lastError, failedAttempts, StoredDate.text(lastActive), pausedByShutdown, requestHeaders,
            checksum, segments, writtenSegments, connections, checkpointBootID, checkpointSynced, completedStamps,
            replacing, hook, speedLimit, StoredDate.text(createdAt), StoredDate.text(updatedAt), StoredDate.text(completedAt),
        ]
    }

    /// Column by column, for GRDB's own inserts and updates (the same values `upsert` writes).
    func encode(to container: inout PersistenceContainer) {
        for (name, value) in zip(Self.columnNames, values) { container[name] = value }
    }

    /// Inserts the row, or replaces every column of the one with its id but three: `createdAt` stays;
    /// `completedAt` stays while the row says completed; `position` stays when the last argument,
    /// bound after the row's values, is true. Without a read of the row first.
    private static let upsertSQL: String = {
        let columns = columnNames.joined(separator: ", ")
        let marks = Array(repeating: "?", count: columnNames.count).joined(separator: ", ")
        let updates = columnNames.compactMap { name -> String? in
            switch name {
            case "id", "createdAt": nil
            case "completedAt": "completedAt = CASE WHEN excluded.completedAt IS NULL THEN NULL ELSE coalesce(download.completedAt, excluded.completedAt) END"
            case "position": "position = CASE WHEN ? THEN download.position ELSE excluded.position END"
            default: "\(name) = excluded.\(name)"
            }
        }.joined(separator: ", ")
        return "INSERT INTO download (\(columns)) VALUES (\(marks)) ON CONFLICT(id) DO UPDATE SET \(updates)"
    }()

    /// Writes the row in the caller's transaction; a row already stored keeps its place when
    /// `keepingPosition`.
    func upsert(_ db: Database, keepingPosition: Bool) throws {
        try db.cachedStatement(sql: Self.upsertSQL).execute(arguments: StatementArguments(values + [keepingPosition]))
    }
}

/// A date as GRDB stores one (`yyyy-MM-dd HH:mm:ss.SSS` in UTC, to the nearest millisecond, as its
/// formatter does), written without a `DateFormatter` and read without a `Calendar`: five dates a
/// row, thousands of rows, and GRDB's reading goes through ICU's calendar (about 5 MiB of memory).
enum StoredDate {
    /// The date in `column`, nil for NULL. Text in the written form is read by `Format.utcDate`;
    /// anything else (another form GRDB accepts, a number) by GRDB.
    static func date(_ row: Row, _ column: String) -> Date? {
        let value: DatabaseValue = row[column]
        if case .string(let text) = value.storage, let date = Format.utcDate(text) { return date }
        return Date.fromDatabaseValue(value)
    }

    /// The date in `column` of `download`'s row, which may not be missing.
    static func required(_ row: Row, _ column: String, download: Int64) throws -> Date {
        guard let date = date(row, column) else {
            throw AppDatabase.Failure(description: "download \(download) in the queue database cannot be read (its \(column) is not a date)")
        }
        return date
    }

    static func text(_ date: Date?) -> String? {
        date.map(text)
    }

    static func text(_ date: Date) -> String {
        Format.utc(date)
    }
}
