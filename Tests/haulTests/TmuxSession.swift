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

    func close() {
        _ = tmux(["kill-server"])
    }

    deinit {
        close()
    }

    /// Runs `tmux -u -L SOCKET ARGS` and waits for it; its output when `capture`.
    ///
    /// posix_spawn and waitpid rather than Foundation's Process: `waitUntilExit` on a test's
    /// thread never saw the tmux client end here.
    @discardableResult
    private func tmux(_ arguments: [String], capture: Bool = true) -> (status: Int32, output: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tmux-\(UUID().uuidString).out").path
        defer { unlink(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // The server new-session starts keeps what it inherits: never a pipe we would wait on.
        posix_spawn_file_actions_addopen(&actions, 1, capture ? output : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = (["tmux", "-u", "-L", socket] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        guard posix_spawnp(&pid, "tmux", &actions, nil, argv, environ) == 0 else { return (-1, "cannot run tmux") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let text = capture ? ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "") : ""
        let exited = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : -1
        return (exited, text)
    }
}
