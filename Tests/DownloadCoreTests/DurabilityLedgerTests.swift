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
        l.flushingHistory = true
        #expect(try commit(&l, &m).changes.history == [entry])
        #expect(l.pendingHistory(nil).isEmpty)
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

    @Test func aCommitThatShowsNothingAskedForShowsNothing() throws {
        var l = ledger(), m = machine()
        let (token, _) = l.publish(showing: false)
        #expect(try #require(l.beginCommit(token, machine: &m, journaled: true, bootID: nil, now: start)).commit.show == false)
    }
}
