import Foundation

/// A TCP port on 127.0.0.1 that refuses every connection, held until `close()`: bound without
/// listening, so the kernel answers each connect with a reset, and no other socket of the suite can
/// take the port meanwhile (a port freed by a server's shutdown was taken by another test's server,
/// and a request meant to be refused was answered).
public final class RefusingPort: Sendable {
    public let port: Int
    private let descriptor: Int32

    public init() throws {
        (descriptor, _, port) = try boundLoopbackSocket()
    }

    public func close() {
        Foundation.close(descriptor)
    }
}

/// A TCP port on 127.0.0.1 that takes no connection, held until `close()`: listening, its queue of
/// connections full and never accepted, so the kernel drops the SYNs of every other connect, which
/// times out (as a proxy behind a firewall that drops them).
public final class SilentPort: Sendable {
    public let port: Int
    private let descriptors: [Int32]

    public init() throws {
        let (listener, address, port) = try boundLoopbackSocket()
        guard listen(listener, 0) == 0 else {
            Foundation.close(listener)
            throw POSIXError(.EADDRINUSE)
        }
        var fillers: [Int32] = []
        for _ in 0..<3 {
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            var target = address
            _ = withUnsafePointer(to: &target) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            fillers.append(filler)
        }
        self.port = port
        descriptors = [listener] + fillers
    }

    public func close() {
        for descriptor in descriptors { Foundation.close(descriptor) }
    }
}

/// A TCP socket bound to a port of the kernel's choice on 127.0.0.1: its descriptor, address and port.
private func boundLoopbackSocket() throws -> (Int32, sockaddr_in, Int) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
    }
    guard bound else {
        close(descriptor)
        throw POSIXError(.EADDRINUSE)
    }
    return (descriptor, address, Int(UInt16(bigEndian: address.sin_port)))
}
