import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Who is at the other end of a Unix socket, as the kernel says (`SO_PEERCRED`): the credentials the
/// peer had when it connected, which it cannot fake.
struct PeerCredentials: Sendable, Hashable {
    /// `struct ucred` as Linux lays it out (Swift's Glibc does not import it).
    private struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    var pid: Int32
    var uid: UInt32

    /// The credentials of `channel`'s peer; fails for a channel that is not a socket.
    static func of(_ channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        #if os(Linux)
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        }
        let future: EventLoopFuture<UCred> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)
        )
        return future.map { PeerCredentials(pid: $0.pid, uid: $0.uid) }
        #else
        return channel.eventLoop.makeFailedFuture(ChannelError.operationUnsupported)
        #endif
    }
}
