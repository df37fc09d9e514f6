import DownloadCore
import Foundation
import Testing

/// The hooks' transitions (`--on-complete`, `--on-fail`), without I/O.
@Suite struct SessionStateMachineHooksTests {
    typealias Machine = SessionStateMachine
    let url = URL(string: "http://example.test/file.bin")!
    let now = Date(timeIntervalSince1970: 1_000_000)

    func machine(hooks: Set<HookEvent> = [.complete, .fail], maxTries: Int = 20) -> Machine {
        Machine(configuration: .init(maxActive: 3, maxTries: maxTries, backoff: Backoff(initial: 1, cap: 60, spread: 0), hooks: hooks))
    }

    func started(_ m: inout Machine, _ path: String = "/d/file.bin", url: URL? = nil) throws -> (DownloadID, AttemptID) {
        let (id, actions) = try m.schedule(url: url ?? self.url, destination: .file(path))
        guard case .startTransfer(let order)? = actions.last else { throw Failure(text: "no transfer started: \(actions)") }
        return (id, order.attempt)
    }

    struct Failure: Error {
        var text: String
    }

    /// The hook actions among `actions`.
    func hooks(_ actions: [Machine.Action]) -> [(DownloadID, HookEvent, UInt64)] {
        actions.compactMap { action in
            if case .runHook(let id, let event, let token) = action { return (id, event, token) }
            return nil
        }
    }

    /// Completes `id` and places its file; the actions of the placing.
    func complete(_ m: inout Machine, _ id: DownloadID, _ attempt: AttemptID) -> [Machine.Action] {
        let finished = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 100, now: now, jitter: 0)
        #expect(hooks(finished).isEmpty, "no hook before the file is in place")
        return m.finalized(id, paths: ["/d/file.bin"])
    }

    @Test func theCompleteHookRunsOnceTheFileIsPlacedAndRecordsHowItWent() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let placed = complete(&m, id, attempt)
        let runs = hooks(placed)
        #expect(runs.count == 1)
        #expect(runs.first?.0 == id && runs.first?.1 == .complete)
        #expect(m.download(id)?.hook == HookRun(event: .complete, status: .pending), "pending from the commit of the completion on")
        let token = try #require(runs.first?.2)
        m.hookEnded(id, token: token, status: .exited(code: 0, seconds: 1.25))
        #expect(m.download(id)?.hook?.status == .exited(code: 0, seconds: 1.25))
        #expect(m.download(id)?.hook?.text == "hook ran (exit 0, 1.2 s)")
        // A second report of the same run changes nothing.
        m.hookEnded(id, token: token, status: .exited(code: 3, seconds: 2))
        #expect(m.download(id)?.hook?.succeeded == true)
    }

    @Test func withoutAHookForTheEventNothingRuns() throws {
        var m = machine(hooks: [.fail])
        let (id, attempt) = try started(&m)
        #expect(hooks(complete(&m, id, attempt)).isEmpty)
        #expect(m.download(id)?.hook == nil)
    }

    @Test("every way to fail runs the fail hook", arguments: ["fatal", "retries", "protocol", "placing"])
    func everyWayToFailRunsTheFailHook(_ way: String) throws {
        var m = machine(maxTries: 1)
        let (id, attempt) = try started(&m)
        var actions: [Machine.Action]
        switch way {
        case "fatal":
            actions = m.transferFinished(id, attempt: attempt, outcome: .fatal(reason: "HTTP 404 Not Found"), bytesOnDisk: 0, now: now, jitter: 0)
        case "retries":
            actions = m.transferFinished(
                id, attempt: attempt, outcome: .retryable(reason: "reset", retryAfter: nil, progressed: false), bytesOnDisk: 0, now: now, jitter: 0
            )
        case "protocol":
            actions = m.transferFinished(id, attempt: attempt, outcome: .protocolError(reason: "the server sent an invalid header"), bytesOnDisk: 0, now: now, jitter: 0)
        default:
            _ = m.transferFinished(id, attempt: attempt, outcome: .completed, bytesOnDisk: 100, now: now, jitter: 0)
            actions = m.finalizeFailed(id, reason: "cannot move the file")
        }
        guard case .failed = m.download(id)?.state else { throw Failure(text: "not failed: \(String(describing: m.download(id)?.state))") }
        #expect(hooks(actions).map(\.1) == [.fail], "\(actions)")
        #expect(m.download(id)?.hook == HookRun(event: .fail, status: .pending))
    }

    @Test func aRetryForgetsTheHookAndIgnoresTheOldRunsReport() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let failed = m.transferFinished(id, attempt: attempt, outcome: .fatal(reason: "HTTP 404 Not Found"), bytesOnDisk: 0, now: now, jitter: 0)
        let old = try #require(hooks(failed).first?.2)
        let resumed = try m.resume(id)
        #expect(m.download(id)?.hook == nil, "a retry is a new ending")
        m.hookEnded(id, token: old, status: .exited(code: 0, seconds: 1))
        #expect(m.download(id)?.hook == nil, "the old run's report is stale")
        guard case .startTransfer(let order)? = resumed.last else { throw Failure(text: "\(resumed)") }
        let again = m.transferFinished(id, attempt: order.attempt, outcome: .fatal(reason: "HTTP 404 Not Found"), bytesOnDisk: 0, now: now, jitter: 0)
        let new = try #require(hooks(again).first?.2)
        #expect(new != old)
        m.hookEnded(id, token: old, status: .exited(code: 9, seconds: 1))
        #expect(m.download(id)?.hook?.isPending == true)
        m.hookEnded(id, token: new, status: .timedOut(limit: 600))
        #expect(m.download(id)?.hook?.text == "hook timed out after 10 min, killed")
    }

    @Test func cancelFetchAgainAndRemoveForgetTheHook() throws {
        var m = machine()
        let (id, attempt) = try started(&m)
        let token = try #require(hooks(complete(&m, id, attempt)).first?.2)
        _ = try m.fetchAgain(id)
        #expect(m.download(id)?.hook == nil)
        m.hookEnded(id, token: token, status: .exited(code: 0, seconds: 1))
        #expect(m.download(id)?.hook == nil)

        let (other, otherAttempt) = try started(&m, "/d/other.bin", url: URL(string: "http://example.test/other")!)
        _ = m.transferFinished(other, attempt: otherAttempt, outcome: .fatal(reason: "HTTP 410 Gone"), bytesOnDisk: 0, now: now, jitter: 0)
        #expect(m.download(other)?.hook?.isPending == true)
        _ = try m.cancel(other)
        #expect(m.download(other)?.hook == nil)
        try m.remove(other)
        m.hookEnded(other, token: token, status: .exited(code: 0, seconds: 1))
        #expect(m.download(other) == nil)
    }

    @Test func aStoredPendingHookRunsAgainAfterRestore() throws {
        var completed = Download(id: DownloadID(1), url: url, destination: .file("/d/a"), partPath: "/d/a.part")
        completed.state = .completed
        completed.completedPaths = ["/d/a"]
        completed.hook = HookRun(event: .complete, status: .pending)
        var failed = Download(id: DownloadID(2), url: URL(string: "http://example.test/b")!, destination: .file("/d/b"), partPath: "/d/b.part")
        failed.state = .failed(reason: "HTTP 404 Not Found")
        failed.hook = HookRun(event: .fail, status: .pending)
        var done = Download(id: DownloadID(3), url: URL(string: "http://example.test/c")!, destination: .file("/d/c"), partPath: "/d/c.part")
        done.state = .completed
        done.completedPaths = ["/d/c"]
        done.hook = HookRun(event: .complete, status: .exited(code: 0, seconds: 1))

        var m = machine(hooks: [.complete])
        m.restore([completed, failed, done], nextID: 4, holdPending: false)
        let actions = m.runPendingHooks()
        #expect(hooks(actions).map(\.0) == [DownloadID(1)], "only a pending hook runs again: \(actions)")
        #expect(m.download(DownloadID(2))?.hook?.status == .couldNotStart(reason: "no on-fail hook is set in this run"))
        #expect(m.download(DownloadID(3))?.hook?.succeeded == true)
        #expect(m.runPendingHooks().isEmpty, "a hook running is not started twice")
        let token = try #require(hooks(actions).first?.2)
        m.hookEnded(DownloadID(1), token: token, status: .exited(code: 0, seconds: 0.5))
        #expect(m.download(DownloadID(1))?.hook?.succeeded == true)

        var only = machine()
        only.restore([completed, failed], nextID: 4, holdPending: true)
        #expect(hooks(only.runPendingHooks(only: [DownloadID(2)])).map(\.0) == [DownloadID(2)])
        #expect(only.download(DownloadID(1))?.hook?.isPending == true, "others are left to the haul that runs the queue")
    }

    // MARK: The value

    @Test("each status has its own words, and survives the store and JSON", arguments: [
        (HookStatus.pending, "hook pending", "pending"),
        (.exited(code: 0, seconds: 1.25), "hook ran (exit 0, 1.2 s)", "ran"),
        (.exited(code: 3, seconds: 12.4), "hook failed (exit 3, 12 s)", "failed"),
        (.signalled(signal: 9, seconds: 0.5), "hook failed (killed by signal 9, 0.5 s)", "failed"),
        (.timedOut(limit: 600), "hook timed out after 10 min, killed", "timed out"),
        (.timedOut(limit: 2), "hook timed out after 2 s, killed", "timed out"),
        (.couldNotStart(reason: "cannot run /x: No such file or directory"), "hook could not start: cannot run /x: No such file or directory", "could not start"),
    ])
    func words(_ status: HookStatus, _ text: String, _ word: String) throws {
        let run = HookRun(event: .fail, status: status)
        #expect(run.text == text)
        #expect(run.word == word)
        #expect(HookRun(encoded: run.encoded) == run, "\(run.encoded)")
        let json = try JSONEncoder().encode(run)
        #expect(try JSONDecoder().decode(HookRun.self, from: json) == run)
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        #expect(object["status"] as? String == word)
        #expect(object["event"] as? String == "fail")
        #expect(object["text"] as? String == text)
    }

    @Test func anUnreadableStoredHookIsNone() {
        for text in ["", "complete", "done pending", "complete exit x 1", "fail timeout soon", "complete sleeping"] {
            #expect(HookRun(encoded: text) == nil, "\(text)")
        }
    }
}
