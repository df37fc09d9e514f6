import ArgumentParser
import ControlSocket
import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation
import Logging
import TerminalUI

/// `haul start`: a runner for the queue without a terminal (in the background, or in the
/// foreground for a service manager).
struct Start: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "start",
        abstract: "Run the queue in the background, without a terminal; haul attaches to it, haul stop ends it.",
        discussion: """
        Starts a runner on the queue (downloads queued, running or paused by a stop resume), adds \
        the URLs given or listed in FILE, and returns once it runs, printing its pid. With \
        --foreground it runs in this process instead, for a service manager (Assets/haul.service). \
        A hang-up means nothing to a runner; SIGINT or SIGTERM (or haul stop) pause everything, \
        checkpoint and end it.
        """
    )

    @OptionGroup var state: StateOptions
    @OptionGroup var add: AddOptions
    @OptionGroup var session: SessionOptions
    /// Taken (and unused) so a UI's own arguments start the runner it hands its queue to.
    @OptionGroup(visibility: .private) var display: DisplayOptions

    @Flag(help: "Run in this process (for systemd and other service managers) instead of in the background.")
    var foreground = false

    /// Started by a UI handing its queue over (`D`): waits for that UI to let the queue go.
    @Flag(help: .hidden)
    var handover = false

    func run() async throws {
        // Everything that can be refused is refused here, before a runner is started.
        let settings = try session.apply(to: add.apply(to: state.settings()))
        let path = try state.resolvedPath(settings)
        let requests = try add.requests(settings, requireURL: false, state: path)
        guard foreground else {
            if let pid = (try? StateDirectory(existingAt: path))?.liveHolder() {
                // Only a holder that serves its socket can be attached to (a `haul get` does not: a
                // tester was told to attach to one).
                guard await LiveQueue.attach(path) != nil else {
                    throw UsageError(message: "haul (pid \(pid)) holds the queue at \(path) and takes no commands from other shells: run this again once it has ended")
                }
                throw UsageError(message: "haul (pid \(pid)) already runs the queue at \(path): haul attaches to it, haul stop ends it")
            }
            let pid = try Runner.spawn(CommandLine.arguments.dropFirst() + ["--foreground"])
            try await Runner.waitUntilRunning(pid, path: path)
            print("haul: the queue at \(path) runs in the background (pid \(pid)); haul attaches to it, haul stop ends it")
            return
        }
        let store = try await Runner.openStore(path: path, wait: handover ? .seconds(15) : .zero)
        try await Runner.run(store: store, settings: settings, requests: requests, downloadDirectory: add.downloadDirectory(settings), handover: handover)
    }
}

/// `haul stop`: pause everything, checkpoint, and end the queue's runner.
struct Stop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop",
        abstract: "Stop the queue's runner: pause everything, checkpoint, and wait for it to exit.",
        discussion: "Exit status: 0 once the runner exited; 1 when no haul runs the queue, or it could not save its latest changes."
    )

    @OptionGroup var state: StateOptions

    func run() async throws {
        let path = try state.resolvedPath(state.settings())
        // A queue on a failing disk is not one nobody runs (a tester's runner was alive).
        if let failure = StateDirectory.unreadable(at: path) { throw DiskFault(message: failure.description) }
        guard let pid = (try? StateDirectory(existingAt: path))?.liveHolder() else {
            writeError("haul: no haul runs the queue at \(path)\n")
            throw ExitCode(1)
        }
        // What the runner could not save is lost when it exits: said, not reported as a success.
        var unsaved: String?
        if let (_, client) = await LiveQueue.attach(path), let snapshot = try? await client.snapshot() { unsaved = snapshot.unsaved }
        // SIGTERM has the meaning stop needs: pause all, checkpoint, exit.
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(10)
        while Runner.alive(pid), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        guard !Runner.alive(pid) else {
            writeError("haul: the runner (pid \(pid)) did not exit within 10 s\n")
            throw ExitCode(1)
        }
        if let unsaved {
            writeError("haul: stopped the queue at \(path) (pid \(pid)), but it could not save its latest changes (\(unsaved)): they are lost; the bytes on disk are kept and the next start resumes from them\n")
            throw ExitCode(1)
        }
        print("haul: stopped the queue at \(path) (pid \(pid)); its downloads are paused and resume at the next start")
    }
}

/// A queue run without a terminal, and the ways one is started.
enum Runner {
    /// Runs the queue of `store` until SIGINT, SIGTERM or `haul stop`; a hang-up changes nothing.
    static func run(store: OpenStore, settings: Settings, requests: [AddOptions.Request], downloadDirectory: String, handover: Bool) async throws {
        let session = DownloadSession(configuration: store.sessionConfiguration(settings, downloadDirectory: downloadDirectory), journal: store.database)
        let interruption = Interruption(session: session, onHangUp: {})
        let notes = await session.restore(store.queue, startPending: true)
        let queue = SessionQueue(session: session, onStop: { await session.shutdown() }, onMaxActive: { store.saveMaxActive($0) })
        let refused = await UIController.add(requests, to: queue)
        let server = await LiveQueue.serve(queue, statePath: store.directory.path, logger: store.logger)
        store.logger.notice("runner started", metadata: [
            "pid": "\(getpid())", "handover": "\(handover)", "urls": "\(requests.count)", "refused": "\(refused)",
            "restored": "\(store.queue.downloads.count)", "recovered": "\(notes.count)",
        ])
        for await _ in queue.snapshots() {}
        await server?.shutdown()
        await session.shutdown()
        store.logger.notice("runner stopped")
        withExtendedLifetime(store) {}
        if let signal = interruption.received { throw ExitCode(128 + signal) }
    }

    /// Opens the queue, waiting up to `wait` for its lock (a UI handing the queue over lets it go
    /// once its downloads are paused and checkpointed).
    static func openStore(path: String, wait: Duration) async throws -> OpenStore {
        let deadline = ContinuousClock.now + wait
        while true {
            do {
                return try OpenStore(path: path)
            } catch {
                guard ContinuousClock.now < deadline else { throw error }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Starts `haul ARGUMENTS` in a session of its own, with no terminal: stdin and stdout on
    /// /dev/null, stderr too (the runner logs to haul.log). Returns its pid.
    static func spawn(_ arguments: some Sequence<String>) throws(UsageError) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
        }
        // Nothing else of this process's: a pipe it inherited (a script reading `haul start`'s
        // output) must end when `haul start` does, not when the runner does.
        Spawn.closeFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc): the runner outlives this terminal's hang-up.
        posix_spawnattr_setflags(&attributes, Int16(Spawn.setSessionFlag))
        let executable = "/proc/self/exe"
        let argv = ["haul"] + Array(arguments)
        var pid: pid_t = 0
        let status = Spawn.withCStrings(argv) { argv in
            posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        }
        guard status == 0 else { throw UsageError(message: "cannot start a runner: \(String(cString: strerror(status)))") }
        return pid
    }

    /// Waits until the runner `pid` holds the queue's lock and answers on its socket, or fails
    /// with why not.
    static func waitUntilRunning(_ pid: Int32, path: String) async throws {
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            if (try? StateDirectory(existingAt: path))?.liveHolder() == pid,
               await ControlClient.connect(socketPath: LiveQueue.socketPath(path)) != nil { return }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                throw UsageError(message: "the runner ended before it ran the queue (see \(path)/haul.log)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw UsageError(message: "the runner (pid \(pid)) did not take the queue within 15 s (see \(path)/haul.log)")
    }

    static func alive(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0
    }
}
