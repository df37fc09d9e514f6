import DownloadCore
@testable import DownloadStore
import Foundation
import GRDB
import GRDBSQLite
import Testing

/// The row writer binds every column of the `download` table, and only those.
@Suite struct DownloadRecordWritingTests {
    @Test func theUpsertNamesEveryColumnOfTheTable() throws {
        let store = try StoreFixture()
        let queue = try DatabaseQueue(path: store.path)
        try AppDatabase.migrator.migrate(queue)
        let columns = try queue.read { db in try db.columns(in: "download").map(\.name) }
        #expect(Set(columns) == Set(DownloadRecord.columnNames))
        #expect(columns.count == DownloadRecord.columnNames.count)
    }

    /// The upsert binds each field in its own column: a row with a different value in every column
    /// (none NULL, no two alike; the five flags take five patterns of three runs, so that any two
    /// of them differ in one) reads back column by column as `values` holds it.
    @Test(arguments: [0, 1, 2]) func theUpsertWritesEachFieldInItsOwnColumn(run: Int) throws {
        let flags = (1...5).map { ($0 >> run) & 1 == 1 }
        let date = { (seconds: Double) in Date(timeIntervalSince1970: 1_800_000_000 + seconds) }
        let record = DownloadRecord(
            id: 41, url: "https://example.com/41.iso", destinationKind: "file", destinationPath: "/d/41.iso",
            partPath: "/d/41.iso.part", completedPath: "/d/done.iso", state: .failed, stateReason: "reason",
            waitingUntil: date(1), position: 3, bytesOnDisk: 5, totalBytes: 7, etag: "\"etag\"", lastModified: "modified",
            recentlyChanged: flags[4], contentType: "type/x", finalURL: "https://cdn.example.com/41.iso", serverFileName: "server.iso", resumeOffset: 11,
            resumeCount: 13, bytesSavedByResume: 17, unverifiedResume: flags[0], overlapChecked: flags[1], restartCount: 19,
            restartReason: "restart", lastStatus: 23, lastError: "error", failedAttempts: 29, lastActive: date(2),
            pausedByShutdown: flags[2], requestHeaders: "headers", checksum: "sha256:00", segments: "segments",
            writtenSegments: "written", connections: 31, checkpointBootID: "boot", checkpointSynced: flags[3],
            completedStamps: "stamps", replacing: "replacing", hook: "hook", speedLimit: 37, createdAt: date(3),
            updatedAt: date(4), completedAt: date(5)
        )
        let queue = try DatabaseQueue()
        try AppDatabase.migrator.migrate(queue)
        let row = try queue.write { db -> Row? in
            var upsert = try RawStatement(db, sql: DownloadRecord.upsertSQL)
            try record.upsert(with: &upsert, keepingPosition: false)
            return try Row.fetchOne(db, sql: "SELECT * FROM download")
        }
        let stored = try #require(row)
        #expect(record.values.allSatisfy { !$0.isNull })
        for (name, value) in zip(DownloadRecord.columnNames, record.values) {
            #expect(stored[name] as DatabaseValue == value, "\(name)")
        }
    }

    /// A row saved again keeps its creation time, its completion time while it stays completed, and
    /// its place when the commit gives none; without reading the row first.
    @Test func aSavedRowKeepsItsCreationCompletionAndPlace() throws {
        let store = try StoreFixture()
        let database = try AppDatabase.open(at: store.path)
        var first = QueueChanges()
        first.saved = [try store.download(1, .completed)]
        first.positions = [DownloadID(1): 7]
        try database.commit(first)
        let old = "2020-01-02 03:04:05.678"
        let raw = try DatabaseQueue(path: store.path)
        try raw.write { db in try db.execute(sql: "UPDATE download SET createdAt = ?, completedAt = ? WHERE id = 1", arguments: [old, old]) }
        func stored() throws -> Row? {
            try raw.read { db in try Row.fetchOne(db, sql: "SELECT createdAt, completedAt, position FROM download WHERE id = 1") }
        }

        var again = QueueChanges()
        again.saved = [try store.download(1, .completed)]
        try database.commit(again)
        var row = try #require(try stored())
        #expect(row["createdAt"] as String == old)
        #expect(row["completedAt"] as String? == old, "still completed: the first completion's time stays")
        #expect(row["position"] as Int == 7, "no place given: the row keeps its own")

        again.saved = [try store.download(1, .queued)]
        again.positions = [DownloadID(1): 2]
        try database.commit(again)
        row = try #require(try stored())
        #expect(row["createdAt"] as String == old)
        #expect(row["completedAt"] as String? == nil, "queued again: no completion time")
        #expect(row["position"] as Int == 2)

        again.saved = [try store.download(1, .completed)]
        again.positions = [:]
        try database.commit(again)
        row = try #require(try stored())
        let completed = try #require(row["completedAt"] as String?)
        #expect(completed != old, "completed anew: a new time")
        #expect(row["position"] as Int == 2)
        #expect(try database.loadQueue().downloads.map(\.state) == [.completed])
    }

    /// A shipped migration never changes what it writes: a new database gets, table by table and
    /// index by index, the schema that every earlier haul wrote (recorded from the release build
    /// of a5bf321, when v2 and v12 still said `belongsTo`).
    @Test func aNewDatabaseHasTheSchemaEveryHaulWrote() throws {
        let store = try StoreFixture()
        _ = try AppDatabase.open(at: store.path)
        let schema = try DatabaseQueue(path: store.path).read { db in
            try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
                .map { ($0["name"] as String, $0["sql"] as String) }
        }
        let expected: [(String, String)] = [
        ("download", #"CREATE TABLE "download" ("id" INTEGER PRIMARY KEY, "url" TEXT NOT NULL, "destinationKind" TEXT NOT NULL, "destinationPath" TEXT NOT NULL, "partPath" TEXT NOT NULL, "completedPath" TEXT, "state" TEXT NOT NULL, "stateReason" TEXT, "waitingUntil" DATETIME, "position" INTEGER NOT NULL, "bytesOnDisk" INTEGER NOT NULL DEFAULT 0, "totalBytes" INTEGER, "etag" TEXT, "lastModified" TEXT, "finalURL" TEXT, "serverFileName" TEXT, "resumeOffset" INTEGER, "resumeCount" INTEGER NOT NULL DEFAULT 0, "bytesSavedByResume" INTEGER NOT NULL DEFAULT 0, "unverifiedResume" BOOLEAN NOT NULL DEFAULT 0, "restartCount" INTEGER NOT NULL DEFAULT 0, "restartReason" TEXT, "lastStatus" INTEGER, "lastError" TEXT, "failedAttempts" INTEGER NOT NULL DEFAULT 0, "createdAt" DATETIME NOT NULL, "updatedAt" DATETIME NOT NULL, "completedAt" DATETIME, "checkpointBootID" TEXT, "pausedByShutdown" BOOLEAN NOT NULL DEFAULT 0, "requestHeaders" TEXT, "checksum" TEXT, "segments" TEXT, "connections" INTEGER NOT NULL DEFAULT 1, "checkpointSynced" BOOLEAN NOT NULL DEFAULT 1, "contentType" TEXT, "writtenSegments" TEXT, "completedStamps" TEXT, "replacing" TEXT, "overlapChecked" BOOLEAN NOT NULL DEFAULT 0, "hook" TEXT, "lastActive" DATETIME, "speedLimit" INTEGER, "recentlyChanged" BOOLEAN NOT NULL DEFAULT 0)"#),
        ("download_position", #"CREATE INDEX "download_position" ON "download"("position")"#),
        ("grdb_migrations", #"CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)"#),
        ("history", #"CREATE TABLE "history" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "downloadId" INTEGER NOT NULL REFERENCES "download"("id") ON DELETE CASCADE, "time" DATETIME NOT NULL, "kind" TEXT NOT NULL, "text" TEXT NOT NULL)"#),
        ("history_download", #"CREATE INDEX "history_download" ON "history"("downloadId", "id")"#),
        ("idSequence", #"CREATE TABLE "idSequence" ("name" TEXT PRIMARY KEY NOT NULL, "next" INTEGER NOT NULL)"#),
        ("requester", #"CREATE TABLE "requester" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "downloadId" INTEGER NOT NULL REFERENCES "download"("id") ON DELETE CASCADE, "position" INTEGER NOT NULL, "destinationKind" TEXT NOT NULL, "destinationPath" TEXT NOT NULL, "completedPath" TEXT)"#),
        ("requester_on_downloadId", #"CREATE INDEX "requester_on_downloadId" ON "requester"("downloadId")"#),
        ("setting", #"CREATE TABLE "setting" ("key" TEXT PRIMARY KEY NOT NULL, "value" TEXT NOT NULL)"#),
        ("sqlite_sequence", #"CREATE TABLE sqlite_sequence(name,seq)"#)
        ]
        #expect(schema.map(\.0) == expected.map(\.0))
        for (name, sql) in expected {
            #expect(schema.first { $0.0 == name }?.1 == sql, "table or index \(name)")
        }
    }

    /// Dates are read back without GRDB's calendar, to the same instant GRDB reads.
    @Test(arguments: [0, -1.25, 1_000_000_000.5, 1_795_000_000.999, 1_764_000_000.123, 253_402_300_799.999])
    func datesReadBackAsGRDBReadsThem(_ interval: Double) throws {
        let text = StoredDate.text(Date(timeIntervalSince1970: interval))
        let ours = try #require(Format.utcDate(text))
        let grdb = try #require(Date.fromDatabaseValue(text.databaseValue))
        #expect(abs(ours.timeIntervalSince1970 - grdb.timeIntervalSince1970) < 1e-6, "\(text)")
        #expect(abs(ours.timeIntervalSince1970 - interval) < 0.0005)
        #expect(StoredDate.text(ours) == text)
    }

    /// Text in another form is left to GRDB, or read as no date: never a crash, never a wrong day.
    @Test func otherDateTextIsNotReadAsOurs() throws {
        for text in ["2026-02-31 00:00:00.000", "2026-13-01 00:00:00", "2026-01-01", "2026-01-01 24:00:00", "20260101 00:00:00.000",
                     "2026-01-01 00:00:00.", "2026-01-01 00:00:00.1234567890", "2026-01-01 00:00:00+01:00", "soon"] {
            #expect(Format.utcDate(text) == nil, "\(text)")
        }
        #expect(Format.utcDate("2026-11-24T10:27:16Z") == nil)
        #expect(Format.utcDate("2026-11-24T10:27:16.5")?.timeIntervalSince1970 == 1_795_516_036.5)
        let store = try StoreFixture()
        let queue = try DatabaseQueue(path: store.path)
        let row = try queue.read { db in try #require(try Row.fetchOne(db, sql: "SELECT '2026-01-01' AS d, 12 AS n, NULL AS z")) }
        #expect(StoredDate.date(row, "d") == Date.fromDatabaseValue("2026-01-01".databaseValue), "a form GRDB reads")
        #expect(StoredDate.date(row, "z") == nil)
        #expect(StoredDate.date(row, "n") == Date.fromDatabaseValue(12.databaseValue))
    }

    /// A row whose creation time is not a date is a one-line failure naming the row, not a crash.
    @Test func aRowWithoutItsCreationDateIsReportedNotACrash() throws {
        let store = try StoreFixture()
        let database = try AppDatabase.open(at: store.path)
        var changes = QueueChanges()
        changes.saved = [try store.download(4)]
        try database.commit(changes)
        try DatabaseQueue(path: store.path).write { db in try db.execute(sql: "UPDATE download SET createdAt = 'soon' WHERE id = 4") }
        #expect {
            _ = try AppDatabase.open(at: store.path).loadQueue()
        } throws: { error in
            "\(error)" == "download 4 in the queue database cannot be read (its createdAt is not a date)"
        }
    }

    /// Dates are written as GRDB writes them, so that they read back the same.
    @Test(arguments: [0, -1.25, 1_000_000_000.5, 1_795_000_000.9999, 1_795_000_000.0004, 1_764_000_000.123, 253_402_300_799.999])
    func datesAreWrittenAsGRDBWritesThem(_ interval: Double) {
        let date = Date(timeIntervalSince1970: interval)
        #expect(StoredDate.text(date) == String.fromDatabaseValue(date.databaseValue))
    }
}

/// Values bound straight through SQLite's C API come back as GRDB reads them.
@Suite struct RawStatementTests {
    @Test func everyKindOfValueComesBackAsBound() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a, b, c, d, e, f)")
            var insert = try RawStatement(db, sql: "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)")
            insert.bind("名前 café ü")
            insert.bind(Int64.min)
            insert.bind(nil as String?)
            insert.bind(true)
            insert.bind(Int.max)
            insert.bind(nil as Int64?)
            try insert.run()
            let row = try #require(try Row.fetchOne(db, sql: "SELECT * FROM t"))
            #expect(row["a"] as String == "名前 café ü")
            #expect(row["b"] as Int64 == Int64.min)
            #expect((row["c"] as DatabaseValue).isNull)
            #expect(row["d"] as Int == 1)
            #expect(row["e"] as Int == Int.max)
            #expect((row["f"] as DatabaseValue).isNull)
        }
    }

    /// Too few values is an error, not a NULL in the last column; a value SQLite refuses (one too
    /// many, one longer than its limit) fails the run, not the bind. Nothing is written, and the
    /// statement is clean after it.
    @Test(arguments: [(["only one"], ResultCode.SQLITE_RANGE), (["a", "b", "c"], .SQLITE_RANGE), (["a", "longer than 16 bytes"], .SQLITE_TOOBIG)])
    func aMissingOrRefusedValueFailsTheRunAndTheStatementIsLeftClean(values: [String], code: ResultCode) throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a NOT NULL, b)")
            var insert = try RawStatement(db, sql: "INSERT INTO t VALUES (?, ?)")
            // Values of at most 16 bytes from here on.
            sqlite3_limit(db.sqliteConnection, SQLITE_LIMIT_LENGTH, 16)
            for value in values { insert.bind(value) }
            let refused = #expect(throws: DatabaseError.self) { try insert.run() }
            #expect(refused?.resultCode == code)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t") == 0)
            insert.bind("x")
            insert.bind(2 as Int64?)
            try insert.run()
            #expect(try Row.fetchAll(db, sql: "SELECT a, b FROM t").map { [$0["a"] as String, String($0["b"] as Int)] } == [["x", "2"]])
        }
    }

    /// One statement serves a whole commit: each run takes the values bound since the last, even
    /// after a run that was refused.
    @Test func aStatementRunsAgainWithTheValuesBoundSince() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a NOT NULL, b)")
            var insert = try RawStatement(db, sql: "INSERT INTO t VALUES (?, ?)")
            for number in 1...3 as ClosedRange<Int64> {
                insert.bind(number)
                insert.bind(number == 2 ? nil : "row \(number)")
                try insert.run()
            }
            insert.bind("too few")
            #expect(throws: DatabaseError.self) { try insert.run() }
            // Refused by SQLite itself, in the step: the statement is reset and runs again.
            insert.bind(nil as Int64?)
            insert.bind("no a")
            let refused = #expect(throws: DatabaseError.self) { try insert.run() }
            #expect(refused?.resultCode == .SQLITE_CONSTRAINT)
            insert.bind(4 as Int64?)
            insert.bind("row 4")
            try insert.run()
            let rows = try Row.fetchAll(db, sql: "SELECT a, b FROM t ORDER BY rowid")
            #expect(rows.map { $0["a"] as Int64 } == [1, 2, 3, 4])
            #expect(rows.map { $0["b"] as String? } == ["row 1", nil, "row 3", "row 4"])
        }
    }

    /// SQLite's refusal comes back as GRDB's error with its code: the store words it from there.
    @Test func aConstraintFailureIsADatabaseErrorWithItsCode() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a NOT NULL)")
            var insert = try RawStatement(db, sql: "INSERT INTO t VALUES (?)")
            insert.bind(nil as String?)
            do {
                try insert.run()
                Issue.record("a NULL in a NOT NULL column was written")
            } catch let error as DatabaseError {
                #expect(error.resultCode == .SQLITE_CONSTRAINT)
            }
        }
    }
}
