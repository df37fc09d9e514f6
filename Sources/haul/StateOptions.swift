import ArgumentParser
import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation
import Logging
import Synchronization

/// `--state DIR` and `--config FILE`, shared by every command.
struct StateOptions: ParsableArguments {
    @Option(name: .customLong("state"), help: ArgumentHelp(
        "Directory of the queue, its database and haul.log (default: $HAUL_STATE_DIR, else state in the config file, else $XDG_STATE_HOME/haul, else ~/.local/state/haul).",
        valueName: "dir"
    ))
    var directory: String?

    @Option(name: .customLong("config"), help: ArgumentHelp(
        "Read settings from FILE (default: $HAUL_CONFIG, else $XDG_CONFIG_HOME/haul/config, else ~/.config/haul/config).",
        valueName: "file"
    ))
    var configFile: String?

    /// The defaults with the configuration file applied (flags come on top, in each command).
    func settings(environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) -> Settings {
        // An empty value is a script's unset variable, never the default (a tester's `--state ''`
        // edited the person's own queue).
        if directory?.isEmpty == true { throw UsageError(message: "--state is empty: give the queue's directory") }
        if configFile?.isEmpty == true { throw UsageError(message: "--config is empty: give a file") }
        guard let (path, explicit) = ConfigFile.location(option: configFile, environment: environment) else { return Settings() }
        // A default location that cannot be read (a directory, mode 000) is no file the person
        // asked for: it is treated as absent, as a missing one is. A named one must be readable.
        if !explicit, !ConfigFile.isReadableFile(path) { return Settings() }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            let missing = (error as NSError).code == NSFileReadNoSuchFileError
            if missing && !explicit { return Settings() }
            throw UsageError(message: "cannot read the config file \(TerminalText.sanitize(path)): \(LocalPath.reason(error))")
        }
        return try ConfigFile.apply(text, name: path, to: Settings(), home: environment["HOME"])
    }

    /// Where the queue lives: `--state`, else `$HAUL_STATE_DIR`, else the config's `state` (in
    /// `settings`), else the XDG default.
    /// A path that is a file, or lies under one, is refused here, for every command alike.
    func resolvedPath(_ settings: Settings, environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) -> String {
        let path: String
        if directory == nil, (environment["HAUL_STATE_DIR"] ?? "").isEmpty, let configured = settings.state {
            path = configured
        } else {
            do {
                path = try StateDirectory.resolve(option: directory, environment: environment)
            } catch {
                throw UsageError(message: error.description)
            }
        }
        if let problem = StateDirectory.problem(at: path) { throw UsageError(message: TerminalText.sanitize(problem)) }
        return path
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
    /// The queue's id, which marks its part files.
    let queueID: String

    /// Opens (creating) the queue at `path` and takes its lock.
    init(path: String) throws {
        do {
            directory = try StateDirectory(creatingAt: path)
            lock = try directory.lock()
        } catch {
            throw UsageError(message: error.description)
        }
        LogSetup.bootstrapOnce(logPath: directory.logPath)
        logger = Logger(label: "haul")
        do {
            database = try AppDatabase.open(at: directory.databasePath)
            queue = try database.loadQueue()
        } catch {
            // A full or failing disk is no bad input: exit 1 (found by use: it said 2).
            if error.diskFault { throw DiskFault(message: error.description) }
            throw UsageError(message: error.description)
        }
        // Without it, the queue could not tell its part files from another queue's.
        do {
            queueID = try database.queueID()
        } catch {
            throw UsageError(message: error.description)
        }
    }
}

extension OpenStore {
    static let maxActiveKey = "maxActive"

    /// How many run at once: `-j` or the config, else what `<` and `>` last left, else `fallback`.
    func maxActive(_ settings: Settings, fallback: Int = Settings.defaultMaxActive) -> Int {
        settings.maxActive ?? savedMaxActive ?? fallback
    }

    /// How many run at once, as `<` and `>` last left it.
    var savedMaxActive: Int? {
        guard let text = try? database.setting(Self.maxActiveKey), let value = Int(text),
              (1...OptionCheck.maxActiveLimit).contains(value) else { return nil }
        return value
    }

    /// The limit on every download together: `--limit-rate` or the config, else the one last set
    /// while the queue ran (a key, the socket), else none.
    func limit(_ settings: Settings) -> Int64? {
        settings.limitRate ?? savedLimit
    }

    /// The limit last set while the queue ran (the session stores it with its commits); nil for
    /// none, or one set to none.
    var savedLimit: Int64? {
        guard let text = try? database.setting(AppDatabase.limitKey), let value = Int64(text), value >= QueueLimits.minimumRate else { return nil }
        return value
    }

    /// The engine's configuration for checked `settings` on this queue: the engine logs, and its
    /// hooks write their output, to this queue's `haul.log`.
    /// `downloadDirectory`: where new downloads go, whose free space the header shows.
    func sessionConfiguration(
        _ settings: Settings, downloadDirectory: String, fallbackMaxActive: Int = Settings.defaultMaxActive
    ) -> DownloadSession.Configuration {
        var configuration = SessionOptions.configuration(settings, maxActive: maxActive(settings, fallback: fallbackMaxActive), downloadDirectory: downloadDirectory)
        configuration.limitBytesPerSecond = limit(settings)
        configuration.logger = Logger(label: "haul.engine")
        configuration.queueID = queueID
        return configuration
    }

    func saveMaxActive(_ count: Int) {
        do {
            try database.saveSetting(Self.maxActiveKey, String(count))
        } catch {
            logger.error("cannot save max-active", metadata: ["error": "\(error.description)"])
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
