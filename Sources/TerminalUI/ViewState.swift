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
    case purgePaused
    case move(DownloadID, to: Int)
    case setMaxActive(Int)
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
        case purge
        /// `q` in a UI attached to a runner: it stops the queue for everyone.
        case stopQueue
    }

    public var kind: Kind
    public var question: String
}

/// The one-line prompt that adds URLs.
public struct Prompt: Sendable, Hashable {
    public var text: [Character] = []
    /// Index in `text` where typing inserts.
    public var cursor = 0
    /// Why the last Enter was refused, shown above the prompt.
    public var error: String?

    public init() {}
}

/// What covers the table, if anything.
public enum Overlay: Sendable, Hashable {
    case help
    case confirm(Confirmation)
    case prompt(Prompt)
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
    /// The clock that countdowns are drawn against.
    public var now: Date
    public var width: Int
    public var height: Int
    /// The selected row, by id so it stays put when rows move.
    public var selected: DownloadID?
    /// Where the selection was, for choosing a neighbour when its row goes away.
    var selectedIndex = 0
    /// The first table row on screen.
    public var scrollTop = 0
    public var showDetails = false
    public var overlay: Overlay?
    public var message: StatusMessage?
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
        self.selected = snapshot.downloads.first?.id
        clampScroll()
    }

    /// Lines the selected download's reason needs in the details pane beyond its first (at most
    /// 16; the layout grows the pane by them only while three table rows stay visible): a checksum
    /// mismatch names two full digests, which are wrapped, never cut.
    var reasonExtraRows: Int {
        guard showDetails, let download = selectedDownload else { return 0 }
        let reason: String
        switch download.state {
        case .failed(let text): reason = text
        // "retry in 59m59s: " comes first.
        case .waiting(_, let text): reason = String(repeating: " ", count: 17) + text
        case .waitingForSpace(let text): reason = text
        default: reason = download.lastError ?? ""
        }
        let room = max(1, width - 11)
        let cells = ScreenText.width(TerminalText.sanitize(reason))
        return min(16, max(0, (cells + room - 1) / room - 1))
    }

    /// The selected download, if the queue has it.
    public var selectedDownload: Download? {
        selected.flatMap { snapshot[$0] }
    }

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
        let downloads = snapshot.downloads
        if let selected, let index = downloads.firstIndex(where: { $0.id == selected }) {
            selectedIndex = index
        } else if downloads.isEmpty {
            selected = nil
            selectedIndex = 0
        } else {
            selectedIndex = min(selectedIndex, downloads.count - 1)
            selected = downloads[selectedIndex].id
        }
        // A question about a download that left the queue has nothing left to ask about.
        if case .confirm(let confirmation) = overlay, case .cancel(let id) = confirmation.kind, snapshot[id] == nil {
            overlay = nil
        }
        clampScroll()
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

    mutating func handle(_ key: Key, pasted: Bool) -> [Command] {
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
            case .purge:
                // Said now: the rows show the rest (paused at 0 B, marked purged).
                let paused = snapshot.downloads.filter { $0.state == .paused }
                let bytes = paused.reduce(Int64(0)) { $0 + $1.bytesOnDisk }
                message = StatusMessage("purged \(paused.count == 1 ? "1 paused download" : "\(paused.count) paused downloads"): \(Format.bytes(bytes)) freed; they stay in the queue")
                return [.purgePaused]
            case .stopQueue: return [.quit]
            }
        case .help:
            // Any key closes the help; Ctrl-L still repaints.
            overlay = nil
            return key == .ctrl("l") ? [.redraw] : []
        case nil:
            break
        }
        message = nil
        if key == .escape {
            showDetails = false
            clampScroll()
            return []
        }
        guard let action = KeyMap.action(for: key) else { return [] }
        return perform(action)
    }

    private mutating func perform(_ action: KeyAction) -> [Command] {
        let count = snapshot.downloads.count
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
        case .moveUp: return withSelected { state, download in state.move(download, by: -1) }
        case .moveDown: return withSelected { state, download in state.move(download, by: 1) }
        case .fewerAtOnce:
            guard snapshot.maxActive > 1 else {
                message = StatusMessage("at least one download runs at once", isError: true)
                return []
            }
            // Counted here too, so `<<<` typed faster than snapshots arrive asks for three fewer.
            snapshot.maxActive -= 1
            return [.setMaxActive(snapshot.maxActive)]
        case .moreAtOnce:
            guard snapshot.maxActive < Self.maxActiveLimit else {
                message = StatusMessage("at most \(Self.maxActiveLimit) downloads run at once", isError: true)
                return []
            }
            snapshot.maxActive += 1
            return [.setMaxActive(snapshot.maxActive)]
        case .add: overlay = .prompt(Prompt())
        case .details: showDetails.toggle()
        case .help: overlay = .help
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
            message = StatusMessage("no download selected: press a to add one", isError: true)
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
        case .paused, .failed, .waiting, .waitingForSpace: return [.resume(download.id)]
        case .queued:
            state.message = StatusMessage("queued: it starts when a slot frees (> runs more at once)")
            return []
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
            // What is deleted comes first: a long name is what gets cut, never the bytes or "y/n".
            let data = download.bytesOnDisk > 0 ? "deletes \(Format.bytes(download.bytesOnDisk)) of downloaded data" : "nothing downloaded yet"
            let name = ScreenText.clean(download.displayName, unicode: state.unicode)
            state.overlay = .confirm(Confirmation(kind: .cancel(download.id), question: "Cancel (\(data)): \(name)?"))
        }
        return []
    }

    private func remove(_ state: inout ViewState, _ download: Download) -> [Command] {
        guard download.state.isFinished else {
            state.message = StatusMessage("only completed, failed or cancelled rows can be removed (c cancels)", isError: true)
            return []
        }
        return [.remove(download.id)]
    }

    private mutating func askPurge() {
        let paused = snapshot.downloads.filter { $0.state == .paused }
        guard !paused.isEmpty else {
            message = StatusMessage("no paused downloads to purge")
            return
        }
        let bytes = paused.reduce(Int64(0)) { $0 + $1.bytesOnDisk }
        let what = paused.count == 1 ? "1 paused download" : "\(paused.count) paused downloads"
        overlay = .confirm(Confirmation(kind: .purge, question: "Purge \(what) (deletes \(Format.bytes(bytes)) of partial data; the downloads stay)?"))
    }

    private mutating func move(_ download: Download, by offset: Int) -> [Command] {
        guard let index = snapshot.downloads.firstIndex(where: { $0.id == download.id }) else { return [] }
        let target = index + offset
        guard snapshot.downloads.indices.contains(target) else { return [] }
        return [.move(download.id, to: target)]
    }

    private mutating func select(_ index: Int) {
        let downloads = snapshot.downloads
        guard !downloads.isEmpty else { return }
        selectedIndex = min(max(0, index), downloads.count - 1)
        selected = downloads[selectedIndex].id
        clampScroll()
    }

    /// Keeps the selection on screen and the table from scrolling past its end.
    mutating func clampScroll() {
        let rows = Layout(self).tableHeight
        let count = snapshot.downloads.count
        guard rows > 0 else { return }
        if selectedIndex < scrollTop { scrollTop = selectedIndex }
        if selectedIndex >= scrollTop + rows { scrollTop = selectedIndex - rows + 1 }
        scrollTop = min(max(0, scrollTop), max(0, count - rows))
    }

    // MARK: The add prompt

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
        return []
    }

    private mutating func submit(_ prompt: inout Prompt) -> [Command] {
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
}

extension Download {
    /// The name a person knows the download by: the file it became, else the file it will become.
    public var displayName: String {
        if let completedPath { return (completedPath as NSString).lastPathComponent }
        switch destination {
        case .file(let path): return (path as NSString).lastPathComponent
        case .directory: return serverFileName ?? FileNaming.name(for: url)
        }
    }
}
