import Foundation
import LoopbackServer
import TestSupport

/// `openssl s_server` in a directory, with a self-signed certificate for 127.0.0.1 made there
/// (`cert.pem`, `key.pem`): a TLS server nobody here wrote.
final class OpenSSLServer: ChildServer, @unchecked Sendable {
    static let scheme = "https"
    let port: Int
    let process: ChildProcess

    /// Makes the certificate and starts the server in `directory`; `mode` is `-www` (a status page
    /// for any target) or `-WWW` (the file the target names, taken literally: no escape decoded);
    /// `options` go after it (`-Verify 1`: a client certificate required).
    ///
    /// The port is one the kernel just gave out, and the server is used only once it accepts
    /// connections: a port picked at random could be another test's server (one that never
    /// answers a TLS hello keeps haul retrying).
    init(in directory: String, mode: String, options: [String] = []) async throws {
        guard (try? await makeSelfSignedCertificate(in: directory)) != nil else { throw ChildServerError.noCertificate }
        for _ in 0..<5 {
            guard let port = Self.freePort() else { break }
            let process = try ChildProcess(
                "/usr/bin/openssl", ["s_server", "-cert", "cert.pem", "-key", "key.pem", "-accept", "\(port)", mode, "-quiet"] + options, in: directory
            )
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning, Date() < deadline, !Self.accepts(port) {
                try await Task.sleep(for: .milliseconds(50))
            }
            // Still running once it accepted: the port is its own (a failed bind exits at once).
            try await Task.sleep(for: .milliseconds(50))
            if process.isRunning, Self.accepts(port) {
                self.port = port
                self.process = process
                return
            }
            process.send(SIGKILL)
            await process.wait()
        }
        throw ChildServerError.didNotStart
    }

    /// A port on 127.0.0.1 that nothing listens on now: the kernel's choice for a socket bound to 0.
    private static func freePort() -> Int? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var address = sockaddr_in.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }

    /// Whether something accepts a connection on 127.0.0.1:`port`.
    private static func accepts(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in.loopback(port: UInt16(port))
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// A server in a child process on 127.0.0.1 (Python's, openssl's), for the tests.
protocol ChildServer {
    static var scheme: String { get }
    var port: Int { get }
    var process: ChildProcess { get }
}

extension ChildServer {
    func url(_ target: String) -> String {
        "\(Self.scheme)://127.0.0.1:\(port)\(target)"
    }

    func stop() {
        // openssl s_server ignores SIGTERM: a SIGKILL leaves nothing behind (`ChildProcess` reaps it).
        process.send(SIGKILL)
    }
}

enum ChildServerError: Error {
    case didNotStart
    case noCertificate
}
