@testable import DownloadEngine
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

    @Test func filesOfOneDirectoryShareAStripe() {
        #expect(DirectoryLock.stripeIndex("/srv/a/one.bin") == DirectoryLock.stripeIndex("/srv/a/two.bin.part"))
        #expect(DirectoryLock.stripeIndex("one.bin") == DirectoryLock.stripeIndex("two.bin"))
        // Sixteen stripes: some directory among twenty takes another than /srv/a's.
        let others = (0..<20).map { DirectoryLock.stripeIndex("/srv/dir\($0)/f") }
        #expect(others.contains { $0 != DirectoryLock.stripeIndex("/srv/a/f") })
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
