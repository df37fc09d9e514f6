#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import DownloadCore
import Foundation
import Synchronization

/// The programs a session runs when a download ends (`--on-complete`, `--on-fail`), and how.
public struct HookSettings: Sendable {
    /// The program of each event, an absolute path (checked by the command line before a session
    /// exists).
    public var programs: [HookEvent: String] = [:]
    /// A hook still running after this long is killed, its children too.
    public var timeLimit: Duration = .seconds(600)
    /// Between SIGTERM at the time limit and SIGKILL.
    public var killGrace: Duration = .seconds(3)
    /// Most bytes of one hook run's output (stdout and stderr) that reach the log; the rest is
    /// read and counted, not kept: a hook that prints without end must not fill the queue's disk.
    public var outputCap: Int = 64 * 1024
    /// How long a shutdown waits for running hooks before it leaves them running, their rows
    /// pending (they run again at the next start). Short: a quit or a signal must end within 2 s.
    public var shutdownWait: Duration = .seconds(1)

    public init() {}

    /// The events that have a program.
    public var events: Set<HookEvent> { Set(programs.keys) }
}

/// Runs one hook: the program with the file's path as its only argument, no shell, the download in
/// its environment, in a process group of its own that the time limit kills whole.
enum HookRunner {
    /// Everything the program is started with.
    struct Invocation: Sendable, Hashable {
        var program: String
        var path: String
        var environment: [String: String]
    }

    /// The variables a hook gets on top of haul's own environment.
    ///
    /// `HAUL_URL` has its password masked (the hook's environment is readable by others of the
    /// same user, and hooks log it); `HAUL_SHA256` and `HAUL_CHECKSUM` only for a completed
    /// download whose checksum was verified; `HAUL_ERROR` only for a failed one.
    static func variables(for download: Download, event: HookEvent) -> [String: String] {
        var variables = [
            "HAUL_ID": "\(download.id.rawValue)",
            "HAUL_URL": download.url.redactingPassword,
            "HAUL_PATH": path(of: download, event: event),
            "HAUL_STATE": event.stateWord,
            "HAUL_BYTES": "\(download.bytesOnDisk)",
        ]
        switch event {
        case .complete:
            if let checksum = download.options.checksum {
                // A completed download with a checksum matched it: a mismatch fails the download.
                variables["HAUL_CHECKSUM"] = checksum.description
                if checksum.algorithm == .sha256 { variables["HAUL_SHA256"] = checksum.hex }
            }
        case .fail:
            if case .failed(let reason) = download.state { variables["HAUL_ERROR"] = reason }
        }
        return variables
    }

    /// Every name `variables` may set: none of them is inherited from haul's own environment.
    static let variableNames: Set<String> = [
        "HAUL_ID", "HAUL_URL", "HAUL_PATH", "HAUL_STATE", "HAUL_BYTES", "HAUL_CHECKSUM", "HAUL_SHA256", "HAUL_ERROR",
    ]

    /// The completed file, or for a failed download its part file (where the bytes are).
    static func path(of download: Download, event: HookEvent) -> String {
        event == .complete ? download.completedPath ?? download.partPath : download.partPath
    }

    static func invocation(
        for download: Download, event: HookEvent, program: String, base: [String: String] = ProcessInfo.processInfo.environment
    ) -> Invocation {
        var environment = base.filter { !variableNames.contains($0.key) }
        environment.merge(variables(for: download, event: event)) { _, new in new }
        return Invocation(program: program, path: path(of: download, event: event), environment: environment)
    }

    /// Runs `invocation` to its end (or its time limit) and says how it went. Never blocks a
    /// thread of the cooperative pool: a thread of its own waits for the process.
    ///
    /// `output` gets the program's output line by line (stdout and stderr together), at most
    /// `settings.outputCap` bytes of it, then one line saying how much more there was.
    static func run(_ invocation: Invocation, settings: HookSettings, output: @escaping @Sendable (String) -> Void) async -> HookStatus {
        let started = ContinuousClock.now
        let process: HookProcess
        switch HookProcess.spawn(invocation, output: output, cap: settings.outputCap) {
        case .failure(let failure): return .couldNotStart(reason: failure.reason)
        case .success(let spawned): process = spawned
        }
        let limit = settings.timeLimit
        let grace = settings.killGrace
        let watchdog = Task {
            try? await Task.sleep(for: limit)
            guard !Task.isCancelled, process.kill(SIGTERM, timingOut: true) else { return }
            try? await Task.sleep(for: grace)
            guard !Task.isCancelled else { return }
            _ = process.kill(SIGKILL, timingOut: true)
        }
        let waitStatus = await process.exitStatus()
        watchdog.cancel()
        // The last of its output, logged before its end is: a little while at most, as something
        // it started may hold the pipe open for good. Whichever comes first ends the wait: a task
        // group waited for the drain anyway (a `Task`'s value does not heed cancellation), and a
        // tester's hook that left `sleep 20 &` held `haul get` 20 s past its exit and its limit.
        let drained = process.drained
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = Mutex<CheckedContinuation<Void, Never>?>(continuation)
            let end = { @Sendable in waiting.withLock { $0.take() }?.resume() }
            Task {
                await drained.value
                end()
            }
            Task {
                try? await Task.sleep(for: .seconds(2))
                end()
            }
        }
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        if process.timedOut {
            return .timedOut(limit: Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18)
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
        let signal = waitStatus & 0x7f
        if signal == 0 { return .exited(code: (waitStatus >> 8) & 0xff, seconds: seconds) }
        return .signalled(signal: signal, seconds: seconds)
    }
}

/// One running hook process, the leader of its own process group.
///
/// It is reaped only after `exited` is set under the lock, and `kill` signals the group only while
/// `exited` is false: until it is reaped its pid, which is the group's id, cannot be reused, so a
/// kill at the time limit never reaches another program's group.
final class HookProcess: Sendable {
    struct Failure: Error {
        var reason: String
    }

    let pid: pid_t
    /// Ends once the output pipe reached its end (every writer gone) and was logged.
    let drained: Task<Void, Never>
    private let state = Mutex<(exited: Bool, timedOut: Bool)>((false, false))

    private init(pid: pid_t, drained: Task<Void, Never>) {
        self.pid = pid
        self.drained = drained
    }

    /// Whether the time limit killed it.
    var timedOut: Bool { state.withLock { $0.timedOut } }

    /// Sends `signal` to the whole process group unless the leader has exited; `timingOut` marks
    /// the run as killed at its limit. Returns whether it sent it.
    func kill(_ signal: Int32, timingOut: Bool) -> Bool {
        state.withLock { state in
            guard !state.exited else { return false }
            if timingOut { state.timedOut = true }
            return Glibc.kill(-pid, signal) == 0
        }
    }

    /// The wait status once the leader has exited, from a dedicated thread: `waitpid` for this pid
    /// only (never -1, which would reap another part of haul's children).
    func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { [self] in
                var info = siginfo_t()
                // Wait without reaping, so that the group's id stays this process's meanwhile.
                while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0, errno == EINTR {}
                state.withLock { state in
                    state.exited = true
                    // Killed at the limit: whatever it left behind in its group goes too, while
                    // the unreaped leader still holds the group's id.
                    if state.timedOut { _ = Glibc.kill(-pid, SIGKILL) }
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0, errno == EINTR {}
                continuation.resume(returning: status)
            }
        }
    }

    /// Starts the hook: no shell, argv `[program, path]`, stdin from /dev/null, stdout and stderr
    /// into a pipe that a thread of its own reads into `output` (at most `cap` bytes kept), no
    /// other descriptor of haul's, default signal actions but SIGPIPE's (haul ignores SIGINT,
    /// SIGTERM, SIGHUP, which a child would otherwise inherit), and a session of its own.
    ///
    /// SIGPIPE stays ignored: a hook left running when haul stops gets EPIPE for its output from
    /// then on rather than being killed by it half-way through its work.
    static func spawn(_ invocation: HookRunner.Invocation, output: @escaping @Sendable (String) -> Void, cap: Int) -> Result<HookProcess, Failure> {
        var pipeEnds: [Int32] = [-1, -1]
        // Close-on-exec at once (`pipe2` is not in Swift's Glibc): no other program haul starts
        // keeps the hook's output open. The hook itself gets the write end by `dup2`.
        guard pipe(&pipeEnds) == 0, fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(pipeEnds[1], F_SETFD, FD_CLOEXEC) == 0 else {
            return .failure(Failure(reason: "cannot make a pipe for its output: \(String(cString: strerror(errno)))"))
        }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, STDOUT_FILENO)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, STDERR_FILENO)
        Spawn.closeFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        // A session of its own (so a group of its own, its id the hook's pid): no controlling
        // terminal, so nothing it does reaches the screen curses owns, and a program that asks
        // for a password fails at once instead of stopping in the background until its time limit.
        posix_spawnattr_setflags(&attributes, Int16(Spawn.setSessionFlag | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = [invocation.program, invocation.path]
        let environment = invocation.environment.map { "\($0.key)=\($0.value)" }.sorted()
        var pid: pid_t = 0
        let status = Spawn.withCStrings(argv) { argv in
            Spawn.withCStrings(environment) { environment in
                posix_spawn(&pid, invocation.program, &actions, &attributes, argv, environment)
            }
        }
        close(writeEnd)
        guard status == 0 else {
            close(readEnd)
            return .failure(Failure(reason: "cannot run \(TerminalText.sanitize(invocation.program)): \(String(cString: strerror(status)))"))
        }
        let drained = Task {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread {
                    Self.drain(readEnd, into: output, cap: cap)
                    continuation.resume()
                }
            }
        }
        return .success(HookProcess(pid: pid, drained: drained))
    }

    /// Reads `descriptor` to its end (every writer gone: the hook and what it started), handing
    /// `output` one line at a time until `cap` bytes went, then only counting; closes it.
    static func drain(_ descriptor: Int32, into output: @Sendable (String) -> Void, cap: Int) {
        defer { close(descriptor) }
        var pending: [UInt8] = []
        var kept = 0
        var dropped = 0
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            let room = max(0, cap - kept)
            let taken = min(room, count)
            dropped += count - taken
            guard taken > 0 else { continue }
            kept += taken
            pending += buffer[0..<taken]
            while let newline = pending.firstIndex(of: 0x0A) {
                output(String(decoding: pending[..<newline], as: UTF8.self))
                pending.removeSubrange(...newline)
            }
        }
        if !pending.isEmpty { output(String(decoding: pending, as: UTF8.self)) }
        if dropped > 0 { output("… \(dropped) more bytes of output not logged (at most \(cap) a run)") }
    }
}
