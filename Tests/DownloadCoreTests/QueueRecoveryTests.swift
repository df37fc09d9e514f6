import DownloadCore
import Foundation
import Testing

/// What a new process makes of a persisted download (pure: the part file's length comes in).
@Suite struct QueueRecoveryTests {
    func row(_ state: DownloadState, checkpoint: Int64 = 400, total: Int64? = 1000) throws -> Download {
        var download = Download(
            id: DownloadID(1), url: try #require(URL(string: "http://example.test/f.bin")),
            destination: .file("/d/f.bin"), partPath: "/d/f.bin.part"
        )
        download.state = state
        download.bytesOnDisk = checkpoint
        download.totalBytes = total
        download.bytesPerSecond = 5000
        return download
    }

    @Test(arguments: [DownloadState.downloading, .queued, .paused, .failed(reason: "x"), .waiting(until: .distantFuture, reason: "y")])
    func sameBootTrustsThePartFilesRealLength(state: DownloadState) throws {
        let plan = QueueRecovery.plan(try row(state), partLength: 700, checkpointBoot: "b1", currentBoot: "b1")
        #expect(plan.download.bytesOnDisk == 700, "what write accepted before a kill -9 is on disk")
        #expect(plan.truncateTo == nil)
        #expect(plan.note == nil)
        #expect(plan.download.bytesPerSecond == 0)
        #expect(plan.download.state == state, "state changes are the machine's job")
    }

    @Test func afterARebootOnlyTheCheckpointIsTrusted() throws {
        let plan = QueueRecovery.plan(try row(.downloading), partLength: 700, checkpointBoot: "b1", currentBoot: "b2")
        #expect(plan.truncateTo == 400)
        #expect(plan.download.bytesOnDisk == 400)
        #expect(plan.note?.contains("rebooted") == true)
    }

    /// The same boot, but the part file's file system mounted again since the checkpoint (a
    /// tester's ext4 shutdown with `data=writeback` kept the file's length, not its last bytes:
    /// 246 zeros were resumed after, exit 0): only the checkpoint is trusted, as after a reboot.
    @Test func aFileSystemMountedAgainTrustsOnlyTheCheckpoint() throws {
        let stamp = BootStamp.string(boot: "b1", mounts: [7: [40], 9: [41, 52]])
        #expect(stamp == "b1;7=40;9=41;9=52")
        #expect(BootStamp.parse(stamp).boot == "b1" && BootStamp.parse(stamp).mounts == [7: [40], 9: [41, 52]])
        #expect(BootStamp.parse("b1").mounts.isEmpty)
        let plan = { (mount: (device: UInt64, id: UInt64)?, boot: String) in
            QueueRecovery.plan(try self.row(.downloading), partLength: 700, checkpointBoot: stamp,
                               currentBoot: BootStamp.current(checkpoint: stamp, boot: boot, mount: mount))
        }
        // Mounted again: the checkpoint.
        let remounted = try plan((7, 77), "b1")
        #expect(remounted.truncateTo == 400 && remounted.download.bytesOnDisk == 400)
        #expect(remounted.note == "its file system was mounted again: resuming from the last synced checkpoint at 400 B")
        // The same mount (either of a device's two), a device not named, no mount known: the file's length.
        for mount in [(7, 40), (9, 52), (3, 1), nil] as [(device: UInt64, id: UInt64)?] {
            let same = try plan(mount, "b1")
            #expect(same.truncateTo == nil && same.download.bytesOnDisk == 700, "\(String(describing: mount))")
        }
        // Another boot: the checkpoint, said as a reboot.
        #expect(try plan((7, 40), "b2").note?.hasPrefix("rebooted:") == true)
        #expect(BootStamp.current(checkpoint: nil, boot: "b1", mount: (7, 1)) == "b1")
        #expect(BootStamp.current(checkpoint: stamp, boot: nil, mount: (7, 1)) == nil)
    }

    @Test func anUnsyncedCheckpointIsTrustedInItsBootAndStartsOverAfterAReboot() throws {
        // Given a checkpoint stored without an fsync (--no-fsync)
        let download = try row(.downloading)
        // In the same boot the page cache holds what write accepted: the file's length is the truth
        let same = QueueRecovery.plan(download, partLength: 700, checkpointBoot: "b1", checkpointSynced: false, currentBoot: "b1")
        #expect(same.download.bytesOnDisk == 700)
        #expect(same.truncateTo == nil)
        // After a reboot nothing of the file is known to be on disk: emptied, started over, said
        let rebooted = QueueRecovery.plan(download, partLength: 700, checkpointBoot: "b1", checkpointSynced: false, currentBoot: "b2")
        #expect(rebooted.truncateTo == 0)
        #expect(rebooted.download.bytesOnDisk == 0)
        #expect(rebooted.download.restartCount == 1)
        #expect(rebooted.note == "rebooted, and the part file was never synced (--no-fsync): starting over from zero")
        // A synced checkpoint after a reboot still resumes from itself
        let synced = QueueRecovery.plan(download, partLength: 700, checkpointBoot: "b1", checkpointSynced: true, currentBoot: "b2")
        #expect(synced.truncateTo == 400 && synced.download.bytesOnDisk == 400)
    }

    @Test func anUnsyncedSegmentedCheckpointStartsOverAfterAReboot() throws {
        var download = try row(.downloading, checkpoint: 600)
        download.segments = [Segment(start: 0, next: 300, end: 500), Segment(start: 500, next: 800, end: 1000)]
        let rebooted = QueueRecovery.plan(download, partLength: 800, checkpointBoot: "b1", checkpointSynced: false, currentBoot: "b2")
        #expect(rebooted.download.segments.isEmpty, "holes must never pass for a prefix")
        #expect(rebooted.download.bytesOnDisk == 0)
        #expect(rebooted.truncateTo == 0)
        let same = QueueRecovery.plan(download, partLength: 800, checkpointBoot: "b1", checkpointSynced: false, currentBoot: "b1")
        #expect(same.download.segments == download.segments)
        #expect(same.download.bytesOnDisk == 600)
    }

    @Test func writtenPartsAreTrustedInTheBootThatWroteThemOnly() throws {
        var download = try row(.downloading, checkpoint: 600)
        download.segments = [Segment(start: 0, next: 300, end: 500), Segment(start: 500, next: 800, end: 1000)]
        let written = [Segment(start: 0, next: 450, end: 500), Segment(start: 500, next: 950, end: 1000)]
        download.writtenSegments = written
        // A kill -9 in this boot: the page cache holds what was written; each part resumes there.
        let same = QueueRecovery.plan(download, partLength: 1000, checkpointBoot: "b1", currentBoot: "b1")
        #expect(same.download.segments == written)
        #expect(same.download.bytesOnDisk == 900)
        #expect(same.download.writtenSegments.isEmpty, "used once, then the parts are the truth")
        #expect(same.note == nil)
        // After a reboot only the synced parts are.
        let rebooted = QueueRecovery.plan(download, partLength: 1000, checkpointBoot: "b1", currentBoot: "b2")
        #expect(rebooted.download.segments == download.segments)
        #expect(rebooted.download.bytesOnDisk == 600)
        // An unknown boot could be another one.
        #expect(QueueRecovery.plan(download, partLength: 1000, checkpointBoot: "b1", currentBoot: nil).download.segments == download.segments)
        // Written parts the file cannot hold, or that do not tile it, fall back to the synced ones.
        #expect(QueueRecovery.plan(download, partLength: 900, checkpointBoot: "b1", currentBoot: "b1").download.segments == download.segments)
        download.writtenSegments = [Segment(start: 0, next: 450, end: 600)]
        #expect(QueueRecovery.plan(download, partLength: 1000, checkpointBoot: "b1", currentBoot: "b1").download.segments == download.segments)
    }

    @Test func afterARebootAShorterPartFileIsAllThereIs() throws {
        let plan = QueueRecovery.plan(try row(.downloading), partLength: 300, checkpointBoot: "b1", currentBoot: "b2")
        #expect(plan.truncateTo == nil)
        #expect(plan.download.bytesOnDisk == 300)
    }

    @Test func anUnknownBootIsNotAReboot() throws {
        #expect(QueueRecovery.plan(try row(.downloading), partLength: 700, checkpointBoot: nil, currentBoot: "b2").download.bytesOnDisk == 700)
        #expect(QueueRecovery.plan(try row(.downloading), partLength: 700, checkpointBoot: "b1", currentBoot: nil).download.bytesOnDisk == 700)
    }

    @Test func aMissingPartFileStartsOverAndSaysSo() throws {
        var download = try row(.paused)
        download.resumeOffset = 200
        let plan = QueueRecovery.plan(download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1")
        #expect(plan.download.bytesOnDisk == 0)
        #expect(plan.download.resumeOffset == nil)
        #expect(plan.download.restartCount == 1)
        #expect(plan.download.restartReason == "part file was missing")
        #expect(plan.download.lastError == "part file was missing: starting over from zero")
        #expect(plan.note != nil)
    }

    @Test func noPartFileAndNoBytesIsNothingToReport() throws {
        let plan = QueueRecovery.plan(try row(.queued, checkpoint: 0), partLength: nil, checkpointBoot: nil, currentBoot: "b1")
        #expect(plan.note == nil)
        #expect(plan.download.restartCount == 0)
    }

    @Test func aCompletedDownloadWithItsFileIsLeftAlone() throws {
        var download = try row(.completed, checkpoint: 1000)
        download.completedPaths = ["/d/f.bin"]
        let plan = QueueRecovery.plan(download, partLength: nil, checkpointBoot: "b1", currentBoot: "b2")
        #expect(plan.download == { var d = download; d.bytesPerSecond = 0; return d }())
        #expect(!plan.needsFinalize)
    }

    @Test func aCompletedPartFileThatWasNotPlacedIsPlacedNow() throws {
        let plan = QueueRecovery.plan(try row(.completed, checkpoint: 1000), partLength: 1000, checkpointBoot: "b1", currentBoot: "b1")
        #expect(plan.needsFinalize)
        #expect(plan.download.state == .completed)
    }

    @Test func aFileAlreadyMovedToItsDestinationIsAdopted() throws {
        let plan = QueueRecovery.plan(
            try row(.completed, checkpoint: 1000), partLength: nil, checkpointBoot: "b1", currentBoot: "b1", destinationFileLength: 1000
        )
        #expect(!plan.needsFinalize)
        #expect(plan.download.completedPaths == ["/d/f.bin"])
    }

    /// A completed download moved into its directory by a process that died before the commit
    /// that named the file: its row holds the part file's stamp and no path.
    func movedIntoItsDirectory(extraDestination: Bool = false) throws -> Download {
        var download = try row(.completed, checkpoint: 1000)
        download.destination = .directory("/d")
        download.completedStamps = [FileStamp(size: 1000, modified: 1_700_000_000_123_456_789)]
        if extraDestination { download.extraDestinations = [.directory("/e")] }
        return download
    }

    @Test func aFileMovedIntoItsDirectoryIsKnownByItsStampNotByItsName() throws {
        let download = try movedIntoItsDirectory()
        #expect(QueueRecovery.placementStamp(download) == download.completedStamps[0])
        // A person's f.bin of the same size came first: the move took f.bin.1.
        let plan = QueueRecovery.plan(
            download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1",
            placedCandidates: [
                StampedFile(path: "/d/f.bin", stamp: FileStamp(size: 1000, modified: 1_600_000_000_000_000_000)),
                StampedFile(path: "/d/f.bin.1", stamp: FileStamp(size: 1000, modified: 1_700_000_000_123_456_789)),
            ]
        )
        #expect(plan.placed == StampedFile(path: "/d/f.bin.1", stamp: download.completedStamps[0]))
        #expect(!plan.needsFinalize)
        #expect(plan.download.state == .completed)
        #expect(plan.download.restartCount == 0, "nothing is fetched again")
        #expect(plan.note == "found the file the previous process placed at /d/f.bin.1")
    }

    @Test func aFileOfTheSameNameAndSizeThatIsNotTheMovedOneIsNeverTaken() throws {
        // The name and the size match, the modification time does not: a person's file.
        let plan = QueueRecovery.plan(
            try movedIntoItsDirectory(), partLength: nil, checkpointBoot: "b1", currentBoot: "b1",
            placedCandidates: [StampedFile(path: "/d/f.bin", stamp: FileStamp(size: 1000, modified: 1_700_000_000_123_456_788))]
        )
        #expect(plan.placed == nil)
        #expect(plan.download.state == .queued, "fetched again")
        #expect(plan.download.restartCount == 1)
        #expect(plan.download.completedStamps.isEmpty, "the stamp of a file that is gone")
    }

    /// Files of one size written in one tick of a coarse clock share their stamps: a file another
    /// row names is never a candidate, and a file two downloads' recoveries found is neither's
    /// (a tester's recovery gave two rows one file, and a fetch again replaced it).
    @Test func aFileTwoRecoveriesFindIsNeithersAndANamedOneIsNoCandidate() throws {
        let stamp = FileStamp(size: 1000, modified: 1_700_000_000_123_456_789)
        let named = StampedFile(path: "/d/f.bin", stamp: stamp)
        let free = StampedFile(path: "/d/f.bin.1", stamp: stamp)
        #expect(QueueRecovery.unheld([named, free], held: ["/d/f.bin", "/e/x"]) == [free])
        #expect(QueueRecovery.unheld([named, free], held: []) == [named, free])

        var first = try movedIntoItsDirectory()
        first.id = DownloadID(1)
        var second = try movedIntoItsDirectory()
        second.id = DownloadID(2)
        var third = try movedIntoItsDirectory()
        third.id = DownloadID(3)
        third.completedStamps = [FileStamp(size: 1000, modified: 5)]
        let plans = [first, second, third].map { download in
            QueueRecovery.plan(
                download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1",
                placedCandidates: [free, StampedFile(path: "/d/f.bin.2", stamp: FileStamp(size: 1000, modified: 5))]
            )
        }
        #expect(plans.map(\.placed?.path) == ["/d/f.bin.1", "/d/f.bin.1", "/d/f.bin.2"])
        #expect(QueueRecovery.contested(plans) == [DownloadID(1), DownloadID(2)])
        let contested = QueueRecovery.contestedPlan(plans[0].download)
        #expect(contested.placed == nil)
        #expect(contested.download.state == .queued, "fetched again")
        #expect(contested.download.completedStamps.isEmpty)
        #expect(contested.download.restartCount == 1)
        #expect(contested.note?.contains("cannot be told from another download's") == true, "\(contested.note ?? "")")
        // A download whose own requesters share files is not contested by itself.
        #expect(QueueRecovery.contested([plans[2]]).isEmpty)
    }

    /// More files with the part file's stamp than requesters where they may be: one of them is
    /// someone else's (a person's file of the same size from the same tick of the clock: a tester's
    /// recovery took it for the download's, completed). Neither is taken: fetched again.
    @Test func moreFilesWithTheStampThanRequestersAreNoneOfThem() throws {
        let download = try movedIntoItsDirectory()
        let stamp = download.completedStamps[0]
        let plan = QueueRecovery.plan(
            download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1",
            placedCandidates: [StampedFile(path: "/d/f.bin", stamp: stamp), StampedFile(path: "/d/f.bin.7", stamp: stamp)]
        )
        #expect(plan.placed == nil)
        #expect(plan.download.state == .queued, "fetched again")
        #expect(plan.note?.contains("cannot be told from another file") == true, "\(plan.note ?? "")")
        // Two requesters in one directory: two files with the stamp are theirs, three are not.
        var two = try movedIntoItsDirectory()
        two.extraDestinations = [.directory("/d")]
        let files = [StampedFile(path: "/d/f.bin", stamp: stamp), StampedFile(path: "/d/f.bin.1", stamp: stamp)]
        let both = QueueRecovery.plan(two, partLength: nil, checkpointBoot: "b1", currentBoot: "b1", placedCandidates: files, extraCandidates: [files.reversed()])
        #expect(both.placed != nil && both.placedExtras.count == 1, "\(both.note ?? "")")
        let three = files + [StampedFile(path: "/d/f.bin.2", stamp: stamp)]
        #expect(QueueRecovery.plan(two, partLength: nil, checkpointBoot: "b1", currentBoot: "b1", placedCandidates: three, extraCandidates: [three]).placed == nil)
    }

    @Test func aPlacedAndNamedFileIsNotLookedFor() throws {
        var placed = try movedIntoItsDirectory()
        placed.completedPaths = ["/d/f.bin"]
        #expect(QueueRecovery.placementStamp(placed) == nil, "placed and named")
        var unstamped = try movedIntoItsDirectory()
        unstamped.completedStamps = []
        #expect(QueueRecovery.placementStamp(unstamped) == nil, "a row from before part files were stamped")
    }

    /// Another requester's file is a link to the moved one, or a copy with its times: it has the
    /// part file's stamp too. Each requester gets a file of its own; one not found is fetched
    /// again (a requester's file is never left unplaced).
    @Test func theFilesOfOtherRequestersAreKnownByTheSameStamp() throws {
        let download = try movedIntoItsDirectory(extraDestination: true)
        let stamp = download.completedStamps[0]
        #expect(QueueRecovery.placementStamp(download) == stamp)
        let found = QueueRecovery.plan(
            download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1",
            placedCandidates: [StampedFile(path: "/d/f.bin", stamp: stamp)],
            extraCandidates: [[StampedFile(path: "/e/f.bin", stamp: FileStamp(size: 1000, modified: 9)), StampedFile(path: "/e/f.bin.1", stamp: stamp)]]
        )
        #expect(found.placed == StampedFile(path: "/d/f.bin", stamp: stamp))
        #expect(found.placedExtras == [StampedFile(path: "/e/f.bin.1", stamp: stamp)])
        #expect(found.download.restartCount == 0)
        #expect(found.note == "found the file the previous process placed at /d/f.bin (and for its other requesters at /e/f.bin.1)")
        let missing = QueueRecovery.plan(
            download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1",
            placedCandidates: [StampedFile(path: "/d/f.bin", stamp: stamp)],
            extraCandidates: [[StampedFile(path: "/e/f.bin", stamp: FileStamp(size: 1000, modified: 9))]]
        )
        #expect(missing.placed == nil)
        #expect(missing.download.state == .queued, "fetched again")
        #expect(QueueRecovery.plan(download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1",
                                   placedCandidates: [StampedFile(path: "/d/f.bin", stamp: stamp)]).placed == nil,
                "no candidates for the other requester")
    }

    /// Two requesters in one directory: the two files with the stamp, one each.
    @Test func twoRequestersInOneDirectoryTakeOneFileEach() throws {
        var download = try movedIntoItsDirectory(extraDestination: true)
        download.extraDestinations = [.directory("/d")]
        let stamp = download.completedStamps[0]
        let both = [StampedFile(path: "/d/f.bin", stamp: stamp), StampedFile(path: "/d/f.bin.1", stamp: stamp)]
        let plan = QueueRecovery.plan(
            download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1", placedCandidates: both, extraCandidates: [both]
        )
        #expect(plan.placed?.path == "/d/f.bin")
        #expect(plan.placedExtras.map(\.path) == ["/d/f.bin.1"])
        let one = QueueRecovery.plan(
            download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1", placedCandidates: [both[0]], extraCandidates: [[both[0]]]
        )
        #expect(one.placed == nil, "one file cannot be both requesters'")
    }

    @Test func aFileMovedToItsExactPathIsTakenOnlyWithThePartFilesStamp() throws {
        var download = try movedIntoItsDirectory()
        download.destination = .file("/d/f.bin")
        let stamp = download.completedStamps[0]
        let moved = QueueRecovery.plan(
            download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1", destinationFileLength: 1000,
            placedCandidates: [StampedFile(path: "/d/f.bin", stamp: stamp)]
        )
        #expect(moved.placed == StampedFile(path: "/d/f.bin", stamp: stamp))
        // The same length, another modification time: not the file the part file became.
        let other = QueueRecovery.plan(
            download, partLength: nil, checkpointBoot: "b1", currentBoot: "b1", destinationFileLength: 1000,
            placedCandidates: [StampedFile(path: "/d/f.bin", stamp: FileStamp(size: 1000, modified: 5))]
        )
        #expect(other.placed == nil)
        #expect(other.download.completedPaths.isEmpty)
        #expect(other.download.state == .queued, "fetched again, never taken for its length alone")
    }

    @Test func aCompletedDownloadWithNothingOnDiskIsFetchedAgain() throws {
        let plan = QueueRecovery.plan(
            try row(.completed, checkpoint: 1000), partLength: nil, checkpointBoot: "b1", currentBoot: "b1", destinationFileLength: 12
        )
        #expect(plan.download.state == .queued)
        #expect(plan.download.bytesOnDisk == 0)
        #expect(plan.note != nil)
    }
}

/// Restoring a queue into the state machine, holding, and stopping for a shutdown.
@Suite struct SessionStateMachineRestoreTests {
    func machine(maxActive: Int = 3) -> SessionStateMachine {
        SessionStateMachine(configuration: .init(maxActive: maxActive, maxTries: 5, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
    }

    func row(_ id: Int64, _ state: DownloadState, pausedByShutdown: Bool = false) throws -> Download {
        var download = Download(
            id: DownloadID(id), url: try #require(URL(string: "http://example.test/\(id).bin")),
            destination: .file("/d/\(id).bin"), partPath: "/d/\(id).bin.part"
        )
        download.state = state
        download.pausedByShutdown = pausedByShutdown
        return download
    }

    func states(_ m: SessionStateMachine) -> [String] {
        m.all.map(\.state.word)
    }

    @Test func runningAndWaitingGoBackToTheQueueAndPausedStaysPaused() throws {
        var m = machine()
        m.restore([
            try row(1, .downloading), try row(2, .waiting(until: .distantFuture, reason: "503")), try row(3, .paused),
            try row(4, .paused, pausedByShutdown: true), try row(5, .completed), try row(6, .failed(reason: "404")), try row(7, .cancelled),
        ], nextID: 8, holdPending: false)
        #expect(states(m) == ["queued", "queued", "paused", "queued", "completed", "failed", "cancelled"])
        #expect(m.download(DownloadID(4))?.pausedByShutdown == false)
        let actions = m.startQueued()
        #expect(actions.count == 3)
        #expect(states(m) == ["downloading", "downloading", "paused", "downloading", "completed", "failed", "cancelled"])
    }

    @Test func idsContinueAfterTheHighestEverUsed() throws {
        var m = machine()
        m.restore([try row(3, .completed)], nextID: 10, holdPending: false)
        let (id, _) = try m.schedule(url: try #require(URL(string: "http://example.test/new")), destination: .file("/d/new"))
        #expect(id == DownloadID(10))
    }

    @Test func heldDownloadsWaitUntilAskedFor() throws {
        var m = machine()
        m.restore([try row(1, .downloading), try row(2, .paused, pausedByShutdown: true)], nextID: 3, holdPending: true)
        #expect(m.startQueued().isEmpty, "held downloads do not start")
        #expect(states(m) == ["queued", "paused"])
        #expect(m.held == [DownloadID(1)])
        // Asking for the URL again takes it out of the hold and starts it.
        let (id, actions) = try m.schedule(url: try #require(URL(string: "http://example.test/1.bin")), destination: .file("/d/1.bin"))
        #expect(id == DownloadID(1))
        #expect(actions.count == 1)
        #expect(m.held.isEmpty)
        #expect(states(m) == ["downloading", "paused"])
    }

    @Test func stopAllMarksWhatItPausesAndLeavesHeldAlone() throws {
        var m = machine(maxActive: 1)
        m.restore([try row(1, .queued), try row(2, .queued), try row(3, .queued)], nextID: 4, holdPending: true)
        _ = try m.resume(DownloadID(1))
        _ = try m.resume(DownloadID(2))
        #expect(states(m) == ["downloading", "queued", "queued"])
        let actions = m.stopAll()
        #expect(actions.count == 1, "one transfer to stop: \(actions)")
        #expect(states(m) == ["paused", "paused", "queued"])
        #expect(m.download(DownloadID(1))?.pausedByShutdown == true)
        #expect(m.download(DownloadID(2))?.pausedByShutdown == true)
        #expect(m.download(DownloadID(3))?.pausedByShutdown == false, "held: left for the process that runs the queue")
    }

    @Test func aPersonsPauseIsNotAShutdownPause() throws {
        var m = machine()
        m.restore([try row(1, .paused, pausedByShutdown: true)], nextID: 2, holdPending: true)
        _ = try m.resume(DownloadID(1))
        _ = try m.pause(DownloadID(1))
        #expect(m.download(DownloadID(1))?.pausedByShutdown == false)
    }

    @Test func touchedIdsAreReportedOnce() throws {
        var m = machine()
        m.restore([try row(1, .paused), try row(2, .paused)], nextID: 3, holdPending: false)
        #expect(m.takeTouched() == [DownloadID(1), DownloadID(2)])
        #expect(m.takeTouched().isEmpty)
        _ = try m.resume(DownloadID(2))
        #expect(m.takeTouched() == [DownloadID(2)])
    }
}
