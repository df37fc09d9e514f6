import DownloadCore
import Foundation
import Testing

/// Every transition of the queue's state machine, without I/O.
@Suite struct SessionStateMachineTests {
    typealias Machine = SessionStateMachine
    let url = URL(string: "http://example.test/file.bin")!
    let now = Date(timeIntervalSince1970: 1_000_000)

    func machine(maxActive: Int = 3, maxTries: Int = 20) -> Machine {
        Machine(configuration: .init(maxActive: maxActive, maxTries: maxTries, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
    }

    /// Schedules `url` and returns its id and the attempt that started.
    func started(_ m: inout Machine, _ url: URL? = nil, to path: String = "/d/file.bin") throws -> (DownloadID, AttemptID) {
        let (id, actions) = try m.schedule(url: url ?? self.url, destination: .file(path))
        guard case .startTransfer(let order)? = actions.last else {
            Issue.record("no transfer started: \(actions)")
            throw TestFailure()
        }
        return (id, order.attempt)
    }

    struct TestFailure: Error {}

    // MARK: queued

    @Test func scheduleStartsATransferWhenASlotIsFree() throws {
        var m = machine()
        let (id, actions) = try m.schedule(url: url, destination: .file("/d/file.bin"))
        #expect(m.download(id)?.state == .downloading)
        #expect(m.download(id)?.partPath == "/d/file.bin.part")
        guard case .startTransfer(let order) = try #require(actions.first) else { Issue.record("\(actions)"); return }
        #expect(order.url == url)
        #expect(order.partPath == "/d/file.bin.part")
        #expect(m.resumeBasis(id)?.validators.isEmpty == true)
        #expect(m.resumeBasis(id)?.knownTotal == nil)
    }

    @Test func scheduleBeyondMaxActiveQueues() throws {
        var m = machine(maxActive: 1)
        _ = try started(&m)
        let (second, actions) = try m.schedule(url: URL(string: "http://example.test/other")!, destination: .file("/d/other"))
        #expect(actions.isEmpty)
        #expect(m.download(second)?.state == .queued)
    }

    @Test func queuedToPausedToQueued() throws {
        var m = machine(maxActive: 1)
        _ = try started(&m)
        let (second, _) = try m.schedule(url: URL(string: "http://example.test/other")!, destination: .file("/d/other"))
        #expect(try m.pause(second).isEmpty)
        #expect(m.download(second)?.state == .paused)
        #expect(try m.resume(second).isEmpty)
        #expect(m.download(second)?.state == .queued)
    }

    @Test func queuedToCancelledDeletesThePartFile() throws {
        var m = machine(maxActive: 1)
        _ = try started(&m)
        let (second, _) = try m.schedule(url: URL(string: "http://example.test/other")!, destination: .file("/d/other"))
        #expect(try m.cancel(second) == [.deletePartFile(second, path: "/d/other.part", onlyMarked: true)])
        #expect(m.download(second)?.state == .cancelled)
    }

    // MARK: downloading

    @Test func downloadingToPausedStopsTheTransferAndStartsTheNext() throws {
        var m = machine(maxActive: 1)
        let (first, attempt) = try started(&m)
        let (second, _) = try m.schedule(url: URL(string: "http://example.test/other")!, destination: .file("/d/other"))
        let actions = try m.pause(first)
        #expect(actions.first == .stopTransfer(first, attempt))
        guard case .startTransfer(let order) = try #require(actions.last) else { Issue.record("\(actions)"); return }
        #expect(order.id == second)
        #expect(m.download(first)?.state == .paused)
        #expect(m.download(second)?.state == .downloading)
    }

    @Test func downloadingToCancelledStopsThenDeletes() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        #expect(try m.cancel(id) == [.stopTransfer(id, attempt), .deletePartFile(id, path: "/d/file.bin.part", onlyMarked: true)], "no bytes of its own yet: only its marked file")
        #expect(m.download(id)?.state == .cancelled)
        #expect(m.download(id)?.bytesOnDisk == 0)
    }

    @Test func downloadingToCompletedFinalizes() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let actions = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 500, now: now, jitter: 0)
        #expect(actions == [.finalize(id)])
        #expect(m.download(id)?.state == .completed)
        #expect(m.download(id)?.totalBytes == 500)
        #expect(m.placing == [id])
        #expect(m.finalized(id, paths: ["/d/file.bin"]).isEmpty)
        #expect(m.download(id)?.completedPath == "/d/file.bin")
        #expect(m.placing.isEmpty)
    }

    @Test func downloadingToWaitingWithBackoffThenQueuedByTheTimer() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "HTTP 503", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0.5)
        guard case .scheduleRetry(let retried, let token, let date) = try #require(actions.first) else { Issue.record("\(actions)"); return }
        #expect(retried == id)
        #expect(date == now.addingTimeInterval(1))
        #expect(m.download(id)?.state == .waiting(until: date, reason: "HTTP 503"))
        #expect(m.download(id)?.failedAttempts == 1)
        let restart = m.retryTimerFired(id, token: token)
        guard case .startTransfer(let order) = try #require(restart.first) else { Issue.record("\(restart)"); return }
        #expect(order.attempt != attempt)
        #expect(m.download(id)?.state == .downloading)
    }

    @Test func backoffDoublesAndRetryAfterIsAFloor() throws {
        var m = machine()
        var (id, attempt) = try started(&m)
        var delays: [Double] = []
        for _ in 0..<8 {
            let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0.5)
            guard case .scheduleRetry(_, let token, let date) = try #require(actions.first) else { Issue.record("unexpected actions"); return }
            delays.append(date.timeIntervalSince(now))
            guard case .startTransfer(let order) = m.retryTimerFired(id, token: token).first else { Issue.record("unexpected actions"); return }
            (id, attempt) = (order.id, order.attempt)
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60])
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "429", retryAfter: 90, progressed: false), bytesOnDisk: 0, now: now, jitter: 0.5)
        guard case .scheduleRetry(_, _, let date) = try #require(actions.first) else { Issue.record("unexpected actions"); return }
        #expect(date.timeIntervalSince(now) == 90)
    }

    @Test func progressResetsTheFailureCount() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0)
        guard case .scheduleRetry(_, let token, _) = try #require(actions.first) else { Issue.record("unexpected actions"); return }
        guard case .startTransfer(let order) = m.retryTimerFired(id, token: token).first else { Issue.record("unexpected actions"); return }
        _ = m.transferFinished(id, attempt: order.attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: true), bytesOnDisk: 10, now: now, jitter: 0)
        #expect(m.download(id)?.failedAttempts == 1)
    }

    @Test func downloadingToFailedAfterTheRetryLimit() throws {
        var m = machine(maxTries: 2)
        let (id, attempt) = try started(&m)
        let first = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0)
        guard case .scheduleRetry(_, let token, _) = try #require(first.first) else { Issue.record("unexpected actions"); return }
        guard case .startTransfer(let order) = m.retryTimerFired(id, token: token).first else { Issue.record("unexpected actions"); return }
        let second = m.transferFinished(id, attempt: order.attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(second.isEmpty)
        #expect(m.download(id)?.state == .failed(reason: "reset (gave up after 2 tries)"))
    }

    /// Ends `attempt` with `outcome`; returns the next attempt when a retry was scheduled (its timer fired).
    func ended(_ m: inout Machine, _ id: DownloadID, _ attempt: AttemptID, _ outcome: Machine.Outcome, bytes: Int64 = 0) -> AttemptID? {
        let actions = m.transferFinished(id, attempt: attempt, outcome: outcome, bytesOnDisk: bytes, now: now, jitter: 0)
        guard case .scheduleRetry(_, let token, _)? = actions.first else { return nil }
        guard case .startTransfer(let order)? = m.retryTimerFired(id, token: token).first else { return nil }
        return order.attempt
    }

    @Test func aProtocolErrorWaitsWithBackoffLikeANetworkError() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let actions = m.transferFinished(id, attempt: attempt, outcome: .protocolError(reason: "the server sent an invalid header"), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(actions == [.scheduleRetry(id, token: 1, at: now.addingTimeInterval(1))])
        #expect(m.download(id)?.state == .waiting(until: now.addingTimeInterval(1), reason: "the server sent an invalid header"))
        #expect(m.download(id)?.failedAttempts == 1)
    }

    @Test func theThirdProtocolErrorInARowFailsWithTheSentenceAlone() throws {
        var m = machine()
        let (id, first) = try started(&m)
        let second = try #require(ended(&m, id, first, .protocolError(reason: "the server sent an invalid header")))
        let third = try #require(ended(&m, id, second, .protocolError(reason: "the server sent an invalid header")))
        #expect(ended(&m, id, third, .protocolError(reason: "the server sent an invalid header")) == nil)
        #expect(m.download(id)?.state == .failed(reason: "the server sent an invalid header"))
        #expect(m.download(id)?.failedAttempts == 3)
    }

    @Test func networkErrorsBetweenProtocolErrorsDoNotResetTheirCount() throws {
        var m = machine()
        let (id, first) = try started(&m)
        let second = try #require(ended(&m, id, first, .protocolError(reason: "bad")))
        let third = try #require(ended(&m, id, second, .retryable(reason: "reset", retryAfter: nil, progressed: false)))
        let fourth = try #require(ended(&m, id, third, .protocolError(reason: "bad")))
        #expect(ended(&m, id, fourth, .protocolError(reason: "bad")) == nil)
        #expect(m.download(id)?.state == .failed(reason: "bad"))
    }

    @Test func bytesWrittenOrAResumeGiveTheServerThreeTriesAgain() throws {
        var m = machine()
        let (id, first) = try started(&m)
        let second = try #require(ended(&m, id, first, .protocolError(reason: "bad")))
        let third = try #require(ended(&m, id, second, .protocolError(reason: "bad")))
        // Bytes reached the disk: the server can speak HTTP after all.
        let fourth = try #require(ended(&m, id, third, .retryable(reason: "reset", retryAfter: nil, progressed: true), bytes: 10))
        let fifth = try #require(ended(&m, id, fourth, .protocolError(reason: "bad")))
        let sixth = try #require(ended(&m, id, fifth, .protocolError(reason: "bad")))
        #expect(ended(&m, id, sixth, .protocolError(reason: "bad")) == nil)
        #expect(m.download(id)?.state == .failed(reason: "bad"))
        // A person retrying a failed download starts the count again.
        let actions = try m.resume(id)
        guard case .startTransfer(let order)? = actions.first else { Issue.record("not restarted: \(actions)"); return }
        #expect(ended(&m, id, order.attempt, .protocolError(reason: "bad")) != nil)
        #expect(m.download(id)?.failedAttempts == 1)
    }

    @Test func theRetryLimitStillHoldsForProtocolErrors() throws {
        var m = machine(maxTries: 2)
        let (id, first) = try started(&m)
        let second = try #require(ended(&m, id, first, .retryable(reason: "reset", retryAfter: nil, progressed: false)))
        #expect(ended(&m, id, second, .protocolError(reason: "bad")) == nil)
        #expect(m.download(id)?.state == .failed(reason: "bad"))
    }

    @Test func downloadingToFailedOnAFatalError() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .fatal(reason: "HTTP 404 Not Found"), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(m.download(id)?.state == .failed(reason: "HTTP 404 Not Found"))
        #expect(m.download(id)?.lastError == "HTTP 404 Not Found")
    }

    @Test func diskFullPausesWithTheReason() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .cannotWrite(reason: "disk full"), bytesOnDisk: 4096, now: now, jitter: 0)
        #expect(m.download(id)?.state == .paused)
        #expect(m.download(id)?.lastError == "disk full")
        #expect(m.download(id)?.bytesOnDisk == 4096)
    }

    @Test func lowerMaxActiveRequeuesTheLowestKeepingBytes() throws {
        var m = machine(maxActive: 2)
        let (first, _) = try started(&m)
        let (second, secondAttempt) = try started(&m, URL(string: "http://example.test/2")!, to: "/d/2")
        let progressed = m.transferProgressed(second, attempt: secondAttempt, bytesOnDisk: 100, at: 1)
        #expect(progressed)
        #expect(try m.setMaxActive(1) == [.stopTransfer(second, secondAttempt)])
        #expect(m.download(first)?.state == .downloading)
        #expect(m.download(second)?.state == .queued)
        #expect(m.download(second)?.bytesOnDisk == 100)
        #expect(throws: Machine.TransitionError.invalidArgument("at least one download must be allowed to run")) { try m.setMaxActive(0) }
    }

    @Test func raisingMaxActiveStartsQueued() throws {
        var m = machine(maxActive: 1)
        _ = try started(&m)
        let (second, _) = try m.schedule(url: URL(string: "http://example.test/2")!, destination: .file("/d/2"))
        let actions = try m.setMaxActive(2)
        guard case .startTransfer(let order) = try #require(actions.first) else { Issue.record("unexpected actions"); return }
        #expect(order.id == second)
    }

    // MARK: waiting

    @Test func waitingToPausedMakesTheTimerStale() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0)
        guard case .scheduleRetry(_, let token, _) = try #require(actions.first) else { Issue.record("unexpected actions"); return }
        #expect(try m.pause(id).isEmpty)
        #expect(m.download(id)?.state == .paused)
        #expect(m.retryTimerFired(id, token: token).isEmpty)
        #expect(m.download(id)?.state == .paused)
    }

    @Test func waitingResumedNowStartsAtOnce() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0)
        guard case .scheduleRetry(_, let token, _) = try #require(actions.first) else { Issue.record("unexpected actions"); return }
        guard case .startTransfer = try m.resume(id).first else { Issue.record("no start"); return }
        #expect(m.retryTimerFired(id, token: token).isEmpty, "the old timer must not start a second transfer")
    }

    @Test func waitingToCancelled() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 7, now: now, jitter: 0)
        #expect(try m.cancel(id) == [.deletePartFile(id, path: "/d/file.bin.part")])
        #expect(m.download(id)?.state == .cancelled)
    }

    /// A cancel deletes the bytes a resume kept, so the row no longer says where a resume picked
    /// up, nor holds parts (a tester's cancelled row said `resumed_from` 622592).
    @Test func aCancelForgetsTheResumeAndTheParts() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        m.transferResponded(id, attempt: attempt, info: .init(
            status: 206, total: 4_000_000, validators: Validators(etag: "\"abc\""), finalURL: nil, serverFileName: nil,
            disposition: .resumed(from: 622_592, verified: true)
        ))
        #expect(m.download(id)?.resumeOffset == 622_592)
        _ = try m.cancel(id)
        let cancelled = try #require(m.download(id))
        #expect(cancelled.state == .cancelled && cancelled.bytesOnDisk == 0)
        #expect(cancelled.resumeOffset == nil && !cancelled.unverifiedResume && !cancelled.overlapChecked)
        #expect(cancelled.segments.isEmpty && cancelled.writtenSegments.isEmpty)
    }

    @Test func waitingDoesNotHoldASlot() throws {
        var m = machine(maxActive: 1)
        let (id, attempt) = try started(&m)
        let (second, _) = try m.schedule(url: URL(string: "http://example.test/2")!, destination: .file("/d/2"))
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(actions.contains { if case .startTransfer(let order) = $0 { order.id == second } else { false } })
    }

    // MARK: paused, failed, finished

    @Test func pausedResumesWithValidatorsAndKnownTotal() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        m.transferResponded(id, attempt: attempt, info: .init(status: 200, total: 1000, validators: Validators(etag: "\"v1\"", lastModified: "Mon"), finalURL: nil, serverFileName: nil, disposition: .fresh))
        _ = try m.pause(id)
        _ = m.transferFinished(id, attempt: attempt, outcome: .stopped, bytesOnDisk: 400, now: now, jitter: 0)
        #expect(m.download(id)?.bytesOnDisk == 400, "a late finish still reports the bytes of a paused download")
        #expect(m.download(id)?.state == .paused)
        guard case .startTransfer = try m.resume(id).first else { Issue.record("no start"); return }
        #expect(m.resumeBasis(id)?.validators == Validators(etag: "\"v1\"", lastModified: "Mon"))
        #expect(m.resumeBasis(id)?.knownTotal == 1000)
    }

    @Test func pausingTwiceIsHarmlessButFinishedDownloadsRefuse() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = try m.pause(id)
        #expect(try m.pause(id).isEmpty)
        _ = try m.resume(id)
        guard let running = m.runningAttempt(id) else { Issue.record("not running"); return }
        #expect(running != attempt)
        _ = m.transferFinished(id, attempt: running, outcome: .completed, bytesOnDisk: 1, now: now, jitter: 0)
        #expect(throws: Machine.TransitionError.illegal(id, state: "being placed", intent: "pause")) { try m.pause(id) }
        _ = m.finalized(id, paths: ["/d/file.bin"])
        #expect(throws: Machine.TransitionError.illegal(id, state: "completed", intent: "pause")) { try m.pause(id) }
        #expect(throws: Machine.TransitionError.illegal(id, state: "completed", intent: "resume")) { try m.resume(id) }
        #expect(throws: Machine.TransitionError.illegal(id, state: "completed", intent: "cancel")) { try m.cancel(id) }
    }

    /// A file being placed was checked against the checksum it had when its transfer ended; a
    /// request that brings one it was not checked against is refused until it is completed (a
    /// tester's wrong one was adopted then, and said verified, exit 0). Without one it joins.
    @Test func aChecksumCannotJoinAFileBeingPlaced() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 1, now: now, jitter: 0)
        let sum = Checksum(algorithm: .sha256, hex: String(repeating: "ab", count: 32))
        #expect(throws: Machine.TransitionError.invalidArgument("download \(id) of this URL is being placed: ask for it again with --checksum once it is completed, and its file is checked")) {
            try m.schedule(url: url, destination: .file("/d/file.bin"), options: RequestOptions(checksum: sum))
        }
        #expect(m.download(id)?.options.checksum == nil)
        #expect(try m.schedule(url: url, destination: .file("/d/file.bin")).0 == id, "without a checksum it joins")
    }

    @Test func failedCanBeRetriedAndRemoved() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .fatal(reason: "HTTP 500"), bytesOnDisk: 10, now: now, jitter: 0)
        guard case .startTransfer = try m.resume(id).first else { Issue.record("no retry"); return }
        #expect(m.download(id)?.state == .downloading)
        _ = try m.cancel(id)
        try m.remove(id)
        #expect(m.download(id) == nil)
        #expect(m.order.isEmpty)
    }

    @Test func removeRefusesUnfinishedDownloads() throws {
        var m = machine()
        let (id, _) = try started(&m)
        #expect(throws: Machine.TransitionError.illegal(id, state: "downloading", intent: "remove")) { try m.remove(id) }
        #expect(throws: Machine.TransitionError.unknownDownload(DownloadID(99))) { try m.pause(DownloadID(99)) }
    }

    @Test func cancelledCannotResume() throws {
        var m = machine()
        let (id, _) = try started(&m)
        _ = try m.cancel(id)
        #expect(try m.cancel(id).isEmpty)
        #expect(throws: Machine.TransitionError.illegal(id, state: "cancelled", intent: "resume")) { try m.resume(id) }
    }

    // MARK: Late events

    @Test func bytesArrivingAfterPauseAreIgnored() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let before = m.transferProgressed(id, attempt: attempt, bytesOnDisk: 100, at: 1)
        _ = try m.pause(id)
        let after = m.transferProgressed(id, attempt: attempt, bytesOnDisk: 200, at: 2)
        #expect(before && !after)
        #expect(m.download(id)?.bytesOnDisk == 100)
    }

    @Test func completionArrivingAfterPauseKeepsThePause() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = try m.pause(id)
        #expect(m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 1000, now: now, jitter: 0).isEmpty)
        #expect(m.download(id)?.state == .paused)
        #expect(m.download(id)?.bytesOnDisk == 1000)
    }

    @Test func completionArrivingAfterCancelChangesNothing() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = try m.cancel(id)
        #expect(m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 1000, now: now, jitter: 0).isEmpty)
        #expect(m.download(id)?.state == .cancelled)
        #expect(m.download(id)?.bytesOnDisk == 0)
    }

    @Test func aResponseOfAPausedAttemptStillDescribesTheDisk() throws {
        // The attempt truncated the part file for a new version, then pause landed before its report
        // reached the machine: the next resume must use the new version's validators, not the old.
        var m = machine()
        let (id, attempt) = try started(&m)
        m.transferResponded(id, attempt: attempt, info: .init(status: 200, total: 10, validators: Validators(etag: "\"v1\""), finalURL: nil, serverFileName: nil, disposition: .fresh))
        _ = try m.pause(id)
        _ = try m.resume(id)
        m.transferResponded(id, attempt: attempt, info: .init(status: 200, total: 5, validators: Validators(etag: "\"v2\""), finalURL: nil, serverFileName: nil, disposition: .restarted(reason: "resource changed")))
        #expect(m.download(id)?.etag == "\"v2\"")
        #expect(m.download(id)?.totalBytes == 5)
        #expect(m.resumeBasis(id)?.validators == Validators(etag: "\"v2\""))
        #expect(m.resumeBasis(id)?.knownTotal == 5)
    }

    @Test func aResponseAfterCancelIsIgnored() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = try m.cancel(id)
        m.transferResponded(id, attempt: attempt, info: .init(status: 200, total: 5, validators: Validators(etag: "\"old\""), finalURL: nil, serverFileName: nil, disposition: .fresh))
        #expect(m.download(id)?.etag == nil)
        #expect(m.download(id)?.totalBytes == nil)
    }

    @Test func aFailedDownloadKeepsItsPartFileAndDestination() throws {
        var m = machine()
        let (id, _) = try m.schedule(url: URL(string: "http://a.test/latest.tar.gz")!, destination: .directory("/d"))
        guard let attempt = m.runningAttempt(id) else { Issue.record("not started"); return }
        _ = m.transferFinished(id, attempt: attempt, outcome: .fatal(reason: "HTTP 500"), bytesOnDisk: 10, now: now, jitter: 0)
        let (other, _) = try m.schedule(url: URL(string: "http://b.test/latest.tar.gz")!, destination: .directory("/d"))
        #expect(m.download(id)?.partPath == "/d/latest.tar.gz.part")
        #expect(m.download(other)?.partPath == "/d/latest.tar.gz.1.part")
        let (single, singleAttempt) = try started(&m, URL(string: "http://c.test/x")!, to: "/d/x")
        _ = m.transferFinished(single, attempt: singleAttempt, outcome: .fatal(reason: "HTTP 500"), bytesOnDisk: 10, now: now, jitter: 0)
        #expect(throws: Machine.TransitionError.destinationInUse("/d/x")) {
            try m.schedule(url: URL(string: "http://other.test/x")!, destination: .file("/d/x"))
        }
    }

    @Test func aFailureOfAnOldAttemptDoesNotTouchTheNewOne() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = try m.pause(id)
        _ = try m.resume(id)
        #expect(m.transferFinished(id, attempt: attempt, outcome: .fatal(reason: "boom"), bytesOnDisk: 3, now: now, jitter: 0).isEmpty)
        #expect(m.download(id)?.state == .downloading)
    }

    @Test func aLateFinishOfAnOlderAttemptCannotOverwriteTheBytesOfANewerOne() throws {
        var m = machine()
        let (id, first) = try started(&m)
        _ = try m.pause(id)
        _ = try m.resume(id)
        let second = try #require(m.runningAttempt(id))
        _ = try m.pause(id)
        _ = m.transferFinished(id, attempt: second, outcome: .stopped, bytesOnDisk: 700, now: now, jitter: 0)
        _ = m.transferFinished(id, attempt: first, outcome: .stopped, bytesOnDisk: 300, now: now, jitter: 0)
        #expect(m.download(id)?.bytesOnDisk == 700)
    }

    @Test func aLateFailureAfterPauseSchedulesNoRetry() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = try m.pause(id)
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 5, now: now, jitter: 0)
        #expect(actions.isEmpty)
        #expect(m.download(id)?.state == .paused)
        #expect(m.download(id)?.failedAttempts == 0)
    }

    @Test func aStaleTimerAfterCancelDoesNothing() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let actions = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0)
        guard case .scheduleRetry(_, let token, _) = try #require(actions.first) else { Issue.record("\(actions)"); return }
        _ = try m.cancel(id)
        #expect(m.retryTimerFired(id, token: token).isEmpty)
        #expect(m.download(id)?.state == .cancelled)
    }

    @Test func anAttemptStoppedFromOutsidePausesWithAReason() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .stopped, bytesOnDisk: 42, now: now, jitter: 0)
        #expect(m.download(id)?.state == .paused)
        #expect(m.download(id)?.lastError == "interrupted")
        #expect(m.download(id)?.bytesOnDisk == 42)
    }

    @Test func aLateFinishOfARequeuedDownloadKeepsItQueuedWithItsBytes() throws {
        var m = machine(maxActive: 2)
        _ = try started(&m)
        let (second, attempt) = try started(&m, URL(string: "http://example.test/2")!, to: "/d/2")
        _ = try m.setMaxActive(1)
        #expect(m.transferFinished(second, attempt: attempt, outcome: .completed, bytesOnDisk: 900, now: now, jitter: 0).isEmpty)
        #expect(m.download(second)?.state == .queued)
        #expect(m.download(second)?.bytesOnDisk == 900)
    }

    @Test func aDownloadBeingPlacedFreesItsSlot() throws {
        var m = machine(maxActive: 1)
        let (first, attempt) = try started(&m)
        let (second, _) = try m.schedule(url: try #require(URL(string: "http://example.test/2")), destination: .file("/d/2"))
        #expect(m.download(second)?.state == .queued)
        // The transfer is over and its bytes are synced: the next download starts while the
        // finished one's row is committed and its file placed.
        let actions = m.transferFinished(first, attempt: attempt, outcome: .completed, bytesOnDisk: 9, now: now, jitter: 0)
        #expect(actions.first == .finalize(first))
        guard actions.count == 2, case .startTransfer(let order) = actions[1] else { Issue.record("\(actions)"); return }
        #expect(order.id == second)
        #expect(m.download(second)?.state == .downloading)
        #expect(m.placing == [first])
        #expect(!m.isQuiet, "a file being placed: its events are still on their way")
        #expect(m.finalized(first, paths: ["/d/file.bin"]).isEmpty, "nothing more to start")
        #expect(m.placing.isEmpty)
        #expect(m.download(first)?.completedPath == "/d/file.bin")
    }

    // MARK: written, syncing (`transferWritten`)

    /// Schedules `count` downloads (the first `maxActive` start) and returns their ids and attempts.
    func scheduled(_ m: inout Machine, _ count: Int) throws -> [(DownloadID, AttemptID?)] {
        try (0..<count).map { index in
            let (id, actions) = try m.schedule(url: try #require(URL(string: "http://example.test/\(index)")), destination: .file("/d/\(index)"))
            guard case .startTransfer(let order)? = actions.last else { return (id, nil) }
            return (id, order.attempt)
        }
    }

    @Test func aDownloadWhoseBytesAreWrittenSyncsWithoutItsSlot() throws {
        var m = machine(maxActive: 1)
        let downloads = try scheduled(&m, 2)
        let (first, second) = (downloads[0].0, downloads[1].0)
        let attempt = try #require(downloads[0].1)
        #expect(downloads[1].1 == nil && m.download(second)?.state == .queued)
        let progressed500 = m.transferProgressed(first, attempt: attempt, bytesOnDisk: 500, at: 1)
        #expect(progressed500)
        // Every byte written; the file syncs next: the next download starts now.
        let actions = m.transferWritten(first, attempt: attempt, bytesOnDisk: 900)
        guard actions.count == 1, case .startTransfer(let order) = actions[0] else { Issue.record("\(actions)"); return }
        #expect(order.id == second)
        let row = try #require(m.download(first))
        #expect(row.state == .downloading, "not completed before its bytes are durable")
        #expect(row.finishing && row.shownWord == "finishing")
        #expect(row.bytesOnDisk == 900 && row.bytesPerSecond == 0 && row.connections == 0)
        #expect(m.runningAttempt(first) == attempt, "its end is still to come")
        let progressed = m.transferProgressed(first, attempt: attempt, bytesOnDisk: 900, at: 2)
        #expect(!progressed, "no speed while it syncs")
        // Said twice (or late) changes nothing.
        let again = m.transferWritten(first, attempt: attempt, bytesOnDisk: 900)
        #expect(again.isEmpty)
        // The sync done: completed as ever, and nothing more to start.
        let done = m.transferFinished(first, attempt: attempt, outcome: .completed, bytesOnDisk: 900, now: now, jitter: 0)
        #expect(done == [.finalize(first)])
        #expect(m.download(first)?.state == .completed && m.download(first)?.finishing == false)
    }

    @Test func aSyncThatFailsEndsTheAttemptAsEver() throws {
        var m = machine(maxActive: 1)
        let downloads = try scheduled(&m, 3)
        let attempt = try #require(downloads[0].1)
        _ = m.transferWritten(downloads[0].0, attempt: attempt, bytesOnDisk: 900)
        #expect(m.download(downloads[1].0)?.state == .downloading)
        // The sync found the disk full: the download waits for room with its bytes, and its end
        // starts nothing (the slot went at `transferWritten`).
        let actions = m.transferFinished(downloads[0].0, attempt: attempt, outcome: .noSpace(.writeFailed("disk full"), reading: nil), bytesOnDisk: 900, now: now, jitter: 0)
        #expect(actions.isEmpty)
        #expect(m.download(downloads[0].0)?.finishing == false)
        guard case .waitingForSpace = m.download(downloads[0].0)?.state else { Issue.record("\(String(describing: m.download(downloads[0].0)?.state))"); return }
        #expect(m.download(downloads[2].0)?.state == .queued, "one slot, taken by the second")
    }

    @Test func aWriteOfAStoppedOrOldAttemptIsIgnored() throws {
        var m = machine(maxActive: 1)
        let downloads = try scheduled(&m, 2)
        let (first, attempt) = (downloads[0].0, try #require(downloads[0].1))
        _ = try m.pause(first)
        #expect(m.download(downloads[1].0)?.state == .downloading)
        let stopped = m.transferWritten(first, attempt: attempt, bytesOnDisk: 900)
        #expect(stopped.isEmpty)
        #expect(m.download(first)?.state == .paused && m.download(first)?.finishing == false)
        let old = m.transferWritten(first, attempt: AttemptID(rawValue: 999), bytesOnDisk: 900)
        #expect(old.isEmpty)
    }

    @Test func aSyncingDownloadPausedKeepsItsBytesAndIsNoLongerFinishing() throws {
        var m = machine(maxActive: 1)
        let downloads = try scheduled(&m, 2)
        let (first, attempt) = (downloads[0].0, try #require(downloads[0].1))
        _ = m.transferWritten(first, attempt: attempt, bytesOnDisk: 900)
        let paused = try m.pause(first)
        #expect(paused == [.stopTransfer(first, attempt)], "nothing else starts: the slot was given already")
        #expect(m.download(first)?.shownWord == "paused")
        // Its sync ends anyway: a late event, the bytes noted, the pause kept.
        let late = m.transferFinished(first, attempt: attempt, outcome: .completed, bytesOnDisk: 900, now: now, jitter: 0)
        #expect(late.isEmpty)
        #expect(m.download(first)?.state == .paused && m.download(first)?.bytesOnDisk == 900 && m.download(first)?.finishing == false)
        // Resumed by a person: a new attempt (a 206 of its last bytes, compared with the disk, completes it), not finishing; the
        // second, started by the queue, makes room.
        let (actions, displaced) = try m.resumeNow(first)
        #expect(displaced == downloads[1].0)
        guard actions.count == 2, case .startTransfer(let order) = actions[1] else { Issue.record("\(actions)"); return }
        #expect(order.id == first && order.attempt != attempt)
        #expect(m.download(first)?.state == .downloading && m.download(first)?.finishing == false)
    }

    @Test func aSyncingDownloadIsNeitherDisplacedNorRequeuedNorStoppedForSpace() throws {
        var m = machine(maxActive: 2)
        let downloads = try scheduled(&m, 4)
        let (first, attempt) = (downloads[0].0, try #require(downloads[0].1))
        let third = downloads[2].0
        _ = m.transferWritten(first, attempt: attempt, bytesOnDisk: 900)
        #expect(m.download(third)?.state == .downloading)
        // A person's resume displaces the lowest transferring download, never the syncing one.
        _ = try m.pause(downloads[3].0)
        let (_, displaced) = try m.resumeNow(downloads[3].0)
        #expect(displaced == third)
        #expect(m.download(first)?.finishing == true)
        // One may run at once: the syncing one is not counted, nor sent back to the queue.
        let fewer = try m.setMaxActive(1)
        #expect(!fewer.contains(.stopTransfer(first, attempt)), "\(fewer)")
        #expect(m.download(first)?.state == .downloading)
        // Under the floor: it writes nothing more, so it finishes.
        let low = DiskReading(free: 0, capacity: 100 << 20, floor: 1 << 20, filesystem: 1)
        let check = m.spaceChecked([first: low], directory: nil, purgeWhenLow: false)
        #expect(!check.actions.contains(.stopTransfer(first, attempt)), "\(check.actions)")
        #expect(m.download(first)?.state == .downloading)
    }

    @Test func aFinishedPartFilesStampStaysWithTheRowUntilItsFileIsPlaced() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let part = FileStamp(size: 9, modified: 42)
        _ = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 9, now: now, jitter: 0, partStamp: part)
        #expect(m.download(id)?.completedStamps == [part])
        #expect(m.download(id)?.completedPaths == [])
        _ = m.finalized(id, paths: ["/d/file.bin"], stamps: [FileStamp(size: 9, modified: 43)])
        #expect(m.download(id)?.completedStamps == [FileStamp(size: 9, modified: 43)], "the placed file's, once placed")
    }

    @Test func aFailedPlacementFailsTheDownload() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 9, now: now, jitter: 0)
        _ = m.finalizeFailed(id, reason: "cannot move the file to /d/file.bin: Permission denied")
        #expect(m.download(id)?.state == .failed(reason: "cannot move the file to /d/file.bin: Permission denied"))
        #expect(m.download(id)?.completedPath == nil)
    }

    /// A part file another program wrote or replaced after the transfer: the download fails and
    /// forgets its version (validators, size, bytes), so a retry trusts none of that file; a
    /// placement that failed otherwise keeps what it knew.
    @Test func aPlacementRefusedForAChangedPartFileForgetsTheVersion() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        m.transferResponded(id, attempt: attempt, info: .init(status: 200, total: 9, validators: Validators(etag: "\"v1\""), finalURL: nil, serverFileName: nil, disposition: .fresh))
        _ = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 9, now: now, jitter: 0, partStamp: FileStamp(size: 9, modified: 1))
        _ = m.finalizeFailed(id, reason: "the part file changed", discardingVersion: true)
        let failed = try #require(m.download(id))
        #expect(failed.state == .failed(reason: "the part file changed"))
        #expect(failed.etag == nil && failed.totalBytes == nil && failed.bytesOnDisk == 0 && failed.completedStamps.isEmpty)
        #expect(m.resumeBasis(id)?.validators.isEmpty == true)

        let (other, otherAttempt) = try started(&m, URL(string: "http://example.test/2"), to: "/d/2")
        m.transferResponded(other, attempt: otherAttempt, info: .init(status: 200, total: 9, validators: Validators(etag: "\"v2\""), finalURL: nil, serverFileName: nil, disposition: .fresh))
        _ = m.transferFinished(other, attempt: otherAttempt, outcome: .completed, bytesOnDisk: 9, now: now, jitter: 0)
        _ = m.finalizeFailed(other, reason: "cannot move the file to /d/2: Permission denied")
        #expect(m.download(other)?.etag == "\"v2\"" && m.download(other)?.bytesOnDisk == 9)
    }

    @Test func schedulingAFailedURLAgainRetriesIt() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .fatal(reason: "HTTP 500"), bytesOnDisk: 10, now: now, jitter: 0)
        let (again, actions) = try m.schedule(url: url, destination: .file("/d/file.bin"))
        #expect(again == id)
        guard case .startTransfer = try #require(actions.first) else { Issue.record("\(actions)"); return }
        #expect(m.download(id)?.state == .downloading)
        #expect(m.download(id)?.failedAttempts == 0)
    }

    // MARK: Responses

    @Test func aResumeIsCountedWithItsOffset() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        #expect(m.download(id)?.connecting == true, "no response yet")
        m.transferResponded(id, attempt: attempt, info: .init(status: 206, total: 1000, validators: Validators(etag: "\"a\""), finalURL: url, serverFileName: nil, disposition: .resumed(from: 400, verified: true)))
        let download = try #require(m.download(id))
        #expect(download.resumeCount == 1)
        #expect(download.resumeOffset == 400)
        #expect(download.bytesSavedByResume == 400)
        #expect(download.bytesOnDisk == 400)
        #expect(!download.unverifiedResume)
        #expect(download.lastStatus == 206)
        #expect(!download.connecting)
    }

    /// A failed download's error is its row's news until it runs again: `list` says no old error
    /// under a downloading row (the download keeps it as its last, for the details).
    @Test func aRunningDownloadListsNoOldError() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .fatal(reason: "HTTP 404 Not Found"), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(QueueListing.error(try #require(m.download(id))) == "HTTP 404 Not Found")
        guard case .startTransfer = try m.resume(id).last else { Issue.record("no start"); return }
        let running = try #require(m.download(id))
        #expect(running.state == .downloading)
        #expect(QueueListing.error(running) == nil)
        #expect(running.lastError == "HTTP 404 Not Found", "kept as the last error")
        #expect(QueueListing.object(for: running).error == nil, "nor in list --json")
    }

    @Test func aRestartAdoptsTheNewValidatorsAndSaysWhy() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        m.transferResponded(id, attempt: attempt, info: .init(status: 200, total: 1000, validators: Validators(etag: "\"a\""), finalURL: nil, serverFileName: nil, disposition: .fresh))
        _ = try m.pause(id)
        _ = try m.resume(id)
        let second = try #require(m.runningAttempt(id))
        m.transferResponded(id, attempt: second, info: .init(status: 200, total: 900, validators: Validators(etag: "\"b\""), finalURL: nil, serverFileName: "x.bin", disposition: .restarted(reason: "resource changed")))
        let download = try #require(m.download(id))
        #expect(download.etag == "\"b\"")
        #expect(download.totalBytes == 900)
        #expect(download.restartCount == 1)
        #expect(download.restartReason == "resource changed")
        #expect(download.bytesOnDisk == 0)
        #expect(download.serverFileName == "x.bin")
    }

    // MARK: Coalescing, order, bulk intents

    @Test func theSameURLAttachesInsteadOfStartingASecondTransfer() throws {
        var m = machine()
        let (id, _) = try started(&m)
        let (again, actions) = try m.schedule(url: URL(string: "HTTP://EXAMPLE.test:80/file.bin#frag")!, destination: .file("/e/copy.bin"))
        #expect(again == id)
        #expect(actions.isEmpty)
        #expect(m.download(id)?.extraDestinations == [.file("/e/copy.bin")])
        _ = try m.schedule(url: url, destination: .file("/e/copy.bin"))
        #expect(m.download(id)?.extraDestinations == [.file("/e/copy.bin")], "the same requester is not added twice")
    }

    @Test func theSameURLResumesAPausedDownload() throws {
        var m = machine()
        let (id, _) = try started(&m)
        _ = try m.pause(id)
        let (again, actions) = try m.schedule(url: url, destination: .file("/d/file.bin"))
        #expect(again == id)
        guard case .startTransfer = try #require(actions.first) else { Issue.record("\(actions)"); return }
        #expect(m.download(id)?.state == .downloading)
    }

    @Test func aCompletedURLIsFetchedAgainAsANewDownload() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 1, now: now, jitter: 0)
        // Placed (while it is placed, it is joined: `aURLAskedForWhileItsFileIsPlacedJoinsTheDownload`).
        _ = m.finalized(id, paths: ["/d/file.bin"])
        let (again, _) = try m.schedule(url: url, destination: .file("/d/file.bin"))
        #expect(again != id)
    }

    /// A URL asked for again while its finished file is being placed joins the download (the file
    /// is on its way to its name): `haul start -i` at that moment made a second row, fetched again
    /// into `NAME.1` (a tester). Once placed, a completed row is not joined (what its file became
    /// decides whether it is fetched again), and another destination makes a row of its own.
    @Test func aURLAskedForWhileItsFileIsPlacedJoinsTheDownload() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        _ = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 1, now: now, jitter: 0)
        #expect(m.placing.contains(id))
        let (joined, actions) = try m.schedule(url: url, destination: .file("/d/file.bin"))
        #expect(joined == id)
        #expect(!actions.contains { if case .startTransfer = $0 { true } else { false } })
        #expect(m.order == [id])
        let (elsewhere, _) = try m.schedule(url: url, destination: .file("/e/file.bin"))
        #expect(elsewhere != id)
        _ = m.finalized(id, paths: ["/d/file.bin"])
        let (again, _) = try m.schedule(url: url, destination: .file("/d/file.bin"))
        #expect(again != id)
    }

    @Test func twoURLsCannotShareADestination() throws {
        var m = machine()
        _ = try started(&m)
        #expect(throws: Machine.TransitionError.destinationInUse("/d/file.bin")) {
            try m.schedule(url: URL(string: "http://other.test/x")!, destination: .file("/d/file.bin"))
        }
    }

    /// A file may not be another download's part file, nor its part file another download's file:
    /// `-o D/a.bin.part` beside a paused download of `a.bin` was placed over its bytes, which then
    /// resumed from the other file (a tester: a wrong file, exit 0).
    @Test func aDestinationIsNeverAnotherDownloadsPartFileNorTheOtherWayRound() throws {
        var m = machine()
        let (id, _) = try m.schedule(url: URL(string: "http://a.test/a.bin")!, destination: .directory("/d"))
        _ = try m.pause(id)
        #expect(m.download(id)?.partPath == "/d/a.bin.part")
        #expect(throws: Machine.TransitionError.destinationInUse("/d/a.bin.part")) {
            try m.schedule(url: URL(string: "http://c.test/c.bin")!, destination: .file("/d/a.bin.part"))
        }
        let (named, _) = try m.schedule(url: URL(string: "http://e.test/e.bin")!, destination: .file("/d/x.part"))
        #expect(throws: Machine.TransitionError.destinationInUse("/d/x")) {
            try m.schedule(url: URL(string: "http://f.test/f.bin")!, destination: .file("/d/x"))
        }
        // Into a directory: a part file that is no other download's file.
        let (other, _) = try m.schedule(url: URL(string: "http://g.test/x")!, destination: .directory("/d"))
        #expect(m.download(other)?.partPath == "/d/x.1.part")
        #expect(m.download(named)?.partPath == "/d/x.part.part")
    }

    @Test func directoryDownloadsWithOneNameGetDistinctPartFiles() throws {
        var m = machine()
        let (first, _) = try m.schedule(url: URL(string: "http://a.test/x/file.iso")!, destination: .directory("/d"))
        let (second, _) = try m.schedule(url: URL(string: "http://b.test/y/file.iso")!, destination: .directory("/d"))
        #expect(m.download(first)?.partPath == "/d/file.iso.part")
        #expect(m.download(second)?.partPath == "/d/file.iso.1.part")
    }

    @Test func moveReordersTheQueue() throws {
        var m = machine(maxActive: 1)
        let (a, _) = try started(&m)
        let (b, _) = try m.schedule(url: URL(string: "http://example.test/b")!, destination: .file("/d/b"))
        let (c, _) = try m.schedule(url: URL(string: "http://example.test/c")!, destination: .file("/d/c"))
        _ = try m.move(c, to: 0)
        #expect(m.order == [c, a, b])
        _ = try m.move(c, to: 99)
        #expect(m.order == [a, b, c])
        _ = try m.pause(a)
        #expect(m.download(b)?.state == .downloading, "the next in queue order takes the freed slot")
    }

    @Test func pauseAllResumeAllAndPurge() throws {
        var m = machine(maxActive: 1)
        let (a, attempt) = try started(&m)
        m.transferResponded(a, attempt: attempt, info: .init(
            status: 200, total: 10, validators: Validators(etag: "\"v1\"", lastModified: nil), finalURL: nil, serverFileName: nil, disposition: .fresh
        ))
        let (b, _) = try m.schedule(url: URL(string: "http://example.test/b")!, destination: .file("/d/b"))
        let paused = m.pauseAll()
        #expect(paused == [.stopTransfer(a, attempt)], "no freed slot starts a download that is being paused")
        #expect(m.all.map(\.state) == [.paused, .paused])
        let resumed = m.resumeAll()
        #expect(resumed.count == 1)
        #expect(m.all.map(\.state) == [.downloading, .queued])
        _ = m.pauseAll()
        #expect(m.download(a)?.etag == "\"v1\"")
        let purged = m.purgePaused().actions
        #expect(purged.contains(.deletePartFile(a, path: "/d/file.bin.part")))
        #expect(purged.contains(.deletePartFile(b, path: "/d/b.part", onlyMarked: true)))
        #expect(m.all.map(\.state) == [.paused, .paused], "purged downloads stay in the queue, paused")
        #expect(m.all.map(\.bytesOnDisk) == [0, 0])
        #expect(m.download(a)?.lastError?.hasPrefix("purged: ") == true, "\(m.download(a)?.lastError ?? "")")
        #expect(m.download(a)?.etag == nil && m.download(a)?.segments.isEmpty == true, "nothing of the discarded bytes is trusted")
        // Resuming fetches from zero, without a validator.
        let again = try m.resume(a)
        #expect(again.contains { if case .startTransfer = $0 { true } else { false } })
        #expect(m.resumeBasis(a)?.validators.isEmpty == true)
        #expect(m.purgePaused().actions.allSatisfy { if case .deletePartFile(let id, _, _) = $0 { id == b } else { false } }, "only paused ones")
        // The purge's note holds until an answer comes; then it would be false (a tester's row said
        // "resuming fetches it from zero" over bytes fetched since, resumes later).
        #expect(m.download(a)?.lastError?.hasPrefix("purged: ") == true)
        let restarted = try #require(again.compactMap { if case .startTransfer(let order) = $0 { order.attempt } else { nil } }.first)
        m.transferResponded(a, attempt: restarted, info: .init(
            status: 200, total: 10, validators: Validators(etag: "\"v2\"", lastModified: nil), finalURL: nil, serverFileName: nil, disposition: .fresh
        ))
        #expect(m.download(a)?.lastError == nil)
    }

    /// A finished file whose destination is read-only or forbidden pauses, its file whole; a
    /// resume fetches nothing but a check that the file is whole (a 206 of its last 4 KiB), then places it.
    @Test func aPlacementIntoAnUnwritableDestinationPauses() throws {
        var m = machine(maxActive: 2)
        let (a, attempt) = try started(&m)
        let (b, _) = try m.schedule(url: URL(string: "http://example.test/b")!, destination: .file("/d/b"))
        _ = m.transferFinished(a, attempt: attempt, outcome: .completed, bytesOnDisk: 10, now: Date(), jitter: 0)
        #expect(m.placing.contains(a))
        let next = m.placementPaused(a, reason: "cannot create /ro/file.bin: Read-only file system (paused until it is writable)")
        #expect(m.download(a)?.state == .paused && !m.placing.contains(a))
        #expect(m.download(a)?.lastError == "cannot create /ro/file.bin: Read-only file system (paused until it is writable)")
        #expect(next.isEmpty && m.download(b)?.state == .downloading)
        #expect(m.takeHistory(at: Date()).filter { $0.download == a }.suffix(2).map(\.kind) == [.error, .paused])
        // Being placed, a cancel is refused as such (the list says `downloading` until it is placed).
        let (c, placing) = try started(&m, URL(string: "http://example.test/c")!, to: "/d/c")
        _ = m.transferFinished(c, attempt: placing, outcome: .completed, bytesOnDisk: 5, now: Date(), jitter: 0)
        #expect(throws: Machine.TransitionError.illegal(c, state: "being placed", intent: "cancel")) { try m.cancel(c) }
        _ = m.finalized(c, paths: ["/d/c"])
        #expect(throws: Machine.TransitionError.illegal(c, state: "completed", intent: "cancel")) { try m.cancel(c) }
        let resumed = try m.resume(a)
        #expect(resumed.contains { if case .startTransfer(let order) = $0 { order.id == a } else { false } }, "its next transfer finds the file whole")
        #expect(m.download(a)?.bytesOnDisk == 10, "its bytes kept")
    }

    @Test func progressFeedsASmoothedSpeed() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let first = m.transferProgressed(id, attempt: attempt, bytesOnDisk: 0, at: 0)
        let second = m.transferProgressed(id, attempt: attempt, bytesOnDisk: 1000, at: 1)
        let third = m.transferProgressed(id, attempt: attempt, bytesOnDisk: 3000, at: 2)
        #expect(!first && second && third)
        #expect(m.download(id)?.bytesPerSecond == 1500)
    }
}
