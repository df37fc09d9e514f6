#if os(Linux)
@testable import DownloadEngine
import Foundation
import Glibc
import Testing

/// The kept plain-http connections, on socket pairs: a quiet one is handed out again, one whose
/// other end closed or sent a stray byte is closed instead, and a host keeps at most `perHost`.
@Suite struct IdleConnectionsTests {
    /// A connected pair: (ours, the server's end).
    static func pair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw POSIXError(.EMFILE) }
        return (fds[0], fds[1])
    }

    /// Whether our end of the pair is closed, as the server's end sees it: its read finds the end.
    /// (Not by our descriptor: tests running beside this one reuse its number at once.)
    ///
    /// Waits up to two seconds for it: a process that tests beside this one start at that moment
    /// holds a copy of every descriptor from its `clone` until it closes them before its `exec`,
    /// and our close ends the connection only then (once seen: three closes in a row not yet seen).
    static func closedAt(_ peer: Int32) -> Bool {
        var entry = pollfd(fd: peer, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 2000) > 0 else { return false }
        return !openAt(peer)
    }

    /// Whether our end of the pair is still open, now: the server's end reads nothing yet.
    static func openAt(_ peer: Int32) -> Bool {
        var byte: UInt8 = 0
        let result = recv(peer, &byte, 1, Int32(MSG_DONTWAIT))
        // Not the end, nor a reset (closed with our stray byte unread): "nothing yet".
        return result < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    @Test func aQuietConnectionIsHandedOutAgainNewestFirst() throws {
        let pool = IdleConnections()
        let (older, olderPeer) = try Self.pair()
        let (newer, newerPeer) = try Self.pair()
        defer { for fd in [olderPeer, newerPeer] { close(fd) } }
        pool.put("host:1", older)
        pool.put("host:1", newer)
        #expect(pool.count("host:1") == 2)
        #expect(pool.take("other:1") == nil, "kept by host and port")
        #expect(pool.take("host:1") == newer)
        #expect(pool.take("host:1") == older)
        #expect(pool.take("host:1") == nil)
        close(older)
        close(newer)
    }

    @Test func aConnectionClosedOrWrittenToMeanwhileIsClosedNotHandedOut() throws {
        let pool = IdleConnections()
        let (closed, closedPeer) = try Self.pair()
        let (stray, strayPeer) = try Self.pair()
        defer { close(strayPeer) }
        pool.put("host:2", closed)
        pool.put("host:2", stray)
        close(closedPeer)
        var byte: UInt8 = 0x41
        #expect(write(strayPeer, &byte, 1) == 1)
        #expect(pool.take("host:2") == nil)
        #expect(pool.count("host:2") == 0)
        #expect(Self.closedAt(strayPeer), "closed by the pool")
    }

    /// A thousand hosts keep no more than `total` connections: the oldest go first.
    @Test func allHostsKeepAtMostTheTotalTheOldestGoingFirst() throws {
        let pool = IdleConnections()
        var peers: [Int32] = []
        defer { for fd in peers { close(fd) } }
        let hosts = IdleConnections.total + 3
        for index in 0..<hosts {
            let (fd, peer) = try Self.pair()
            peers.append(peer)
            pool.put("host-\(index):80", fd)
        }
        let kept = (0..<hosts).reduce(0) { $0 + pool.count("host-\($1):80") }
        #expect(kept == IdleConnections.total)
        for index in 0..<3 {
            #expect(pool.count("host-\(index):80") == 0 && Self.closedAt(peers[index]), "the oldest, host \(index), closed")
        }
        #expect(pool.count("host-3:80") == 1 && Self.openAt(peers[3]))
        for index in 0..<hosts { while let fd = pool.take("host-\(index):80") { close(fd) } }
    }

    @Test func aHostKeepsAtMostItsShare() throws {
        let pool = IdleConnections()
        var peers: [Int32] = []
        var ours: [Int32] = []
        defer { for fd in peers { close(fd) } }
        for _ in 0...IdleConnections.perHost {
            let (fd, peer) = try Self.pair()
            ours.append(fd)
            peers.append(peer)
            pool.put("host:3", fd)
        }
        #expect(pool.count("host:3") == IdleConnections.perHost)
        #expect(Self.closedAt(peers[IdleConnections.perHost]), "the one over the share is closed")
        #expect(Self.openAt(peers[0]), "the ones kept are open")
        while let fd = pool.take("host:3") { close(fd) }
    }
}
#endif
