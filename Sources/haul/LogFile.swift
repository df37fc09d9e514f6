import DownloadCore
import Foundation
import Logging
import Synchronization

/// `haul.log` in the state directory: one line per event, mode 0600, capped by rotation.
///
/// Nothing is ever logged to stdout or stderr (curses may own the screen). Every message and
/// metadata value is stripped of control characters and escape sequences, so a hostile server's
/// strings cannot reach a terminal that `cat`s the log.
final class LogFile: Sendable {
    /// Past this size the log moves to `haul.log.1` (replacing the previous one) and starts again.
    static let capBytes: Int64 = 4 << 20

    private let path: String
    private struct State {
        var descriptor: Int32
        var size: Int64
    }
    private let state: Mutex<State>

    /// Opens `path` for appending, rotating it first when it is over the cap.
    init?(path: String) {
        self.path = path
        guard let (fd, size) = Self.openRotating(path) else { return nil }
        state = Mutex(State(descriptor: fd, size: size))
    }

    deinit {
        state.withLock { _ = close($0.descriptor) }
    }

    /// Appends one line (a newline is added).
    func write(_ line: String) {
        let data = Array((line + "\n").utf8)
        state.withLock { state in
            if state.size + Int64(data.count) > Self.capBytes, let (fd, size) = Self.rotate(path, closing: state.descriptor) {
                state.descriptor = fd
                state.size = size
            }
            let written = data.withUnsafeBytes { Foundation.write(state.descriptor, $0.baseAddress, $0.count) }
            if written > 0 { state.size += Int64(written) }
        }
    }

    private static func openRotating(_ path: String) -> (Int32, Int64)? {
        var info = stat()
        if stat(path, &info) == 0, Int64(info.st_size) > capBytes {
            _ = rename(path, path + ".1")
        }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        var opened = stat()
        return (fd, fstat(fd, &opened) == 0 ? Int64(opened.st_size) : 0)
    }

    private static func rotate(_ path: String, closing descriptor: Int32) -> (Int32, Int64)? {
        _ = rename(path, path + ".1")
        guard let reopened = openRotating(path) else { return nil }
        close(descriptor)
        return reopened
    }
}

/// A swift-log handler writing to a `LogFile`.
struct FileLogHandler: LogHandler {
    let label: String
    let file: LogFile
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, file: LogFile, level: Logger.Level) {
        self.label = label
        self.file = file
        logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// `[pid]`, the same for every line.
    private static let process = "[\(getpid())]"

    func log(event: LogEvent) {
        var merged = event.metadata ?? [:]
        // Merged only when a logger has metadata of its own (haul sets none on its loggers).
        if !metadata.isEmpty || metadataProvider != nil {
            merged = metadata.merging(metadataProvider?.get() ?? [:]) { $1 }.merging(event.metadata ?? [:]) { $1 }
        }
        // Room for a usual line at once: appending to a string that grows was most of a line's cost.
        var line = String()
        line.reserveCapacity(256)
        line.append(Format.utc(Date(), separator: "T"))
        line.append("Z ")
        line.append(Self.process)
        line.append(" ")
        line.append(event.level.rawValue)
        line.append(" ")
        line.append(label)
        line.append(": ")
        line.append(TerminalText.sanitize(event.message.description))
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            line.append(" ")
            line.append(key)
            line.append("=")
            line.append(TerminalText.sanitize(value.description))
        }
        file.write(line)
    }
}
