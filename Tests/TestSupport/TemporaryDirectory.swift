import Foundation

/// A new directory under the system's temporary directory, removed with everything in it when the
/// last reference goes: a suite keeps one in a stored property, so each test's goes with the test.
public final class TemporaryDirectory: Sendable {
    public let path: String

    /// Creates `/tmp/PREFIX-UUID`.
    public init(_ prefix: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// `name` inside the directory.
    public func path(_ name: String) -> String {
        path + "/" + name
    }

    deinit {
        Self.remove(path)
    }

    /// Removes `path` and everything below it, whatever a test left there: a directory made
    /// read-only or unsearchable is opened up first (tests do that to provoke write failures).
    public static func remove(_ path: String) {
        if (try? FileManager.default.removeItem(atPath: path)) != nil { return }
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        openUp(path, device: info.st_dev)
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Makes every directory below `path` writable, and detaches a file system a test mounted there
    /// and left mounted (one on another device than the directory's own).
    private static func openUp(_ path: String, device: dev_t) {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return }
        if info.st_dev != device, unmount(path) { return }
        chmod(path, 0o700)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            openUp(path + "/" + name, device: device)
        }
    }
}

/// Runs `body` with a new temporary directory (`/tmp/PREFIX-UUID`) and removes it afterwards, when
/// `body` throws too.
public func withTemporaryDirectory<T>(_ prefix: String, _ body: (String) async throws -> T) async throws -> T {
    let directory = try TemporaryDirectory(prefix)
    // The directory goes when its object does: kept alive until `body` has ended.
    defer { withExtendedLifetime(directory) {} }
    return try await body(directory.path)
}
