import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing
import TestSupport

/// `--connections N` against the real loopback server: the parts are fetched with bounded ranges and
/// `If-Range`, and the file is byte for byte the server's whatever happens in between.
/// Serialized: each case serves and hashes megabytes, which in a debug build would starve the
/// rest of the suite if they all ran at once.
@Suite(.serialized) struct SegmentedTests {
    static func options(_ connections: Int) -> RequestOptions {
        RequestOptions(connections: connections)
    }

    /// The part requests the server saw: bounded ranges (`bytes=a-b`).
    static func partRequests(_ h: Harness, _ path: String) -> [RequestRecord] {
        h.gets(path).filter { $0.range.map { !$0.hasSuffix("-") } ?? false }
    }

    @Test(arguments: [1, 2, 8, 16])
    func everyConnectionCountGivesTheServersBytes(connections: Int) async throws {
        try await Harness.with { h in
            // Odd-sized, big enough for a part of at least 1 MiB per connection; throttled so the
            // parts overlap.
            let size = max(2, connections) * 1024 * 1024 + 12_345
            h.server.serve("/s.bin", size: size, faults: throttled(4 * 1024 * 1024))
            let id = try await h.session.schedule(h.server.url("/s.bin"), to: .file(h.path("s.bin")), options: Self.options(connections))
            let done = try await h.waitCompleted(id, timeout: 60)
            #expect(sha256(ofFile: h.path("s.bin")) == h.server.sha256("/s.bin"))
            #expect(done.totalBytes == Int64(size))
            #expect(done.segments.isEmpty, "a completed file has no parts")
            let parts = Self.partRequests(h, "/s.bin")
            if connections == 1 {
                #expect(parts.isEmpty, "one connection fetches front to back")
                #expect(h.gets("/s.bin").count == 1)
            } else {
                #expect(parts.count >= connections - 1, "\(parts.map(\.range))")
                let etag = h.gets("/s.bin").first?.ifRange ?? parts.first?.ifRange
                #expect(etag != nil)
                #expect(parts.allSatisfy { $0.ifRange != nil && $0.ifRange == etag && $0.status == 206 }, "every part carries If-Range")
            }
            // A steal cuts a part short, and the server may have pushed up to a socket buffer more
            // of it; nothing is fetched twice beyond that.
            let sent = h.gets("/s.bin").reduce(0) { $0 + $1.bodyBytesSent }
            #expect(sent < 2 * size, "sent \(sent) for \(size)")
        }
    }

    /// Four parts of 2 MiB, each held by the server halfway until released four times: the file is
    /// half done at a known point however loaded the machine is (held connections are no stalls).
    static let midpoints = [1, 3, 5, 7].map { $0 * 1024 * 1024 }

    /// Serves 8 MiB at `path`, fetches it over 4 connections into `target` until every part is
    /// held at its midpoint (4 MiB on disk), and pauses it there: its id and its paused row.
    static func pausedAtMidpoints(_ h: Harness, _ path: String, into target: String) async throws -> (DownloadID, Download) {
        h.server.serve(path, size: 8 * 1024 * 1024, faults: { var f = Faults(); f.holdAt = midpoints; return f }())
        let id = try await h.session.schedule(h.server.url(path), to: .file(target), options: options(4))
        try await h.wait(id) { $0.bytesOnDisk == 4 * 1024 * 1024 && $0.connections == 4 }
        try await h.session.pause(id)
        releaseAll(h, path)
        return (id, try #require(await h.session.snapshot()[id]))
    }

    static func releaseAll(_ h: Harness, _ path: String) {
        for _ in midpoints { h.server.release(path) }
    }

    @Test func pauseAndResumeMidwayResumeEveryPartWithIfRange() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let (id, paused) = try await Self.pausedAtMidpoints(h, "/p.bin", into: h.path("p.bin"))
            #expect(paused.segments.count >= 2, "the parts are remembered: \(paused.segments)")
            #expect(Segments.bytesOnDisk(paused.segments) == paused.bytesOnDisk)
            let before = h.gets("/p.bin").count
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id, timeout: 30)
            #expect(sha256(ofFile: h.path("p.bin")) == h.server.sha256("/p.bin"))
            #expect(done.resumeCount == 1)
            #expect(done.restartCount == 0)
            #expect(done.resumeOffset == paused.bytesOnDisk, "the row says what the resume kept")
            let resumed = Array(h.gets("/p.bin").dropFirst(before))
            #expect(!resumed.isEmpty)
            #expect(resumed.allSatisfy { $0.ifRange != nil && $0.status == 206 }, "\(resumed.map(\.range))")
            // Each part picked up where it stopped: no resumed request starts at a part's first byte
            // that was already on disk.
            let starts = Set(resumed.compactMap { $0.range.flatMap { Int64($0.dropFirst("bytes=".count).split(separator: "-")[0]) } })
            for segment in paused.segments where segment.done > 0 && !segment.isComplete {
                #expect(starts.contains(segment.next), "part \(segment) resumed at its next byte")
                #expect(!starts.contains(segment.start))
            }
        }
    }

    @Test func aResumeOfPartsThatCannotFitWaitsForRoomBeforeAnyRequest() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let disk = h.path("disk")
            try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
            let mount = try await ChildProcess.run("/bin/mount", ["-t", "tmpfs", "-o", "size=12m", "tmpfs", disk])
            guard mount.status == 0 else {
                print("SegmentedTests: mounting a tmpfs is not allowed here (mount exited \(mount.status)); not run")
                return
            }
            defer { unmount(disk) }
            let size = 8 * 1024 * 1024
            let target = disk + "/room.bin"
            let (id, paused) = try await Self.pausedAtMidpoints(h, "/room.bin", into: target)
            // Leave 2 MiB free where the parts still need 4.
            let free = try #require((try FileManager.default.attributesOfFileSystem(forPath: disk)[.systemFreeSize] as? NSNumber)?.int64Value)
            let filler = disk + "/filler"
            #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: Int(free) - 2 * 1024 * 1024)))
            let before = h.gets("/room.bin").count
            try await h.session.resume(id)
            let waiting = try await h.wait(id) { if case .waitingForSpace = $0.state { true } else { false } }
            #expect(waiting.state.reason?.hasPrefix("waiting for disk space (needs \(Format.bytes(Int64(size) - paused.bytesOnDisk)), ") == true, "\(waiting.state)")
            #expect(h.gets("/room.bin").count == before, "no request for bytes that cannot be written")
            #expect(waiting.segments == paused.segments, "the parts are kept")
            // Room again: the parts resume by themselves where they stopped.
            try FileManager.default.removeItem(atPath: filler)
            let done = try await h.waitCompleted(id, timeout: 30)
            #expect(sha256(ofFile: target) == h.server.sha256("/room.bin"))
            #expect(done.restartCount == 0)
            #expect(done.resumeOffset == paused.bytesOnDisk)
        }
    }

    /// A part answered oddly (here a 206 at another offset) starts the whole file over, but nothing
    /// goes before a new version's first bytes came. A tester's server answered one part oddly, then
    /// 503s: every part was emptied at once (5 MiB), and the row said `failed 0 B`.
    @Test func anOddPartAnswerKeepsEveryPartUntilANewVersionComes() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120); $0.maxTries = 2 }) { h in
            let (id, paused) = try await Self.pausedAtMidpoints(h, "/o.bin", into: h.path("o.bin"))
            var odd = Faults()
            odd.rangeOffsetError = 1_000
            odd.failWithoutRange = true
            h.server.setFaults("/o.bin", odd)
            try await h.session.resume(id)
            let failed = try await h.wait(id, timeout: 30) { $0.state.isFinished }
            guard case .failed = failed.state else {
                Issue.record("ended \(failed.state)")
                return
            }
            #expect(h.gets("/o.bin").contains { $0.range == nil && $0.status == 503 }, "the whole file was asked for again")
            #expect(failed.bytesOnDisk == paused.bytesOnDisk, "every part kept")
            #expect(failed.segments == paused.segments)
            let content = h.server.content("/o.bin")
            let part = try #require(FileHandle(forReadingAtPath: h.path("o.bin.part")))
            defer { try? part.close() }
            for segment in paused.segments where segment.done > 0 {
                try part.seek(toOffset: UInt64(segment.start))
                let bytes = try part.read(upToCount: Int(segment.next - segment.start)) ?? Data()
                #expect(Array(bytes) == Array(content[Int(segment.start)..<Int(segment.next)]), "\(segment)")
            }
            // The server well again: the parts resume where they stopped.
            h.server.setFaults("/o.bin", Faults())
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id, timeout: 30)
            #expect(sha256(ofFile: h.path("o.bin")) == h.server.sha256("/o.bin"))
            #expect(done.restartCount == 0)
        }
    }

    @Test func aResourceChangedWhilePausedRestartsTheWholeFile() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let (id, _) = try await Self.pausedAtMidpoints(h, "/c.bin", into: h.path("c.bin"))
            let old = h.server.sha256("/c.bin")
            h.server.change("/c.bin")
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id, timeout: 40)
            let new = h.server.sha256("/c.bin")
            #expect(new != old)
            #expect(sha256(ofFile: h.path("c.bin")) == new, "never a splice of two versions")
            #expect(done.restartCount == 1)
            #expect(done.restartReason == "resource changed")
        }
    }

    /// The parts' resume compares the 4 KiB before the end of the longest part with the disk first:
    /// a tester's two files of one size and date behind a redirect that changed (nginx's tag is the
    /// date and the size) were completed as one file of both, "verified with If-Range", exit 0.
    @Test func aChangeHiddenBehindTheSameValidatorsRestartsTheWholeFile() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let (id, paused) = try await Self.pausedAtMidpoints(h, "/h.bin", into: h.path("h.bin"))
            let old = h.server.sha256("/h.bin")
            h.server.change("/h.bin", keepingValidators: true)
            let before = h.gets("/h.bin").count
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id, timeout: 40)
            let new = h.server.sha256("/h.bin")
            #expect(new != old)
            #expect(done.etag == paused.etag, "the validators did not change")
            #expect(sha256(ofFile: h.path("h.bin")) == new, "never a splice of two versions")
            #expect(done.restartCount == 1)
            #expect(done.restartReason == "resource changed (checked by overlap)")
            let check = try #require(h.gets("/h.bin").dropFirst(before).first)
            let longest = try #require(paused.segments.max { $0.done < $1.done })
            #expect(check.range == "bytes=\(longest.next - 4096)-\(longest.next - 1)" && check.ifRange == paused.etag && check.status == 206)
        }
    }

    /// A version whose first answer came within the second of its change has validators that never
    /// verify (RFC 9110 8.8.2.2): it is fetched front to back, and a resume's answer, whose date is
    /// old by then, does not split it either. A tester's was split on the resume, and the next
    /// resume found its parts unverifiable and threw 13.9 MiB of an unchanged file away.
    @Test func aVersionChangedWithinItsSecondIsNeverSplitNorItsBytesThrownAway() async throws {
        try await Harness.with({ $0.stallTimeout = .seconds(120) }) { h in
            let size = 8 * 1024 * 1024
            var faults = Faults()
            faults.modifiedWhenServed = true
            faults.holdAt = [1024 * 1024, 3 * 1024 * 1024]
            h.server.serve("/fresh.bin", size: size, faults: faults)
            let id = try await h.session.schedule(h.server.url("/fresh.bin"), to: .file(h.path("fresh.bin")), options: Self.options(4))
            try await h.wait(id) { $0.bytesOnDisk == 1024 * 1024 }
            #expect(await h.session.snapshot()[id]?.recentlyChanged == true, "the first answer came within the second of its date")
            try await h.session.pause(id)
            try await Task.sleep(for: .seconds(1.1))
            h.server.release("/fresh.bin")
            try await h.session.resume(id)
            try await h.wait(id) { $0.bytesOnDisk == 3 * 1024 * 1024 }
            try await h.session.pause(id)
            let second = try #require(await h.session.snapshot()[id])
            #expect(second.segments.isEmpty, "not split on the resume: \(second.segments)")
            #expect(Self.partRequests(h, "/fresh.bin").isEmpty)
            h.server.release("/fresh.bin")
            try await h.session.resume(id)
            let done = try await h.waitCompleted(id, timeout: 30)
            #expect(sha256(ofFile: h.path("fresh.bin")) == h.server.sha256("/fresh.bin"))
            #expect(done.restartCount == 0, "no byte thrown away: \(done.restartReason ?? "")")
            #expect(h.gets("/fresh.bin").dropFirst().allSatisfy { $0.status == 206 }, "each resume picked up its bytes")
        }
    }

    @Test func aServerThatIgnoresRangesIsFetchedOverOneConnection() async throws {
        try await Harness.with { h in
            let size = 6 * 1024 * 1024
            var faults = Faults()
            faults.ignoreRange = true
            h.server.serve("/n.bin", size: size, faults: faults)
            let id = try await h.session.schedule(h.server.url("/n.bin"), to: .file(h.path("n.bin")), options: Self.options(8))
            let done = try await h.waitCompleted(id)
            #expect(sha256(ofFile: h.path("n.bin")) == h.server.sha256("/n.bin"))
            #expect(h.gets("/n.bin").count == 1, "no part requests: \(h.gets("/n.bin").map(\.range))")
            #expect(done.restartCount == 0)
        }
    }

    @Test func extraConnectionsStopAtTheHostCap() async throws {
        try await Harness.with({ $0.maxActive = 2; $0.stallTimeout = .seconds(120) }) { h in
            let size = 8 * 1024 * 1024
            // Held at every odd MiB: the connections are counted while all of them are open.
            let held = { var f = Faults(); f.holdAt = Self.midpoints; return f }()
            h.server.serve("/a.bin", size: size, faults: held)
            h.server.serve("/b.bin", size: size, faults: held)
            let a = try await h.session.schedule(h.server.url("/a.bin"), to: .file(h.path("a.bin")), options: Self.options(4))
            try await h.wait(a) { $0.connections == 4 && $0.bytesOnDisk == 4 * 1024 * 1024 }
            // The host has its four: B's first connection is never refused, but it gets no extra one.
            let b = try await h.session.schedule(h.server.url("/b.bin"), to: .file(h.path("b.bin")), options: Self.options(4))
            try await h.wait(b) { $0.bytesOnDisk == 1024 * 1024 }
            // A moment more: an extra connection would have had time to open.
            try await Task.sleep(for: .milliseconds(300))
            let snapshot = await h.session.snapshot()
            #expect(snapshot[a]?.connections == 4)
            #expect(snapshot[b]?.connections == 1, "no extra connection past the host's cap")
            #expect(h.server.peakConcurrentResponses == 5)
            #expect(h.gets("/b.bin").count == 1)
            Self.releaseAll(h, "/a.bin")
            Self.releaseAll(h, "/b.bin")
            try await h.waitCompleted(a)
            try await h.waitCompleted(b)
            #expect(h.gets("/b.bin").count == 1, "B went on front to back")
            #expect(sha256(ofFile: h.path("a.bin")) == h.server.sha256("/a.bin"))
            #expect(sha256(ofFile: h.path("b.bin")) == h.server.sha256("/b.bin"))
        }
    }
}
