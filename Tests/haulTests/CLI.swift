import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Shared set-up of the command-line tests: a loopback server, a scratch directory, and the real
/// binary run in it.
enum CLI {
    static func withServer(_ body: (LoopbackServer, String) async throws -> Void) async throws {
        let server = try await LoopbackServer.start()
        let scratch = try TemporaryDirectory("haul-cli")
        try await withTeardown({ try await body(server, scratch.path) }) {
            stopRunners(in: scratch.path)
            await server.shutdown()
        }
        // The directory goes with `scratch`, once no haul runs there.
        withExtendedLifetime(scratch) {}
    }

    /// Runs `haul ARGS` to its end in `directory`, with its queue in `state` (`directory/.state`
    /// unless given).
    static func haul(
        _ arguments: [String], in directory: String, state: String? = nil, environment: [String: String] = [:], timeout: Double = 60,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> HaulProcess.Run {
        try await HaulProcess(arguments, in: directory, state: state ?? directory + "/.state", environment: environment)
            .wait(timeout: timeout, sourceLocation: sourceLocation)
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

    /// Files in `directory`, without the captured output and the state directory.
    static func files(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// `haul list --json` on `state`, parsed.
    static func list(state: String, in directory: String) async throws -> [[String: Any]] {
        let run = try await HaulProcess(["list", "--json"], in: directory, state: state).wait()
        #expect(run.status == 0, "haul list: \(run.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: Any]])
    }
}
