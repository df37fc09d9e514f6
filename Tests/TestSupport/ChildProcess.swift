import Foundation
import Synchronization

/// A program run by a test (the haul binary, tmux, curl, openssl, Python), waited for without
/// blocking the cooperative thread pool.
///
/// Started with `posix_spawn`: standard input from /dev/null, output to a file or nowhere (never a
/// pipe: a server the child starts, as tmux's, keeps what it inherits, and a reader would never see
/// the end), no other descriptor of the test process (a loopback socket a long-lived child held would
/// keep a connection open), default signal actions and nothing blocked (the child must die of the
/// signals the test sends, whatever the test process ignores).
///
/// Its end is reaped by `waitpid` on a thread of its own, never in a task: the pool has about two
/// threads on two cores, and one blocked in `waitpid` or `Process.waitUntilExit` stalls every other
/// test's tasks. Foundation's `Process` is not used: it notices the end through a socket the child
/// inherits, so a child that starts a daemon (tmux) never ends for it.
public final class ChildProcess: Sendable {
    /// Where the child's standard output or error goes.
    public enum Output: Sendable {
        case discard
        /// The file at this path, created or truncated.
        case file(String)
        /// Standard error only: where standard output goes.
        case standardOutput
    }

    /// How the child ended.
    public struct Termination: Sendable, Hashable {
        /// The exit status, or the signal's number when `signalled`.
        public var status: Int32
        /// Whether it ended by a signal rather than exiting.
        public var signalled: Bool

        public init(status: Int32, signalled: Bool) {
            self.status = status
            self.signalled = signalled
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    private struct State {
        var termination: Termination?
        var ended: ContinuousClock.Instant?
        var waiters: [CheckedContinuation<Termination, Never>] = []
    }

    public let pid: Int32
    private let state = Mutex(State())

    /// Starts `executable` (a path, or a name looked up in `PATH`) with `arguments` in `directory`;
    /// `environment` replaces the test process's when given.
    public init(
        _ executable: String, _ arguments: [String] = [], in directory: String? = nil, environment: [String: String]? = nil,
        standardOutput: Output = .discard, standardError: Output = .discard
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        Self.redirect(&actions, 1, standardOutput)
        Self.redirect(&actions, 2, standardError)
        _ = spawnCloseFrom(&actions, 3)
        if let directory { _ = spawnChangeDirectory(&actions, directory) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var pid: pid_t = 0
        func spawn(_ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
            executable.contains("/") ? posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
                : posix_spawnp(&pid, executable, &actions, &attributes, argv, envp)
        }
        var result = envp.map { spawn($0) } ?? spawn(environ)
        // An executable a test just wrote (a copy of haul under another name) is "busy" while any
        // process started meanwhile by another test still holds it open between fork and exec.
        var tries = 0
        while result == ETXTBSY, tries < 100 {
            tries += 1
            usleep(10_000)
            result = envp.map { spawn($0) } ?? spawn(environ)
        }
        guard result == 0 else {
            throw Failure(description: "cannot run \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
        // The reaper holds the object until the child ends; `wait` and `isRunning` read what it saw.
        Thread.detachNewThread { self.reap() }
    }

    /// Runs `executable` to its end; how it ended.
    @discardableResult
    public static func run(
        _ executable: String, _ arguments: [String] = [], in directory: String? = nil, environment: [String: String]? = nil,
        standardOutput: Output = .discard, standardError: Output = .discard
    ) async throws -> Termination {
        try await ChildProcess(executable, arguments, in: directory, environment: environment, standardOutput: standardOutput, standardError: standardError).wait()
    }

    /// Runs `executable` to its end; its exit status and what it printed on standard output (and,
    /// with `mergingErrors`, standard error).
    public static func output(
        _ executable: String, _ arguments: [String] = [], in directory: String? = nil, environment: [String: String]? = nil,
        mergingErrors: Bool = false
    ) async throws -> (termination: Termination, output: String) {
        let scratch = try TemporaryDirectory("haul-output")
        let file = scratch.path("out")
        let termination = try await run(
            executable, arguments, in: directory, environment: environment, standardOutput: .file(file),
            standardError: mergingErrors ? .standardOutput : .discard
        )
        return (termination, (try? String(contentsOfFile: file, encoding: .utf8)) ?? "")
    }

    /// How it ended; nil while it runs.
    public var termination: Termination? {
        state.withLock { $0.termination }
    }

    public var isRunning: Bool {
        termination == nil
    }

    /// When its end was reaped, stamped by the reaping thread: the child's own timing, without
    /// the wait for a cooperative thread to run the waiting task (seconds on a loaded suite).
    public var ended: ContinuousClock.Instant? {
        state.withLock { $0.ended }
    }

    /// Sends `signal` while it runs (once it was reaped, its pid may be another process's).
    public func send(_ signal: Int32) {
        state.withLock { state in
            if state.termination == nil { kill(pid, signal) }
        }
    }

    /// Waits for its end, without holding a thread.
    @discardableResult
    public func wait() async -> Termination {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state -> Termination? in
                if let termination = state.termination { return termination }
                state.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    /// Waits at most `timeout` seconds for its end; then sends SIGTERM, and SIGKILL 5 seconds later
    /// if it still runs. How it ended, and whether it had to be stopped so.
    public func wait(timeout: Double) async -> (termination: Termination, timedOut: Bool) {
        let timer = Task<Bool, Never> {
            guard (try? await Task.sleep(for: .milliseconds(Int64(timeout * 1000)))) != nil else { return false }
            self.send(SIGTERM)
            if (try? await Task.sleep(for: .seconds(5))) != nil { self.send(SIGKILL) }
            return true
        }
        let termination = await wait()
        timer.cancel()
        return (termination, await timer.value)
    }

    private func reap() {
        var status: Int32 = 0
        var termination = Termination(status: -1, signalled: false)
        while true {
            if waitpid(pid, &status, 0) == pid {
                let signal = status & 0x7F
                termination = signal == 0 ? Termination(status: (status >> 8) & 0xFF, signalled: false) : Termination(status: signal, signalled: true)
                break
            }
            // ECHILD: reaped by someone else, which nothing here does; say so with -1.
            guard errno == EINTR else { break }
        }
        let ended = ContinuousClock.now
        let waiters = state.withLock { state in
            state.termination = termination
            state.ended = ended
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: termination) }
    }

    private static func redirect(_ actions: inout posix_spawn_file_actions_t, _ descriptor: Int32, _ output: Output) {
        switch output {
        case .discard: posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
        case .file(let path): posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        case .standardOutput: posix_spawn_file_actions_adddup2(&actions, 1, descriptor)
        }
    }
}

/// Runs blocking `work` (a `poll`, a `recv`, a CPU-bound loop) on a thread of its own and returns
/// its result: never on the cooperative pool.
public func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module does
/// not declare.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32

/// glibc's `posix_spawn_file_actions_addchdir_np` (2.29+), likewise undeclared.
@_silgen_name("posix_spawn_file_actions_addchdir_np")
private func spawnChangeDirectory(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ path: UnsafePointer<CChar>) -> Int32

/// Makes a self-signed certificate for 127.0.0.1 with the `openssl` command: `cert.pem` and
/// `key.pem` in `directory`; their paths. Throws when openssl fails.
public func makeSelfSignedCertificate(in directory: String) async throws -> (certificate: String, key: String) {
    let made = try await ChildProcess.run("/usr/bin/openssl", [
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "2",
        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
    ], in: directory)
    guard made.status == 0 else { throw ChildProcess.Failure(description: "openssl could not make a certificate (exit \(made.status))") }
    return (directory + "/cert.pem", directory + "/key.pem")
}
