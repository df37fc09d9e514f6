import ArgumentParser
import DownloadCore
import DownloadStore
import Foundation

/// `haul list`: the queue as the database holds it, as a table or JSON.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Print the queue: state, bytes, total, resume offset, path, URL and error of each download.",
        discussion: """
        Reads the queue without changing it. While a haul runs the queue, this asks it (through its \
        control socket): live bytes, and with --json each download's speed.
        """
    )

    @OptionGroup var state: StateOptions

    @Flag(help: "Print a JSON array, one object per download.")
    var json = false

    func run() async throws {
        let path = try state.resolvedPath(state.settings())
        if let (_, client) = await LiveQueue.attach(path) {
            let snapshot: SessionSnapshot
            do {
                snapshot = try await client.snapshot()
            } catch {
                throw LiveQueue.refused(error)
            }
            let live = StoredQueue(downloads: snapshot.downloads)
            print(json ? Self.json(live, live: true) : Self.table(live), terminator: "")
            // The rows are the runner's, not the queue's on disk: said when they cannot be saved.
            if let unsaved = snapshot.unsaved {
                FileHandle.standardError.write(Data("haul: \(unsaved): these rows are not saved; the bytes on disk are kept\n".utf8))
            }
            return
        }
        // A queue on a failing disk is not an empty one (a tester's said `no downloads`, exit 0).
        if let failure = StateDirectory.unreadable(at: path) { throw DiskFault(message: failure.description) }
        let queue: StoredQueue
        do {
            queue = try Self.read(path)
        } catch let error as AppDatabase.Failure {
            // A full or failing disk is no bad input: exit 1, as every command (a tester's said 2).
            if error.diskFault { throw DiskFault(message: error.description) }
            throw UsageError(message: error.description)
        } catch let error as StateDirectory.Failure {
            throw UsageError(message: error.description)
        }
        let shown = Self.asRecoveryWillSeeIt(queue, path: path)
        print(json ? Self.json(shown) : Self.table(shown), terminator: "")
    }

    /// With no haul running on the queue, nothing is downloading or waiting: a row a killed process
    /// left that way is shown as what the next start makes of it (queued), saying so.
    static func asRecoveryWillSeeIt(_ queue: StoredQueue, path: String) -> StoredQueue {
        guard let directory = try? StateDirectory(existingAt: path), directory.liveHolder() == nil else { return queue }
        var queue = queue
        for index in queue.downloads.indices {
            switch queue.downloads[index].state {
            case .downloading, .waiting, .waitingForSpace:
                queue.downloads[index].state = .queued
                queue.downloads[index].lastError = "interrupted: the haul running it ended; resumes on the next start"
            case .queued, .paused, .completed, .failed, .cancelled:
                break
            }
        }
        return queue
    }

    /// The queue at `path`; an empty one when there is none yet (nothing is created).
    ///
    /// Read-only, so it never stands in the way of a haul starting on the queue. Only a database
    /// with an older schema is opened for writing, under the lock, to migrate it.
    static func read(_ path: String) throws -> StoredQueue {
        guard let directory = try? StateDirectory(existingAt: path),
              FileManager.default.fileExists(atPath: directory.databasePath) else { return StoredQueue() }
        do {
            return try AppDatabase.open(at: directory.databasePath, readOnly: true).loadQueue()
        } catch let failure where failure.needsMigration {
            let lock = try directory.lock()
            defer { withExtendedLifetime(lock) {} }
            return try AppDatabase.open(at: directory.databasePath).loadQueue()
        }
    }

    static func table(_ queue: StoredQueue, now: Date = Date()) -> String {
        guard !queue.downloads.isEmpty else { return "no downloads\n" }
        var lines = [pad(["ID", "STATE", "BYTES", "TOTAL", "RESUMED FROM", "PATH", "URL"])]
        for download in queue.downloads {
            let resumed = download.resumeOffset.map { "\(Format.bytes($0)) (\(download.resumeCount)x)" } ?? "-"
            lines.append(pad([
                "\(download.id)", QueueListing.stateWord(download), Format.bytes(download.bytesOnDisk),
                download.totalBytes.map(Format.bytes) ?? "?", resumed,
                TerminalText.sanitize(QueueListing.path(download)), TerminalText.sanitize(download.url.redactingPassword),
            ]))
            if download.state.isRetryDue(at: now) {
                lines.append("    \(DownloadState.retryDueWords)")
            }
            if let note = QueueListing.note(download) {
                lines.append("    \(TerminalText.sanitize(note))")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func json(_ queue: StoredQueue, live: Bool = false) -> String {
        String(decoding: QueueListing.json(queue.downloads.map { QueueListing.object(for: $0, live: live) }), as: UTF8.self) + "\n"
    }

    private static func pad(_ cells: [String]) -> String {
        let widths = [3, 11, 10, 10, 17]
        return cells.enumerated().map { index, cell in
            index < widths.count ? cell.padding(toLength: max(widths[index], cell.count), withPad: " ", startingAt: 0) : cell
        }.joined(separator: " ")
    }
}
