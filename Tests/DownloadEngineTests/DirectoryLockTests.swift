@testable import DownloadEngine
import Dispatch
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock that lets one change at a time into a directory's entries.
@Suite struct DirectoryLockTests {
    @Test func theCallsErrnoSurvivesTheLock() {
        let missing = NSTemporaryDirectory() + "haul-directory-lock-\(UUID().uuidString)/nothing"
        errno = 0
        let result = DirectoryLock.change(missing) { unlink(missing) }
        #expect(result == -1)
        #expect(errno == ENOENT)
    }

    @Test func filesOfOneDirectoryShareALockAndOtherDirectoriesDoNot() {
        #expect(DirectoryLock.lock(for: "/srv/a/one.bin") === DirectoryLock.lock(for: "/srv/a/two.bin.part"))
        #expect(DirectoryLock.lock(for: "one.bin") === DirectoryLock.lock(for: "two.bin"))
        #expect(DirectoryLock.lock(for: "/srv/a/one.bin") !== DirectoryLock.lock(for: "/srv/b/one.bin"))
        #expect(DirectoryLock.lock(for: "/srv/a/one.bin") !== DirectoryLock.lock(for: "/srv/a/sub/one.bin"))
    }

    /// A call that blocks in one directory (a hung file system) holds up no change elsewhere.
    @Test func aChangeHeldInOneDirectoryLetsAnotherDirectoryChange() async throws {
        let entered = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            DirectoryLock.change("/srv/hung/file") {
                _ = entered.signal()
                _ = release.wait(timeout: .now() + 30)
            }
        }
        #expect(entered.wait(timeout: .now() + 20) == .success)
        let other = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            DirectoryLock.change("/srv/fine/file") { _ = other.signal() }
        }
        #expect(other.wait(timeout: .now() + 5) == .success, "the other directory's change ran while the first was held")
        release.signal()
    }

    final class Overlap: Sendable {
        let inFlight = Atomic<Int>(0)
        let most = Atomic<Int>(0)
    }

    @Test func changesInOneDirectoryNeverOverlap() async {
        let overlap = Overlap()
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        Thread.detachNewThread {
                            for call in 0..<20 {
                                DirectoryLock.change("/srv/a/\(worker)-\(call)") {
                                    let now = overlap.inFlight.add(1, ordering: .sequentiallyConsistent).newValue
                                    overlap.most.max(now, ordering: .sequentiallyConsistent)
                                    usleep(200)
                                    overlap.inFlight.subtract(1, ordering: .sequentiallyConsistent)
                                }
                            }
                            done.resume()
                        }
                    }
                }
            }
        }
        #expect(overlap.most.load(ordering: .sequentiallyConsistent) == 1)
    }
}
