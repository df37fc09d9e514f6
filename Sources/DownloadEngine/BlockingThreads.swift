import Foundation

/// Threads for work that blocks (a plain-http request's loop, a name lookup), kept after a job for
/// the next one.
///
/// A thread started and ended for each of a thousand small files cost its stack's mappings, its
/// start and its exit a thousand times over (`clone3`, `mmap`, `mprotect`, `madvise`, `munmap`):
/// profiled, about a tenth of the kernel time haul spent beside the file system's. A job gets a
/// waiting thread when there is one, else a new thread up to `limit`, else the next thread to
/// finish its job; a thread waits `idleTime` for its next job and then ends, so a quiet queue holds
/// none.
final class BlockingThreads: @unchecked Sendable {
    static let shared = BlockingThreads(name: "haul-direct", idleTime: 10)

    private let name: String
    private let idleTime: TimeInterval
    /// The most threads at once; a job that finds them all busy waits for the first free one.
    private let limit: Int
    /// Guards `jobs`, `waiting` and `alive`, and is what waiting threads wait on.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    /// Threads waiting for a job (a signalled one counts until it takes its job).
    private var waiting = 0
    /// Threads alive (running a job or waiting for one): at most `limit`.
    private var alive = 0

    init(name: String, idleTime: TimeInterval, limit: Int = .max) {
        self.name = name
        self.idleTime = idleTime
        self.limit = limit
    }

    /// Runs `job` on a thread of the pool: on a waiting thread, else on a new one, else (at the
    /// limit) on the first that finishes its job.
    func run(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        // Every job has a thread on its way: a waiting one (each signal wakes one more), a new one,
        // or at the limit a busy one, which takes the next job when it is done.
        let spawn = jobs.count > waiting && alive < limit
        if spawn { alive += 1 }
        condition.unlock()
        guard spawn else {
            // After the unlock: a thread woken while the lock is still held only goes back to
            // sleep on it (a tenth of all the context switches of a thousand small files).
            condition.signal()
            return
        }
        let thread = Thread { [self] in serve() }
        thread.name = name
        thread.start()
    }

    /// How many threads are alive (running a job or waiting for one), and how many of them wait.
    var counts: (alive: Int, waiting: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (alive, waiting)
    }

    private func serve() {
        condition.lock()
        while true {
            if jobs.isEmpty {
                waiting += 1
                let deadline = Date(timeIntervalSinceNow: idleTime)
                while jobs.isEmpty, condition.wait(until: deadline) {}
                waiting -= 1
                guard !jobs.isEmpty else {
                    alive -= 1
                    condition.unlock()
                    return
                }
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
            condition.lock()
        }
    }
}
