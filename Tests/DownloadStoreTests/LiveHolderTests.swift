import DownloadStore
import Foundation
import Testing
import TestSupport

/// Who holds a queue is asked of the kernel's lock table, never told by a program's name.
@Suite struct LiveHolderTests {
    @Test func theHolderIsFoundByItsLockWhateverTheProgramIsCalled() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            Issue.record("python3 is needed (.ci/run installs it)")
            return
        }
        let scratch = try TemporaryDirectory("haul-holder")
        defer { withExtendedLifetime(scratch) {} }
        let path = scratch.path("queue")
        let directory = try StateDirectory(creatingAt: path)
        #expect(directory.liveHolder() == nil, "nobody holds a new queue")

        // This test process (not named haul) holds it.
        var lock: QueueLock? = try directory.lock()
        #expect(directory.liveHolder() == getpid())
        withExtendedLifetime(lock) {}
        lock = nil
        // At once, unless a process that tests beside this one start holds a copy of the lock's
        // descriptor between its `clone` and its `exec` (once seen in a full run): the lock is the
        // open file's, and goes with its last descriptor.
        #expect(try await eventually(timeout: 2, "released with the lock") { directory.liveHolder() == nil })

        // Another program entirely (Python, which the tests' servers need anyway) holds it, and the
        // pid file names someone else. One process, no child: ending it ends the lock.
        try Data("1\n".utf8).write(to: URL(fileURLWithPath: directory.lockPath))
        let holder = try ChildProcess(
            "/usr/bin/python3", ["-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(30)", directory.lockPath]
        )
        _ = try await poll(timeout: 10) { directory.liveHolder() }
        #expect(directory.liveHolder() == holder.pid, "the pid in the lock table, not the one in the file")
        holder.send(SIGKILL)
        await holder.wait()
        #expect(directory.liveHolder() == nil, "a pid file whose process runs is no holder without the lock")
    }

    @Test func theHolderIsFoundAmongHundredsOfLocks() async throws {
        // /proc/locks says its size is 0; a reader that trusts that, or reads once, sees only its
        // first page. 300 other locks push the queue's past it, in either order.
        let scratch = try TemporaryDirectory("haul-holder")
        defer { withExtendedLifetime(scratch) {} }
        let path = scratch.path("queue")
        let directory = try StateDirectory(creatingAt: path)
        var first: QueueLock? = try directory.lock()
        var others: [Int32] = []
        defer { for fd in others { close(fd) } }
        for index in 0..<300 {
            let fd = open(path + "/other-\(index)", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            others.append(fd)
        }
        #expect(directory.liveHolder() == getpid(), "taken before the others")
        withExtendedLifetime(first) {}
        first = nil
        // Soon rather than at once: a process another test starts meanwhile holds a copy of the
        // lock's descriptor until its `exec` (see the test above; failed once in a full run).
        #expect(try await eventually(timeout: 2, "released with the lock") { directory.liveHolder() == nil })
        let again = try directory.lock()
        #expect(directory.liveHolder() == getpid(), "taken after the others")
        withExtendedLifetime(again) {}
    }
}
