import DownloadCore
import Foundation
import Testing

/// Speed limits, clearing completed rows and the history the machine notes, without I/O.
@Suite struct SessionStateMachineLimitsTests {
    typealias Machine = SessionStateMachine
    let now = Date(timeIntervalSince1970: 1_000_000)

    func machine(maxActive: Int = 3, limit: Int64? = nil) -> Machine {
        Machine(configuration: .init(maxActive: maxActive, backoff: Backoff(initial: 1, cap: 60, spread: 0), limit: limit))
    }

    func url(_ name: String) -> URL {
        URL(string: "http://example.test/\(name)")!
    }

    func order(_ actions: [Machine.Action], of id: DownloadID) -> Machine.TransferOrder? {
        actions.lazy.compactMap { if case .startTransfer(let order) = $0, order.id == id { order } else { nil } }.first
    }

    struct Failure: Error {}

    // MARK: Limits

    @Test func theGlobalLimitIsInTheSnapshotAndZeroIsNone() throws {
        var m = machine(limit: 0)
        #expect(m.snapshot.limit == nil)
        try m.setLimit(200 * 1024)
        #expect(m.snapshot.limit == Int64(200 * 1024))
        #expect(m.configuration.limit == Int64(200 * 1024))
        try m.setLimit(0)
        #expect(m.snapshot.limit == nil)
        try m.setLimit(300_000)
        try m.setLimit(nil)
        #expect(m.snapshot.limit == nil)
        #expect(throws: Machine.TransitionError.invalidArgument("the limit must be at least 1024 bytes a second (1K), or 0 for none")) {
            try m.setLimit(1000)
        }
        #expect(throws: Machine.TransitionError.invalidArgument("the limit must be at most 1125899906842624 bytes a second (1024T), or 0 for none")) {
            try m.setLimit(.max)
        }
        try m.setLimit(QueueLimits.maximumRate)
        #expect(m.snapshot.limit == QueueLimits.maximumRate, "the highest limit is taken")
        try m.setLimit(nil)
        #expect(m.snapshot.limit == nil, "a refused limit changes nothing")
    }

    @Test func aGlobalLimitChangeIsNotedOnTheRunningDownloadsOnly() throws {
        var m = machine(maxActive: 1)
        let (running, _) = try m.schedule(url: url("a"), destination: .file("/d/a"))
        let (queued, _) = try m.schedule(url: url("b"), destination: .file("/d/b"))
        _ = m.takeHistory(at: now)
        try m.setLimit(2 * 1024 * 1024)
        try m.setLimit(2 * 1024 * 1024)
        try m.setLimit(nil)
        let entries = m.takeHistory(at: now)
        #expect(entries.map(\.download) == [running, running])
        #expect(entries.map(\.kind) == [.setting, .setting])
        #expect(entries.map(\.text) == ["all downloads together limited to 2.0 MiB/s", "the limit on all downloads together removed"])
        #expect(!entries.contains { $0.download == queued })
    }

    @Test func aDownloadsOwnLimitGoesWithItsNextAttemptAndIsRefusedWhenFinished() throws {
        var m = machine(maxActive: 1)
        let (a, started) = try m.schedule(url: url("a"), destination: .file("/d/a"), limit: 512 * 1024)
        #expect(m.download(a)?.limit == Int64(512 * 1024))
        #expect(order(started, of: a)?.limit == Int64(512 * 1024))
        let (b, _) = try m.schedule(url: url("b"), destination: .file("/d/b"))
        try m.setLimit(100 * 1024, for: b)
        #expect(m.download(b)?.limit == Int64(100 * 1024))
        let attempt = try #require(order(started, of: a)?.attempt)
        let next = m.transferFinished(a, attempt: attempt, outcome: .completed, bytesOnDisk: 9, now: now, jitter: 0)
        #expect(order(next, of: b)?.limit == Int64(100 * 1024))
        _ = m.finalized(a, paths: ["/d/a"])
        try m.setLimit(0, for: b)
        #expect(m.download(b)?.limit == nil)
        #expect(throws: Machine.TransitionError.illegal(a, state: "completed", intent: "limit")) { try m.setLimit(2048, for: a) }
        #expect(throws: Machine.TransitionError.unknownDownload(DownloadID(9))) { try m.setLimit(2048, for: DownloadID(9)) }
        #expect(throws: Machine.TransitionError.invalidArgument("the limit must be at least 1024 bytes a second (1K), or 0 for none")) {
            try m.setLimit(5, for: b)
        }
        let texts = m.takeHistory(at: now).filter { $0.download == b && $0.kind == .setting }.map(\.text)
        #expect(texts == ["limited to 100 KiB/s", "its own limit removed"])
    }

    @Test func aRequestJoiningADownloadNeverChangesItsLimitUnseen() throws {
        var m = machine(maxActive: 1)
        _ = try m.schedule(url: url("x"), destination: .file("/d/x"))
        let (a, _) = try m.schedule(url: url("a"), destination: .directory("/d"))
        // None asked, none had: nothing changes.
        _ = try m.schedule(url: url("a"), destination: .directory("/d"))
        #expect(m.download(a)?.limit == nil)
        // A download without one adopts the first asked, and its history says so.
        _ = try m.schedule(url: url("a"), destination: .directory("/e"), limit: 300 * 1024)
        #expect(m.download(a)?.limit == Int64(300 * 1024))
        // The same: fine; none asked: fine, unchanged.
        _ = try m.schedule(url: url("a"), destination: .directory("/d"), limit: 300 * 1024)
        _ = try m.schedule(url: url("a"), destination: .directory("/d"))
        #expect(m.download(a)?.limit == Int64(300 * 1024))
        // Another one: refused, all of it (no new requester either).
        #expect(throws: Machine.TransitionError.invalidArgument(
            "download \(a) of this URL is already limited to 300 KiB/s (asked: 1.0 MiB/s): change its limit instead"
        )) { try m.schedule(url: url("a"), destination: .directory("/f"), limit: 1024 * 1024) }
        #expect(m.download(a)?.extraDestinations == [.directory("/e")])
        let entries = m.takeHistory(at: now).filter { $0.download == a }
        #expect(entries.map(\.kind) == [.added, .added, .added, .setting, .added, .added])
        #expect(entries[2].text == "asked for again, also for the directory /e")
        #expect(entries[3].text == "limited to 300 KiB/s by a request that joined it")
    }

    /// A failed download asked for again with headers takes them; a running one keeps the first
    /// requester's (a tester's `-H 'Authorization: …'` after a 401 was dropped every time).
    @Test func aFailedDownloadAskedForAgainWithHeadersTakesThem() throws {
        var m = machine(maxActive: 2)
        let (a, actions) = try m.schedule(url: url("a"), destination: .file("/d/a"))
        let attempt = try #require(order(actions, of: a)?.attempt)
        let token = RequestOptions(headers: [HeaderField(name: "Authorization", value: "Bearer t")])
        // Running: the first requester's headers stay.
        _ = try m.schedule(url: url("a"), destination: .file("/d/a"), options: token)
        #expect(m.download(a)?.options.headers == [])
        _ = m.transferFinished(a, attempt: attempt, outcome: .fatal(reason: "HTTP 401"), bytesOnDisk: 0, now: now, jitter: 0)
        // Failed, asked again without headers: still none.
        _ = try m.schedule(url: url("a"), destination: .file("/d/a"), hold: true)
        #expect(m.download(a)?.options.headers == [])
        _ = try m.pause(a)
        let (_, again) = try m.schedule(url: url("a"), destination: .file("/d/a"))
        #expect(m.download(a)?.options.headers == [], "paused, not failed: kept")
        let retry = try #require(order(again, of: a)?.attempt)
        _ = m.transferFinished(a, attempt: retry, outcome: .fatal(reason: "HTTP 401"), bytesOnDisk: 0, now: now, jitter: 0)
        let (same, started) = try m.schedule(url: url("a"), destination: .file("/d/a"), options: token)
        #expect(same == a)
        #expect(m.download(a)?.options.headers == token.headers)
        #expect(order(started, of: a)?.options.headers == token.headers, "the new attempt sends them")
        let notes = m.takeHistory(at: now).filter { $0.download == a && $0.kind == .setting }.map(\.text)
        #expect(notes == ["headers of the request that tried it again: Authorization"])
    }

    /// A request asking for more connections than its download has raises them, from the next
    /// attempt on, and says so; fewer change nothing.
    @Test func aRequestJoiningADownloadRaisesItsConnectionsNeverLowersThem() throws {
        var m = machine(maxActive: 2)
        let (a, actions) = try m.schedule(url: url("a"), destination: .file("/d/a"), options: RequestOptions(connections: 2))
        let running = try #require(order(actions, of: a))
        _ = try m.schedule(url: url("a"), destination: .file("/d/a"), options: RequestOptions(connections: 8))
        #expect(m.download(a)?.options.connections == 8)
        _ = try m.schedule(url: url("a"), destination: .file("/d/a"), options: RequestOptions(connections: 1))
        #expect(m.download(a)?.options.connections == 8)
        _ = try m.pause(a)
        _ = m.transferFinished(a, attempt: running.attempt, outcome: .stopped, bytesOnDisk: 10, now: now, jitter: 0)
        let resumed = try m.resume(a)
        #expect(order(resumed, of: a)?.options.connections == 8, "the next attempt has them")
        let notes = m.takeHistory(at: now).filter { $0.download == a && $0.kind == .setting }.map(\.text)
        #expect(notes == ["8 connections, asked for by a request that joined it"])
    }

    // MARK: Clearing completed rows

    @Test func clearCompletedForgetsEveryPlacedCompletedRowAndNothingElse() throws {
        var m = machine(maxActive: 4)
        var ids: [DownloadID] = []
        var attempts: [DownloadID: AttemptID] = [:]
        for name in ["a", "b", "c", "d"] {
            let (id, actions) = try m.schedule(url: url(name), destination: .file("/d/\(name)"))
            ids.append(id)
            attempts[id] = order(actions, of: id)?.attempt
        }
        let (paused, _) = try m.schedule(url: url("p"), destination: .file("/d/p"))
        _ = try m.pause(paused)
        for id in ids.prefix(3) {
            _ = m.transferFinished(id, attempt: try #require(attempts[id]), outcome: .completed, bytesOnDisk: 1, now: now, jitter: 0)
        }
        // a and c are in place; b is still being placed.
        _ = m.finalized(ids[0], paths: ["/d/a"])
        _ = m.finalized(ids[2], paths: ["/d/c"])
        #expect(m.clearCompleted() == [ids[0], ids[2]])
        #expect(m.order == [ids[1], ids[3], paused])
        #expect(m.download(ids[0]) == nil && m.download(ids[2]) == nil)
        #expect(m.download(ids[1])?.state == .completed, "being placed: it stays")
        #expect(m.clearCompleted().isEmpty)
        // The same URL asked for again is a new download (the old row is gone).
        let (again, _) = try m.schedule(url: url("a"), destination: .file("/d/a2"))
        #expect(again != ids[0])
        #expect(m.takeHistory(at: now).allSatisfy { $0.download != ids[0] && $0.download != ids[2] }, "no entry of a forgotten row")
    }

    // MARK: History

    @Test func anAttemptThatResumesIsNotedRequestResponseAndOffset() throws {
        var m = machine()
        let (id, actions) = try m.schedule(url: url("a"), destination: .file("/d/a"), limit: 4096)
        let attempt = try #require(order(actions, of: id)?.attempt)
        m.transferBegan(id, attempt: attempt, .request(.fresh(discarding: nil)))
        m.transferResponded(id, attempt: attempt, info: .init(
            status: 200, total: 10 * 1024 * 1024, validators: Validators(etag: "\"abc\""), finalURL: nil, serverFileName: nil, disposition: .fresh,
            contentType: "application/zip"
        ))
        let failed = m.transferFinished(id, attempt: attempt, outcome: .retryable(reason: "connection reset", retryAfter: nil, progressed: true), bytesOnDisk: 1_310_720, now: now, jitter: 0)
        guard case .scheduleRetry(_, let token, _)? = failed.first else { throw Failure() }
        let retry = m.retryTimerFired(id, token: token)
        let second = try #require(order(retry, of: id)?.attempt)
        m.transferBegan(id, attempt: second, .request(.resume(from: 1_310_720, ifRange: "\"abc\"")))
        m.transferResponded(id, attempt: second, info: .init(
            status: 206, total: 10 * 1024 * 1024, validators: Validators(etag: "\"abc\""), finalURL: nil, serverFileName: nil,
            disposition: .resumed(from: 1_310_720, verified: true)
        ))
        _ = m.transferFinished(id, attempt: second, outcome: .completed, bytesOnDisk: 10 * 1024 * 1024, now: now, jitter: 0)
        _ = m.finalized(id, paths: ["/d/a"])
        let entries = m.takeHistory(at: now)
        #expect(entries.allSatisfy { $0.time == now && $0.download == id })
        #expect(entries.map(\.kind) == [.added, .started, .response, .waiting, .started, .response, .resumed, .completed])
        #expect(entries.map(\.text) == [
            "added for /d/a, at most 4.0 KiB/s",
            "requested the whole file",
            "HTTP 200, 10.0 MiB in all, ETag \"abc\", application/zip",
            "retry in 1s: connection reset",
            "requested from 1.2 MiB: Range bytes=1306624-, If-Range \"abc\", the 4.0 KiB before it to compare with the disk",
            "HTTP 206 from 1.2 MiB, 10.0 MiB in all, ETag \"abc\"",
            "resumed at 1.2 MiB (If-Range checked)",
            "completed: 10.0 MiB at /d/a",
        ])
        #expect(m.takeHistory(at: now).isEmpty, "taken once")
    }

    @Test func restartsFailuresAndEveryKindOfPauseAreNotedWithTheirReasons() throws {
        var m = machine(maxActive: 2)
        let (a, aStart) = try m.schedule(url: url("a"), destination: .file("/d/a"))
        let (b, bStart) = try m.schedule(url: url("b"), destination: .file("/d/b"))
        let (c, _) = try m.schedule(url: url("c"), destination: .file("/d/c"))
        let aAttempt = try #require(order(aStart, of: a)?.attempt)
        let bAttempt = try #require(order(bStart, of: b)?.attempt)
        m.transferBegan(a, attempt: aAttempt, .request(.overlap(from: 200_000, overlap: 65_536)))
        m.transferResponded(a, attempt: aAttempt, info: .init(
            status: 200, total: 500, validators: Validators(lastModified: "Mon, 02 Nov 2026 10:00:00 GMT"), finalURL: nil, serverFileName: nil,
            disposition: .restarted(reason: "server ignores ranges")
        ))
        _ = m.transferFinished(a, attempt: aAttempt, outcome: .fatal(reason: "HTTP 404 Not Found"), bytesOnDisk: 0, now: now, jitter: 0)
        _ = try m.pause(b)
        _ = try m.setMaxActive(1)
        _ = m.stopAll()
        _ = try m.cancel(a)
        let entries = m.takeHistory(at: now)
        func texts(_ id: DownloadID, _ kind: HistoryEntry.Kind) -> [String] {
            entries.filter { $0.download == id && $0.kind == kind }.map(\.text)
        }
        #expect(texts(a, .started) == ["requested from 195 KiB without a validator it can trust: Range bytes=134464-, the 64.0 KiB before it to compare with the disk"])
        #expect(texts(a, .response) == ["HTTP 200, 500 B in all, Last-Modified Mon, 02 Nov 2026 10:00:00 GMT"])
        #expect(texts(a, .restarted) == ["restarted from zero: server ignores ranges"])
        #expect(texts(a, .failed) == ["HTTP 404 Not Found"])
        #expect(texts(a, .cancelled) == ["cancelled: its partial data deleted"])
        #expect(texts(b, .paused) == ["paused"])
        #expect(texts(c, .paused) == ["paused by the queue's shutdown: resumes when haul next runs the queue"])
        _ = bAttempt
    }

    @Test func aRestartFoundAtStartIsNoted() throws {
        var m = machine()
        var row = Download(id: DownloadID(4), url: url("a"), destination: .file("/d/a"), partPath: "/d/a.part")
        row.state = .paused
        m.restore([row], nextID: 5, holdPending: false)
        m.noteRestartAtStart(DownloadID(4), reason: "part file was missing")
        m.noteRestartAtStart(DownloadID(9), reason: "not in the queue")
        let entries = m.takeHistory(at: now)
        #expect(entries == [HistoryEntry(download: DownloadID(4), time: now, kind: .restarted, text: "restarted from zero at start: part file was missing")])
    }

    @Test func segmentedResumesAndDiskWaitsAreNoted() throws {
        var m = machine()
        let (id, actions) = try m.schedule(url: url("a"), destination: .file("/d/a"))
        let attempt = try #require(order(actions, of: id)?.attempt)
        m.transferBegan(id, attempt: attempt, .parts(count: 3, kept: 3 * 1024 * 1024, ifRange: "\"v1\""))
        _ = m.transferFinished(id, attempt: attempt, outcome: .noSpace(.belowFloor, reading: nil), bytesOnDisk: 3 * 1024 * 1024, now: now, jitter: 0)
        let entries = m.takeHistory(at: now)
        #expect(entries.map(\.kind) == [.added, .started, .waiting])
        #expect(entries[1].text == "requested the 3 parts left, 3.0 MiB kept, each with If-Range \"v1\"")
        #expect(entries[2].text.hasPrefix("waiting for disk space"))
        // A late report of an older attempt notes nothing.
        m.transferBegan(id, attempt: AttemptID(rawValue: 999), .request(.fresh(discarding: nil)))
        #expect(m.takeHistory(at: now).isEmpty)
    }
}
