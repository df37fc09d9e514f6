import Foundation
import Testing

/// URLs as people paste them, against Python's `http.server` (it decodes the target and serves the
/// file it names, so a wrong target fetches another resource or a directory listing).
@Suite struct RealServerURLTests {
    @Test func escapesRawNonASCIIAndLonePercentSignsFetchTheFileTheyName() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("haul-py-\(UUID().uuidString)").path
        let served = directory + "/served"
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
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

    @Test func anEscapeThatIsNotUTF8IsRefusedNeverSavedAsAnotherResource() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("haul-py-\(UUID().uuidString)").path
        let served = directory + "/served"
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A Latin-1 name on disk, as old servers have them: `caf\xE9.bin`.
        let latin1 = Array((served + "/caf").utf8CString.dropLast()) + [CChar(bitPattern: 0xE9)] + Array(".bin".utf8CString)
        let fd = latin1.withUnsafeBufferPointer { open($0.baseAddress!, O_WRONLY | O_CREAT, 0o644) }
        #expect(fd >= 0)
        close(fd)
        let server = try await PythonServer(serving: served)
        defer { server.stop() }
        let into = directory + "/out"
        try FileManager.default.createDirectory(atPath: into, withIntermediateDirectories: true)
        // Before: requested as `GET /`, the directory listing was saved as the file, exit 0.
        let run = try await HaulProcess(["get", server.url("/caf%E9.bin"), "-d", into], in: directory, state: directory + "/.state").wait()
        #expect(run.status == 2)
        #expect(run.stderr == "haul: error: invalid URL '\(server.url("/caf%E9.bin"))': its path holds an escape of a byte that is not UTF-8 (%E9), which haul cannot send as written\n")
        #expect(CLI.files(into).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: directory + "/.state/queue.sqlite"), "nothing was queued")
    }
}
