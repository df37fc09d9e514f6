#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import DownloadCore
import Foundation
import GRDB
import Synchronization

/// The queue's database: every download, its checkpoint and its requesters, in SQLite (WAL).
///
/// The one way in and out of the store. Commits are synchronous (the session calls them from its own
/// serial queue) and durable: `synchronous = FULL`, so a committed state change survives a power loss,
/// not only a crash. The one exception is a commit of parts as written alone
/// (`QueueChanges.writtenPartsOnly`), which a reboot would not trust anyway.
public struct AppDatabase: QueueJournal, Sendable {
    /// An error of the store, for one line on stderr.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        /// The database has an older schema and was opened read-only, so it was not migrated.
        public var needsMigration = false
        /// The disk holding the queue is full or failing: no fault of the command's (exit 1).
        public var diskFault = false
    }

    private let writer: any DatabaseWriter
    /// How many history entries each download had at the last commit, for the downloads this
    /// store wrote to since it was opened (one store writes a file: the state directory's lock).
    private let historyCounts = HistoryCounts()

    /// Opens (creating with mode 0600) and migrates the database at `path`.
    ///
    /// With `readOnly`, nothing is created or migrated: for `haul list` while another process owns
    /// the queue.
    public static func open(at path: String, readOnly: Bool = false) throws(Failure) -> AppDatabase {
        do {
            if !readOnly {
                // SQLite creates its files with the default mode; create the database 0600 first
                // (its -wal and -shm files copy the database's mode).
                try createPrivateFile(path)
            }
            var configuration = Configuration()
            configuration.readonly = readOnly
            configuration.busyMode = .timeout(5)
            configuration.label = "haul.queue"
            let pool = try DatabasePool(path: path, configuration: configuration)
            if !readOnly {
                // After the pool is open, not in `prepareDatabase`: opening a pool turns WAL on and
                // then sets `synchronous = NORMAL` on its writer, which would undo ours. NORMAL
                // syncs the WAL only at checkpoints, so a power loss could take back commits
                // (a `completed` row, a checkpoint) that were already shown.
                try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
            }
            return try AppDatabase(pool, migrate: !readOnly)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(description: "cannot open the queue database \(path): \(Self.describe(error))", diskFault: Self.isDiskFault(error))
        }
    }

    private static func createPrivateFile(_ path: String) throws(Failure) {
        #if canImport(Glibc)
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #else
        let fd = Darwin.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #endif
        guard fd >= 0 else {
            throw Failure(description: "cannot open the queue database \(path): \(String(cString: strerror(errno)))")
        }
        close(fd)
    }

    /// Wraps `writer`, migrating it to the current schema first.
    public init(_ writer: any DatabaseWriter, migrate: Bool = true) throws {
        self.writer = writer
        if migrate {
            try Self.migrate(writer)
        } else if try writer.read({ db in try !Self.migrator.hasCompletedMigrations(db) }) {
            throw Failure(description: "the queue database has an older schema; run haul once to migrate it", needsMigration: true)
        }
    }

    /// Migrates `writer` to the current schema. An empty database (a first start) is migrated
    /// without an fsync a migration (`synchronous = OFF` until the last one is written, then the
    /// writer's level again): it holds nothing to lose. A crash meanwhile leaves a prefix of the
    /// migrations, each whole (SQLite's write-ahead log replays only complete, checksummed
    /// commits), and the next start runs the rest; the queue's first commit syncs them all.
    static func migrate(_ writer: any DatabaseWriter) throws {
        let level = try writer.writeWithoutTransaction { db -> Int? in
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") == 0 else { return nil }
            let level = try Int.fetchOne(db, sql: "PRAGMA synchronous")
            try db.execute(sql: "PRAGMA synchronous = OFF")
            return level
        }
        do {
            try Self.migrator.migrate(writer)
        } catch {
            if let level { try? writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = \(level)") } }
            throw error
        }
        if let level { try writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = \(level)") } }
    }

    /// Every schema the queue ever had, in order. Never edit a shipped migration: add one.
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: queue") { db in
            try db.create(table: "download") { t in
                t.primaryKey("id", .integer)
                t.column("url", .text).notNull()
                t.column("destinationKind", .text).notNull()
                t.column("destinationPath", .text).notNull()
                t.column("partPath", .text).notNull()
                t.column("completedPath", .text)
                t.column("state", .text).notNull()
                t.column("stateReason", .text)
                t.column("waitingUntil", .datetime)
                t.column("position", .integer).notNull()
                t.column("bytesOnDisk", .integer).notNull().defaults(to: 0)
                t.column("totalBytes", .integer)
                t.column("etag", .text)
                t.column("lastModified", .text)
                t.column("finalURL", .text)
                t.column("serverFileName", .text)
                t.column("resumeOffset", .integer)
                t.column("resumeCount", .integer).notNull().defaults(to: 0)
                t.column("bytesSavedByResume", .integer).notNull().defaults(to: 0)
                t.column("unverifiedResume", .boolean).notNull().defaults(to: false)
                t.column("restartCount", .integer).notNull().defaults(to: 0)
                t.column("restartReason", .text)
                t.column("lastStatus", .integer)
                t.column("lastError", .text)
                t.column("failedAttempts", .integer).notNull().defaults(to: 0)
                t.column("createdAt", .datetime).notNull()
                t.column("updatedAt", .datetime).notNull()
                t.column("completedAt", .datetime)
            }
            try db.create(index: "download_position", on: "download", columns: ["position"])
            // Ids are never reused, even after the newest download is removed.
            try db.create(table: "idSequence") { t in
                t.primaryKey("name", .text)
                t.column("next", .integer).notNull()
            }
        }
        migrator.registerMigration("v2: requesters and boot checkpoints") { db in
            try db.create(table: "requester") { t in
                t.autoIncrementedPrimaryKey("id")
                // What `belongsTo("download")` wrote, spelled out: GRDB derives that name through
                // its inflection rules, whose regexes load ICU (about 5 MiB) on every new queue.
                // A test holds the schema to the text this migration always wrote.
                t.column("downloadId", .integer).notNull().indexed().references("download", onDelete: .cascade)
                t.column("position", .integer).notNull()
                t.column("destinationKind", .text).notNull()
                t.column("destinationPath", .text).notNull()
                t.column("completedPath", .text)
            }
            try db.alter(table: "download") { t in
                t.add(column: "checkpointBootID", .text)
                t.add(column: "pausedByShutdown", .boolean).notNull().defaults(to: false)
            }
        }
        migrator.registerMigration("v3: request options and settings") { db in
            try db.alter(table: "download") { t in
                // One `Name: value` per line (a header value never holds a newline).
                t.add(column: "requestHeaders", .text)
                t.add(column: "checksum", .text)
            }
            try db.create(table: "setting") { t in
                t.primaryKey("key", .text)
                t.column("value", .text).notNull()
            }
        }
        migrator.registerMigration("v4: segmented downloads") { db in
            try db.alter(table: "download") { t in
                // `start-next-end` per part, comma-separated; NULL for a file fetched front to back.
                t.add(column: "segments", .text)
                t.add(column: "connections", .integer).notNull().defaults(to: 1)
            }
        }
        migrator.registerMigration("v5: unsynced checkpoints") { db in
            try db.alter(table: "download") { t in
                t.add(column: "checkpointSynced", .boolean).notNull().defaults(to: true)
            }
        }
        migrator.registerMigration("v6: content type") { db in
            try db.alter(table: "download") { t in
                // The media type of the response that started the bytes on disk; NULL when unknown.
                t.add(column: "contentType", .text)
            }
        }
        migrator.registerMigration("v7: written parts") { db in
            try db.alter(table: "download") { t in
                // The parts as written, unsynced, trusted only in the boot of `checkpointBootID`.
                t.add(column: "writtenSegments", .text)
            }
        }
        migrator.registerMigration("v8: completed file stamps") { db in
            try db.alter(table: "download") { t in
                // `size:mtime` per completed file, comma-separated, in the order of the completed paths.
                t.add(column: "completedStamps", .text)
                // The completed files a fetch again replaces, as a JSON array of paths.
                t.add(column: "replacing", .text)
            }
        }
        migrator.registerMigration("v9: resumes checked by overlap") { db in
            try db.alter(table: "download") { t in
                t.add(column: "overlapChecked", .boolean).notNull().defaults(to: false)
            }
        }
        migrator.registerMigration("v10: hooks") { db in
            try db.alter(table: "download") { t in
                // How the hook of the download's ending went (`HookRun.encoded`); NULL for none.
                t.add(column: "hook", .text)
            }
        }
        migrator.registerMigration("v11: last active") { db in
            try db.alter(table: "download") { t in
                // When a transfer last worked on the download: purging for disk space goes least recently used first.
                t.add(column: "lastActive", .datetime)
            }
        }
        migrator.registerMigration("v12: speed limits and history") { db in
            try db.alter(table: "download") { t in
                // The download's own limit in bytes per second; NULL for none.
                t.add(column: "speedLimit", .integer)
            }
            // What happened to each download, its last `HistoryEntry.keptPerDownload` entries;
            // deleted with its row.
            try db.create(table: "history") { t in
                t.autoIncrementedPrimaryKey("id")
                // `belongsTo("download", indexed: false)`, spelled out as in v2.
                t.column("downloadId", .integer).notNull().references("download", onDelete: .cascade)
                t.column("time", .datetime).notNull()
                t.column("kind", .text).notNull()
                t.column("text", .text).notNull()
            }
            // One download's entries in order, and the newest to keep, without a scan.
            try db.create(index: "history_download", on: "history", columns: ["downloadId", "id"])
        }
        migrator.registerMigration("v13: states as stored kinds") { db in
            // Until now `state` held the screen's word, and `waiting` stood for two states: a retry
            // when `waitingUntil` is set, room on disk when it is not. Each is a kind of its own
            // now (`StateKind`); the other words are their kinds' stored words already. Only the
            // column changes: every row keeps its bytes, offsets and reasons.
            try db.execute(sql: "UPDATE download SET state = 'waitingForRetry' WHERE state = 'waiting' AND waitingUntil IS NOT NULL")
            try db.execute(sql: "UPDATE download SET state = 'waitingForSpace' WHERE state = 'waiting' AND waitingUntil IS NULL")
        }
        migrator.registerMigration("v14: queue id") { db in
            // Made once, with the queue (or at its upgrade), and never changed: it marks the
            // queue's part files, so that two queues writing files of one name into one directory
            // never take each other's bytes.
            try db.execute(sql: "INSERT OR IGNORE INTO setting (key, value) VALUES (?, ?)", arguments: [queueIDKey, Self.newQueueID()])
        }
        migrator.registerMigration("v15: validators of a recent change") { db in
            // Rows from before keep If-Range resumes as they were.
            try db.alter(table: "download") { t in
                t.add(column: "recentlyChanged", .boolean).notNull().defaults(to: false)
            }
        }
        return migrator
    }

    // MARK: Reading

    /// The whole queue in order, with each checkpoint's boot.
    public func loadQueue() throws(Failure) -> StoredQueue {
        do {
            return try writer.read { db in
                let records = try DownloadRecord.order(DownloadRecord.Columns.position, DownloadRecord.Columns.id).fetchAll(db)
                let requesters = Dictionary(grouping: try RequesterRecord.fetchAll(db), by: \.downloadId)
                var queue = StoredQueue()
                for record in records {
                    guard let download = record.download(requesters: requesters[record.id] ?? []) else {
                        throw Failure(description: "download \(record.id) in the queue database cannot be read (its url, destination, headers or checksum are invalid)")
                    }
                    queue.downloads.append(download)
                    if let boot = record.checkpointBootID { queue.checkpointBoots[download.id] = boot }
                    if !record.checkpointSynced { queue.unsyncedCheckpoints.insert(download.id) }
                    queue.positions[download.id] = record.position
                }
                let next = try Int64.fetchOne(db, sql: "SELECT next FROM idSequence WHERE name = 'download'") ?? 1
                queue.nextID = max(next, (records.map(\.id).max() ?? 0) + 1)
                return queue
            }
        } catch let failure as Failure {
            throw failure
        } catch let unreadable as UnreadableState {
            throw Failure(description: "download \(unreadable.id) in the queue database cannot be read (its state '\(unreadable.stored)' is none this haul knows)")
        } catch {
            throw Failure(description: "cannot read the queue: \(Self.describe(error))", diskFault: Self.isDiskFault(error))
        }
    }

    // MARK: Writing

    /// Writes `changes` in one transaction.
    public func commit(_ changes: QueueChanges) throws {
        try commit(batch: [changes])
    }

    /// Writes every element of `batch` (each with its own checkpoint boot) in one transaction.
    ///
    /// - Throws: `JournalFailure`, saying in one line why nothing was written.
    public func commit(batch: [QueueChanges]) throws {
        let batch = batch.filter { !$0.isEmpty }
        guard !batch.isEmpty else { return }
        let now = Date()
        // The counts the transaction leaves; taken as known only once it is committed.
        var counts: [Int64: Int] = [:]
        func applyAll(_ db: Database) throws {
            for changes in batch { try Self.apply(changes, db, now: now, counts: &counts, known: historyCounts) }
        }
        do {
            if batch.allSatisfy(\.writtenPartsOnly) {
                // Parts as written, ten times a second while a file is fetched in parts: committed
                // without waiting for the disk (NORMAL: a WAL commit is not synced; a checkpoint
                // of the WAL still is, so a power loss can take it back but never damage the
                // database). Each waiting for FULL's sync on a busy disk, they fell behind the
                // bytes (in a loaded test suite 8 parts were recorded 0.66 s late), and a
                // `kill -9` fetched all of those again.
                try writer.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA synchronous = NORMAL")
                    let written = Result { try db.inTransaction { try applyAll(db); return .commit } }
                    // FULL again whatever happened; the transaction's failure is the one told.
                    let restored = Result { try db.execute(sql: "PRAGMA synchronous = FULL") }
                    try written.get()
                    try restored.get()
                }
            } else {
                try writer.write(applyAll)
            }
            historyCounts.update(counts, removed: batch.flatMap(\.removed))
        } catch let error as DatabaseError {
            RawStatement.settle(writer)
            throw JournalFailure(Self.describe(error), transient: [.SQLITE_BUSY, .SQLITE_LOCKED].contains(error.resultCode), diskFault: Self.isDiskFault(error))
        } catch {
            RawStatement.settle(writer)
            // Not SQLite's refusal (a record that cannot be encoded …): said in haul's words.
            throw JournalFailure("the queue's database refused the write")
        }
    }

    /// A failed write of the queue in haul's words, by SQLite's result code.
    /// Whether `error` says the disk holding the queue is full or failing (`Failure.diskFault`).
    static func isDiskFault(_ error: any Error) -> Bool {
        let code = (error as? DatabaseError)?.resultCode
        return code == .SQLITE_FULL || code == .SQLITE_IOERR
    }

    static func describe(_ error: DatabaseError) -> String {
        switch error.resultCode {
        case .SQLITE_FULL: "the disk holding the queue is full"
        case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_CANTOPEN, .SQLITE_AUTH: "the queue's database cannot be written (read-only or forbidden)"
        case .SQLITE_IOERR: "the disk holding the queue failed to write (I/O error)"
        case .SQLITE_BUSY, .SQLITE_LOCKED: "the queue's database is busy"
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: "the queue's database is damaged"
        default: "the queue's database refused the write (SQLite error \(error.resultCode.primaryResultCode.rawValue))"
        }
    }

    private static func apply(_ changes: QueueChanges, _ db: Database, now: Date, counts: inout [Int64: Int], known: HistoryCounts) throws {
        for id in changes.removed {
            _ = try DownloadRecord.deleteOne(db, key: id.rawValue)
        }
        var highestID: Int64 = 0
        // The saved rows' further requesters are written anew below; their old rows go in one
        // statement (one per row was a fifth of a commit's statements on a thousand small files).
        if !changes.saved.isEmpty {
            try db.cachedStatement(sql: "DELETE FROM requester WHERE downloadId IN (SELECT value FROM json_each(?))")
                .execute(arguments: [jsonList(changes.saved.map(\.id.rawValue))])
            // One statement for all the rows: a commit may save a thousand.
            var upsert = try RawStatement(db, sql: DownloadRecord.upsertSQL)
            for download in changes.saved {
                let key = download.id.rawValue
                highestID = max(highestID, key)
                // The row keeps its creation time, its completion time while it stays completed,
                // and its place unless given one.
                let position = changes.positions[download.id]
                let record = DownloadRecord(
                    download, position: position ?? 0, bootID: changes.bootID, synced: !changes.unsynced.contains(download.id), now: now
                )
                try record.upsert(with: &upsert, keepingPosition: position == nil)
                for (index, destination) in download.extraDestinations.enumerated() {
                    let (kind, path) = DownloadRecord.encode(destination)
                    let completed = download.completedPaths.count > index + 1 ? download.completedPaths[index + 1] : nil
                    let requester = RequesterRecord(
                        id: nil, downloadId: key, position: index, destinationKind: kind, destinationPath: path, completedPath: completed
                    )
                    try requester.insert(db)
                }
            }
        }
        let saved = Set(changes.saved.map(\.id))
        for (id, position) in changes.positions where !saved.contains(id) {
            try db.cachedStatement(sql: "UPDATE download SET position = ? WHERE id = ?").execute(arguments: [position, id.rawValue])
        }
        try appendHistory(changes.history, db, counts: &counts, known: known)
        if let limit = changes.limit {
            try db.cachedStatement(sql: "INSERT INTO setting (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
                .execute(arguments: [Self.limitKey, String(limit.bytesPerSecond ?? 0)])
        }
        if highestID > 0 {
            try db.cachedStatement(sql: """
                INSERT INTO idSequence (name, next) VALUES ('download', ?)
                ON CONFLICT(name) DO UPDATE SET next = max(next, excluded.next)
                """).execute(arguments: [highestID + 1])
        }
    }

    // MARK: History

    /// Appends `entries` to their downloads' histories and trims each to its last
    /// `HistoryEntry.keptPerDownload`, in the caller's transaction. An entry of a download that
    /// is not in the queue (removed meanwhile) is dropped.
    ///
    /// `counts` holds each download's number of entries as this transaction leaves it (from
    /// `known`, else counted in the table at its first entry since the store was opened): a
    /// history is trimmed only in the commit that takes it past the limit. (Trimming every
    /// download a commit touched was 3.8 statements a small file, a third of what its history
    /// cost: a small file has four entries.)
    private static func appendHistory(_ entries: [HistoryEntry], _ db: Database, counts: inout [Int64: Int], known: HistoryCounts) throws {
        guard !entries.isEmpty else { return }
        var insert = try RawStatement(db, sql: historySQL)
        var count: RawStatement?
        var touched: Set<Int64> = []
        for entry in entries {
            let key = entry.download.rawValue
            if counts[key] == nil {
                if let number = known[key] {
                    counts[key] = number
                } else {
                    if count == nil { count = try RawStatement(db, sql: historyCountSQL) }
                    count?.bind(key)
                    counts[key] = Int(try count?.value() ?? 0)
                }
            }
            insert.bind(key)
            insert.bind(StoredDate.text(entry.time))
            insert.bind(entry.kind.rawValue)
            insert.bind(entry.text)
            insert.bind(key)
            try insert.run()
            // 0 when the download is not in the queue.
            counts[key, default: 0] += db.changesCount
            touched.insert(key)
        }
        // Everything older than the download's `keptPerDownload`-th newest entry goes: two short
        // walks of the (downloadId, id) index. (One statement for all of them, numbering each
        // one's entries with a window, cost 365,000 instructions a commit on a thousand small
        // files, more than the entries' inserts.)
        var trim: RawStatement?
        for key in touched where counts[key, default: 0] > HistoryEntry.keptPerDownload {
            if trim == nil { trim = try RawStatement(db, sql: historyTrimSQL) }
            trim?.bind(key)
            trim?.bind(Int64(HistoryEntry.keptPerDownload - 1))
            try trim?.run()
            counts[key] = HistoryEntry.keptPerDownload
        }
    }

    private static let historyCountSQL = "SELECT count(*) FROM history WHERE downloadId = ?"

    private static let historySQL = """
        INSERT INTO history (downloadId, time, kind, text)
        SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM download WHERE id = ?)
        """

    private static let historyTrimSQL = """
        DELETE FROM history WHERE downloadId = ?1 AND id < (
            SELECT id FROM history WHERE downloadId = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2
        )
        """

    /// Keys as a JSON array, for `json_each`: one statement for a list of any length.
    private static func jsonList(_ keys: some Sequence<Int64>) -> String {
        "[" + keys.map(String.init).joined(separator: ",") + "]"
    }

    /// Each download's number of history entries as the last commit left it, for the downloads
    /// written since the store was opened.
    final class HistoryCounts: Sendable {
        private let counts = Mutex<[Int64: Int]>([:])

        subscript(key: Int64) -> Int? {
            counts.withLock { $0[key] }
        }

        /// A commit succeeded: it left `updated`, and took the histories of `removed` with their rows.
        func update(_ updated: [Int64: Int], removed: [DownloadID]) {
            guard !updated.isEmpty || !removed.isEmpty else { return }
            counts.withLock { counts in
                counts.merge(updated) { _, new in new }
                for id in removed { counts[id.rawValue] = nil }
            }
        }
    }

    /// The journal keeps what `commit` is given of the history.
    public var keepsHistory: Bool { true }

    /// One download's history, oldest first (its last `HistoryEntry.keptPerDownload`); with nil,
    /// the queue's latest `HistoryEntry.recentLimit` entries, oldest first.
    public func history(_ id: DownloadID?) throws -> [HistoryEntry] {
        do {
            return try writer.read { db in
                let rows: [Row]
                if let id {
                    rows = try Row.fetchAll(
                        db, sql: "SELECT downloadId, time, kind, text FROM history WHERE downloadId = ? ORDER BY id", arguments: [id.rawValue]
                    )
                } else {
                    rows = try Row.fetchAll(db, sql: """
                        SELECT downloadId, time, kind, text FROM (SELECT * FROM history ORDER BY id DESC LIMIT ?) ORDER BY id
                        """, arguments: [HistoryEntry.recentLimit])
                }
                return rows.compactMap { row in
                    // A kind this version does not know (written by a newer haul) is left out.
                    // So is one whose time cannot be read.
                    guard let kind = HistoryEntry.Kind(rawValue: row["kind"]), let time = StoredDate.date(row, "time") else { return nil }
                    return HistoryEntry(download: DownloadID(row["downloadId"]), time: time, kind: kind, text: row["text"])
                }
            }
        } catch {
            throw Failure(description: "cannot read the history: \(Self.describe(error))")
        }
    }

    // MARK: Settings

    /// The setting that keeps the queue's id (`queueID`).
    static let queueIDKey = "queueID"

    /// 128 random bits in hex.
    static func newQueueID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let text = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }.joined()
    }

    /// The queue's id, made with it (a migration) and never changed: what marks its part files.
    public func queueID() throws(Failure) -> String {
        guard let id = try setting(Self.queueIDKey) else { throw Failure(description: "the queue has no id") }
        return id
    }

    /// The setting that keeps the queue's global speed limit (bytes per second, `0` for none).
    public static let limitKey = "limit"

    /// A setting the queue remembers across runs (`maxActive`, set with `<` and `>`).
    public func setting(_ key: String) throws(Failure) -> String? {
        do {
            return try writer.read { db in try String.fetchOne(db, sql: "SELECT value FROM setting WHERE key = ?", arguments: [key]) }
        } catch {
            throw Failure(description: "cannot read the setting \(key): \(Self.describe(error))")
        }
    }

    public func saveSetting(_ key: String, _ value: String) throws(Failure) {
        do {
            try writer.write { db in
                try db.execute(
                    sql: "INSERT INTO setting (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    arguments: [key, value]
                )
            }
        } catch {
            throw Failure(description: "cannot save the setting \(key): \(Self.describe(error))")
        }
    }

    /// The writer's `PRAGMA synchronous` level (2 is FULL: every commit is fsync'd), for tests and
    /// diagnostics.
    public func synchronousLevel() throws -> Int {
        try writer.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// The schema migrations applied so far, oldest first (for tests and diagnostics).
    public func appliedMigrations() throws -> [String] {
        try writer.read { db in try Self.migrator.appliedMigrations(db) }
    }

    /// A failed open or read of the queue in haul's words, by SQLite's result code: said once,
    /// never as an error's type or a bare code (a damaged file read `26 (file is not a database):
    /// file is not a database`).
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DatabaseError else { return "the queue's database could not be used" }
        switch error.resultCode {
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            return "the file is not a queue database, or it is damaged (move it aside, and haul starts an empty queue)"
        case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH: return "it cannot be opened (forbidden, or its directory is gone)"
        case .SQLITE_READONLY: return "the queue's database cannot be written (read-only)"
        case .SQLITE_IOERR: return "the disk holding the queue failed (I/O error)"
        case .SQLITE_FULL, .SQLITE_BUSY, .SQLITE_LOCKED: return describe(error)  // a write's words, the same here
        default: return "SQLite error \(error.resultCode.primaryResultCode.rawValue)" + (error.message.map { " (\($0))" } ?? "")
        }
    }
}
