import DownloadCore
import DownloadEngine
import Foundation
import LoopbackServer
import Testing
import TestSupport

/// Speed limits changed while transfers run, measured on disk over a few seconds, with wide
/// margins (two shared cores, the suite in parallel).
@Suite struct SessionLimitsTests {
    /// How fast the downloads `ids` grow on disk (all together), bytes a second: the least-squares
    /// slope of their bytes sampled every 50 ms over `seconds`. For a download in parts, whose
    /// connections the server cannot add up (a part cut short leaves bytes nobody reads).
    static func diskRate(_ session: DownloadSession, _ ids: [DownloadID], over seconds: Double) async throws -> Double {
        let started = ContinuousClock.now
        var samples: [(time: Double, bytes: Double)] = []
        while true {
            let elapsed = started.duration(to: .now).components
            let time = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
            let snapshot = await session.snapshot()
            samples.append((time, Double(ids.reduce(Int64(0)) { $0 + (snapshot[$1]?.bytesOnDisk ?? 0) })))
            guard time < seconds else { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let meanTime = samples.reduce(0) { $0 + $1.time } / Double(samples.count)
        let meanBytes = samples.reduce(0) { $0 + $1.bytes } / Double(samples.count)
        let covariance = samples.reduce(0) { $0 + ($1.time - meanTime) * ($1.bytes - meanBytes) }
        let variance = samples.reduce(0) { $0 + ($1.time - meanTime) * ($1.time - meanTime) }
        return variance > 0 ? covariance / variance : 0
    }

    static let kib = 1024.0

    /// Small files are held by the limit too: the bytes read with a response's head, held until
    /// the file is open, count against it (a tester's 300 files of 16 KiB took 0.45 s under
    /// `--limit-rate 128K`, 80 times the limit; about 30 KiB a download went uncharged). And a low
    /// limit reads in small steps, so the row shows a speed while it runs.
    @Test func bytesReadWithTheHeadCountAgainstTheLimit() async throws {
        try await Harness.with { h in
            try await h.session.setLimit(16 * 1024)
            for index in 0..<4 { h.server.serve("/s\(index).bin", size: 16 * 1024) }
            let started = ContinuousClock.now
            var ids: [DownloadID] = []
            for index in 0..<4 { ids.append(try await h.session.schedule(h.server.url("/s\(index).bin"), to: .file(h.path("s\(index).bin")))) }
            for id in ids { try await h.waitCompleted(id, timeout: 30) }
            let took = started.duration(to: .now)
            // 64 KiB at 16 KiB/s: 4 s, less the limiter's burst of a quarter of a second.
            #expect(took > .seconds(3), "64 KiB under 16 KiB/s took \(took)")
            for index in 0..<4 { #expect(sha256(ofFile: h.path("s\(index).bin")) == h.server.sha256("/s\(index).bin")) }
        }
    }

    @Test func aGlobalLimitSetWhileAFastDownloadRunsHoldsItNearTheLimitAndItsRemovalFreesIt() async throws {
        try await Harness.with { h in
            // Fast: forty times the limit, yet slow enough to still run when the limit comes.
            h.server.serve("/fast.bin", size: 96 * 1024 * 1024, faults: throttled(8 * 1024 * 1024))
            let id = try await h.session.schedule(h.server.url("/fast.bin"), to: .file(h.path("fast.bin")))
            try await h.wait(id) { $0.bytesOnDisk > 0 }

            try await h.session.setLimit(200 * 1024)
            #expect(await h.session.snapshot().limit == 200 * 1024)
            // Settled after what NIO and the sockets held drains (2 s); +40 %, as a loaded full suite
            // on 2 cores measured up to 321 KiB/s after a 1 s settle, and -40 %: a starved second
            // is not made up (the limit's bucket holds no more than its burst). Measured 73-109
            // KiB/s under load while a megabyte spliced just before the limit was charged to it
            // (5 s of wait); 201-205 since, on full suites beside two busy loops. Unlimited, this
            // download runs at 8 MiB/s.
            try await Task.sleep(for: .seconds(2))
            // Read from the bytes on disk: the server's side of a loopback socket is what the
            // end-to-end test measures; here a loaded suite starves that server's sampler.
            let limited = try await Self.diskRate(h.session, [id], over: 4)
            #expect((120 * Self.kib...280 * Self.kib).contains(limited), "\(Int(limited / Self.kib)) KiB/s, limited to 200")

            try await h.session.setLimit(nil)
            #expect(await h.session.snapshot().limit == nil)
            // From the disk too: a suite loaded by other work on the machine starved the server's
            // sampler to 0 KiB/s over a second.
            let freed = try await Self.diskRate(h.session, [id], over: 2)
            #expect(freed > 1024 * Self.kib, "\(Int(freed / Self.kib)) KiB/s once the limit is gone")
            // Nothing was retried for it: one request.
            #expect(h.gets("/fast.bin").count == 1)
        }
    }

    @Test func aDownloadsOwnLimitHoldsAllItsConnectionsTogetherBesideTheGlobalOne() async throws {
        try await Harness.with({ $0.limitBytesPerSecond = 768 * 1024 }) { h in
            h.server.serve("/parts.bin", size: 32 * 1024 * 1024)
            h.server.serve("/free.bin", size: 32 * 1024 * 1024)
            var options = RequestOptions()
            options.connections = 2
            let limited = try await h.session.schedule([
                QueueRequest(url: h.server.url("/parts.bin"), destination: .file(h.path("parts.bin")), options: options, limit: 256 * 1024),
            ]).first
            let parts = try #require(limited)
            #expect(await h.session.snapshot()[parts]?.limit == 256 * 1024)
            // Split before the other download takes a connection to the host (the same cap).
            try await h.wait(parts) { $0.connections > 1 }
            let free = try await h.session.schedule(h.server.url("/free.bin"), to: .file(h.path("free.bin")))
            try await h.wait(free) { $0.bytesOnDisk > 0 }
            try await Task.sleep(for: .seconds(1))
            // Measured at once: the two rates share one window.
            async let partsRate = Self.diskRate(h.session, [parts], over: 4)
            async let freeRate = Self.diskRate(h.session, [free], over: 4)
            let (own, rest) = try await (partsRate, freeRate)
            #expect((180 * Self.kib...333 * Self.kib).contains(own), "\(Int(own / Self.kib)) KiB/s over its parts, limited to 256")
            #expect((538 * Self.kib...998 * Self.kib).contains(own + rest), "\(Int((own + rest) / Self.kib)) KiB/s in all, limited to 768")
            #expect(h.gets("/parts.bin").count > 1, "fetched in parts")

            // Its own limit removed: the global one is left, shared by both.
            try await h.session.setLimit(nil, for: parts)
            try await Task.sleep(for: .milliseconds(500))
            let after = try await Self.diskRate(h.session, [parts], over: 2)
            #expect(after > 333 * Self.kib, "\(Int(after / Self.kib)) KiB/s without its own limit, of 768 for both")
            await #expect(throws: DownloadSession.TransitionError.invalidArgument("the limit must be at least 1024 bytes a second (1K), or 0 for none")) {
                try await h.session.setLimit(100, for: parts)
            }
        }
    }

    @Test func aLimitFarBelowTheStallTimeoutIsNoStallAndRaisingItGoesOnAtOnce() async throws {
        // A 64 KiB read at 2 KiB/s waits half a minute: longer than the stall timeout many times over.
        try await Harness.with({ $0.stallTimeout = .seconds(1) }) { h in
            h.server.serve("/slow.bin", size: 1024 * 1024)
            let target = h.path("slow.bin")
            let id = try #require(try await h.session.schedule([
                QueueRequest(url: h.server.url("/slow.bin"), destination: .file(target), limit: 2048),
            ]).first)
            try await h.wait(id) { $0.bytesOnDisk > 0 }
            try await Task.sleep(for: .seconds(2.5))
            let held = try #require(await h.session.snapshot()[id])
            #expect(held.state == .downloading, "\(held.state)")
            #expect(held.lastError == nil)
            #expect(h.gets("/slow.bin").count == 1, "no stall, no retry")

            // A pause does not wait for the limit's half minute.
            let pausing = ContinuousClock.now
            try await h.session.pause(id)
            #expect(ContinuousClock.now - pausing < .seconds(3), "paused in \(ContinuousClock.now - pausing)")
            let paused = try #require(await h.session.snapshot()[id])
            #expect(paused.state == .paused && paused.bytesOnDisk == fileLength(h.path("slow.bin.part")))
            try await h.session.resume(id)
            try await h.wait(id) { $0.state == .downloading && $0.resumeCount == 1 }

            try await h.session.setLimit(nil, for: id)
            let started = ContinuousClock.now
            try await h.waitCompleted(id, timeout: 15)
            #expect(ContinuousClock.now - started < .seconds(10), "the wait under the old limit ended with it")
            #expect(sha256(ofFile: target) == h.server.sha256("/slow.bin"))
            #expect(h.gets("/slow.bin").count == 2)
        }
    }
}
