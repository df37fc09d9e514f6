import DownloadCore
import Foundation
import Testing

@Suite struct SegmentsTests {
    @Test func aSplitTilesTheRestInNearEqualParts() {
        let parts = Segments.split(offset: 1000, total: 10_000, count: 3)
        #expect(parts == [
            Segment(start: 0, next: 1000, end: 4000),
            Segment(start: 4000, next: 4000, end: 7000),
            Segment(start: 7000, next: 7000, end: 10_000),
        ])
        #expect(Segments.isValid(parts, total: 10_000))
        #expect(Segments.bytesOnDisk(parts) == 1000)
        #expect(Segments.partCount(remaining: 5 * Segments.minimumPart + 1, connections: 8) == 5)
        #expect(Segments.partCount(remaining: 100, connections: 8) == 1)
    }

    @Test func invalidPartsAreRefused() {
        #expect(!Segments.isValid([], total: 10))
        #expect(!Segments.isValid([Segment(start: 0, next: 5, end: 10)], total: nil))
        #expect(!Segments.isValid([Segment(start: 1, next: 5, end: 10)], total: 10), "must start at 0")
        #expect(!Segments.isValid([Segment(start: 0, next: 5, end: 4), Segment(start: 4, next: 4, end: 10)], total: 10), "next past end")
        #expect(!Segments.isValid([Segment(start: 0, next: 0, end: 4), Segment(start: 5, next: 5, end: 10)], total: 10), "gap")
        #expect(!Segments.isValid([Segment(start: 0, next: 0, end: 9)], total: 10), "short of the total")
    }

    @Test func encodingRoundTripsAndRejectsGarbage() {
        let parts = [Segment(start: 0, next: 7, end: 10), Segment(start: 10, next: 12, end: 30)]
        #expect(Segments.encode(parts) == "0-7-10,10-12-30")
        #expect(Segments.decode("0-7-10,10-12-30") == parts)
        #expect(Segments.decode("0-7,1-2-3") == nil)
        #expect(Segments.decode("a-b-c") == nil)
    }

    @Test func completePartsMergeIntoTheNext() {
        let parts = [Segment(start: 0, next: 10, end: 10), Segment(start: 10, next: 15, end: 20), Segment(start: 20, next: 20, end: 30)]
        #expect(Segments.merged(parts) == [Segment(start: 0, next: 15, end: 20), Segment(start: 20, next: 20, end: 30)])
    }

    @Test func aBoardHandsOutFreePartsThenStealsHalfOfTheLargestRemainder() {
        let mib = Int64(1 << 20)
        var board = SegmentBoard(Segments.split(offset: 0, total: 4 * mib, count: 2))
        let first = board.claim(for: 0)
        let second = board.claim(for: 1)
        #expect(first == SegmentBoard.Claim(part: 0, from: 0, to: 2 * mib))
        #expect(second == SegmentBoard.Claim(part: 1, from: 2 * mib, to: 4 * mib))
        // Connection 1 writes its part to the end; connection 0 has written 512 KiB.
        #expect(board.reserve(part: 1, at: 2 * mib, count: 2 * mib) == 2 * mib)
        board.wrote(part: 1, count: 2 * mib)
        board.release(part: 1)
        #expect(board.reserve(part: 0, at: 0, count: mib / 2) == mib / 2)
        board.wrote(part: 0, count: mib / 2)
        // Idle connection 1 takes the upper half of what connection 0 has not reserved.
        let stolen = board.claim(for: 1)
        #expect(stolen?.from == mib / 2 + (2 * mib - mib / 2) / 2)
        #expect(stolen?.to == 2 * mib)
        // Connection 0 stops at the new end: a chunk across it is cut.
        let end = try? #require(stolen?.from)
        #expect(board.reserve(part: 0, at: mib / 2, count: 4 * mib) == (end ?? 0) - mib / 2)
        #expect(board.bytesOnDisk == 2 * mib + mib / 2)
        #expect(!board.isComplete)
        #expect(Segments.isValid(board.segments, total: 4 * mib))
    }

    @Test func aReleasedPartGivesBackWhatWasReservedButNotWritten() {
        var board = SegmentBoard([Segment(start: 0, next: 0, end: 1000)])
        _ = board.claim(for: 0)
        #expect(board.reserve(part: 0, at: 0, count: 600) == 600)
        board.wrote(part: 0, count: 200)
        board.release(part: 0)
        #expect(board.segments == [Segment(start: 0, next: 200, end: 1000)])
        #expect(board.claim(for: 3) == SegmentBoard.Claim(part: 0, from: 200, to: 1000))
        #expect(board.reserve(part: 0, at: 100, count: 10) == 0, "a writer at the wrong place gets nothing")
    }

    @Test func aSmallRemainderIsNotWorthAStealAndAFinishedBoardHasNoWork() {
        var board = SegmentBoard([Segment(start: 0, next: 0, end: Segments.minimumSteal)])
        _ = board.claim(for: 0)
        #expect(board.claim(for: 1) == nil)
        #expect(board.reserve(part: 0, at: 0, count: Segments.minimumSteal) == Segments.minimumSteal)
        board.wrote(part: 0, count: Segments.minimumSteal)
        board.release(part: 0)
        #expect(board.isComplete)
        #expect(board.claim(for: 0) == nil)
    }

    @Test func partResponsesFollowTheResumeRules() {
        let validators = Validators(etag: "\"v1\"")
        let ok = ResponseFacts(status: 206, contentRange: "bytes 100-199/1000", etag: "\"v1\"")
        #expect(ResumeRules.decidePart(from: 100, response: ok, total: 1000, validators: validators) == .write)
        let wrongStart = ResponseFacts(status: 206, contentRange: "bytes 0-199/1000", etag: "\"v1\"")
        #expect(ResumeRules.decidePart(from: 100, response: wrongStart, total: 1000, validators: validators)
            == .restart(reason: "server sent bytes from 0, asked for 100", freshBody: false))
        let longer = ResponseFacts(status: 206, contentRange: "bytes 100-199/2000", etag: "\"v1\"")
        #expect(ResumeRules.decidePart(from: 100, response: longer, total: 1000, validators: validators)
            == .restart(reason: "resource changed (length 2000, was 1000)", freshBody: false))
        let otherTag = ResponseFacts(status: 206, contentRange: "bytes 100-199/1000", etag: "\"v2\"")
        #expect(ResumeRules.decidePart(from: 100, response: otherTag, total: 1000, validators: validators)
            == .restart(reason: "resource changed (ETag)", freshBody: false))
        let whole = ResponseFacts(status: 200, contentLength: 1000, etag: "\"v2\"")
        #expect(ResumeRules.decidePart(from: 100, response: whole, total: 1000, validators: validators)
            == .restart(reason: "resource changed", freshBody: true))
        #expect(ResumeRules.decidePart(from: 100, response: ResponseFacts(status: 416), total: 1000, validators: validators)
            == .restart(reason: "range not satisfiable (resource shorter than before)", freshBody: false))
        #expect(ResumeRules.decidePart(from: 100, response: ResponseFacts(status: 503, retryAfter: "2"), total: 1000, validators: validators)
            == .retry(reason: "HTTP 503", retryAfter: "2"))
        #expect(ResumeRules.decidePart(from: 100, response: ResponseFacts(status: 404), total: 1000, validators: validators)
            == .fail(reason: "HTTP 404"))
    }

    func segmented(_ parts: [Segment], total: Int64) -> Download {
        var download = Download(id: DownloadID(1), url: URL(string: "http://h/x")!, destination: .file("/d/x"), partPath: "/d/x.part")
        download.state = .downloading
        download.totalBytes = total
        download.etag = "\"v1\""
        download.segments = parts
        download.bytesOnDisk = 12_345
        return download
    }

    @Test func recoveryTrustsTheStoredPartsNotTheFileLength() {
        let parts = [Segment(start: 0, next: 300, end: 500), Segment(start: 500, next: 800, end: 1000)]
        let plan = QueueRecovery.plan(segmented(parts, total: 1000), partLength: 1000, checkpointBoot: "a", currentBoot: "a")
        #expect(plan.download.bytesOnDisk == 600)
        #expect(plan.download.segments == parts)
        #expect(plan.truncateTo == nil)
        let rebooted = QueueRecovery.plan(segmented(parts, total: 1000), partLength: 1000, checkpointBoot: "a", currentBoot: "b")
        #expect(rebooted.download.bytesOnDisk == 600, "parts are only stored once synced: a reboot changes nothing")
    }

    @Test func recoveryStartsOverWhenTheFileCannotHoldTheParts() {
        let parts = [Segment(start: 0, next: 300, end: 500), Segment(start: 500, next: 800, end: 1000)]
        let short = QueueRecovery.plan(segmented(parts, total: 1000), partLength: 700, checkpointBoot: nil, currentBoot: nil)
        #expect(short.download.segments.isEmpty)
        #expect(short.download.bytesOnDisk == 0)
        #expect(short.truncateTo == 0, "holes must never pass for a prefix")
        let missing = QueueRecovery.plan(segmented(parts, total: 1000), partLength: nil, checkpointBoot: nil, currentBoot: nil)
        #expect(missing.download.segments.isEmpty && missing.download.bytesOnDisk == 0 && missing.truncateTo == nil)
        let garbled = QueueRecovery.plan(segmented([Segment(start: -1, next: -1, end: -1)], total: 1000), partLength: 1000, checkpointBoot: nil, currentBoot: nil)
        #expect(garbled.download.segments.isEmpty && garbled.truncateTo == 0)
    }

    /// A machine that started one download over `connections`: its id and its order.
    private func started(connections: Int) throws -> (SessionStateMachine, DownloadID, SessionStateMachine.TransferOrder) {
        var machine = SessionStateMachine()
        let url = try #require(URL(string: "http://h/x"))
        let (id, actions) = try machine.schedule(url: url, destination: .file("/d/x"), options: RequestOptions(connections: connections))
        guard case .startTransfer(let order) = actions.first else { throw NoStart() }
        return (machine, id, order)
    }

    private struct NoStart: Error {}

    @Test func theMachineKeepsPartsUntilTheVersionGoesOrTheFileCompletes() throws {
        var (machine, id, order) = try started(connections: 4)
        #expect(order.options.connections == 4)
        let parts = Segments.split(offset: 0, total: 4 << 20, count: 4)
        machine.recordSegments(id, parts)
        #expect(machine.resumeBasis(id)?.segments == parts)
        machine.discardVersion(id)
        #expect(machine.resumeBasis(id)?.segments == [])
        #expect(machine.resumeBasis(id)?.knownTotal == nil, "nothing left that could make holes look resumable")
        machine.recordSegments(id, parts)
        _ = machine.transferFinished(id, attempt: order.attempt, outcome: .completed, bytesOnDisk: 4 << 20, now: Date(), jitter: 0)
        #expect(machine.download(id)?.segments == [])
    }

    @Test func partsWrittenDuringACheckpointsSyncOutliveItsClaimWhenAheadInEveryPart() throws {
        var (machine, id, order) = try started(connections: 2)
        machine.recordSegments(id, [Segment(start: 0, next: 0, end: 500), Segment(start: 500, next: 500, end: 1000)])
        // A checkpoint samples the parts, then syncs them; the parts written meanwhile are recorded.
        let sampled = [Segment(start: 0, next: 100, end: 500), Segment(start: 500, next: 600, end: 1000)]
        let written = [Segment(start: 0, next: 300, end: 500), Segment(start: 500, next: 800, end: 1000)]
        machine.recordWrittenSegments(id, attempt: order.attempt, written)
        #expect(machine.download(id)?.writtenSegments == written)
        machine.recordSyncedSegments(id, sampled)
        #expect(machine.download(id)?.segments == sampled)
        #expect(machine.download(id)?.writtenSegments == written, "the parts written during the sync stay")
        // A claim that catches up with them takes their place.
        machine.recordSyncedSegments(id, written)
        #expect(machine.download(id)?.segments == written)
        #expect(machine.download(id)?.writtenSegments == [])
        // Written parts behind the claim in one part go, as do parts of another split.
        machine.recordWrittenSegments(id, attempt: order.attempt, [Segment(start: 0, next: 450, end: 500), Segment(start: 500, next: 790, end: 1000)])
        machine.recordSyncedSegments(id, [Segment(start: 0, next: 310, end: 500), Segment(start: 500, next: 800, end: 1000)])
        #expect(machine.download(id)?.writtenSegments == [])
        machine.recordWrittenSegments(id, attempt: order.attempt, [Segment(start: 0, next: 400, end: 400), Segment(start: 400, next: 900, end: 1000)])
        machine.recordSyncedSegments(id, [Segment(start: 0, next: 320, end: 500), Segment(start: 500, next: 800, end: 1000)])
        #expect(machine.download(id)?.writtenSegments == [])
        // Parts the whole recording went with the split (`recordSegments`) never survive it.
        machine.recordWrittenSegments(id, attempt: order.attempt, [Segment(start: 0, next: 450, end: 500), Segment(start: 500, next: 900, end: 1000)])
        machine.recordSegments(id, [Segment(start: 0, next: 320, end: 500), Segment(start: 500, next: 800, end: 1000)])
        #expect(machine.download(id)?.writtenSegments == [])
    }

    @Test func partsAreAheadOnlyWhenTheSameAndNoneBehind() {
        let base = [Segment(start: 0, next: 100, end: 500), Segment(start: 500, next: 600, end: 1000)]
        #expect(Segments.isAhead([Segment(start: 0, next: 101, end: 500), Segment(start: 500, next: 600, end: 1000)], of: base))
        #expect(!Segments.isAhead(base, of: base), "equal is not ahead")
        #expect(!Segments.isAhead([Segment(start: 0, next: 400, end: 500), Segment(start: 500, next: 599, end: 1000)], of: base))
        #expect(!Segments.isAhead([Segment(start: 0, next: 400, end: 400), Segment(start: 400, next: 900, end: 1000)], of: base))
        #expect(!Segments.isAhead([Segment(start: 0, next: 500, end: 1000)], of: base))
        #expect(!Segments.isAhead([], of: []))
    }
}
