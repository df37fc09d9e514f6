import DownloadCore
import Foundation
import Testing

/// Stamps of completed files and the fetch-again transition (issue 16, item 5).
@Suite struct FileStampTests {
    @Test func aStampSaysHowTheFileChanged() throws {
        let placed = FileStamp(size: 1000, modified: 5)
        #expect(placed.change(to: FileStamp(size: 1000, modified: 5)) == nil)
        #expect(placed.change(to: FileStamp(size: 10, modified: 9)) == "10 bytes, was 1000")
        #expect(placed.change(to: FileStamp(size: 1000, modified: 6)) == "modified since it was completed")
        // A stamp from before stamps were kept compares the size only.
        #expect(FileStamp(size: 1000, modified: nil).change(to: FileStamp(size: 1000, modified: 6)) == nil)
        #expect(FileStamp(encoded: Substring(placed.encoded)) == placed)
        #expect(FileStamp(encoded: "42") == FileStamp(size: 42, modified: nil))
        #expect(FileStamp(encoded: "x:1") == nil)
        #expect(FileStamp(encoded: "-1") == nil)
    }

    @Test func aCompletedDownloadFetchedAgainReplacesItsFilesWhereTheyAre() throws {
        var m = SessionStateMachine(configuration: .init(maxActive: 1))
        let url = URL(string: "http://h/f.bin")!
        let (id, started) = try m.schedule(url: url, destination: .directory("/d"))
        guard case .startTransfer(let order)? = started.last else {
            Issue.record("\(started)")
            return
        }
        m.transferResponded(id, attempt: order.attempt, info: .init(
            status: 200, total: 10, validators: Validators(etag: "\"v1\"", lastModified: nil), finalURL: nil, serverFileName: nil, disposition: .fresh
        ))
        _ = m.transferFinished(id, attempt: order.attempt, outcome: .completed, bytesOnDisk: 10, now: Date(), jitter: 0)
        _ = m.finalized(id, paths: ["/d/f.bin"], stamps: [FileStamp(size: 10, modified: 1)])
        #expect(m.download(id)?.completedStamps == [FileStamp(size: 10, modified: 1)])

        let actions = try m.fetchAgain(id, seen: (0, FileStamp(size: 4, modified: 3)))
        let again = try #require(m.download(id))
        #expect(again.replacingStamps == [FileStamp(size: 4, modified: 3)], "the changed file as it was seen, which it must still be to be replaced")
        #expect(again.state == .downloading, "started at once: a slot is free")
        #expect(again.replacing == ["/d/f.bin"])
        #expect(again.completedPaths.isEmpty && again.completedStamps.isEmpty)
        #expect(again.etag == nil && again.totalBytes == nil && again.bytesOnDisk == 0, "nothing of the old version is trusted")
        guard case .startTransfer(let second)? = actions.last else {
            Issue.record("\(actions)")
            return
        }
        #expect(m.resumeBasis(id)?.validators.isEmpty == true)
        _ = m.transferFinished(id, attempt: second.attempt, outcome: .completed, bytesOnDisk: 10, now: Date(), jitter: 0)
        _ = m.finalized(id, paths: ["/d/f.bin"], stamps: [FileStamp(size: 10, modified: 2)])
        #expect(m.download(id)?.replacing == [])
        #expect(m.download(id)?.replacingStamps == [])
        #expect(m.completedDownload(of: url, for: .directory("/d"))?.id == id, "still the one row of this URL")
        #expect(throws: SessionStateMachine.TransitionError.self) { _ = try m.fetchAgain(DownloadID(99)) }
    }
}
