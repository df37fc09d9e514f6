import Foundation
import LoopbackServer
import Testing
import TestSupport

/// The longest legal names with `-o` (issue 16, item 8), on the real binary.
@Suite struct LongNameCLITests {
    @Test("16.8: -o with a name of 251, 254 and 255 bytes downloads; 256 is refused before anything", arguments: [251, 254, 255])
    func theLongestLegalNames(bytes: Int) async throws {
        try await CLI.withServer { server, directory in
            server.serve("/n.bin", size: 150_000)
            let name = String(repeating: "é", count: (bytes - 4) / 2) + String(repeating: "a", count: (bytes - 4) % 2) + ".bin"
            #expect(name.utf8.count == bytes)
            let run = try await CLI.haul(["get", server.url("/n.bin").absoluteString, "-o", name], in: directory)
            #expect(run.status == 0, "\(run.stderr)\(run.stdout)")
            #expect(sha256(ofFile: directory + "/" + name) == server.sha256("/n.bin"))
            #expect(CLI.files(directory) == [name])
        }
    }

    @Test("16.8: a -o name of 256 bytes is refused in one line, exit 2, nothing queued or sent")
    func aNameOverNameMaxIsRefused() async throws {
        try await CLI.withServer { server, directory in
            server.serve("/n.bin", size: 1000)
            let name = String(repeating: "b", count: 252) + ".bin"
            for command in ["get", "add"] {
                let run = try await CLI.haul([command, server.url("/n.bin").absoluteString, "-o", name], in: directory)
                #expect(run.status == 2)
                #expect(run.stderr == "haul: error: -o/--output: the file name is 256 bytes long; a name has at most 255\n", "\(run.stderr)")
            }
            #expect(server.requests().isEmpty)
            #expect(!FileManager.default.fileExists(atPath: directory + "/.state"))
            #expect(CLI.files(directory).isEmpty)
        }
    }

    @Test("16.8: a download to a 255-byte name survives a pause (SIGTERM) and a kill -9, and resumes from its part file")
    func aLongestNameResumesAfterAPauseAndAKill() async throws {
        try await CLI.withServer { server, directory in
            let size = 4 * 1024 * 1024
            server.serve("/long.bin", size: size, faults: {
                var faults = Faults()
                faults.throttleBytesPerSecond = 512 * 1024
                return faults
            }())
            let name = String(repeating: "z", count: 251) + ".bin"
            let url = server.url("/long.bin").absoluteString
            func partLength() -> Int64 {
                CLI.files(directory).filter { $0.hasSuffix(".part") }.compactMap { fileLength(directory + "/" + $0) }.first ?? 0
            }
            var lengths: [Int64] = []
            for signal in [SIGTERM, SIGKILL] {
                let floor = partLength()
                let process = try HaulProcess(["get", url, "-o", name], in: directory, state: directory + "/.state")
                try await eventually("the part file to grow") { partLength() >= floor + 300_000 }
                process.send(signal)
                let run = try await process.wait()
                #expect(run.status == (signal == SIGTERM ? 143 : 9), "\(run.stderr)")
                lengths.append(partLength())
            }
            let parts = CLI.files(directory).filter { $0.hasSuffix(".part") }
            #expect(parts.count == 1 && parts.allSatisfy { $0.utf8.count <= 255 }, "\(parts)")
            server.setFaults("/long.bin", Faults())
            let last = try await CLI.haul(["get", url, "-o", name], in: directory)
            #expect(last.status == 0, "\(last.stderr)\(last.stdout)")
            #expect(sha256(ofFile: directory + "/" + name) == server.sha256("/long.bin"))
            #expect(CLI.files(directory) == [name])
            let ranges = server.requests("/long.bin").map(\.range)
            #expect(ranges.count == 3)
            #expect(ranges.dropFirst().allSatisfy { ($0 ?? "").hasPrefix("bytes=") && $0 != "bytes=0-" }, "each run resumed: \(ranges) after \(lengths)")
        }
    }
}
