@testable import DownloadEngine
import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `BodyRelay`, transition by transition, without a socket or a file: the waiters are numbers, and
/// a write is "carried out" by telling the machine how many bytes reached the file.
@Suite struct BodyRelayTests {
    typealias Relay = BodyRelay<Int, Int, Int>

    struct Boom: Error, Equatable {}

    static let okHead = HTTPResponseHead(version: .http1_1, status: .ok)

    /// `count` bytes, each `value`, in a buffer of their own (a "client's" chunk).
    static func chunk(_ count: Int, _ value: UInt8 = 7) -> ByteBuffer {
        ByteBuffer(repeating: value, count: count)
    }

    static func prefix(at position: Int64 = 0, total: Int64? = nil) -> BodySink {
        .prefix(descriptor: 3, path: "/tmp/x.part", position: position, total: total)
    }

    /// The bytes of a write, in order.
    static func bytes(_ write: Relay.Write) -> [UInt8] {
        write.buffers.flatMap { Array($0.readableBytesView) }
    }

    // MARK: Head

    @Test func aWaiterHearsOfTheHeadOnce() {
        var relay = Relay()
        let waiting = relay.awaitHead(1)
        #expect(waiting == nil, "no head yet: the waiter is kept")
        guard case .settled(let waiter) = relay.headArrived(Self.okHead) else {
            Issue.record("the head settles")
            return
        }
        #expect(waiter == 1)
        guard case .ignored = relay.headFailed(Boom()) else {
            Issue.record("a failure after the head changes nothing")
            return
        }
        let later = relay.awaitHead(2)
        #expect((try? later?.get())?.status == .ok, "a later waiter gets the head at once")
    }

    @Test func aHeadAfterItsTimeoutIsIgnored() {
        var relay = Relay()
        _ = relay.awaitHead(1)
        guard case .settled(let waiter) = relay.headFailed(Boom()) else {
            Issue.record("the timeout settles the head")
            return
        }
        #expect(waiter == 1)
        guard case .ignored = relay.headArrived(Self.okHead) else {
            Issue.record("too late: nobody reads this body")
            return
        }
        let later = relay.awaitHead(2)
        #expect(throws: Boom.self) { try later?.get() }
    }

    @Test func aHeadAfterCancelIsIgnored() {
        var relay = Relay()
        let first = relay.cancel()
        let second = relay.cancel()
        #expect(first)
        #expect(!second, "cancelled once")
        guard case .ignored = relay.headArrived(Self.okHead) else {
            Issue.record("a stopped request takes no head")
            return
        }
        #expect(!relay.watchesForStall)
    }

    @Test func aRequestThatEndsWithoutAHeadFailsItsWaiter() {
        var relay = Relay()
        _ = relay.awaitHead(4)
        let end = relay.ended(nil)
        #expect(end.failHead == 4)
        #expect(end.settledHead)
        #expect(end.write == nil)
        let later = relay.awaitHead(5)
        #expect(throws: (any Error).self) { try later?.get() }
    }

    // MARK: Holding

    @Test func earlyBytesAreHeldUntilEnoughCame() {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        guard case .readOn(let took, nil) = relay.received(Self.chunk(4, 1)) else {
            Issue.record("held, reading on")
            return
        }
        #expect(took == 4, "held bytes count against the rate limit")
        let early = relay.awaitEarly(10, 9)
        #expect(early == nil, "4 of 10: the waiter is kept")
        guard case .readOn(8, let wake) = relay.received(Self.chunk(8, 2)) else {
            Issue.record("held, reading on")
            return
        }
        #expect(wake == 9, "12 of 10: the waiter wakes")
        #expect(relay.earlyBytes(10) == [1, 1, 1, 1, 2, 2, 2, 2, 2, 2])
        #expect(relay.earlyBytes(100).count == 12, "fewer when fewer came")
        #expect(relay.position == nil, "nothing relayed yet")
    }

    /// A small file's first bytes come in a buffer with room for the rest of it (`DirectStream`):
    /// they are held as they came, and what follows is added in that room, never copied twice.
    @Test func theFirstHeldBytesAreKeptAsTheyCameAndWhatFollowsGoesInTheirRoom() throws {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        var first = ByteBufferAllocator().buffer(capacity: 64)
        first.writeRepeatingByte(1, count: 4)
        let address = first.withUnsafeReadableBytes { $0.baseAddress }
        _ = relay.received(first)
        first = ByteBuffer()
        _ = relay.received(Self.chunk(8, 2))
        guard case .holding(let holding) = relay.body else {
            Issue.record("held")
            return
        }
        #expect(Array(holding.bytes.readableBytesView) == [1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2])
        holding.bytes.withUnsafeReadableBytes { held in
            #expect(held.baseAddress == address, "the first buffer itself, grown in place")
        }
    }

    @Test func readingPausesOnceTheHeldBytesAreMany() {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        guard case .readOn = relay.received(Self.chunk(Relay.earlyLimit - 1)) else {
            Issue.record("below the limit: read on")
            return
        }
        guard case .pause(nil) = relay.received(Self.chunk(1)) else {
            Issue.record("at the limit: pause")
            return
        }
        relay.paused(42)
        let start = relay.relay(to: Self.prefix())
        #expect(start.resume == 42, "relaying resumes reading")
        #expect(start.write?.count == Relay.earlyLimit, "the held bytes are written at once")
        #expect(!start.stopRequest)
    }

    @Test func anEndWithAnErrorFailsThePause() {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        _ = relay.received(Self.chunk(Relay.earlyLimit))
        relay.paused(42)
        let end = relay.ended(Boom())
        #expect(end.failPause == 42)
        #expect(end.failHead == nil, "the head had come")
        #expect(!end.settledHead)
    }

    @Test func anEndWithAnErrorFailsTheEarlyWaiter() throws {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        _ = relay.received(Self.chunk(3))
        let early = relay.awaitEarly(10, 3)
        #expect(early == nil, "3 of 10: the waiter is kept")
        _ = relay.ended(Boom())
        let woken = relay.wakeEarly()
        let (waiter, result) = try #require(woken)
        #expect(waiter == 3)
        #expect(throws: Boom.self) { try result.get() }
    }

    @Test func aFailedTaskAnswersEarlyWithItsError() {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        let early = relay.awaitEarly(5, 1)
        #expect(early == nil)
        relay.failed(Boom())
        let woken = relay.wakeEarly()
        #expect(woken?.0 == 1)
        #expect(throws: Boom.self) { try woken?.1.get() }
        #expect(relay.watchesForStall, "the delegate has not heard yet")
    }

    @Test func aFinishedBodyShorterThanAskedAnswersEarly() throws {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        _ = relay.received(Self.chunk(3))
        let early = relay.awaitEarly(16, 1)
        #expect(early == nil)
        _ = relay.ended(nil)
        let woken = relay.wakeEarly()
        let (waiter, result) = try #require(woken)
        #expect(waiter == 1)
        #expect(throws: Never.self) { try result.get() }
        #expect(relay.earlyBytes(16).count == 3)
    }

    @Test func aDroppedBodyStopsTheRequestAtItsNextChunk() {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        _ = relay.received(Self.chunk(Relay.earlyLimit))
        relay.paused(8)
        let pause = relay.drop()
        #expect(pause == 8, "the pause fails: reading stops for good")
        guard case .stop(let error) = relay.received(Self.chunk(10)) else {
            Issue.record("nobody wants the body")
            return
        }
        #expect(error is SinkFull)
        #expect(!relay.watchesForStall)
        #expect(relay.earlyBytes(10).isEmpty)
    }

    // MARK: Relaying

    @Test func largeChunksAreQueuedWithoutACopyAndWrittenTogether() throws {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        let start = relay.relay(to: Self.prefix(at: 1000))
        #expect(start.write == nil && start.resume == nil && !start.stopRequest)
        let first = Self.chunk(64 << 10, 1)
        guard case .readOn(let took, nil) = relay.received(first) else {
            Issue.record("64 KiB waits for more")
            return
        }
        #expect(took == 64 << 10)
        let armed = relay.armIdleFlush()
        let again = relay.armIdleFlush()
        #expect(armed, "bytes wait: a write is armed")
        #expect(!again, "armed once")
        guard case .write(let write) = relay.received(Self.chunk(64 << 10, 2)) else {
            Issue.record("128 KiB: written")
            return
        }
        #expect(write.position == 1000)
        #expect(write.count == 128 << 10)
        #expect(write.buffers.count == 2, "two slices, no copy into a buffer of ours")
        #expect(!write.ownLast)
        #expect(write.took == 64 << 10, "what the last chunk adds")
        first.withUnsafeReadableBytes { original in
            write.buffers[0].withUnsafeReadableBytes { queued in
                #expect(original.baseAddress == queued.baseAddress, "the client's bytes themselves")
            }
        }
        let (next, progress) = relay.wrote(write, written: write.count, error: nil)
        guard case .readOn(64 << 10, nil) = next else {
            Issue.record("read on after the write")
            return
        }
        #expect(progress == .at(1000 + (128 << 10)))
        let position = relay.position
        #expect(position == Int64(1000 + (128 << 10)))
        let armedAfter = relay.armIdleFlush()
        #expect(!armedAfter, "nothing waits")
    }

    @Test func moreSlicesThanTheClientReusesAreWrittenEarly() {
        var relay = Relay()
        _ = relay.relay(to: Self.prefix())
        for _ in 0..<Relay.maxSlices {
            guard case .readOn = relay.received(Self.chunk(Relay.copyBelow)) else {
                Issue.record("a few slices wait")
                return
            }
        }
        guard case .write(let write) = relay.received(Self.chunk(Relay.copyBelow)) else {
            Issue.record("one slice too many: written although under 128 KiB")
            return
        }
        #expect(write.buffers.count == Relay.maxSlices + 1)
        #expect(write.count < Relay.writeSize)
    }

    @Test func smallChunksAreCopiedIntoOneBufferAndWrittenWhenIdle() throws {
        var relay = Relay()
        _ = relay.relay(to: Self.prefix())
        for index in 0..<10 {
            guard case .readOn = relay.received(Self.chunk(1000, UInt8(index))) else {
                Issue.record("small chunks wait")
                return
            }
        }
        let armed = relay.armIdleFlush()
        #expect(armed)
        let due = relay.idleFlushDue()
        let write = try #require(due)
        #expect(write.buffers.count == 1, "ten small chunks in one buffer of ours")
        #expect(write.ownLast)
        #expect(Self.bytes(write) == (0..<10).flatMap { [UInt8](repeating: UInt8($0), count: 1000) })
        _ = relay.wrote(write, written: write.count, error: nil)
        let none = relay.idleFlushDue()
        #expect(none == nil, "nothing waits")
        // A small chunk after a large one goes in a buffer of ours after it: the order holds.
        _ = relay.received(Self.chunk(Relay.copyBelow, 1))
        _ = relay.received(Self.chunk(10, 2))
        _ = relay.received(Self.chunk(10, 3))
        let mixedDue = relay.idleFlushDue()
        let mixed = try #require(mixedDue)
        #expect(mixed.buffers.count == 2)
        #expect(Self.bytes(mixed) == [UInt8](repeating: 1, count: Relay.copyBelow) + [UInt8](repeating: 2, count: 10) + [UInt8](repeating: 3, count: 10))
    }

    @Test func theBodyIsClampedToTheTotal() {
        var relay = Relay()
        _ = relay.relay(to: Self.prefix(at: 50, total: 150))
        guard case .write(let write) = relay.received(Self.chunk(300)) else {
            Issue.record("full: what fits is written at once")
            return
        }
        #expect(write.count == 100)
        let (next, progress) = relay.wrote(write, written: 100, error: nil)
        guard case .stop(let error) = next else {
            Issue.record("full: the request stops")
            return
        }
        #expect(error is SinkFull)
        #expect(progress == .at(150))
        #expect(relay.position == 150)
        guard case .stop = relay.received(Self.chunk(1)) else {
            Issue.record("nothing more is taken")
            return
        }
        #expect((try? relay.outcome(taskError: Boom()).get()) == .sinkFull, "the stop's error is the full sink")
        #expect((try? relay.outcome(taskError: nil).get()) == .finished)
    }

    @Test func heldBytesBeyondTheTotalStopTheRequestAtOnce() {
        var relay = Relay()
        _ = relay.received(Self.chunk(40))
        let start = relay.relay(to: Self.prefix(at: 0, total: 30))
        #expect(start.write?.count == 30)
        #expect(start.stopRequest)
    }

    @Test func heldBytesAfterTheEndAreWrittenAtOnce() {
        var relay = Relay()
        _ = relay.received(Self.chunk(10))
        _ = relay.ended(nil)
        let start = relay.relay(to: Self.prefix())
        #expect(start.write?.count == 10, "nothing more comes: no idle wait")
        #expect(!start.stopRequest)
        let armed = relay.armIdleFlush()
        #expect(!armed, "never armed after the end")
    }

    @Test func aFailedWriteStopsTheBodyWhereTheFileEnds() {
        var relay = Relay()
        _ = relay.relay(to: Self.prefix(at: 0))
        _ = relay.received(Self.chunk(64 << 10))
        guard case .write(let write) = relay.received(Self.chunk(64 << 10)) else {
            Issue.record("written")
            return
        }
        let (next, progress) = relay.wrote(write, written: 1000, error: ENOSPC)
        guard case .stop(let error) = next, let failure = error as? PartFile.Failure else {
            Issue.record("the write failure stops the request")
            return
        }
        #expect(failure.isOutOfSpace)
        #expect(progress == .at(1000), "what reached the file counts")
        #expect(relay.position == 1000, "bytes not written are no longer taken")
        guard case .stop(let again) = relay.received(Self.chunk(5)) else {
            Issue.record("nothing more is taken")
            return
        }
        #expect((again as? PartFile.Failure)?.code == ENOSPC)
        #expect(throws: PartFile.Failure.self) { try relay.outcome(taskError: Boom()).get() }
        #expect(throws: PartFile.Failure.self) { try relay.outcome(taskError: nil).get() }
    }

    @Test func theEndWritesWhatWaitsAndNothingAfter() {
        var relay = Relay()
        _ = relay.headArrived(Self.okHead)
        _ = relay.relay(to: Self.prefix(at: 7))
        _ = relay.received(Self.chunk(500))
        let armed = relay.armIdleFlush()
        #expect(armed)
        let end = relay.ended(nil)
        #expect(end.write?.count == 500)
        #expect(end.write?.position == 7)
        #expect(!end.settledHead, "the head had come")
        let due = relay.idleFlushDue()
        #expect(due == nil, "the descriptor may be closed: an armed write does nothing")
        #expect(!relay.watchesForStall)
        let again = relay.ended(Boom())
        #expect(again.write == nil, "ended once")
        #expect((try? relay.outcome(taskError: nil).get()) == .finished)
    }

    @Test func aPartIsWrittenUpToItsEndOnTheBoard() {
        let board = SharedBoard([Segment(start: 0, next: 0, end: 100), Segment(start: 100, next: 100, end: 200)])
        board.withBoard { $0.assign(part: 1, to: 0) }
        var relay = Relay()
        _ = relay.relay(to: .part(descriptor: 3, path: "/tmp/x.part", board: board, part: 1, position: 100))
        guard case .write(let write) = relay.received(Self.chunk(150)) else {
            Issue.record("the part's end: written at once")
            return
        }
        #expect(write.position == 100)
        #expect(write.count == 100)
        #expect(board.withBoard { $0.parts[1].reserved } == 200, "reserved on the board before the write")
        #expect(board.withBoard { $0.parts[1].next } == 100)
        let (next, progress) = relay.wrote(write, written: 100, error: nil)
        #expect(progress == .added(100))
        #expect(board.withBoard { $0.parts[1].next } == 200, "written on the board")
        guard case .stop(let error) = next else {
            Issue.record("the part is full")
            return
        }
        #expect(error is SinkFull)
    }

    @Test func aStolenPartEndStopsItsWriter() throws {
        let size: Int64 = 4 * Segments.minimumSteal
        let board = SharedBoard([Segment(start: 0, next: 0, end: size)])
        board.withBoard { $0.assign(part: 0, to: 0) }
        var relay = Relay()
        _ = relay.relay(to: .part(descriptor: 3, path: "/tmp/x.part", board: board, part: 0, position: 0))
        guard case .readOn = relay.received(Self.chunk(100)) else {
            Issue.record("within the part")
            return
        }
        // Another connection takes the upper half of what is not reserved yet.
        let claim = try #require(board.withBoard { $0.claim(for: 1) })
        let end = claim.from
        guard case .write(let write) = relay.received(Self.chunk(Int(size))) else {
            Issue.record("the new end: written at once")
            return
        }
        #expect(write.count == Int(end), "up to the new end, not the old one")
        guard case .stop = relay.wrote(write, written: write.count, error: nil).0 else {
            Issue.record("the part is full")
            return
        }
        #expect(relay.position == end)
    }

    // MARK: Bytes in a pipe (DirectStream's splice)

    @Test func bytesInAPipeAreWrittenAtOnceWithoutBuffers() {
        var relay = Relay()
        _ = relay.relay(to: Self.prefix(at: 10, total: nil))
        guard case .write(let write) = relay.receivedInPipe(1 << 20) else {
            Issue.record("a splice is written at once, never queued")
            return
        }
        #expect(write.buffers.isEmpty && write.count == 1 << 20 && write.position == 10 && write.took == 1 << 20)
        #expect(relay.position == Int64(10 + (1 << 20)), "taken")
        let (next, progress) = relay.wrote(write, written: 1 << 20, error: nil)
        guard case .readOn(let took, _) = next else {
            Issue.record("read on")
            return
        }
        #expect(took == 1 << 20, "the rate limit counts the spliced bytes")
        #expect(progress == .at(10 + (1 << 20)))
    }

    @Test func bytesInAPipeAreClampedToTheTotalAndStopTheRequest() {
        var relay = Relay()
        _ = relay.relay(to: Self.prefix(at: 0, total: 100))
        guard case .write(let write) = relay.receivedInPipe(300) else {
            Issue.record("what fits is written")
            return
        }
        #expect(write.count == 100, "the 200 past the total stay in the pipe, for nobody")
        guard case .stop(let error) = relay.wrote(write, written: 100, error: nil).0 else {
            Issue.record("full: the request stops")
            return
        }
        #expect(error is SinkFull)
        guard case .stop = relay.receivedInPipe(5) else {
            Issue.record("nothing more is taken")
            return
        }
        #expect((try? relay.outcome(taskError: SinkFull()).get()) == .sinkFull)
    }

    @Test func aFailedSpliceStopsWhereTheFileEnds() {
        var relay = Relay()
        _ = relay.relay(to: Self.prefix(at: 0))
        guard case .write(let write) = relay.receivedInPipe(4096) else {
            Issue.record("written")
            return
        }
        let (next, progress) = relay.wrote(write, written: 1000, error: ENOSPC)
        guard case .stop(let error) = next, (error as? PartFile.Failure)?.isOutOfSpace == true else {
            Issue.record("the write failure stops the request")
            return
        }
        #expect(progress == .at(1000))
        #expect(relay.position == 1000, "bytes not written are no longer taken")
    }

    @Test func aPipeIsNeverTakenWhileBytesAreHeldOrQueued() throws {
        var relay = Relay()
        guard case .stop = relay.receivedInPipe(10) else {
            Issue.record("no sink yet: the stream reads into memory instead")
            return
        }
        relay = Relay()
        _ = relay.relay(to: Self.prefix(at: 0))
        _ = relay.received(Self.chunk(100))
        #expect(relay.hasQueued)
        guard case .stop = relay.receivedInPipe(10) else {
            Issue.record("queued bytes go first: spliced bytes would land before them")
            return
        }
        var queued = Relay()
        _ = queued.relay(to: Self.prefix(at: 0))
        _ = queued.received(Self.chunk(100))
        let flushed = queued.flushQueue()
        let flush = try #require(flushed)
        #expect(flush.count == 100 && flush.position == 0)
        _ = queued.wrote(flush, written: 100, error: nil)
        #expect(!queued.hasQueued)
        guard case .write(let write) = queued.receivedInPipe(10) else {
            Issue.record("then the pipe's bytes follow")
            return
        }
        #expect(write.position == 100)
        let again = queued.flushQueue()
        #expect(again == nil, "nothing waits")
    }

    @Test func aPartTakesFromAPipeWhatTheBoardGrants() {
        let board = SharedBoard([Segment(start: 0, next: 0, end: 100), Segment(start: 100, next: 100, end: 200)])
        board.withBoard { $0.assign(part: 1, to: 0) }
        var relay = Relay()
        _ = relay.relay(to: .part(descriptor: 3, path: "/tmp/x.part", board: board, part: 1, position: 100))
        guard case .write(let write) = relay.receivedInPipe(150) else {
            Issue.record("granted up to the part's end")
            return
        }
        #expect(write.position == 100 && write.count == 100)
        #expect(board.withBoard { $0.parts[1].reserved } == 200)
        let (next, progress) = relay.wrote(write, written: 100, error: nil)
        #expect(progress == .added(100))
        guard case .stop = next else {
            Issue.record("the part is full")
            return
        }
    }
}

/// `ResponseStream.gather`: slices of several buffers reach a real file in order, with one
/// `pwritev` or more.
@Suite struct GatherWriteTests {
    @Test func slicesOfSeveralBuffersReachTheFileInOrder() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gather-\(UUID().uuidString)").path
        defer { unlink(path) }
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        let whole = ByteBuffer(bytes: (0..<300).map { UInt8($0 % 251) })
        let parts = [
            try #require(whole.getSlice(at: 0, length: 100)),
            ByteBuffer(bytes: [UInt8](repeating: 9, count: 50)),
            try #require(whole.getSlice(at: 100, length: 200)),
        ]
        let (written, error) = ResponseStream.gather(parts, count: 350, to: fd, at: 10)
        #expect(written == 350)
        #expect(error == nil)
        let data = try #require(FileManager.default.contents(atPath: path))
        #expect(data.count == 360)
        #expect(Array(data[0..<10]) == [UInt8](repeating: 0, count: 10), "a hole before the offset")
        #expect(Array(data[10..<360]) == parts.flatMap { Array($0.readableBytesView) })
    }

    @Test func aWriteToAClosedDescriptorSaysWhy() {
        let (written, error) = ResponseStream.gather([ByteBuffer(bytes: [1, 2, 3])], count: 3, to: -1, at: 0)
        #expect(written == 0)
        #expect(error == EBADF)
    }
}
