import DownloadCore
import Foundation
import Synchronization
import TerminalUI
import Testing
import TestSupport

/// The UI loop with a fake terminal and a fake queue: no curses, no session, no socket.
@Suite struct UIControllerTests {
    /// A terminal whose keys the test types and whose frames it reads.
    final class FakeTerminal: TerminalScreen {
        let events: AsyncStream<TerminalEvent>
        private let feed: AsyncStream<TerminalEvent>.Continuation
        private let frames = Mutex<[Frame]>([])

        init() {
            (events, feed) = AsyncStream.makeStream(of: TerminalEvent.self)
            feed.yield(.resize(width: 100, height: 20))
        }

        func type(_ keys: Key...) { feed.yield(.keys(keys)) }
        func hangUp() { feed.finish() }
        func show(_ frame: Frame) { frames.withLock { $0.append(frame) } }
        func repaint() {}
        let copied = Mutex<[String]>([])
        func copy(_ text: String) -> Bool {
            copied.withLock { $0.append(text) }
            return true
        }
        var last: String { frames.withLock { $0.last?.text ?? "" } }

        /// Waits until the newest frame satisfies `condition`.
        func waitFor(_ what: String, _ condition: (String) -> Bool) async throws {
            guard try await poll(timeout: 60, every: .milliseconds(5), { condition(last) ? true : nil }) == nil else { return }
            Issue.record("never drew \(what); last frame:\n\(last)")
        }
    }

    /// A queue that records intents; a pause waits until the test lets it go.
    final class FakeQueue: QueueControl {
        let intents = Mutex<[String]>([])
        let pauseGate = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let holdPauses: Bool
        private let stream: AsyncStream<SessionSnapshot>
        let feed: AsyncStream<SessionSnapshot>.Continuation

        init(_ snapshot: SessionSnapshot, holdPauses: Bool = false) {
            self.holdPauses = holdPauses
            (stream, feed) = AsyncStream.makeStream(of: SessionSnapshot.self, bufferingPolicy: .bufferingNewest(1))
            feed.yield(snapshot)
        }

        func snapshots() -> AsyncStream<SessionSnapshot> { stream }
        func snapshot() async throws(QueueControlError) -> SessionSnapshot { SessionSnapshot(downloads: [], maxActive: 3) }
        func record(_ intent: String) { intents.withLock { $0.append(intent) } }
        func schedule(_ requests: [QueueRequest]) async throws(QueueControlError) -> QueueScheduled {
            record("schedule \(requests.map(\.url.absoluteString)) limit \(requests.map { $0.limit ?? 0 })")
            throw QueueControlError(.refused, "refused for the test")
        }
        func pause(_ id: DownloadID) async throws(QueueControlError) {
            record("pause \(id)")
            if holdPauses { await withCheckedContinuation { continuation in pauseGate.withLock { $0 = continuation } } }
        }
        /// What a resume answers: the download that went back to queued to make room.
        let displaces = Mutex<DownloadID?>(nil)
        func resume(_ id: DownloadID) async throws(QueueControlError) -> DownloadID? {
            record("resume \(id)")
            return displaces.withLock { $0 }
        }
        func cancel(_ id: DownloadID) async throws(QueueControlError) { record("cancel \(id)") }
        func remove(_ id: DownloadID) async throws(QueueControlError) {
            record("remove \(id)")
            throw QueueControlError(.refused, "cannot remove download \(id): it is downloading")
        }
        func move(_ id: DownloadID, to index: Int) async throws(QueueControlError) { record("move \(id) \(index)") }
        func edit(_ edit: QueueEdit, _ ids: [DownloadID]) async throws(QueueControlError) -> [MadeRoom] {
            record("\(edit.rawValue) \(ids)")
            return []
        }
        func pauseAll() async throws(QueueControlError) { record("pauseAll") }
        func resumeAll() async throws(QueueControlError) { record("resumeAll") }
        func purgePaused(only ids: [DownloadID]?) async throws(QueueControlError) { record("purge") }
        func setMaxActive(_ count: Int) async throws(QueueControlError) { record("maxActive \(count)") }
        func stop() async throws(QueueControlError) { record("stop") }
        func setLimit(_ bytesPerSecond: Int64?) async throws(QueueControlError) { record("limit \(bytesPerSecond ?? 0)") }
        func setLimit(_ bytesPerSecond: Int64?, for id: DownloadID) async throws(QueueControlError) { record("limit \(id) \(bytesPerSecond ?? 0)") }
        func clearCompleted() async throws(QueueControlError) -> Int {
            record("clearCompleted")
            return 2
        }
        func history(_ id: DownloadID?) async throws(QueueControlError) -> [HistoryEntry] {
            record("history \(id.map { "\($0)" } ?? "all")")
            let count = intents.withLock { $0.count { $0.hasPrefix("history") } }
            return [HistoryEntry(download: id ?? DownloadID(2), time: Date(), kind: .response, text: "HTTP 206 read \(count)")]
        }
    }

    static func snapshot() -> SessionSnapshot {
        var first = Download(id: DownloadID(1), url: URL(string: "http://h/one.bin")!, destination: .file("/d/one.bin"), partPath: "/d/one.bin.part")
        first.state = .downloading
        var second = Download(id: DownloadID(2), url: URL(string: "http://h/two.bin")!, destination: .file("/d/two.bin"), partPath: "/d/two.bin.part")
        second.state = .paused
        return SessionSnapshot(downloads: [first, second], maxActive: 3)
    }

    static func controller(_ queue: FakeQueue, _ terminal: FakeTerminal) -> UIController {
        UIController(queue: queue, terminal: terminal, downloadDirectory: "/d", defaults: RequestOptions(), maxActiveIsConfigured: false, refreshInterval: .milliseconds(10))
    }

    @Test func keysKeepBeingDrawnWhileACommandIsCarriedOut() async throws {
        let queue = FakeQueue(Self.snapshot(), holdPauses: true)
        let terminal = FakeTerminal()
        let run = Task { await Self.controller(queue, terminal).run(ViewState(snapshot: Self.snapshot())) }
        try await terminal.waitFor("the rows") { $0.contains("one.bin") && $0.contains("two.bin") }
        terminal.type(.char("p"))
        try await eventually(timeout: 60, "the pause reached the queue") { queue.intents.withLock { $0 } == ["pause 1"] }
        // The pause is still being carried out; the next key is drawn all the same.
        terminal.type(.char("?"))
        try await terminal.waitFor("the help, while the pause waits") { $0.contains("select the row above") }
        terminal.type(.char("x"), .char("j"), .char("r"))
        try await eventually(timeout: 60, "nothing passed the pause") { queue.intents.withLock { $0 } == ["pause 1"] }
        // Let the pause go: the resume typed after it follows, in order.
        queue.pauseGate.withLock { $0?.resume(); $0 = nil }
        try await eventually(timeout: 60, "the resume after it") { queue.intents.withLock { $0 } == ["pause 1", "resume 2"] }
        terminal.type(.char("q"))
        #expect(await run.value == .quit)
    }

    @Test func aRefusalIsShownOnTheMessageLine() async throws {
        let queue = FakeQueue(Self.snapshot())
        let terminal = FakeTerminal()
        let run = Task { await Self.controller(queue, terminal).run(ViewState(snapshot: Self.snapshot())) }
        try await terminal.waitFor("the rows") { $0.contains("one.bin") }
        var failed = Self.snapshot()
        failed.downloads[0].state = .completed
        // The reducer allows `d` on a completed row; the queue (which knows better) refuses.
        queue.feed.yield(failed)
        try await terminal.waitFor("the completed row") { $0.contains("completed") }
        terminal.type(.char("d"))
        try await terminal.waitFor("the refusal") { $0.contains("cannot remove download 1: it is downloading") }
        terminal.type(.char("D"))
        #expect(await run.value == .detach)
        #expect(queue.intents.withLock { $0 } == ["remove 1"])
    }

    @Test func attachedQAsksBeforeStoppingTheQueueForEveryone() async throws {
        let queue = FakeQueue(Self.snapshot())
        let terminal = FakeTerminal()
        var view = ViewState(snapshot: Self.snapshot())
        view.attached = true
        let run = Task { await Self.controller(queue, terminal).run(view) }
        try await terminal.waitFor("the rows") { $0.contains("one.bin") }
        terminal.type(.char("q"))
        try await terminal.waitFor("the question") { $0.contains("Stop the queue for everyone") }
        terminal.type(.char("n"))
        try await terminal.waitFor("the answer") { $0.contains("the queue goes on") }
        terminal.type(.char("q"))
        try await terminal.waitFor("the question again") { $0.contains("Stop the queue for everyone") }
        terminal.type(.char("y"))
        #expect(await run.value == .quit)
    }

    @Test func aResumeThatTookASlotSaysWhichDownloadWentBackToQueued() async throws {
        let queue = FakeQueue(Self.snapshot())
        queue.displaces.withLock { $0 = DownloadID(1) }
        let terminal = FakeTerminal()
        let run = Task { await Self.controller(queue, terminal).run(ViewState(snapshot: Self.snapshot())) }
        try await terminal.waitFor("the rows") { $0.contains("two.bin") }
        terminal.type(.char("j"))
        terminal.type(.char("r"))
        try await terminal.waitFor("which one made room") { $0.contains("two.bin runs now; one.bin went back to queued with its bytes") }
        terminal.type(.char("q"))
        #expect(await run.value == .quit)
    }

    @Test func theLogIsReadWhenOpenedAndAgainAsTheQueueChanges() async throws {
        let queue = FakeQueue(Self.snapshot())
        let terminal = FakeTerminal()
        let run = Task { await Self.controller(queue, terminal).run(ViewState(snapshot: Self.snapshot())) }
        try await terminal.waitFor("the rows") { $0.contains("one.bin") }
        terminal.type(.char("h"))
        try await terminal.waitFor("the first read") { $0.contains("log of #1 one.bin") && $0.contains("HTTP 206 read 1") }
        // A new picture of the queue a second later reads it again.
        try await Task.sleep(for: .milliseconds(1100))
        var changed = Self.snapshot()
        changed.downloads[0].bytesOnDisk = 4096
        queue.feed.yield(changed)
        try await terminal.waitFor("the second read") { $0.contains("HTTP 206 read 2") }
        terminal.type(.escape)
        terminal.type(.char("H"))
        try await terminal.waitFor("the queue's events") { $0.contains("recent events") && $0.contains("two.bin") }
        terminal.type(.escape)
        terminal.type(.char("q"))
        #expect(await run.value == .quit)
        #expect(queue.intents.withLock { $0 }.filter { $0.hasPrefix("history") } == ["history 1", "history 1", "history all"])
    }

    @Test func clearLimitsAndCopyGoToTheQueueAndTheTerminal() async throws {
        var snapshot = Self.snapshot()
        snapshot.downloads[1].state = .completed
        let queue = FakeQueue(snapshot)
        let terminal = FakeTerminal()
        let controller = UIController(
            queue: queue, terminal: terminal, downloadDirectory: "/d", defaults: RequestOptions(), maxActiveIsConfigured: false,
            limitIsConfigured: true, refreshInterval: .milliseconds(10)
        )
        let run = Task { await controller.run(ViewState(snapshot: snapshot)) }
        try await terminal.waitFor("the rows") { $0.contains("two.bin") }
        terminal.type(.char("C"))
        try await terminal.waitFor("the question") { $0.contains("Clear 1 completed row from the queue (the files stay)? y/n") }
        terminal.type(.char("y"))
        try await terminal.waitFor("how many went") { $0.contains("cleared 2 completed rows; their files stay") }
        terminal.type(.char("L"))
        for character in "300K" { terminal.type(.char(character)) }
        terminal.type(.enter)
        // --limit-rate was given: the key's limit lasts for this run.
        try await terminal.waitFor("the limit, for this run") {
            $0.contains("limit for all downloads: 300 KiB/s for this run (--limit-rate or the config decides next start)")
        }
        terminal.type(.char("y"))
        try await terminal.waitFor("the copy") { $0.contains("copied with OSC 52 (where the terminal allows it): /d/one.bin") }
        #expect(terminal.copied.withLock { $0 } == ["/d/one.bin"])
        terminal.type(.char("q"))
        #expect(await run.value == .quit)
        #expect(queue.intents.withLock { $0 } == ["clearCompleted", "limit 307200"])
    }

    @Test func urlsAddedWithTheKeyGetTheLimitOfTheirOwnThatWasAskedFor() async throws {
        let queue = FakeQueue(Self.snapshot())
        let terminal = FakeTerminal()
        let controller = UIController(
            queue: queue, terminal: terminal, downloadDirectory: "/d", defaults: RequestOptions(), addLimit: 300 * 1024,
            maxActiveIsConfigured: false, refreshInterval: .milliseconds(10)
        )
        let run = Task { await controller.run(ViewState(snapshot: Self.snapshot())) }
        try await terminal.waitFor("the rows") { $0.contains("one.bin") }
        terminal.type(.char("a"))
        for character in "http://h/new.bin" { terminal.type(.char(character)) }
        terminal.type(.enter)
        try await eventually(timeout: 60, "the request reached the queue") { queue.intents.withLock { $0 }.contains { $0.hasPrefix("schedule") } }
        #expect(queue.intents.withLock { $0 } == ["schedule [\"http://h/new.bin\"] limit [307200]"])
        terminal.type(.char("q"))
        #expect(await run.value == .quit)
    }

    @Test func theEndOfTheTerminalOrOfTheQueueEndsTheUI() async throws {
        let terminal = FakeTerminal()
        let hungUp = Task { await Self.controller(FakeQueue(Self.snapshot()), terminal).run(ViewState(snapshot: Self.snapshot())) }
        try await terminal.waitFor("the rows") { $0.contains("one.bin") }
        terminal.hangUp()
        #expect(await hungUp.value == .terminalGone)

        let queue = FakeQueue(Self.snapshot())
        let other = FakeTerminal()
        let ended = Task { await Self.controller(queue, other).run(ViewState(snapshot: Self.snapshot())) }
        try await other.waitFor("the rows") { $0.contains("one.bin") }
        queue.feed.finish()
        #expect(await ended.value == .queueEnded)
    }
}
