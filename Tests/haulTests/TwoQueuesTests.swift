import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Two haul queues (two state directories) fetching files of one name into one directory at the
/// same time share a part file name. Found by use: the second replaced the first's part file, and
/// the first moved the second's bytes into place and reported them complete as its own, exit 0.
@Suite struct TwoQueuesTests {
    /// Serves two files of `size` bytes named `name`, with other bytes, under `/a/` and `/b/`, at
    /// `rate` bytes per second each.
    func serveTwo(_ server: LoopbackServer, _ name: String, size: Int, rate: Int) {
        var faults = Faults()
        faults.throttleBytesPerSecond = rate
        server.serve("/a/" + name, size: size, faults: faults)
        server.serve("/b/" + name, size: size, faults: faults)
        #expect(server.sha256("/a/" + name) != server.sha256("/b/" + name))
    }

    @Test func twoQueuesFetchingOneNameIntoOneDirectoryEachPlaceTheirOwnBytes() async throws {
        try await CLI.withServer { server, directory in
            serveTwo(server, "x.bin", size: 2 * 1024 * 1024, rate: 512 * 1024)
            let first = try HaulProcess(["get", server.url("/a/x.bin").absoluteString, "-d", directory, "--json"], in: directory, state: directory + "/.first")
            // The second starts once the first's part file holds bytes.
            let part = directory + "/x.bin.part"
            #expect(try await eventually("the first queue's part file has bytes") {
                ((try? FileManager.default.attributesOfItem(atPath: part)[.size]) as? Int ?? 0) > 64 * 1024
            })
            let second = try await HaulProcess(["get", server.url("/b/x.bin").absoluteString, "-d", directory, "--json"], in: directory, state: directory + "/.second")
                .wait(timeout: 60)
            let firstRun = try await first.wait(timeout: 60)
            for (run, path, state) in [(firstRun, "/a/x.bin", "/.first"), (second, "/b/x.bin", "/.second")] {
                #expect(run.status == 0, "\(path): \(run.stdout) \(run.stderr)")
                let rows = try await CLI.list(state: directory + state, in: directory)
                let placed = try #require(rows.first?["path"] as? String, "\(rows)")
                #expect(rows.first?["state"] as? String == "completed")
                // Whatever name it took, the file a queue reports is its own URL's bytes.
                #expect(sha256(ofFile: placed) == server.sha256(path), "\(path) reported \(placed) complete with other bytes")
            }
            #expect(CLI.files(directory) == ["x.bin", "x.bin.1"])
            #expect(server.requests("/b/x.bin").contains { $0.status == 200 }, "the second fetched its own file whole")
        }
    }

    /// Two queues that each keep a paused download of one name in one directory. Found by use:
    /// the second queue restarted over the first's paused bytes (`no validator or length to check
    /// a resume against`), and the first then resumed after the second's bytes, its `If-Range`
    /// holding for its own resource: a file of both, reported complete, exit 0. Now each queue
    /// marks its part files, and a queue that finds another's fetches into a name of its own.
    @Test func aPausedPartFileOfAnotherQueueIsNeitherTakenNorResumedFrom() async throws {
        try await CLI.withServer { server, directory in
            serveTwo(server, "same.bin", size: 4 * 1024 * 1024, rate: 1024 * 1024)
            let part = directory + "/same.bin.part"
            let length: @Sendable (String) -> Int = { path in
                (try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int ?? 0
            }
            /// Runs `get` of `path` for queue `state` until `wrote` holds, then stops it as a quit
            /// does (SIGTERM: the download pauses with its bytes).
            @discardableResult
            func fetchPart(_ path: String, state: String, until wrote: @escaping @Sendable () -> Bool) async throws -> HaulProcess.Run {
                let run = try HaulProcess(["get", server.url(path).absoluteString, "-d", directory], in: directory, state: directory + state)
                #expect(try await eventually("\(path) wrote bytes", wrote))
                run.send(SIGTERM)
                return try await run.wait(timeout: 30)
            }
            try await fetchPart("/a/same.bin", state: "/.first") { length(part) > 256 * 1024 }
            let firstBytes = try #require(FileManager.default.contents(atPath: part))
            #expect(Array(firstBytes) == Array(server.content("/a/same.bin").prefix(firstBytes.count)))

            // The second's bytes, wherever it writes them (before: over the first's).
            let secondPrefix = Data(server.content("/b/same.bin").prefix(256 * 1024))
            let second = try await fetchPart("/b/same.bin", state: "/.second") {
                [part, directory + "/same.bin.1.part"].contains { path in
                    FileManager.default.contents(atPath: path).map { $0.count > 256 * 1024 && $0.prefix(256 * 1024) == secondPrefix } ?? false
                }
            }
            #expect(FileManager.default.contents(atPath: part) == firstBytes, "the first queue's paused bytes are untouched")
            // A third queue's download of that name, cancelled before it ran (no haul running the
            // queue): the cancel deletes nothing of the first's (before, it deleted its part file).
            let third = directory + "/.third"
            #expect(try await CLI.haul(["add", server.url("/b/same.bin").absoluteString, "-d", directory], in: directory, state: third).status == 0)
            #expect(try await CLI.haul(["cancel", "1"], in: directory, state: third).stdout == "cancelled 1\n")
            #expect(FileManager.default.contents(atPath: part) == firstBytes, "another queue's cancel left the first queue's bytes")
            #expect(second.stdout.contains("[1] restarted from zero: \(part) is another download's part file (left alone); fetching into \(directory)/same.bin.1.part\n"), "\(second.stdout)")

            // Each queue resumes its own bytes and places its own file.
            for (path, state) in [("/a/same.bin", "/.first"), ("/b/same.bin", "/.second")] {
                let run = try await HaulProcess(["get", server.url(path).absoluteString, "-d", directory], in: directory, state: directory + state).wait(timeout: 60)
                #expect(run.status == 0, "\(path): \(run.stdout) \(run.stderr)")
                let rows = try await CLI.list(state: directory + state, in: directory)
                #expect(rows.first?["state"] as? String == "completed", "\(rows)")
                let placed = try #require(rows.first?["path"] as? String, "\(rows)")
                #expect(sha256(ofFile: placed) == server.sha256(path), "\(path) reported \(placed) complete with other bytes")
            }
            #expect(CLI.files(directory) == ["same.bin", "same.bin.1"])
            #expect(server.requests("/a/same.bin").last?.range == resumeRange(keeping: firstBytes.count), "the first resumed from its own bytes")
        }
    }
}
