import DownloadCore
import Foundation
import Testing

/// Tries `probe` until it gives a value, sleeping `interval` between tries; nil after `timeout` seconds.
///
/// The sleep is `Task.sleep`: no thread is held while it waits, so on a machine of two cores (a
/// cooperative pool of about two threads) every other test's tasks go on meanwhile. The probe is
/// tried once more at the deadline, so a condition that came true while sleeping is never missed.
public func poll<T>(
    timeout: Double, every interval: Duration = .milliseconds(10), _ probe: () async throws -> T?
) async throws -> T? {
    let deadline = ContinuousClock.now + .milliseconds(Int64(timeout * 1000))
    while true {
        if let value = try await probe() { return value }
        guard ContinuousClock.now < deadline else { return nil }
        try await Task.sleep(for: interval)
    }
}

/// Waits until `condition` holds; records an issue (`timed out waiting for WHAT`) and returns false
/// after `timeout` seconds.
@discardableResult
public func eventually(
    timeout: Double = 20, _ what: String, every interval: Duration = .milliseconds(5),
    sourceLocation: SourceLocation = #_sourceLocation, _ condition: () async throws -> Bool
) async throws -> Bool {
    let held = try await poll(timeout: timeout, every: interval) { try await condition() ? true : nil }
    guard held == nil else { return true }
    Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
    return false
}

/// Waits until `condition` holds; records an issue (`timed out waiting for WHAT`) and throws
/// `TimedOut` after `timeout` seconds: for a test that cannot go on without it.
public func waitUntil(
    timeout: Double = 20, _ what: String, every interval: Duration = .milliseconds(5),
    sourceLocation: SourceLocation = #_sourceLocation, _ condition: () async throws -> Bool
) async throws {
    guard try await eventually(timeout: timeout, what, every: interval, sourceLocation: sourceLocation, condition) else {
        throw TimedOut(what: what)
    }
}

/// A wait that ran out of time (already recorded as an issue).
public struct TimedOut: Error, CustomStringConvertible {
    public var what: String
    public var description: String { "timed out waiting for \(what)" }
}

/// Polls `snapshot` until `predicate` holds for download `id`; records an issue with what the
/// download was and throws `TimedOut` after `timeout` seconds.
@discardableResult
public func waitFor(
    _ id: DownloadID, in snapshot: () async throws -> SessionSnapshot, timeout: Double = 20, every interval: Duration = .milliseconds(10),
    sourceLocation: SourceLocation = #_sourceLocation, until predicate: (Download) -> Bool
) async throws -> Download {
    var last: Download?
    let found = try await poll(timeout: timeout, every: interval) { () async throws -> Download? in
        last = try await snapshot()[id]
        return last.flatMap { predicate($0) ? $0 : nil }
    }
    guard let found else {
        Issue.record("timed out; download is \(String(describing: last))", sourceLocation: sourceLocation)
        throw TimedOut(what: "download \(id)")
    }
    return found
}

/// Runs `body`, then `teardown` whether `body` returned or threw.
public func withTeardown<T>(_ body: () async throws -> T, teardown: () async -> Void) async throws -> T {
    let result: T
    do {
        result = try await body()
    } catch {
        await teardown()
        throw error
    }
    await teardown()
    return result
}
