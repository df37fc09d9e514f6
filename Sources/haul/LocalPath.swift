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

    static func checkWritableDirectory(_ path: String) throws(UsageError) {
        if let problem = LocalDirectory.problem(path) { throw UsageError(message: problem) }
    }

    /// A one-line reason: the system's when Foundation kept it, else one for the usual codes
    /// (Foundation's own descriptions span lines).
    static func reason(_ error: any Error) -> String {
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
