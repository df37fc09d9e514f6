import DownloadCore
import Foundation
import Testing

/// `partFileTaken`: an attempt found its part file marked by another haul queue. Its bytes are
/// that queue's; the download starts over at once in a name of its own, never that one again.
@Suite struct PartOwnerMachineTests {
    typealias Machine = SessionStateMachine
    let now = Date(timeIntervalSince1970: 1_000_000)

    func machine(maxActive: Int = 3) -> Machine {
        Machine(configuration: .init(maxActive: maxActive, maxTries: 20, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
    }

    func url(_ name: String) -> URL {
        URL(string: "http://example.test/\(name)")!
    }

    /// The order that started in `actions`; records an issue when none did.
    func order(_ actions: [Machine.Action], _ id: DownloadID) -> Machine.TransferOrder? {
        for case .startTransfer(let order) in actions where order.id == id { return order }
        Issue.record("no transfer of \(id) started: \(actions)")
        return nil
    }

    @Test func aTakenPartFileStartsTheDownloadOverInANameOfItsOwnAtOnce() throws {
        var m = machine()
        let (id, scheduled) = try m.schedule(url: url("same.bin"), destination: .directory("/d"))
        let first = try #require(order(scheduled, id))
        #expect(first.partPath == "/d/same.bin.part")
        m.transferResponded(id, attempt: first.attempt, info: .init(status: 206, total: 1000, validators: Validators(etag: "\"v1\""), finalURL: nil, serverFileName: nil, disposition: .resumed(from: 400, verified: true)))
        _ = m.takeHistory(at: now)

        let actions = m.transferFinished(id, attempt: first.attempt, outcome: .partFileTaken(path: "/d/same.bin.part", marked: true), bytesOnDisk: 0, now: now, jitter: 0)

        let again = try #require(order(actions, id))
        #expect(again.partPath == "/d/same.bin.1.part")
        #expect(again.attempt != first.attempt)
        let download = try #require(m.download(id))
        #expect(download.partPath == "/d/same.bin.1.part")
        #expect(download.state == .downloading)
        #expect(download.failedAttempts == 0, "not a failure: the name was taken, the server did nothing wrong")
        #expect(download.lastError == nil)
        #expect(download.bytesOnDisk == 0 && download.etag == nil && download.totalBytes == nil && download.resumeOffset == nil, "nothing of the other queue's file is this download's")
        #expect(m.resumeBasis(id)?.validators.isEmpty == true, "its first request is a fresh one")
        let history = m.takeHistory(at: now)
        #expect(history.contains { $0.kind == .restarted && $0.text == "restarted from zero: /d/same.bin.part is another download's part file (left alone); fetching into /d/same.bin.1.part" }, "\(history)")
        // What `get`, `list` and the details say.
        #expect(download.restartCount == 1)
        #expect(download.restartReason == "/d/same.bin.part is another download's part file (left alone); fetching into /d/same.bin.1.part")
    }

    @Test func aSecondTakenNameMovesOnAndNeverBackToTheFirst() throws {
        var m = machine()
        let (id, scheduled) = try m.schedule(url: url("same.bin"), destination: .directory("/d"))
        let first = try #require(order(scheduled, id))
        let second = try #require(order(m.transferFinished(id, attempt: first.attempt, outcome: .partFileTaken(path: "/d/same.bin.part", marked: true), bytesOnDisk: 0, now: now, jitter: 0), id))
        #expect(second.partPath == "/d/same.bin.1.part")
        let third = try #require(order(m.transferFinished(id, attempt: second.attempt, outcome: .partFileTaken(path: "/d/same.bin.1.part", marked: true), bytesOnDisk: 0, now: now, jitter: 0), id))
        #expect(third.partPath == "/d/same.bin.2.part", "not /d/same.bin.part, the first queue's, again")
    }

    @Test func aNameAnotherDownloadOfTheQueueClaimsIsSkipped() throws {
        var m = machine()
        let (id, scheduled) = try m.schedule(url: url("same.bin"), destination: .directory("/d"))
        let first = try #require(order(scheduled, id))
        // Another download of this queue owns `same.bin.1.part` (a second file of that name).
        let (other, _) = try m.schedule(url: url("x/same.bin"), destination: .directory("/d"))
        #expect(m.download(other)?.partPath == "/d/same.bin.1.part")

        let again = try #require(order(m.transferFinished(id, attempt: first.attempt, outcome: .partFileTaken(path: "/d/same.bin.part", marked: true), bytesOnDisk: 0, now: now, jitter: 0), id))
        #expect(again.partPath == "/d/same.bin.2.part")
    }

    @Test func anExactDestinationGetsANumberedPartFileBesideIt() throws {
        var m = machine()
        let (id, scheduled) = try m.schedule(url: url("a"), destination: .file("/d/out.iso"))
        let first = try #require(order(scheduled, id))
        #expect(first.partPath == "/d/out.iso.part")
        let again = try #require(order(m.transferFinished(id, attempt: first.attempt, outcome: .partFileTaken(path: "/d/out.iso.part", marked: true), bytesOnDisk: 0, now: now, jitter: 0), id))
        #expect(again.partPath == "/d/out.iso.1.part")
        #expect(m.download(id)?.destination == .file("/d/out.iso"), "the file it becomes is unchanged")
    }

    @Test func aMovedDownloadKeepsItsPlaceInTheQueue() throws {
        var m = machine(maxActive: 1)
        let (id, scheduled) = try m.schedule(url: url("same.bin"), destination: .directory("/d"))
        let first = try #require(order(scheduled, id))
        let (next, _) = try m.schedule(url: url("next.bin"), destination: .directory("/d"))
        #expect(m.download(next)?.state == .queued)
        // It is first in line, so the one slot is its own again; the next download still waits.
        let actions = m.transferFinished(id, attempt: first.attempt, outcome: .partFileTaken(path: "/d/same.bin.part", marked: true), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(order(actions, id)?.partPath == "/d/same.bin.1.part")
        #expect(actions.count == 1)
        #expect(m.download(next)?.state == .queued)
    }

    @Test func aStaleAttemptsTakenOutcomeChangesNothing() throws {
        var m = machine()
        let (id, scheduled) = try m.schedule(url: url("same.bin"), destination: .directory("/d"))
        let first = try #require(order(scheduled, id))
        _ = try m.pause(id)
        #expect(m.transferFinished(id, attempt: first.attempt, outcome: .partFileTaken(path: "/d/same.bin.part", marked: true), bytesOnDisk: 0, now: now, jitter: 0).isEmpty)
        #expect(m.download(id)?.partPath == "/d/same.bin.part")
        #expect(m.download(id)?.state == .paused)
    }
}

/// `TransferOrder.hasBytes`: whether a download's row says it has bytes of its own, so that a part
/// file without a mark is its own (as before marks); one without never restarts over a file.
@Suite struct PartFileHasBytesTests {
    let now = Date(timeIntervalSince1970: 1_000_000)

    @Test func aNewDownloadHasNoBytesAndOneThatWroteSomeHas() throws {
        var m = SessionStateMachine(configuration: .init(maxActive: 3, maxTries: 20, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
        let url = URL(string: "http://example.test/doc.pdf")!
        let (id, scheduled) = try m.schedule(url: url, destination: .directory("/d"))
        guard case .startTransfer(let first)? = scheduled.last else { Issue.record("\(scheduled)"); return }
        #expect(!first.hasBytes)
        m.transferResponded(id, attempt: first.attempt, info: .init(status: 200, total: 1000, validators: Validators(etag: "\"v1\""), finalURL: nil, serverFileName: nil, disposition: .fresh))
        _ = try m.pause(id)
        _ = m.transferFinished(id, attempt: first.attempt, outcome: .stopped, bytesOnDisk: 400, now: now, jitter: 0)
        guard case .startTransfer(let again)? = try m.resume(id).last else { Issue.record("no start"); return }
        #expect(again.hasBytes)
    }

    @Test func aFileItDidNotWriteIsSaidSo() throws {
        var m = SessionStateMachine(configuration: .init(maxActive: 3, maxTries: 20, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
        let (id, scheduled) = try m.schedule(url: URL(string: "http://example.test/doc.pdf")!, destination: .directory("/d"))
        guard case .startTransfer(let first)? = scheduled.last else { Issue.record("\(scheduled)"); return }
        _ = m.takeHistory(at: now)
        let actions = m.transferFinished(id, attempt: first.attempt, outcome: .partFileTaken(path: "/d/doc.pdf.part", marked: false), bytesOnDisk: 0, now: now, jitter: 0)
        guard case .startTransfer(let again)? = actions.last else { Issue.record("\(actions)"); return }
        #expect(again.partPath == "/d/doc.pdf.1.part")
        #expect(m.download(id)?.restartReason == "/d/doc.pdf.part holds bytes this download did not write (left alone); fetching into /d/doc.pdf.1.part")
    }
}
