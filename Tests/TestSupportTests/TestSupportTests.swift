import Foundation
import Testing
import TestSupport

/// The shared test plumbing: programs waited for without holding a thread, directories that go with
/// their test, waits that give up.
@Suite struct TestSupportTests {
    @Test func aChildSaysHowItEndedAndWhatItPrinted() async throws {
        #expect(try await ChildProcess.run("/bin/sh", ["-c", "exit 3"]) == ChildProcess.Termination(status: 3, signalled: false))
        let killed = try ChildProcess("/bin/sleep", ["30"])
        killed.send(SIGKILL)
        #expect(await killed.wait() == ChildProcess.Termination(status: SIGKILL, signalled: true))
        #expect(!killed.isRunning)
        let (ended, output) = try await ChildProcess.output("/bin/sh", ["-c", "pwd; echo oops >&2"], in: "/usr", mergingErrors: true)
        #expect(ended.status == 0)
        #expect(output == "/usr\noops\n")
        #expect(throws: ChildProcess.Failure.self) { try ChildProcess("/no/such/program") }
    }

    @Test func waitingForChildrenHoldsNoThreadOfThePool() async throws {
        // More children than the pool has threads, each waited for at once, and a task that ends them
        // a moment later: were a wait to block its thread, the waits would take every thread of the
        // pool and that task could not run until the children ended by themselves, 30 s later.
        let children = try (0..<(ProcessInfo.processInfo.activeProcessorCount + 2)).map { _ in try ChildProcess("/bin/sleep", ["30"]) }
        defer { for child in children { child.send(SIGKILL) } }
        let started = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for child in children { group.addTask { await child.wait() } }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(100))
                for child in children { child.send(SIGTERM) }
            }
        }
        // Under 30 s, which a blocked pool would take: a full suite on 2 cores took 11 to 14 s, and
        // 15.5 s in one CI run (the bar was 15).
        #expect(ContinuousClock.now - started < .seconds(25), "the task that ends the children ran only when they ended")
        #expect(children.allSatisfy { $0.termination == ChildProcess.Termination(status: SIGTERM, signalled: true) })
    }

    @Test func aTimedOutWaitStopsTheChild() async throws {
        let child = try ChildProcess("/bin/sleep", ["30"])
        let (termination, timedOut) = await child.wait(timeout: 0.2)
        #expect(timedOut)
        #expect(termination == ChildProcess.Termination(status: SIGTERM, signalled: true))
        let quick = try ChildProcess("/bin/true")
        #expect(await quick.wait(timeout: 10) == (ChildProcess.Termination(status: 0, signalled: false), false))
    }

    @Test func aTemporaryDirectoryGoesWithItsObjectReadOnlyPartsAndAll() throws {
        var scratch: TemporaryDirectory? = try TemporaryDirectory("haul-support")
        let path = try #require(scratch?.path)
        try FileManager.default.createDirectory(atPath: path + "/locked/deeper", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: path + "/locked/deeper/file", contents: Data("x".utf8)))
        #expect(chmod(path + "/locked/deeper", 0o500) == 0 && chmod(path + "/locked", 0o500) == 0)
        #expect(path.hasPrefix(FileManager.default.temporaryDirectory.path + "/haul-support-"))
        withExtendedLifetime(scratch) {}
        scratch = nil
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aWaitThatRunsOutOfTimeSaysSo() async throws {
        var tries = 0
        await withKnownIssue("timed out waiting for never") {
            let held = try await eventually(timeout: 0.1, "never") {
                tries += 1
                return false
            }
            #expect(!held)
        }
        #expect(tries >= 2, "tried at the start and at the deadline at least")
        #expect(try await poll(timeout: 5) { tries > 0 ? tries : nil } == tries)
        var threw = false
        await withKnownIssue("timed out waiting for never, recorded before it throws") {
            do {
                try await waitUntil(timeout: 0.05, "never") { false }
            } catch is TimedOut {
                threw = true
            }
        }
        #expect(threw)
    }

    @Test func digestsAndLengthsOfFiles() throws {
        let scratch = try TemporaryDirectory("haul-support")
        #expect(FileManager.default.createFile(atPath: scratch.path("abc"), contents: Data("abc".utf8)))
        #expect(sha256(ofFile: scratch.path("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(sha256(ofFile: scratch.path("none")).isEmpty)
        #expect(fileLength(scratch.path("abc")) == 3)
        #expect(fileLength(scratch.path("none")) == nil)
    }
}
