import Foundation
import Testing

/// A private tmux server running one command in a pane of a given size, read and typed into as a
/// person would: `capture-pane` for the screen, `send-keys` for the keys.
final class TmuxSession: @unchecked Sendable {
    let socket = "haul-test-\(UUID().uuidString.prefix(8))"

    /// Starts `command` (a shell command line) in a `width`×`height` pane; when it ends, the pane
    /// shows `[exited N]` and stays.
    init(_ command: String, width: Int = 100, height: Int = 30) throws {
        let line = "\(command); echo \"[exited $?]\"; sleep 600"
        // The server this starts keeps its inherited stdout: no pipe here, or reading it never ends.
        let started = tmux(["-f", "/dev/null", "new-session", "-d", "-x", "\(width)", "-y", "\(height)", line], capture: false)
        guard started.status == 0 else {
            throw TmuxFailure(message: "tmux new-session failed with status \(started.status)")
        }
    }

    struct TmuxFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// The command line that runs `haul ARGS` with its queue in `state`, in `directory`, in a UTF-8
    /// locale; `environment` adds variables (`NO_COLOR=1`).
    static func haulCommand(_ arguments: [String], state: String, in directory: String, environment: [String: String] = [:]) -> String {
        let quoted = ([HaulProcess.binary.path] + arguments).map(quote).joined(separator: " ")
        let variables = (["HAUL_STATE_DIR": state, "LC_ALL": "C.UTF-8", "TERM": "tmux-256color"].merging(environment) { $1 })
            .sorted { $0.key < $1.key }
            .map { "\($0.key)=\(quote($0.value))" }
            .joined(separator: " ")
        // The test runner's own NO_COLOR (if any) must not decide what the colour test sees.
        return "cd \(quote(directory)) && env -u NO_COLOR \(variables) \(quoted)"
    }

    static func quote(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// The screen's text, one string per row.
    func screen(colors: Bool = false) -> [String] {
        tmux(["capture-pane", "-p"] + (colors ? ["-e"] : [])).output.components(separatedBy: "\n")
    }

    var text: String { screen().joined(separator: "\n") }

    /// Keys by tmux name (`Enter`, `Space`, `C-u`, `j`).
    func keys(_ names: String...) {
        _ = tmux(["send-keys"] + names)
    }

    /// Text typed literally.
    func type(_ text: String) {
        _ = tmux(["send-keys", "-l", text])
    }

    /// The pane's title: what an OSC 0 sequence that reached the terminal would have set.
    var title: String {
        tmux(["display-message", "-p", "#{pane_title}"]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func resize(width: Int, height: Int) {
        _ = tmux(["resize-window", "-x", "\(width)", "-y", "\(height)"])
    }

    /// The pid of the pane's shell.
    var panePID: Int32? {
        Int32(tmux(["list-panes", "-F", "#{pane_pid}"]).output.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Polls the screen every 50 ms until `condition` holds; records an issue with the screen and
    /// returns false after `timeout` seconds.
    @discardableResult
    func waitFor(_ what: String, timeout: Double = 20, sourceLocation: SourceLocation = #_sourceLocation, _ condition: ([String]) -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let rows = screen()
            if condition(rows) { return true }
            guard Date() < deadline else {
                Issue.record("timed out waiting for \(what); the screen:\n\(rows.joined(separator: "\n"))", sourceLocation: sourceLocation)
                return false
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The row that names `name` (the first), if the screen shows one.
    func row(_ name: String) -> String? {
        screen().first { $0.hasPrefix(name) }
    }

    /// Ends the session and everything it started: a hang-up no longer ends a haul that runs
    /// the queue (it detaches), so its processes are killed too.
    func close() {
        let pane = tmux(["list-panes", "-F", "#{pane_pid}"]).output.split(separator: "\n").compactMap { Int32($0) }
        let started = pane.flatMap(Self.descendants)
        _ = tmux(["kill-server"])
        for pid in started { kill(pid, SIGKILL) }
    }

    /// Runs a tmux command on this session's server (`set-option`, `show-buffer`); its output.
    func command(_ arguments: String...) -> String {
        tmux(arguments).output
    }

    /// Kills the tmux server only, as a dropped SSH connection ends a terminal: a hang-up.
    func hangUp() {
        _ = tmux(["kill-server"])
    }

    /// Every process below `pid`, from /proc.
    static func descendants(of pid: Int32) -> [Int32] {
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

    /// Runs `tmux -u -L SOCKET ARGS` and waits for it; its output when `capture`.
    ///
    /// posix_spawn and waitpid, not Foundation's Process: its `waitUntilExit` sometimes never saw
    /// a tmux client end (a zombie nobody reaped) while other tests ran processes. Output goes
    /// through a file, never a pipe: the server `new-session` starts keeps what it inherits.
    @discardableResult
    private func tmux(_ arguments: [String], capture: Bool = true) -> (status: Int32, output: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tmux-\(UUID().uuidString).out").path
        defer { unlink(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, capture ? output : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process (loopback sockets, other tests' files) may leak into the
        // tmux server, which outlives the call: a socket it held would keep a connection open.
        _ = spawnCloseFrom(&actions, 3)
        let argv = (["tmux", "-u", "-L", socket] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // Default signal handling and no blocked signals: the server and its panes must die on the
        // SIGHUP and SIGTERM of kill-server, whatever the test process ignores or blocks.
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
        var pid: pid_t = 0
        guard posix_spawnp(&pid, "tmux", &actions, &attributes, argv, environ) == 0 else { return (-1, "cannot run tmux") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let text = capture ? ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "") : ""
        let exited = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : -1
        return (exited, text)
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module does
/// not declare.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func spawnCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
