import ArgumentParser
import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation

/// Changes to the queue made while no haul runs it (`haul add`, `pause`, `resume`, `cancel`,
/// `remove`), through the same state machine a running session uses, committed in one transaction.
///
/// Nothing transfers: added and resumed downloads stay queued until a haul runs the queue. The
/// commands hand an edit to a running haul through its socket first; when a haul holds the queue
/// without answering there, the edit is refused here and says so.
struct QueueEditor {
    let store: OpenStore
    var machine: SessionStateMachine
    /// Part files to delete once the change is committed (cancel).
    private var deletions: [(DownloadID, String, onlyMarked: Bool)] = []

    /// Opens the queue for an edit. With `mustExist`, a missing queue is an error, not created.
    init(_ options: StateOptions, settings: Settings, mustExist: Bool, verb: String) throws {
        let path = try options.resolvedPath(settings)
        let existing = try? StateDirectory(existingAt: path)
        if let pid = existing?.liveHolder() {
            // Said of any holder (a `haul get` has no keys and no UI: testers read "pause with its
            // keys", then "add in its terminal UI").
            throw UsageError(message: "haul (pid \(pid)) is running this queue (\(path)) and takes no commands from other shells: run this again once it has ended, or \(verb) in its terminal UI if it is one")
        }
        if mustExist, !(existing.map { FileManager.default.fileExists(atPath: $0.databasePath) } ?? false) {
            throw UsageError(message: "no queue at \(path): nothing to \(verb)")
        }
        store = try OpenStore(path: path)
        machine = SessionStateMachine(configuration: .init(startsTransfers: false))
        machine.restore(store.queue.downloads, nextID: store.queue.nextID, holdPending: true)
        _ = machine.takeTouched()
    }

    /// Carries out what the machine asked: only deletions, as nothing runs.
    mutating func perform(_ actions: [SessionStateMachine.Action]) {
        for case .deletePartFile(let id, let path, let onlyMarked) in actions { deletions.append((id, path, onlyMarked)) }
    }

    /// Commits every change in one transaction (each row keeps the boot of its checkpoint), then
    /// deletes the part files of cancelled downloads.
    mutating func commit() throws {
        let touched = machine.takeTouched()
        let stored = store.queue
        let currentBoot = BootID.current()
        var byBoot: [String?: QueueChanges] = [:]
        let storedIDs = Set(stored.downloads.map(\.id))
        for id in touched {
            guard let download = machine.download(id) else { continue }
            let boot = storedIDs.contains(id) ? stored.checkpointBoots[id] : currentBoot
            // Mutated in place: a copy per row would make adding 10,000 URLs quadratic.
            byBoot[boot, default: QueueChanges()].bootID = boot
            byBoot[boot, default: QueueChanges()].saved.append(download)
            // The checkpoint is the stored one, synced or not.
            if stored.unsyncedCheckpoints.contains(id) { byBoot[boot, default: QueueChanges()].unsynced.insert(id) }
        }
        var order = QueueChanges()
        for (index, id) in machine.order.enumerated() { order.positions[id] = index }
        order.removed = stored.downloads.map(\.id).filter { machine.download($0) == nil }
        // After the rows: an entry of a new download needs its row.
        order.history = machine.takeHistory(at: Date())
        // Positions after the rows, so a new row's position is the final one.
        let batch = byBoot.keys.sorted { ($0 ?? "") < ($1 ?? "") }.compactMap { byBoot[$0] } + [order]
        do {
            try store.database.commit(batch: batch)
        } catch {
            // A full or failing disk is no bad input: exit 1, as when the queue is opened.
            if (error as? JournalFailure)?.diskFault == true { throw DiskFault(message: "cannot write the queue: \(error); nothing changed") }
            throw UsageError(message: "cannot write the queue: \(error)")
        }
        // Never a part file another process is writing, or another queue's of the same name.
        for (id, path, onlyMarked) in deletions { PartFileRemoval.remove(path, of: id, queue: store.queueID, onlyMarked: onlyMarked) }
    }

    /// The ids of `texts`, or an error naming the one that is not a download of this queue.
    func ids(_ texts: [String]) throws(UsageError) -> [DownloadID] {
        try Self.ids(texts, in: machine)
    }

    /// The ids of `texts`, or an error naming the one that is not a download of `machine`'s queue.
    static func ids(_ texts: [String], in machine: SessionStateMachine) throws(UsageError) -> [DownloadID] {
        guard !texts.isEmpty else { throw UsageError(message: "no download id given (haul list shows them)") }
        var ids: [DownloadID] = []
        for text in texts {
            guard let value = Int64(text), value > 0 else {
                throw UsageError(message: "'\(TerminalText.sanitize(text))' is not a download id (haul list shows them)")
            }
            let id = DownloadID(value)
            guard machine.download(id) != nil else { throw UsageError(message: "no download \(id) in the queue") }
            // Once each: `remove 1 1` said the second time that there was no download 1.
            if !ids.contains(id) { ids.append(id) }
        }
        return ids
    }
}

/// `haul add`: queue URLs; a runner starts them at once, else the next haul that runs the queue.
struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add URLs to the queue without downloading them yet.",
        discussion: """
        When a haul runs the queue, it gets them at once (through its control socket); else the next \
        `haul` runs them. Prints one line per URL: its id, its state and the URL. A URL already in the \
        queue is not added twice; a paused or failed one is queued again.
        """
    )

    @OptionGroup var state: StateOptions
    @OptionGroup var add: AddOptions

    func run() async throws {
        let settings = try add.apply(to: state.settings())
        let path = try state.resolvedPath(settings)
        let requests = try add.requests(settings, requireURL: true, state: path)
        if let (_, client) = await LiveQueue.attach(path) {
            try await LiveQueue.checkSaved(client)
            do throws(QueueControlError) {
                let scheduled = try await client.schedule(requests)
                let snapshot = try await client.snapshot()
                for note in scheduled.notes { print("[\(note.id)] \(TerminalText.sanitize(note.text))") }
                for (id, request) in zip(scheduled.ids, requests) {
                    print("\(id)\t\(snapshot[id]?.state.word ?? "queued")\t\(TerminalText.sanitize(request.url.redactingPassword))")
                }
            } catch {
                throw LiveQueue.refused(error)
            }
            return
        }
        var editor = try QueueEditor(state, settings: settings, mustExist: false, verb: "add")
        var added: [DownloadID] = []
        for request in requests {
            do {
                let (id, actions) = try editor.machine.schedule(
                    url: request.url, destination: request.destination, options: request.options, limit: request.limit, hold: true
                )
                editor.perform(actions)
                added.append(id)
            } catch {
                throw UsageError(message: error.description)
            }
        }
        try editor.commit()
        for (id, request) in zip(added, requests) {
            let word = editor.machine.download(id)?.state.word ?? "queued"
            print("\(id)\t\(word)\t\(TerminalText.sanitize(request.url.redactingPassword))")
        }
    }
}

/// What `pause`, `resume`, `cancel` and `remove` share: the ids, one transaction, one line each.
///
/// When a haul runs the queue, each goes to it through its control socket and takes effect at once,
/// after the same all-or-nothing check on the queue as the runner shows it.
protocol QueueEditCommand: AsyncParsableCommand {
    var state: StateOptions { get }
    var ids: [String] { get }
    static var verb: String { get }
    static var done: String { get }
    static func apply(_ id: DownloadID, to machine: inout SessionStateMachine) throws(SessionStateMachine.TransitionError) -> [SessionStateMachine.Action]
    /// The same change, on the queue a runner holds (all the ids at once).
    static var edit: QueueEdit { get }
}

extension QueueEditCommand {
    func run() async throws {
        if let (_, client) = await LiveQueue.attach(try state.resolvedPath(state.settings())) {
            try await runLive(client)
            return
        }
        var editor = try QueueEditor(state, settings: state.settings(), mustExist: true, verb: Self.verb)
        let targets = try editor.ids(ids)
        // All or nothing: a refused id leaves the queue as it was.
        for id in targets {
            do {
                editor.perform(try Self.apply(id, to: &editor.machine))
            } catch {
                throw UsageError(message: error.description)
            }
        }
        try editor.commit()
        for id in targets { print("\(Self.done) \(id)") }
    }

    private func runLive(_ client: any QueueControl) async throws {
        let snapshot: SessionSnapshot
        do {
            snapshot = try await client.snapshot()
        } catch {
            throw LiveQueue.refused(error)
        }
        try LiveQueue.checkSaved(snapshot)
        // All or nothing, as offline: every id is tried on the queue as it is now first.
        var machine = SessionStateMachine(configuration: .init(startsTransfers: false))
        machine.restore(snapshot.downloads, nextID: 1, holdPending: true)
        let targets = try QueueEditor.ids(ids, in: machine)
        for id in targets {
            do {
                _ = try Self.apply(id, to: &machine)
            } catch .illegal(let id, _, let intent) {
                // Said with the state the runner shows: the copy here holds what ran as queued.
                let state = snapshot[id]?.state.word ?? "gone"
                throw UsageError(message: SessionStateMachine.TransitionError.illegal(id, state: state, intent: intent).description)
            } catch {
                throw UsageError(message: error.description)
            }
        }
        // Then all at once: the runner checks them again on its queue as it is then, and changes all
        // or none (one by one, a download another shell changed meanwhile stopped the command
        // half-way, and it said nothing changed).
        let notes: [String]
        do {
            notes = try await client.edit(Self.edit, targets).map { "[\($0.id)] back to queued with its bytes, to make room for \($0.resumed)" }
        } catch {
            throw LiveQueue.refused(error)
        }
        // Each with the state the runner holds it in now: a resume of a downloading row said
        // `queued` (a tester), and one that started at once is downloading.
        let after = try? await client.snapshot()
        for id in targets { print("\(after?[id]?.state.word ?? Self.done) \(id)") }
        for note in notes { print(note) }
    }
}

struct Pause: QueueEditCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause downloads by id (bytes kept); they stay paused when haul next runs the queue."
    )
    static let verb = "pause"
    static let done = "paused"

    @OptionGroup var state: StateOptions
    @Argument(help: "Download ids, as haul list shows them.") var ids: [String] = []

    static func apply(_ id: DownloadID, to machine: inout SessionStateMachine) throws(SessionStateMachine.TransitionError) -> [SessionStateMachine.Action] {
        try machine.pause(id)
    }

    static let edit = QueueEdit.pause
}

struct Resume: QueueEditCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Queue paused or failed downloads again by id; the next haul resumes them from their bytes.",
        discussion: """
        While a haul runs the queue, each starts at once: when no slot is free, the lowest running \
        download the queue started by itself goes back to queued with its bytes (said in a line: \
        [ID] back to queued …). When every running download was resumed by a person, it starts at \
        the next free slot, before the rest of the queue.
        """
    )
    static let verb = "resume"
    static let done = "queued"

    @OptionGroup var state: StateOptions
    @Argument(help: "Download ids, as haul list shows them.") var ids: [String] = []

    static func apply(_ id: DownloadID, to machine: inout SessionStateMachine) throws(SessionStateMachine.TransitionError) -> [SessionStateMachine.Action] {
        try machine.resume(id, hold: true)
    }

    /// A resume means now: the runner starts it at once, and says which download went back to
    /// queued (with its bytes) to make room, if one did.
    static let edit = QueueEdit.resume
}

struct Cancel: QueueEditCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel downloads by id and delete their partial data (the only command that discards bytes)."
    )
    static let verb = "cancel"
    static let done = "cancelled"

    @OptionGroup var state: StateOptions
    @Argument(help: "Download ids, as haul list shows them.") var ids: [String] = []

    static func apply(_ id: DownloadID, to machine: inout SessionStateMachine) throws(SessionStateMachine.TransitionError) -> [SessionStateMachine.Action] {
        try machine.cancel(id)
    }

    static let edit = QueueEdit.cancel
}

struct Remove: QueueEditCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Forget completed, failed or cancelled downloads by id; their files stay."
    )
    static let verb = "remove"
    static let done = "removed"

    @OptionGroup var state: StateOptions
    @Argument(help: "Download ids, as haul list shows them.") var ids: [String] = []

    static func apply(_ id: DownloadID, to machine: inout SessionStateMachine) throws(SessionStateMachine.TransitionError) -> [SessionStateMachine.Action] {
        try machine.remove(id)
        return []
    }

    static let edit = QueueEdit.remove
}
