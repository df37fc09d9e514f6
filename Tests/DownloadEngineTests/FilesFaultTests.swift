import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Issue 16, the smaller things, against the real loopback server: what a pause claims, a redirect to
/// `file:`, refused credentials, invisible characters in a server's name, and a file larger than
/// the free space.
@Suite(.serialized) struct FilesFaultTests {
    @Test("16: a paused row states the bytes on disk, never the ticker's stale sample")
    func aPauseStatesTheBytesOnDisk() async throws {
        // A ticker that samples once in ten seconds: before the transfer stops, the machine's
        // figure is the first sample (zero), however many bytes are on disk.
        try await Harness.with({ $0.progressInterval = .seconds(10) }) { h in
            let size = 2 * 1024 * 1024
            h.server.serve("/p.bin", size: size, faults: stalled(at: 300_000))
            let target = h.path("p.bin")
            let id = try await h.session.schedule(h.server.url("/p.bin"), to: .file(target))
            try await waitUntil("300,000 bytes on disk") { fileLength(target + ".part") == 300_000 }
            let firstPaused = Task { () -> Download? in
                for await snapshot in h.session.snapshots {
                    if let row = snapshot[id], row.state == .paused { return row }
                }
                return nil
            }
            // Let the reader subscribe before the pause is published.
            try await Task.sleep(for: .milliseconds(50))
            try await h.session.pause(id)
            let shown = try #require(await firstPaused.value)
            #expect(shown.bytesOnDisk == 300_000, "the first snapshot showing the pause says \(shown.bytesOnDisk) bytes")
            #expect(fileLength(target + ".part") == 300_000)
        }
    }

    @Test("16: a row requeued because fewer may run states the bytes on disk, never a stale sample")
    func aRequeueStatesTheBytesOnDisk() async throws {
        try await Harness.with({ $0.progressInterval = .seconds(10); $0.maxActive = 2 }) { h in
            let size = 2 * 1024 * 1024
            h.server.serve("/q0.bin", size: size, faults: stalled(at: 100_000))
            h.server.serve("/q1.bin", size: size, faults: stalled(at: 300_000))
            let first = try await h.session.schedule(h.server.url("/q0.bin"), to: .file(h.path("q0.bin")))
            let second = try await h.session.schedule(h.server.url("/q1.bin"), to: .file(h.path("q1.bin")))
            try await waitUntil("both stalled") {
                fileLength(h.path("q0.bin.part")) == 100_000 && fileLength(h.path("q1.bin.part")) == 300_000
            }
            let firstRequeued = Task { () -> Download? in
                for await snapshot in h.session.snapshots {
                    if let row = snapshot[second], row.state == .queued { return row }
                }
                return nil
            }
            try await Task.sleep(for: .milliseconds(50))
            try await h.session.setMaxActive(1)
            let shown = try #require(await firstRequeued.value)
            #expect(shown.bytesOnDisk == 300_000, "the first snapshot showing the requeue says \(shown.bytesOnDisk) bytes")
            #expect(await h.session.snapshot()[first]?.state == .downloading)
        }
    }

    @Test("16: a redirect to file: is refused for its scheme, not as an invalid URL")
    func aFileRedirectIsAnUnsupportedScheme() async throws {
        try await Harness.with { h in
            h.server.redirect("/to-file", to: "file:///etc/passwd")
            let id = try await h.session.schedule(h.server.url("/to-file"), to: .file(h.path("x.bin")))
            let done = try await h.wait(id) { $0.state.isFinished }
            #expect(done.state == .failed(reason: "refused a redirect to file:///etc/passwd: only http and https"))
            #expect(!FileManager.default.fileExists(atPath: h.path("x.bin")))
        }
    }

    @Test("16: a 401 to credentials given (user:pass@ or an Authorization header) says they were refused")
    func refusedCredentialsAreSaid() async throws {
        try await Harness.with { h in
            // Every request is refused, whatever it carries (a fixed status sends no body to stall).
            h.server.serve("/private.bin", size: 10, faults: stalled(at: 0) {
                $0.fixedStatus = 401
                $0.headers = ["WWW-Authenticate: Basic realm=\"files\""]
            })
            var components = try #require(URLComponents(url: h.server.url("/private.bin"), resolvingAgainstBaseURL: false))
            (components.user, components.password) = ("bob", "wrong")
            let refused = "HTTP 401 Unauthorized: the server refused the credentials given for Basic (realm \"files\")"
            let withUser = try await h.session.schedule(try #require(components.url), to: .file(h.path("a.bin")))
            #expect(try await h.wait(withUser) { $0.state.isFinished }.state == .failed(reason: refused))
            let header = RequestOptions(headers: [HeaderField(name: "Authorization", value: "Bearer nope")])
            let withHeader = try await h.session.schedule(h.server.url("/private.bin"), to: .file(h.path("b.bin")), options: header)
            #expect(try await h.wait(withHeader) { $0.state.isFinished }.state == .failed(reason: refused))
            #expect(h.gets("/private.bin").count == 2, "neither is retried")
        }
    }

    @Test("16: zero-width and bidi characters leave a server's name, and a leading - or . is made visible")
    func invisibleCharactersLeaveAServersName() async throws {
        try await Harness.with { h in
            let cases = [
                ("/cd1", "attachment; filename=\"-rf\u{200B}\""),
                ("/cd2", "attachment; filename*=UTF-8''%E2%80%8F.bashrc%E2%81%A0"),
                ("/cd3", "attachment; filename=\"in\u{FEFF}voice\u{202E}fdp.exe\""),
            ]
            for (path, header) in cases {
                var faults = Faults()
                faults.contentDisposition = header
                h.server.serve(path, size: 100, faults: faults)
                let id = try await h.session.schedule(h.server.url(path), to: .directory(h.directory))
                try await h.waitCompleted(id)
            }
            let names = try FileManager.default.contentsOfDirectory(atPath: h.directory).sorted()
            #expect(names == ["_-rf", "_.bashrc", "invoicefdp.exe"])
        }
    }

    @Test("16, 18.1: a file larger than the free space waits for room before its first byte, leaving nothing behind")
    func aFileLargerThanTheFreeSpaceWaitsAtOnce() async throws {
        try await Harness.with { h in
            // A pebibyte: larger than any disk this runs on. Throttled, so that a haul that tried
            // would still be at it when the test gives up.
            h.server.serve("/huge.bin", size: 1 << 50, faults: throttled(64 * 1024))
            let target = h.path("huge.bin")
            let id = try await h.session.schedule(h.server.url("/huge.bin"), to: .file(target))
            let waiting = try await h.wait(id, timeout: 10) { if case .waitingForSpace = $0.state { true } else { false } }
            let reason = try #require(waiting.state.reason)
            // More than the whole file system: said plainly, not as a shortfall of free space.
            #expect(reason.hasPrefix("waiting for disk space (needs 1.0 PiB; the file system holds ") && reason.hasSuffix(" in all)"), "\(reason)")
            #expect(waiting.bytesOnDisk == 0)
            #expect(h.server.requests("/huge.bin").count == 1, "one request, answered by its length; no body written")
            #expect(try FileManager.default.contentsOfDirectory(atPath: h.directory).isEmpty, "no part file to delete")
        }
    }

    /// An attempt that starts with the disk under its floor waits before its request, and notes
    /// none: the history says `started` only for requests sent.
    @Test func underTheFloorNoRequestIsSentOrNoted() async throws {
        try await Harness.with({ $0.minFree = .bytes(Int64.max / 2) }) { h in
            h.server.serve("/f.bin", size: 1000)
            let id = try await h.session.schedule(h.server.url("/f.bin"), to: .file(h.path("f.bin")))
            let waiting = try await h.wait(id, timeout: 10) { if case .waitingForSpace = $0.state { true } else { false } }
            #expect(waiting.state.reason?.hasPrefix("waiting for disk space") == true, "\(waiting.state)")
            #expect(h.server.requests("/f.bin").isEmpty)
            let kinds = try await h.session.history(id).map(\.kind)
            #expect(kinds == [.added, .waiting], "\(kinds)")
        }
    }

    /// A symbolic link a person put at a paused download's part file is never written through: the
    /// download goes on in a part file of its own, and the link's target stays as it was. A tester's
    /// link was resumed through: a file outside the directory rewritten, and the spliced file
    /// reported completed, exit 0.
    @Test("19: a symbolic link at a paused download's part file is left alone, never written through")
    func aSymlinkAtThePartFileIsNeverWrittenThrough() async throws {
        try await Harness.with { h in
            h.server.serve("/s.bin", size: 200_000, faults: stalled(at: 60_000))
            let target = h.path("s.bin")
            let id = try await h.session.schedule(h.server.url("/s.bin"), to: .file(target))
            try await waitUntil("60,000 bytes on disk") { fileLength(target + ".part") == 60_000 }
            try await h.session.pause(id)
            _ = try await h.wait(id) { $0.state == .paused }
            let outside = h.path("outside.bin")
            let theirs = Data((0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            try theirs.write(to: URL(fileURLWithPath: outside))
            #expect(unlink(target + ".part") == 0)
            #expect(symlink(outside, target + ".part") == 0)
            h.server.serve("/s.bin", size: 200_000)
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            let placed = try #require(done.completedPath)
            #expect(sha256(ofFile: placed) == h.server.sha256("/s.bin"))
            var info = stat()
            #expect(lstat(placed, &info) == 0 && info.st_mode & S_IFMT == S_IFREG, "the file is a file, not the link")
            #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == theirs, "the link's target is as it was")
            #expect(lstat(target + ".part", &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "the link is left where it was")
        }
    }

    /// A FIFO at a download's part file name is not opened as its file (a tester's hung the
    /// download, and later every start of the queue): the download goes on beside it.
    @Test("19: a FIFO at a part file's name is passed over, never opened")
    func aFIFOAtThePartFileIsPassedOver() async throws {
        try await Harness.with { h in
            h.server.serve("/p.bin", size: 3_000)
            let target = h.path("p.bin")
            #expect(mkfifo(target + ".part", 0o644) == 0)
            let id = try await h.session.schedule(h.server.url("/p.bin"), to: .file(target))
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: try #require(done.completedPath)) == h.server.sha256("/p.bin"))
            var info = stat()
            #expect(lstat(target + ".part", &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "the FIFO stays")
        }
    }

    /// A file system that counts no blocks (ramfs) has no floor: a tester's download there waited
    /// for room forever ("needs 2.8 MiB; the file system holds 0 B in all").
    @Test("19: a download into a file system that counts no room (ramfs) is not held by the floor")
    func aFileSystemWithoutACountOfRoomHasNoFloor() async throws {
        let scratch = try TemporaryDirectory("haul-ramfs")
        let disk = scratch.path("mnt")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        let mounted = try await ChildProcess.run("/bin/mount", ["-t", "ramfs", "ramfs", disk])
        guard mounted.status == 0 else {
            print("FilesFaultTests: cannot mount a ramfs here (exit \(mounted.status)); not run")
            return
        }
        defer { _ = unmount(disk) }
        #expect(DiskWatch.reading(directory: disk, floor: .bytes(1 << 20)) == nil)
        try await Harness.with({ $0.minFree = .bytes(1 << 20) }) { h in
            h.server.serve("/r.bin", size: 300_000)
            let id = try await h.session.schedule(h.server.url("/r.bin"), to: .directory(disk))
            let done = try await h.waitCompleted(id, timeout: 10)
            #expect(sha256(ofFile: try #require(done.completedPath)) == h.server.sha256("/r.bin"))
        }
    }

    /// A tmpfs mounted with `options` in `scratch`; nil (said) where none can be mounted here.
    static func tmpfs(_ options: String, in scratch: TemporaryDirectory) async throws -> String? {
        let other = scratch.path("b")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let mounted = try await ChildProcess.run("/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", other])
        guard mounted.status == 0 else {
            print("FilesFaultTests: cannot mount a tmpfs here (exit \(mounted.status)); not run")
            return nil
        }
        return other
    }

    /// A copy for another requester on a file system without room for it waits for room there,
    /// and is placed once there is, without fetching again: a tester's row said `failed` (a full
    /// disk never fails a download), and the first requester's file was never placed.
    @Test("19: a copy for another requester that finds no room waits for it, then both files are placed")
    func aCopyWithoutRoomWaitsForRoomThenBothArePlaced() async throws {
        let scratch = try TemporaryDirectory("haul-copy-room")
        guard let other = try await Self.tmpfs("size=1m", in: scratch) else { return }
        defer { _ = unmount(other) }
        try await Harness.with { h in
            var held = Faults()
            held.holdAt = [100_000]
            h.server.serve("/big.bin", size: 3_000_000, faults: held)
            let id = try await h.session.schedule(h.server.url("/big.bin"), to: .directory(h.directory))
            #expect(try await h.session.schedule(h.server.url("/big.bin"), to: .directory(other)) == id)
            h.server.release("/big.bin")
            let waiting = try await h.wait(id) { if case .waitingForSpace = $0.state { true } else { $0.state.isFinished } }
            guard case .waitingForSpace(let reason) = waiting.state else {
                Issue.record("ended \(waiting.state)")
                return
            }
            // Seen before the copy (the room and the floor there are read first); a copy that finds
            // none all the same (another program took it) waits as `disk full`.
            #expect(reason == "waiting for disk space (needs 2.8 MiB; the file system holds 1.0 MiB in all)", "\(reason)")
            #expect(fileLength(h.path("big.bin.part")) == 3_000_000, "the whole file is kept")
            let grown = try await ChildProcess.run("/bin/mount", ["-o", "remount,size=8m", other])
            try #require(grown.status == 0, "tmpfs grown")
            await h.session.checkSpace()
            let done = try await h.waitCompleted(id)
            #expect(done.completedPaths == [h.path("big.bin"), other + "/big.bin"])
            #expect(sha256(ofFile: h.path("big.bin")) == h.server.sha256("/big.bin"))
            #expect(sha256(ofFile: other + "/big.bin") == h.server.sha256("/big.bin"))
            #expect(h.gets("/big.bin").count == 1, "placed again, not fetched again")
        }
    }

    /// A copy onto another file system keeps the floor there, as a download there does: a tester's
    /// copy for another requester went under `--min-free` (and `--purge-when-low` then purged a
    /// paused download's bytes to make up for it). It waits, and is placed once it fits above it.
    @Test("19: a copy for another requester keeps the floor of its file system")
    func aCopyKeepsTheFloorOfItsFileSystem() async throws {
        let scratch = try TemporaryDirectory("haul-copy-floor")
        guard let other = try await Self.tmpfs("size=4m", in: scratch) else { return }
        defer { _ = unmount(other) }
        try await Harness.with({ $0.minFree = .bytes(2 * 1024 * 1024) }) { h in
            var held = Faults()
            held.holdAt = [100_000]
            h.server.serve("/floor.bin", size: 3_000_000, faults: held)
            let id = try await h.session.schedule(h.server.url("/floor.bin"), to: .directory(h.directory))
            #expect(try await h.session.schedule(h.server.url("/floor.bin"), to: .directory(other)) == id)
            h.server.release("/floor.bin")
            let waiting = try await h.wait(id) { if case .waitingForSpace = $0.state { true } else { $0.state.isFinished } }
            guard case .waitingForSpace(let reason) = waiting.state else {
                Issue.record("ended \(waiting.state): the copy went under the floor")
                return
            }
            #expect(reason == "waiting for disk space (needs 2.8 MiB; the file system holds 4.0 MiB in all, floor 2.0 MiB: lower --min-free)", "\(reason)")
            #expect(!FileManager.default.fileExists(atPath: other + "/floor.bin"), "nothing under the floor")
            let grown = try await ChildProcess.run("/bin/mount", ["-o", "remount,size=8m", other])
            try #require(grown.status == 0, "tmpfs grown")
            await h.session.checkSpace()
            let done = try await h.waitCompleted(id)
            #expect(done.completedPaths == [h.path("floor.bin"), other + "/floor.bin"])
            #expect(sha256(ofFile: other + "/floor.bin") == h.server.sha256("/floor.bin"))
            #expect(h.gets("/floor.bin").count == 1, "placed, not fetched again")
        }
    }

    /// A purge leaves a paused download whose part file cannot be removed (its file system mounted
    /// read-only) as it is, its bytes counted: a tester's row said `purged: 800 KiB … discarded`,
    /// and the purge `freed`, of a file still there. Writable again, it is purged.
    @Test("19: a purge spares a part file that cannot be removed, and says nothing of it as freed")
    func aPurgeSparesAPartFileThatCannotBeRemoved() async throws {
        let scratch = try TemporaryDirectory("haul-purge-ro")
        guard let disk = try await Self.tmpfs("size=8m", in: scratch) else { return }
        defer { _ = unmount(disk) }
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            h.server.serve("/ro.bin", size: 2_000_000, faults: stalled(at: 300_000))
            let id = try await h.session.schedule(h.server.url("/ro.bin"), to: .file(disk + "/ro.bin"))
            try await h.wait(id) { $0.bytesOnDisk == 300_000 }
            try await h.session.pause(id)
            let readOnly = try await ChildProcess.run("/bin/mount", ["-o", "remount,ro", disk])
            try #require(readOnly.status == 0, "made read-only")
            #expect(await h.session.purgePaused() == 0, "nothing freed")
            let spared = try #require(await h.session.snapshot()[id])
            #expect(spared.bytesOnDisk == 300_000 && !spared.isPurged, "\(spared.lastError ?? "")")
            #expect(fileLength(disk + "/ro.bin.part") == 300_000)
            let writable = try await ChildProcess.run("/bin/mount", ["-o", "remount,rw", disk])
            try #require(writable.status == 0, "made writable")
            #expect(await h.session.purgePaused() == 300_000)
            #expect(await h.session.snapshot()[id]?.bytesOnDisk == 0)
            #expect(!FileManager.default.fileExists(atPath: disk + "/ro.bin.part"))
        }
    }

    /// A checksum that joins a finished file waiting for room to be placed is checked before the
    /// placement: a tester's wrong one was adopted after the transfer's check, and the row said
    /// completed and verified, the hook told the wrong digest, exit 0. The right one places both.
    @Test("19: a checksum that joins a file waiting for room to be placed is checked first", arguments: [false, true])
    func aChecksumJoiningAFileWaitingForRoomIsChecked(right: Bool) async throws {
        let scratch = try TemporaryDirectory("haul-copy-sum")
        guard let other = try await Self.tmpfs("size=1m", in: scratch) else { return }
        defer { _ = unmount(other) }
        try await Harness.with { h in
            var held = Faults()
            held.holdAt = [100_000]
            h.server.serve("/sum.bin", size: 3_000_000, faults: held)
            let id = try await h.session.schedule(h.server.url("/sum.bin"), to: .directory(h.directory))
            #expect(try await h.session.schedule(h.server.url("/sum.bin"), to: .directory(other)) == id)
            h.server.release("/sum.bin")
            _ = try await h.wait(id) { if case .waitingForSpace = $0.state { true } else { $0.state.isFinished } }
            let third = h.path("third")
            try FileManager.default.createDirectory(atPath: third, withIntermediateDirectories: true)
            let digest = right ? h.server.sha256("/sum.bin") : String(repeating: "ab", count: 32)
            let asked = Checksum(algorithm: .sha256, hex: digest)
            #expect(try await h.session.schedule(h.server.url("/sum.bin"), to: .directory(third), options: RequestOptions(checksum: asked)) == id)
            let grown = try await ChildProcess.run("/bin/mount", ["-o", "remount,size=8m", other])
            try #require(grown.status == 0, "tmpfs grown")
            await h.session.checkSpace()
            let done = try await h.wait(id) { $0.state.isFinished }
            if right {
                #expect(done.state == .completed && done.completedPaths.count == 3, "\(done.state)")
                #expect(sha256(ofFile: third + "/sum.bin") == digest)
            } else {
                #expect(done.state == .failed(reason: "sha-256 mismatch: expected \(digest), got \(h.server.sha256("/sum.bin")) (kept as .part)"), "\(done.state)")
                #expect(fileLength(h.path("sum.bin.part")) == 3_000_000, "the bytes are kept")
                #expect(!FileManager.default.fileExists(atPath: third + "/sum.bin") && !FileManager.default.fileExists(atPath: h.path("sum.bin")), "nothing placed")
            }
            #expect(h.gets("/sum.bin").count == 1)
        }
    }

    /// A copy for another requester into a read-only file system pauses the download with its file
    /// whole, as a part file that cannot be written does; resumed once writable, both files are
    /// placed after a 416 (a tester's row said `failed`).
    @Test("19: a copy into a read-only file system pauses the download; resumed, both files are placed")
    func aCopyIntoAReadOnlyFileSystemPauses() async throws {
        let scratch = try TemporaryDirectory("haul-copy-ro")
        guard let other = try await Self.tmpfs("ro,size=8m", in: scratch) else { return }
        defer { _ = unmount(other) }
        try await Harness.with { h in
            var held = Faults()
            held.holdAt = [10_000]
            h.server.serve("/ro.bin", size: 200_000, faults: held)
            let id = try await h.session.schedule(h.server.url("/ro.bin"), to: .directory(h.directory))
            #expect(try await h.session.schedule(h.server.url("/ro.bin"), to: .directory(other)) == id)
            h.server.release("/ro.bin")
            let paused = try await h.wait(id) { $0.state == .paused || $0.state.isFinished }
            #expect(paused.state == .paused, "ended \(paused.state)")
            #expect(paused.lastError?.hasSuffix("(paused until it is writable)") == true, "\(paused.lastError ?? "")")
            #expect(fileLength(h.path("ro.bin.part")) == 200_000, "the whole file is kept")
            let writable = try await ChildProcess.run("/bin/mount", ["-o", "remount,rw", other])
            try #require(writable.status == 0, "made writable")
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(done.completedPaths == [h.path("ro.bin"), other + "/ro.bin"])
            #expect(sha256(ofFile: h.path("ro.bin")) == h.server.sha256("/ro.bin"))
            #expect(sha256(ofFile: other + "/ro.bin") == h.server.sha256("/ro.bin"))
            #expect(h.server.requests("/ro.bin").map(\.status) == [200, 206], "found whole by its last 4 KiB, not fetched again")
        }
    }
}
