import DownloadCore
import Foundation

/// Local paths given on the command line or in the config: made absolute, checked, explained.
enum LocalPath {
    /// `path` made absolute against `base`, with `.` and `..` resolved (symlinks are kept).
    static func absolute(_ path: String, in base: String) -> String {
        let joined = path.hasPrefix("/") ? path : (base as NSString).appendingPathComponent(path)
        let standardized = (joined as NSString).standardizingPath
        // standardizingPath drops a trailing slash, which -o must still see to refuse it.
        return path.hasSuffix("/") && !standardized.hasSuffix("/") ? standardized + "/" : standardized
    }

    /// Whether the directory `path` is `directory` or lies under it, symbolic links resolved.
    static func isInside(_ path: String, _ directory: String) -> Bool {
        let inner = resolved(path), outer = resolved(directory)
        return inner == outer || inner.hasPrefix(outer.hasSuffix("/") ? outer : outer + "/")
    }

    /// `path` with its symbolic links resolved as far as it exists (the rest as written).
    private static func resolved(_ path: String) -> String {
        var head = (path as NSString).standardizingPath
        var tail: [String] = []
        while head.count > 1 {
            if let real = realpath(head, nil) {
                defer { free(real) }
                return ([String(cString: real)] + tail.reversed()).joined(separator: "/")
            }
            tail.append((head as NSString).lastPathComponent)
            head = (head as NSString).deletingLastPathComponent
        }
        return ([head] + tail.reversed()).joined(separator: "/")
    }

    static func checkWritableDirectory(_ path: String) throws(UsageError) {
        if let problem = LocalDirectory.problem(path) { throw UsageError(message: problem) }
    }

    /// The most a list of URLs (`-i`) may hold: more is not a list (`/dev/zero` given by mistake).
    static let listLimit = 64 << 20

    /// The text of the file at `path`, read to its end with `read(2)`: a pipe (`-i <(…)`), a FIFO
    /// or `/dev/stdin` too, which Foundation's `String(contentsOfFile:)` refuses (it said
    /// "permission denied" for them). Throws the one-line reason.
    static func readText(_ path: String) throws(UsageError) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw UsageError(message: systemReason(errno)) }
        defer { close(descriptor) }
        var status = stat()
        if fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFDIR { throw UsageError(message: "is a directory") }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw UsageError(message: systemReason(errno)) }
            if count == 0 { break }
            bytes += chunk[..<count]
            if bytes.count > listLimit { throw UsageError(message: "larger than \(Format.bytes(Int64(listLimit))): not a list of URLs") }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw UsageError(message: "not UTF-8 text") }
        return text
    }

    /// The lines of a text file: split at LF and CRLF (a CRLF is one `Character`, which a split at
    /// "\n" never meets: a tester's Windows-made list was one line), without a leading BOM.
    static func lines(of text: String) -> [Substring] {
        let body = text.hasPrefix("\u{FEFF}") ? text.dropFirst() : Substring(text)
        return body.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
    }

    /// The system's words for `code`, lowercased as haul's messages are.
    static func systemReason(_ code: Int32) -> String {
        strerror(code).map { String(cString: $0).lowercased() } ?? "error \(code)"
    }

    /// A one-line reason: the system's when Foundation kept it, else one for the usual codes
    /// (Foundation's own descriptions span lines).
    static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return systemReason(Int32(underlying.code))
        }
        switch nsError.code {
        case NSFileReadNoSuchFileError: return "no such file"
        case NSFileReadNoPermissionError: return "permission denied"
        case NSFileReadInapplicableStringEncodingError: return "not UTF-8 text"
        default: return "unreadable"
        }
    }
}
