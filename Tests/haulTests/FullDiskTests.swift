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

    /// Runs `body` with a server, a scratch directory and a tmpfs of `megabytes` mounted at its
    /// `disk` (unmounted after); not run where mounting is not allowed.
    static func withDisk(megabytes: Int, _ body: (LoopbackServer, _ directory: String, _ disk: String) async throws -> Void) async throws {
        try await CLI.withServer { server, directory in
            let disk = directory + "/disk"
            try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
            guard try await mountTmpfs(disk, megabytes: megabytes) else { return }
            defer { unmount(disk) }
            try await body(server, directory, disk)
        }
    }

    @Test func aQueueThatCannotBeSavedIsSaidOnStderrExitsOneAndRecoversNextTime() async throws {
        try await Self.withDisk(megabytes: 3) { server, directory, disk in
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
            #expect(gets.last?.range == resumeRange(keeping: onDisk), "resumed from the bytes on disk")
        }
    }

    /// The queue's disk fills while a download to another disk runs. Found by use: `haul get` went
    /// on, placed the file and said `completed` of a row never saved, and the next run, finding no
    /// part file, fetched it again beside itself (`f.bin.1`). Now it says so and ends at once,
    /// exit 1, with the file still a part file; the next run resumes from those bytes.
    @Test func aQueueWhoseDiskFillsMidRunEndsAtOnceAndPlacesNothingUnsaved() async throws {
        try await Self.withDisk(megabytes: 2) { server, directory, disk in
            var faults = Faults()
            faults.throttleBytesPerSecond = 512 * 1024
            server.serve("/f.bin", size: 4 * 1024 * 1024, faults: faults)
            let state = disk + "/.state"
            let arguments = ["get", server.url("/f.bin").absoluteString, "-d", directory]
            let run = try HaulProcess(arguments, in: directory, state: state)
            let part = directory + "/f.bin.part"
            #expect(try await eventually("the download runs") { (fileLength(part) ?? 0) > 128 * 1024 })
            // Nothing else fits on the queue's disk now.
            _ = try await ChildProcess.run("/bin/dd", ["if=/dev/zero", "of=\(disk)/filler", "bs=64k"], in: "/")
            let first = try await run.wait(timeout: 60)
            #expect(first.status == 1, "\(first.stdout) \(first.stderr)")
            #expect(first.stderr.contains("haul: cannot save the queue: the disk holding the queue is full"), "\(first.stderr)")
            #expect(!first.stdout.contains("completed"), "\(first.stdout)")
            #expect(!FileManager.default.fileExists(atPath: directory + "/f.bin"), "nothing placed whose row was not saved")
            let kept = try #require(fileLength(part))
            #expect(kept > 0)

            unlink(disk + "/filler")
            let second = try await HaulProcess(arguments, in: directory, state: state).wait(timeout: 60)
            #expect(second.status == 0, "\(second.stdout) \(second.stderr)")
            #expect(CLI.files(directory).filter { $0.hasPrefix("f.bin") } == ["f.bin"], "placed once: \(CLI.files(directory))")
            #expect(sha256(ofFile: directory + "/f.bin") == server.sha256("/f.bin"))
            let resumed = try #require(server.requests("/f.bin").last?.range)
            #expect(resumed.hasPrefix("bytes=") && resumed != "bytes=0-", "resumed from the bytes on disk: \(resumed)")
        }
    }

    /// A runner whose queue cannot be saved refuses changes sent from other shells (a tester:
    /// `haul add` and `haul pause` said they were done, exit 0, and were gone after the stop); its
    /// list says the rows are not saved.
    @Test func aRunnerThatCannotSaveItsQueueRefusesChangesFromOtherShells() async throws {
        try await Self.withDisk(megabytes: 2) { server, directory, disk in
            var faults = Faults()
            faults.throttleBytesPerSecond = 256 * 1024
            server.serve("/f.bin", size: 16 * 1024 * 1024, faults: faults)
            server.serve("/e.bin", size: 1_000)
            let state = disk + "/.state"
            let started = try await HaulProcess(["start", server.url("/f.bin").absoluteString, "-d", directory], in: directory, state: state).wait()
            #expect(started.status == 0, "\(started.stderr)")
            #expect(try await eventually("the download runs") { (fileLength(directory + "/f.bin.part") ?? 0) > 64 * 1024 })
            _ = try await ChildProcess.run("/bin/dd", ["if=/dev/zero", "of=\(disk)/filler", "bs=64k"], in: "/")
            // A checkpoint finds the disk full within a second or two.
            #expect(try await eventually(timeout: 20, "the runner finds its queue unsaved", every: .milliseconds(200)) {
                (try? await HaulProcess(["list"], in: directory, state: state).wait().stderr.contains("cannot save the queue")) == true
            })
            let added = try await HaulProcess(["add", server.url("/e.bin").absoluteString, "-d", directory], in: directory, state: state).wait()
            #expect(added.status == 1)
            #expect(added.stderr == "haul: error: cannot save the queue: the disk holding the queue is full; nothing changed\n", "\(added.stderr)")
            let paused = try await HaulProcess(["pause", "1"], in: directory, state: state).wait()
            #expect(paused.status == 1, "\(paused.stdout) \(paused.stderr)")
            let listed = try await HaulProcess(["list"], in: directory, state: state).wait()
            #expect(!listed.stdout.contains("e.bin"), "nothing added: \(listed.stdout)")
            #expect(listed.stderr.contains("these rows are not saved"), "\(listed.stderr)")
            unlink(disk + "/filler")
            _ = try await HaulProcess(["stop"], in: directory, state: state).wait()
        }
    }

    /// A queue that cannot even be opened, its disk full: one line, exit 1 (no bad input; found by
    /// use: it said 2, which is bad input's).
    @Test func aQueueWhoseDiskIsFullAtTheStartExitsOne() async throws {
        try await Self.withDisk(megabytes: 1) { server, directory, disk in
            _ = try await ChildProcess.run("/bin/dd", ["if=/dev/zero", "of=\(disk)/filler", "bs=64k"], in: "/")
            let run = try await HaulProcess(["add", server.url("/x.bin").absoluteString, "-d", directory], in: directory, state: disk + "/.state").wait()
            #expect(run.status == 1, "\(run.stderr)")
            #expect(run.stderr.hasPrefix("haul: error: cannot open the queue database \(disk)/.state/queue.sqlite: the disk holding the queue is full"), "\(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
        }
    }
}
