import DownloadCore
import Foundation
import Testing

/// The header's speed: what every transfer received, finished ones included, over the last
/// seconds, without I/O.
@Suite struct SessionStateMachineThroughputTests {
    typealias Machine = SessionStateMachine
    let now = Date(timeIntervalSince1970: 1_000_000)

    func machine(maxActive: Int = 2) -> Machine {
        Machine(configuration: .init(maxActive: maxActive, backoff: Backoff(initial: 1, cap: 60, spread: 0)))
    }

    func url(_ name: String) -> URL {
        URL(string: "http://example.test/\(name)")!
    }

    func info(_ disposition: Disposition, total: Int64) -> Machine.ResponseInfo {
        Machine.ResponseInfo(status: 200, total: total, validators: Validators(etag: "\"v\""), finalURL: nil, serverFileName: nil, disposition: disposition)
    }

    /// Starts `name` and says its response came: its id and attempt.
    func started(_ m: inout Machine, _ name: String, _ disposition: Disposition = .fresh, total: Int64 = 100_000) throws -> (DownloadID, AttemptID) {
        let (id, actions) = try m.schedule(url: url(name), destination: .file("/d/\(name)"))
        let attempt = try #require(actions.lazy.compactMap { if case .startTransfer(let order) = $0, order.id == id { order.attempt } else { nil } }.first)
        m.transferResponded(id, attempt: attempt, info: info(disposition, total: total))
        return (id, attempt)
    }

    /// Files done between two ticks count: the rows' speeds (each needs two samples a tick apart)
    /// said nothing of them.
    @Test func smallFilesDoneBetweenTicksCountInTheSpeed() throws {
        var m = machine()
        let (a, attemptA) = try started(&m, "a")
        let (b, attemptB) = try started(&m, "b")
        #expect(m.throughput == 0)
        m.transferProgressed(a, attempt: attemptA, bytesOnDisk: 0, at: 0)
        m.transferProgressed(b, attempt: attemptB, bytesOnDisk: 0, at: 0)
        m.sampleThroughput(at: 0)
        m.transferProgressed(a, attempt: attemptA, bytesOnDisk: 50_000, at: 0.1)
        let changed = m.sampleThroughput(at: 0.1)
        #expect(changed)
        #expect(m.throughput == 500_000)
        // a ends with all its bytes between two ticks; b is sampled once more.
        _ = m.transferFinished(a, attempt: attemptA, outcome: .completed, bytesOnDisk: 100_000, now: now, jitter: 0)
        m.transferProgressed(b, attempt: attemptB, bytesOnDisk: 100_000, at: 0.2)
        m.sampleThroughput(at: 0.2)
        #expect(m.throughput == 1_000_000, "200,000 bytes in 0.2 s")
        #expect(m.snapshot.throughput == 1_000_000)
        #expect(m.snapshot.totalBytesPerSecond == 1_000_000)
        let rows = m.snapshot.downloads.reduce(0) { $0 + $1.bytesPerSecond }
        #expect(rows == 500_000, "the rows' sum: b's own speed only")
    }

    /// A resume's kept bytes were received by an earlier attempt; a restart's new bytes count from zero.
    @Test func keptBytesAreNotReceivedAgainAndARestartCountsFromZero() throws {
        var m = machine(maxActive: 1)
        var row = Download(id: DownloadID(1), url: url("r"), destination: .file("/d/r"), partPath: "/d/r.part")
        row.state = .queued
        row.bytesOnDisk = 4_000_000
        row.totalBytes = 5_000_000
        m.restore([row], nextID: 2, holdPending: false)
        let attempt = try #require(m.startQueued().lazy.compactMap { if case .startTransfer(let order) = $0 { order.attempt } else { nil } }.first)
        m.transferProgressed(DownloadID(1), attempt: attempt, bytesOnDisk: 4_000_000, at: 0)
        m.sampleThroughput(at: 0)
        m.transferResponded(DownloadID(1), attempt: attempt, info: info(.resumed(from: 4_000_000, verified: true), total: 5_000_000))
        m.transferProgressed(DownloadID(1), attempt: attempt, bytesOnDisk: 4_100_000, at: 1)
        m.sampleThroughput(at: 1)
        #expect(m.throughput == 100_000)
        // The resource changed: the file is emptied and fetched again.
        m.transferResponded(DownloadID(1), attempt: attempt, info: info(.restarted(reason: "resource changed"), total: 5_000_000))
        m.transferProgressed(DownloadID(1), attempt: attempt, bytesOnDisk: 300_000, at: 2)
        m.sampleThroughput(at: 2)
        #expect(m.throughput == 200_000, "100,000 then 300,000 bytes in 2 s")
    }

    /// Nothing running: no speed, whatever the last seconds received.
    @Test func nothingRunningIsNoSpeed() throws {
        var m = machine()
        let (a, attempt) = try started(&m, "a")
        m.transferProgressed(a, attempt: attempt, bytesOnDisk: 0, at: 0)
        m.sampleThroughput(at: 0)
        m.transferProgressed(a, attempt: attempt, bytesOnDisk: 80_000, at: 0.1)
        m.sampleThroughput(at: 0.1)
        #expect(m.throughput > 0)
        _ = try m.pause(a)
        #expect(m.throughput == 0)
        #expect(m.snapshot.throughput == 0)
    }
}
