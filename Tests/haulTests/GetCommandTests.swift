import Foundation
import LoopbackServer
import Testing
import TestSupport

/// The real `haul` binary, run as a person or a script runs it.
@Suite struct GetCommandTests {
    typealias Run = HaulProcess.Run

    func withServer(_ body: (LoopbackServer, String) async throws -> Void) async throws {
        try await CLI.withServer(body)
    }

    func files(_ directory: String) -> [String] { CLI.files(directory) }

    @Test func getWithOutputDownloadsTheFile() async throws {
        try await withServer { server, directory in
            server.serve("/file.bin", size: 2 * 1024 * 1024 + 5)
            let run = try await CLI.haul(["get", server.url("/file.bin").absoluteString, "-o", "out.bin"], in: directory)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(sha256(ofFile: directory + "/out.bin") == server.sha256("/file.bin"))
            #expect(run.stdout.contains("[1] completed"))
            #expect(run.stderr.isEmpty)
            #expect(files(directory) == ["out.bin"])
        }
    }

    @Test func jsonPrintsOneObjectPerEvent() async throws {
        try await withServer { server, directory in
            var faults = Faults()
            faults.throttleBytesPerSecond = 1024 * 1024
            server.serve("/j.bin", size: 1536 * 1024, faults: faults)
            let run = try await CLI.haul(["get", "--json", server.url("/j.bin").absoluteString, "-d", directory], in: directory)
            #expect(run.status == 0, "\(run.stderr)")
            let objects = try run.stdout.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
            #expect(objects.count >= 2)
            for object in objects {
                for key in ["event", "id", "url", "path", "state", "bytes", "total", "resumed_from", "error"] {
                    #expect(object.keys.contains(key), "missing \(key) in \(object)")
                }
            }
            #expect(objects.contains { $0["event"] as? String == "progress" }, "a 1.5 s download prints progress")
            let last = try #require(objects.last)
            #expect(last["state"] as? String == "completed")
            #expect(last["id"] as? Int == 1)
            #expect(last["total"] as? Int == 1536 * 1024)
            #expect(last["error"] is NSNull)
            #expect(last["url"] as? String == server.url("/j.bin").absoluteString)
            #expect(last["path"] as? String == directory + "/j.bin")
            #expect(last["bytes"] as? Int == 1536 * 1024)
            #expect(sha256(ofFile: directory + "/j.bin") == server.sha256("/j.bin"))
        }
    }

    @Test func aResumeIsReportedWithItsOffset() async throws {
        try await withServer { server, directory in
            var faults = Faults()
            faults.resetAfterBytes = 256 * 1024
            server.serve("/resume.bin", size: 1024 * 1024, faults: faults)
            server.serve("/resume2.bin", size: 1024 * 1024, faults: faults)
            let run = try await CLI.haul(["get", "--json", server.url("/resume.bin").absoluteString, "-o", "r.bin"], in: directory)
            #expect(run.status == 0, "\(run.stderr)")
            let objects = try run.stdout.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
            let resumed = try #require(objects.first { $0["event"] as? String == "resumed" })
            let offset = try #require(resumed["resumed_from"] as? Int)
            #expect(offset > 0 && offset <= 256 * 1024)
            #expect(server.requests("/resume.bin").last?.range == resumeRange(keeping: offset))
            #expect(sha256(ofFile: directory + "/r.bin") == server.sha256("/resume.bin"))
            let text = try await CLI.haul(["get", server.url("/resume2.bin").absoluteString, "-o", "again.bin"], in: directory)
            #expect(text.status == 0)
            #expect(text.stdout.contains("[2] resumed at "), "the queue remembers download 1: \(text.stdout)")
            #expect(text.stdout.contains("(verified with If-Range)"), "\(text.stdout)")
            #expect(sha256(ofFile: directory + "/again.bin") == server.sha256("/resume2.bin"))
        }
    }

    @Test func severalURLsIntoADirectoryNamedSafely() async throws {
        try await withServer { server, directory in
            var faults = Faults()
            faults.contentDisposition = "attachment; filename=\"../../../etc/passwd\""
            server.serve("/dl", size: 1000, faults: faults)
            server.serve("/a/b/plain.txt", size: 2000)
            server.serve("/", size: 300)
            let urls = ["/dl", "/a/b/plain.txt", "/"].map { server.url($0).absoluteString }
            let run = try await CLI.haul(["get"] + urls + ["-d", directory], in: directory)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(files(directory) == ["index.html", "passwd", "plain.txt"])
            #expect(sha256(ofFile: directory + "/passwd") == server.sha256("/dl"))
            let again = try await CLI.haul(["get", urls[1], "-d", directory], in: directory)
            #expect(again.status == 0)
            #expect(again.stdout.contains("[2] completed \(directory)/plain.txt"), "\(again.stdout)")
            #expect(server.requests("/a/b/plain.txt").count == 1, "a file already downloaded there is not fetched again")
            let fresh = try await CLI.haul(["get", urls[1], "-d", directory], in: directory, state: directory + "/.other-state")
            #expect(fresh.status == 0)
            #expect(files(directory) == ["index.html", "passwd", "plain.txt", "plain.txt.1"], "another queue never overwrites")
        }
    }

    @Test func aFailedDownloadExitsOne() async throws {
        try await withServer { server, directory in
            server.serve("/ok.bin", size: 100)
            let run = try await CLI.haul(["get", server.url("/missing").absoluteString, server.url("/ok.bin").absoluteString, "-d", directory], in: directory)
            #expect(run.status == 1)
            #expect(run.stdout.contains("failed: HTTP 404 Not Found"))
            #expect(files(directory) == ["ok.bin"])
        }
    }

    @Test(arguments: [
        (["get", "not a url"], "invalid URL 'not a url'"),
        (["get", "ftp://127.0.0.1/file"], "unsupported scheme 'ftp'"),
        (["get", "http://127.0.0.1/a\r\nX-Evil: 1"], "contains control characters"),
        (["get", "http://127.0.0.1/a", "-d", "/nonexistent/haul"], "directory does not exist"),
        (["get", "http://127.0.0.1/a", "http://127.0.0.1/b", "-o", "x"], "-o/--output takes a single URL"),
        (["get", "http://127.0.0.1/a", "-j", "0"], "--max-active must be between 1 and 32"),
        (["get"], "no URL given"),
        (["get", "--bogus", "http://127.0.0.1/a"], "haul: error: unknown option '--bogus'"),
    ])
    func badInputExitsTwoWithOneLineAndCreatesNothing(arguments: [String], message: String) async throws {
        try await withServer { _, directory in
            let run = try await CLI.haul(arguments, in: directory)
            #expect(run.status == 2)
            #expect(run.stderr.contains(message), "\(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
            #expect(run.stdout.isEmpty)
            #expect(files(directory).isEmpty)
            #expect(!FileManager.default.fileExists(atPath: directory + "/.state"), "bad input does not create the queue")
        }
    }

    @Test func helpExitsZero() async throws {
        let directory = FileManager.default.temporaryDirectory.path
        let run = try await CLI.haul(["get", "--help"], in: directory)
        #expect(run.status == 0)
        #expect(run.stdout.contains("--output"))
        #expect(run.stdout.contains("--json"))
    }
}
