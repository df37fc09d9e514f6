import DownloadCore
import DownloadStore
import Foundation
import GRDB
import Testing
import TestSupport

/// The queue database on a real SQLite file in a temporary directory.
@Suite struct AppDatabaseTests {
    let store: StoreFixture

    init() throws {
        store = try StoreFixture()
    }

    var path: String { store.path }

    func download(_ id: Int64, _ state: DownloadState = .queued) throws -> Download {
        try store.download(id, state, url: "https://user:secret@example.com/files/\(id).iso?token=abc")
    }

    func commit(_ database: AppDatabase, saving downloads: [Download], boot: String? = "boot-1") throws {
        var changes = QueueChanges()
        changes.saved = downloads
        for (index, download) in downloads.enumerated() { changes.positions[download.id] = index }
        changes.bootID = boot
        try database.commit(changes)
    }

    /// Every commit is fsync'd (`synchronous = FULL`), on a new database and on one opened again:
    /// the pool's own WAL set-up (NORMAL) must not win, or a power loss takes back shown commits.
    @Test func everyCommitIsSynced() throws {
        let created = try AppDatabase.open(at: path)
        #expect(try created.synchronousLevel() == 2)
        try commit(created, saving: [try download(1)])
        let reopened = try AppDatabase.open(at: path)
        #expect(try reopened.synchronousLevel() == 2)
    }

    /// Parts as written alone are committed without waiting for the disk (NORMAL for that one
    /// transaction); every other commit is synced as before.
    @Test func partsAsWrittenAreCommittedAndTheNextCommitIsSyncedAgain() throws {
        let database = try AppDatabase.open(at: path)
        var row = try download(1, .downloading)
        row.totalBytes = 2000
        row.segments = [Segment(start: 0, next: 100, end: 1000), Segment(start: 1000, next: 1000, end: 2000)]
        try commit(database, saving: [row])
        row.writtenSegments = [Segment(start: 0, next: 400, end: 1000), Segment(start: 1000, next: 1300, end: 2000)]
        var written = QueueChanges()
        written.saved = [row]
        written.positions = [row.id: 0]
        written.bootID = "boot-1"
        written.writtenPartsOnly = true
        try database.commit(written)
        #expect(try database.synchronousLevel() == 2, "FULL again after it")
        let queue = try AppDatabase.open(at: path).loadQueue()
        #expect(queue.downloads.first?.writtenSegments == row.writtenSegments)
        #expect(queue.downloads.first?.segments == row.segments)
    }

    @Test func requestOptionsAndSettingsSurviveAndBatchesKeepEachBoot() throws {
        let database = try AppDatabase.open(at: path)
        var first = try download(1)
        first.options = RequestOptions(
            headers: [HeaderField(name: "Authorization", value: "Bearer x: y"), HeaderField(name: "X-Two", value: "")],
            checksum: Checksum(algorithm: .sha512, hex: String(repeating: "c", count: 128)),
            connections: 8
        )
        first.totalBytes = 3000
        first.segments = [Segment(start: 0, next: 700, end: 1000), Segment(start: 1000, next: 1000, end: 3000)]
        first.bytesOnDisk = 700
        let second = try download(2)
        var old = QueueChanges()
        old.saved = [first]
        old.positions = [first.id: 0]
        old.bootID = "boot-old"
        var new = QueueChanges()
        new.saved = [second]
        new.positions = [second.id: 1]
        new.bootID = "boot-new"
        new.unsynced = [second.id]
        try database.commit(batch: [old, new])
        let queue = try database.loadQueue()
        #expect(queue.unsyncedCheckpoints == [second.id], "a --no-fsync checkpoint stays marked")
        #expect(queue.downloads.map(\.id) == [first.id, second.id])
        #expect(queue.downloads[0].options == first.options)
        #expect(queue.downloads[0].segments == first.segments, "every part's offset survives")
        #expect(queue.downloads[1].options == RequestOptions())
        #expect(queue.downloads[1].segments.isEmpty)
        #expect(queue.checkpointBoots == [first.id: "boot-old", second.id: "boot-new"])

        #expect(try database.setting("maxActive") == nil)
        try database.saveSetting("maxActive", "5")
        try database.saveSetting("maxActive", "6")
        #expect(try AppDatabase.open(at: path).setting("maxActive") == "6")
        #expect(try database.appliedMigrations().last == "v15: validators of a recent change")
    }

    /// Each queue gets an id with it (it marks the queue's part files), kept as long as the queue.
    @Test func aQueueHasAnIdOfItsOwnThatNeverChanges() throws {
        let directory = try TemporaryDirectory("haul-db")
        let first = try AppDatabase.open(at: directory.path("a.sqlite")).queueID()
        #expect(first.count == 32 && first.allSatisfy(\.isHexDigit), "\(first)")
        #expect(try AppDatabase.open(at: directory.path("a.sqlite")).queueID() == first, "the same queue opened again")
        #expect(try AppDatabase.open(at: directory.path("b.sqlite")).queueID() != first, "another queue")
    }

    @Test func everyFieldSurvivesARoundTrip() throws {
        // Given a download with every field set, two further requesters and a waiting state
        let database = try AppDatabase.open(at: path)
        var full = try download(7, .waiting(until: Date(timeIntervalSince1970: 1_800_000_000.25), reason: "HTTP 503"))
        full.extraDestinations = [.directory("/copies"), .file("/other/7.iso")]
        full.bytesOnDisk = 123_456
        full.totalBytes = 999_999
        full.etag = "\"abc\""
        full.lastModified = "Wed, 21 Oct 2026 07:28:00 GMT"
        full.finalURL = URL(string: "https://cdn.example.com/7.iso")
        full.serverFileName = "seven.iso"
        full.resumeOffset = 100_000
        full.resumeCount = 2
        full.bytesSavedByResume = 150_000
        full.unverifiedResume = true
        full.restartCount = 1
        full.restartReason = "resource changed"
        full.lastStatus = 503
        full.lastError = "HTTP 503"
        full.failedAttempts = 3
        full.pausedByShutdown = true
        full.contentType = "application/x-iso9660-image"
        full.overlapChecked = true
        full.limit = 512_000
        full.segments = [Segment(start: 0, next: 100_000, end: 500_000), Segment(start: 500_000, next: 523_456, end: 999_999)]
        full.writtenSegments = [Segment(start: 0, next: 200_000, end: 500_000), Segment(start: 500_000, next: 600_000, end: 999_999)]
        full.replacing = ["/data/7.iso", "/copies/7 (é, \"quoted\").iso"]
        full.replacingStamps = [FileStamp(size: 1000, modified: 1_790_000_000_000_000_001), FileStamp(size: 10, modified: nil)]
        var done = try download(8, .completed)
        done.extraDestinations = [.file("/b/8.iso")]
        done.completedPaths = ["/data/8.iso", "/b/8.iso"]
        done.completedStamps = [FileStamp(size: 10, modified: 1_790_000_000_123_456_789), FileStamp(size: 10, modified: nil)]
        done.totalBytes = 10
        done.bytesOnDisk = 10
        done.hook = HookRun(event: .complete, status: .exited(code: 0, seconds: 1.0625))
        var failed = try download(9, .failed(reason: "HTTP 404 Not Found"))
        failed.hook = HookRun(event: .fail, status: .couldNotStart(reason: "cannot run /x y: No such file or directory"))
        // Completed and not placed yet: the finished part file's stamp, and no path.
        var unplaced = try download(10, .completed)
        unplaced.completedStamps = [FileStamp(size: 10, modified: 1_790_000_000_987_654_321)]
        unplaced.totalBytes = 10
        unplaced.bytesOnDisk = 10
        // When it is committed and read back by a new connection
        try commit(database, saving: [full, done, failed, unplaced])
        let queue = try AppDatabase.open(at: path).loadQueue()
        // Then nothing was lost, in queue order, with the boot of the checkpoint
        #expect(queue.downloads == [full, done, failed, unplaced])
        #expect(queue.checkpointBoots[DownloadID(7)] == "boot-1")
        #expect(queue.nextID == 11)
    }

    @Test func positionsFollowTheQueueOrderAndRemovalsDelete() throws {
        let database = try AppDatabase.open(at: path)
        let rows = try (1...4).map { try download($0) }
        try commit(database, saving: rows)
        var changes = QueueChanges()
        changes.positions = [DownloadID(4): 0, DownloadID(1): 1, DownloadID(2): 2]
        changes.removed = [DownloadID(3)]
        try database.commit(changes)
        let queue = try database.loadQueue()
        #expect(queue.downloads.map(\.id.rawValue) == [4, 1, 2])
    }

    @Test func idsAreNotReusedAfterTheNewestIsRemoved() throws {
        let database = try AppDatabase.open(at: path)
        try commit(database, saving: [try download(1), try download(2)])
        var changes = QueueChanges()
        changes.removed = [DownloadID(2)]
        try database.commit(changes)
        #expect(try database.loadQueue().nextID == 3)
    }

    @Test func requestersAreReplacedNotDuplicated() throws {
        let database = try AppDatabase.open(at: path)
        var row = try download(1)
        row.extraDestinations = [.file("/x")]
        try commit(database, saving: [row])
        row.extraDestinations = [.file("/x"), .file("/y")]
        try commit(database, saving: [row])
        #expect(try database.loadQueue().downloads.first?.extraDestinations == [.file("/x"), .file("/y")])
        let requesters = try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM requester") }
        #expect(requesters == 2)
    }

    /// One statement deletes the old requesters of every row a commit saves, and only theirs.
    @Test func aCommitRewritesTheRequestersOfTheRowsItSavesOnly() throws {
        let database = try AppDatabase.open(at: path)
        var first = try download(1)
        var second = try download(2)
        first.extraDestinations = [.file("/x")]
        second.extraDestinations = [.file("/y"), .file("/z")]
        try commit(database, saving: [first, second])
        first.extraDestinations = []
        var third = try download(3)
        third.extraDestinations = [.file("/w")]
        try commit(database, saving: [first, third])
        let queue = try database.loadQueue().downloads
        #expect(queue.map(\.extraDestinations) == [[], [.file("/y"), .file("/z")], [.file("/w")]])
        let requesters = try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM requester") }
        #expect(requesters == 3)
    }

    @Test func theFilesArePrivate() throws {
        _ = try AppDatabase.open(at: path)
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    @Test func aDatabaseFromTheFirstSchemaMigratesWithItsRows() throws {
        // Given a database that only knows the first migration, with a row written the old way
        let old = try DatabaseQueue(path: path)
        try AppDatabase.migrator.migrate(old, upTo: "v1: queue")
        try old.write { db in
            try db.execute(sql: """
                INSERT INTO download (id, url, destinationKind, destinationPath, partPath, state, position, bytesOnDisk,
                                      totalBytes, etag, resumeCount, createdAt, updatedAt)
                VALUES (5, 'http://example.com/a.bin', 'file', '/d/a.bin', '/d/a.bin.part', 'paused', 0, 4096,
                        8192, '"e1"', 1, '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000')
                """)
        }
        try old.close()
        // When the current code opens it
        let database = try AppDatabase.open(at: path)
        // Then every migration is applied and the row reads back with the new fields at their defaults
        #expect(try database.appliedMigrations() == [
            "v1: queue", "v2: requesters and boot checkpoints", "v3: request options and settings", "v4: segmented downloads",
            "v5: unsynced checkpoints", "v6: content type", "v7: written parts", "v8: completed file stamps",
            "v9: resumes checked by overlap", "v10: hooks", "v11: last active", "v12: speed limits and history",
            "v13: states as stored kinds", "v14: queue id", "v15: validators of a recent change",
        ])
        #expect(try database.queueID().count == 32, "an upgraded queue gets its id too")
        let queue = try database.loadQueue()
        let row = try #require(queue.downloads.first)
        #expect(row.id == DownloadID(5))
        #expect(row.state == .paused)
        #expect(row.bytesOnDisk == 4096)
        #expect(row.totalBytes == 8192)
        #expect(row.etag == "\"e1\"")
        #expect(row.resumeCount == 1)
        #expect(row.pausedByShutdown == false)
        #expect(row.extraDestinations.isEmpty)
        #expect(row.limit == nil, "no download had a limit of its own before v12")
        #expect(row.recentlyChanged == false, "resumes of rows from before v15 keep their If-Range")
        #expect(queue.checkpointBoots.isEmpty)
        #expect(queue.unsyncedCheckpoints.isEmpty, "checkpoints from before v5 were all synced")
        #expect(queue.nextID == 6)
    }

    @Test func aReadOnlyOpenRefusesAnUnmigratedDatabase() throws {
        let old = try DatabaseQueue(path: path)
        try AppDatabase.migrator.migrate(old, upTo: "v1: queue")
        try old.close()
        #expect(throws: AppDatabase.Failure.self) { try AppDatabase.open(at: path, readOnly: true) }
    }

    @Test func aCorruptRowIsReportedNotGuessed() throws {
        let database = try AppDatabase.open(at: path)
        try commit(database, saving: [try download(1)])
        try DatabaseQueue(path: path).write { db in try db.execute(sql: "UPDATE download SET state = 'exploded'") }
        #expect(throws: AppDatabase.Failure.self) { try database.loadQueue() }
    }
}

@Suite struct StateDirectoryTests {
    @Test func theDirectoryIsResolvedInTheDocumentedOrder() throws {
        #expect(try StateDirectory.resolve(option: "/opt", environment: ["HAUL_STATE_DIR": "/h", "HOME": "/home/u"]) == "/opt")
        #expect(try StateDirectory.resolve(option: nil, environment: ["HAUL_STATE_DIR": "/h", "XDG_STATE_HOME": "/x"]) == "/h")
        #expect(try StateDirectory.resolve(option: nil, environment: ["XDG_STATE_HOME": "/x", "HOME": "/home/u"]) == "/x/haul")
        #expect(try StateDirectory.resolve(option: nil, environment: ["XDG_STATE_HOME": "relative", "HOME": "/home/u"]) == "/home/u/.local/state/haul")
        #expect(throws: StateDirectory.Failure.self) { try StateDirectory.resolve(option: nil, environment: [:]) }
    }

    @Test func itIsCreatedPrivateAndTightenedWhenOpen() throws {
        let scratch = try TemporaryDirectory("haul-state")
        defer { withExtendedLifetime(scratch) {} }
        let base = scratch.path("base")
        let directory = try StateDirectory(creatingAt: base + "/nested/state")
        var info = stat()
        #expect(stat(directory.path, &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(chmod(directory.path, 0o755) == 0)
        _ = try StateDirectory(creatingAt: directory.path)
        #expect(stat(directory.path, &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    /// A queue file that is not a database (overwritten, damaged) is refused in haul's words and
    /// left as it is: never erased, never migrated over.
    @Test func aDamagedQueueIsRefusedInWordsAndLeftAlone() throws {
        let scratch = try TemporaryDirectory("haul-damaged")
        defer { withExtendedLifetime(scratch) {} }
        let path = scratch.path("queue.sqlite")
        let garbage = Data(repeating: 0x67, count: 8192)
        try garbage.write(to: URL(fileURLWithPath: path))
        for readOnly in [false, true] {
            #expect {
                _ = try AppDatabase.open(at: path, readOnly: readOnly)
            } throws: { error in
                (error as? AppDatabase.Failure)?.description
                    == "cannot open the queue database \(path): the file is not a queue database, or it is damaged (move it aside, and haul starts an empty queue)"
            }
        }
        #expect(FileManager.default.contents(atPath: path) == garbage)
    }

    @Test func theLockNamesItsHolderAndIsReleasedWithIt() async throws {
        let scratch = try TemporaryDirectory("haul-lock")
        defer { withExtendedLifetime(scratch) {} }
        let base = scratch.path("base")
        let directory = try StateDirectory(creatingAt: base)
        var lock: QueueLock? = try directory.lock()
        #expect(try String(contentsOfFile: directory.lockPath, encoding: .utf8) == "\(getpid())\n")
        #expect {
            try directory.lock()
        } throws: { error in
            (error as? StateDirectory.Failure)?.description == "queue in use by pid \(getpid()) (\(base))"
        }
        #expect(lock != nil)
        lock = nil
        // Soon rather than at once: a process another test starts meanwhile holds a copy of the
        // lock's descriptor until its `exec` (`LiveHolderTests`).
        var again: QueueLock?
        #expect(try await eventually(timeout: 2, "the lock taken again") {
            again = try? directory.lock()
            return again != nil
        })
        withExtendedLifetime(again) {}
    }
}
