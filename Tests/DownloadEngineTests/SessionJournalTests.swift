import DownloadCore
@testable import DownloadEngine
import DownloadStore
import Foundation
import LoopbackServer
import Synchronization
import Testing
import TestSupport

/// The session on a real SQLite queue: what it commits, when, and what a new session makes of it.
@Suite struct SessionJournalTests {
    /// A journal that commits to the real database and remembers every commit.
    final class RecordingJournal: QueueJournal {
        let database: AppDatabase
        let commits = Mutex<[QueueChanges]>([])
        /// Each commit takes at least this long (a slow disk), in seconds.
        let slowness = Mutex<Double>(0)
        /// While true, commits wait (a disk that does not answer).
        let held = Mutex(false)

        init(_ database: AppDatabase) {
            self.database = database
        }

        func commit(_ changes: QueueChanges) throws {
            let seconds = slowness.withLock { $0 }
            if seconds > 0 { Thread.sleep(forTimeInterval: seconds) }
            while held.withLock({ $0 }) { Thread.sleep(forTimeInterval: 0.005) }
            try database.commit(changes)
            commits.withLock { $0.append(changes) }
        }
    }

    /// A loopback server, a directory and a queue database, shared by the sessions of one test.
    final class Bench: Sendable {
        let server: LoopbackServer
        let directory: String
        let journal: RecordingJournal
        /// Every session made, shut down at the end even when the test throws.
        let sessions = Mutex<[DownloadSession]>([])

        var database: AppDatabase { journal.database }

        init(server: LoopbackServer, directory: String, journal: RecordingJournal) {
            self.server = server
            self.directory = directory
            self.journal = journal
        }

        func path(_ name: String) -> String { directory + "/" + name }

        func session(_ adjust: (inout DownloadSession.Configuration) -> Void = { _ in }) -> DownloadSession {
            var configuration = Harness.testConfiguration()
            adjust(&configuration)
            let session = DownloadSession(configuration: configuration, journal: journal)
            sessions.withLock { $0.append(session) }
            return session
        }

        /// Writes `row` as a process that ended in `boot` would have left it.
        func seed(_ row: Download, boot: String?) throws {
            var changes = QueueChanges()
            changes.saved = [row]
            changes.positions = [row.id: 0]
            changes.bootID = boot
            try database.commit(changes)
        }

        func stored(_ id: DownloadID) throws -> Download? {
            try database.loadQueue().downloads.first { $0.id == id }
        }

        static func with(_ body: (Bench) async throws -> Void) async throws {
            let server = try await LoopbackServer.start()
            let scratch = try TemporaryDirectory("haul-journal")
            defer { withExtendedLifetime(scratch) {} }
            let directory = scratch.path
            let bench = Bench(server: server, directory: directory, journal: RecordingJournal(try AppDatabase.open(at: directory + "/queue.sqlite")))
            try await withTeardown({ try await body(bench) }) {
                for session in bench.sessions.withLock({ $0 }) { await session.shutdown() }
                await server.shutdown()
            }
        }
    }

    @Test func everyStateIsCommittedBeforeASnapshotShowsIt() async throws {
        try await Bench.with { bench in
            bench.server.serve("/s.bin", size: 1024 * 1024, faults: throttled(2 * 1024 * 1024) { $0.resetAfterBytes = 300 * 1024 })
            let session = bench.session()
            let reader = Task { () -> (seen: Set<String>, mismatches: [String]) in
                var seen: Set<String> = []
                var mismatches: [String] = []
                for await snapshot in session.snapshots {
                    guard let shown = snapshot.downloads.first else { continue }
                    seen.insert(shown.state.word)
                    // What the screen shows must already have been committed (the database may be
                    // further along by the time this runs, so look at the whole history).
                    let committed = bench.journal.commits.withLock { commits in
                        commits.flatMap { $0.saved.filter { $0.id == shown.id }.map(\.state.word) }
                    }
                    if !committed.contains(shown.state.word) { mismatches.append("shown \(shown.state.word) before it was committed") }
                    if shown.state == .completed { break }
                }
                return (seen, mismatches)
            }
            let id = try await session.schedule(bench.server.url("/s.bin"), to: .file(bench.path("s.bin")))
            let (seen, mismatches) = await reader.value
            #expect(mismatches.isEmpty, "\(mismatches)")
            #expect(seen.isSuperset(of: ["downloading", "completed"]), "\(seen)")
            let stored = try #require(try bench.stored(id))
            #expect(stored.state == .completed)
            #expect(stored.completedPath == bench.path("s.bin"))
            #expect(stored.resumeCount == 1)
            await session.shutdown()
        }
    }

    @Test func checkpointsCatchUpWithTheDiskAndNeverClaimMoreThanIt() async throws {
        try await Bench.with { bench in
            let mebibyte = 1024 * 1024
            let holds = [mebibyte, 2 * mebibyte]
            // The server holds the body at each mark until the test lets it go: the checkpoint of a
            // known number of bytes is awaited, never raced, however loaded the machine is.
            bench.server.serve("/c.bin", size: 3 * mebibyte, faults: { var f = Faults(); f.holdAt = holds; return f }())
            let session = bench.session { $0.checkpointInterval = .milliseconds(500); $0.stallTimeout = .seconds(120) }
            let id = try await session.schedule(bench.server.url("/c.bin"), to: .file(bench.path("c.bin")))
            var claims: [Int64] = []
            /// Polls the stored row until it claims `bytes`, checking every claim against the disk.
            func awaitClaim(_ bytes: Int64) async throws {
                let deadline = ContinuousClock.now + .seconds(30)
                while ContinuousClock.now < deadline {
                    if let stored = try bench.stored(id), stored.state == .downloading {
                        // Read the claim first: the part file can only have grown since.
                        let claim = stored.bytesOnDisk
                        let onDisk = fileLength(bench.path("c.bin.part")) ?? 0
                        #expect(claim <= onDisk, "claimed \(claim) with \(onDisk) on disk")
                        if claims.last != claim { claims.append(claim) }
                        if claim == bytes { return }
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                Issue.record("no checkpoint of \(bytes) bytes in 30 s: \(claims)")
            }
            for (index, hold) in holds.enumerated() {
                try await awaitClaim(Int64(hold))
                // Held: nothing new on disk, so no checkpoint is committed while it waits (a second
                // at a 0.5 s interval would allow two).
                let before = bench.journal.commits.withLock { $0.count }
                try await Task.sleep(for: .seconds(1))
                #expect(bench.journal.commits.withLock { $0.count } == before, "hold \(index): a checkpoint without new bytes")
                bench.server.release("/c.bin")
            }
            try await waitFor(session, id) { $0.state == .completed }
            #expect(claims == claims.sorted(), "\(claims)")
            #expect(sha256(ofFile: bench.path("c.bin")) == bench.server.sha256("/c.bin"))
            await session.shutdown()
        }
    }

    /// A journal whose disk is full until the test frees it.
    final class FullJournal: QueueJournal {
        let commits = Mutex(0)
        let full = Mutex(true)

        func commit(_ changes: QueueChanges) throws {
            commits.withLock { $0 += 1 }
            if full.withLock({ $0 }) { throw JournalFailure("the disk holding the queue is full") }
        }
    }

    @Test func aJournalThatCannotWriteIsSaidOnEverySnapshotAndTriedOnceACommit() async throws {
        try await Bench.with { bench in
            let journal = FullJournal()
            var configuration = Harness.testConfiguration()
            // No ticker sample (a connection count is news) asks for a commit of its own meanwhile.
            configuration.progressInterval = .seconds(120)
            let session = DownloadSession(configuration: configuration, journal: journal)
            bench.sessions.withLock { $0.append(session) }
            // The server says nothing: after the schedule's commit no event asks for another.
            var silent = Faults()
            silent.silentFirst = 1
            bench.server.serve("/u.bin", size: 100_000, faults: silent)
            _ = try await session.schedule(bench.server.url("/u.bin"), to: .file(bench.path("u.bin")))
            // The schedule waited for its commit: one try, not seconds of them (a full disk stays full).
            #expect(journal.commits.withLock { $0 } == 1)
            #expect(await session.snapshot().unsaved == "cannot save the queue: the disk holding the queue is full")
            // Space is back: the next commit saves everything that was not, and the snapshots say so.
            journal.full.withLock { $0 = false }
            try await session.setMaxActive(2)
            #expect(journal.commits.withLock { $0 } == 2)
            #expect(await session.snapshot().unsaved == nil)
            await session.shutdown()
        }
    }

    /// A download that completes while the queue cannot be saved is not placed: its file stays a
    /// part file, the row `finishing`, until a commit saves its completed row; then it is placed.
    /// Found by use: `haul get` placed the file and said `completed` of a row never saved, and the
    /// next run, finding no part file, fetched it again beside itself (`NAME.1`).
    @Test func aFileIsPlacedOnlyOnceItsCompletedRowIsSaved() async throws {
        try await Bench.with { bench in
            let journal = FullJournal()
            let session = DownloadSession(configuration: Harness.testConfiguration(), journal: journal)
            bench.sessions.withLock { $0.append(session) }
            bench.server.serve("/p.bin", size: 100_000)
            let target = bench.path("p.bin")
            let id = try await session.schedule(bench.server.url("/p.bin"), to: .file(target))
            _ = try await poll(timeout: 20, every: .milliseconds(20)) { () async -> Bool? in
                let shown = await session.snapshot()[id]
                return shown?.finishing == true && FileSync.length(target + ".part") == 100_000 ? true : nil
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(!FileManager.default.fileExists(atPath: target), "not placed while its row is unsaved")
            #expect(FileSync.length(target + ".part") == 100_000)
            #expect(await session.snapshot()[id]?.state == .downloading, "shown finishing, not completed")
            #expect(await session.snapshot().unsaved != nil)

            // Space is back: the retried commit (nothing else asks for one) saves the row, and the
            // file is placed.
            journal.full.withLock { $0 = false }
            let done = try await waitFor(session, id) { $0.completedPath != nil }
            #expect(done.completedPath == target)
            #expect(sha256(ofFile: target) == bench.server.sha256("/p.bin"))
            #expect(bench.server.requests("/p.bin").count == 1)
            await session.shutdown()
        }
    }

    @Test func withoutFsyncCheckpointsAreStoredUnsyncedUntilAPauseSyncsThem() async throws {
        try await Bench.with { bench in
            let size = 3 * 1024 * 1024
            bench.server.serve("/n.bin", size: size, faults: stalled(at: size / 2))
            let session = bench.session {
                $0.syncOnCompletion = false
                $0.checkpointInterval = .milliseconds(200)
            }
            let id = try await session.schedule(bench.server.url("/n.bin"), to: .file(bench.path("n.bin")))
            // The checkpoint claims what was written, without waiting for a sync, and says so
            _ = try await poll(timeout: 20, every: .milliseconds(50)) { try (bench.stored(id)?.bytesOnDisk ?? 0) >= Int64(size / 2) ? true : nil }
            #expect(try bench.stored(id)?.bytesOnDisk == Int64(size / 2))
            #expect(try bench.database.loadQueue().unsyncedCheckpoints == [id])
            // A pause fsyncs the part file: the row is a synced checkpoint again
            try await session.pause(id)
            _ = try await poll(timeout: 20, every: .milliseconds(50)) { try bench.stored(id)?.state == .paused ? true : nil }
            #expect(try bench.stored(id)?.state == .paused)
            #expect(try bench.database.loadQueue().unsyncedCheckpoints.isEmpty)
            await session.shutdown()
        }
    }

    @Test func aNewSessionResumesAPausedDownloadFromTheDatabase() async throws {
        try await Bench.with { bench in
            let size = 2 * 1024 * 1024
            bench.server.serve("/r.bin", size: size, faults: stalled(at: size / 4))
            let target = bench.path("r.bin")
            let first = bench.session()
            let id = try await first.schedule(bench.server.url("/r.bin"), to: .file(target))
            try await waitFor(first, id) { $0.bytesOnDisk == Int64(size / 4) }
            try await first.pause(id)
            await first.shutdown()
            let stored = try #require(try bench.stored(id))
            #expect(stored.state == .paused)
            #expect(!stored.pausedByShutdown, "a person paused it")
            #expect(stored.bytesOnDisk == Int64(size / 4), "the pause checkpointed the synced part file")

            let second = bench.session()
            await second.restore(try bench.database.loadQueue(), startPending: true)
            #expect(await second.snapshot()[id]?.state == .paused, "a paused download stays paused")
            try await second.resume(id)
            try await waitFor(second, id) { $0.state == .completed }
            #expect(sha256(ofFile: target) == bench.server.sha256("/r.bin"))
            #expect(bench.server.requests("/r.bin").last?.range == resumeRange(keeping: size / 4))
            await second.shutdown()
        }
    }

    @Test func aShutdownPausesForTheNextStartOnly() async throws {
        try await Bench.with { bench in
            let size = 2 * 1024 * 1024
            bench.server.serve("/q.bin", size: size, faults: stalled(at: size / 2))
            let first = bench.session()
            let id = try await first.schedule(bench.server.url("/q.bin"), to: .file(bench.path("q.bin")))
            try await waitFor(first, id) { $0.bytesOnDisk == Int64(size / 2) }
            await first.shutdown()
            let stored = try #require(try bench.stored(id))
            #expect(stored.state == .paused)
            #expect(stored.pausedByShutdown)

            // `haul get` for another URL holds it; the process that runs the queue resumes it.
            let holding = bench.session()
            await holding.restore(try bench.database.loadQueue(), startPending: false)
            #expect(await holding.snapshot()[id]?.state == .paused)
            await holding.shutdown()
            #expect(bench.server.requests("/q.bin").count == 1)

            let running = bench.session()
            await running.restore(try bench.database.loadQueue(), startPending: true)
            try await waitFor(running, id) { $0.state == .completed }
            #expect(bench.server.requests("/q.bin").last?.range == resumeRange(keeping: size / 2))
            await running.shutdown()
        }
    }

    /// A body larger than a crash may fetch twice (`DurabilityLedger.smallBody`) has its row,
    /// with the response's validators, committed before any of its bytes reach the part file: a
    /// `kill -9`, or a disk that fills before the next commit can be written, leaves bytes a
    /// resume can trust. (The machine counts bytes every 100 ms; they come much faster.)
    @Test func aLargeBodysValidatorsAreCommittedBeforeItsFirstByteIsWritten() async throws {
        try await Bench.with { bench in
            // Every commit takes 150 ms (a slow disk): bytes that did not wait for their row would
            // be on disk long before it.
            bench.journal.slowness.withLock { $0 = 0.15 }
            let size = 8 * 1024 * 1024
            bench.server.serve("/first.bin", size: size, faults: stalled(at: 256 * 1024))
            bench.server.serve("/second.bin", size: size, faults: stalled(at: 256 * 1024))
            let session = bench.session { $0.maxActive = 1 }
            // The first starts at once; the second is queued, and starts when the first is paused
            // (a queued download's start and response may wait for a later commit when its body
            // is small).
            let first = try await session.schedule(bench.server.url("/first.bin"), to: .file(bench.path("first.bin")))
            let second = try await session.schedule(bench.server.url("/second.bin"), to: .file(bench.path("second.bin")))
            for (id, name) in [(first, "first.bin"), (second, "second.bin")] {
                // As soon as the part file holds a byte …
                try await waitUntil("bytes in \(name).part", every: .milliseconds(1)) { (fileLength(bench.path(name + ".part")) ?? 0) > 0 }
                // … the stored row says what the response said.
                let stored = try #require(try bench.stored(id))
                #expect(stored.state == .downloading, "\(name)")
                #expect(stored.totalBytes == Int64(size), "\(name)")
                #expect(stored.etag != nil, "\(name)")
                // The snapshot follows the commit, or a later one: a commit that starts less than
                // `gapPerDownload` × rows after the last show leaves its show to the next (with
                // 150 ms commits, once seen after the first byte). It never shows another validator.
                let shown = await session.snapshot()[id]?.etag
                #expect(shown == nil || shown == stored.etag, "\(name)")
                #expect(try await eventually("\(name)'s validator shown") { await session.snapshot()[id]?.etag == stored.etag })
                if id == first { try await session.pause(first) }
            }
            await session.shutdown()
        }
    }

    /// The same while the journal does not answer at all: not a byte of a large body is written
    /// before its response is committed.
    @Test func aLargeBodyWaitsForItsResponsesCommit() async throws {
        try await Bench.with { bench in
            let size = 8 * 1024 * 1024
            bench.server.serve("/held.bin", size: size)
            let session = bench.session()
            let target = bench.path("held.bin")
            bench.journal.held.withLock { $0 = true }
            // Let go whatever happens: the teardown's shutdown commits too.
            defer { bench.journal.held.withLock { $0 = false } }
            let scheduled = Task { try await session.schedule(bench.server.url("/held.bin"), to: .file(target)) }
            try await waitUntil("the request") { !bench.server.requests("/held.bin").isEmpty }
            try await Task.sleep(for: .milliseconds(300))
            #expect((fileLength(target + ".part") ?? 0) == 0, "bytes written before the response was committed")
            bench.journal.held.withLock { $0 = false }
            let id = try await scheduled.value
            let done = try await waitFor(session, id) { $0.state == .completed }
            #expect(done.etag != nil)
            #expect(sha256(ofFile: target) == bench.server.sha256("/held.bin"))
            await session.shutdown()
        }
    }

    @Test func aRowLeftDownloadingResumesFromThePartFilesRealLength() async throws {
        try await Bench.with { bench in
            // Given a row a killed process left `downloading`, with a checkpoint behind the part file
            let size = 1024 * 1024
            bench.server.serve("/k.bin", size: size)
            let target = bench.path("k.bin")
            let content = bench.server.content("/k.bin")
            #expect(FileManager.default.createFile(atPath: target + ".part", contents: Data(content[0..<600_000])))
            var row = Download(id: DownloadID(1), url: bench.server.url("/k.bin"), destination: .file(target), partPath: target + ".part")
            row.state = .downloading
            row.bytesOnDisk = 400_000
            row.totalBytes = Int64(size)
            row.etag = try await etag(of: "/k.bin", bench.server)
            try bench.seed(row, boot: BootID.current())
            // When a new session restores it (same boot)
            let session = bench.session()
            await session.restore(try bench.database.loadQueue(), startPending: true)
            // Then it resumes from the 600,000 bytes on disk, not the older checkpoint
            try await waitFor(session, row.id) { $0.state == .completed }
            #expect(bench.server.requests("/k.bin").last?.range == resumeRange(keeping: 600000))
            #expect(sha256(ofFile: target) == bench.server.sha256("/k.bin"))
            await session.shutdown()
        }
    }

    /// Parts whose validators cannot go in `If-Range` (here a version first answered within the
    /// second of its change; a queue of an earlier haul with a date it cannot read is another) are
    /// checked by 64 KiB of overlap before the end of the longest one, then resumed: never thrown
    /// away unchecked (a tester's 13.9 MiB of an unchanged file were, `stored parts cannot be checked`).
    @Test func partsWhoseValidatorsCannotVerifyAreCheckedByOverlapNotThrownAway() async throws {
        try await Bench.with { bench in
            let size = 4 * 1024 * 1024
            var faults = Faults()
            faults.omitETag = true
            bench.server.serve("/u.bin", size: size, faults: faults)
            let lastModified = try #require(try await probed("/u.bin", bench.server).lastModified)
            let target = bench.path("u.bin")
            let content = bench.server.content("/u.bin")
            var bytes = Data(count: size)
            bytes.replaceSubrange(0..<1_048_576, with: content[0..<1_048_576])
            bytes.replaceSubrange(2_097_152..<2_621_440, with: content[2_097_152..<2_621_440])
            #expect(FileManager.default.createFile(atPath: target + ".part", contents: bytes))
            var row = Download(id: DownloadID(1), url: bench.server.url("/u.bin"), destination: .file(target), partPath: target + ".part")
            row.state = .paused
            row.bytesOnDisk = 1_048_576 + 524_288
            row.totalBytes = Int64(size)
            row.lastModified = lastModified
            row.recentlyChanged = true
            row.segments = [Segment(start: 0, next: 1_048_576, end: 2_097_152), Segment(start: 2_097_152, next: 2_621_440, end: Int64(size))]
            row.options.connections = 2
            try bench.seed(row, boot: BootID.current())
            let before = bench.server.requests("/u.bin").count
            let session = bench.session()
            await session.restore(try bench.database.loadQueue(), startPending: true)
            try await session.resume(row.id)
            let done = try await waitFor(session, row.id) { $0.state.isFinished }
            #expect(done.state == .completed, "\(done.state)")
            #expect(done.restartCount == 0, "\(done.restartReason ?? "")")
            #expect(sha256(ofFile: target) == bench.server.sha256("/u.bin"))
            let resumed = Array(bench.server.requests("/u.bin").dropFirst(before))
            #expect(resumed.first?.range == "bytes=\(1_048_576 - 65_536)-\(1_048_576 - 1)" && resumed.first?.ifRange == nil, "\(resumed.map(\.range))")
            #expect(resumed.allSatisfy { $0.status == 206 && $0.ifRange == nil }, "\(resumed.map(\.range))")
            await session.shutdown()
        }
    }

    @Test func afterARebootOnlyTheSyncedCheckpointIsTrusted() async throws {
        try await Bench.with { bench in
            let size = 1024 * 1024
            bench.server.serve("/b.bin", size: size)
            let target = bench.path("b.bin")
            // Bytes past the checkpoint may be garbage after a power loss: write some.
            var bytes = Array(bench.server.content("/b.bin")[0..<600_000])
            for index in 400_000..<600_000 { bytes[index] = 0 }
            #expect(FileManager.default.createFile(atPath: target + ".part", contents: Data(bytes)))
            var row = Download(id: DownloadID(3), url: bench.server.url("/b.bin"), destination: .file(target), partPath: target + ".part")
            row.state = .downloading
            row.bytesOnDisk = 400_000
            row.totalBytes = Int64(size)
            row.etag = try await etag(of: "/b.bin", bench.server)
            try bench.seed(row, boot: "a-boot-before-the-power-went")

            let session = bench.session()
            let notes = await session.restore(try bench.database.loadQueue(), startPending: true)
            #expect(notes.contains { $0.contains("rebooted") }, "\(notes)")
            try await waitFor(session, row.id) { $0.state == .completed }
            #expect(bench.server.requests("/b.bin").last?.range == resumeRange(keeping: 400000))
            #expect(sha256(ofFile: target) == bench.server.sha256("/b.bin"), "the unsynced tail was cut, not kept")
            await session.shutdown()
        }
    }

    @Test func aCompletedFileThatWasNotPlacedIsPlacedWithoutFetching() async throws {
        try await Bench.with { bench in
            let size = 300_000
            bench.server.serve("/p.bin", size: size)
            let target = bench.path("p.bin")
            #expect(FileManager.default.createFile(atPath: target + ".part", contents: Data(bench.server.content("/p.bin"))))
            let row = completedRow(bench, "/p.bin", size: size, destination: .file(target), partPath: target + ".part")
            try bench.seed(row, boot: nil)

            let session = bench.session()
            await session.restore(try bench.database.loadQueue(), startPending: true)
            let done = try await waitFor(session, row.id) { $0.completedPath != nil }
            #expect(done.completedPath == target)
            #expect(sha256(ofFile: target) == bench.server.sha256("/p.bin"))
            #expect(bench.server.requests("/p.bin").isEmpty)
            await session.shutdown()
            #expect(try bench.stored(row.id)?.completedPath == target)
        }
    }

    /// The stamp of the file at `path`, as haul takes it.
    func stamp(_ path: String) throws -> FileStamp {
        try #require(FileSync.stamp(path))
    }

    /// A row that says completed, with all of `path`'s `size` bytes, as a process left it.
    func completedRow(_ bench: Bench, _ path: String, size: Int, destination: Destination, partPath: String) -> Download {
        var row = Download(id: DownloadID(1), url: bench.server.url(path), destination: destination, partPath: partPath)
        row.state = .completed
        row.bytesOnDisk = Int64(size)
        row.totalBytes = Int64(size)
        return row
    }

    @Test func theCompletedRowIsCommittedWithThePartFilesStampWhichThePlacedFileKeeps() async throws {
        try await Bench.with { bench in
            bench.server.serve("/s.bin", size: 50_000)
            let session = bench.session()
            let id = try await session.schedule(bench.server.url("/s.bin"), to: .directory(bench.directory))
            let done = try await waitFor(session, id) { $0.completedPath != nil }
            let placed = try stamp(try #require(done.completedPath))
            // The commit that said completed before the file moved held its part file's stamp.
            let unplaced = bench.journal.commits.withLock { commits in
                commits.flatMap(\.saved).filter { $0.id == id && $0.state == .completed && $0.completedPaths.isEmpty }
            }
            #expect(!unplaced.isEmpty)
            #expect(unplaced.allSatisfy { $0.completedStamps == [placed] }, "\(unplaced.map(\.completedStamps)) against \(placed)")
            #expect(done.completedStamps == [placed])
            await session.shutdown()
        }
    }

    @Test func aFileMovedBeforeTheCommitThatNamedItIsFoundByItsStampWithoutFetching() async throws {
        try await Bench.with { bench in
            let size = 300_000
            bench.server.serve("/p.bin", size: size)
            // A person's p.bin of the same size was there first: the move took p.bin.1, and the
            // process died before the commit that named it.
            let person = bench.path("p.bin")
            #expect(FileManager.default.createFile(atPath: person, contents: Data(repeating: 7, count: size)))
            let personsStamp = try stamp(person)
            try await Task.sleep(for: .milliseconds(20))
            let moved = bench.path("p.bin.1")
            #expect(FileManager.default.createFile(atPath: moved, contents: Data(bench.server.content("/p.bin"))))
            var row = completedRow(bench, "/p.bin", size: size, destination: .directory(bench.directory), partPath: bench.path("p.bin.part"))
            row.completedStamps = [try stamp(moved)]
            try bench.seed(row, boot: nil)

            let session = bench.session()
            let notes = await session.restore(try bench.database.loadQueue(), startPending: true)
            #expect(notes == ["[1] found the file the previous process placed at \(moved)"])
            let done = try await waitFor(session, row.id) { $0.completedPath != nil }
            #expect(done.state == .completed)
            #expect(done.completedPath == moved)
            #expect(bench.server.requests("/p.bin").isEmpty, "nothing fetched again")
            #expect(!FileManager.default.fileExists(atPath: bench.path("p.bin.2")))
            #expect(try stamp(person) == personsStamp, "the person's file untouched")
            #expect(sha256(ofFile: moved) == bench.server.sha256("/p.bin"))
            await session.shutdown()
            #expect(try bench.stored(row.id)?.completedPath == moved)
        }
    }

    /// A completed row of `path` (300,000 bytes, served) whose part file, in the bench's directory,
    /// holds its bytes and whose stamp the row keeps, as a process left it that died before the
    /// move; seeded in the store. Returns the row and the part file's path.
    func completedUnplaced(_ bench: Bench, _ path: String) throws -> (row: Download, part: String) {
        let size = 300_000
        bench.server.serve(path, size: size)
        let part = bench.path(String(path.dropFirst()) + ".part")
        #expect(FileManager.default.createFile(atPath: part, contents: Data(bench.server.content(path))))
        var row = completedRow(bench, path, size: size, destination: .directory(bench.directory), partPath: part)
        row.completedStamps = [try stamp(part)]
        try bench.seed(row, boot: nil)
        return (row, part)
    }

    /// Waits for download `id` to fail and returns it.
    func failure(_ session: DownloadSession, _ id: DownloadID) async throws -> Download {
        try await waitFor(session, id) { if case .failed = $0.state { true } else { false } }
    }

    /// The part file a completed row names is not the file its transfer wrote and synced (another
    /// program replaced it, with as many bytes): nothing of it is placed or reported as the
    /// download's; it fails saying why, and a retry fetches the file again.
    /// A queued download that never ran, restored after a reboot, beside a person's `NAME.part`:
    /// the restore neither takes on its length nor cuts it (before, it cut it to nothing, as
    /// bytes a reboot may have spoiled), and the download fetches into a name of its own. From a
    /// read-only review.
    @Test func aRestoredDownloadThatNeverRanLeavesAPersonsPartFileAlone() async throws {
        try await Bench.with { bench in
            bench.server.serve("/doc.pdf", size: 50_000)
            let target = bench.path("doc.pdf")
            let notes = Data("my own notes\n".utf8)
            #expect(FileManager.default.createFile(atPath: target + ".part", contents: notes))
            let row = Download(id: DownloadID(1), url: bench.server.url("/doc.pdf"), destination: .file(target), partPath: target + ".part")
            try bench.seed(row, boot: "a-boot-before-the-power-went")

            let session = bench.session()
            await session.restore(try bench.database.loadQueue(), startPending: true)
            let done = try await waitFor(session, row.id) { $0.state.isFinished }
            #expect(done.state == .completed)
            #expect(sha256(ofFile: target) == bench.server.sha256("/doc.pdf"))
            #expect(FileManager.default.contents(atPath: target + ".part") == notes, "the person's file is untouched")
            await session.shutdown()
        }
    }

    /// After a crash between a finished file's move and the commit that named it, another queue
    /// made a part file of the same name, with as many bytes and the same modification time:
    /// it is never placed as this download's (nor unmarked); the file this queue placed is found
    /// by its stamp, and nothing is fetched. (Before the marks, the other queue's bytes were
    /// placed beside it and reported complete.)
    @Test func anotherQueuesPartFileIsNeverPlacedForACompletedRow() async throws {
        try await Bench.with { bench in
            let (row, part) = try completedUnplaced(bench, "/c.bin")
            let written = try stamp(part)
            let placed = bench.path("c.bin")
            #expect(rename(part, placed) == 0, "the move the crash came after")
            let theirs = try PartFile(path: part, owner: "another-queue")
            let theirBytes = [UInt8](repeating: 9, count: 300_000)
            #expect(theirBytes.withUnsafeBytes { pwrite(theirs.descriptor, $0.baseAddress, $0.count, 0) } == theirBytes.count)
            let nanoseconds = try #require(written.modified)
            let modified = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
            #expect([modified, modified].withUnsafeBufferPointer { futimens(theirs.descriptor, $0.baseAddress) } == 0)
            theirs.close()
            #expect(try stamp(part) == written, "the same size and modification time as the file this queue wrote")

            let session = bench.session()
            await session.restore(try bench.database.loadQueue(), startPending: true)
            let done = try await waitFor(session, row.id) { $0.completedPath != nil || $0.state != .completed }
            #expect(done.state == .completed)
            #expect(done.completedPath == placed)
            #expect(sha256(ofFile: placed) == bench.server.sha256("/c.bin"))
            #expect(CLIFileNames.of(bench.directory).filter { $0.hasPrefix("c.bin") } == ["c.bin", "c.bin.part"], "nothing placed beside it")
            #expect(FileManager.default.contents(atPath: part) == Data(theirBytes))
            #expect(PartFileOwner.mark(path: part) == "another-queue")
            #expect(bench.server.requests("/c.bin").isEmpty)
            await session.shutdown()
        }
    }

    @Test func aPartFileChangedAfterItsTransferEndedIsNeverPlaced() async throws {
        try await Bench.with { bench in
            let (row, part) = try completedUnplaced(bench, "/c.bin")
            try await Task.sleep(for: .milliseconds(20))
            #expect(FileManager.default.createFile(atPath: part, contents: Data(repeating: 9, count: 300_000)))

            let session = bench.session()
            await session.restore(try bench.database.loadQueue(), startPending: true)
            let failed = try await failure(session, row.id)
            #expect(failed.lastError?.hasPrefix("the part file \(part) changed after haul wrote it (modified since it was completed)") == true, "\(String(describing: failed.lastError))")
            #expect(failed.completedPath == nil)
            #expect(FileManager.default.fileExists(atPath: part) && !FileManager.default.fileExists(atPath: bench.path("c.bin")), "nothing placed")
            #expect(failed.etag == nil && failed.totalBytes == nil, "its version forgotten: no byte of that file is trusted")
            // A retry checks the bytes there against the server's (they differ) and fetches the file.
            _ = try await session.resume(row.id)
            let done = try await waitFor(session, row.id) { $0.completedPath != nil }
            #expect(done.state == .completed)
            #expect(sha256(ofFile: done.completedPath ?? "") == bench.server.sha256("/c.bin"))
            await session.shutdown()
        }
    }

    /// The part file of a completed row is being written by another process (it holds its lock)
    /// when the row is restored: it is not placed as this download's.
    @Test func aPartFileAnotherProcessWritesIsNeverPlaced() async throws {
        try await Bench.with { bench in
            let (row, part) = try completedUnplaced(bench, "/w.bin")
            // Another writer (its own open file, locked as a process's would be).
            let other = try PartFile(path: part)

            let session = bench.session()
            await session.restore(try bench.database.loadQueue(), startPending: true)
            let failed = try await failure(session, row.id)
            #expect(failed.lastError?.hasPrefix("the part file \(part) changed after haul wrote it (another program is writing it)") == true, "\(String(describing: failed.lastError))")
            #expect(FileManager.default.fileExists(atPath: part) && !FileManager.default.fileExists(atPath: bench.path("w.bin")), "nothing placed")
            other.close()
            await session.shutdown()
        }
    }

    /// A completed row of `path` (200,000 bytes, served) asked for in the bench's directory and in
    /// `other`, as a process left it that wrote the file at `madeAt` (its part file or where it
    /// moved it) and linked it for the other requester, then died; seeded in the store.
    func askedForTwice(_ bench: Bench, _ path: String, madeAt file: String) throws -> (row: Download, other: String) {
        let size = 200_000
        bench.server.serve(path, size: size)
        let other = bench.path("other")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: file, contents: Data(bench.server.content(path))))
        #expect(link(file, other + path) == 0)
        var row = completedRow(bench, path, size: size, destination: .directory(bench.directory), partPath: bench.path(String(path.dropFirst()) + ".part"))
        row.extraDestinations = [.directory(other)]
        row.completedStamps = [try stamp(file)]
        try bench.seed(row, boot: nil)
        return (row, other)
    }

    /// A URL asked for twice: the other requester's file is a link to the moved one (its stamp),
    /// made before the move. The process died before the commit that named them: both are found,
    /// nothing is fetched again and no file is placed beside itself.
    @Test func theFilesOfEveryRequesterPlacedBeforeTheCommitAreFoundByTheirStamp() async throws {
        try await Bench.with { bench in
            let moved = bench.path("q.bin")
            let (row, other) = try askedForTwice(bench, "/q.bin", madeAt: moved)

            let session = bench.session()
            let notes = await session.restore(try bench.database.loadQueue(), startPending: true)
            #expect(notes == ["[1] found the file the previous process placed at \(moved) (and for its other requesters at \(other)/q.bin)"])
            let done = try await waitFor(session, row.id) { $0.completedPath != nil }
            #expect(done.completedPaths == [moved, other + "/q.bin"])
            #expect(bench.server.requests("/q.bin").isEmpty, "nothing fetched again")
            #expect(!FileManager.default.fileExists(atPath: bench.path("q.bin.1")))
            #expect(!FileManager.default.fileExists(atPath: other + "/q.bin.1"))
            await session.shutdown()
            #expect(try bench.stored(row.id)?.completedPaths == [moved, other + "/q.bin"])
        }
    }

    /// The process died after it linked the other requester's file and before it moved the part
    /// file: the placement now takes that link, never a second file beside it.
    @Test func aRequestersFileMadeBeforeACrashIsTakenNotPlacedAgain() async throws {
        try await Bench.with { bench in
            let part = bench.path("r.bin.part")
            let (row, other) = try askedForTwice(bench, "/r.bin", madeAt: part)

            let session = bench.session()
            await session.restore(try bench.database.loadQueue(), startPending: true)
            let done = try await waitFor(session, row.id) { $0.completedPath != nil }
            #expect(done.completedPaths == [bench.path("r.bin"), other + "/r.bin"])
            #expect(bench.server.requests("/r.bin").isEmpty)
            #expect(!FileManager.default.fileExists(atPath: other + "/r.bin.1"), "the link made before the crash is the requester's file")
            #expect(!FileManager.default.fileExists(atPath: part))
            #expect(sha256(ofFile: other + "/r.bin") == bench.server.sha256("/r.bin"))
            await session.shutdown()
        }
    }

    @Test func storedPositionsAreRewrittenOnlyWhenTheyAreNotTheQueueOrder() async throws {
        try await Bench.with { bench in
            // Given three paused rows stored at positions 5, 9 and 2 (queue order: 3, 1, 2)
            var changes = QueueChanges()
            for (raw, position) in [(1, 5), (2, 9), (3, 2)] {
                var row = Download(
                    id: DownloadID(Int64(raw)), url: try #require(URL(string: "http://127.0.0.1:9/\(raw)")),
                    destination: .file(bench.path("\(raw)")), partPath: bench.path("\(raw).part")
                )
                row.state = .paused
                changes.saved.append(row)
                changes.positions[row.id] = position
            }
            try bench.database.commit(changes)
            // When a session restores them, the first commit writes 0, 1, 2 in that order
            let first = bench.session()
            await first.restore(try bench.database.loadQueue(), startPending: true)
            await first.shutdown()
            #expect(try bench.database.loadQueue().positions == [DownloadID(3): 0, DownloadID(1): 1, DownloadID(2): 2])
            #expect(try bench.database.loadQueue().downloads.map(\.id) == [DownloadID(3), DownloadID(1), DownloadID(2)])
            // And a queue already in order is not rewritten by the next session
            let before = bench.journal.commits.withLock { $0.count }
            let second = bench.session()
            await second.restore(try bench.database.loadQueue(), startPending: true)
            await second.shutdown()
            let later = bench.journal.commits.withLock { Array($0.dropFirst(before)) }
            #expect(later.allSatisfy { $0.positions.isEmpty }, "\(later.map(\.positions))")
        }
    }

    @Test func removedDownloadsLeaveTheDatabase() async throws {
        try await Bench.with { bench in
            bench.server.serve("/x.bin", size: 1000)
            let session = bench.session()
            let id = try await session.schedule(bench.server.url("/x.bin"), to: .file(bench.path("x.bin")))
            try await waitFor(session, id) { $0.state == .completed }
            try await session.remove(id)
            #expect(try bench.stored(id) == nil)
            #expect(try bench.database.loadQueue().nextID == 2)
            await session.shutdown()
        }
    }

    /// The ETag the server sends for `path` (what a first response would have stored).
    func etag(of path: String, _ server: LoopbackServer) async throws -> String {
        try #require(try await probed(path, server).etag)
    }

    /// `path` fetched whole by a session of its own: its row (validators and all).
    func probed(_ path: String, _ server: LoopbackServer) async throws -> Download {
        let probe = DownloadSession(configuration: Harness.testConfiguration())
        let scratch = try TemporaryDirectory("haul-probe")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let id = try await probe.schedule(server.url(path), to: .file(directory + "/probe"))
        let done = try await waitFor(probe, id) { $0.state.isFinished }
        await probe.shutdown()
        return done
    }
}

/// The names in a directory, sorted.
enum CLIFileNames {
    static func of(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }
}
