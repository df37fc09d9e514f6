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
        guard let image = try await Ext4Image.make(in: scratch, for: "PowerCutTests") else { return }
        let disk = image.mountPoint
        let directory = disk + "/D"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await Harness.with { h in
            h.server.serve("/p.bin", size: 80_000)
            let id = try await h.session.schedule(h.server.url("/p.bin"), to: .directory(directory))
            let done = try await h.waitCompleted(id)
            #expect(done.completedPath == directory + "/p.bin")
            try #require(try await image.cutPower(), "the shutdown ioctl")
            #expect(unmount(disk))
            try #require(try await image.mountAgain(), "mounted again")
            #expect(sha256(ofFile: directory + "/p.bin") == h.server.sha256("/p.bin"), "the file has its name after the cut")
            #expect(!FileManager.default.fileExists(atPath: directory + "/p.bin.part"))
        }
    }
}
