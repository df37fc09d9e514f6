@testable import DownloadEngine
import Dispatch
import Foundation
import Synchronization
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock that lets one change at a time into a directory's entries.
@Suite struct DirectoryLockTests {
    @Test func filesOfOneDirectoryShareALockAndOtherDirectoriesDoNot() {
        #expect(DirectoryLock.lock(for: "/srv/a/one.bin") === DirectoryLock.lock(for: "/srv/a/two.bin.part"))
        #expect(DirectoryLock.lock(for: "one.bin") === DirectoryLock.lock(for: "two.bin"))
        #expect(DirectoryLock.lock(for: "/srv/a/one.bin") !== DirectoryLock.lock(for: "/srv/b/one.bin"))
        #expect(DirectoryLock.lock(for: "/srv/a/one.bin") !== DirectoryLock.lock(for: "/srv/a/sub/one.bin"))
    }

    /// A call that blocks in one directory (a hung file system) holds up no change elsewhere.
    @Test func aChangeHeldInOneDirectoryLetsAnotherDirectoryChange() async throws {
        let flags = Flags()
        let release = DispatchSemaphore(value: 0)
        defer { release.signal() }
        Thread.detachNewThread {
            DirectoryLock.change("/srv/hung/file") {
                flags.entered.store(true, ordering: .sequentiallyConsistent)
                _ = release.wait(timeout: .now() + 30)
            }
        }
        try await waitUntil(timeout: 20, "the first change to hold its directory") { flags.entered.load(ordering: .sequentiallyConsistent) }
        Thread.detachNewThread {
            DirectoryLock.change("/srv/fine/file") { flags.other.store(true, ordering: .sequentiallyConsistent) }
        }
        try await waitUntil(timeout: 20, "the other directory's change to run while the first is held") {
            flags.other.load(ordering: .sequentiallyConsistent)
        }
    }

    final class Flags: Sendable {
        let entered = Atomic<Bool>(false)
        let other = Atomic<Bool>(false)
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
