@testable import ControlSocket
import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Logging
import NIOCore
import Synchronization
import Testing
import TestSupport

/// A loopback server, a real session behind a `SessionQueue`, its control socket in a temporary
/// directory, and a client of that socket, for one test.
struct ControlHarness {
    let server: LoopbackServer
    let session: DownloadSession
    let queue: SessionQueue
    let control: ControlServer
    let client: ControlClient
    let scratch: TemporaryDirectory
    var directory: String { scratch.path }
    let stopped: Stopped

    /// Whether `stop()` reached the queue.
    final class Stopped: Sendable {
        let count = Counter()
    }

    var socketPath: String { control.socketPath }

    static func with(
        limits: ControlServer.Limits = ControlServer.Limits(),
        _ adjust: (inout DownloadSession.Configuration) -> Void = { _ in },
        _ body: (ControlHarness) async throws -> Void
    ) async throws {
        var configuration = DownloadSession.Configuration()
        configuration.backoff = Backoff(initial: 0.05, cap: 0.4)
        configuration.stallTimeout = .seconds(5)
        configuration.connectTimeout = .seconds(2)
        configuration.progressInterval = .milliseconds(20)
        adjust(&configuration)
        let server = try await LoopbackServer.start()
        let scratch = try TemporaryDirectory("haul-control")
        let directory = scratch.path
        let session = DownloadSession(configuration: configuration)
        let stopped = Stopped()
        let queue = SessionQueue(session: session) { stopped.count.add() }
        let control = try await ControlServer.start(socketPath: directory + "/haul.sock", queue: queue, logger: Logger(label: "test"), limits: limits)
        let client = try #require(await ControlClient.connect(socketPath: control.socketPath))
        let harness = ControlHarness(server: server, session: session, queue: queue, control: control, client: client, scratch: scratch, stopped: stopped)
        try await withTeardown({ try await body(harness) }, teardown: harness.close)
    }

    /// A queue on a real session with no server, for tests that start their own.
    static func withQueue(_ body: (SessionQueue) async throws -> Void) async throws {
        let session = DownloadSession(configuration: DownloadSession.Configuration())
        let queue = SessionQueue(session: session) {}
        try await withTeardown({ try await body(queue) }, teardown: session.shutdown)
    }

    private func close() async {
        await control.shutdown()
        await session.shutdown()
        await server.shutdown()
        // The directory goes with `scratch`, once nothing serves or writes there.
        withExtendedLifetime(scratch) {}
    }

    func path(_ name: String) -> String {
        directory + "/" + name
    }

    /// Polls the queue through the socket until `predicate` holds for download `id`.
    @discardableResult
    func wait(_ id: DownloadID, timeout: Double = 20, sourceLocation: SourceLocation = #_sourceLocation,
              until predicate: (Download) -> Bool) async throws -> Download {
        try await waitFor(id, in: { try await client.snapshot() }, timeout: timeout, every: .milliseconds(20), sourceLocation: sourceLocation, until: predicate)
    }

    /// `curl --unix-socket` against the socket: the status and the body.
    func curl(_ method: String, _ path: String, _ body: String? = nil, as user: UInt32? = nil) async throws -> (status: Int, body: String) {
        try await Curl.run(socket: socketPath, method, path, body, as: user)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}

final class Counter: Sendable {
    private let value = Mutex(0)

    func add() {
        value.withLock { $0 += 1 }
    }

    var count: Int { value.withLock { $0 } }
}

enum Curl {
    /// Runs curl (as `user`, through setpriv, when given) and returns the status it saw and the body.
    static func run(socket: String, _ method: String, _ path: String, _ body: String?, as user: UInt32?) async throws -> (status: Int, body: String) {
        var arguments = ["-sS", "--max-time", "10", "--unix-socket", socket, "-X", method, "-w", "\n%{http_code}"]
        if let body { arguments += ["-H", "Content-Type: application/json", "--data-binary", body] }
        arguments.append("http://haul" + path)
        let command = user.map { user in
            ("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", "/usr/bin/curl"] + arguments)
        } ?? ("/usr/bin/curl", arguments)
        let (_, text) = try await ChildProcess.output(command.0, command.1, mergingErrors: true)
        guard let newline = text.lastIndex(of: "\n"), let status = Int(text[text.index(after: newline)...]) else {
            throw TestFailure("curl said: \(text)")
        }
        // Every JSON answer ends with a newline, for a terminal.
        var body = text[..<newline]
        if body.hasSuffix("\n") { body.removeLast() }
        return (status, String(body))
    }
}

/// A client that speaks raw bytes over the socket, for what no HTTP client would send; blocking
/// calls run off the cooperative pool.
final class RawClient: Sendable {
    let fd: Int32
    private let received = Mutex<[UInt8]>([])

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard var address = ListeningSocket.address(path) else { throw TestFailure("path too long") }
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard fd >= 0, result == 0 else { throw TestFailure("cannot connect: \(String(cString: strerror(errno)))") }
    }

    deinit {
        close(fd)
    }

    /// Sends all of `bytes`; false when the server closed the connection first.
    @discardableResult
    func send(_ bytes: [UInt8]) async -> Bool {
        await onOwnThread {
            var offset = 0
            while offset < bytes.count {
                let sent = bytes[offset...].withUnsafeBytes { Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard sent > 0 else { return false }
                offset += sent
            }
            return true
        }
    }

    @discardableResult
    func send(_ text: String) async -> Bool {
        await send(Array(text.utf8))
    }

    /// Everything received so far, with what arrives until the server closes the connection, `done`
    /// says so of everything received, or `timeout` seconds pass without a byte; and whether it closed.
    func receive(timeout: Double = 5, until done: @escaping @Sendable ([UInt8]) -> Bool = { _ in false }) async -> (bytes: [UInt8], closed: Bool) {
        await onOwnThread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while !done(self.received.withLock { $0 }) {
                var poller = pollfd(fd: self.fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, Int32(timeout * 1000)) > 0 else { return (self.received.withLock { $0 }, false) }
                let count = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return (self.received.withLock { $0 }, true) }
                self.received.withLock { $0 += buffer[0..<count] }
            }
            return (self.received.withLock { $0 }, false)
        }
    }

    /// Every byte already waiting, without waiting for more.
    func drain() async -> Int {
        await onOwnThread {
            var total = 0
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                guard count > 0 else { return total }
                total += count
            }
        }
    }
}

/// The status line and body of a raw HTTP answer.
func parse(_ bytes: [UInt8]) -> (status: Int, body: String)? {
    let text = String(decoding: bytes, as: UTF8.self)
    guard let end = text.range(of: "\r\n\r\n") else { return nil }
    let statusLine = text[..<end.lowerBound].split(separator: "\r\n").first ?? ""
    let fields = statusLine.split(separator: " ")
    guard fields.count >= 2, let status = Int(fields[1]) else { return nil }
    return (status, String(text[end.upperBound...]))
}

/// The lines of a chunked body, and whether its last chunk came.
func chunkedLines(_ body: String) -> (lines: [String], ended: Bool) {
    var rest = Substring(body)
    var data = ""
    while let sizeEnd = rest.range(of: "\r\n"), let size = Int(rest[..<sizeEnd.lowerBound], radix: 16) {
        if size == 0 { return (data.split(separator: "\n").map(String.init), true) }
        let start = sizeEnd.upperBound
        guard rest.utf8.count >= rest.distance(from: rest.startIndex, to: start) + size + 2 else { break }
        let chunkEnd = rest.utf8.index(start, offsetBy: size)
        data += rest[start..<chunkEnd]
        rest = rest[rest.utf8.index(chunkEnd, offsetBy: 2)...]
    }
    return (data.split(separator: "\n").map(String.init), false)
}

func json(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}
