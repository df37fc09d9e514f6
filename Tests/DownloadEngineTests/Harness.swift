import Crypto
import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing

/// A loopback server, a session and a temporary directory for one test, torn down afterwards.
struct Harness {
    let server: LoopbackServer
    let session: DownloadSession
    let directory: String

    /// Fast retries and stall detection, so fault tests take seconds.
    static func testConfiguration() -> DownloadSession.Configuration {
        var configuration = DownloadSession.Configuration()
        configuration.backoff = Backoff(initial: 0.05, cap: 0.4)
        configuration.stallTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(2)
        configuration.progressInterval = .milliseconds(20)
        return configuration
    }

    static func with(
        _ adjust: (inout DownloadSession.Configuration) -> Void = { _ in },
        _ body: (Harness) async throws -> Void
    ) async throws {
        var configuration = testConfiguration()
        adjust(&configuration)
        let server = try await LoopbackServer.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("haul-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let harness = Harness(server: server, session: DownloadSession(configuration: configuration), directory: directory)
        do {
            try await body(harness)
        } catch {
            await harness.close()
            throw error
        }
        await harness.close()
    }

    private func close() async {
        await session.shutdown()
        await server.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
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
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let snapshot = await session.snapshot()
            if let download = snapshot[id], predicate(download) { return download }
            if Date() > deadline {
                Issue.record("timed out; download is \(String(describing: snapshot[id]))", sourceLocation: sourceLocation)
                throw HarnessError.timeout
            }
            try await Task.sleep(for: .milliseconds(10))
        }
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

/// SHA-256 of a file in hex, or "" when it cannot be read.
func sha256(ofFile path: String) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "" }
    return LoopbackContent.hex(SHA256.hash(data: data))
}

func fileSize(_ path: String) -> Int64? {
    (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
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
