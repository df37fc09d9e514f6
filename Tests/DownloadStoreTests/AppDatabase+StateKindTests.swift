import DownloadCore
@testable import DownloadStore
import Foundation
import GRDB
import Testing

/// The `state` column holds the store's own kind of each state (`StateKind`), not the screen's word,
/// and a queue written with the words reads back the same after the v13 migration.
@Suite struct AppDatabaseStateKindTests {
    let store: StoreFixture

    init() throws {
        store = try StoreFixture()
    }

    /// One row per old word as v12 wrote them, each with bytes, an offset and a reason of its own.
    private static let oldRows: [(id: Int64, word: String, waitingUntil: String?, reason: String?)] = [
        (1, "queued", nil, nil),
        (2, "downloading", nil, nil),
        (3, "paused", nil, nil),
        (4, "waiting", "2026-01-01 00:10:00.000", "HTTP 503"),
        (5, "waiting", nil, "waiting for disk space (196 KiB free, floor 245 KiB)"),
        (6, "completed", nil, nil),
        (7, "failed", nil, "HTTP 404 Not Found"),
        (8, "cancelled", nil, nil),
    ]

    @Test func aQueueWrittenWithTheScreensWordsReadsTheSameStatesAfterTheMigration() throws {
        // Given a v12 database whose rows carry the screen's words, with a requester on one
        let old = try DatabaseQueue(path: store.path)
        try AppDatabase.migrator.migrate(old, upTo: "v12: speed limits and history")
        try old.write { db in
            for row in Self.oldRows {
                try db.execute(sql: """
                    INSERT INTO download (id, url, destinationKind, destinationPath, partPath, state, stateReason, waitingUntil,
                                          position, bytesOnDisk, totalBytes, resumeOffset, resumeCount, createdAt, updatedAt)
                    VALUES (?, ?, 'file', ?, ?, ?, ?, ?, ?, ?, 1000000, ?, 1, '2026-01-01 00:00:00.000', '2026-01-01 00:00:00.000')
                    """, arguments: [row.id, "http://example.com/\(row.id).bin", "/d/\(row.id).bin", "/d/\(row.id).bin.part", row.word,
                                     row.reason, row.waitingUntil, 10 - row.id, row.id * 1000, row.id * 100])
            }
            try db.execute(sql: """
                INSERT INTO requester (downloadId, position, destinationKind, destinationPath) VALUES (6, 0, 'directory', '/copies')
                """)
        }
        try old.close()

        // When the current code opens it
        let database = try AppDatabase.open(at: store.path)

        // Then every row is there with its state, its bytes and its offset
        #expect(try database.appliedMigrations().contains("v13: states as stored kinds"))
        let queue = try database.loadQueue()
        #expect(queue.downloads.map(\.id.rawValue) == [8, 7, 6, 5, 4, 3, 2, 1], "no row lost, in queue order")
        let states = Dictionary(uniqueKeysWithValues: queue.downloads.map { ($0.id.rawValue, $0.state) })
        #expect(states[1] == .queued)
        #expect(states[2] == .downloading)
        #expect(states[3] == .paused)
        #expect(states[4] == .waiting(until: Date(timeIntervalSince1970: 1_767_226_200), reason: "HTTP 503"))
        #expect(states[5] == .waitingForSpace(reason: "waiting for disk space (196 KiB free, floor 245 KiB)"))
        #expect(states[6] == .completed)
        #expect(states[7] == .failed(reason: "HTTP 404 Not Found"))
        #expect(states[8] == .cancelled)
        for download in queue.downloads {
            #expect(download.bytesOnDisk == download.id.rawValue * 1000, "the bytes of \(download.id)")
            #expect(download.resumeOffset == download.id.rawValue * 100, "the offset of \(download.id)")
            #expect(download.totalBytes == 1_000_000)
            #expect(download.resumeCount == 1)
        }
        #expect(queue.downloads.first { $0.id == DownloadID(6) }?.extraDestinations == [.directory("/copies")])

        // And the column holds the kinds, not the words
        let stored = try DatabaseQueue(path: store.path).read { db in
            try Row.fetchAll(db, sql: "SELECT id, state FROM download ORDER BY id").map { row -> String in row["state"] }
        }
        #expect(stored == ["queued", "downloading", "paused", "waitingForRetry", "waitingForSpace", "completed", "failed", "cancelled"])
    }

    @Test func everyStateIsStoredAsItsKindAndReadBack() throws {
        // Given one download in each state, committed
        let database = try AppDatabase.open(at: store.path)
        let states: [DownloadState] = [
            .queued, .downloading, .paused, .waiting(until: Date(timeIntervalSince1970: 1_800_000_000.5), reason: "HTTP 503"),
            .waitingForSpace(reason: "waiting for disk space (disk full, 0 B free, floor 245 KiB)"), .completed,
            .failed(reason: "HTTP 410 Gone"), .cancelled,
        ]
        let downloads = try states.enumerated().map { index, state in try store.download(Int64(index + 1), state) }
        var changes = QueueChanges()
        changes.saved = downloads
        for (index, download) in downloads.enumerated() { changes.positions[download.id] = index }
        try database.commit(changes)

        // Then each row holds its kind's own stored word, whatever the screen says
        let stored = try DatabaseQueue(path: store.path).read { db in
            try Row.fetchAll(db, sql: "SELECT state FROM download ORDER BY id").map { row -> String in row["state"] }
        }
        #expect(stored == ["queued", "downloading", "paused", "waitingForRetry", "waitingForSpace", "completed", "failed", "cancelled"])
        #expect(Set(stored).count == StateKind.allCases.count, "one stored word per kind")
        // And each reads back as it was
        #expect(try AppDatabase.open(at: store.path).loadQueue().downloads.map(\.state) == states)
    }

    @Test func aStateThisVersionDoesNotKnowIsReportedWithItsRow() throws {
        let database = try AppDatabase.open(at: store.path)
        var changes = QueueChanges()
        changes.saved = [try store.download(3)]
        changes.positions = [DownloadID(3): 0]
        try database.commit(changes)
        // The old word is no kind any more: a row a migration missed would be reported, not guessed.
        try DatabaseQueue(path: store.path).write { db in try db.execute(sql: "UPDATE download SET state = 'waiting'") }
        #expect {
            try database.loadQueue()
        } throws: { error in
            (error as? AppDatabase.Failure)?.description == "download 3 in the queue database cannot be read (its state 'waiting' is none this haul knows)"
        }
    }
}
