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
        "replacing", "hook", "speedLimit", "createdAt", "updatedAt", "completedAt", "recentlyChanged",
    ]

    /// The values of `columnNames`, in that order, as SQLite will hold them.
    var values: [DatabaseValue] {
        var list = ValueList()
        bindColumns(to: &list)
        return list.values
    }

    /// Gives `sink` each column's value, in `columnNames`' order: the one list of them, which the
    /// upsert binds straight into its statement (an array of 43 `DatabaseValue`s built for each
    /// row was half of the upsert's instructions: callgrind, 300 small files, three rows a file).
    func bindColumns<Sink: ColumnSink>(to sink: inout Sink) {
        sink.bind(id)
        sink.bind(url)
        sink.bind(destinationKind)
        sink.bind(destinationPath)
        sink.bind(partPath)
        sink.bind(completedPath)
        sink.bind(state.rawValue)
        sink.bind(stateReason)
        sink.bind(StoredDate.text(waitingUntil))
        sink.bind(position)
        sink.bind(bytesOnDisk)
        sink.bind(totalBytes)
        sink.bind(etag)
        sink.bind(lastModified)
        sink.bind(contentType)
        sink.bind(finalURL)
        sink.bind(serverFileName)
        sink.bind(resumeOffset)
        sink.bind(resumeCount)
        sink.bind(bytesSavedByResume)
        sink.bind(unverifiedResume)
        sink.bind(overlapChecked)
        sink.bind(restartCount)
        sink.bind(restartReason)
        sink.bind(lastStatus)
        sink.bind(lastError)
        sink.bind(failedAttempts)
        sink.bind(StoredDate.text(lastActive))
        sink.bind(pausedByShutdown)
        sink.bind(requestHeaders)
        sink.bind(checksum)
        sink.bind(segments)
        sink.bind(writtenSegments)
        sink.bind(connections)
        sink.bind(checkpointBootID)
        sink.bind(checkpointSynced)
        sink.bind(completedStamps)
        sink.bind(replacing)
        sink.bind(hook)
        sink.bind(speedLimit)
        sink.bind(StoredDate.text(createdAt))
        sink.bind(StoredDate.text(updatedAt))
        sink.bind(StoredDate.text(completedAt))
        sink.bind(recentlyChanged)
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
        bindColumns(to: &statement)
        statement.bind(keepingPosition)
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

/// What takes a row's values one by one, in order: a statement's parameters, or a list.
protocol ColumnSink {
    mutating func bind(_ value: String?)
    mutating func bind(_ value: Int64?)
    mutating func bind(_ value: Int?)
    mutating func bind(_ value: Bool)
}

/// The values as GRDB holds them (for its own inserts and updates).
struct ValueList: ColumnSink {
    var values: [DatabaseValue] = []

    mutating func bind(_ value: String?) { values.append(value.databaseValue) }
    mutating func bind(_ value: Int64?) { values.append(value.databaseValue) }
    mutating func bind(_ value: Int?) { values.append(value.databaseValue) }
    mutating func bind(_ value: Bool) { values.append(value.databaseValue) }
}
