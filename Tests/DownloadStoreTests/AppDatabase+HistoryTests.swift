import DownloadCore
import DownloadStore
import Foundation
import GRDB
import Testing

/// Each download's history and the remembered global limit, on a real SQLite file.
@Suite struct AppDatabaseHistoryTests {
    let store: StoreFixture

    init() throws {
        store = try StoreFixture()
    }

    var path: String { store.path }

    func download(_ id: Int64, _ state: DownloadState = .queued) throws -> Download {
        try store.download(id, state)
    }

    func entry(_ id: Int64, _ number: Int, _ kind: HistoryEntry.Kind = .started) -> HistoryEntry {
        HistoryEntry(download: DownloadID(id), time: Date(timeIntervalSince1970: 1_800_000_000 + Double(number) / 8), kind: kind, text: "entry \(number) of \(id)")
    }

    @Test func entriesAreKeptInOrderAndTrimmedToTheLastHundredPerDownloadInTheSameCommit() throws {
        // Given two downloads committed with their rows
        let database = try AppDatabase.open(at: path)
        var changes = QueueChanges()
        changes.saved = [try download(1), try download(2)]
        changes.positions = [DownloadID(1): 0, DownloadID(2): 1]
        changes.history = [entry(1, 0, .added), entry(2, 0, .added)]
        try database.commit(changes)
        // When 150 more entries of the first come in three commits, the second's in between
        for batch in 0..<3 {
            var more = QueueChanges()
            more.history = (1...50).map { entry(1, batch * 50 + $0) } + [entry(2, batch + 1, .response)]
            try database.commit(more)
        }
        // Then the first keeps its last hundred, oldest first, with their times, kinds and words
        let first = try database.history(DownloadID(1))
        #expect(first.count == HistoryEntry.keptPerDownload)
        #expect(first.first == entry(1, 51))
        #expect(first.last == entry(1, 150))
        #expect(try database.history(DownloadID(2)) == [entry(2, 0, .added), entry(2, 1, .response), entry(2, 2, .response), entry(2, 3, .response)])
        // And the queue's recent entries are the latest in the order they came
        let recent = try database.history(nil)
        #expect(recent.count == 104)
        #expect(recent.last == entry(2, 3, .response))
        #expect(recent.first == entry(2, 0, .added), "the second download's first entry came before the first's kept ones")
        #expect(try database.history(DownloadID(3)).isEmpty)
    }

    /// A history is trimmed in the commit that takes it past the limit, its count read from the
    /// table the first time a store opened since writes to it.
    @Test func aHistoryIsTrimmedInTheCommitThatTakesItPastTheLimitAfterAReopen() throws {
        // Given a download with 98 entries, written by an earlier store
        do {
            let earlier = try AppDatabase.open(at: path)
            var changes = QueueChanges()
            changes.saved = [try download(1)]
            changes.history = (0..<98).map { entry(1, $0) }
            try earlier.commit(changes)
        }
        let database = try AppDatabase.open(at: path)
        func add(_ numbers: ClosedRange<Int>) throws {
            var more = QueueChanges()
            more.history = numbers.map { entry(1, $0) }
            try database.commit(more)
        }
        // When two more come one at a time, it keeps all of them: exactly the limit
        try add(98...98)
        try add(99...99)
        #expect(try database.history(DownloadID(1)).count == HistoryEntry.keptPerDownload)
        #expect(try database.history(DownloadID(1)).first == entry(1, 0))
        // Then the next one takes it past the limit, and the oldest goes in the same commit
        try add(100...100)
        var kept = try database.history(DownloadID(1))
        #expect(kept.count == HistoryEntry.keptPerDownload)
        #expect(kept.first == entry(1, 1))
        #expect(kept.last == entry(1, 100))
        // And so on, five at a time
        try add(101...105)
        kept = try database.history(DownloadID(1))
        #expect(kept.count == HistoryEntry.keptPerDownload)
        #expect(kept.first == entry(1, 6))
    }

    @Test func theQueuesRecentHistoryHoldsTheLatestTwoHundred() throws {
        let database = try AppDatabase.open(at: path)
        var changes = QueueChanges()
        changes.saved = try (1...3).map { try download($0) }
        changes.history = (1...3).flatMap { id in (0..<90).map { entry(Int64(id), $0) } }
        try database.commit(changes)
        let recent = try database.history(nil)
        #expect(recent.count == HistoryEntry.recentLimit)
        #expect(recent.first == entry(1, 70))
        #expect(recent.last == entry(3, 89))
    }

    @Test func aRemovedDownloadTakesItsHistoryAndAnEntryOfAnUnknownOneIsDropped() throws {
        let database = try AppDatabase.open(at: path)
        var changes = QueueChanges()
        changes.saved = [try download(1, .completed), try download(2)]
        changes.history = [entry(1, 1, .completed), entry(2, 1), entry(9, 1)]
        try database.commit(changes)
        #expect(try database.history(nil) == [entry(1, 1, .completed), entry(2, 1)], "download 9 is not in the queue")
        var removal = QueueChanges()
        removal.removed = [DownloadID(1)]
        // An entry that comes with its download's removal goes with it.
        removal.history = [entry(1, 2, .paused)]
        try database.commit(removal)
        #expect(try database.history(DownloadID(1)).isEmpty)
        #expect(try database.history(nil) == [entry(2, 1)])
    }

    @Test func theGlobalLimitIsASettingWrittenWithTheCommit() throws {
        let database = try AppDatabase.open(at: path)
        #expect(try database.setting(AppDatabase.limitKey) == nil)
        var changes = QueueChanges()
        changes.limit = QueueChanges.LimitSetting(200 * 1024)
        #expect(!changes.isEmpty)
        try database.commit(changes)
        #expect(try AppDatabase.open(at: path).setting(AppDatabase.limitKey) == "204800")
        changes.limit = QueueChanges.LimitSetting(nil)
        try database.commit(changes)
        #expect(try database.setting(AppDatabase.limitKey) == "0", "none, remembered as none")
    }

    @Test func anOldQueueGetsAnEmptyHistoryAndTheNewColumn() throws {
        let old = try DatabaseQueue(path: path)
        try AppDatabase.migrator.migrate(old, upTo: "v11: last active")
        try old.write { db in
            try db.execute(sql: """
                INSERT INTO download (id, url, destinationKind, destinationPath, partPath, state, position, bytesOnDisk, createdAt, updatedAt)
                VALUES (4, 'http://example.com/a.bin', 'file', '/d/a.bin', '/d/a.bin.part', 'paused', 0, 0,
                        '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000')
                """)
        }
        try old.close()
        let database = try AppDatabase.open(at: path)
        #expect(try database.history(DownloadID(4)).isEmpty)
        #expect(try database.loadQueue().downloads.first?.limit == nil)
        var changes = QueueChanges()
        changes.history = [entry(4, 1, .paused)]
        try database.commit(changes)
        #expect(try database.history(DownloadID(4)) == [entry(4, 1, .paused)])
    }
}
