import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Two haul queues (two state directories) fetching files of one name into one directory at the
/// same time share a part file name. Found by use: the second replaced the first's part file, and
/// the first moved the second's bytes into place and reported them complete as its own, exit 0.
@Suite struct TwoQueuesTests {
    @Test func twoQueuesFetchingOneNameIntoOneDirectoryEachPlaceTheirOwnBytes() async throws {
        try await CLI.withServer { server, directory in
            var faults = Faults()
            faults.throttleBytesPerSecond = 512 * 1024
            let size = 2 * 1024 * 1024
            server.serve("/a/x.bin", size: size, faults: faults)
            server.serve("/b/x.bin", size: size, faults: faults)
            #expect(server.sha256("/a/x.bin") != server.sha256("/b/x.bin"))
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
}
