import Foundation
import Testing
import TestSupport

/// URLs as people paste them, against Python's `http.server` (it decodes the target and serves the
/// file it names, so a wrong target fetches another resource or a directory listing).
@Suite struct RealServerURLTests {
    @Test func escapesRawNonASCIIAndLonePercentSignsFetchTheFileTheyName() async throws {
        let scratch = try TemporaryDirectory("haul-py")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let served = directory + "/served"
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        var contents: [String: Data] = [:]
        for name in ["Übersicht 2026.pdf", "café.bin", "100%.zip", "a+b (1).txt"] {
            let data = Data((0..<20_000).map { _ in UInt8.random(in: 0...255) })
            contents[name] = data
            #expect(FileManager.default.createFile(atPath: served + "/" + name, contents: data))
        }
        let server = try await PythonServer(serving: served)
        defer { server.stop() }
        let cases: [(url: String, name: String)] = [
            (server.url("/Übersicht%202026.pdf"), "Übersicht 2026.pdf"),
            (server.url("/%C3%9Cbersicht%202026.pdf"), "Übersicht 2026.pdf"),
            (server.url("/caf%C3%A9.bin"), "café.bin"),
            (server.url("/café.bin"), "café.bin"),
            (server.url("/100%25.zip"), "100%.zip"),
            (server.url("/100%.zip"), "100%.zip"),
            (server.url("/a+b%20(1).txt"), "a+b (1).txt"),
        ]
        for (index, (url, name)) in cases.enumerated() {
            let into = directory + "/out\(index)"
            try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: true)
            let run = try await HaulProcess(["get", url, "-d", into], in: directory, state: directory + "/.state\(index)").wait()
            #expect(run.status == 0, "\(url): \(run.stdout) \(run.stderr)")
            #expect(CLI.files(into) == [name], "\(url)")
            #expect(FileManager.default.contents(atPath: into + "/" + name) == contents[name], "\(url): the file it names")
        }
    }

    @Test func anEscapeThatIsNotUTF8FetchesTheLatin1NameItNames() async throws {
        let scratch = try TemporaryDirectory("haul-py")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        let served = directory + "/served"
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        // A Latin-1 name on disk, as old servers have them: `caf\xE9.bin`.
        let content = Data((0..<50_000).map { _ in UInt8.random(in: 0...255) })
        let latin1 = Array((served + "/caf").utf8CString.dropLast()) + [CChar(bitPattern: 0xE9)] + Array(".bin".utf8CString)
        let fd = latin1.withUnsafeBufferPointer { open($0.baseAddress!, O_WRONLY | O_CREAT, 0o644) }
        #expect(fd >= 0)
        _ = content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let server = try await PythonServer(serving: served, byteNames: true)
        defer { server.stop() }
        let into = directory + "/out"
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: true)
        // Before: refused (exit 2); before that, requested as `GET /`, the directory listing was
        // saved as the file, exit 0. Now the request line carries `/caf%E9.bin`, as curl sends it.
        let run = try await HaulProcess(["get", server.url("/caf%E9.bin"), "-d", into], in: directory, state: directory + "/.state").wait()
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        #expect(CLI.files(into) == ["caf%E9.bin"], "named as written: the escape is not UTF-8")
        #expect(FileManager.default.contents(atPath: into + "/caf%E9.bin") == content, "the file it names")
    }

    @Test func anEscapeThatIsNotUTF8OverHTTPSReachesOpenSSLByteForByte() async throws {
        let scratch = try TemporaryDirectory("haul-tls")
        defer { withExtendedLifetime(scratch) {} }
        let directory = scratch.path
        // `s_server -WWW` opens the target as a file name, escapes and all: only `/caf%E9.bin`
        // finds this file (`/caf%25E9.bin` or `/` would not).
        let content = Data((0..<50_000).map { _ in UInt8.random(in: 0...255) })
        #expect(FileManager.default.createFile(atPath: directory + "/caf%E9.bin", contents: content))
        let server = try await OpenSSLServer(in: directory, mode: "-WWW")
        defer { server.stop() }
        let refused = try await HaulProcess(["get", server.url("/caf%E9.bin"), "-o", "refused.bin"], in: directory, state: directory + "/.s1").wait(timeout: 20)
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("failed: TLS: the server's certificate is not trusted"), "\(refused.stdout)")
        let run = try await HaulProcess(
            ["get", server.url("/caf%E9.bin"), "-o", "out.bin", "--ca-certificate", "cert.pem"], in: directory, state: directory + "/.s2"
        ).wait()
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        #expect(FileManager.default.contents(atPath: directory + "/out.bin") == content)
    }
}
