import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation
import LoopbackServer
import Synchronization
import Testing
import TestSupport

/// A person's resume takes a slot now, a due retry waits for one visibly, and what happened is in
/// each download's history: the real session, loopback server and SQLite file.
@Suite struct SessionResumeNowTests {
    @Test func aPersonsResumeSendsTheQueuesLowestBackToQueuedWhichResumesLaterWithRangeAndIfRange() async throws {
        try await Harness.with({ $0.maxActive = 1 }) { h in
            for name in ["/a.bin", "/b.bin"] { h.server.serve(name, size: 8 * 1024 * 1024, faults: throttled(512 * 1024)) }
            let a = try await h.session.schedule(h.server.url("/a.bin"), to: .file(h.path("a.bin")))
            try await h.wait(a) { $0.bytesOnDisk > 256 * 1024 }
            let b = try await h.session.schedule(h.server.url("/b.bin"), to: .file(h.path("b.bin")))
            try await h.session.pause(b)

            let displaced = try await h.session.resume(b)
            #expect(displaced == a)
            // Stopped like a pause: its bytes are on disk and counted when the resume returns.
            let requeued = try #require(await h.session.snapshot()[a])
            #expect(requeued.state == .queued)
            #expect(requeued.bytesOnDisk > 256 * 1024)
            #expect(requeued.bytesOnDisk == fileLength(h.path("a.bin.part")))
            #expect(requeued.lastError == nil && requeued.restartCount == 0)
            try await h.wait(b) { $0.state == .downloading && $0.bytesOnDisk > 0 }

            // Another person's resume of a while b, a person's, runs: nothing goes back.
            #expect(try await h.session.resume(a) == nil)
            #expect(await h.session.snapshot()[a]?.state == .queued)
            #expect(await h.session.snapshot()[b]?.state == .downloading)

            // b paused: a takes the slot and resumes from its bytes, checked with If-Range.
            try await h.session.pause(b)
            try await h.wait(a) { $0.state == .downloading && $0.resumeCount == 1 }
            let resumed = try #require(h.gets("/a.bin").last)
            #expect(resumed.range == resumeRange(keeping: requeued.bytesOnDisk))
            #expect(resumed.ifRange != nil)
        }
    }

    @Test func aDueRetryWaitsVisiblyForASlotAndTakesItBeforeTheRowsBelow() async throws {
        try await Harness.with({ $0.maxActive = 1 }) { h in
            var failing = Faults()
            failing.failFirst = 1
            h.server.serve("/a.bin", size: 64 * 1024, faults: failing)
            h.server.serve("/b.bin", size: 8 * 1024 * 1024, faults: throttled(256 * 1024))
            h.server.serve("/c.bin", size: 64 * 1024)
            let a = try await h.session.schedule(h.server.url("/a.bin"), to: .file(h.path("a.bin")))
            let b = try await h.session.schedule(h.server.url("/b.bin"), to: .file(h.path("b.bin")))
            let c = try await h.session.schedule(h.server.url("/c.bin"), to: .file(h.path("c.bin")))
            // a fails, b takes the slot, a's retry comes due (backoff 0.05 s) with none free.
            try await h.wait(b) { $0.state == .downloading && $0.bytesOnDisk > 0 }
            try await Task.sleep(for: .milliseconds(500))
            let due = try #require(await h.session.snapshot()[a])
            guard case .waiting(let until, let reason) = due.state else {
                Issue.record("a is \(due.state), not waiting")
                return
            }
            #expect(until < Date(), "its time has passed")
            #expect(reason == "HTTP 503 Service Unavailable")
            #expect(due.state.isRetryDue(at: Date()))
            #expect(await h.session.snapshot()[c]?.state == .queued)

            try await h.session.pause(b)
            try await h.waitCompleted(a)
            try await h.waitCompleted(c)
            let order = h.server.requests().filter { $0.method == "GET" }.map(\.path)
            #expect(order.lastIndex(of: "/a.bin").map { $0 < (order.firstIndex(of: "/c.bin") ?? -1) } == true, "\(order)")
        }
    }

    @Test func theHistoryOfADownloadRidesOnTheCommitsTheQueueMakesAnyway() async throws {
        let scratch = try TemporaryDirectory("haul-history")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let journal = CountingJournal(try AppDatabase.open(at: directory + "/queue.sqlite"))
        let server = try await LoopbackServer.start()
        let session = DownloadSession(configuration: Harness.testConfiguration(), journal: journal)
        var faults = Faults()
        faults.resetAfterBytes = 512 * 1024
        server.serve("/h.bin", size: 2 * 1024 * 1024, faults: faults)
        server.serve("/done.bin", size: 1000)
        do {
            let id = try await session.schedule(server.url("/h.bin"), to: .file(directory + "/h.bin"))
            let done = try await session.schedule(server.url("/done.bin"), to: .file(directory + "/done.bin"))
            try await waitFor(session, id) { $0.state == .completed }
            try await waitFor(session, done) { $0.state == .completed }

            let entries = try await session.history(id)
            #expect(entries.map(\.kind) == [.added, .started, .response, .waiting, .started, .response, .resumed, .completed], "\(entries.map(\.text))")
            let texts = entries.map(\.text)
            let kept = try #require(server.requests("/h.bin").last?.range)
            #expect(texts[1] == "requested the whole file")
            #expect(texts[2].hasPrefix("HTTP 200, 2.0 MiB in all, ETag \""))
            #expect(texts[3].hasPrefix("retry in 1s: "))
            #expect(texts[4].hasPrefix("requested from ") && texts[4].contains("Range \(kept), If-Range \""), "\(texts[4])")
            #expect(texts[5].hasPrefix("HTTP 206 from "))
            #expect(texts[6].hasSuffix("(If-Range checked)"))
            #expect(texts[7] == "completed: 2.0 MiB at \(directory)/h.bin")
            #expect(zip(entries, entries.dropFirst()).allSatisfy { $0.time <= $1.time }, "oldest first")
            // The store holds the same (nothing is waiting to be committed now).
            #expect(try journal.database.history(id) == entries)
            // The queue's recent entries hold both downloads'.
            let recent = try await session.history(nil)
            #expect(Set(recent.map(\.download)) == [id, done])
            // No commit of its own for an entry: every commit with history carries a row, a
            // removal or a setting too.
            #expect(journal.commits.allSatisfy { $0.history.isEmpty || !$0.saved.isEmpty || !$0.removed.isEmpty || $0.limit != nil })

            // Clearing completed rows: one commit, both gone with their history, files kept.
            let before = journal.commits.count
            #expect(try await session.clearCompleted() == 2)
            #expect(journal.commits.count == before + 1)
            #expect(Set(journal.commits.last?.removed ?? []) == [id, done])
            #expect(await session.snapshot().downloads.isEmpty)
            #expect(FileManager.default.fileExists(atPath: directory + "/h.bin") && FileManager.default.fileExists(atPath: directory + "/done.bin"))
            #expect(try journal.database.history(nil).isEmpty)
            await #expect(throws: DownloadSession.TransitionError.unknownDownload(id)) { try await session.history(id) }

            // The global limit is stored with the queue.
            try await session.setLimit(300 * 1024)
            #expect(try journal.database.setting(AppDatabase.limitKey) == "307200")
        } catch {
            await session.shutdown()
            await server.shutdown()
            throw error
        }
        await session.shutdown()
        await server.shutdown()
    }

}

/// The queue's database, counting the commits it is given.
final class CountingJournal: QueueJournal {
    let database: AppDatabase
    private let made = Mutex<[QueueChanges]>([])

    init(_ database: AppDatabase) {
        self.database = database
    }

    var commits: [QueueChanges] { made.withLock { $0 } }

    func commit(_ changes: QueueChanges) throws {
        try database.commit(changes)
        made.withLock { $0.append(changes) }
    }

    var keepsHistory: Bool { true }

    func history(_ id: DownloadID?) throws -> [HistoryEntry] {
        try database.history(id)
    }
}
