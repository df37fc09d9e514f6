import DownloadCore
import Foundation
import Testing

@Suite struct SessionSnapshotTests {
    func download(_ id: Int64, bytes: Int64 = 0) throws -> Download {
        var download = Download(
            id: DownloadID(id), url: try #require(URL(string: "http://example.test/\(id)")), destination: .directory("/d"), partPath: "/d/\(id).part"
        )
        download.bytesOnDisk = bytes
        return download
    }

    @Test func replaceShowsARowAsItWasAndIgnoresOneNotInTheQueue() throws {
        var snapshot = SessionSnapshot(downloads: [try download(1), try download(2), try download(3)], maxActive: 3)
        snapshot.replace(try download(2, bytes: 500))
        snapshot.replace(try download(9, bytes: 1))
        #expect(snapshot.downloads.map(\.bytesOnDisk) == [0, 500, 0])
        #expect(snapshot[DownloadID(2)]?.bytesOnDisk == 500)
        #expect(snapshot[DownloadID(9)] == nil)
        // Setting the rows indexes them again.
        snapshot.downloads = [try download(3, bytes: 7)]
        #expect(snapshot[DownloadID(3)]?.bytesOnDisk == 7)
        #expect(snapshot[DownloadID(1)] == nil)
    }
}
