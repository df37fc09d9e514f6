import Foundation

/// `openssl s_server` in a directory, with a self-signed certificate for 127.0.0.1 made there
/// (`cert.pem`, `key.pem`): a TLS server nobody here wrote.
final class OpenSSLServer: ChildServer, @unchecked Sendable {
    static let scheme = "https"
    let port: Int
    let process: Process

    /// Makes the certificate and starts the server in `directory`; `mode` is `-www` (a status page
    /// for any target) or `-WWW` (the file the target names, taken literally: no escape decoded).
    init(in directory: String, mode: String) async throws {
        let made = try await HaulProcess.tool("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ], in: directory)
        guard made == 0 else { throw ChildServerError.noCertificate }
        port = Int.random(in: 20_000...40_000)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-cert", "cert.pem", "-key", "key.pem", "-accept", "\(port)", mode, "-quiet"]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try await Task.sleep(for: .milliseconds(500))
    }
}

/// A server in a child process on 127.0.0.1 (Python's, openssl's), for the tests.
protocol ChildServer {
    static var scheme: String { get }
    var port: Int { get }
    var process: Process { get }
}

extension ChildServer {
    func url(_ target: String) -> String {
        "\(Self.scheme)://127.0.0.1:\(port)\(target)"
    }

    func stop() {
        // openssl s_server ignores SIGTERM: a SIGKILL, and the exit reaped, leave nothing behind.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

enum ChildServerError: Error {
    case didNotStart
    case noCertificate
}
