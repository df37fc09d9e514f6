import ArgumentParser
import ControlSocket
import CursesBackend
import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation
import Logging
import Synchronization
import TerminalUI

/// `haul [URL...]`, `haul -i FILE`: the terminal UI on the persisted queue (the default command).
struct UI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ui",
        abstract: "Open the terminal UI on the queue (the default: `haul` and `haul URL...` run this).",
        discussion: """
        Shows every download of the queue with its progress, speed, ETA and resume offset, and runs \
        the queue: downloads that were queued, running or paused by a quit resume. URLs given here, \
        or listed in FILE (one per line, # starts a comment), are added first. Press ? for the keys; \
        q pauses everything and quits, and the next start resumes it; D detaches, leaving the \
        downloads running in the background, and so does a hang-up. On a queue another haul runs, \
        this attaches to it.
        """
    )

    @OptionGroup var state: StateOptions
    @OptionGroup var add: AddOptions
    @OptionGroup var session: SessionOptions
    @OptionGroup var display: DisplayOptions

    func run() async throws {
        // Everything that can be refused is refused before the queue is touched.
        let settings = try display.apply(to: session.apply(to: add.apply(to: state.settings())))
        let path = try state.resolvedPath(settings)
        let requests = try add.requests(settings, requireURL: false, state: path)
        let defaults = try add.defaultOptions(settings)
        guard isatty(STDIN_FILENO) == 1, isatty(STDOUT_FILENO) == 1 else {
            throw UsageError(message: "the terminal UI needs a terminal on stdin and stdout (use haul get in scripts)")
        }
        try Self.checkTerminal()
        if let (pid, client) = await LiveQueue.attach(path) {
            try session.refuseHooks(runner: pid)
            try await Self.attach(client, runner: pid, statePath: path, settings: settings, requests: requests, downloadDirectory: add.downloadDirectory(settings), defaults: defaults)
            return
        }
        let store = try OpenStore(path: path)
        // `D` hands the queue to `haul start` with the same options (its URLs join their downloads).
        var arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "ui" { arguments.removeFirst() }
        try await Self.runTerminal(
            store: store, settings: settings, requests: requests, downloadDirectory: add.downloadDirectory(settings),
            defaults: defaults, handover: ["start", "--foreground", "--handover"] + arguments
        )
    }

    /// Runs the queue of `store` in the terminal UI until `q` or a signal; `requests` are added
    /// first and `banner` greets the user (the demo's keys to try). Without `-j`, the config or a
    /// remembered choice, `fallbackMaxActive` run at once.
    ///
    /// This process is the queue's runner. When its terminal goes away (a hang-up: SIGHUP, or EOF
    /// on the terminal) it leaves curses, detaches from the terminal and goes on downloading until
    /// a signal or `haul stop` ends it.
    static func runTerminal(
        store: OpenStore, settings: Settings, requests: [AddOptions.Request], downloadDirectory: String,
        defaults: RequestOptions, banner: String? = nil, fallbackMaxActive: Int = Settings.defaultMaxActive,
        handover: [String]?
    ) async throws {
        let session = DownloadSession(
            configuration: store.sessionConfiguration(settings, downloadDirectory: downloadDirectory, fallbackMaxActive: fallbackMaxActive), journal: store.database
        )
        let hangUp = HangUp()
        let interruption = Interruption(session: session, beforeForcedExit: { Emergency.restoreTerminal() }, onHangUp: { hangUp.happened() })
        let notes = await session.restore(store.queue, startPending: true)
        store.logger.info("ui", metadata: ["urls": "\(requests.count)", "restored": "\(store.queue.downloads.count)", "recovered": "\(notes.count)"])
        let queue = SessionQueue(session: session, onStop: { await session.shutdown() }, onMaxActive: { store.saveMaxActive($0) })
        let refused = await UIController.add(requests, to: queue)
        // Other shells steer the queue through it (and other logins attach to it).
        let server = await LiveQueue.serve(queue, statePath: store.directory.path, logger: store.logger)

        // From here until curses ends, stderr goes to the log: nothing may scribble on the screen.
        let redirect = StandardErrorRedirect(to: store.directory.logPath)
        let terminal: CursesTerminal
        do {
            let noColor = !(ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
            terminal = try await CursesTerminal(colors: !noColor, mouse: settings.mouse)
        } catch {
            redirect?.restore()
            await session.shutdown()
            throw UsageError(message: error.description)
        }
        // A hang-up ends curses; the UI then ends with `terminalGone`.
        hangUp.whenItHappens { Task { await terminal.stop() } }
        var view = ViewState(snapshot: await session.snapshot(), unicode: terminal.unicode && !settings.ascii)
        if let first = refused.first {
            view.failed(refused.count == 1 ? first : "\(first) (and \(refused.count - 1) more)")
        } else if let banner {
            view.inform(banner)
        }
        if handover == nil { view.cannotDetach = "the demo cannot detach: its server runs in this process (q quits)" }
        let logger = store.logger
        let controller = UIController(
            queue: queue,
            terminal: terminal,
            downloadDirectory: downloadDirectory,
            defaults: defaults,
            addLimit: settings.limitRateEach,
            maxActiveIsConfigured: settings.maxActive != nil,
            limitIsConfigured: settings.limitRate != nil,
            refreshInterval: .milliseconds(Int(1000 / settings.refresh)),
            log: { logger.info("\($0)") }
        )
        let end = await controller.run(view)
        await terminal.stop()
        switch end {
        case .quit, .queueEnded:
            break
        case .detach:
            // The terminal stays, so this process must end to give it back: a runner in the
            // background takes the queue over once this one paused and checkpointed everything.
            redirect?.restore()
            do {
                let pid = try Runner.spawn(handover ?? [])
                logger.notice("detached: handing the queue over", metadata: ["runner": "\(pid)"])
                await server?.shutdown()
                await session.shutdown()
                print("haul: detached: the queue goes on in the background (pid \(pid)); haul attaches to it, haul stop ends it")
            } catch {
                await server?.shutdown()
                await session.shutdown()
                throw error
            }
            withExtendedLifetime(store) {}
            return
        case .terminalGone:
            // The downloads go on without a terminal, until a signal or `haul stop` ends them.
            logger.notice("terminal gone: detached, the queue goes on", metadata: ["pid": "\(getpid())"])
            Detach.fromTerminal(logPath: store.directory.logPath)
            for await _ in queue.snapshots() {}
            logger.notice("detached runner stopping")
        }
        await server?.shutdown()
        await session.shutdown()
        redirect?.restore()
        withExtendedLifetime(store) {}
        if let signal = interruption.received {
            store.logger.notice("interrupted", metadata: ["signal": "\(signal)"])
            throw ExitCode(128 + signal)
        }
    }
}

extension UI {
    /// Refuses, in one line, a terminal the UI cannot draw on (`TERM=dumb`, unknown, unset), before
    /// anything is touched.
    static func checkTerminal() throws(UsageError) {
        do {
            try CursesTerminal.check()
        } catch {
            throw UsageError(message: error.description)
        }
    }

    /// The UI on a queue another haul runs, through its control socket: the same table, keys,
    /// help and details; its keys act on the shared queue. `q` asks before it stops the queue for
    /// everyone, `D` (or a hang-up) just leaves. When the runner ends, one line says so (exit 1),
    /// unless another takes the queue over within seconds: this then attaches to that one.
    static func attach(
        _ client: any QueueControl, runner pid: Int32, statePath: String, settings: Settings, requests: [AddOptions.Request],
        downloadDirectory: String, defaults: RequestOptions
    ) async throws {
        let refused = await UIController.add(requests, to: client)
        let snapshot: SessionSnapshot
        do {
            snapshot = try await client.snapshot()
        } catch {
            throw LiveQueue.refused(error)
        }
        // Signals end this UI only; the queue is the runner's.
        let leave = HangUp()
        let sources = Interruption.watch(Interruption.signals) { _ in leave.happened() }
        defer { for source in sources { source.cancel() } }
        let redirect = StandardErrorRedirect(to: statePath + "/haul.log")
        let terminal: CursesTerminal
        do {
            let noColor = !(ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
            terminal = try await CursesTerminal(colors: !noColor, mouse: settings.mouse)
        } catch {
            redirect?.restore()
            throw UsageError(message: error.description)
        }
        leave.whenItHappens { Task { await terminal.stop() } }
        var view = ViewState(snapshot: snapshot, unicode: terminal.unicode && !settings.ascii)
        view.attached = true
        if let first = refused.first {
            view.failed(refused.count == 1 ? first : "\(first) (and \(refused.count - 1) more)")
        } else {
            view.inform("attached to the queue haul (pid \(pid)) runs: D leaves it running, q stops it for everyone")
        }
        let controller = UIController(
            queue: client,
            terminal: terminal,
            downloadDirectory: downloadDirectory,
            defaults: defaults,
            addLimit: settings.limitRateEach,
            maxActiveIsConfigured: false,
            refreshInterval: .milliseconds(Int(1000 / settings.refresh))
        )
        let end = await controller.run(view)
        await terminal.stop()
        redirect?.restore()
        switch end {
        case .quit:
            do {
                try await client.stop()
            } catch {
                throw LiveQueue.refused(error)
            }
            print("haul: stopped the queue (pid \(pid)); its downloads are paused and resume at the next start")
        case .detach, .terminalGone:
            break
        case .queueEnded:
            // A runner that handed the queue over (its UI's D) has a successor: this UI follows the
            // queue there (a tester's attached UI ended, saying the runner had, as the queue went on).
            if let (next, client) = await LiveQueue.successor(statePath, of: pid) {
                try await attach(client, runner: next, statePath: statePath, settings: settings, requests: [], downloadDirectory: downloadDirectory, defaults: defaults)
                return
            }
            writeError("haul: the queue's runner (pid \(pid)) ended; haul runs the queue again\n")
            throw ExitCode(1)
        }
    }
}

/// A hang-up of the runner's terminal, which may come before the terminal is up.
final class HangUp: Sendable {
    private let state = Mutex<(happened: Bool, action: (@Sendable () -> Void)?)>((false, nil))

    func happened() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            state.happened = true
            return state.action
        }
        action?()
    }

    /// Runs `action` on a hang-up, at once if one came already.
    func whenItHappens(_ action: @escaping @Sendable () -> Void) {
        let already = state.withLock { state -> Bool in
            state.action = action
            return state.happened
        }
        if already { action() }
    }
}

/// Leaving the terminal for good: the process goes on as a runner without one.
enum Detach {
    /// A session of its own (`setsid`; refused to a session leader, such as the program a tmux
    /// pane or an SSH login runs, which then keeps its hung-up terminal and ignores SIGHUP), and the
    /// standard streams away from the terminal: stdin and stdout to `/dev/null`, stderr to the log.
    static func fromTerminal(logPath: String) {
        _ = setsid()
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        if null >= 0 {
            dup2(null, STDIN_FILENO)
            dup2(null, STDOUT_FILENO)
            close(null)
        }
        let log = open(logPath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        if log >= 0 {
            dup2(log, STDERR_FILENO)
            close(log)
        }
    }
}

/// Points stderr at the log while curses owns the screen, and back afterwards.
struct StandardErrorRedirect {
    private let saved: Int32

    /// The log, else /dev/null: never the screen.
    init?(to path: String) {
        var log = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        if log < 0 { log = open("/dev/null", O_WRONLY | O_CLOEXEC) }
        guard log >= 0 else { return nil }
        defer { close(log) }
        let saved = dup(STDERR_FILENO)
        guard saved >= 0 else { return nil }
        guard dup2(log, STDERR_FILENO) >= 0 else {
            close(saved)
            return nil
        }
        self.saved = saved
    }

    func restore() {
        dup2(saved, STDERR_FILENO)
        close(saved)
    }
}
