import DownloadCore
import Foundation
import GRDB

/// Writing a download row column by column, through one cached statement.
///
/// A commit may save a thousand rows, and every download is saved several times (queued, started,
/// responded, completed, placed). Through `Codable` and `save` each row cost a keyed encoder, a
/// dictionary of columns and a statement built anew; profiled on 1,000 small files that was a
/// quarter of haul's CPU time. Through `StatementArguments` it still cost two thirds of the
/// upsert's instructions; the values are now bound through `RawStatement`.
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

    /// The values of `columnNames`, in that order, as SQLite will hold them.
    var values: [DatabaseValue] {
        [
            id.databaseValue, url.databaseValue, destinationKind.databaseValue, destinationPath.databaseValue, partPath.databaseValue,
            completedPath.databaseValue, state.rawValue.databaseValue, stateReason.databaseValue, StoredDate.text(waitingUntil).databaseValue,
            position.databaseValue, bytesOnDisk.databaseValue, totalBytes.databaseValue, etag.databaseValue, lastModified.databaseValue,
            contentType.databaseValue, finalURL.databaseValue, serverFileName.databaseValue,
            resumeOffset.databaseValue, resumeCount.databaseValue, bytesSavedByResume.databaseValue, unverifiedResume.databaseValue,
            overlapChecked.databaseValue, restartCount.databaseValue, restartReason.databaseValue, lastStatus.databaseValue,
            lastError.databaseValue, failedAttempts.databaseValue, StoredDate.text(lastActive).databaseValue, pausedByShutdown.databaseValue,
            requestHeaders.databaseValue, checksum.databaseValue, segments.databaseValue, writtenSegments.databaseValue,
            connections.databaseValue, checkpointBootID.databaseValue, checkpointSynced.databaseValue, completedStamps.databaseValue,
            replacing.databaseValue, hook.databaseValue, speedLimit.databaseValue, StoredDate.text(createdAt).databaseValue,
            StoredDate.text(updatedAt).databaseValue, StoredDate.text(completedAt).databaseValue,
        ]
    }

    /// Column by column, for GRDB's own inserts and updates (the same values `upsert` writes).
    func encode(to container: inout PersistenceContainer) {
        for (name, value) in zip(Self.columnNames, values) { container[name] = value }
    }

    /// Inserts the row, or replaces every column of the one with its id but three: `createdAt` stays;
    /// `completedAt` stays while the row says completed; `position` stays when the last argument,
    /// bound after the row's values, is true. Without a read of the row first.
    static let upsertSQL: String = {
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

    /// Writes the row with `statement` (of `upsertSQL`) in the caller's transaction; a row already
    /// stored keeps its place when `keepingPosition`.
    func upsert(with statement: inout RawStatement, keepingPosition: Bool) throws {
        for value in values { try statement.bind(value) }
        try statement.bind(keepingPosition)
        try statement.run()
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
