@testable import DownloadStore
import Foundation
import GRDB
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

    /// Dates are written as GRDB writes them, so that they read back the same.
    @Test(arguments: [0, -1.25, 1_000_000_000.5, 1_795_000_000.9999, 1_795_000_000.0004, 1_764_000_000.123, 253_402_300_799.999])
    func datesAreWrittenAsGRDBWritesThem(_ interval: Double) {
        let date = Date(timeIntervalSince1970: interval)
        #expect(StoredDate.text(date) == String.fromDatabaseValue(date.databaseValue))
    }
}
