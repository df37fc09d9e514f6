import DownloadCore
import Foundation
import Testing

/// Issue 18: the machine's disk-space transitions (waiting for room, starting again, purging under
/// pressure), one by one and without I/O.
@Suite struct DiskSpaceMachineTests {
    typealias Machine = SessionStateMachine
    let now = Date(timeIntervalSince1970: 1_000_000)
    static let mib: Int64 = 1 << 20

    func machine(maxActive: Int = 3) -> Machine {
        Machine(configuration: .init(maxActive: maxActive, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
    }

    func url(_ name: String) -> URL {
        URL(string: "http://example.test/\(name)") ?? URL(fileURLWithPath: "/")
    }

    /// A file system `filesystem` with `free` MiB free, a 1 MiB floor, 100 MiB in all.
    func reading(free: Int64, filesystem: UInt64 = 1) -> DiskReading {
        DiskReading(free: free * Self.mib, capacity: 100 * Self.mib, floor: Self.mib, filesystem: filesystem)
    }

    func started(_ m: inout Machine, _ name: String) throws -> (DownloadID, AttemptID) {
        let (id, actions) = try m.schedule(url: url(name), destination: .file("/d/\(name)"))
        guard case .startTransfer(let order)? = actions.last else { throw Failure(text: "not started: \(actions)") }
        return (id, order.attempt)
    }

    struct Failure: Error { var text: String }

    func isWaitingForSpace(_ m: Machine, _ id: DownloadID) -> Bool {
        if case .waitingForSpace = m.download(id)?.state { true } else { false }
    }

    // MARK: Words

    @Test func theWordsSayWhatIsFreeAndTheFloor() {
        let low = reading(free: 0)
        #expect(SpaceShortage.belowFloor.words(low) == "waiting for disk space (0 B free, floor 1.0 MiB)")
        #expect(SpaceShortage.cannotFit(needs: 10 * Self.mib).words(reading(free: 5))
            == "waiting for disk space (needs 10.0 MiB, 5.0 MiB free, floor 1.0 MiB)")
        #expect(SpaceShortage.cannotFit(needs: 200 * Self.mib).words(reading(free: 5))
            == "waiting for disk space (needs 200 MiB; the file system holds 100 MiB in all)")
        // Less than the file system holds, more than the floor leaves: the floor is said (a
        // tester's read as a file larger than the disk).
        #expect(SpaceShortage.cannotFit(needs: 99 * Self.mib + Self.mib / 2).words(reading(free: 5))
            == "waiting for disk space (needs 99.5 MiB; the file system holds 100 MiB in all, floor 1.0 MiB: lower --min-free)")
        #expect(SpaceShortage.writeFailed("disk full").words(low) == "waiting for disk space (disk full, 0 B free, floor 1.0 MiB)")
        #expect(SpaceShortage.writeFailed("over quota").words(nil) == "waiting for disk space (over quota)")
        #expect(DownloadState.waitingForSpace(reason: "x").word == "waiting", "counted with the waiting rows")
        #expect(DownloadState.waitingForSpace(reason: "x").isPending && !DownloadState.waitingForSpace(reason: "x").isFinished)
    }

    /// A finished file whose copy for another requester found no room waits for room where the
    /// copy goes, its file whole, and is placed again (no transfer) once the whole file fits there.
    /// A tester's row said `failed`, and the first requester's file was never placed.
    @Test func aPlacementWithoutRoomWaitsWhereItsCopyGoesAndIsPlacedAgain() throws {
        var m = machine()
        let (id, attempt) = try started(&m, "f.bin")
        _ = try m.schedule(url: url("f.bin"), destination: .directory("/b"))
        m.transferResponded(id, attempt: attempt, info: .init(
            status: 200, total: 10 * Self.mib, validators: Validators(), finalURL: nil, serverFileName: nil, disposition: .fresh
        ))
        let ended = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 10 * Self.mib, now: now, jitter: 0)
        #expect(ended.contains(.finalize(id)))
        _ = m.placementLacksRoom(id, at: "/b/f.bin.haul-copy", shortage: .writeFailed("disk full"), reading: reading(free: 3, filesystem: 2))
        #expect(m.download(id)?.state == .waitingForSpace(reason: "waiting for disk space (disk full, 3.0 MiB free, floor 1.0 MiB)"))
        #expect(!m.placing.contains(id))
        #expect(m.spaceWatchList(includePaused: false).map(\.1) == ["/b/f.bin.haul-copy"], "read where the copy goes")
        // No more room than when it failed: it waits.
        #expect(m.spaceChecked([id: reading(free: 3, filesystem: 2)], directory: nil, purgeWhenLow: false).actions.isEmpty)
        // More, but not the whole file above the floor: it waits, saying what it needs.
        #expect(m.spaceChecked([id: reading(free: 8, filesystem: 2)], directory: nil, purgeWhenLow: false).actions.isEmpty)
        #expect(m.download(id)?.state == .waitingForSpace(reason: "waiting for disk space (needs 10.0 MiB, 8.0 MiB free, floor 1.0 MiB)"))
        // Room for it: placed again, without a transfer.
        let check = m.spaceChecked([id: reading(free: 20, filesystem: 2)], directory: nil, purgeWhenLow: false)
        #expect(check.actions == [.finalize(id)])
        #expect(m.download(id)?.state == .completed && m.placing.contains(id))
        #expect(m.spaceWatchList(includePaused: false).isEmpty)
    }

    @Test func theFloorIsOneGibibyteOrOnePercentWhicheverIsSmaller() throws {
        #expect(SpaceFloor.automatic.bytes(capacity: 24 * Self.mib) == 24 * Self.mib / 100)
        #expect(SpaceFloor.automatic.bytes(capacity: 1 << 40) == 1 << 30)
        #expect(SpaceFloor.bytes(5).bytes(capacity: 1 << 40) == 5)
        #expect(try SpaceFloor.parse("2G", what: "--min-free") == .bytes(2 << 30))
        #expect(try SpaceFloor.parse("0", what: "--min-free") == .bytes(0))
        #expect(try SpaceFloor.parse("auto", what: "--min-free") == .automatic)
        #expect(throws: ByteCount.Invalid.self) { try SpaceFloor.parse("lots", what: "--min-free") }
        #expect(throws: ByteCount.Invalid.self) { try SpaceFloor.parse("-1M", what: "--min-free") }
    }

    // MARK: Running under the floor

    @Test func aRunningDownloadUnderTheFloorStopsAndWaitsWithItsBytes() throws {
        var m = machine()
        let (id, attempt) = try started(&m, "a.bin")
        m.transferProgressed(id, attempt: attempt, bytesOnDisk: 5 * Self.mib, at: 1)
        let check = m.spaceChecked([id: reading(free: 0)], directory: reading(free: 0), purgeWhenLow: false)
        #expect(check.actions == [.stopTransfer(id, attempt)], "stopped, nothing deleted")
        #expect(check.changed)
        #expect(m.download(id)?.state == .waitingForSpace(reason: "waiting for disk space (0 B free, floor 1.0 MiB)"))
        #expect(m.snapshot.space == reading(free: 0), "the header's reading travels with the snapshot")
        // The stopped attempt's late end reports its bytes and changes nothing else.
        #expect(m.transferFinished(id, attempt: attempt, outcome: .stopped, bytesOnDisk: 6 * Self.mib, now: now, jitter: 0).isEmpty)
        #expect(isWaitingForSpace(m, id))
        #expect(m.download(id)?.bytesOnDisk == 6 * Self.mib)
    }

    @Test func aWaitingDownloadStartsAgainByItselfOnceThereIsRoom() throws {
        var m = machine()
        let (id, attempt) = try started(&m, "a.bin")
        _ = m.spaceChecked([id: reading(free: 0)], directory: nil, purgeWhenLow: false)
        _ = m.transferFinished(id, attempt: attempt, outcome: .stopped, bytesOnDisk: Self.mib, now: now, jitter: 0)
        // Still low: it waits, its words follow the free space.
        let still = m.spaceChecked([id: reading(free: 0)], directory: nil, purgeWhenLow: false)
        #expect(still.actions.isEmpty && !still.changed, "nothing new: no snapshot")
        // Room again: it starts, and resumes from the bytes it kept (the order carries the part file).
        let back = m.spaceChecked([id: reading(free: 50)], directory: nil, purgeWhenLow: false)
        guard case .startTransfer(let order)? = back.actions.first else { throw Failure(text: "\(back.actions)") }
        #expect(order.id == id && order.attempt != attempt)
        #expect(m.download(id)?.state == .downloading)
        #expect(m.download(id)?.bytesOnDisk == Self.mib)
    }

    @Test func aKnownRestWaitsUntilItFitsAboveTheFloor() throws {
        var m = machine()
        let (id, attempt) = try started(&m, "a.bin")
        // The transfer found 64 MiB would not fit in 10 MiB free.
        _ = m.transferFinished(id, attempt: attempt, outcome: .noSpace(.cannotFit(needs: 64 * Self.mib), reading: reading(free: 10)), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(m.download(id)?.state == .waitingForSpace(reason: "waiting for disk space (needs 64.0 MiB, 10.0 MiB free, floor 1.0 MiB)"))
        // Before its first byte, what it needs is its length (a tester's row said `0 B of unknown size`).
        #expect(m.download(id)?.totalBytes == 64 * Self.mib)
        // Above the floor but not enough for the whole rest: still waiting, with the new figure.
        let more = m.spaceChecked([id: reading(free: 40)], directory: nil, purgeWhenLow: false)
        #expect(more.actions.isEmpty && more.changed)
        #expect(m.download(id)?.state.reason == "waiting for disk space (needs 64.0 MiB, 40.0 MiB free, floor 1.0 MiB)")
        // 64 MiB and the floor fit in 65 MiB.
        let enough = m.spaceChecked([id: reading(free: 65)], directory: nil, purgeWhenLow: false)
        #expect(enough.actions.contains { if case .startTransfer = $0 { true } else { false } })
    }

    @Test func aFullDiskWaitsAndNeverFails() throws {
        var m = machine()
        let (id, attempt) = try started(&m, "a.bin")
        for _ in 0..<50 {
            _ = m.transferFinished(id, attempt: m.runningAttempt(id) ?? attempt, outcome: .noSpace(.writeFailed("disk full"), reading: reading(free: 3)), bytesOnDisk: Self.mib, now: now, jitter: 0)
            #expect(isWaitingForSpace(m, id), "never failed, however often")
            // Free space that has not grown since the failed write (a quota's limit does not show) does not start it.
            #expect(m.spaceChecked([id: reading(free: 3)], directory: nil, purgeWhenLow: false).actions.isEmpty)
            _ = m.spaceChecked([id: reading(free: 4)], directory: nil, purgeWhenLow: false)
            #expect(m.download(id)?.state == .downloading, "room came back: it goes on")
        }
        #expect(m.download(id)?.failedAttempts == 0)
    }

    @Test func twoWaitingDownloadsThatEachFitButNotTogetherStartOneAtATime() throws {
        var m = machine()
        var ids: [DownloadID] = []
        for name in ["a.bin", "b.bin"] {
            let (id, attempt) = try started(&m, name)
            m.transferResponded(id, attempt: attempt, info: .init(
                status: 200, total: 20 * Self.mib, validators: Validators(etag: "\"v\"", lastModified: nil), finalURL: nil, serverFileName: nil, disposition: .fresh
            ))
            _ = m.transferFinished(id, attempt: attempt, outcome: .noSpace(.writeFailed("disk full"), reading: reading(free: 0)), bytesOnDisk: 16 * Self.mib, now: now, jitter: 0)
            ids.append(id)
        }
        // 6 MiB free: each needs 4 MiB and the 1 MiB floor; only one of them fits.
        let check = m.spaceChecked([ids[0]: reading(free: 6), ids[1]: reading(free: 6)], directory: nil, purgeWhenLow: false)
        #expect(check.actions.filter { if case .startTransfer = $0 { true } else { false } }.count == 1)
        #expect(m.download(ids[0])?.state == .downloading)
        #expect(m.download(ids[1])?.state.reason == "waiting for disk space (needs 4.0 MiB, 6.0 MiB free, floor 1.0 MiB, 4.0 MiB of it promised to running downloads)")
        // The same while the first runs: its rest is promised.
        _ = m.spaceChecked([ids[0]: reading(free: 6), ids[1]: reading(free: 6)], directory: nil, purgeWhenLow: false)
        #expect(isWaitingForSpace(m, ids[1]))
    }

    @Test func queuedDownloadsOnALowFileSystemDoNotStartUntilThereIsRoom() throws {
        var m = machine(maxActive: 1)
        let (a, attemptA) = try started(&m, "a.bin")
        let (b, _) = try m.schedule(url: url("b.bin"), destination: .file("/d/b.bin"))
        let check = m.spaceChecked([a: reading(free: 0), b: reading(free: 0)], directory: nil, purgeWhenLow: false)
        #expect(check.actions == [.stopTransfer(a, attemptA)], "the freed slot starts nothing on a low disk")
        #expect(m.download(b)?.state == .queued)
        // Another file system is not low: its downloads run.
        let (c, _) = try m.schedule(url: url("c.bin"), destination: .file("/e/c.bin"))
        _ = m.spaceChecked([a: reading(free: 0), b: reading(free: 0), c: reading(free: 50, filesystem: 2)], directory: nil, purgeWhenLow: false)
        #expect(m.download(c)?.state == .downloading)
    }

    @Test func aResumeWhileTheDiskIsLowTriesAtOnce() throws {
        var m = machine(maxActive: 1)
        let (id, _) = try started(&m, "a.bin")
        _ = m.spaceChecked([id: reading(free: 0)], directory: nil, purgeWhenLow: false)
        // Still low, but a person asked: it starts, and its transfer says why it waits, with today's figures.
        let actions = try m.resume(id)
        #expect(actions.contains { if case .startTransfer = $0 { true } else { false } })
        // Queued downloads on the low disk, nobody having asked, stay out of the running.
        let (other, _) = try m.schedule(url: url("b.bin"), destination: .file("/d/b.bin"))
        _ = m.spaceChecked([id: reading(free: 0), other: reading(free: 0)], directory: nil, purgeWhenLow: false)
        #expect(m.download(other)?.state == .queued)
    }

    @Test func pauseResumeAndCancelWorkOnAWaitingDownload() throws {
        var m = machine()
        let (id, _) = try started(&m, "a.bin")
        _ = m.spaceChecked([id: reading(free: 0)], directory: nil, purgeWhenLow: false)
        #expect(try m.pause(id).isEmpty)
        #expect(m.download(id)?.state == .paused)
        // A paused download is not started by room coming back: a person paused it.
        #expect(m.spaceChecked([id: reading(free: 50)], directory: nil, purgeWhenLow: false).actions.isEmpty)
        _ = try m.resume(id)
        #expect(m.download(id)?.state == .downloading, "resume means try now")
        _ = m.spaceChecked([id: reading(free: 0)], directory: nil, purgeWhenLow: false)
        let cancelled = try m.cancel(id)
        #expect(cancelled.contains(.deletePartFile(id, path: "/d/a.bin.part", onlyMarked: true)))
        #expect(m.download(id)?.state == .cancelled)
    }

    @Test func aRestoredWaitingDownloadIsQueuedAgain() throws {
        var download = Download(id: DownloadID(1), url: url("a.bin"), destination: .file("/d/a.bin"), partPath: "/d/a.bin.part")
        download.state = .waitingForSpace(reason: "waiting for disk space")
        var m = machine()
        m.restore([download], nextID: 2, holdPending: false)
        #expect(m.download(DownloadID(1))?.state == .queued)
        #expect(m.startQueued().count == 1, "it tries again; the transfer looks at the disk before any request")
    }

    // MARK: Purging under pressure

    /// Three paused downloads on file system 1 holding 4 MiB each, used at 30, 10 and 20 seconds,
    /// and one running.
    func pausedThree(_ m: inout Machine) throws -> [DownloadID] {
        var ids: [DownloadID] = []
        for (name, used) in [("old.bin", 30.0), ("oldest.bin", 10.0), ("newer.bin", 20.0)] {
            let (id, attempt) = try started(&m, name)
            _ = try m.pause(id)
            _ = m.transferFinished(id, attempt: attempt, outcome: .stopped, bytesOnDisk: 4 * Self.mib, now: now.addingTimeInterval(used), jitter: 0)
            ids.append(id)
        }
        return ids
    }

    @Test func purgingUnderPressureTakesTheLeastRecentlyUsedFirstAndKeepsTheRows() throws {
        var m = machine()
        let ids = try pausedThree(&m)
        let (running, _) = try started(&m, "running.bin")
        var readings = Dictionary(uniqueKeysWithValues: ids.map { ($0, reading(free: 0)) })
        readings[running] = reading(free: 0)
        // Under the floor once: the running download waits, nothing is purged yet.
        let first = m.spaceChecked(readings, directory: nil, purgeWhenLow: true)
        #expect(first.purged.isEmpty)
        // Still under it: 1 MiB lacking, so the least recently used one (4 MiB) goes, and only it.
        let second = m.spaceChecked(readings, directory: nil, purgeWhenLow: true)
        #expect(second.purged.map(\.0) == [ids[1]])
        #expect(second.purged.map(\.1) == [4 * Self.mib])
        #expect(second.actions.contains(.deletePartFile(ids[1], path: "/d/oldest.bin.part")))
        #expect(m.download(ids[1])?.state == .paused && m.download(ids[1])?.bytesOnDisk == 0, "the row stays, paused at 0 B")
        #expect(m.download(ids[1])?.lastError == "purged when disk space ran low: 4.0 MiB of partial data discarded; resuming fetches it from zero")
        #expect(m.download(ids[0])?.bytesOnDisk == 4 * Self.mib && m.download(ids[2])?.bytesOnDisk == 4 * Self.mib)
        #expect(isWaitingForSpace(m, running), "a running download's bytes are never purged")
        // 10 MiB lacking where 8 MiB could be purged: nothing is discarded for nothing.
        readings = readings.mapValues { _ in reading(free: -9) }
        #expect(m.spaceChecked(readings, directory: nil, purgeWhenLow: true).purged.isEmpty)
        #expect(m.download(ids[0])?.bytesOnDisk == 4 * Self.mib && m.download(ids[2])?.bytesOnDisk == 4 * Self.mib)
        // 7 MiB lacking: the next two in order of use.
        readings = readings.mapValues { _ in reading(free: -6) }
        let third = m.spaceChecked(readings, directory: nil, purgeWhenLow: true)
        #expect(third.purged.map(\.0) == [ids[2], ids[0]])
    }

    @Test func withoutPurgeWhenLowNothingIsPurged() throws {
        var m = machine()
        let ids = try pausedThree(&m)
        let readings = Dictionary(uniqueKeysWithValues: ids.map { ($0, reading(free: 0)) })
        for _ in 0..<3 {
            #expect(m.spaceChecked(readings, directory: nil, purgeWhenLow: false).purged.isEmpty)
        }
        #expect(ids.allSatisfy { m.download($0)?.bytesOnDisk == 4 * Self.mib })
    }

    @Test func purgingTouchesOnlyTheLowFileSystem() throws {
        var m = machine()
        let ids = try pausedThree(&m)
        let readings = [ids[0]: reading(free: 0), ids[1]: reading(free: 50, filesystem: 2), ids[2]: reading(free: 50, filesystem: 2)]
        _ = m.spaceChecked(readings, directory: nil, purgeWhenLow: true)
        let check = m.spaceChecked(readings, directory: nil, purgeWhenLow: true)
        #expect(check.purged.map(\.0) == [ids[0]], "the oldest is on a file system with room: kept")
        // Completed downloads are not in the list at all.
        #expect(m.spaceWatchList(includePaused: true).map(\.0).sorted { $0.rawValue < $1.rawValue } == [ids[1], ids[2]])
    }
}
