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

    /// Inserts the row, or replaces every column of the one with its id but `createdAt`.
    private static let upsertSQL: String = {
        let columns = columnNames.joined(separator: ", ")
        let marks = Array(repeating: "?", count: columnNames.count).joined(separator: ", ")
        let updates = columnNames.filter { $0 != "id" && $0 != "createdAt" }.map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        return "INSERT INTO download (\(columns)) VALUES (\(marks)) ON CONFLICT(id) DO UPDATE SET \(updates)"
    }()

    /// Writes the row in the caller's transaction.
    func upsert(_ db: Database) throws {
        try db.cachedStatement(sql: Self.upsertSQL).execute(arguments: StatementArguments(values))
    }
}

/// A date as GRDB stores one (`yyyy-MM-dd HH:mm:ss.SSS` in UTC, to the nearest millisecond, as its
/// formatter does), written without a `DateFormatter`: five dates a row, thousands of rows.
enum StoredDate {
    static func text(_ date: Date?) -> String? {
        date.map(text)
    }

    static func text(_ date: Date) -> String {
        Format.utc(date)
    }
}
