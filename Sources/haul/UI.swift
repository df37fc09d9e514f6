import ArgumentParser
import CursesBackend
import DownloadCore
import DownloadEngine
import DownloadStore
import Foundation
import Logging
import TerminalUI

/// `haul [URL...]`, `haul -i FILE`: the terminal UI on the persisted queue (the default command).
struct UI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ui",
        abstract: "Open the terminal UI on the queue (the default: `haul` and `haul URL...` run this).",
        discussion: """
        Shows every download of the queue with its progress, speed, ETA and resume offset, and runs \
        the queue: downloads that were queued, running or paused by a quit resume. URLs given here, \
        or listed in FILE (one per line, # starts a comment), are added first. Press ? for the keys; \
        q pauses everything and quits, and the next start resumes it.
        """
    )

    @OptionGroup var state: StateOptions

    @Argument(help: "http:// or https:// URLs to add to the queue.")
    var urls: [String] = []

    @Option(name: [.short, .customLong("input-file")], help: ArgumentHelp("Add the URLs listed in FILE (one per line, # comments).", valueName: "file"))
    var inputFile: String?

    @Option(name: [.short, .customLong("dir")], help: "Directory for new downloads (default: the current directory).")
    var directory: String?

    @Option(name: [.customShort("j"), .customLong("max-active")], help: "How many downloads run at once.")
    var maxActive: Int = 3

    @Option(help: ArgumentHelp("Most redraws a second (1 to 10).", valueName: "hz"))
    var refresh: Double = 10

    @Flag(help: "Draw bars and marks in ASCII (automatic when the locale is not UTF-8).")
    var ascii = false

    func run() async throws {
        // Everything that can be refused is refused before the queue is touched.
        let requests = try validatedURLs()
        guard refresh >= 1, refresh <= 10 else { throw UsageError(message: "--refresh must be between 1 and 10") }
        guard maxActive >= 1, maxActive <= ViewState.maxActiveLimit else {
            throw UsageError(message: "--max-active must be between 1 and \(ViewState.maxActiveLimit)")
        }
        guard isatty(STDIN_FILENO) == 1, isatty(STDOUT_FILENO) == 1 else {
            throw UsageError(message: "the terminal UI needs a terminal on stdin and stdout (use haul get in scripts)")
        }
        let workingDirectory = FileManager.default.currentDirectoryPath
        let downloadDirectory = Get.absolute(directory ?? workingDirectory, in: workingDirectory)
        try Get.checkWritableDirectory(downloadDirectory)

        let store = try OpenStore(options: state)
        var configuration = DownloadSession.Configuration()
        configuration.maxActive = maxActive
        configuration.logger = Logger(label: "haul.engine")
        let session = DownloadSession(configuration: configuration, journal: store.database)
        let interruption = Interruption(session: session, beforeForcedExit: { Emergency.restoreTerminal() })
        let notes = await session.restore(store.queue, startPending: true)
        store.logger.info("ui", metadata: ["urls": "\(requests.count)", "restored": "\(store.queue.downloads.count)", "recovered": "\(notes.count)"])
        let refused = await UIController.add(requests, to: session, in: downloadDirectory)

        // From here until curses ends, stderr goes to the log: nothing may scribble on the screen.
        let redirect = StandardErrorRedirect(to: store.directory.logPath)
        let terminal: CursesTerminal
        do {
            let noColor = !(ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
            terminal = try await CursesTerminal(colors: !noColor)
        } catch {
            redirect?.restore()
            await session.shutdown()
            throw UsageError(message: error.description)
        }
        var view = ViewState(snapshot: await session.snapshot(), unicode: terminal.unicode && !ascii)
        if let first = refused.first {
            view.failed(refused.count == 1 ? first : "\(first) (and \(refused.count - 1) more)")
        }
        let controller = UIController(
            session: session,
            terminal: terminal,
            downloadDirectory: downloadDirectory,
            refreshInterval: .milliseconds(Int(1000 / refresh)),
            logger: store.logger
        )
        await controller.run(view)
        await session.shutdown()
        await terminal.stop()
        redirect?.restore()
        withExtendedLifetime(store) {}
        if let signal = interruption.received {
            store.logger.notice("interrupted", metadata: ["signal": "\(signal)"])
            throw ExitCode(128 + signal)
        }
    }

    /// The URLs of the arguments and of `-i FILE`, or a one-line error naming the bad one.
    private func validatedURLs() throws -> [URL] {
        var parsed: [URL] = []
        for text in urls {
            do {
                parsed.append(try URLValidation.parse(text))
            } catch {
                throw UsageError(message: error.description)
            }
        }
        guard let inputFile else { return parsed }
        let contents: String
        do {
            contents = try String(contentsOfFile: inputFile, encoding: .utf8)
        } catch {
            throw UsageError(message: "cannot read \(TerminalText.sanitize(inputFile)): \(Self.reason(error))")
        }
        for (number, line) in contents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let text = line.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty, !text.hasPrefix("#") else { continue }
            do {
                parsed.append(try URLValidation.parse(text))
            } catch {
                throw UsageError(message: "\(TerminalText.sanitize(inputFile)):\(number + 1): \(error.description)")
            }
        }
        return parsed
    }

    /// A one-line reason: the system's when Foundation kept it, else one for the usual codes
    /// (Foundation's own descriptions span lines).
    private static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain,
           let message = strerror(Int32(underlying.code)) {
            return String(cString: message).lowercased()
        }
        switch nsError.code {
        case NSFileReadNoSuchFileError: return "no such file"
        case NSFileReadNoPermissionError: return "permission denied"
        case NSFileReadInapplicableStringEncodingError: return "not UTF-8 text"
        default: return "unreadable"
        }
    }
}

/// Points stderr at the log while curses owns the screen, and back afterwards.
struct StandardErrorRedirect {
    private let saved: Int32

    /// The log, else /dev/null: never the screen.
    init?(to path: String) {
        var log = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        if log < 0 { log = open("/dev/null", O_WRONLY | O_CLOEXEC) }
        guard log >= 0 else { return nil }
        defer { close(log) }
        let saved = dup(STDERR_FILENO)
        guard saved >= 0 else { return nil }
        guard dup2(log, STDERR_FILENO) >= 0 else {
            close(saved)
            return nil
        }
        self.saved = saved
    }

    func restore() {
        dup2(saved, STDERR_FILENO)
        close(saved)
    }
}
