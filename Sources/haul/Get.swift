import ArgumentParser
import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation
import Logging

/// `haul get`: download URLs without the terminal UI, printing state changes and progress.
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download URLs headless, printing one line per state change.",
        discussion: """
        Runs on the persisted queue: a download interrupted earlier (a signal, a crash, a dropped SSH \
        connection) resumes from its bytes on disk when asked for again, and a file already downloaded \
        to the same place is not fetched again.

        Exit status: 0 when every download completed, 1 when any failed or paused, 2 for bad input or \
        a queue in use by another haul; 130, 143 or 129 after SIGINT, SIGTERM or SIGHUP (everything \
        paused and checkpointed first).
        """
    )

    @OptionGroup var state: StateOptions

    @Argument(help: "The http:// or https:// URLs to download.")
    var urls: [String] = []

    @Option(name: [.short, .customLong("output")], help: "Write the (single) download to FILE.")
    var output: String?

    @Option(name: [.short, .customLong("dir")], help: "Directory for downloads named by the server or the URL (default: the current directory).")
    var directory: String?

    @Flag(help: "Print one JSON object per event instead of text.")
    var json = false

    @Option(name: [.customShort("j"), .customLong("max-active")], help: "How many downloads run at once.")
    var maxActive: Int = 3

    @Option(help: "Failed attempts in a row before a download fails.")
    var maxTries: Int = 20

    @Option(help: "Seconds without a byte that count as a stall.")
    var stallTimeout: Int = 30

    @Option(help: "Seconds to wait for a connection.")
    var connectTimeout: Int = 10

    @Flag(help: "Do not fsync files before reporting them completed (for scratch downloads).")
    var noFsync = false

    func run() async throws {
        // Everything that can be refused is refused before the state directory is touched.
        let requests = try validatedRequests()
        let store = try OpenStore(options: state)
        var configuration = DownloadSession.Configuration()
        configuration.maxActive = maxActive
        configuration.maxTries = maxTries
        configuration.stallTimeout = .seconds(stallTimeout)
        configuration.connectTimeout = .seconds(connectTimeout)
        configuration.syncOnCompletion = !noFsync
        configuration.logger = Logger(label: "haul.engine")
        let session = DownloadSession(configuration: configuration, journal: store.database)
        let interruption = Interruption(session: session)
        let printer = ProgressPrinter(json: json, isTerminal: isatty(STDOUT_FILENO) == 1)
        printer.baseline(store.queue)
        let notes = await session.restore(store.queue, startPending: false)
        store.logger.info("get", metadata: ["urls": "\(requests.count)", "restored": "\(store.queue.downloads.count)", "recovered": "\(notes.count)"])

        var ids: [DownloadID] = []
        for (url, destination) in requests {
            do {
                ids.append(try await session.schedule(url, to: destination))
            } catch {
                await session.shutdown()
                // Refused because a signal shut the session down meanwhile: that is no bad input.
                if let signal = interruption.received { throw ExitCode(128 + signal) }
                throw UsageError(message: error.description)
            }
        }
        var finalSnapshot = await session.snapshot()
        printer.show(finalSnapshot, ids: ids)
        if !Self.allSettled(finalSnapshot, ids: ids) {
            for await snapshot in session.snapshots {
                printer.show(snapshot, ids: ids)
                finalSnapshot = snapshot
                if Self.allSettled(snapshot, ids: ids) { break }
            }
        }
        printer.finish()
        await session.shutdown()
        withExtendedLifetime(store) {}
        if let signal = interruption.received {
            store.logger.notice("interrupted", metadata: ["signal": "\(signal)"])
            throw ExitCode(128 + signal)
        }
        let allCompleted = ids.allSatisfy { finalSnapshot[$0]?.state == .completed }
        if !allCompleted { throw ExitCode(1) }
    }

    /// Every download this run asked for has completed, failed, been cancelled, or paused (disk full).
    static func allSettled(_ snapshot: SessionSnapshot, ids: [DownloadID]) -> Bool {
        ids.allSatisfy { id in
            guard let state = snapshot[id]?.state else { return true }
            return state.isFinished || state == .paused
        }
    }

    /// The URLs and where each goes, or a one-line error before anything happens.
    private func validatedRequests() throws -> [(URL, Destination)] {
        guard !urls.isEmpty else { throw UsageError(message: "no URL given") }
        let parsed: [URL]
        do {
            parsed = try urls.map { text throws(URLValidation.Invalid) in try URLValidation.parse(text) }
        } catch {
            throw UsageError(message: error.description)
        }
        for (name, value) in [("--max-active", maxActive), ("--max-tries", maxTries), ("--stall-timeout", stallTimeout), ("--connect-timeout", connectTimeout)] where value < 1 {
            throw UsageError(message: "\(name) must be at least 1")
        }
        // Paths are stored in the queue, which outlives this working directory: make them absolute.
        let workingDirectory = FileManager.default.currentDirectoryPath
        let directory = Self.absolute(self.directory ?? workingDirectory, in: workingDirectory)
        if let output {
            guard parsed.count == 1 else { throw UsageError(message: "-o/--output takes a single URL; use -d/--dir for several") }
            let path = Self.absolute(output, in: directory)
            guard !path.hasSuffix("/") else { throw UsageError(message: "-o/--output names a file, not a directory: \(path)") }
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                throw UsageError(message: "-o/--output names a directory: \(path)")
            }
            try Self.checkWritableDirectory((path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent)
            return [(parsed[0], .file(path))]
        }
        try Self.checkWritableDirectory(directory)
        return parsed.map { ($0, .directory(directory)) }
    }

    /// `path` made absolute against `base`, with `.` and `..` resolved (symlinks are kept).
    static func absolute(_ path: String, in base: String) -> String {
        let joined = path.hasPrefix("/") ? path : (base as NSString).appendingPathComponent(path)
        let standardized = (joined as NSString).standardizingPath
        // standardizingPath drops a trailing slash, which -o must still see to refuse it.
        return path.hasSuffix("/") && !standardized.hasSuffix("/") ? standardized + "/" : standardized
    }

    static func checkWritableDirectory(_ path: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw UsageError(message: "directory does not exist: \(path)")
        }
        guard isDirectory.boolValue else { throw UsageError(message: "not a directory: \(path)") }
        guard access(path, W_OK | X_OK) == 0 else { throw UsageError(message: "directory is not writable: \(path)") }
    }
}
