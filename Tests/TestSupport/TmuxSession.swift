import Foundation
import Synchronization
import Testing

/// A private tmux server running one command in a pane of a given size, read and typed into as a
/// person would: `capture-pane` for the screen, `send-keys` for the keys.
///
/// Every tmux command is a `ChildProcess`, awaited without holding a thread of the pool.
public final class TmuxSession: Sendable {
    public let socket = "haul-test-\(UUID().uuidString.prefix(8))"
    /// The tmux server's pid.
    private let server: Int32
    /// The pid of the pane's shell.
    public let panePID: Int32
    private let closed = Mutex(false)

    /// Starts `command` (a shell command line) in a `width`×`height` pane; when it ends, the pane
    /// shows `[exited N]` and stays.
    public init(_ command: String, width: Int = 100, height: Int = 30) async throws {
        let line = "\(command); echo \"[exited $?]\"; sleep 600"
        let started = await Self.tmux(socket, ["-f", "/dev/null", "new-session", "-d", "-x", "\(width)", "-y", "\(height)", line], capture: false)
        guard started.status == 0 else {
            throw TmuxFailure(message: "tmux new-session failed with status \(started.status)")
        }
        // Both pids now, so that `close` needs no tmux command of its own and can run in a `defer`.
        let pids = await Self.tmux(socket, ["display-message", "-p", "#{pid} #{pane_pid}"]).output.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
        guard pids.count == 2 else {
            _ = await Self.tmux(socket, ["kill-server"])
            throw TmuxFailure(message: "tmux did not say its pids")
        }
        server = pids[0]
        panePID = pids[1]
    }

    public struct TmuxFailure: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// The command line that runs `haul ARGS` with its queue in `state`, in `directory`, in a UTF-8
    /// locale; `environment` adds variables (`NO_COLOR=1`).
    public static func haulCommand(_ arguments: [String], state: String, in directory: String, environment: [String: String] = [:]) -> String {
        let quoted = ([HaulProcess.binary.path] + arguments).map(quote).joined(separator: " ")
        let variables = (["HAUL_STATE_DIR": state, "LC_ALL": "C.UTF-8", "TERM": "tmux-256color"].merging(environment) { $1 })
            .sorted { $0.key < $1.key }
            .map { "\($0.key)=\(quote($0.value))" }
            .joined(separator: " ")
        // The test runner's own NO_COLOR (if any) must not decide what the colour test sees.
        return "cd \(quote(directory)) && env -u NO_COLOR \(variables) \(quoted)"
    }

    public static func quote(_ text: String) -> String {
        shellQuoted(text)
    }

    /// The screen's text, one string per row.
    public func screen(colors: Bool = false) async -> [String] {
        await tmux(["capture-pane", "-p"] + (colors ? ["-e"] : [])).output.components(separatedBy: "\n")
    }

    public var text: String {
        get async { await screen().joined(separator: "\n") }
    }

    /// Keys by tmux name (`Enter`, `Space`, `C-u`, `j`).
    public func keys(_ names: String...) async {
        await tmux(["send-keys"] + names)
    }

    /// Text typed literally.
    public func type(_ text: String) async {
        await tmux(["send-keys", "-l", text])
    }

    /// The pane's title: what an OSC 0 sequence that reached the terminal would have set.
    public var title: String {
        get async { await tmux(["display-message", "-p", "#{pane_title}"]).output.trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    public func resize(width: Int, height: Int) async {
        await tmux(["resize-window", "-x", "\(width)", "-y", "\(height)"])
    }

    /// Polls the screen every 50 ms until `condition` holds; records an issue with the screen and
    /// returns false after `timeout` seconds.
    @discardableResult
    public func waitFor(
        _ what: String, timeout: Double = 20, sourceLocation: SourceLocation = #_sourceLocation, _ condition: ([String]) async -> Bool
    ) async throws -> Bool {
        var rows: [String] = []
        let held = try await poll(timeout: timeout, every: .milliseconds(50)) { () async -> Bool? in
            rows = await screen()
            return await condition(rows) ? true : nil
        }
        guard held == nil else { return true }
        Issue.record("timed out waiting for \(what); the screen:\n\(rows.joined(separator: "\n"))", sourceLocation: sourceLocation)
        return false
    }

    /// The row that names `name` (the first), if the screen shows one.
    public func row(_ name: String) async -> String? {
        Self.row(name, in: await screen())
    }

    /// The row of `rows` (a screen) that names `name` (the first), if there is one.
    public static func row(_ name: String, in rows: [String]) -> String? {
        rows.first { $0.hasPrefix(name) }
    }

    /// Ends the session and everything it started: a hang-up no longer ends a haul that runs
    /// the queue (it detaches), so its processes are killed too.
    ///
    /// Signals only, nothing waited for: it runs in a `defer` and never holds a thread.
    public func close() {
        guard !closed.withLock({ closed in defer { closed = true }; return closed }) else { return }
        let started = Self.descendants(of: panePID)
        // SIGTERM is tmux's kill-server; checked first to be tmux still (a hang-up ended it already).
        if let command = try? String(contentsOfFile: "/proc/\(server)/cmdline", encoding: .utf8), command.hasPrefix("tmux") {
            kill(server, SIGTERM)
        }
        for pid in started { kill(pid, SIGKILL) }
    }

    /// Runs a tmux command on this session's server (`set-option`, `show-buffer`); its output.
    @discardableResult
    public func command(_ arguments: String...) async -> String {
        await tmux(arguments).output
    }

    /// Kills the tmux server only, as a dropped SSH connection ends a terminal: a hang-up.
    public func hangUp() async {
        await tmux(["kill-server"])
    }

    /// Every process below `pid`, from /proc.
    public static func descendants(of pid: Int32) -> [Int32] {
        var children: [Int32: [Int32]] = [:]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = Int32(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, let parent = Int32(fields[1]) { children[parent, default: []].append(child) }
        }
        var found: [Int32] = []
        var next = [pid]
        while let current = next.popLast() {
            for child in children[current] ?? [] {
                found.append(child)
                next.append(child)
            }
        }
        return found
    }

    deinit {
        close()
    }

    @discardableResult
    private func tmux(_ arguments: [String], capture: Bool = true) async -> (status: Int32, output: String) {
        await Self.tmux(socket, arguments, capture: capture)
    }

    /// Runs `tmux -u -L SOCKET ARGS` to its end; its output when `capture`.
    ///
    /// The server that `new-session` starts keeps what the client inherited: its output goes to a
    /// file (or nowhere), never a pipe, and `ChildProcess` passes it no other descriptor.
    @discardableResult
    private static func tmux(_ socket: String, _ arguments: [String], capture: Bool = true) async -> (status: Int32, output: String) {
        let all = ["-u", "-L", socket] + arguments
        do {
            guard capture else {
                let termination = try await ChildProcess.run("tmux", all)
                return (termination.signalled ? -1 : termination.status, "")
            }
            let (termination, output) = try await ChildProcess.output("tmux", all, mergingErrors: true)
            return (termination.signalled ? -1 : termination.status, output)
        } catch {
            return (-1, "cannot run tmux: \(error)")
        }
    }
}
