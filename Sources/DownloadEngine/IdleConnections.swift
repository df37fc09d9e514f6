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

    /// Connections kept per host and port; more are closed.
    static let perHost = 32
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

    /// The connection to `key` kept last that is still quiet; those that are not go.
    func take(_ key: String) -> Int32? {
        var closing: [Int32] = []
        let found = idle.withLock { idle -> Int32? in
            var list = idle[key] ?? []
            defer { idle[key] = list.isEmpty ? nil : list }
            let now = ContinuousClock.now
            while let last = list.popLast() {
                if last.since.duration(to: now) < Self.idleTime, Self.isQuiet(last.socket) { return last.socket }
                closing.append(last.socket)
            }
            return nil
        }
        for socket in closing { close(socket) }
        return found
    }

    /// Keeps `socket` for the next request to `key`; closes it when `key` has `perHost` already,
    /// and closes every connection kept longer than `idleTime`.
    func put(_ key: String, _ socket: Int32) {
        var closing: [Int32] = []
        idle.withLock { idle in
            let now = ContinuousClock.now
            for (other, list) in idle {
                let kept = list.filter { $0.since.duration(to: now) < Self.idleTime }
                guard kept.count < list.count else { continue }
                closing += list.filter { $0.since.duration(to: now) >= Self.idleTime }.map(\.socket)
                idle[other] = kept.isEmpty ? nil : kept
            }
            var list = idle[key] ?? []
            guard list.count < Self.perHost else {
                closing.append(socket)
                return
            }
            list.append(Idle(socket: socket, since: now))
            idle[key] = list
        }
        for socket in closing { close(socket) }
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
