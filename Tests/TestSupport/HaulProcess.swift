import Foundation
import Testing

/// The real `haul` binary in a subprocess, as a person or a script runs it.
public final class HaulProcess: Sendable {
    public struct Run: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        /// Whether it ended by a signal rather than exiting.
        public var signalled: Bool
    }

    /// The `haul` built next to the test bundle.
    public static var binary: URL {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let beside = bundleDirectory.appendingPathComponent("haul")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        // Fallback: the package's default build folder.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/haul")
    }

    public let arguments: [String]
    private let child: ChildProcess
    private let out: String
    private let err: String

    /// Starts `haul ARGS` in `directory` with its queue in `state`; `shell` runs it through
    /// `/bin/sh -c` with that prefix (`ulimit -f 2048;`).
    ///
    /// The environment is the test's, isolated from the machine: no proxies, no `HAUL_CONFIG`, and a
    /// config home under `directory` (empty unless a test writes there); `environment` goes on top.
    /// Its output goes to files in `directory` (read at the end, removed then).
    public init(_ arguments: [String], in directory: String, state: String, shell prefix: String? = nil, environment extra: [String: String] = [:]) throws {
        self.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        for name in ["HAUL_CONFIG", "http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            environment[name] = nil
        }
        environment["XDG_CONFIG_HOME"] = directory + "/.config"
        environment["HAUL_STATE_DIR"] = state
        environment.merge(extra) { _, new in new }
        out = directory + "/.stdout-\(UUID().uuidString)"
        err = directory + "/.stderr-\(UUID().uuidString)"
        let executable: String
        let argv: [String]
        if let prefix {
            executable = "/bin/sh"
            argv = ["-c", prefix + " exec " + ([Self.binary.path] + arguments).map(shellQuoted).joined(separator: " ")]
        } else {
            executable = Self.binary.path
            argv = arguments
        }
        child = try ChildProcess(executable, argv, in: directory, environment: environment, standardOutput: .file(out), standardError: .file(err))
    }

    public var pid: Int32 { child.pid }

    /// Whether it still runs (until its end was reaped).
    public var isRunning: Bool { child.isRunning }

    /// When its end was reaped (see `ChildProcess.ended`); nil while it runs.
    public var ended: ContinuousClock.Instant? { child.ended }

    /// What it printed so far.
    public var stdoutSoFar: String {
        (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
    }

    public func send(_ signal: Int32) {
        child.send(signal)
    }

    /// Waits (without blocking a thread) for the process to end; stops it and records an issue
    /// after `timeout` seconds.
    public func wait(timeout: Double = 60, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Run {
        let (termination, timedOut) = await child.wait(timeout: timeout)
        if timedOut { Issue.record("haul \(arguments) did not finish in \(timeout) s", sourceLocation: sourceLocation) }
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: err)
        }
        return Run(
            status: termination.status,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "",
            signalled: termination.signalled
        )
    }
}

/// `text` quoted for `/bin/sh`.
public func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
