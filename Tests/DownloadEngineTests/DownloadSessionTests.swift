import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing
import TestSupport

/// The session against a real loopback server and the real AsyncHTTPClient.
@Suite struct DownloadSessionTests {
    @Test func plainDownloadMatchesTheServersBytes() async throws {
        try await Harness.with { h in
            h.server.serve("/plain.bin", size: 3 * 1024 * 1024 + 123)
            let target = h.path("plain.bin")
            let id = try await h.session.schedule(h.server.url("/plain.bin"), to: .file(target))
            let download = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/plain.bin"))
            #expect(download.bytesOnDisk == 3 * 1024 * 1024 + 123)
            #expect(download.totalBytes == Int64(3 * 1024 * 1024 + 123))
            #expect(download.etag != nil && download.lastModified != nil)
            #expect(download.lastStatus == 200)
            #expect(!FileManager.default.fileExists(atPath: target + ".part"))
            let gets = h.gets("/plain.bin")
            #expect(gets.count == 1)
            #expect(gets.first?.range == nil)
        }
    }

    @Test func pauseAtHalfThenResumeAsksForTheRest() async throws {
        try await Harness.with { h in
            let size = 4 * 1024 * 1024
            h.server.serve("/big.bin", size: size, faults: stalled(at: size / 2))
            let target = h.path("big.bin")
            let id = try await h.session.schedule(h.server.url("/big.bin"), to: .file(target))
            try await h.wait(id) { $0.bytesOnDisk == Int64(size / 2) }
            try await h.session.pause(id)

            let paused = try #require(await h.session.snapshot()[id])
            #expect(paused.state == .paused)
            let offset = paused.bytesOnDisk
            #expect(offset == Int64(size / 2))
            #expect(fileLength(target + ".part") == offset)
            #expect(h.gets("/big.bin").count == 1)

            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/big.bin"))
            let gets = h.gets("/big.bin")
            #expect(gets.count == 2)
            #expect(gets.last?.range == resumeRange(keeping: offset))
            #expect(done.etag?.hasPrefix("\"") == true)
            #expect(gets.last?.ifRange == done.etag)
            #expect(gets.last?.status == 206)
            #expect(gets.last?.bodyBytesSent == size / 2 + 4096, "the rest, and the 4 KiB before it to compare with the disk")
            #expect(done.resumeCount == 1)
            #expect(done.resumeOffset == offset)
            #expect(done.bytesSavedByResume == offset)
            #expect(!done.unverifiedResume)
        }
    }

    @Test func aResetMidBodyResumesByItself() async throws {
        try await Harness.with { h in
            h.server.serve("/reset.bin", size: 3 * 1024 * 1024, faults: {
                var faults = Faults()
                faults.resetAfterBytes = 1024 * 1024
                return faults
            }())
            let target = h.path("reset.bin")
            let id = try await h.session.schedule(h.server.url("/reset.bin"), to: .file(target))
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/reset.bin"))
            let gets = h.gets("/reset.bin")
            #expect(gets.count == 2)
            let second = try #require(gets.last?.range)
            let offset = try #require(Int64(second.dropFirst("bytes=".count).dropLast()))
            // A reset may drop what was still in flight, never more than the server sent.
            #expect(offset > 0 && offset <= 1024 * 1024)
            #expect(done.resumeCount == 1)
            #expect(done.lastError != nil)
        }
    }

    @Test func aResourceThatChangedWhilePausedRestartsWithoutSplicing() async throws {
        try await Harness.with { h in
            let size = 2 * 1024 * 1024
            h.server.serve("/changing.bin", size: size, faults: stalled(at: size / 2))
            let target = h.path("changing.bin")
            let id = try await h.session.schedule(h.server.url("/changing.bin"), to: .file(target))
            try await h.wait(id) { $0.bytesOnDisk == Int64(size / 2) }
            try await h.session.pause(id)
            let oldDigest = h.server.sha256("/changing.bin")
            h.server.change("/changing.bin")
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/changing.bin"))
            #expect(sha256(ofFile: target) != oldDigest)
            #expect(done.restartCount == 1)
            #expect(done.restartReason == "resource changed")
            #expect(done.resumeCount == 0)
            #expect(done.resumeOffset == nil)
            let gets = h.gets("/changing.bin")
            #expect(gets.count == 2)
            #expect(gets.last?.ifRange != nil)
            #expect(gets.last?.status == 200)
        }
    }

    /// A server whose tag does not follow the bytes (Apache's `FileETag INode`: a file rewritten in
    /// place to another length keeps it) answers the resume with a 206 of the new length, or a 416,
    /// or, ignoring ranges, a 200 of the new length: each time the new version is fetched whole and
    /// the row says why (a tester's refusal of the 200 left such servers failing at every try).
    @Test(arguments: [(false, false), (false, true), (true, false), (true, true)])
    func aTagThatOutlivesItsBytesTakesTheNewVersion(ignoringRanges: Bool, grows: Bool) async throws {
        try await Harness.with { h in
            let size = 2 * 1024 * 1024
            h.server.serve("/inode.bin", size: size, faults: stalled(at: size / 2) { $0.ignoreRange = ignoringRanges })
            let target = h.path("inode.bin")
            let id = try await h.session.schedule(h.server.url("/inode.bin"), to: .file(target))
            try await h.wait(id) { $0.bytesOnDisk == Int64(size / 2) }
            try await h.session.pause(id)
            let paused = try #require(await h.session.snapshot()[id])
            // A quarter of the old length (shorter than the bytes kept), or twice it.
            let newSize = grows ? size * 2 : size / 4
            h.server.change("/inode.bin", size: newSize, keepingValidators: true)
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(done.etag == paused.etag, "the tag did not change")
            #expect(sha256(ofFile: target) == h.server.sha256("/inode.bin"), "the new version, whole")
            #expect(fileLength(target) == Int64(newSize))
            let why = switch (ignoringRanges, grows) {
            case (true, _): "resource changed (length \(newSize), was \(size), under the same validator)"
            case (false, true): "resource changed (length \(newSize), was \(size))"
            case (false, false): "range not satisfiable (resource shorter than the part file)"
            }
            #expect(done.restartReason == why, "\(done.restartReason ?? "")")
        }
    }

    @Test func aServerThatIgnoresRangesRestartsFromZero() async throws {
        try await Harness.with { h in
            let size = 2 * 1024 * 1024
            h.server.serve("/norange.bin", size: size, faults: stalled(at: size / 2) { $0.ignoreRange = true })
            let target = h.path("norange.bin")
            let id = try await h.session.schedule(h.server.url("/norange.bin"), to: .file(target))
            try await h.wait(id) { $0.bytesOnDisk == Int64(size / 2) }
            try await h.session.pause(id)
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/norange.bin"))
            #expect(done.restartReason == "server ignores ranges")
            #expect(done.restartCount == 1)
            #expect(done.resumeCount == 0)
            #expect(h.gets("/norange.bin").count == 2)
            #expect(h.gets("/norange.bin").last?.range == resumeRange(keeping: size / 2))
            #expect(h.gets("/norange.bin").last?.status == 200)
        }
    }

    /// A download of `path` (`size` bytes, `adjust`ed faults) paused with exactly `kept` bytes on
    /// disk; its id and destination.
    func pausedAt(
        _ kept: Int, of path: String, size: Int = 1024 * 1024, _ h: Harness, _ adjust: (inout Faults) -> Void = { _ in }
    ) async throws -> (DownloadID, String) {
        h.server.serve(path, size: size, faults: stalled(at: kept, adjust))
        let target = h.path(String(path.dropFirst()))
        let id = try await h.session.schedule(h.server.url(path), to: .file(target))
        try await h.wait(id) { $0.bytesOnDisk == Int64(kept) }
        try await h.session.pause(id)
        return (id, target)
    }

    @Test func aResumeAnsweredByAnErrorPageKeepsTheBytesAndSaysWhatTheServerSent() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let kept = 300 * 1024
            let (id, target) = try await pausedAt(kept, of: "/page.bin", h)
            let prefix = try #require(FileManager.default.contents(atPath: target + ".part"))
            // Before: the 300 KB were deleted and the 67-byte page saved as the completed file.
            var faults = Faults()
            faults.errorPageOnRangeRequests = 1
            h.server.setFaults("/page.bin", faults)
            try await h.session.resume(id)
            let failed = try await h.wait(id) { $0.state.isFinished }
            guard case .failed(let reason) = failed.state else {
                Issue.record("ended \(failed.state)")
                return
            }
            #expect(reason.hasPrefix("the server answered the resume with HTTP 200 (text/html"), "\(reason)")
            #expect(reason.contains("300 KiB on disk are kept"), "\(reason)")
            #expect(FileManager.default.contents(atPath: target + ".part") == prefix, "the bytes on disk are untouched")
            #expect(!FileManager.default.fileExists(atPath: target))
            // The server is right again: a retry resumes from the bytes kept.
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/page.bin"))
            #expect(done.restartCount == 0)
            #expect(h.gets("/page.bin").last?.range == resumeRange(keeping: kept))
            #expect(h.gets("/page.bin").last?.status == 206)
        }
    }

    @Test func aRestartKeepsTheOldBytesUntilTheNewVersionsFirstBytesCame() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let kept = 256 * 1024
            let (id, target) = try await pausedAt(kept, of: "/swap.bin", h)
            // The server now ignores ranges, and its first 200 drops right after the head.
            var faults = Faults()
            faults.ignoreRange = true
            faults.closeAfterBytes = 0
            h.server.setFaults("/swap.bin", faults)
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/swap.bin"))
            #expect(done.restartReason == "server ignores ranges")
            let gets = h.gets("/swap.bin")
            #expect(gets.count == 3, "\(gets.map(\.range))")
            // Before: the dropped 200 had emptied the part file, and the retry asked for everything.
            #expect(gets.last?.range == resumeRange(keeping: kept), "the retry still had the old bytes to resume from")
        }
    }

    @Test func aRestartReplacesTheOldBytesOnlyOnceTheNewVersionsFirstBytesAreSynced() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let kept = 256 * 1024
            let (id, target) = try await pausedAt(kept, of: "/sync.bin", h)
            let part = target + ".part"
            let old = try #require(FileManager.default.contents(atPath: part))
            // A new version, its body held after 8 KiB (fewer than the 16 KiB synced before the
            // swap), then at 64 KiB.
            h.server.change("/sync.bin")
            var faults = Faults()
            faults.holdAt = [8 * 1024, 64 * 1024]
            h.server.setFaults("/sync.bin", faults)
            let new = h.server.content("/sync.bin")
            try await h.session.resume(id)
            try await eventually("the resume was answered", every: .milliseconds(20)) { h.gets("/sync.bin").count == 2 }
            try await Task.sleep(for: .milliseconds(300))
            #expect(FileManager.default.contents(atPath: part) == old, "8 KiB of a new version are no reason to drop 256 KiB")
            h.server.release("/sync.bin")
            // At 64 KiB: the new version's first bytes took the part file's place, synced.
            try await eventually("the part file holds the new version", every: .milliseconds(20)) {
                guard let bytes = FileManager.default.contents(atPath: part), bytes.count >= 16 * 1024 else { return false }
                return Array(bytes) == Array(new.prefix(bytes.count))
            }
            let siblings = try FileManager.default.contentsOfDirectory(atPath: h.path(""))
            #expect(!siblings.contains { $0.hasSuffix(".new") }, "\(siblings)")
            h.server.release("/sync.bin")
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/sync.bin"))
            #expect(done.restartCount == 1)
        }
    }

    @Test func withoutValidatorsAResumeIsCheckedByTheOverlapWithTheBytesOnDisk() async throws {
        try await Harness.with { h in
            let size = 2 * 1024 * 1024
            let (id, target) = try await pausedAt(size / 2, of: "/bare.bin", size: size, h) { $0.omitETag = true; $0.omitLastModified = true }
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/bare.bin"))
            #expect(done.overlapChecked)
            #expect(!done.unverifiedResume)
            #expect(done.resumeCount == 1)
            #expect(done.resumeOffset == Int64(size / 2))
            #expect(done.restartCount == 0)
            let last = try #require(h.gets("/bare.bin").last)
            // 64 KiB before the bytes on disk, compared before anything was appended.
            #expect(last.range == "bytes=\(size / 2 - 65_536)-")
            #expect(last.ifRange == nil)
            #expect(last.status == 206)
        }
    }

    @Test func withoutValidatorsAChangeAtTheSameLengthIsCaughtByTheOverlap() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let size = 2 * 1024 * 1024
            let (id, target) = try await pausedAt(size / 2, of: "/same.bin", size: size, h) { $0.omitETag = true; $0.omitLastModified = true }
            // Another version of the same length and no validator: `Range: bytes=N-` would splice it.
            let old = h.server.sha256("/same.bin")
            h.server.change("/same.bin")
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(h.server.sha256("/same.bin") != old)
            #expect(sha256(ofFile: target) == h.server.sha256("/same.bin"), "never a splice of two versions")
            #expect(done.restartCount == 1)
            #expect(done.restartReason == "resource changed (checked by overlap)")
            let gets = h.gets("/same.bin")
            #expect(gets.map(\.range) == [nil, "bytes=\(size / 2 - 65_536)-", nil], "checked, then fetched whole")
        }
    }

    @Test func withoutValidatorsAChangedLengthRestarts() async throws {
        try await Harness.with { h in
            let size = 2 * 1024 * 1024
            var faults = Faults.noValidators
            faults.stallAfterBytes = size / 2
            h.server.serve("/grows.bin", size: size, faults: faults)
            let target = h.path("grows.bin")
            let id = try await h.session.schedule(h.server.url("/grows.bin"), to: .file(target))
            try await h.wait(id) { $0.bytesOnDisk == Int64(size / 2) }
            try await h.session.pause(id)
            h.server.change("/grows.bin", size: size + 4096)
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/grows.bin"))
            #expect(done.restartCount == 1)
            #expect(done.restartReason?.contains("length") == true)
            #expect(done.bytesOnDisk == Int64(size + 4096))
        }
    }

    @Test func twoServiceUnavailableAnswersThenSuccess() async throws {
        try await Harness.with { h in
            var faults = Faults()
            faults.failFirst = 2
            faults.retryAfter = "0"
            h.server.serve("/busy.bin", size: 256 * 1024, faults: faults)
            let target = h.path("busy.bin")
            let id = try await h.session.schedule(h.server.url("/busy.bin"), to: .file(target))
            let done = try await h.wait(id) { $0.state.isFinished }
            #expect(done.state == .completed)
            #expect(done.lastError == "HTTP 503 Service Unavailable", "the waits said why")
            #expect(h.gets("/busy.bin").map(\.status) == [503, 503, 200])
            #expect(sha256(ofFile: target) == h.server.sha256("/busy.bin"))
            #expect(!FileManager.default.fileExists(atPath: target + ".part"))
        }
    }

    @Test func retryAfterIsAMinimumWait() async throws {
        try await Harness.with { h in
            var faults = Faults()
            faults.failFirst = 1
            faults.failStatus = 429
            faults.retryAfter = "1"
            h.server.serve("/slowdown.bin", size: 1024, faults: faults)
            let started = Date()
            let id = try await h.session.schedule(h.server.url("/slowdown.bin"), to: .file(h.path("slowdown.bin")))
            try await h.waitCompleted(id)
            #expect(Date().timeIntervalSince(started) >= 0.95)
            #expect(h.gets("/slowdown.bin").map(\.status) == [429, 200])
        }
    }

    @Test func aRedirectChainIsFollowedAndResumesGoToTheOriginalURL() async throws {
        try await Harness.with { h in
            let size = 2 * 1024 * 1024
            h.server.serve("/final.bin", size: size, faults: stalled(at: size / 2))
            h.server.redirect("/start", to: "/hop1", status: 301)
            h.server.redirect("/hop1", to: h.server.url("/hop2").absoluteString, status: 302)
            h.server.redirect("/hop2", to: "/final.bin", status: 307)
            let id = try await h.session.schedule(h.server.url("/start"), to: .directory(h.directory))
            try await h.wait(id) { $0.bytesOnDisk == Int64(size / 2) }
            try await h.session.pause(id)
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id)
            #expect(done.finalURL == h.server.url("/final.bin"))
            #expect(done.completedPath == h.path("start"))
            #expect(sha256(ofFile: h.path("start")) == h.server.sha256("/final.bin"))
            // The resume started again at the original URL, carrying its Range through every hop.
            let starts = h.server.requests("/start")
            #expect(starts.count == 2)
            #expect(starts.last?.range == resumeRange(keeping: size / 2))
            #expect(h.gets("/final.bin").last?.range == resumeRange(keeping: size / 2))
            #expect(h.gets("/final.bin").last?.status == 206)
        }
    }

    @Test func tooManyRedirectsFail() async throws {
        try await Harness.with { h in
            for hop in 0..<12 {
                h.server.redirect("/loop\(hop)", to: "/loop\(hop + 1)")
            }
            let id = try await h.session.schedule(h.server.url("/loop0"), to: .directory(h.directory))
            let done = try await h.wait(id) { $0.state.isFinished }
            #expect(done.state == .failed(reason: "too many redirects (more than 10)"))
        }
    }

    @Test func aChunkedBodyWithoutLengthCompletes() async throws {
        try await Harness.with { h in
            var faults = Faults()
            faults.chunked = true
            h.server.serve("/chunked.bin", size: 1024 * 1024 + 7, faults: faults)
            let target = h.path("chunked.bin")
            let id = try await h.session.schedule(h.server.url("/chunked.bin"), to: .file(target))
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/chunked.bin"))
            #expect(done.totalBytes == Int64(1024 * 1024 + 7))
        }
    }

    @Test func cancelDeletesThePartFile() async throws {
        // Held at a known point: still running when the cancel comes, however loaded the machine is.
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            h.server.serve("/cancel.bin", size: 4 * 1024 * 1024, faults: stalled(at: 256 * 1024))
            let target = h.path("cancel.bin")
            let id = try await h.session.schedule(h.server.url("/cancel.bin"), to: .file(target))
            try await h.wait(id) { $0.bytesOnDisk == 256 * 1024 }
            #expect(FileManager.default.fileExists(atPath: target + ".part"))
            try await h.session.cancel(id)
            let cancelled = try #require(await h.session.snapshot()[id])
            #expect(cancelled.state == .cancelled)
            #expect(cancelled.bytesOnDisk == 0)
            #expect(!FileManager.default.fileExists(atPath: target + ".part"))
            #expect(!FileManager.default.fileExists(atPath: target))
            await #expect(throws: DownloadSession.TransitionError.self) { try await h.session.resume(id) }
            try await h.session.remove(id)
            #expect(await h.session.snapshot()[id] == nil)
        }
    }

    @Test func purgePausedFreesTheDisk() async throws {
        // Every body stops at a known point: nothing finishes before the pauses, however loaded the
        // machine is, and the held connections are not taken for stalls.
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let held = 256 * 1024
            for name in ["p1", "p2", "keep"] {
                h.server.serve("/\(name).bin", size: 4 * 1024 * 1024, faults: stalled(at: held))
            }
            let first = try await h.session.schedule(h.server.url("/p1.bin"), to: .file(h.path("p1.bin")))
            let second = try await h.session.schedule(h.server.url("/p2.bin"), to: .file(h.path("p2.bin")))
            let running = try await h.session.schedule(h.server.url("/keep.bin"), to: .file(h.path("keep.bin")))
            for id in [first, second] {
                try await h.wait(id) { $0.bytesOnDisk == Int64(held) }
                try await h.session.pause(id)
            }
            #expect(fileLength(h.path("p1.bin.part")) == Int64(held))
            #expect(fileLength(h.path("p2.bin.part")) == Int64(held))
            await h.session.purgePaused()
            let snapshot = await h.session.snapshot()
            #expect(snapshot[first]?.state == .paused, "purged, the download stays")
            #expect(snapshot[second]?.state == .paused)
            #expect(snapshot[first]?.bytesOnDisk == 0)
            #expect(snapshot[first]?.lastError == "purged: 256 KiB of partial data discarded; resuming fetches it from zero")
            #expect(snapshot[running]?.state == .downloading)
            #expect(!FileManager.default.fileExists(atPath: h.path("p1.bin.part")))
            #expect(!FileManager.default.fileExists(atPath: h.path("p2.bin.part")))
            #expect(FileManager.default.fileExists(atPath: h.path("keep.bin.part")))
            // Resumed, a purged download is fetched from zero, and completes right.
            h.server.setFaults("/p1.bin", Faults())
            try await h.session.resume(first)
            let done = try await h.waitCompleted(first)
            #expect(sha256(ofFile: h.path("p1.bin")) == h.server.sha256("/p1.bin"))
            #expect(h.gets("/p1.bin").last?.range == nil, "from zero: no Range")
            #expect(done.resumeCount == 0)
        }
    }

    @Test func twoSchedulesOfOneURLShareOneTransfer() async throws {
        try await Harness.with { h in
            h.server.serve("/shared.bin", size: 1024 * 1024, faults: throttled(2 * 1024 * 1024))
            let url = h.server.url("/shared.bin")
            let first = try await h.session.schedule(url, to: .file(h.path("one.bin")))
            let second = try await h.session.schedule(url, to: .file(h.path("two.bin")))
            #expect(first == second)
            let done = try await h.waitCompleted(first)
            #expect(h.gets("/shared.bin").count == 1)
            #expect(done.completedPaths == [h.path("one.bin"), h.path("two.bin")])
            #expect(sha256(ofFile: h.path("one.bin")) == h.server.sha256("/shared.bin"))
            #expect(sha256(ofFile: h.path("two.bin")) == h.server.sha256("/shared.bin"))
            #expect(await h.session.snapshot().downloads.count == 1)
        }
    }

    @Test func schedulingAPausedURLAgainResumesIt() async throws {
        try await Harness.with { h in
            h.server.serve("/again.bin", size: 2 * 1024 * 1024, faults: stalled(at: 256 * 1024))
            let url = h.server.url("/again.bin")
            let id = try await h.session.schedule(url, to: .file(h.path("again.bin")))
            try await h.wait(id) { $0.bytesOnDisk == 256 * 1024 }
            try await h.session.pause(id)
            let again = try await h.session.schedule(url, to: .file(h.path("again.bin")))
            #expect(again == id)
            let done = try await h.waitCompleted(id)
            #expect(done.resumeCount == 1)
            #expect(h.gets("/again.bin").count == 2)
        }
    }

    /// More than AsyncHTTPClient's default of eight connections per host: every slot gets one.
    @Test func twentyDownloadsFromOneHostAllRunAtOnce() async throws {
        try await Harness.with({ $0.maxActive = 20 }) { h in
            var ids: [DownloadID] = []
            for index in 0..<20 {
                let path = "/many/\(index).bin"
                h.server.serve(path, size: 4 * 1024 * 1024, faults: throttled(200_000))
                ids.append(try await h.session.schedule(h.server.url(path), to: .directory(h.directory)))
            }
            // Each gets bytes: none waits for a pooled connection (it would give up at the connect
            // timeout and retry, and the server would never see twenty at once).
            for id in ids {
                try await h.wait(id) { $0.bytesOnDisk > 0 }
            }
            #expect(h.server.peakConcurrentResponses == 20)
        }
    }

    @Test func twoHundredSmallDownloadsWithEightAtOnce() async throws {
        try await Harness.with({ $0.maxActive = 8 }) { h in
            var ids: [(DownloadID, String)] = []
            for index in 0..<200 {
                let path = "/small/\(index).bin"
                // Throttled so each takes 10-200 ms: the eight slots stay full while the queue drains.
                h.server.serve(path, size: 1000 + index * 97, faults: throttled(100_000))
                ids.append((try await h.session.schedule(h.server.url(path), to: .directory(h.directory)), path))
            }
            var mostAtOnce = 0
            var finishing = 0
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                let snapshot = await h.session.snapshot()
                // A download whose transfer is over holds no slot while its file is placed: it
                // says `finishing`, with every byte, and is not counted as downloading.
                mostAtOnce = max(mostAtOnce, snapshot.downloads.filter { $0.state == .downloading && !$0.finishing }.count)
                for download in snapshot.downloads where download.finishing {
                    finishing += 1
                    #expect(download.bytesOnDisk == download.totalBytes && download.bytesPerSecond == 0)
                }
                if snapshot.downloads.allSatisfy({ $0.state.isFinished }) { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            let snapshot = await h.session.snapshot()
            #expect(mostAtOnce == 8)
            #expect(finishing > 0, "200 files placed, none seen being placed")
            #expect(h.server.peakConcurrentResponses <= 8, "the server saw more transfers at once than allowed")
            #expect(h.gets("/small/0.bin").count == 1)
            for (id, path) in ids {
                let download = try #require(snapshot[id])
                #expect(download.state == .completed)
                #expect(sha256(ofFile: download.completedPath ?? "") == h.server.sha256(path), "\(path)")
            }
        }
    }

    /// Two downloads of one name into one directory are `f.bin` and `f.bin.1` in the order they
    /// were asked for, as their rows said all along, whichever ends first. The first was named by
    /// whichever ended first: the second's row said `f.bin` and it became `f.bin`, the first's
    /// became `f.bin.1`.
    @Test func downloadsOfOneNameAreNamedInTheOrderAskedWhicheverEndsFirst() async throws {
        try await Harness.with { h in
            var held = Faults()
            held.holdAt = [1_000]
            h.server.serve("/a/f.bin", size: 300_000, faults: held)
            h.server.serve("/b/f.bin", size: 2_000)
            let first = try await h.session.schedule(h.server.url("/a/f.bin"), to: .directory(h.directory))
            let second = try await h.session.schedule(h.server.url("/b/f.bin"), to: .directory(h.directory))
            let named = await h.session.snapshot()
            #expect(named[first]?.intendedName == "f.bin")
            #expect(named[second]?.intendedName == "f.bin.1")
            let quick = try await h.waitCompleted(second)
            h.server.release("/a/f.bin")
            let slow = try await h.waitCompleted(first)
            #expect(slow.completedPath == h.path("f.bin"))
            #expect(quick.completedPath == h.path("f.bin.1"))
            #expect(sha256(ofFile: h.path("f.bin")) == h.server.sha256("/a/f.bin"))
            #expect(sha256(ofFile: h.path("f.bin.1")) == h.server.sha256("/b/f.bin"))
        }
    }

    /// A completed URL asked for again with a checksum its file was never checked against: the file
    /// is checked now. A tester's new version's digest got the old file reported completed, exit 0.
    @Test func aCompletedFileIsCheckedAgainstAChecksumAskedLater() async throws {
        try await Harness.with { h in
            h.server.serve("/rel.iso", size: 40_000)
            let target = Destination.directory(h.directory)
            let id = try await h.session.schedule(h.server.url("/rel.iso"), to: target)
            _ = try await h.waitCompleted(id)
            let old = h.server.sha256("/rel.iso")
            // The same file's digest: nothing is fetched.
            let same = try await h.session.schedule(h.server.url("/rel.iso"), to: target, options: RequestOptions(checksum: Checksum(algorithm: .sha256, hex: old)))
            #expect(same == id)
            #expect(h.gets("/rel.iso").count == 1)
            // The new version's digest: fetched again into its place, and checked.
            h.server.change("/rel.iso")
            let new = h.server.sha256("/rel.iso")
            let again = try await h.session.schedule(h.server.url("/rel.iso"), to: target, options: RequestOptions(checksum: Checksum(algorithm: .sha256, hex: new)))
            #expect(again == id)
            let done = try await h.wait(id) { $0.state == .completed && !$0.completedPaths.isEmpty && h.gets("/rel.iso").count == 2 }
            #expect(done.completedPath == h.path("rel.iso"))
            #expect(sha256(ofFile: h.path("rel.iso")) == new)
            // A digest nothing matches: fetched again, and fails saying both; the old file stays.
            let wrong = String(repeating: "0", count: 64)
            _ = try await h.session.schedule(h.server.url("/rel.iso"), to: target, options: RequestOptions(checksum: Checksum(algorithm: .sha256, hex: wrong)))
            let failed = try await h.wait(id) { $0.state.isFinished && h.gets("/rel.iso").count == 3 }
            guard case .failed(let reason) = failed.state else {
                Issue.record("ended \(failed.state)")
                return
            }
            #expect(reason.contains("expected \(wrong)"), "\(reason)")
            #expect(sha256(ofFile: h.path("rel.iso")) == new, "the file there stays as it was")
        }
    }

    /// A checksum asked for while the download's transfer runs (it joins, and the download adopts
    /// it) is checked when the transfer ends: a tester's wrong digest joined a running download, the
    /// row said completed with that digest, exit 0, and the hook was told it was verified.
    @Test(arguments: [false, true])
    func aChecksumThatJoinsARunningTransferIsChecked(right: Bool) async throws {
        // Held longer than a loaded suite's stall: no second request.
        try await Harness.with({ $0.stallTimeout = .seconds(60) }) { h in
            var held = Faults()
            held.holdAt = [20_000]
            h.server.serve("/iso", size: 60_000, faults: held)
            let id = try await h.session.schedule(h.server.url("/iso"), to: .file(h.path("x.iso")))
            _ = try await h.wait(id) { $0.totalBytes == 60_000 }
            let digest = right ? h.server.sha256("/iso") : String(repeating: "0", count: 64)
            let joined = try await h.session.schedule(
                h.server.url("/iso"), to: .file(h.path("y.iso")), options: RequestOptions(checksum: Checksum(algorithm: .sha256, hex: digest))
            )
            #expect(joined == id)
            #expect(await h.session.snapshot()[id]?.state == .downloading, "the checksum joined a running transfer")
            h.server.release("/iso")
            let done = try await h.wait(id) { $0.state.isFinished }
            #expect(h.gets("/iso").count == 1)
            if right {
                #expect(done.state == .completed)
                #expect(sha256(ofFile: h.path("y.iso")) == digest)
            } else {
                guard case .failed(let reason) = done.state else {
                    Issue.record("ended \(done.state)")
                    return
                }
                #expect(reason.contains("expected \(digest)"), "\(reason)")
                #expect(!FileManager.default.fileExists(atPath: h.path("x.iso")))
                #expect(!FileManager.default.fileExists(atPath: h.path("y.iso")))
            }
        }
    }

    /// A completed download whose file a person removed, its name since taken by another download's
    /// file, is fetched again beside that file, never over it (a tester: it replaced the other's
    /// file, and two rows named one file).
    @Test func aFileFetchedAgainNeverReplacesAnotherDownloadsFile() async throws {
        try await Harness.with { h in
            h.server.serve("/u1/f.bin", size: 5_000)
            h.server.serve("/u2/f.bin", size: 7_000)
            let first = try await h.session.schedule(h.server.url("/u1/f.bin"), to: .directory(h.directory))
            #expect(try await h.waitCompleted(first).completedPath == h.path("f.bin"))
            unlink(h.path("f.bin"))
            let second = try await h.session.schedule(h.server.url("/u2/f.bin"), to: .directory(h.directory))
            #expect(try await h.waitCompleted(second).completedPath == h.path("f.bin"))
            let again = try await h.session.schedule(h.server.url("/u1/f.bin"), to: .directory(h.directory))
            #expect(again == first)
            let done = try await h.wait(first) { $0.state == .completed && !$0.completedPaths.isEmpty && h.gets("/u1/f.bin").count == 2 }
            #expect(done.completedPath == h.path("f.bin.1"))
            #expect(sha256(ofFile: h.path("f.bin")) == h.server.sha256("/u2/f.bin"), "the other download's file stays")
            #expect(sha256(ofFile: h.path("f.bin.1")) == h.server.sha256("/u1/f.bin"))
        }
    }

    /// The same, when the other row's file has the first one's stamp (one size, one tick of a
    /// coarse clock): a tester's fetch again replaced the other row's file, its stamp matching.
    @Test func aFileFetchedAgainNeverReplacesAnotherDownloadsFileOfTheSameStamp() async throws {
        try await Harness.with { h in
            h.server.serve("/u1/f.bin", size: 5_000)
            h.server.serve("/u2/f.bin", size: 5_000)
            let first = try await h.session.schedule(h.server.url("/u1/f.bin"), to: .directory(h.directory))
            let placed = try await h.waitCompleted(first)
            #expect(placed.completedPath == h.path("f.bin"))
            let stamp = try #require(placed.completedStamps.first)
            unlink(h.path("f.bin"))
            let second = try await h.session.schedule(h.server.url("/u2/f.bin"), to: .directory(h.directory))
            #expect(try await h.waitCompleted(second).completedPath == h.path("f.bin"))
            // The second file gets the first one's modification time, to the nanosecond.
            let modified = try #require(stamp.modified)
            var times = [timespec(tv_sec: Int(modified / 1_000_000_000), tv_nsec: Int(modified % 1_000_000_000)),
                         timespec(tv_sec: Int(modified / 1_000_000_000), tv_nsec: Int(modified % 1_000_000_000))]
            #expect(utimensat(AT_FDCWD, h.path("f.bin"), &times, 0) == 0)
            var info = stat()
            #expect(stat(h.path("f.bin"), &info) == 0)
            #expect(Int64(info.st_size) == stamp.size && Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec) == modified)
            // The second row's file is where the first row's was, with its stamp.
            #expect(try await h.session.schedule(h.server.url("/u1/f.bin"), to: .directory(h.directory)) == first)
            let done = try await h.wait(first) { $0.state == .completed && !$0.completedPaths.isEmpty && h.gets("/u1/f.bin").count == 2 }
            #expect(done.completedPath == h.path("f.bin.1"))
            #expect(sha256(ofFile: h.path("f.bin")) == h.server.sha256("/u2/f.bin"), "the other download's file stays")
            #expect(sha256(ofFile: h.path("f.bin.1")) == h.server.sha256("/u1/f.bin"))
        }
    }

    /// A second requester's file is a link or a copy of its own download's file, never another
    /// download's file of the same size finished in the same tick of the clock (a tester: without
    /// any crash, `completed B/f.bin.8` was said of one file for three URLs).
    @Test func aSecondRequesterNeverGetsAnotherDownloadsFileOfTheSameStamp() async throws {
        try await Harness.with({ $0.maxActive = 16 }) { h in
            let count = 40
            for index in 0..<count { h.server.serve("/k\(index)/f.bin", size: 20_000) }
            let a = h.path("A")
            let b = h.path("B")
            for directory in [a, b] { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
            let urls = (0..<count).map { h.server.url("/k\($0)/f.bin") }
            let ids = try await h.session.schedule(urls.map { DownloadSession.Request(url: $0, destination: .directory(a)) })
            _ = try await h.session.schedule(urls.map { DownloadSession.Request(url: $0, destination: .directory(b)) })
            var inB: [String: Int] = [:]
            for (index, id) in ids.enumerated() {
                let done = try await h.waitCompleted(id, timeout: 60)
                let expected = h.server.sha256("/k\(index)/f.bin")
                for path in done.completedPaths { #expect(sha256(ofFile: path) == expected, "row \(id) named \(path)") }
                if let path = done.completedPaths.first(where: { $0.hasPrefix(b + "/") }) { inB[path, default: 0] += 1 }
            }
            #expect(inB.values.allSatisfy { $0 == 1 }, "two rows at one file: \(inB.filter { $0.value > 1 })")
            #expect(inB.count == count, "every URL has its file in B")
        }
    }

    /// A placement into a directory never takes a name another download of the queue holds: the
    /// exact file a queued `-o` will write (it replaced the placed file: two rows at one file, a
    /// wrong one), or a paused download's part file name (it resumed from the placed file).
    @Test func aRequesterWhoseNameIsThePartFilesGetsAFileOfItsOwn() async throws {
        // A URL named like the first requester's part file, asked into that directory too: its
        // file is `h.bin.part.1`, never the part file itself (a tester was told `completed` of the
        // part file, exit 0, and the move took it away).
        try await Harness.with { h in
            var held = Faults()
            held.holdAt = [1_000]
            h.server.serve("/h.bin.part", size: 20_000, faults: held)
            let id = try await h.session.schedule(h.server.url("/h.bin.part"), to: .file(h.path("h.bin")))
            #expect(try await h.session.schedule(h.server.url("/h.bin.part"), to: .directory(h.directory)) == id)
            await #expect(throws: SessionStateMachine.TransitionError.self) {
                try await h.session.schedule(h.server.url("/h.bin.part"), to: .file(h.path("h.bin.part")))
            }
            h.server.release("/h.bin.part")
            let done = try await h.waitCompleted(id)
            #expect(done.completedPaths == [h.path("h.bin"), h.path("h.bin.part.1")])
            for path in done.completedPaths { #expect(sha256(ofFile: path) == h.server.sha256("/h.bin.part"), "\(path)") }
        }
    }

    @Test func aPlacementPassesOverNamesOtherDownloadsHold() async throws {
        try await Harness.with { h in
            var held = Faults()
            held.holdAt = [1_000]
            h.server.serve("/a/report.pdf", size: 2_000)
            h.server.serve("/b/report.pdf", size: 50_000, faults: held)
            h.server.serve("/c/x.iso", size: 300_000, faults: held)
            h.server.serve("/d/x.iso.part", size: 3_000)
            let exact = try await h.session.schedule(h.server.url("/b/report.pdf"), to: .file(h.path("report.pdf")))
            let intoDirectory = try await h.session.schedule(h.server.url("/a/report.pdf"), to: .directory(h.directory))
            let quick = try await h.waitCompleted(intoDirectory)
            #expect(quick.completedPath == h.path("report.pdf.1"), "not the -o download's file")
            h.server.release("/b/report.pdf")
            let slow = try await h.waitCompleted(exact)
            #expect(slow.completedPath == h.path("report.pdf"))
            #expect(sha256(ofFile: h.path("report.pdf")) == h.server.sha256("/b/report.pdf"))
            #expect(sha256(ofFile: h.path("report.pdf.1")) == h.server.sha256("/a/report.pdf"))

            // x.iso paused with bytes; its part file's name is not free for another's file.
            let iso = try await h.session.schedule(h.server.url("/c/x.iso"), to: .directory(h.directory))
            try await h.wait(iso) { $0.bytesOnDisk > 0 || FileManager.default.fileExists(atPath: h.path("x.iso.part")) }
            try await h.session.pause(iso)
            h.server.release("/c/x.iso")
            unlink(h.path("x.iso.part"))
            let named = try await h.session.schedule(h.server.url("/d/x.iso.part"), to: .directory(h.directory))
            let placed = try await h.waitCompleted(named)
            #expect(placed.completedPath == h.path("x.iso.part.1"))
            try await h.session.resume(iso)
            _ = try await h.waitCompleted(iso)
            #expect(sha256(ofFile: h.path("x.iso")) == h.server.sha256("/c/x.iso"))
            #expect(sha256(ofFile: h.path("x.iso.part.1")) == h.server.sha256("/d/x.iso.part"))
        }
    }

    /// A placement looks at the names other downloads hold a few at a time: past the first few
    /// (a person's files), a name another download holds is passed over all the same, however far
    /// along (a tester's placement past 64 names took the name a queued `-o` held: two rows at one
    /// file, the other's bytes gone).
    @Test(arguments: [SessionStateMachine.claimWindow, 64, 70])
    func aPlacementPastItsFirstNamesPassesOverNamesOtherDownloadsHold(personsFiles: Int) async throws {
        try await Harness.with { h in
            var held = Faults()
            held.holdAt = [1_000]
            h.server.serve("/a/report.pdf", size: 2_000)
            h.server.serve("/b/report.pdf", size: 50_000, faults: held)
            let taken = ["report.pdf"] + (1...personsFiles).map { "report.pdf.\($0)" }
            for name in taken { try Data("a person's".utf8).write(to: URL(fileURLWithPath: h.path(name))) }
            let claimedName = "report.pdf.\(personsFiles + 1)"
            let exact = try await h.session.schedule(h.server.url("/b/report.pdf"), to: .file(h.path(claimedName)))
            let intoDirectory = try await h.session.schedule(h.server.url("/a/report.pdf"), to: .directory(h.directory))
            let quick = try await h.waitCompleted(intoDirectory)
            #expect(quick.completedPath == h.path("report.pdf.\(personsFiles + 2)"), "not the -o download's file, nor a person's")
            h.server.release("/b/report.pdf")
            let slow = try await h.waitCompleted(exact)
            #expect(slow.completedPath == h.path(claimedName))
            #expect(sha256(ofFile: h.path(claimedName)) == h.server.sha256("/b/report.pdf"))
            #expect(sha256(ofFile: try #require(quick.completedPath)) == h.server.sha256("/a/report.pdf"))
            for name in taken { #expect(FileManager.default.contents(atPath: h.path(name)) == Data("a person's".utf8), "\(name)") }
        }
    }

    /// A file the server names (`Content-Disposition`) passes over the name a running download of
    /// that name was shown writing (`same.bin.part`, for `same.bin`): a tester's took `same.bin`, and
    /// the download shown writing it became `same.bin.1`.
    @Test func aServerNamedFilePassesOverTheNameARunningDownloadHolds() async throws {
        try await Harness.with { h in
            var held = Faults()
            held.holdAt = [1_000]
            h.server.serve("/x/same.bin", size: 40_000, faults: held)
            var named = Faults()
            named.contentDisposition = "attachment; filename=\"same.bin\""
            h.server.serve("/z/get.php", size: 3_000, faults: named)
            let running = try await h.session.schedule(h.server.url("/x/same.bin"), to: .directory(h.directory))
            try await h.wait(running) { $0.bytesOnDisk > 0 }
            #expect(await h.session.snapshot()[running]?.partPath == h.path("same.bin.part"))
            let server = try await h.session.schedule(h.server.url("/z/get.php"), to: .directory(h.directory))
            let quick = try await h.waitCompleted(server)
            #expect(quick.completedPath == h.path("same.bin.1"), "not the name the running download was shown writing")
            h.server.release("/x/same.bin")
            let slow = try await h.waitCompleted(running)
            #expect(slow.completedPath == h.path("same.bin"))
            #expect(sha256(ofFile: h.path("same.bin")) == h.server.sha256("/x/same.bin"))
            #expect(sha256(ofFile: h.path("same.bin.1")) == h.server.sha256("/z/get.php"))
        }
    }

    @Test func aLongQueueThrottlesItsSnapshotsButAlwaysShowsTheLastChange() async throws {
        try await Harness.with({ $0.maxActive = 16 }) { h in
            // 1,000 in the queue: transfer events are shown at most every 50 ms
            let count = 1000
            for index in 0..<count { h.server.serve("/many/\(index).bin", size: 512) }
            let requests = (0..<count).map { index in
                DownloadSession.Request(url: h.server.url("/many/\(index).bin"), destination: .directory(h.directory))
            }
            let reader = Task {
                var shown = 0
                for await snapshot in h.session.snapshots {
                    shown += 1
                    if snapshot.downloads.count == count, snapshot.downloads.allSatisfy({ $0.state == .completed }) { return shown }
                }
                return -1
            }
            let watchdog = Task {
                try await Task.sleep(for: .seconds(90))
                reader.cancel()
            }
            let started = ContinuousClock.now
            _ = try await h.session.schedule(requests)
            // The snapshot that shows the last completion comes, though nothing happens after it
            let shown = await reader.value
            let elapsed = started.duration(to: .now) / .milliseconds(1)
            watchdog.cancel()
            #expect(shown > 0, "the stream never showed every download completed")
            // One snapshot for the schedule, then at most one per 50 ms (and the trailing one)
            #expect(Double(shown) <= elapsed / 50 + 3, "\(shown) snapshots in \(Int(elapsed)) ms")
        }
    }

    @Test func aShortBodyIsRetriedNeverReportedComplete() async throws {
        try await Harness.with { h in
            var faults = Faults()
            faults.closeAfterBytes = 512 * 1024
            h.server.serve("/short.bin", size: 2 * 1024 * 1024, faults: faults)
            let target = h.path("short.bin")
            let id = try await h.session.schedule(h.server.url("/short.bin"), to: .file(target))
            let done = try await h.wait(id) { $0.state.isFinished }
            #expect(done.state == .completed)
            #expect(done.resumeCount == 1)
            #expect(sha256(ofFile: target) == h.server.sha256("/short.bin"))
            let gets = h.gets("/short.bin")
            #expect(gets.count == 2)
            #expect(gets.first?.finished == false)
            #expect(gets.first?.bodyBytesSent == 512 * 1024)
            // The client may drop what it had buffered when the connection error arrived; the resume
            // starts at what reached the disk, never beyond what the server sent.
            let offset = try #require(done.resumeOffset)
            #expect(offset > 0 && offset <= 512 * 1024)
            #expect(gets.last?.range == resumeRange(keeping: offset))
        }
    }

    @Test func aProperlyFramedPartialAnswerIsNotCompletion() async throws {
        try await Harness.with { h in
            let size = 1024 * 1024
            var faults = Faults()
            faults.resetAfterBytes = 300 * 1024
            faults.shortRangeBy = 1000
            h.server.serve("/partial.bin", size: size, faults: faults)
            let target = h.path("partial.bin")
            let id = try await h.session.schedule(h.server.url("/partial.bin"), to: .file(target))
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: target) == h.server.sha256("/partial.bin"))
            let gets = h.gets("/partial.bin")
            #expect(gets.count == 3)
            #expect(gets[1].finished, "the short 206 was a complete, well-framed response")
            #expect(gets[2].range == resumeRange(keeping: size - 1000))
            #expect(done.lastError == "body ended at 1023 KiB of 1.0 MiB")
            #expect(done.resumeCount == 2)
        }
    }

    @Test func aBodyThatIsAlwaysShortFailsAfterTheRetryLimit() async throws {
        try await Harness.with({ $0.maxTries = 3 }) { h in
            var faults = Faults()
            faults.closeAfterBytes = 0
            faults.closeCount = .max
            h.server.serve("/never.bin", size: 64 * 1024, faults: faults)
            let target = h.path("never.bin")
            let id = try await h.session.schedule(h.server.url("/never.bin"), to: .file(target))
            let done = try await h.wait(id) { $0.state.isFinished }
            guard case .failed(let reason) = done.state else {
                Issue.record("expected failed, got \(done.state)")
                return
            }
            #expect(reason.contains("gave up after 3 tries"))
            #expect(!FileManager.default.fileExists(atPath: target))
            #expect(h.gets("/never.bin").count == 3)
        }
    }

    @Test func aServerThatDropsEveryRestartFailsInsteadOfLoopingForever() async throws {
        try await Harness.with({ $0.maxTries = 3 }) { h in
            var faults = Faults()
            faults.ignoreRange = true
            faults.closeAfterBytes = 100 * 1024
            faults.closeCount = .max
            h.server.serve("/drops.bin", size: 1024 * 1024, faults: faults)
            let id = try await h.session.schedule(h.server.url("/drops.bin"), to: .file(h.path("drops.bin")))
            let done = try await h.wait(id) { $0.state.isFinished }
            guard case .failed(let reason) = done.state else {
                Issue.record("expected failed, got \(done.state)")
                return
            }
            #expect(reason.contains("gave up after 3 tries"))
            // The first attempt grew the file; each restart after it only rewrote bytes from zero.
            #expect(h.gets("/drops.bin").count == 3)
            #expect(fileLength(h.path("drops.bin.part")) ?? 0 > 0, "a failed download keeps its bytes")
        }
    }

    @Test func concurrentIntentsNeverLeaveAPausedDownloadRunning() async throws {
        try await Harness.with({ $0.maxActive = 1; $0.stallTimeout = .seconds(120) }) { h in
            // A is held at a known point, so it is still running when the pauses arrive.
            h.server.serve("/ca.bin", size: 4 * 1024 * 1024, faults: stalled(at: 256 * 1024))
            h.server.serve("/cb.bin", size: 4 * 1024 * 1024, faults: throttled(1024 * 1024))
            let a = try await h.session.schedule(h.server.url("/ca.bin"), to: .file(h.path("ca.bin")))
            let b = try await h.session.schedule(h.server.url("/cb.bin"), to: .file(h.path("cb.bin")))
            try await h.wait(a) { $0.bytesOnDisk == 256 * 1024 }
            // Pausing A frees its slot for B while A's transfer winds down; B is paused in that window.
            async let pauseA: Void = h.session.pause(a)
            async let pauseB: Void = h.session.pause(b)
            _ = try await (pauseA, pauseB)
            let snapshot = await h.session.snapshot()
            #expect(snapshot[a]?.state == .paused)
            #expect(snapshot[b]?.state == .paused)
            #expect(fileLength(h.path("ca.bin.part")) == snapshot[a]?.bytesOnDisk)
            #expect(fileLength(h.path("cb.bin.part")) ?? 0 == snapshot[b]?.bytesOnDisk, "bytes written after pause returned")
            #expect(h.gets("/cb.bin").count <= 1)
            let requests = h.server.requests().count
            try await Task.sleep(for: .milliseconds(200))
            #expect(h.server.requests().count == requests, "a paused download made a request")
            #expect(await h.session.snapshot().downloads.allSatisfy { $0.state == .paused })
        }
    }

    @Test func cancelAndAnImmediateRescheduleNeverShareAPartFile() async throws {
        try await Harness.with { h in
            // The first response stops at 256 KiB, so it cannot complete before the cancel lands.
            h.server.serve("/re.bin", size: 2 * 1024 * 1024, faults: stalled(at: 256 * 1024))
            let url = h.server.url("/re.bin")
            let target = h.path("re.bin")
            let first = try await h.session.schedule(url, to: .file(target))
            try await h.wait(first) { $0.bytesOnDisk == 256 * 1024 }
            async let cancelled: Void = h.session.cancel(first)
            async let again = h.session.schedule(url, to: .file(target))
            let (_, second) = try await (cancelled, again)
            if second == first {
                // The schedule reached the session first and attached; then the cancel won.
                #expect(await h.session.snapshot()[first]?.state == .cancelled)
                #expect(!FileManager.default.fileExists(atPath: target + ".part"))
            } else {
                // The cancel came first: its delete must run before the new attempt touches the file.
                let done = try await h.waitCompleted(second)
                #expect(sha256(ofFile: target) == h.server.sha256("/re.bin"))
                #expect(done.bytesOnDisk == 2 * 1024 * 1024)
            }
        }
    }

    @Test func aStalledBodyIsDetectedAndResumed() async throws {
        // Two seconds, not one: on a loaded machine a second without a byte can happen before the stall.
        try await Harness.with({ $0.stallTimeout = .seconds(2) }) { h in
            var faults = Faults()
            faults.stallAfterBytes = 100 * 1024
            h.server.serve("/stall.bin", size: 512 * 1024, faults: faults)
            let target = h.path("stall.bin")
            let id = try await h.session.schedule(h.server.url("/stall.bin"), to: .file(target))
            let done = try await h.wait(id) { $0.state.isFinished }
            #expect(done.state == .completed)
            #expect(done.lastError == "stalled: no data for 2 s")
            #expect(sha256(ofFile: target) == h.server.sha256("/stall.bin"))
            // The resume asks for the rest of exactly what came: the 100 KiB before the stall, or less
            // when the (in-process) server was itself starved past the stall timeout.
            let gets = h.gets("/stall.bin")
            let sent = try #require(gets.first).bodyBytesSent
            #expect(sent <= 100 * 1024, "\(gets)")
            #expect(gets.count == 2, "\(gets)")
            #expect(gets.last?.range == (sent > 0 ? resumeRange(keeping: sent) : nil), "\(gets)")
        }
    }

    @Test func notFoundFailsWithTheStatusAndLeavesNoFile() async throws {
        try await Harness.with { h in
            let target = h.path("missing.bin")
            let id = try await h.session.schedule(h.server.url("/missing.bin"), to: .file(target))
            let done = try await h.wait(id) { $0.state.isFinished }
            #expect(done.state == .failed(reason: "HTTP 404 Not Found"))
            #expect(!FileManager.default.fileExists(atPath: target))
            #expect(!FileManager.default.fileExists(atPath: target + ".part"))
            #expect(h.gets("/missing.bin").count == 1)
        }
    }

    @Test func aServerNameIsMadeSafeAndNeverOverwrites() async throws {
        try await Harness.with { h in
            var faults = Faults()
            faults.contentDisposition = "attachment; filename=\"plain.txt\"; filename*=UTF-8''..%2F..%2Fevil%1B[31m.txt"
            h.server.serve("/download.php", size: 1000, faults: faults)
            #expect(FileManager.default.createFile(atPath: h.path("evil[31m.txt"), contents: Data("mine".utf8)))
            let id = try await h.session.schedule(h.server.url("/download.php"), to: .directory(h.directory))
            let done = try await h.waitCompleted(id)
            #expect(done.completedPath == h.path("evil[31m.txt.1"))
            #expect(FileManager.default.contents(atPath: h.path("evil[31m.txt")) == Data("mine".utf8))
            #expect(sha256(ofFile: h.path("evil[31m.txt.1")) == h.server.sha256("/download.php"))
        }
    }

    @Test func maxActiveLimitsAndRequeuesKeepingBytes() async throws {
        // The held connections are not stalls: the test decides when they go on.
        try await Harness.with({ $0.maxActive = 2; $0.stallTimeout = .seconds(120) }) { h in
            // The first two stall at a known point, so nothing finishes while the limits change,
            // however loaded the machine is.
            let stall = 256 * 1024
            h.server.serve("/m0.bin", size: 1024 * 1024, faults: stalled(at: stall))
            h.server.serve("/m1.bin", size: 1024 * 1024, faults: stalled(at: stall))
            h.server.serve("/m2.bin", size: 1024 * 1024)
            var ids: [DownloadID] = []
            for index in 0..<3 {
                ids.append(try await h.session.schedule(h.server.url("/m\(index).bin"), to: .file(h.path("m\(index).bin"))))
            }
            var snapshot = await h.session.snapshot()
            #expect(snapshot.downloads.map(\.state) == [.downloading, .downloading, .queued])
            try await h.wait(ids[1]) { $0.bytesOnDisk == Int64(stall) }
            try await h.session.setMaxActive(1)
            snapshot = await h.session.snapshot()
            #expect(snapshot.downloads.map(\.state) == [.downloading, .queued, .queued])
            #expect(snapshot[ids[1]]?.bytesOnDisk == Int64(stall), "requeued with its bytes")
            try await h.session.move(ids[2], to: 0)
            #expect(await h.session.snapshot().downloads.map(\.id) == [ids[2], ids[0], ids[1]])
            try await h.session.setMaxActive(3)
            // A new connection for the stalled first one.
            try await h.session.pause(ids[0])
            try await h.session.resume(ids[0])
            for id in ids { try await h.waitCompleted(id) }
            #expect(h.gets("/m1.bin").last?.range == resumeRange(keeping: stall))
            for index in 0..<3 {
                #expect(sha256(ofFile: h.path("m\(index).bin")) == h.server.sha256("/m\(index).bin"))
            }
        }
    }
}
