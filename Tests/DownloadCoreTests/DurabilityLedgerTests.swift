import DownloadCore
import Foundation
import Testing

/// Every transition of the commit-then-show pipeline, without I/O: what a row may claim, what a
/// commit takes, when a snapshot shows and how requests share commits.
@Suite struct DurabilityLedgerTests {
    typealias Ledger = DurabilityLedger
    let url = URL(string: "http://example.test/file.bin")!
    let start = ContinuousClock.now

    func ledger(syncs: Bool = true) -> Ledger {
        Ledger(configuration: .init(syncs: syncs))
    }

    func machine() -> SessionStateMachine {
        SessionStateMachine(configuration: .init(maxActive: 3, maxTries: 5, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
    }

    /// A running download with `bytes` written, and its attempt.
    func running(_ m: inout SessionStateMachine, bytes: Int64 = 0, name: String = "file.bin") throws -> (DownloadID, AttemptID) {
        let (id, actions) = try m.schedule(url: try #require(URL(string: "http://example.test/\(name)")), destination: .file("/d/\(name)"))
        guard case .startTransfer(let order)? = actions.last else { throw Failure(description: "no transfer started: \(actions)") }
        m.transferProgressed(id, attempt: order.attempt, bytesOnDisk: bytes, at: 1)
        return (id, order.attempt)
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// Asks for a publish, starts its commit, and returns the commit (as the session does).
    func commit(_ l: inout Ledger, _ m: inout SessionStateMachine, soon: Bool = false, at offset: Duration = .zero) throws -> Ledger.Commit {
        let (token, actions) = l.publish(soon: soon)
        #expect(actions.contains(.commit(token: token, after: soon ? .milliseconds(10) : .zero)))
        let begun = try #require(l.beginCommit(token, machine: &m, journaled: true, bootID: "boot", now: start + offset))
        return begun.commit
    }

    // MARK: What a row claims

    @Test func aRunningRowClaimsNoMoreThanIsSynced() throws {
        var l = ledger(), m = machine()
        let (id, _) = try running(&m, bytes: 5_000)
        let first = try commit(&l, &m)
        // Written but not synced: the row says 0.
        #expect(first.changes.saved.first { $0.id == id }?.bytesOnDisk == 0)
        _ = l.commitEnded(first, failure: nil, now: start)
        l.attemptEnded(id, bytes: 4_000, synced: true, cancelled: false)
        let second = try commit(&l, &m)
        // Synced 4,000 of the 5,000 counted: the row claims 4,000, and is written again (dirty).
        #expect(second.changes.saved.map(\.bytesOnDisk) == [4_000])
        #expect(second.changes.unsynced.isEmpty)
    }

    @Test func aCheckpointClaimsTheBytesCountedBeforeItsSyncOnlyOnceItSucceeded() throws {
        var l = ledger(), m = machine()
        let (id, attempt) = try running(&m, bytes: 9_000)
        _ = l.commitEnded(try commit(&l, &m), failure: nil, now: start)
        let sample = Ledger.Sample(.init(id: id, attempt: attempt, path: "/d/file.bin.part", bytes: 9_000, parts: nil))
        let (actions, claimed) = l.checkpointDue([sample])
        let order = Ledger.SyncOrder(id: id, attempt: attempt, path: "/d/file.bin.part", bytes: 9_000, parts: nil)
        #expect(actions == [.sync([order])])
        #expect(claimed.isEmpty)
        #expect(l.syncing == [id])
        // One sync at a time per file: a second checkpoint while the first runs asks for nothing.
        #expect(l.checkpointDue([sample]).actions.isEmpty)
        // The sync failed: nothing is claimed, and the next checkpoint may try again.
        #expect(l.synced(order, valid: false, current: true) == .ignored)
        #expect(l.durable[id] == nil)
        #expect(l.syncing.isEmpty)
        #expect(l.checkpointDue([sample]).actions == [.sync([order])])
        #expect(l.synced(order, valid: true, current: true) == .accepted(parts: nil))
        #expect(l.durable[id] == 9_000)
        #expect(l.dirty == [id])
        #expect(try commit(&l, &m).changes.saved.map(\.bytesOnDisk) == [9_000])
    }

    @Test func aCheckpointOfAnEndedAttemptOrACutFileClaimsNothing() throws {
        var l = ledger(), m = machine()
        let (id, attempt) = try running(&m, bytes: 9_000)
        let order = Ledger.SyncOrder(id: id, attempt: attempt, path: "/d/file.bin.part", bytes: 9_000, parts: nil)
        _ = l.checkpointDue([.init(.init(id: id, attempt: attempt, path: order.path, bytes: 9_000, parts: nil))])
        #expect(l.synced(order, valid: true, current: false) == .ignored)
        #expect(l.durable[id] == nil)
        // A file being cut counts for nothing; one that did not grow is not synced again.
        #expect(l.checkpointDue([.init(order, truncating: true)]).actions.isEmpty)
        l.attemptEnded(id, bytes: 9_000, synced: true, cancelled: false)
        #expect(l.checkpointDue([.init(.init(id: id, attempt: attempt, path: order.path, bytes: 9_000, parts: nil))]).actions.isEmpty)
    }

    @Test func checkpointsOfManyFilesShareOneSyncPass() throws {
        var l = ledger(), m = machine()
        let (a, attemptA) = try running(&m, bytes: 100, name: "a")
        let (b, attemptB) = try running(&m, bytes: 200, name: "b")
        let (actions, _) = l.checkpointDue([
            .init(.init(id: a, attempt: attemptA, path: "/d/a.part", bytes: 100, parts: nil)),
            .init(.init(id: b, attempt: attemptB, path: "/d/b.part", bytes: 200, parts: nil)),
        ])
        guard case .sync(let orders) = try #require(actions.first) else { Issue.record("\(actions)"); return }
        #expect(actions.count == 1)
        #expect(orders.map(\.path) == ["/d/a.part", "/d/b.part"])
    }

    @Test func withoutFsyncACheckpointIsClaimedAtOnceAndMarkedUnsynced() throws {
        var l = ledger(syncs: false), m = machine()
        let (id, attempt) = try running(&m, bytes: 7_000)
        let (actions, claimed) = l.checkpointDue([.init(.init(id: id, attempt: attempt, path: "/d/file.bin.part", bytes: 7_000, parts: nil))])
        #expect(actions.isEmpty)
        #expect(claimed.map(\.id) == [id])
        #expect(l.unsynced == [id])
        let c = try commit(&l, &m)
        #expect(c.changes.saved.map(\.bytesOnDisk) == [7_000])
        #expect(c.changes.unsynced == [id])
        _ = l.commitEnded(c, failure: nil, now: start)
        // The attempt's end syncs the file: the same bytes, now trusted after a reboot.
        l.attemptEnded(id, bytes: 7_000, synced: true, cancelled: false)
        let after = try commit(&l, &m)
        #expect(after.changes.saved.map(\.id) == [id])
        #expect(after.changes.unsynced.isEmpty)
    }

    @Test func segmentedPartsOnlyGrowAndTheFirstPartClaimsNoMoreThanIsSynced() throws {
        var l = ledger(), m = machine()
        let (id, attempt) = try running(&m)
        l.resumed(id, from: 0)
        let parts = l.split(id, [Segment(start: 0, next: 60, end: 100), Segment(start: 100, next: 100, end: 200)])
        #expect(parts.first?.next == 0)
        #expect(l.durable[id] == 0)
        let later = [Segment(start: 0, next: 80, end: 100), Segment(start: 100, next: 150, end: 200)]
        let earlier = [Segment(start: 0, next: 70, end: 100), Segment(start: 100, next: 120, end: 200)]
        let laterOrder = Ledger.SyncOrder(id: id, attempt: attempt, path: "/p", bytes: Segments.bytesOnDisk(later), parts: later)
        let earlierOrder = Ledger.SyncOrder(id: id, attempt: attempt, path: "/p", bytes: Segments.bytesOnDisk(earlier), parts: earlier)
        #expect(l.synced(laterOrder, valid: true, current: true) == .accepted(parts: later))
        #expect(l.synced(earlierOrder, valid: true, current: true) == .ignored)
        #expect(l.durable[id] == 130)
    }

    @Test func restartsAndResumesLowerTheClaim() throws {
        var l = ledger(), m = machine()
        let (id, _) = try running(&m)
        l.attemptEnded(id, bytes: 5_000, synced: true, cancelled: false)
        l.resumed(id, from: 3_000)
        #expect(l.durable[id] == 3_000)
        l.resumed(id, from: 4_000)
        #expect(l.durable[id] == 3_000)
        l.emptied(id)
        #expect(l.durable[id] == 0)
        l.attemptEnded(id, bytes: 1_000, synced: true, cancelled: true)
        #expect(l.durable[id] == 0)
        // An attempt whose file could not be synced claims nothing either.
        l.attemptEnded(id, bytes: 2_000, synced: false, cancelled: false)
        #expect(l.durable[id] == 0)
        l.forgot(id)
        #expect(l.durable[id] == nil)
    }

    @Test func aCompletedRowIsNeverClampedAndARestoredRowClaimsWhatRecoverySynced() throws {
        var l = ledger(), m = machine()
        let (id, attempt) = try running(&m, bytes: 10)
        _ = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 10_000, now: Date(), jitter: 0)
        let c = try commit(&l, &m)
        #expect(c.changes.saved.first?.state == .completed)
        #expect(c.changes.saved.first?.bytesOnDisk == 10_000)

        var restoredLedger = ledger()
        var stored = try #require(m.download(id))
        stored.bytesOnDisk = 2_000
        var recovered = stored
        recovered.bytesOnDisk = 3_000
        restoredLedger.restored(recovered, stored: stored, synced: false, storedUnsynced: true)
        #expect(restoredLedger.durable[id] == 2_000)
        #expect(restoredLedger.unsynced == [id])
        restoredLedger.restored(recovered, stored: stored, synced: true, storedUnsynced: true)
        #expect(restoredLedger.durable[id] == 3_000)
    }

    // MARK: What a commit takes

    @Test func aCommitWritesOnlyRowsThatChangedAndNothingWhenNothingDid() throws {
        var l = ledger(), m = machine()
        let (a, _) = try running(&m, name: "a")
        let (b, _) = try running(&m, name: "b")
        let first = try commit(&l, &m)
        #expect(Set(first.changes.saved.map(\.id)) == [a, b])
        #expect(first.changes.positions == [a: 0, b: 1])
        #expect(first.changes.bootID == "boot")
        _ = l.commitEnded(first, failure: nil, now: start)
        // A speed change alone is not stored; bytes not synced change nothing in the row.
        _ = m.transferProgressed(a, attempt: try #require(m.runningAttempt(a)), bytesOnDisk: 50, at: 2)
        #expect(try commit(&l, &m).changes.isEmpty)
    }

    @Test func aCommitOfPartsAsWrittenAloneNeedNotWaitForTheDisk() throws {
        var l = ledger(), m = machine()
        let (id, attempt) = try running(&m)
        let (other, _) = try running(&m, name: "other.bin")
        l.resumed(id, from: 0)
        m.recordSegments(id, l.split(id, [Segment(start: 0, next: 0, end: 100), Segment(start: 100, next: 100, end: 200)]))
        let first = try commit(&l, &m)
        #expect(!first.changes.writtenPartsOnly, "a split is durable news")
        _ = l.commitEnded(first, failure: nil, now: start)
        // Parts as written, alone: no sync needed.
        m.recordWrittenSegments(id, attempt: attempt, [Segment(start: 0, next: 40, end: 100), Segment(start: 100, next: 130, end: 200)])
        let written = try commit(&l, &m, soon: true)
        #expect(written.changes.saved.map(\.id) == [id])
        #expect(written.changes.writtenPartsOnly)
        _ = l.commitEnded(written, failure: nil, now: start)
        // With a claim of synced parts in the same commit: synced.
        m.recordWrittenSegments(id, attempt: attempt, [Segment(start: 0, next: 60, end: 100), Segment(start: 100, next: 150, end: 200)])
        let claimed = [Segment(start: 0, next: 40, end: 100), Segment(start: 100, next: 130, end: 200)]
        #expect(l.synced(.init(id: id, attempt: attempt, path: "/p", bytes: 70, parts: claimed), valid: true, current: true) == .accepted(parts: claimed))
        m.recordSyncedSegments(id, claimed)
        let withClaim = try commit(&l, &m, soon: true)
        #expect(withClaim.changes.saved.first?.segments == claimed)
        #expect(!withClaim.changes.writtenPartsOnly)
        _ = l.commitEnded(withClaim, failure: nil, now: start)
        // With another row's change, a history entry, or a new order: synced.
        m.recordWrittenSegments(id, attempt: attempt, [Segment(start: 0, next: 70, end: 100), Segment(start: 100, next: 160, end: 200)])
        _ = try m.pause(other)
        let withPause = try commit(&l, &m, soon: true)
        #expect(withPause.changes.saved.count == 2)
        #expect(!withPause.changes.writtenPartsOnly)
        _ = l.commitEnded(withPause, failure: nil, now: start)
        m.recordWrittenSegments(id, attempt: attempt, [Segment(start: 0, next: 80, end: 100), Segment(start: 100, next: 170, end: 200)])
        l.note([HistoryEntry(download: id, time: Date(), kind: .error, text: "a note")])
        let withHistory = try commit(&l, &m, soon: true)
        #expect(!withHistory.changes.history.isEmpty)
        #expect(!withHistory.changes.writtenPartsOnly)
        _ = l.commitEnded(withHistory, failure: nil, now: start)
        // Nothing to write is nothing to skip.
        #expect(!(try commit(&l, &m, soon: true)).changes.writtenPartsOnly)
    }

    @Test func withoutAJournalACommitTakesNothing() throws {
        var l = ledger(), m = machine()
        _ = try running(&m)
        let (token, _) = l.publish()
        let begun = try #require(l.beginCommit(token, machine: &m, journaled: false, bootID: nil, now: start))
        #expect(begun.commit.changes.isEmpty)
        #expect(begun.commit.show)
    }

    @Test func aFailedCommitIsWrittenAgainByTheNextAndSaidUntilOneSucceeds() throws {
        var l = ledger(), m = machine()
        let (id, _) = try running(&m)
        try m.setLimit(300_000)
        l.limitDidChange()
        l.note([HistoryEntry(download: id, time: Date(), kind: .added, text: "added")])
        let failed = try commit(&l, &m)
        #expect(failed.tries == 6)
        #expect(failed.changes.limit != nil)
        #expect(failed.changes.history.count == 1)
        _ = l.commitEnded(failed, failure: JournalFailure("the disk holding the queue is full"), now: start)
        #expect(l.failure == "cannot save the queue: the disk holding the queue is full")
        let again = try commit(&l, &m)
        // One try a commit while the journal refuses them.
        #expect(again.tries == 1)
        #expect(again.changes.saved.map(\.id) == [id])
        #expect(again.changes.positions == [id: 0])
        #expect(again.changes.limit == failed.changes.limit)
        #expect(again.changes.history == failed.changes.history)
        _ = l.commitEnded(again, failure: nil, now: start)
        #expect(l.failure == nil)
        #expect(try commit(&l, &m).tries == 6)
    }

    @Test func aFailedRemovalIsDeletedAgain() throws {
        var l = ledger(), m = machine()
        let (id, _) = try running(&m)
        _ = try m.cancel(id)
        _ = l.commitEnded(try commit(&l, &m), failure: nil, now: start)
        try m.remove(id)
        let failed = try commit(&l, &m)
        #expect(failed.changes.removed == [id])
        _ = l.commitEnded(failed, failure: JournalFailure("busy"), now: start)
        #expect(try commit(&l, &m).changes.removed == [id])
    }

    @Test func historyRidesOnACommitThatWritesSomethingElseOrOnTheLastOne() throws {
        var l = ledger(), m = machine()
        let (id, _) = try running(&m)
        _ = l.commitEnded(try commit(&l, &m), failure: nil, now: start)
        let entry = HistoryEntry(download: id, time: Date(), kind: .started, text: "started")
        l.note([entry])
        let alone = try commit(&l, &m)
        #expect(alone.changes.isEmpty)
        #expect(l.pendingHistory(id) == [entry])
        _ = l.commitEnded(alone, failure: nil, now: start)
        l.flushing = true
        #expect(try commit(&l, &m).changes.history == [entry])
        #expect(l.pendingHistory(nil).isEmpty)
    }

    // MARK: Rows that wait for their download's next change

    /// Three downloads run (the machine's limit); the fourth, `d`, is committed queued, then takes
    /// the first one's slot and gets its response. Returns d, its attempt, and the finished one.
    func queuedThenStarted(_ l: inout Ledger, _ m: inout SessionStateMachine) throws -> (DownloadID, AttemptID, DownloadID) {
        var runs: [(DownloadID, AttemptID)] = []
        for name in ["a", "b", "c"] { runs.append(try running(&m, name: name)) }
        let (d, queuedActions) = try m.schedule(url: try #require(URL(string: "http://example.test/d")), destination: .file("/d/d"))
        #expect(queuedActions.isEmpty)
        let first = try commit(&l, &m)
        #expect(first.changes.saved.first { $0.id == d }?.state == .queued)
        _ = l.commitEnded(first, failure: nil, now: start)
        let (a, attemptA) = runs[0]
        // Its transfer is over: the slot is free while its file is placed.
        let freed = m.transferFinished(a, attempt: attemptA, outcome: .completed, bytesOnDisk: 10, now: Date(), jitter: 0)
        #expect(m.finalized(a, paths: ["/d/a"], stamps: []).isEmpty)
        let attempt = try #require(freed.compactMap { action -> AttemptID? in
            if case .startTransfer(let order) = action, order.id == d { return order.attempt }
            return nil
        }.first)
        let info = SessionStateMachine.ResponseInfo(
            status: 200, total: 100, validators: Validators(etag: "\"v1\""), finalURL: nil, serverFileName: nil, disposition: .fresh,
            contentType: "application/zip"
        )
        m.transferResponded(d, attempt: attempt, info: info)
        return (d, attempt, a)
    }

    @Test func aQueuedDownloadsStartAndResponseWaitForItsNextChangeAndAreWrittenWithIt() throws {
        var l = ledger(), m = machine()
        let (d, attempt, a) = try queuedThenStarted(&l, &m)
        let (token, _) = l.publish(soon: true)
        let begun = try #require(l.beginCommit(token, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(20)))
        // The finished download is written; d's start and response wait, shown but not written,
        // and a commit is asked for once they have waited `rowWait`.
        #expect(begun.commit.changes.saved.map(\.id) == [a])
        #expect(begun.commit.show)
        #expect(m.download(d)?.state == .downloading)
        #expect(l.waitingRows == [d: start + .milliseconds(20)])
        #expect(l.dirty == [d])
        #expect(begun.actions == [.writeLater(after: .seconds(1))])
        _ = l.commitEnded(begun.commit, failure: nil, now: start + .milliseconds(21))
        // Another commit meanwhile: d still waits, from when it began to, and no second write is asked for.
        let (again, _) = l.publish(soon: true)
        let second = try #require(l.beginCommit(again, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(500)))
        #expect(second.commit.changes.saved.isEmpty)
        #expect(second.actions.isEmpty)
        #expect(l.waitingRows == [d: start + .milliseconds(20)])
        _ = l.commitEnded(second.commit, failure: nil, now: start + .milliseconds(501))
        // It completes: one row, with what the start and the response said.
        _ = m.transferFinished(d, attempt: attempt, outcome: .completed, bytesOnDisk: 100, now: Date(), jitter: 0)
        let (last, _) = l.publish(soon: true)
        let third = try #require(l.beginCommit(last, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(600)))
        let row = try #require(third.commit.changes.saved.first)
        #expect(third.commit.changes.saved.count == 1)
        #expect(row.id == d && row.state == .completed && row.etag == "\"v1\"" && row.totalBytes == 100 && row.lastStatus == 200)
        #expect(row.contentType == "application/zip")
        #expect(l.waitingRows.isEmpty)
        #expect(l.dirty.isEmpty)
    }

    @Test func aRowThatWaitedRowWaitIsWrittenByTheCommitAskedForThen() throws {
        var l = ledger(), m = machine()
        let (d, _, _) = try queuedThenStarted(&l, &m)
        let (token, _) = l.publish(soon: true)
        let begun = try #require(l.beginCommit(token, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(250)))
        #expect(begun.actions == [.writeLater(after: .seconds(1))])
        _ = l.commitEnded(begun.commit, failure: nil, now: start + .milliseconds(251))
        let (due, actions) = l.waitingRowsDue()
        #expect(actions == [.commit(token: due, after: .milliseconds(10))])
        let late = try #require(l.beginCommit(due, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(1_250)))
        #expect(late.commit.changes.saved.map(\.id) == [d])
        #expect(late.commit.changes.saved.first?.state == .downloading)
        #expect(late.commit.changes.saved.first?.etag == "\"v1\"")
        #expect(late.actions.isEmpty)
        #expect(l.waitingRows.isEmpty)
    }

    /// `queuedThenStarted`, committed once since: d's row waits.
    func waiting() throws -> (Ledger, SessionStateMachine, DownloadID, AttemptID) {
        var l = ledger(), m = machine()
        let (d, attempt, _) = try queuedThenStarted(&l, &m)
        _ = l.commitEnded(try commit(&l, &m, at: .milliseconds(20)), failure: nil, now: start)
        #expect(l.waitingRows.keys.contains(d))
        return (l, m, d, attempt)
    }

    @Test func aWaitingRowIsWrittenAtOnceByAPauseAByteWrittenOrClaimedOrTheLastCommit() throws {
        // A pause: a person's intent is never left unwritten.
        var (l, m, d, _) = try waiting()
        _ = try m.pause(d)
        let paused = try commit(&l, &m, at: .milliseconds(40))
        #expect(paused.changes.saved.map(\.id) == [d])
        #expect(paused.changes.saved.first?.state == .paused)
        #expect(l.waitingRows.isEmpty)

        // A byte written, not yet synced: the row (with the response's validators) is written at
        // once, still claiming nothing.
        var (l2, m2, d2, attempt2) = try waiting()
        _ = m2.transferProgressed(d2, attempt: attempt2, bytesOnDisk: 1, at: 2)
        let written = try commit(&l2, &m2, at: .milliseconds(40))
        #expect(written.changes.saved.map(\.id) == [d2])
        #expect(written.changes.saved.first?.etag == "\"v1\"" && written.changes.saved.first?.bytesOnDisk == 0)
        #expect(l2.waitingRows.isEmpty)

        // Bytes made durable: the row claims them at once.
        var (l3, m3, d3, attempt3) = try waiting()
        _ = m3.transferProgressed(d3, attempt: attempt3, bytesOnDisk: 60, at: 2)
        let order = Ledger.SyncOrder(id: d3, attempt: attempt3, path: "/d/d.part", bytes: 60, parts: nil)
        #expect(l3.checkpointDue([Ledger.Sample(order)]).actions == [.sync([order])])
        #expect(l3.synced(order, valid: true, current: true) == .accepted(parts: nil))
        let claimed = try commit(&l3, &m3, at: .milliseconds(40))
        #expect(claimed.changes.saved.map(\.id) == [d3])
        #expect(claimed.changes.saved.first?.bytesOnDisk == 60)
        #expect(l3.waitingRows.isEmpty)

        // The last commit of a shutdown takes it.
        var (l4, m4, d4, _) = try waiting()
        l4.flushing = true
        #expect(try commit(&l4, &m4, at: .milliseconds(30)).changes.saved.map(\.id) == [d4])
        #expect(l4.waitingRows.isEmpty)
    }

    @Test func onlyAStartAndAResponseWithNothingDurableMayWait() throws {
        let queued = Download(id: DownloadID(rawValue: 1), url: url, destination: .file("/d/file.bin"), partPath: "/d/file.bin.part")
        var started = queued
        started.state = .downloading
        started.etag = "\"v1\""
        started.totalBytes = 100
        started.lastStatus = 200
        started.finalURL = URL(string: "http://mirror.test/file.bin")
        started.serverFileName = "file.bin"
        started.contentType = "application/zip"
        started.lastModified = "Tue, 24 Nov 2026 10:00:00 GMT"
        #expect(Ledger.onlyStarted(queued, started))
        // Whatever else changed is written at once: a requester, a restart, parts, bytes, another state.
        var requester = started
        requester.extraDestinations = [.file("/e/file.bin")]
        #expect(!Ledger.onlyStarted(queued, requester))
        var restarted = started
        restarted.restartCount = 1
        #expect(!Ledger.onlyStarted(queued, restarted))
        var split = started
        split.segments = [Segment(start: 0, next: 0, end: 50), Segment(start: 50, next: 50, end: 100)]
        #expect(!Ledger.onlyStarted(queued, split))
        var claimed = started
        claimed.bytesOnDisk = 1
        #expect(!Ledger.onlyStarted(queued, claimed))
        var paused = started
        paused.state = .paused
        #expect(!Ledger.onlyStarted(queued, paused))
        // A body of unknown length, or more than a crash may fetch twice: its validators are
        // worth writing at once (bytes may reach the disk before the machine counts them).
        var unknown = started
        unknown.totalBytes = nil
        #expect(!Ledger.onlyStarted(queued, unknown))
        var large = started
        large.totalBytes = Ledger.smallBody + 1
        #expect(!Ledger.onlyStarted(queued, large))
        var small = started
        small.totalBytes = Ledger.smallBody
        #expect(Ledger.onlyStarted(queued, small))
        // Only from queued: a retry's row (waiting, with its reason) is written when it starts.
        var waiting = queued
        waiting.state = .waiting(until: Date(), reason: "connection refused")
        #expect(!Ledger.onlyStarted(waiting, started))
    }

    @Test func whatIsNotStoredChangesNoRow() throws {
        var m = machine()
        let (id, _) = try running(&m)
        var download = try #require(m.download(id))
        download.bytesPerSecond = 1_000
        download.connecting = true
        download.connections = 4
        let row = Ledger.row(download)
        #expect(row.bytesPerSecond == 0 && !row.connecting && row.connections == 0)
        var quiet = download
        quiet.connecting = false
        quiet.connections = 1
        #expect(Ledger.row(quiet) == row)
    }

    // MARK: Sharing commits

    @Test func aPersonsIntentCommitsAtOnceAndATransfersEventWaitsToBeJoined() throws {
        var l = ledger()
        let (relaxed, waits) = l.publish(soon: true)
        #expect(waits == [.commit(token: relaxed, after: .milliseconds(10))])
        // Joined: same token, nothing new to do.
        let (joined, nothing) = l.publish(soon: true)
        #expect(joined == relaxed)
        #expect(nothing.isEmpty)
        // A person's intent cuts the wait short, still the same commit.
        let (urgent, now) = l.publish()
        #expect(urgent == relaxed)
        #expect(now == [.commit(token: relaxed, after: .zero)])
    }

    @Test func aCommitSomethingWaitsForStartsAtOnceAndIsStillThrottled() throws {
        var l = ledger(), m = machine()
        for index in 0..<2_000 { _ = try m.schedule(url: try #require(URL(string: "http://example.test/\(index)")), destination: .directory("/d")) }
        _ = l.commitEnded(try commit(&l, &m), failure: nil, now: start)
        // A transfer's event waits to be joined …
        let (relaxed, waits) = l.publish(soon: true)
        #expect(waits == [.commit(token: relaxed, after: .milliseconds(10))])
        // … until a finished file waits for its row: the same commit, at once.
        let (awaited, now) = l.publish(showing: false, soon: true, awaited: true)
        #expect(awaited == relaxed)
        #expect(now == [.commit(token: relaxed, after: .zero)])
        #expect(l.publish(showing: false, soon: true, awaited: true).actions.isEmpty)
        // Not a person's intent: on a long queue its snapshot is still throttled.
        let begun = try #require(l.beginCommit(relaxed, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(1)))
        #expect(!begun.commit.show)
        // When idle, it starts at once.
        _ = l.commitEnded(begun.commit, failure: nil, now: start + .milliseconds(2))
        let (alone, atOnce) = l.publish(showing: false, soon: true, awaited: true)
        #expect(atOnce == [.commit(token: alone, after: .zero)])
    }

    @Test func whatIsAskedForDuringACommitSharesTheNextOne() throws {
        var l = ledger(), m = machine()
        let first = try commit(&l, &m)
        #expect(l.isBusy)
        // The second call of a wait cut short finds the commit begun.
        #expect(l.beginCommit(first.token, machine: &m, journaled: true, bootID: nil, now: start) == nil)
        let (a, none) = l.publish(soon: true)
        let (b, _) = l.publish()
        let (c, _) = l.publish(showing: false, soon: true)
        #expect(none.isEmpty)
        #expect(a == b && b == c && a > first.token)
        #expect(l.newestToken == a)
        let next = l.commitEnded(first, failure: nil, now: start)
        #expect(next == [.commit(token: a, after: .zero)])
        let second = try #require(l.beginCommit(a, machine: &m, journaled: true, bootID: nil, now: start))
        #expect(second.commit.show)
        #expect(l.commitEnded(second.commit, failure: nil, now: start).isEmpty)
        #expect(!l.isBusy)
    }

    @Test func aStaleOrUnknownTokenStartsNothing() throws {
        var l = ledger(), m = machine()
        #expect(l.beginCommit(7, machine: &m, journaled: true, bootID: nil, now: start) == nil)
        let first = try commit(&l, &m)
        _ = l.commitEnded(first, failure: nil, now: start)
        let (token, _) = l.publish(soon: true)
        #expect(l.beginCommit(first.token, machine: &m, journaled: true, bootID: nil, now: start) == nil)
        #expect(l.beginCommit(token, machine: &m, journaled: true, bootID: nil, now: start) != nil)
    }

    // MARK: Showing

    @Test func onALongQueueATransfersSnapshotIsThrottledAndShownLaterOnce() throws {
        var l = ledger(), m = machine()
        for index in 0..<2_000 { _ = try m.schedule(url: try #require(URL(string: "http://example.test/\(index)")), destination: .directory("/d")) }
        let shown = try commit(&l, &m)
        #expect(shown.show)
        _ = l.commitEnded(shown, failure: nil, now: start)
        // 2,000 downloads: at most one transfer snapshot each 100 ms (50 µs a download).
        let (token, _) = l.publish(soon: true)
        let throttled = try #require(l.beginCommit(token, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(30)))
        #expect(!throttled.commit.show)
        #expect(throttled.actions == [.showLater(after: .milliseconds(70))])
        _ = l.commitEnded(throttled.commit, failure: nil, now: start + .milliseconds(31))
        // Another throttled one asks for no second trailing show.
        let (again, _) = l.publish(soon: true)
        let second = try #require(l.beginCommit(again, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(40)))
        #expect(!second.commit.show)
        #expect(second.actions.isEmpty)
        _ = l.commitEnded(second.commit, failure: nil, now: start + .milliseconds(41))
        // The trailing show comes as a transfer's publish, past the gap: shown.
        let (trailing, _) = l.trailingShowDue()
        #expect(try #require(l.beginCommit(trailing, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(100))).commit.show)
    }

    @Test func aPersonsIntentIsShownAtOnceOnALongQueue() throws {
        var l = ledger(), m = machine()
        for index in 0..<2_000 { _ = try m.schedule(url: try #require(URL(string: "http://example.test/\(index)")), destination: .directory("/d")) }
        _ = l.commitEnded(try commit(&l, &m), failure: nil, now: start)
        let urgent = try commit(&l, &m, at: .milliseconds(1))
        #expect(urgent.show)
    }

    @Test func whenNothingRunsATransfersEventIsCommittedAndShownAtOnce() throws {
        var l = ledger(), m = machine()
        for index in 0..<2_000 { _ = try m.schedule(url: try #require(URL(string: "http://example.test/\(index)")), destination: .directory("/d")) }
        #expect(!m.isQuiet)
        _ = l.commitEnded(try commit(&l, &m), failure: nil, now: start)
        // While transfers run, the same event would wait to be joined and not be shown …
        let (busy, waits) = l.publish(soon: true, quiet: false)
        #expect(waits == [.commit(token: busy, after: .milliseconds(10))])
        let throttled = try #require(l.beginCommit(busy, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(1)))
        #expect(!throttled.commit.show)
        _ = l.commitEnded(throttled.commit, failure: nil, now: start + .milliseconds(2))
        // … with none running (the last file placed), it starts and shows at once, on the same queue.
        let (last, now) = l.publish(soon: true, quiet: true)
        #expect(now == [.commit(token: last, after: .zero)])
        let shown = try #require(l.beginCommit(last, machine: &m, journaled: true, bootID: nil, now: start + .milliseconds(3)))
        #expect(shown.commit.show)
    }

    @Test func theMachineIsQuietOnlyWithNothingRunningOrBeingPlaced() throws {
        var m = machine()
        #expect(m.isQuiet)
        let (id, attempt) = try running(&m, bytes: 10)
        #expect(!m.isQuiet)
        let finished = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 10, now: Date(), jitter: 0)
        #expect(finished.contains(.finalize(id)))
        // Being placed: it holds no slot, but its placement is an event on its way.
        #expect(!m.isQuiet)
        _ = m.finalized(id, paths: ["/d/file.bin"])
        #expect(m.isQuiet)
    }

    @Test func aCommitThatShowsNothingAskedForShowsNothing() throws {
        var l = ledger(), m = machine()
        let (token, _) = l.publish(showing: false)
        #expect(try #require(l.beginCommit(token, machine: &m, journaled: true, bootID: nil, now: start)).commit.show == false)
    }
}
