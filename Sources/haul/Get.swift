import ArgumentParser
import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation
import Logging

/// `haul get`: download URLs without the terminal UI, printing state changes and progress.
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download URLs headless, printing one line per state change.",
        discussion: """
        Runs on the persisted queue: a download interrupted earlier (a signal, a crash, a dropped SSH \
        connection) resumes from its bytes on disk when asked for again, and a file already downloaded \
        to the same place is not fetched again, unless it changed on disk since (its size or \
        modification time; with --checksum, its digest): then it is fetched again into its place.

        With --on-complete or --on-fail, it returns once the hooks of its downloads have ended (or \
        were killed at --hook-timeout); a hook that fails is said, and changes no exit status.

        Exit status: 0 when every download completed, 1 when any failed or paused or the queue could \
        not be saved (said on stderr), 2 for bad input or \
        a queue in use by another haul; 130, 143 or 129 after SIGINT, SIGTERM or SIGHUP (everything \
        paused and checkpointed first).
        """
    )

    @OptionGroup var state: StateOptions
    @OptionGroup var add: AddOptions
    @OptionGroup var session: SessionOptions

    @Flag(help: "Print one JSON object per event instead of text.")
    var json = false

    func run() async throws {
        // Everything that can be refused is refused before the state directory is touched.
        let settings = try session.apply(to: add.apply(to: state.settings()))
        let path = try state.resolvedPath(settings)
        let requests = try add.requests(settings, requireURL: true, state: path)
        if let (pid, client) = await LiveQueue.attach(path) {
            try session.refuseHooks(runner: pid)
            try await Self.follow(client, runner: pid, requests: requests, json: json)
            return
        }
        let store = try OpenStore(path: path)
        let session = DownloadSession(configuration: store.sessionConfiguration(settings, downloadDirectory: add.downloadDirectory(settings)), journal: store.database)
        let interruption = Interruption(session: session)
        let printer = ProgressPrinter(json: json, isTerminal: isatty(STDOUT_FILENO) == 1)
        printer.baseline(store.queue)
        let notes = await session.restore(store.queue, startPending: false)
        store.logger.info("get", metadata: ["urls": "\(requests.count)", "restored": "\(store.queue.downloads.count)", "recovered": "\(notes.count)"])

        let ids: [DownloadID]
        let scheduleNotes: [(DownloadID, String)]
        do {
            (ids, scheduleNotes) = try await session.scheduleReporting(requests)
        } catch {
            await session.shutdown()
            // Refused because a signal shut the session down meanwhile: that is no bad input.
            if let signal = interruption.received { throw ExitCode(128 + signal) }
            throw UsageError(message: error.description)
        }
        printer.asked(ids, requests.map(\.destination))
        for (id, note) in scheduleNotes { printer.note(id, note) }
        var finalSnapshot = await session.snapshot()
        printer.show(finalSnapshot, ids: ids)
        if !Self.allSettled(finalSnapshot, ids: ids) {
            for await snapshot in session.snapshots {
                printer.show(snapshot, ids: ids)
                finalSnapshot = snapshot
                if Self.allSettled(snapshot, ids: ids) { break }
            }
        }
        printer.finish()
        await session.shutdown()
        withExtendedLifetime(store) {}
        if let signal = interruption.received {
            store.logger.notice("interrupted", metadata: ["signal": "\(signal)"])
            throw ExitCode(128 + signal)
        }
        let allCompleted = ids.allSatisfy { finalSnapshot[$0]?.state == .completed }
        // A queue that could not be saved is no success, whatever the rows showed.
        if !allCompleted || printer.sawUnsaved { throw ExitCode(1) }
    }

    /// Every download this run asked for has completed, failed, been cancelled, or paused (a
    /// read-only disk), and its hook, if any, has ended (a person running `haul get URL
    /// --on-complete x` expects x to have run when the command returns); or the queue cannot be
    /// saved (its disk is full): going on would keep nothing of what happens (a file finished
    /// meanwhile is not even placed), so the run ends at once, exit 1, and the next one resumes
    /// from the bytes on disk. (It went on to the end before, and said `completed` of a file whose
    /// row was never saved.)
    static func allSettled(_ snapshot: SessionSnapshot, ids: [DownloadID]) -> Bool {
        if snapshot.unsaved != nil { return true }
        return ids.allSatisfy { id in
            guard let download = snapshot[id] else { return true }
            return (download.state.isFinished || download.state == .paused) && download.hook?.isPending != true
        }
    }

    /// `haul get` on a queue a runner holds: the URLs go to it, and this follows them to the end
    /// with the same output and exit codes. A signal stops following and pauses those downloads.
    static func follow(_ queue: any QueueControl, runner pid: Int32, requests: [AddOptions.Request], json: Bool) async throws {
        let printer = ProgressPrinter(json: json, isTerminal: isatty(STDOUT_FILENO) == 1)
        let scheduled: QueueScheduled
        do {
            printer.baseline(StoredQueue(downloads: try await queue.snapshot().downloads))
            scheduled = try await queue.schedule(requests)
        } catch {
            throw LiveQueue.refused(error)
        }
        let ids = scheduled.ids
        printer.asked(ids, requests.map(\.destination))
        for note in scheduled.notes { printer.note(note.id, note.text) }
        enum Event: Sendable {
            case snapshot(SessionSnapshot)
            case ended
            case signal(Int32)
        }
        let (events, feed) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        let reader = Task {
            for await snapshot in queue.snapshots() { feed.yield(.snapshot(snapshot)) }
            feed.yield(.ended)
        }
        let sources = Interruption.watch(Interruption.signals) { feed.yield(.signal($0)) }
        defer {
            reader.cancel()
            for source in sources { source.cancel() }
        }
        var final: SessionSnapshot?
        /// The last state each download was seen in: one removed by another command may have ended
        /// between two pictures of the queue (newest wins), and only a completion seen counts.
        var seen: [DownloadID: DownloadState] = [:]
        loop: for await event in events {
            switch event {
            case .snapshot(let snapshot):
                for id in ids { if let download = snapshot[id] { seen[id] = download.state } }
                printer.show(snapshot, ids: ids)
                if allSettled(snapshot, ids: ids) {
                    final = snapshot
                    break loop
                }
            case .ended:
                break loop
            case .signal(let number):
                // Stop following: the downloads asked for here pause with their bytes, the rest run
                // on; each says where it paused, as when haul get runs the queue itself (a tester's
                // Ctrl-C ended it without a line).
                for id in ids { try? await queue.pause(id) }
                if let snapshot = try? await queue.snapshot() { printer.show(snapshot, ids: ids) }
                printer.finish()
                throw ExitCode(128 + number)
            }
        }
        printer.finish()
        guard let final else {
            throw RunnerGone(message: "the queue's runner (pid \(pid)) ended before these downloads did; haul get resumes them")
        }
        // A row another command removed: said, unless this saw it complete (a tester's `haul remove`
        // of a row just completed left this with a progress line and exit 1, not a word why).
        for id in ids where final[id] == nil && seen[id] != .completed {
            printer.note(id, "removed from the queue by another command before haul get saw it end")
        }
        let allCompleted = ids.allSatisfy { (final[$0]?.state ?? seen[$0]) == .completed }
        if !allCompleted || printer.sawUnsaved { throw ExitCode(1) }
    }
}
