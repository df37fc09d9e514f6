import ControlSocket
import DownloadCore
import DownloadStore
import Foundation
import Logging

/// The queue as a runner holds it: its control socket, for the UI and the commands of another
/// shell, and the server a runner puts on it.
enum LiveQueue {
    /// `<state>/haul.sock`.
    static func socketPath(_ statePath: String) -> String {
        statePath + "/haul.sock"
    }

    /// The runner of the queue at `path` and a client of its socket; nil when no haul runs it, or
    /// the haul that holds it serves no socket (`haul get` runs only its own downloads: the
    /// callers then refuse as before, naming its pid).
    ///
    /// A runner that just took the lock may not listen yet: it is given four seconds (two were
    /// too few for a UI on a loaded machine: a full test suite's second UI said `queue in use`).
    static func attach(_ path: String) async -> (pid: Int32, client: ControlClient)? {
        guard let pid = (try? StateDirectory(existingAt: path))?.liveHolder() else { return nil }
        let deadline = ContinuousClock.now + .seconds(4)
        // A holder that took the queue a moment ago (a UI started at the same instant as this one)
        // serves its socket a moment later: waited for, rather than refused as a queue in use (a
        // tester's second UI exited 2, its URL never added).
        while !FileManager.default.fileExists(atPath: socketPath(path)) {
            guard lockTakenRecently(path), ContinuousClock.now < deadline, (try? StateDirectory(existingAt: path))?.liveHolder() == pid else { return nil }
            try? await Task.sleep(for: .milliseconds(50))
        }
        while FileManager.default.fileExists(atPath: socketPath(path)) {
            if let client = await ControlClient.connect(socketPath: socketPath(path)) { return (pid, client) }
            // It ended meanwhile, or a socket left by a runner that died is all there is.
            guard (try? StateDirectory(existingAt: path))?.liveHolder() == pid, ContinuousClock.now < deadline else { return nil }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Whether the queue's lock was taken in the last five seconds (its file is written then).
    private static func lockTakenRecently(_ path: String) -> Bool {
        var info = stat()
        guard let lock = (try? StateDirectory(existingAt: path))?.lockPath, stat(lock, &info) == 0 else { return false }
        return Date().timeIntervalSince1970 - Double(info.st_mtim.tv_sec) < 5
    }

    /// The runner that took the queue at `path` over from `pid` (a UI's `D` starts one that waits for
    /// the UI to let go), once it serves its socket; nil when none does within three seconds (the
    /// runner was stopped, or killed).
    static func successor(_ path: String, of pid: Int32) async -> (pid: Int32, client: ControlClient)? {
        let deadline = ContinuousClock.now + .seconds(3)
        while ContinuousClock.now < deadline {
            if let (next, client) = await attach(path), next != pid { return (next, client) }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    /// Serves `queue` on the socket of the state directory at `path`; nil (logged) when it cannot,
    /// and the queue runs all the same, steered only from this process.
    static func serve(_ queue: any QueueControl, statePath path: String, logger: Logger) async -> ControlServer? {
        do {
            let server = try await ControlServer.start(socketPath: socketPath(path), queue: queue, logger: Logger(label: "haul.control"))
            logger.info("control socket", metadata: ["path": "\(socketPath(path))"])
            return server
        } catch {
            logger.error("no control socket", metadata: ["path": "\(socketPath(path))", "reason": "\(error.description)"])
            return nil
        }
    }

    /// The reason a refused request gives, for commands: exit 2 with it.
    /// Refuses a change the runner could not save: its queue's disk is full or failing (a tester:
    /// `haul add` and `haul pause` said they were done, exit 0, and were gone after the stop).
    static func checkSaved(_ snapshot: SessionSnapshot) throws(DiskFault) {
        if let unsaved = snapshot.unsaved { throw DiskFault(message: "\(unsaved); nothing changed") }
    }

    static func checkSaved(_ client: ControlClient) async throws {
        let snapshot: SessionSnapshot
        do {
            snapshot = try await client.snapshot()
        } catch {
            throw refused(error)
        }
        try checkSaved(snapshot)
    }

    static func refused(_ error: QueueControlError) -> any Error {
        switch error.kind {
        case .refused: UsageError(message: error.description)
        case .unavailable, .closed: RunnerGone(message: error.description)
        }
    }
}

/// The runner ended while a command talked to it: one line, exit 1.
struct RunnerGone: Error {
    var message: String
}
