import DownloadCore
import Foundation

/// What the front asks the session (or the terminal) to do.
public enum Command: Sendable, Hashable {
    case pause(DownloadID)
    case resume(DownloadID)
    case cancel(DownloadID)
    case remove(DownloadID)
    case pauseAll
    case resumeAll
    /// The data of these downloads, those still paused (the ones a person was asked about).
    case purgePaused([DownloadID])
    case move(DownloadID, to: Int)
    case setMaxActive(Int)
    /// The limit on all downloads together, bytes per second (nil: none).
    case setLimit(Int64?)
    /// One download's own limit (nil: none).
    case setDownloadLimit(DownloadID, Int64?)
    /// Forget every completed row; the files stay.
    case clearCompleted
    /// Fetch one download's log, or (nil) the whole queue's recent events.
    case loadHistory(DownloadID?)
    /// Put this text (a clean path) on the terminal's clipboard (OSC 52).
    case copy(String)
    case add([URL])
    /// Repaint every cell (Ctrl-L).
    case redraw
    /// Leave the UI; the queue goes on running.
    case detach
    /// Pause everything and stop the queue.
    case quit
}

/// A y/n question shown on the bottom line before anything is deleted.
public struct Confirmation: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case cancel(DownloadID)
        /// The paused downloads the question counted, with the bytes it said each held.
        case purge([DownloadID: Int64])
        case clearCompleted
        /// `q` in a UI attached to a runner: it stops the queue for everyone.
        case stopQueue
    }

    public var kind: Kind
    public var question: String
}

/// A one-line prompt on the bottom line: URLs to add, text to find, a speed limit.
public struct Prompt: Sendable, Hashable {
    public enum Purpose: Sendable, Hashable {
        case add
        /// Narrows the table as it is typed.
        case find
        case limitAll
        case limitDownload(DownloadID)
    }

    public var purpose: Purpose
    public var text: [Character] = []
    /// Index in `text` where typing inserts.
    public var cursor = 0
    /// Why the last Enter was refused, shown above the prompt.
    public var error: String?

    public init(_ purpose: Purpose = .add, text: String = "") {
        self.purpose = purpose
        self.text = Array(text)
        cursor = self.text.count
    }
}

/// A download's log, or the whole queue's recent events, over the table.
public struct LogView: Sendable, Hashable {
    /// Whose log; nil: the whole queue's recent events.
    public var download: DownloadID?
    /// Oldest first; nil until they arrive.
    public var entries: [HistoryEntry]?
    /// Why they could not be read.
    public var error: String?
    /// The first entry shown; nil follows the newest.
    public var top: Int?

    public init(download: DownloadID?) {
        self.download = download
    }
}

/// What covers the table, if anything.
public enum Overlay: Sendable, Hashable {
    case help
    case confirm(Confirmation)
    case prompt(Prompt)
    case log(LogView)
}

/// A line for the bottom bar until the next key.
public struct StatusMessage: Sendable, Hashable {
    public var text: String
    public var isError: Bool

    public init(_ text: String, isError: Bool = false) {
        self.text = text
        self.isError = isError
    }
}

/// Everything the screen shows, as one value: the reducer changes it, `render` draws it.
public struct ViewState: Sendable {
    public var snapshot: SessionSnapshot
    /// The rows on screen, in the order shown: the queue narrowed by `filter` and `kind`, ordered
    /// by `sorting`. Worked out again whenever one of those changes.
    public private(set) var rows: [Download] = []
    /// The clock that countdowns are drawn against.
    public var now: Date
    /// Where the log's times are read (the tests pin it).
    public var timeZone = TimeZone.current
    public var width: Int
    public var height: Int
    /// The selected row, by id so it stays put when rows move.
    public var selected: DownloadID?
    /// Where the selection is in `rows`, for choosing a neighbour when its row goes away.
    var selectedIndex = 0
    /// The first table row on screen.
    public var scrollTop = 0
    public var showDetails = false
    public var overlay: Overlay?
    /// The first line of the help shown (it scrolls on a short screen).
    public var helpTop = 0
    public var message: StatusMessage?
    /// Text a row's name or URL must contain to be shown (`/`); empty shows every row.
    public private(set) var filter = ""
    /// The one kind of row shown (`1` to `5`); nil shows every kind.
    public private(set) var kind: RowKind?
    /// How the rows are ordered on screen; the queue's order never changes with it.
    public private(set) var sorting = Sorting()
    /// Eighth-block bars and `…`; false draws ASCII only (a non-UTF-8 locale, or `--ascii`).
    public var unicode: Bool
    /// This UI steers a queue another haul runs (through its control socket).
    public var attached = false
    /// Why the detach key cannot leave the queue running, when it cannot (the demo's server runs
    /// in its UI's process).
    public var cannotDetach: String?
    /// The most downloads `>` (and `-j`) allow at once.
    public static let maxActiveLimit = 32

    public init(snapshot: SessionSnapshot = SessionSnapshot(downloads: [], maxActive: 3), now: Date = Date(), width: Int = 80, height: Int = 24, unicode: Bool = true) {
        self.snapshot = snapshot
        self.now = now
        self.width = width
        self.height = height
        self.unicode = unicode
        rows = snapshot.downloads
        self.selected = rows.first?.id
        clampScroll()
    }

    /// The selected download, if the queue has it.
    public var selectedDownload: Download? {
        selected.flatMap { snapshot[$0] }
    }

    /// Whether the table shows fewer rows than the queue has.
    public var isNarrowed: Bool { !filter.isEmpty || kind != nil }

    // MARK: Events

    /// Takes a new picture of the queue, keeping the selection on its row (or a neighbour when the
    /// row went away).
    public mutating func apply(_ snapshot: SessionSnapshot) {
        if snapshot.unsaved != self.snapshot.unsaved {
            if let unsaved = snapshot.unsaved {
                message = StatusMessage("\(unsaved): what is shown is not stored; the bytes on disk are kept", isError: true)
            } else {
                message = StatusMessage("the queue is saved again")
            }
        }
        self.snapshot = snapshot
        refreshRows()
        // A question about a download that left the queue has nothing left to ask about; one still
        // there says what a cancel deletes now (a tester's said 608 KiB while the row went on to
        // 1.2 MiB, all deleted by the `y`).
        if case .confirm(var confirmation) = overlay, case .cancel(let id) = confirmation.kind {
            if let download = snapshot[id] {
                confirmation.question = Self.cancelQuestion(download, unicode: unicode)
                overlay = .confirm(confirmation)
            } else {
                overlay = nil
            }
        }
    }

    public mutating func resize(width: Int, height: Int) {
        self.width = max(0, width)
        self.height = max(0, height)
        clampScroll()
    }

    /// Handles a batch of keys; a key followed by more in the same batch was pasted.
    public mutating func handle(_ keys: [Key]) -> [Command] {
        var commands: [Command] = []
        for (index, key) in keys.enumerated() {
            commands += handle(key, pasted: index < keys.count - 1)
        }
        return commands
    }

    /// A command the session refused: said on the bottom line.
    public mutating func failed(_ reason: String) {
        message = StatusMessage(reason, isError: true)
    }

    /// A line in place of the hints until the next key (the demo's keys to try).
    public mutating func inform(_ text: String) {
        message = StatusMessage(text)
    }

    /// A log asked for with `h` or `H` arrived (or could not be read: `error`).
    public mutating func received(_ entries: [HistoryEntry], for download: DownloadID?, error: String? = nil) {
        guard case .log(var log) = overlay, log.download == download else { return }
        if let error {
            log.error = error
        } else {
            log.entries = entries
            log.error = nil
        }
        overlay = .log(log)
    }

    /// The log on screen, if one is (its entries are read again as the queue changes).
    public var openLog: LogView? {
        if case .log(let log) = overlay { return log }
        return nil
    }

    mutating func handle(_ key: Key, pasted: Bool) -> [Command] {
        // A screen too small to show more than its own words acts on no key it cannot show: a
        // tester's `c` then `y` at 15×4 cancelled a download and deleted its bytes, the question
        // never on screen. Quitting (which keeps every byte) and repainting still work; an open
        // question waits for a screen that shows it.
        if Layout(self).tooSmall {
            if key == .ctrl("l") { return [.redraw] }
            guard overlay == nil, KeyMap.action(for: key) == .quit else { return [] }
        }
        switch overlay {
        case .prompt(var prompt):
            let commands = edit(&prompt, key: key, pasted: pasted)
            if case .prompt = overlay { overlay = .prompt(prompt) }
            return commands
        case .confirm(let confirmation):
            overlay = nil
            if confirmation.kind == .stopQueue, key == .char("D") { return [.detach] }
            guard key == .char("y") || key == .char("Y") else {
                message = StatusMessage(confirmation.kind == .stopQueue ? "the queue goes on" : "nothing deleted")
                return []
            }
            switch confirmation.kind {
            case .cancel(let id): return [.cancel(id)]
            case .purge(let asked):
                // Only those the question counted, still paused: one paused since (from another
                // shell) was purged too, bytes nobody agreed to lose (a tester). Said now: the rows
                // show the rest (paused at 0 B, marked purged).
                // And with the bytes it said: one resumed and paused again since holds others
                // (a tester's `haul resume`, then `haul pause`, before the `y`).
                let paused = asked.keys.sorted().compactMap { snapshot[$0] }.filter { $0.state == .paused && !$0.isPurged && asked[$0.id] == $0.bytesOnDisk }
                let bytes = paused.reduce(Int64(0)) { $0 + $1.bytesOnDisk }
                guard !paused.isEmpty else {
                    message = StatusMessage("nothing purged: the downloads asked about are no longer paused")
                    return []
                }
                message = StatusMessage("purged \(Self.pausedDownloads(paused.count)): \(Format.bytes(bytes)) freed; \(paused.count == 1 ? "it stays" : "they stay") in the queue")
                return [.purgePaused(paused.map(\.id))]
            case .clearCompleted: return [.clearCompleted]
            case .stopQueue: return [.quit]
            }
        case .help:
            // Arrows and pages scroll; any other key closes the help; Ctrl-L still repaints.
            if let top = scrolled(helpTop, by: key, page: max(1, helpRows - 1)) {
                helpTop = min(max(0, top), max(0, HelpText.count - max(1, helpRows - 1)))
                return []
            }
            overlay = nil
            return key == .ctrl("l") ? [.redraw] : []
        case .log(var log):
            let entries = log.entries?.count ?? 0
            let page = max(1, helpRows - 1)
            let current = log.top ?? max(0, entries - page)
            if let top = scrolled(current, by: key, page: page) {
                let last = max(0, entries - page)
                log.top = top >= last ? nil : max(0, top)
                overlay = .log(log)
                return []
            }
            overlay = nil
            return key == .ctrl("l") ? [.redraw] : []
        case nil:
            break
        }
        message = nil
        switch key {
        case .escape:
            if isNarrowed {
                filter = ""
                kind = nil
                refreshRows()
                message = StatusMessage("showing all \(rows.count) rows")
            } else {
                showDetails = false
                clampScroll()
            }
            return []
        case .click(_, let y):
            let layout = Layout(self)
            let row = scrollTop + y - layout.tableTop
            if y >= layout.tableTop, y < layout.tableTop + layout.tableHeight, rows.indices.contains(row) { select(row) }
            return []
        case .wheelUp:
            select(selectedIndex - 3)
            return []
        case .wheelDown:
            select(selectedIndex + 3)
            return []
        default:
            break
        }
        guard let action = KeyMap.action(for: key) else { return [] }
        return perform(action, key: key)
    }

    /// Lines the help and the log have below the header, their title line included.
    var helpRows: Int { max(0, Layout(self).bottom - 1) }

    /// Where a scrolling key moves a list whose first shown line is `top`; nil for other keys.
    private func scrolled(_ top: Int, by key: Key, page: Int) -> Int? {
        switch key {
        case .up, .char("k"), .wheelUp: top - (key == .wheelUp ? 3 : 1)
        case .down, .char("j"), .wheelDown: top + (key == .wheelDown ? 3 : 1)
        case .pageUp: top - page
        case .pageDown: top + page
        case .home: 0
        case .end: Int.max / 2
        default: nil
        }
    }

    private mutating func perform(_ action: KeyAction, key: Key) -> [Command] {
        let count = rows.count
        let page = max(1, Layout(self).tableHeight)
        switch action {
        case .selectUp: select(selectedIndex - 1)
        case .selectDown: select(selectedIndex + 1)
        case .pageUp: select(selectedIndex - page)
        case .pageDown: select(selectedIndex + page)
        case .first: select(0)
        case .last: select(count - 1)
        case .pauseOrResume: return withSelected(pauseOrResume)
        case .resumeOrRetry: return withSelected(resumeOrRetry)
        case .cancel: return withSelected(askCancel)
        case .remove: return withSelected(remove)
        case .pauseAll: return [.pauseAll]
        case .resumeAll: return [.resumeAll]
        case .purge: askPurge()
        case .clearCompleted: askClear()
        case .moveUp: return withSelected { state, download in state.move(download, by: -1) }
        case .moveDown: return withSelected { state, download in state.move(download, by: 1) }
        case .fewerAtOnce:
            guard snapshot.maxActive > 1 else {
                message = StatusMessage("at least one download runs at once", isError: true)
                return []
            }
            // Counted here too, so `<<<` typed faster than snapshots arrive asks for three fewer.
            snapshot.maxActive -= 1
            message = StatusMessage("\(snapshot.maxActive) at once")
            return [.setMaxActive(snapshot.maxActive)]
        case .moreAtOnce:
            guard snapshot.maxActive < Self.maxActiveLimit else {
                message = StatusMessage("at most \(Self.maxActiveLimit) downloads run at once", isError: true)
                return []
            }
            snapshot.maxActive += 1
            message = StatusMessage("\(snapshot.maxActive) at once")
            return [.setMaxActive(snapshot.maxActive)]
        case .find: overlay = .prompt(Prompt(.find, text: filter))
        case .showKind: showKind(key)
        case .sort:
            let keys = SortKey.allCases
            let next = keys[((keys.firstIndex(of: sorting.key) ?? 0) + 1) % keys.count]
            sorting = Sorting(key: next)
            refreshRows()
            message = StatusMessage(sorting.words + (next == .queue ? "" : " (S reverses; the queue's order is unchanged)"))
        case .reverseSort:
            sorting.reversed.toggle()
            refreshRows()
            message = StatusMessage(sorting.words)
        case .limitAll: overlay = .prompt(Prompt(.limitAll))
        case .limitSelected: return withSelected { state, download in
            guard !download.state.isFinished else {
                state.message = StatusMessage("\(download.state.word): no speed to limit", isError: true)
                return []
            }
            state.overlay = .prompt(Prompt(.limitDownload(download.id)))
            return []
        }
        case .add: overlay = .prompt(Prompt())
        case .details: showDetails.toggle()
        case .history: return withSelected { state, download in
            state.overlay = .log(LogView(download: download.id))
            return [.loadHistory(download.id)]
        }
        case .recentEvents:
            overlay = .log(LogView(download: nil))
            return [.loadHistory(nil)]
        case .copyPath: return withSelected(copyPath)
        case .help:
            helpTop = 0
            overlay = .help
        case .redraw: return [.redraw]
        case .detach:
            if let cannotDetach {
                message = StatusMessage(cannotDetach, isError: true)
                return []
            }
            return [.detach]
        case .quit:
            // Attached, the queue is everyone's: stopping it is asked first.
            guard attached else { return [.quit] }
            overlay = .confirm(Confirmation(kind: .stopQueue, question: "Stop the queue for everyone (pauses all; D leaves it running)?"))
        }
        clampScroll()
        return []
    }

    private mutating func withSelected(_ body: (inout ViewState, Download) -> [Command]) -> [Command] {
        guard let download = selectedDownload else {
            message = StatusMessage(snapshot.downloads.isEmpty ? "no download selected: press a to add one" : "no row shown: Esc shows them all", isError: true)
            return []
        }
        return body(&self, download)
    }

    private func pauseOrResume(_ state: inout ViewState, _ download: Download) -> [Command] {
        switch download.state {
        case .downloading, .queued, .waiting, .waitingForSpace: return [.pause(download.id)]
        case .paused, .failed: return [.resume(download.id)]
        case .completed, .cancelled:
            state.message = StatusMessage("\(download.state.word): nothing to pause or resume", isError: true)
            return []
        }
    }

    private func resumeOrRetry(_ state: inout ViewState, _ download: Download) -> [Command] {
        switch download.state {
        // A queued one too: a resume means now, as `haul resume` and the socket take it (found by
        // use: the key only said it would start when a slot freed).
        case .paused, .failed, .waiting, .waitingForSpace, .queued: return [.resume(download.id)]
        case .downloading, .completed, .cancelled:
            state.message = StatusMessage("already \(download.state.word)", isError: true)
            return []
        }
    }

    private func askCancel(_ state: inout ViewState, _ download: Download) -> [Command] {
        switch download.state {
        case .completed:
            state.message = StatusMessage("completed downloads are not cancelled; d removes the row and keeps the file", isError: true)
        case .cancelled:
            state.message = StatusMessage("already cancelled", isError: true)
        default:
            state.overlay = .confirm(Confirmation(kind: .cancel(download.id), question: Self.cancelQuestion(download, unicode: state.unicode)))
        }
        return []
    }

    /// What a cancel of `download` deletes, asked: the bytes first, so that a long name is what
    /// gets cut, never the bytes or "y/n".
    static func cancelQuestion(_ download: Download, unicode: Bool) -> String {
        let data = download.bytesOnDisk > 0 ? "deletes \(Format.bytes(download.bytesOnDisk)) of downloaded data" : "nothing downloaded yet"
        return "Cancel (\(data)): \(ScreenText.clean(download.displayName, unicode: unicode))?"
    }

    private func remove(_ state: inout ViewState, _ download: Download) -> [Command] {
        guard download.state.isFinished else {
            state.message = StatusMessage("only completed, failed or cancelled rows can be removed (c cancels)", isError: true)
            return []
        }
        return [.remove(download.id)]
    }

    /// `y`: the file's path, never with a character a terminal or a shell would act on.
    private func copyPath(_ state: inout ViewState, _ download: Download) -> [Command] {
        let path = download.targetPath
        guard ScreenText.clean(path) == path else {
            state.message = StatusMessage("the path has control characters: not copied", isError: true)
            return []
        }
        return [.copy(path)]
    }

    private mutating func askPurge() {
        let paused = snapshot.downloads.filter { $0.state == .paused }
        guard !paused.isEmpty else {
            message = StatusMessage("no paused downloads to purge")
            return
        }
        let bytes = paused.reduce(Int64(0)) { $0 + $1.bytesOnDisk }
        overlay = .confirm(Confirmation(kind: .purge(Dictionary(paused.map { ($0.id, $0.bytesOnDisk) }, uniquingKeysWith: { first, _ in first })), question: "Purge \(Self.pausedDownloads(paused.count)) (deletes \(Format.bytes(bytes)) of partial data; \(paused.count == 1 ? "the download stays" : "the downloads stay"))?"))
    }

    /// `1 paused download`, `3 paused downloads`: the purge's question and its message.
    private static func pausedDownloads(_ count: Int) -> String {
        count == 1 ? "1 paused download" : "\(count) paused downloads"
    }

    private mutating func askClear() {
        let completed = snapshot.downloads.count { $0.state == .completed }
        guard completed > 0 else {
            message = StatusMessage("no completed rows to clear")
            return
        }
        let what = completed == 1 ? "1 completed row" : "\(completed) completed rows"
        overlay = .confirm(Confirmation(kind: .clearCompleted, question: "Clear \(what) from the queue (the files stay)?"))
    }

    private mutating func move(_ download: Download, by offset: Int) -> [Command] {
        guard sorting == Sorting() else {
            message = StatusMessage("+ and - move rows in the queue's order: press s until the rows are in queue order", isError: true)
            return []
        }
        guard let index = snapshot.downloads.firstIndex(where: { $0.id == download.id }) else { return [] }
        let target = index + offset
        guard snapshot.downloads.indices.contains(target) else { return [] }
        return [.move(download.id, to: target)]
    }

    private mutating func showKind(_ key: Key) {
        let chosen = RowKind.allCases.first { key == .char($0.key) }
        kind = chosen == kind ? nil : chosen
        refreshRows()
        if let kind {
            message = StatusMessage("showing \(kind.rawValue) rows only: \(rows.count) of \(snapshot.downloads.count) (0 shows all)")
        } else {
            message = StatusMessage("showing \(isNarrowed ? "\(rows.count) of \(snapshot.downloads.count)" : "all \(rows.count)") rows")
        }
    }

    private mutating func select(_ index: Int) {
        guard !rows.isEmpty else { return }
        selectedIndex = min(max(0, index), rows.count - 1)
        selected = rows[selectedIndex].id
        clampScroll()
    }

    /// Narrows and orders the queue into `rows` again, keeping the selection on its row (or the
    /// row now where it was).
    mutating func refreshRows() {
        rows = RowOrder.rows(snapshot.downloads, filter: filter, kind: kind, sorting: sorting)
        if let selected, let index = rows.firstIndex(where: { $0.id == selected }) {
            selectedIndex = index
        } else if rows.isEmpty {
            selected = nil
            selectedIndex = 0
        } else {
            selectedIndex = min(selectedIndex, rows.count - 1)
            selected = rows[selectedIndex].id
        }
        clampScroll()
    }

    /// Keeps the selection on screen and the table from scrolling past its end.
    mutating func clampScroll() {
        let shown = Layout(self).tableHeight
        let count = rows.count
        guard shown > 0 else { return }
        if selectedIndex < scrollTop { scrollTop = selectedIndex }
        if selectedIndex >= scrollTop + shown { scrollTop = selectedIndex - shown + 1 }
        scrollTop = min(max(0, scrollTop), max(0, count - shown))
    }

    // MARK: The prompts

    private mutating func edit(_ prompt: inout Prompt, key: Key, pasted: Bool) -> [Command] {
        switch key {
        case .char(let character):
            prompt.text.insert(character, at: prompt.cursor)
            prompt.cursor += 1
            prompt.error = nil
        case .enter where pasted, .tab:
            // A newline inside a paste separates URLs; only the Enter a person types submits.
            prompt.text.insert(" ", at: prompt.cursor)
            prompt.cursor += 1
        case .enter:
            return submit(&prompt)
        case .escape, .ctrl("c"):
            overlay = nil
            if prompt.purpose == .find {
                filter = ""
                refreshRows()
                message = StatusMessage("showing \(kind == nil ? "all \(rows.count)" : "\(rows.count) of \(snapshot.downloads.count)") rows")
            }
            return []
        case .left: prompt.cursor = max(0, prompt.cursor - 1)
        case .right: prompt.cursor = min(prompt.text.count, prompt.cursor + 1)
        case .home, .ctrl("a"): prompt.cursor = 0
        case .end, .ctrl("e"): prompt.cursor = prompt.text.count
        case .backspace:
            guard prompt.cursor > 0 else { break }
            prompt.text.remove(at: prompt.cursor - 1)
            prompt.cursor -= 1
        case .delete:
            guard prompt.cursor < prompt.text.count else { break }
            prompt.text.remove(at: prompt.cursor)
        case .ctrl("u"):
            prompt.text.removeFirst(prompt.cursor)
            prompt.cursor = 0
        case .ctrl("l"):
            return [.redraw]
        default:
            break
        }
        if prompt.purpose == .find {
            // Live: the table narrows as the text is typed.
            filter = String(prompt.text)
            refreshRows()
        }
        return []
    }

    private mutating func submit(_ prompt: inout Prompt) -> [Command] {
        switch prompt.purpose {
        case .add: return submitURLs(&prompt)
        case .find:
            overlay = nil
            filter = String(prompt.text).trimmingCharacters(in: .whitespaces)
            refreshRows()
            if !filter.isEmpty { message = StatusMessage("\(rows.count) of \(snapshot.downloads.count) rows match; Esc shows all") }
            return []
        case .limitAll, .limitDownload:
            return submitLimit(&prompt)
        }
    }

    private mutating func submitURLs(_ prompt: inout Prompt) -> [Command] {
        let words = String(prompt.text).split(whereSeparator: { $0.isWhitespace }).map(String.init)
        guard !words.isEmpty else {
            overlay = nil
            return []
        }
        var urls: [URL] = []
        for word in words {
            do {
                urls.append(try URLValidation.parse(word))
            } catch {
                prompt.error = error.description
                return []
            }
        }
        overlay = nil
        message = StatusMessage(urls.count == 1 ? "added 1 URL" : "added \(urls.count) URLs")
        return [.add(urls)]
    }

    /// `2M`, `500K`, `0` or `none`: a limit, or why not.
    static func parseLimit(_ text: String) -> Result<Int64?, InvalidLimit> {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if ["0", "none", "off"].contains(trimmed.lowercased()) { return .success(nil) }
        do {
            let value = try ByteCount.parse(trimmed, what: "limit")
            guard value >= QueueLimits.minimumRate else { return .failure(InvalidLimit(description: "a limit must be at least 1K (0 for none)")) }
            return .success(value)
        } catch {
            return .failure(InvalidLimit(description: error.description))
        }
    }

    struct InvalidLimit: Error {
        var description: String
    }

    private mutating func submitLimit(_ prompt: inout Prompt) -> [Command] {
        let text = String(prompt.text)
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            overlay = nil
            message = StatusMessage("limit unchanged")
            return []
        }
        let limit: Int64?
        switch Self.parseLimit(text) {
        case .success(let value): limit = value
        case .failure(let error):
            prompt.error = error.description
            return []
        }
        overlay = nil
        let words = limit.map { Format.speed(Double($0)) }
        switch prompt.purpose {
        case .limitDownload(let id):
            guard let download = snapshot[id] else {
                message = StatusMessage("that download left the queue: no limit set", isError: true)
                return []
            }
            let name = ScreenText.clean(download.displayName, unicode: unicode)
            message = StatusMessage(words.map { "limit for \(name): \($0)" } ?? "no limit of its own for \(name)")
            return [.setDownloadLimit(id, limit)]
        default:
            // Counted here too: the header shows it before the next snapshot does.
            snapshot.limit = limit
            message = StatusMessage(words.map { "limit for all downloads: \($0)" } ?? "no limit for all downloads")
            return [.setLimit(limit)]
        }
    }
}

extension Download {
    /// Where the file is, or will be: the first requester's path.
    public var targetPath: String {
        switch (completedPath, destination) {
        case (let path?, _): path
        case (nil, .file(let path)): path
        case (nil, .directory(let directory)): (directory as NSString).appendingPathComponent(displayName)
        }
    }

    /// The name a person knows the download by: the file it became, else the file it will become.
    public var displayName: String {
        if let completedPath { return (completedPath as NSString).lastPathComponent }
        switch destination {
        case .file(let path): return (path as NSString).lastPathComponent
        case .directory: return intendedName
        }
    }
}
