import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing
import TestSupport

/// A power cut, simulated on a loop-mounted ext4 with its shutdown ioctl (xfstests' `godown`:
/// nothing more reaches the disk), then a mount that replays the journal.
@Suite(.serialized) struct PowerCutTests {
    /// Found by a tester: the rename into place was never made durable (no fsync of the directory),
    /// so a power cut right after `completed` brought the file back under its part file's name, while
    /// the queue's row said where it was; the next run fetched it again beside it.
    @Test func aFilePlacedBeforeAPowerCutKeepsItsName() async throws {
        let scratch = try TemporaryDirectory("haul-powercut")
        let image = scratch.path("fs.img")
        let disk = scratch.path("mnt")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: image, contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: image))
        try handle.truncate(atOffset: 32 << 20)
        try handle.close()
        let made = try await ChildProcess.run("/sbin/mkfs.ext4", ["-q", "-F", image])
        let mounted = made.status == 0 ? try await ChildProcess.run("/bin/mount", ["-o", "loop", image, disk]) : made
        guard mounted.status == 0 else {
            print("PowerCutTests: cannot make and mount an ext4 image here (exit \(mounted.status)); not run")
            return
        }
        defer { unmount(disk) }
        let directory = disk + "/D"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await Harness.with { h in
            h.server.serve("/p.bin", size: 80_000)
            let id = try await h.session.schedule(h.server.url("/p.bin"), to: .directory(directory))
            let done = try await h.waitCompleted(id)
            #expect(done.completedPath == directory + "/p.bin")
            let cut = try await ChildProcess.run("/usr/bin/python3", [
                "-c", "import os, fcntl, struct; fd = os.open('\(disk)', os.O_RDONLY); fcntl.ioctl(fd, 0x8004587D, struct.pack('I', 2))",
            ])
            try #require(cut.status == 0, "the shutdown ioctl")
            #expect(unmount(disk))
            let again = try await ChildProcess.run("/bin/mount", ["-o", "loop", image, disk])
            try #require(again.status == 0, "mounted again")
            #expect(sha256(ofFile: directory + "/p.bin") == h.server.sha256("/p.bin"), "the file has its name after the cut")
            #expect(!FileManager.default.fileExists(atPath: directory + "/p.bin.part"))
        }
    }
}
