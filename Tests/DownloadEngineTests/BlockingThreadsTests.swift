@testable import DownloadEngine
import Foundation
import Synchronization
import Testing
import TestSupport

/// The threads plain-http requests and name lookups run on: every job starts at once (jobs block,
/// so none may wait for another's thread), a thread that waits takes the next job, and a thread
/// with nothing to do ends.
@Suite struct BlockingThreadsTests {
    /// Jobs that each block until all of them run: possible only with a thread each, at once.
    /// Jobs that count their starts and ends, and block between them until released.
    final class Gate: Sendable {
        let started = Atomic<Int>(0)
        let finished = Atomic<Int>(0)
        let release = DispatchSemaphore(value: 0)

        func run(_ count: Int, on pool: BlockingThreads) {
            for _ in 0..<count {
                pool.run { [self] in
                    started.add(1, ordering: .sequentiallyConsistent)
                    // Never hangs the suite: the wait ends after 30 s either way.
                    _ = release.wait(timeout: .now() + 30)
                    finished.add(1, ordering: .sequentiallyConsistent)
                }
            }
        }

        var starts: Int { started.load(ordering: .sequentiallyConsistent) }
        var ends: Int { finished.load(ordering: .sequentiallyConsistent) }
    }

    @Test func everyJobRunsAtOnceOnAThreadOfItsOwn() async throws {
        let pool = BlockingThreads(name: "haul-test", idleTime: 10)
        let count = 24
        let gate = Gate()
        gate.run(count, on: pool)
        try await waitUntil(timeout: 20, "\(count) jobs running side by side") { gate.starts == count }
        #expect(pool.counts.alive == count)
        for _ in 0..<count { gate.release.signal() }
        try await waitUntil(timeout: 20, "the jobs to end") { gate.ends == count }
        try await waitUntil(timeout: 20, "every thread to wait for a job") { pool.counts.waiting == count }
    }

    /// A thread that finished its job takes the next: no new thread, the same one.
    @Test func aWaitingThreadTakesTheNextJob() async throws {
        // A thread that waits longer than the test can take: in full suites on a loaded machine the
        // poll below was late by more than 10 s, the thread had ended idle, and the test timed out.
        let pool = BlockingThreads(name: "haul-test", idleTime: 120)
        let threads = Mutex<[pthread_t]>([])
        for round in 1...3 {
            pool.run { threads.withLock { $0.append(pthread_self()) } }
            try await waitUntil(timeout: 20, "job \(round) to run and its thread to wait") {
                threads.withLock { $0.count } == round && pool.counts.waiting == 1
            }
        }
        #expect(pool.counts.alive == 1)
        #expect(Set(threads.withLock { $0 }).count == 1, "one thread ran the three jobs")
    }

    /// With a limit, jobs beyond it wait for a busy thread to finish; none is lost.
    @Test func aLimitedPoolRunsTheRestAsItsThreadsFinish() async throws {
        let pool = BlockingThreads(name: "haul-test", idleTime: 10, limit: 3)
        let count = 10
        let gate = Gate()
        gate.run(count, on: pool)
        try await waitUntil(timeout: 20, "three jobs running") { gate.starts >= 3 }
        // A moment for a fourth thread to show up, if the limit let one start.
        try await Task.sleep(for: .milliseconds(200))
        #expect(gate.starts == 3)
        #expect(pool.counts.alive == 3)
        for _ in 0..<count { gate.release.signal() }
        try await waitUntil(timeout: 20, "every job to run and end") { gate.ends == count }
        #expect(pool.counts.alive == 3)
    }

    /// Idle threads end after `idleTime`; a job after that gets a new one.
    @Test func idleThreadsEnd() async throws {
        let pool = BlockingThreads(name: "haul-test", idleTime: 0.2)
        let ran = Atomic<Int>(0)
        for _ in 0..<4 { pool.run { ran.add(1, ordering: .sequentiallyConsistent) } }
        try await waitUntil(timeout: 20, "the jobs to run") { ran.load(ordering: .sequentiallyConsistent) == 4 }
        try await waitUntil(timeout: 20, "the idle threads to end") { pool.counts.alive == 0 }
        pool.run { ran.add(1, ordering: .sequentiallyConsistent) }
        try await waitUntil(timeout: 20, "a job after they ended to run") { ran.load(ordering: .sequentiallyConsistent) == 5 }
    }
}
