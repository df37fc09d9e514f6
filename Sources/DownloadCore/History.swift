import Foundation

/// One thing that happened to a download, with its time: what its log in the UI lists.
///
/// The session writes them as it goes; the store keeps the last `HistoryEntry.keptPerDownload`
/// of each download. `text` is haul's words, but may quote a server (a status line, an error):
/// it is cleaned before it is drawn.
public struct HistoryEntry: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// Queued (by a person, a script, or a request joining it).
        case added
        /// An attempt began (the first, a resume or a retry).
        case started
        /// A response head: status, length, validators.
        case response
        /// A resume picked up at an offset (206 accepted).
        case resumed
        /// Started over from zero, with the reason (a 200 to a resume, a changed validator…).
        case restarted
        /// Waits: a retry with its delay, or for disk space.
        case waiting
        /// An error, retried or not.
        case error
        case paused
        case completed
        case failed
        case cancelled
        /// A setting of this download changed (its own speed limit).
        case setting
    }

    public var download: DownloadID
    public var time: Date
    public var kind: Kind
    public var text: String

    public init(download: DownloadID, time: Date, kind: Kind, text: String) {
        self.download = download
        self.time = time
        self.kind = kind
        self.text = text
    }

    /// How many entries the store keeps per download (older ones are dropped).
    public static let keptPerDownload = 100
    /// How many of the whole queue's latest entries `history(nil)` returns.
    public static let recentLimit = 200
}
