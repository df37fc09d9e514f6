import Foundation
import LoopbackServer
import Testing
import TestSupport

/// The queue's own disk fills up: haul says so where a person looks, exits promptly, and the next
/// run recovers from the bytes on disk.
@Suite struct FullDiskTests {
    /// Mounts a tmpfs of `megabytes` at `path`; false (with the reason printed) where mounting is
    /// not allowed. CI runs as root, where it is.
    static func mountTmpfs(_ path: String, megabytes: Int, remount: Bool = false) async throws -> Bool {
        let options = (remount ? "remount," : "") + "size=\(megabytes)m"
        let status = try await ChildProcess.run("/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", path], in: "/").status
        if status != 0 { print("FullDiskTests: mounting a tmpfs is not allowed here (mount exited \(status)); not run") }
        return status == 0
    }

    @Test func aQueueThatCannotBeSavedIsSaidOnStderrExitsOneAndRecoversNextTime() async throws {
        try await CLI.withServer { server, directory in
            let disk = directory + "/disk"
            try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
            guard try await Self.mountTmpfs(disk, megabytes: 3) else { return }
            defer { unmount(disk) }
            // No length (chunked): nothing can tell it will not fit, so it fills the disk.
            var faults = Faults()
            faults.chunked = true
            server.serve("/big.bin", size: 8 * 1024 * 1024, faults: faults)
            let state = disk + "/.state"
            let arguments = ["get", server.url("/big.bin").absoluteString, "-o", disk + "/big.bin"]
            let started = Date()
            let first = try await HaulProcess(arguments, in: directory, state: state).wait(timeout: 60)
            let seconds = Date().timeIntervalSince(started)
            print("FULL-DISK: exited \(first.status) after \(String(format: "%.1f", seconds)) s; stdout: \(first.stdout) stderr: \(first.stderr)")
            #expect(first.status == 1)
            // Said by the write that failed (`disk full`) or, when the space watch looked first,
            // by the floor (`8.0 KiB free, floor 30.7 KiB`): the same wait, either way (a loaded CI
            // run saw the second).
            #expect(first.stdout.contains("waiting for disk space (disk full") || first.stdout.contains("waiting for disk space (") && first.stdout.contains(" free, floor "), "\(first.stdout)")
            #expect(first.stderr.contains("haul: cannot save the queue: the disk holding the queue is full; the bytes on disk are kept, and the next haul resumes from them"), "\(first.stderr)")
            #expect(!first.stderr.contains("SQLite") && !first.stderr.contains("GRDB"), "in haul's words: \(first.stderr)")
            let onDisk = try #require(fileLength(disk + "/big.bin.part"))
            #expect(onDisk > 0)

            // Space comes back: the next run resumes from the bytes on disk, whatever the queue said.
            guard try await Self.mountTmpfs(disk, megabytes: 64, remount: true) else { return }
            let second = try await HaulProcess(arguments, in: directory, state: state).wait(timeout: 60)
            #expect(second.status == 0, "\(second.stdout) \(second.stderr)")
            #expect(sha256(ofFile: disk + "/big.bin") == server.sha256("/big.bin"))
            let gets = server.requests("/big.bin")
            #expect(gets.count == 2, "\(gets.map(\.range))")
            #expect(gets.last?.range == "bytes=\(onDisk)-", "resumed from the bytes on disk")
        }
    }
}
