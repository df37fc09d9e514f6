import DownloadCore
import Foundation
import Testing

/// A person's resume takes a slot now, and a retry whose time came waits visibly for one: every
/// transition without I/O.
@Suite struct SessionStateMachineResumeNowTests {
    typealias Machine = SessionStateMachine
    let now = Date(timeIntervalSince1970: 1_000_000)

    func machine(maxActive: Int) -> Machine {
        Machine(configuration: .init(maxActive: maxActive, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
    }

    func url(_ name: String) -> URL {
        URL(string: "http://example.test/\(name)")!
    }

    /// Schedules `name` to `/d/name`; its id and the actions.
    func add(_ m: inout Machine, _ name: String) throws -> (DownloadID, [Machine.Action]) {
        try m.schedule(url: url(name), destination: .file("/d/\(name)"))
    }

    func starts(_ actions: [Machine.Action]) -> [DownloadID] {
        actions.compactMap { if case .startTransfer(let order) = $0 { order.id } else { nil } }
    }

    func attemptOf(_ actions: [Machine.Action], of id: DownloadID) -> AttemptID? {
        actions.lazy.compactMap { if case .startTransfer(let order) = $0, order.id == id { order.attempt } else { nil } }.first
    }

    /// A running download failed with a retryable error: its retry timer's token.
    func failOnce(_ m: inout Machine, _ id: DownloadID, _ attempt: AttemptID) throws -> (token: UInt64, actions: [Machine.Action]) {
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "HTTP 503", retryAfter: nil, progressed: false), bytesOnDisk: 10, now: now, jitter: 0)
        guard case .scheduleRetry(_, let token, _)? = actions.first else {
            Issue.record("no retry: \(actions)")
            throw Failure()
        }
        return (token, actions)
    }

    struct Failure: Error {}

    // MARK: Resume means now

    @Test func aResumeWithAFreeSlotStartsAtOnce() throws {
        var m = machine(maxActive: 2)
        let (a, _) = try add(&m, "a")
        let (paused, _) = try add(&m, "p")
        _ = try m.pause(paused)
        let (actions, displaced) = try m.resumeNow(paused)
        #expect(displaced == nil)
        #expect(starts(actions) == [paused])
        #expect(m.download(paused)?.state == .downloading)
        #expect(m.download(a)?.state == .downloading)
    }

    @Test func noFreeSlotSendsTheLowestRunningDownloadTheQueueStartedBackToQueuedWithItsBytes() throws {
        var m = machine(maxActive: 2)
        let (a, aStart) = try add(&m, "a")
        let (b, bStart) = try add(&m, "b")
        let (c, _) = try add(&m, "c")
        _ = try m.pause(c)
        let bAttempt = try #require(attemptOf(bStart, of: b))
        m.transferProgressed(b, attempt: bAttempt, bytesOnDisk: 4096, at: 1)
        let (actions, displaced) = try m.resumeNow(c)
        #expect(displaced == b, "the lowest in queue order of those the queue started")
        #expect(actions.first == .stopTransfer(b, bAttempt), "stopped like a pause")
        #expect(starts(actions) == [c])
        #expect(m.download(b)?.state == .queued)
        #expect(m.download(b)?.bytesOnDisk == 4096, "its bytes are kept")
        #expect(m.download(a)?.state == .downloading)
        #expect(m.download(c)?.state == .downloading)
        // Its stopped attempt's late end keeps it queued, bytes counted; no retry, no error.
        let late = m.transferFinished(b, attempt: bAttempt, outcome: .stopped, bytesOnDisk: 5000, now: now, jitter: 0)
        #expect(late.isEmpty)
        #expect(m.download(b)?.state == .queued)
        #expect(m.download(b)?.bytesOnDisk == 5000)
        #expect(m.download(b)?.lastError == nil && m.download(b)?.restartCount == 0)
        // When a slot frees it resumes, in queue order.
        _ = try #require(attemptOf(aStart, of: a))
        #expect(starts(try m.pause(a)) == [b])
        let entries = m.takeHistory(at: now).filter { $0.download == b && $0.kind == .paused }
        #expect(entries.map(\.text) == ["back to queued with its bytes, to make room for download \(c) (resumed by a person)"])
    }

    @Test func aDownloadAPersonStartedIsNeverSentBackForAnotherPersonsResume() throws {
        var m = machine(maxActive: 1)
        let (a, _) = try add(&m, "a")
        let (b, _) = try add(&m, "b")
        let (c, _) = try add(&m, "c")
        _ = try m.pause(b)
        _ = try m.pause(c)
        let first = try m.resumeNow(b)
        #expect(first.displaced == a)
        #expect(m.download(b)?.state == .downloading)
        // Every running download was started by a person: c waits at the front.
        let second = try m.resumeNow(c)
        #expect(second.displaced == nil)
        #expect(second.actions.isEmpty)
        #expect(m.download(c)?.state == .queued)
        #expect(m.download(b)?.state == .downloading)
        // The next free slot is c's, before a (queued above it).
        let freed = try m.pause(b)
        #expect(starts(freed) == [c])
        #expect(m.download(a)?.state == .queued)
    }

    @Test func aRetryTheQueueStartsIsTheQueuesAgain() throws {
        var m = machine(maxActive: 1)
        let (a, _) = try add(&m, "a")
        let (b, _) = try add(&m, "b")
        _ = try m.pause(b)
        let resumed = try m.resumeNow(b)
        #expect(resumed.displaced == a)
        let bAttempt = try #require(attemptOf(resumed.actions, of: b))
        // b fails and waits: a takes the slot again (the queue's).
        let (token, failed) = try failOnce(&m, b, bAttempt)
        #expect(starts(failed) == [a])
        // b's retry comes due; the slot is a's: b waits visibly.
        #expect(m.retryTimerFired(b, token: token).isEmpty)
        // A retry started by the queue may be sent back; b is a person's resume again here.
        let (c, _) = try add(&m, "c")
        _ = try m.pause(c)
        let third = try m.resumeNow(c)
        #expect(third.displaced == a, "a was started by the queue")
    }

    @Test func resumingARunningDownloadDoesNothingAndAFinishedOneRefuses() throws {
        var m = machine(maxActive: 1)
        let (a, start) = try add(&m, "a")
        let result = try m.resumeNow(a)
        #expect(result.actions.isEmpty && result.displaced == nil)
        let attempt = try #require(attemptOf(start, of: a))
        _ = m.transferFinished(a, attempt: attempt, outcome: .completed, bytesOnDisk: 5, now: now, jitter: 0)
        #expect(throws: Machine.TransitionError.illegal(a, state: "being placed", intent: "resume")) { try m.resumeNow(a) }
        _ = m.finalized(a, paths: ["/d/a"])
        #expect(throws: Machine.TransitionError.illegal(a, state: "completed", intent: "resume")) { try m.resumeNow(a) }
        #expect(throws: Machine.TransitionError.unknownDownload(DownloadID(99))) { try m.resumeNow(DownloadID(99)) }
    }

    @Test func aQueuedDownloadResumedByAPersonJumpsTheQueue() throws {
        var m = machine(maxActive: 1)
        let (a, _) = try add(&m, "a")
        let (b, _) = try add(&m, "b")
        let (c, _) = try add(&m, "c")
        #expect(m.download(b)?.state == .queued && m.download(c)?.state == .queued)
        let (actions, displaced) = try m.resumeNow(c)
        #expect(displaced == a)
        #expect(starts(actions) == [c])
        #expect(m.download(b)?.state == .queued)
    }

    @Test func anEditorsMachineOnlyQueues() throws {
        var m = Machine(configuration: .init(maxActive: 1, startsTransfers: false))
        let (a, _) = try m.schedule(url: url("a"), destination: .file("/d/a"), hold: true)
        _ = try m.pause(a)
        let (actions, displaced) = try m.resumeNow(a)
        #expect(actions.isEmpty && displaced == nil)
        #expect(m.download(a)?.state == .queued)
    }

    // MARK: A due retry waits visibly

    @Test func aDueRetryWithNoFreeSlotStaysWaitingWithItsTimeAndReason() throws {
        var m = machine(maxActive: 1)
        let (a, start) = try add(&m, "a")
        let (b, _) = try add(&m, "b")
        let (token, actions) = try failOnce(&m, a, try #require(attemptOf(start, of: a)))
        #expect(starts(actions) == [b], "a waiting download holds no slot")
        guard case .waiting(let until, let reason)? = m.download(a)?.state else { Issue.record("not waiting"); return }
        #expect(m.retryTimerFired(a, token: token).isEmpty)
        #expect(m.download(a)?.state == .waiting(until: until, reason: reason), "not queued 0 B: waiting, its time past")
        #expect(m.isDueRetry(a))
        #expect(m.download(a)?.state.isRetryDue(at: until) == true)
        #expect(m.snapshot.countsByState["queued"] == nil)
    }

    @Test func aDueRetryTakesTheNextFreeSlotBeforeQueuedRowsBelowIt() throws {
        var m = machine(maxActive: 1)
        let (a, start) = try add(&m, "a")
        let (b, _) = try add(&m, "b")
        let (c, _) = try add(&m, "c")
        let (token, _) = try failOnce(&m, a, try #require(attemptOf(start, of: a)))
        #expect(m.download(b)?.state == .downloading)
        _ = m.retryTimerFired(a, token: token)
        let freed = try m.pause(b)
        #expect(starts(freed) == [a], "a, above c in the queue, starts first")
        #expect(m.download(a)?.state == .downloading)
        #expect(!m.isDueRetry(a))
        #expect(m.download(c)?.state == .queued)
    }

    @Test func queuedRowsAboveADueRetryStillComeFirst() throws {
        var m = machine(maxActive: 1)
        let (a, _) = try add(&m, "a")
        let (b, _) = try add(&m, "b")
        let (c, _) = try add(&m, "c")
        // c runs (a and b paused), fails, and comes due while a runs.
        _ = try m.pause(a)
        _ = try m.pause(b)
        let cAttempt = try #require(m.runningAttempt(c))
        _ = try m.resume(a)
        let (token, _) = try failOnce(&m, c, cAttempt)
        #expect(m.download(a)?.state == .downloading)
        _ = try m.resume(b)
        _ = m.retryTimerFired(c, token: token)
        #expect(starts(try m.pause(a)) == [b], "b is above c")
        #expect(m.download(c)?.state.reason == "HTTP 503")
    }

    @Test func aDueRetryPausedOrCancelledIsNoLongerDue() throws {
        var m = machine(maxActive: 1)
        let (a, start) = try add(&m, "a")
        let (b, _) = try add(&m, "b")
        let (token, _) = try failOnce(&m, a, try #require(attemptOf(start, of: a)))
        _ = m.retryTimerFired(a, token: token)
        _ = try m.pause(a)
        #expect(!m.isDueRetry(a))
        #expect(starts(try m.pause(b)).isEmpty, "a paused does not start")
        #expect(m.download(a)?.state == .paused)
        // Resumed by a person: it starts at once, the slot is free.
        #expect(starts(try m.resumeNow(a).actions) == [a])
    }

    @Test func aDueRetryIsWatchedForSpaceLikeAQueuedDownload() throws {
        var m = machine(maxActive: 1)
        let (a, start) = try add(&m, "a")
        _ = try add(&m, "b")
        let (token, _) = try failOnce(&m, a, try #require(attemptOf(start, of: a)))
        #expect(!m.spaceWatchList(includePaused: false).contains { $0.0 == a })
        _ = m.retryTimerFired(a, token: token)
        #expect(m.spaceWatchList(includePaused: false).contains { $0.0 == a })
    }

    @Test func aRestoredDueRetryIsQueued() throws {
        var m = machine(maxActive: 1)
        let (a, start) = try add(&m, "a")
        _ = try add(&m, "b")
        let (token, _) = try failOnce(&m, a, try #require(attemptOf(start, of: a)))
        _ = m.retryTimerFired(a, token: token)
        var next = machine(maxActive: 1)
        next.restore(m.all, nextID: 3, holdPending: false)
        #expect(next.download(a)?.state == .queued)
        #expect(starts(next.startQueued()) == [a])
    }
}
