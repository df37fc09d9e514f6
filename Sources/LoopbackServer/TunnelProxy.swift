import Foundation

/// A forward proxy for the tests that behaves like squid's default policy: it answers
/// `CONNECT host:port` by tunnelling to one local port, refuses `CONNECT` to the ports it is told
/// to (port 80 by default, as squid does), and passes a request in absolute form
/// (`GET http://host/path`) on to that same port, whose server answers it as a proxy would. It
/// records the head of the first request of each connection.
public final class TunnelProxy: @unchecked Sendable {
    public let port: Int
    private let listener: Int32
    private let target: UInt16
    private let refusals: [Int: String]
    private let ownAnswer: String?
    private let lock = NSLock()
    private var heads: [String] = []

    /// The request lines received, oldest first (`CONNECT files.example:443 HTTP/1.1`,
    /// `GET http://files.example/a.bin HTTP/1.1`); one per connection.
    public var requestLines: [String] { lock.withLock { heads.map { $0.components(separatedBy: "\r\n").first ?? "" } } }

    /// The whole heads of those requests (request line and header lines).
    public var requestHeads: [String] { lock.withLock { heads } }

    /// A proxy to `target`; `refusing` maps a `CONNECT` port to the answer's status line and any
    /// header lines (`"407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"p\""`);
    /// `answeringAbsoluteForm`, when given, is the proxy's own answer to every absolute-form request
    /// (`"403 Forbidden\r\nX-Squid-Error: ERR_ACCESS_DENIED 0"`, as squid refuses by policy).
    public init(tunnellingTo target: Int, refusing: [Int: String] = [80: "403 Forbidden"], answeringAbsoluteForm: String? = nil) throws {
        self.target = UInt16(target)
        refusals = refusing
        ownAnswer = answeringAbsoluteForm
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard listener >= 0, bound == 0, listen(listener, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                Thread.detachNewThread { self.serve(client) }
            }
        }
    }

    public func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve(_ client: Int32) {
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.ends(with: Array("\r\n\r\n".utf8)) {
            guard read(client, &byte, 1) == 1 else {
                close(client)
                return
            }
            head.append(byte)
        }
        let text = String(decoding: head, as: UTF8.self)
        lock.withLock { heads.append(String(decoding: head.dropLast(4), as: UTF8.self)) }
        let words = (text.components(separatedBy: "\r\n").first ?? "").split(separator: " ")
        let isConnect = words.first == "CONNECT"
        let absoluteForm = words.count == 3 && words[1].lowercased().hasPrefix("http://")
        guard isConnect || absoluteForm else {
            Self.send(client, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            close(client)
            return
        }
        let port = words.count == 3 ? words[1].lastIndex(of: ":").flatMap { Int(words[1][words[1].index(after: $0)...]) } : nil
        if let refusal = isConnect ? port.flatMap({ refusals[$0] }) : ownAnswer {
            // Like squid's error page: a body, then the connection closes.
            Self.send(client, "HTTP/1.1 \(refusal)\r\nContent-Type: text/html\r\nContent-Length: 9\r\nConnection: close\r\n\r\nrefused\r\n")
            close(client)
            return
        }
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in.loopback(port: target)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Self.send(client, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            close(client)
            close(upstream)
            return
        }
        if isConnect {
            Self.send(client, "HTTP/1.1 200 Connection established\r\n\r\n")
        } else {
            // The server behind understands absolute form: the request goes on as it came.
            _ = head.withUnsafeBytes { write(upstream, $0.baseAddress, $0.count) }
        }
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            Self.pump(from: upstream, to: client)
            done.signal()
        }
        Self.pump(from: client, to: upstream)
        done.wait()
        close(client)
        close(upstream)
    }

    private static func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(source, &buffer, buffer.count)
            guard count > 0 else { break }
            var offset = 0
            while offset < count {
                let written = buffer[offset..<count].withUnsafeBytes { write(destination, $0.baseAddress, $0.count) }
                guard written > 0 else { break }
                offset += written
            }
        }
        shutdown(destination, Int32(SHUT_WR))
    }

    private static func send(_ socket: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
    }

}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}

extension sockaddr_in {
    /// 127.0.0.1:`port` (0: the kernel chooses).
    public static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}
