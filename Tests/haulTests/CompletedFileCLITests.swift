import Foundation
import LoopbackServer
import Testing
import TestSupport

/// A completed file that changed on disk is not reported `completed` again (issue 16, item 5), on
/// the real binary.
@Suite struct CompletedFileCLITests {
    @Test("16.5: a completed file truncated or overwritten is fetched again into its place; an untouched one is not")
    func aChangedCompletedFileIsFetchedAgain() async throws {
        try await CLI.withServer { server, directory in
            let size = 200_000
            server.serve("/f.bin", size: size)
            let url = server.url("/f.bin").absoluteString
            let path = directory + "/f.bin"
            let first = try await CLI.haul(["get", url], in: directory)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(server.requests("/f.bin").count == 1)

            let untouched = try await CLI.haul(["get", url], in: directory)
            #expect(untouched.status == 0, "\(untouched.stderr)")
            #expect(untouched.stdout.contains("completed \(path)"), "\(untouched.stdout)")
            #expect(server.requests("/f.bin").count == 1, "an untouched file is not fetched again")

            #expect(truncate(path, 1000) == 0)
            let truncated = try await CLI.haul(["get", url], in: directory)
            #expect(truncated.status == 0, "\(truncated.stderr)\(truncated.stdout)")
            #expect(truncated.stdout.contains("[1] \(path) changed on disk (1000 bytes, was 200000): fetching it again"), "\(truncated.stdout)")
            #expect(server.requests("/f.bin").count == 2)
            #expect(sha256(ofFile: path) == server.sha256("/f.bin"))
            #expect(CLI.files(directory) == ["f.bin"], "fetched back into its place, not beside it")

            // The same size, other bytes: the modification time tells.
            try await Task.sleep(for: .milliseconds(20))
            try Data(repeating: 0x41, count: size).write(to: URL(fileURLWithPath: path))
            let overwritten = try await CLI.haul(["get", url], in: directory)
            #expect(overwritten.status == 0, "\(overwritten.stderr)")
            #expect(overwritten.stdout.contains("changed on disk (modified since it was completed): fetching it again"), "\(overwritten.stdout)")
            #expect(server.requests("/f.bin").count == 3)
            #expect(sha256(ofFile: path) == server.sha256("/f.bin"))

            let again = try await CLI.haul(["get", url], in: directory)
            #expect(again.status == 0)
            #expect(server.requests("/f.bin").count == 3, "the file fetched again is the one remembered now")
            let rows = try await CLI.list(state: directory + "/.state", in: directory)
            #expect(rows.count == 1, "one row for the URL: \(rows)")
        }
    }

    @Test("16.5: a changed file that still matches its checksum is kept; one that does not is fetched again")
    func aChangedFileWithAChecksumIsVerified() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/s.bin", size: 100_000)
            let url = server.url("/s.bin").absoluteString
            let checksum = "sha-256=" + server.sha256("/s.bin")
            let path = directory + "/s.bin"
            let first = try await CLI.haul(["get", url, "--checksum", checksum, "-o", "s.bin"], in: directory)
            #expect(first.status == 0, "\(first.stderr)")

            // Only the modification time changes (a backup tool, `touch`): the bytes are verified.
            var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
            let touched = try await CLI.haul(["get", url, "--checksum", checksum, "-o", "s.bin"], in: directory)
            #expect(touched.status == 0, "\(touched.stderr)")
            #expect(touched.stdout.contains("changed on disk (modified since it was completed) but still matches its sha-256: kept"), "\(touched.stdout)")
            #expect(server.requests("/s.bin").count == 1, "kept: not fetched again")

            let handle = try #require(FileHandle(forWritingAtPath: path))
            try handle.seek(toOffset: 50_000)
            try handle.write(contentsOf: Data([0, 1, 2, 3]))
            try handle.close()
            let corrupted = try await CLI.haul(["get", url, "--checksum", checksum, "-o", "s.bin"], in: directory)
            #expect(corrupted.status == 0, "\(corrupted.stderr)")
            #expect(corrupted.stdout.contains("no longer matches its sha-256: fetching it again"), "\(corrupted.stdout)")
            #expect(server.requests("/s.bin").count == 2)
            #expect(sha256(ofFile: path) == server.sha256("/s.bin"))

            // Edited in place, its modification time put back: the stamp cannot tell, the checksum
            // asked again does (a tester's was said completed, exit 0).
            var info = stat()
            #expect(stat(path, &info) == 0)
            let edited = try #require(FileHandle(forWritingAtPath: path))
            try edited.seek(toOffset: 10)
            try edited.write(contentsOf: Data([9, 9, 9]))
            try edited.close()
            var kept = [info.st_atim, info.st_mtim]
            #expect(utimensat(AT_FDCWD, path, &kept, 0) == 0)
            let hidden = try await CLI.haul(["get", url, "--checksum", checksum, "-o", "s.bin"], in: directory)
            #expect(hidden.status == 0, "\(hidden.stderr)")
            #expect(hidden.stdout.contains("no longer matches its sha-256 (its size and modification time unchanged): fetching it again"), "\(hidden.stdout)")
            #expect(server.requests("/s.bin").count == 3)
            #expect(sha256(ofFile: path) == server.sha256("/s.bin"))
        }
    }

    @Test("16.5: a file written again while its download was fetched again is a person's: the new version goes beside it")
    func aFileWrittenAgainDuringTheFetchIsKept() async throws {
        try await CLI.withServer { server, directory in
            let size = 300_000
            server.serve("/w.bin", size: size)
            let url = server.url("/w.bin").absoluteString
            let path = directory + "/w.bin"
            let first = try await CLI.haul(["get", url], in: directory)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(truncate(path, 1000) == 0)
            // The fetch again is held half-way; meanwhile a person writes the file anew.
            var faults = Faults()
            faults.holdAt = [size / 2]
            server.setFaults("/w.bin", faults)
            let again = try HaulProcess(["get", url], in: directory, state: directory + "/.state")
            #expect(try await eventually("the fetch again is held") { server.requests("/w.bin").count == 2 })
            try await Task.sleep(for: .milliseconds(20))
            let mine = Data("my own notes\n".utf8)
            try mine.write(to: URL(fileURLWithPath: path))
            server.release("/w.bin")
            let run = try await again.wait(timeout: 60)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("fetching it again"), "\(run.stdout)")
            #expect(FileManager.default.contents(atPath: path) == mine, "the person's file is untouched")
            #expect(sha256(ofFile: path + ".1") == server.sha256("/w.bin"), "the new version beside it")
            #expect(run.stdout.contains("completed \(path).1"), "\(run.stdout)")
        }
    }
}
