import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing
import TestSupport

/// A loopback server, a session and a temporary directory for one test, torn down afterwards.
struct Harness {
    let server: LoopbackServer
    let session: DownloadSession
    let scratch: TemporaryDirectory
    var directory: String { scratch.path }

    /// Fast retries and stall detection, so fault tests take seconds.
    static func testConfiguration() -> DownloadSession.Configuration {
        var configuration = DownloadSession.Configuration()
        configuration.backoff = Backoff(initial: 0.05, cap: 0.4)
        configuration.stallTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(2)
        configuration.progressInterval = .milliseconds(20)
        // Every test's part files are marked (one queue of tests), so marking is on their path.
        configuration.queueID = "test-queue"
        return configuration
    }

    static func with(
        _ adjust: (inout DownloadSession.Configuration) -> Void = { _ in },
        _ body: (Harness) async throws -> Void
    ) async throws {
        var configuration = testConfiguration()
        adjust(&configuration)
        let server = try await LoopbackServer.start()
        let harness = Harness(server: server, session: DownloadSession(configuration: configuration), scratch: try TemporaryDirectory("haul-test"))
        try await withTeardown({ try await body(harness) }, teardown: harness.close)
    }

    private func close() async {
        await session.shutdown()
        await server.shutdown()
        // The directory goes with `scratch`, once the session no longer writes there.
        withExtendedLifetime(scratch) {}
    }

    func path(_ name: String) -> String {
        directory + "/" + name
    }

    /// Polls the session until `predicate` holds for download `id`, failing after `timeout` seconds.
    @discardableResult
    func wait(
        _ id: DownloadID, timeout: Double = 20, sourceLocation: SourceLocation = #_sourceLocation,
        until predicate: (Download) -> Bool
    ) async throws -> Download {
        try await waitFor(session, id, timeout: timeout, sourceLocation: sourceLocation, until: predicate)
    }

    /// Waits until `id` is completed (failing fast if it fails or is cancelled).
    @discardableResult
    func waitCompleted(_ id: DownloadID, timeout: Double = 20, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Download {
        let download = try await wait(id, timeout: timeout, sourceLocation: sourceLocation) { $0.state.isFinished }
        #expect(download.state == .completed, "ended \(download.state)", sourceLocation: sourceLocation)
        return download
    }

    /// Requests for `path` that carried a body (GETs, not redirects or errors without one).
    func gets(_ path: String) -> [RequestRecord] {
        server.requests(path).filter { $0.method == "GET" }
    }
}

enum HarnessError: Error {
    case timeout
}

/// Polls `session` until `predicate` holds for download `id`; records an issue with what the
/// download was and throws after `timeout` seconds.
@discardableResult
func waitFor(
    _ session: DownloadSession, _ id: DownloadID, timeout: Double = 20, sourceLocation: SourceLocation = #_sourceLocation,
    until predicate: (Download) -> Bool
) async throws -> Download {
    try await waitFor(id, in: { await session.snapshot() }, timeout: timeout, sourceLocation: sourceLocation, until: predicate)
}

/// Faults that make the first response stop after exactly `bytes` body bytes and hold the connection
/// open: a deterministic point to pause at, however loaded the machine is.
func stalled(at bytes: Int, _ adjust: (inout Faults) -> Void = { _ in }) -> Faults {
    var faults = Faults()
    faults.stallAfterBytes = bytes
    adjust(&faults)
    return faults
}

func throttled(_ bytesPerSecond: Int, _ adjust: (inout Faults) -> Void = { _ in }) -> Faults {
    var faults = Faults()
    faults.throttleBytesPerSecond = bytesPerSecond
    adjust(&faults)
    return faults
}
