#if os(Linux)
import DownloadCore
import Foundation
import Glibc
import Synchronization

/// Plain-http connections a whole response left open, kept for the next request to the same host
/// and port (HTTP/1.1 keep-alive), as curl and AsyncHTTPClient keep theirs.
///
/// A connection a request opened and closed cost a thousand small files about a fifth of curl's
/// own time (`curl -Z` with `Connection: close`: 0.56 s of CPU against 0.36). A connection is kept
/// only after a body that ended exactly at its `Content-Length` on HTTP/1.1 without
/// `Connection: close` (`DirectStream`), and taken only while it is quiet: a server that closed it,
/// or sent a stray byte, gets it closed instead. One closed meanwhile is met by the request: the
/// stream then sends it once more on a new connection.
final class IdleConnections: Sendable {
    static let shared = IdleConnections()

    /// Connections kept per host and port, and in all; more are closed (the oldest first, past
    /// `total`: a list of a thousand hosts must not keep a thousand descriptors).
    static let perHost = 32
    static let total = 64
    /// How long a connection is kept unused (servers close theirs after 5 s, Apache, to 75 s, nginx).
    static let idleTime = Duration.seconds(20)

    private struct Idle: Sendable {
        var socket: Int32
        var since: ContinuousClock.Instant
    }

    private let idle = Mutex<[String: [Idle]]>([:])

    /// What connections are kept by: the URL's host and port as it writes them, in lower case.
    static func key(_ url: URL) -> String {
        RequestTarget.authority(url).lowercased()
    }

    /// The connection to `key` kept last that is still quiet; those that are not go, and so does
    /// every connection kept longer than `idleTime`.
    func take(_ key: String) -> Int32? {
        var closing: [Int32] = []
        let found = idle.withLock { idle -> Int32? in
            Self.dropExpired(&idle, closing: &closing)
            var list = idle[key] ?? []
            defer { idle[key] = list.isEmpty ? nil : list }
            while let last = list.popLast() {
                if Self.isQuiet(last.socket) { return last.socket }
                closing.append(last.socket)
            }
            return nil
        }
        for socket in closing { close(socket) }
        return found
    }

    /// Keeps `socket` for the next request to `key`; closes it when `key` has `perHost` already,
    /// the oldest kept past `total`, and every connection kept longer than `idleTime`.
    func put(_ key: String, _ socket: Int32) {
        var closing: [Int32] = []
        idle.withLock { idle in
            Self.dropExpired(&idle, closing: &closing)
            var list = idle[key] ?? []
            guard list.count < Self.perHost else {
                closing.append(socket)
                return
            }
            list.append(Idle(socket: socket, since: .now))
            idle[key] = list
            var count = idle.values.reduce(0) { $0 + $1.count }
            while count > Self.total, let (oldestKey, _) = idle.min(by: { $0.value[0].since < $1.value[0].since }) {
                // Each list is oldest first: its first is its host's oldest.
                closing.append(idle[oldestKey]?.removeFirst().socket ?? -1)
                if idle[oldestKey]?.isEmpty == true { idle[oldestKey] = nil }
                count -= 1
            }
        }
        for socket in closing where socket >= 0 { close(socket) }
    }

    /// Takes out every connection kept longer than `idleTime`, for the caller to close.
    private static func dropExpired(_ idle: inout [String: [Idle]], closing: inout [Int32]) {
        let now = ContinuousClock.now
        for (key, list) in idle where list.contains(where: { $0.since.duration(to: now) >= idleTime }) {
            closing += list.filter { $0.since.duration(to: now) >= idleTime }.map(\.socket)
            let kept = list.filter { $0.since.duration(to: now) < idleTime }
            idle[key] = kept.isEmpty ? nil : kept
        }
    }

    /// How many connections to `key` are kept.
    func count(_ key: String) -> Int {
        idle.withLock { $0[key]?.count ?? 0 }
    }

    /// Nothing to read and not closed by the other end (a close reads as ready, a reset as an error).
    private static func isQuiet(_ socket: Int32) -> Bool {
        var entry = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }
}
#endif
