import Crypto
import Foundation
import LoopbackServer
import Testing

/// The real `haul` binary in a subprocess, as a person or a script runs it.
final class HaulProcess: @unchecked Sendable {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        /// Whether it ended by a signal rather than exiting.
        var signalled: Bool
    }

    /// The `haul` built next to this test bundle.
    static var binary: URL {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let beside = bundleDirectory.appendingPathComponent("haul")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        // Fallback: the package's default build folder.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/haul")
    }

    let process = Process()
    let arguments: [String]
    private let out: String
    private let err: String

    /// Starts `haul ARGS` in `directory` with its queue in `state`; `shell` runs it through
    /// `/bin/sh -c` with that prefix (`ulimit -f 2048;`).
    ///
    /// The environment is the test's, isolated from the machine: no proxies, no `HAUL_CONFIG`, and a
    /// config home under `directory` (empty unless a test writes there); `environment` goes on top.
    init(_ arguments: [String], in directory: String, state: String, shell prefix: String? = nil, environment extra: [String: String] = [:]) throws {
        self.arguments = arguments
        if let prefix {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            let quoted = ([Self.binary.path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
            process.arguments = ["-c", prefix + " exec " + quoted.joined(separator: " ")]
        } else {
            process.executableURL = Self.binary
            process.arguments = arguments
        }
        var environment = ProcessInfo.processInfo.environment
        for name in ["HAUL_CONFIG", "http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            environment[name] = nil
        }
        environment["XDG_CONFIG_HOME"] = directory + "/.config"
        environment["HAUL_STATE_DIR"] = state
        environment.merge(extra) { _, new in new }
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        out = directory + "/.stdout-\(UUID().uuidString)"
        err = directory + "/.stderr-\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// Runs another program to its end (polling, as `wait`); its exit status.
    static func tool(_ path: String, _ arguments: [String], in directory: String) async throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        while process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
        return process.terminationStatus
    }

    /// What it printed so far.
    var stdoutSoFar: String {
        (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
    }

    func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits (without blocking a thread) for the process to end; kills it and records an issue after `timeout` seconds.
    func wait(timeout: Double = 60) async throws -> Run {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                Issue.record("haul \(arguments) did not finish in \(timeout) s")
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        process.waitUntilExit()
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: err)
        }
        return Run(
            status: process.terminationStatus,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "",
            signalled: process.terminationReason == .uncaughtSignal
        )
    }
}

/// Shared set-up of the command-line tests: a loopback server and a scratch directory.
enum CLI {
    static func withServer(_ body: (LoopbackServer, String) async throws -> Void) async throws {
        let server = try await LoopbackServer.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("haul-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        do {
            try await body(server, directory)
        } catch {
            stopRunners(in: directory)
            await server.shutdown()
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        stopRunners(in: directory)
        await server.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Kills every haul that still runs a queue under `directory` (a runner outlives its
    /// terminal, and a test that failed half-way may not have stopped it).
    static func stopRunners(in directory: String) {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return }
        for case let relative as String in walker where relative == "lock" || relative.hasSuffix("/lock") {
            guard let text = try? String(contentsOfFile: directory + "/" + relative, encoding: .utf8),
                  let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 1,
                  let command = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8),
                  command.contains("haul") else { continue }
            kill(pid, SIGKILL)
        }
    }

    static func sha256(_ path: String) -> String {
        guard let data = FileManager.default.contents(atPath: path) else { return "" }
        return LoopbackContent.hex(SHA256.hash(data: data))
    }

    /// Files in `directory`, without the captured output and the state directory.
    static func files(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// The length of the file at `path`, nil when there is none.
    static func length(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    /// Polls `condition` every 5 ms; records an issue and returns false after `timeout` seconds.
    @discardableResult
    static func waitUntil(timeout: Double = 20, _ what: String, _ condition: () -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard Date() < deadline else {
                Issue.record("timed out waiting for \(what)")
                return false
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// `haul list --json` on `state`, parsed.
    static func list(state: String, in directory: String) async throws -> [[String: Any]] {
        let run = try await HaulProcess(["list", "--json"], in: directory, state: state).wait()
        #expect(run.status == 0, "haul list: \(run.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: Any]])
    }
}
