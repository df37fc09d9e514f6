import AsyncHTTPClient
import DownloadCore
@testable import DownloadEngine
import Foundation
import NIOCore
import Testing
import TestSupport

/// The bridge on 127.0.0.1 is haul's client's alone: a tester's `curl -x` of the bridge's port, as
/// another user, was let through squid with haul's proxy credentials (an open relay for every local
/// user, for the runner's whole life).
@Suite struct ProxyBridgeTests {
    /// What the bridge answers a `CONNECT` with these extra header lines: its status line.
    static func answer(_ port: Int, _ headers: String) async -> String {
        await onOwnThread {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard connected else { return "not connected" }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let request = "CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\(headers)\r\n"
            _ = request.withCString { send(fd, $0, strlen($0), 0) }
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { return "nothing" }
            return String(decoding: buffer[0..<count], as: UTF8.self).components(separatedBy: "\r\n").first ?? ""
        }
    }

    @Test func aConnectWithoutTheBridgesSecretIsRefused() async throws {
        let proxy = try RefusingPort()
        defer { proxy.close() }
        let upstream = Upstream(route: .absoluteForm(via: ProxySettings.Server(host: "127.0.0.1", port: proxy.port, user: "alice", password: "secret")), connectTimeout: .seconds(2))
        let bridge = try ProxyBridge(upstream, group: HTTPClient.defaultEventLoopGroup)
        defer { Task { await bridge.shutdown() } }
        let secret = Data("\(bridge.credentials.user):\(bridge.credentials.password)".utf8).base64EncodedString()
        #expect(bridge.credentials.password.count >= 32, "a secret no one guesses")
        #expect(await Self.answer(bridge.port, "") == "HTTP/1.1 407 Proxy Authentication Required")
        #expect(await Self.answer(bridge.port, "Proxy-Authorization: Basic \(Data("alice:secret".utf8).base64EncodedString())\r\n") == "HTTP/1.1 407 Proxy Authentication Required")
        // haul's own: let in, and the way on is tried (the proxy here refuses: 502).
        #expect(await Self.answer(bridge.port, "proxy-authorization: Basic \(secret)\r\n") == "HTTP/1.1 502 Bad Gateway")
    }
}
