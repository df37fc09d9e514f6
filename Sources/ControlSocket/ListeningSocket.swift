import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(Glibc)
private let systemBind = Glibc.bind
#elseif canImport(Musl)
private let systemBind = Musl.bind
#elseif canImport(Darwin)
private let systemBind = Darwin.bind
#endif

/// The control socket's file: made mode 0600 as it is bound, never wider for an instant.
enum ListeningSocket {
    /// A Unix stream socket bound at `path` (a stale socket there removed first), not yet listening.
    ///
    /// On Linux the file a bind makes takes the socket's own mode (less the umask), so `fchmod`
    /// before `bind` makes it 0600 from its first instant, with no change to the process's umask
    /// (which every thread shares: a part file made meanwhile would get it). The `chmod` after is
    /// for systems that ignore the first; the peer check refuses any other uid anyway.
    static func bind(_ path: String) throws(ControlServer.Failure) -> NIOBSDSocket.Handle {
        func failure(_ reason: String) -> ControlServer.Failure {
            ControlServer.Failure(description: "cannot listen on \(path): \(reason)")
        }
        guard var address = Self.address(path) else {
            throw failure("the path is \(path.utf8.count) bytes long; a socket's path has at most \(maxPathBytes)")
        }
        var status = stat()
        if lstat(path, &status) == 0 {
            // Only a socket is stale: anything else there is somebody's file.
            guard status.st_mode & S_IFMT == S_IFSOCK else { throw failure("something else is there (not a socket)") }
            guard unlink(path) == 0 || errno == ENOENT else { throw failure(reason(errno)) }
        }
        #if os(Linux)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw failure(reason(errno)) }
        guard fchmod(fd, 0o600) == 0 else {
            let error = errno
            close(fd)
            throw failure(reason(error))
        }
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { systemBind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o600) == 0 else {
            let error = errno
            close(fd)
            if bound == 0 { unlink(path) }
            throw failure(reason(error))
        }
        return fd
    }

    /// The longest path a Unix socket can have (the NUL aside).
    static let maxPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// The address of the socket at `path`; nil when the path is too long for one.
    static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= maxPathBytes else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    /// A copy of `socket` (close-on-exec), nil when none can be made (`errno` says why).
    static func copy(of socket: NIOBSDSocket.Handle) -> NIOBSDSocket.Handle? {
        let copy = fcntl(socket, F_DUPFD_CLOEXEC, 0)
        return copy >= 0 ? copy : nil
    }

    static func reason(_ code: Int32) -> String {
        String(cString: strerror(code)).lowercased()
    }

    /// Why listening failed, in words: the system's for an error with a code, never a type's name.
    static func reason(of error: any Error) -> String {
        if let error = error as? IOError { return reason(error.errnoCode) }
        return "the socket could not be set up"
    }
}
