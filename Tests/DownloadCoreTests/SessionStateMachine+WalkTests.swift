import DownloadCore
import Foundation
import Testing

/// `startEligible` walks the queue from where its last walk left the first queued download, not
/// from the top: a download that becomes startable above that point (queued again, a retry that
/// fell due, moved up) still takes the next free slot in queue order.
@Suite struct SessionStateMachineWalkTests {
    let now = Date(timeIntervalSince1970: 1_000_000)

    func machine() -> SessionStateMachine {
        SessionStateMachine(configuration: .init(maxActive: 1, maxTries: 20, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
    }

    func schedule(_ m: inout SessionStateMachine, _ name: String) throws -> DownloadID {
        try m.schedule(url: URL(string: "http://example.test/\(name)")!, destination: .file("/d/\(name)")).0
    }

    func started(_ actions: [SessionStateMachine.Action]) -> DownloadID? {
        for case .startTransfer(let order) in actions { return order.id }
        return nil
    }

    @Test func aDownloadQueuedAgainAboveTheWalksStartTakesTheNextSlot() throws {
        var m = machine()
        let a = try schedule(&m, "a")
        let b = try schedule(&m, "b")
        let c = try schedule(&m, "c")
        _ = try m.pause(b)
        // A's slot goes to C, the first queued: the walk ends below C.
        #expect(started(try m.pause(a)) == c)
        _ = try m.resume(b)
        // B, above C, is queued again: it takes the slot C gives up.
        #expect(started(try m.pause(c)) == b)
    }

    @Test func aRetryThatFellDueAboveTheWalksStartTakesTheNextSlot() throws {
        var m = machine()
        let a = try schedule(&m, "a")
        let b = try schedule(&m, "b")
        guard case .downloading = m.download(a)?.state, let attempt = m.runningAttempt(a) else {
            Issue.record("a did not start")
            return
        }
        let failed = m.transferFinished(a, attempt: attempt, outcome: .retryable(reason: "HTTP 503", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(started(failed) == b)
        guard case .scheduleRetry(_, let token, _)? = failed.first else {
            Issue.record("no retry: \(failed)")
            return
        }
        // Due while B holds the only slot: it waits for it.
        #expect(started(m.retryTimerFired(a, token: token)) == nil)
        #expect(started(try m.pause(b)) == a)
    }

    /// A held download is passed over but stays queued: the walk starts no lower than it, and
    /// once it is let go (no mark changes for that) it takes the next slot.
    @Test func aHeldDownloadPassedOverTakesTheNextSlotOnceLetGo() throws {
        var m = machine()
        let a = try schedule(&m, "a")
        let (b, held) = try m.schedule(url: URL(string: "http://example.test/b")!, destination: .file("/d/b"), hold: true)
        #expect(held.isEmpty)
        let c = try schedule(&m, "c")
        #expect(started(try m.pause(a)) == c, "B is held: C takes A's slot")
        #expect(started(try m.resume(b)) == nil, "no slot is free")
        #expect(started(try m.pause(c)) == b)
    }

    /// A download whose file system was under its floor is passed over but stays queued: once the
    /// file system has room again (no mark changes for that) it takes the next slot.
    @Test func aDownloadPassedOverOnALowDiskTakesTheNextSlotOnceThereIsRoom() throws {
        var m = machine()
        let a = try schedule(&m, "a")
        let b = try schedule(&m, "b")
        let c = try schedule(&m, "c")
        func reading(free: Int64, filesystem: UInt64) -> DiskReading {
            DiskReading(free: free << 20, capacity: 100 << 20, floor: 1 << 20, filesystem: filesystem)
        }
        let low = m.spaceChecked([a: reading(free: 50, filesystem: 2), b: reading(free: 0, filesystem: 1), c: reading(free: 50, filesystem: 2)], directory: nil, purgeWhenLow: false)
        #expect(started(low.actions) == nil)
        #expect(started(try m.pause(a)) == c, "B's disk is low: C takes A's slot")
        let room = m.spaceChecked([b: reading(free: 50, filesystem: 1), c: reading(free: 50, filesystem: 2)], directory: nil, purgeWhenLow: false)
        #expect(started(room.actions) == nil, "no slot is free")
        #expect(started(try m.pause(c)) == b)
    }

    @Test func aDownloadMovedAboveTheWalksStartTakesTheNextSlot() throws {
        var m = machine()
        let a = try schedule(&m, "a")
        let b = try schedule(&m, "b")
        _ = try schedule(&m, "c")
        let d = try schedule(&m, "d")
        #expect(started(try m.pause(a)) == b)
        _ = try m.move(d, to: 0)
        #expect(started(try m.pause(b)) == d, "D is first in the queue now, before C")
    }
}
