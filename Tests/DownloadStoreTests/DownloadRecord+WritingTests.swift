@testable import DownloadStore
import Foundation
import GRDB
import Testing

/// The row writer binds every column of the `download` table, and only those.
@Suite struct DownloadRecordWritingTests {
    @Test func theUpsertNamesEveryColumnOfTheTable() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("haul-record-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let queue = try DatabaseQueue(path: directory + "/queue.sqlite")
        try AppDatabase.migrator.migrate(queue)
        let columns = try queue.read { db in try db.columns(in: "download").map(\.name) }
        #expect(Set(columns) == Set(DownloadRecord.columnNames))
        #expect(columns.count == DownloadRecord.columnNames.count)
    }
}
