import DownloadCore
import Foundation

/// Turns snapshots into `haul get`'s output: a line per state change, at most one progress line a
/// second per download (one updating line on a terminal), or one JSON object per event.
final class ProgressPrinter {
    private let json: Bool
    private let isTerminal: Bool
    /// What was last said of each download: one entry, so that a snapshot costs one lookup a
    /// download (a thousand files' snapshots each looked at every download five times).
    private struct Said {
        var state: String?
        var resumeCount = 0
        var restartCount = 0
        var hook: HookRun?
        var progressLine: Date?
    }

    private var said: [DownloadID: Said] = [:]
    /// Where this run asked for each download: a URL another requester asked for too is one
    /// download with a file for each, and the line names this run's file.
    private var asked: [DownloadID: Destination] = [:]
    /// For each position of `ids` (the same list at every call of a run): the row last looked at.
    /// An unchanged row (the storage a snapshot shares) has nothing new to say.
    private var seenIDs: [DownloadID] = []
    private var seenRows: [Download?] = []
    private var lastStatusLine = Date.distantPast
    private var statusLineShown = false
    private var lastUnsaved: String?
    /// Whether a commit of the queue failed during the run (the exit status says so).
    private(set) var sawUnsaved = false

    init(json: Bool, isTerminal: Bool) {
        self.json = json
        self.isTerminal = isTerminal && !json
    }

    /// The destinations this run asked for, in the order of `ids` (as `schedule` returns them).
    func asked(_ ids: [DownloadID], _ destinations: [Destination]) {
        for (id, destination) in zip(ids, destinations) where asked[id] == nil { asked[id] = destination }
    }

    /// What the queue said before this run: resumes and restarts counted earlier are not news.
    func baseline(_ queue: StoredQueue) {
        for download in queue.downloads {
            said[download.id] = Said(resumeCount: download.resumeCount, restartCount: download.restartCount, hook: download.hook)
        }
    }

    func show(_ snapshot: SessionSnapshot, ids: [DownloadID]) {
        let now = Date()
        if snapshot.unsaved != lastUnsaved {
            lastUnsaved = snapshot.unsaved
            if let unsaved = snapshot.unsaved {
                sawUnsaved = true
                // Where a person looks: on stderr, and as an event of its own in JSON.
                clearStatusLine()
                Self.writeError("haul: \(unsaved); the bytes on disk are kept, and the next haul resumes from them\n")
                if json { write(Self.line(QueueListing.eventLine("unsaved", ["error": unsaved]))) }
            }
        }
        if seenIDs != ids {
            seenIDs = ids
            seenRows = Array(repeating: nil, count: ids.count)
        }
        for (position, id) in ids.enumerated() {
            guard let download = snapshot[id] else { continue }
            // A progress line may be due for a running download without a change.
            if let row = seenRows[position], row == download, isTerminal || download.state != .downloading { continue }
            seenRows[position] = download
            var last = said[id] ?? Said()
            defer { said[id] = last }
            if last.restartCount != download.restartCount {
                last.restartCount = download.restartCount
                emit(download, event: "restarted", text: "restarted from zero: \(download.restartReason ?? "unknown reason")")
            }
            if last.resumeCount != download.resumeCount {
                last.resumeCount = download.resumeCount
                let offset = download.resumeOffset ?? 0
                let how = download.overlapChecked ? "\(download.overlapGround): the bytes before it checked by overlap"
                    : download.unverifiedResume ? "unverified: no validator, same length" : "verified with If-Range"
                emit(download, event: "resumed", text: "resumed at \(Format.bytes(offset)) (\(how))")
            }
            let state = stateKey(download.state)
            if last.state != state {
                last.state = state
                emit(download, event: "state", text: describe(download))
                last.progressLine = now
            } else if download.state == .downloading, !isTerminal,
                      now.timeIntervalSince(last.progressLine ?? .distantPast) >= 1 {
                last.progressLine = now
                emit(download, event: "progress", text: progress(download))
            }
            // After the state line: a hook runs once its download's ending is shown.
            if last.hook != download.hook {
                last.hook = download.hook
                if let hook = download.hook, !hook.isPending { emit(download, event: "hook", text: TerminalText.sanitize(hook.text)) }
            }
        }
        if isTerminal, now.timeIntervalSince(lastStatusLine) >= 0.25 {
            lastStatusLine = now
            let active = ids.compactMap { snapshot[$0] }.filter { $0.state == .downloading && !$0.finishing }
            if active.isEmpty {
                clearStatusLine()
            } else {
                let text = active.map { "[\($0.id)] \(Format.percent($0.fractionDone)) \(Format.speed($0.bytesPerSecond))" }.joined(separator: "  ")
                write("\r\u{1B}[K" + String(text.prefix(terminalWidth() - 1)))
                statusLineShown = true
            }
        }
    }

    /// One line about download `id` that no state change shows (a completed file that changed on
    /// disk, fetched again or kept); in JSON an event `note` with the text in `message`.
    func note(_ id: DownloadID, _ text: String) {
        if json {
            write(Self.line(QueueListing.eventLine("note", id: id, ["message": text])))
            return
        }
        clearStatusLine()
        write("[\(id)] \(TerminalText.sanitize(text))\n")
    }

    func finish() {
        clearStatusLine()
    }

    // MARK: Lines

    private func emit(_ download: Download, event: String, text: String) {
        if json {
            write(Self.line(QueueListing.eventLine(event, download)))
            return
        }
        clearStatusLine()
        write("[\(download.id)] \(text)\n")
    }

    private func describe(_ download: Download) -> String {
        let name = TerminalText.sanitize(download.url.redactingPassword)
        switch download.state {
        case .queued:
            return "queued \(name)"
        case .downloading:
            return "downloading \(name) -> \(TerminalText.sanitize(download.partPath))"
        case .paused:
            return "paused at \(Format.bytes(download.bytesOnDisk))" + (download.lastError.map { ": \(TerminalText.sanitize($0))" } ?? "")
        case .waiting(let until, let reason):
            let seconds = until.timeIntervalSinceNow
            let when = seconds > 0 ? "waiting \(Format.duration(seconds)) to retry" : DownloadState.retryDueWords
            return "\(when) (\(download.failedAttempts) failed): \(TerminalText.sanitize(reason))"
        case .waitingForSpace(let reason):
            return "\(TerminalText.sanitize(reason)); bytes kept, it goes on by itself when there is room"
        case .completed:
            let path = asked[download.id].flatMap(download.completedPath(for:)) ?? download.completedPath ?? download.destination.path
            return "completed \(TerminalText.sanitize(path)) (\(Format.bytes(download.bytesOnDisk)))"
        case .failed(let reason):
            return "failed: \(TerminalText.sanitize(reason))"
        case .cancelled:
            return "cancelled"
        }
    }

    private func progress(_ download: Download) -> String {
        let total = download.totalBytes.map(Format.bytes) ?? "?"
        let over = download.connections > 1 ? " over \(download.connections) connections" : ""
        return "\(Format.percent(download.fractionDone)) \(Format.bytes(download.bytesOnDisk)) / \(total) at \(Format.speed(download.bytesPerSecond))\(over), ETA \(Format.duration(download.secondsRemaining))"
    }

    /// A JSON line: the download's object is `haul list --json`'s (`QueueListing`), one encoder for both.
    private static func line(_ data: Data) -> String {
        String(decoding: data, as: UTF8.self) + "\n"
    }

    private func stateKey(_ state: DownloadState) -> String {
        if case .waiting(let until, _) = state { return "waiting-\(until.timeIntervalSince1970)" }
        if case .waitingForSpace = state { return "waiting-for-space" }
        return state.word
    }

    private func clearStatusLine() {
        guard statusLineShown else { return }
        write("\r\u{1B}[K")
        statusLineShown = false
    }

    private func terminalWidth() -> Int {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// Writes to stdout with `write(2)`: a terminal that went away (SIGHUP) fails the write
    /// instead of the process.
    private func write(_ text: String) {
        Self.write(text, to: STDOUT_FILENO)
    }

    private static func writeError(_ text: String) {
        write(text, to: STDERR_FILENO)
    }

    private static func write(_ text: String, to descriptor: Int32) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
