import ArgumentParser
import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation
import Logging
import Synchronization

/// `--state DIR`, shared by every command that uses the queue.
struct StateOptions: ParsableArguments {
    @Option(name: .customLong("state"), help: ArgumentHelp(
        "Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).",
        valueName: "dir"
    ))
    var directory: String?

    func resolvedPath() throws -> String {
        do {
            return try StateDirectory.resolve(option: directory)
        } catch {
            throw UsageError(message: error.description)
        }
    }
}

/// The queue of one process: its locked state directory, the log, and the database.
///
/// Holding it holds the lock; a second haul on the directory is refused with the pid of this one.
final class OpenStore: Sendable {
    let directory: StateDirectory
    let lock: QueueLock
    let database: AppDatabase
    let queue: StoredQueue
    let logger: Logger

    init(options: StateOptions) throws {
        do {
            directory = try StateDirectory(creatingAt: try options.resolvedPath())
            lock = try directory.lock()
        } catch let error as StateDirectory.Failure {
            throw UsageError(message: error.description)
        }
        LogSetup.bootstrapOnce(logPath: directory.logPath)
        logger = Logger(label: "haul")
        do {
            database = try AppDatabase.open(at: directory.databasePath)
            queue = try database.loadQueue()
        } catch {
            throw UsageError(message: error.description)
        }
    }
}

enum LogSetup {
    private static let once = Mutex(false)

    /// Sends every logger of the process to `haul.log` (info and above; `HAUL_LOG=debug` for more).
    static func bootstrapOnce(logPath: String) {
        let first = once.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        let level = ProcessInfo.processInfo.environment["HAUL_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        if let file = LogFile(path: logPath) {
            LoggingSystem.bootstrap { label in FileLogHandler(label: label, file: file, level: level) }
        } else {
            LoggingSystem.bootstrap { _ in SwiftLogNoOpLogHandler() }
        }
    }
}
