import Foundation

/// Where a download stands.
///
/// `waiting` and `failed` carry the reason a person reads in the row; `waiting` also carries when the
/// next try starts.
public enum DownloadState: Sendable, Hashable, Codable {
    case queued
    case downloading
    case paused
    case waiting(until: Date, reason: String)
    case completed
    case failed(reason: String)
    case cancelled

    /// The one word shown for the state.
    public var word: String {
        switch self {
        case .queued: "queued"
        case .downloading: "downloading"
        case .paused: "paused"
        case .waiting: "waiting"
        case .completed: "completed"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }

    /// Whether nothing more will happen to the download unless somebody asks.
    ///
    /// `failed` counts as finished even though it can be retried: it is not working.
    public var isFinished: Bool {
        switch self {
        case .completed, .failed, .cancelled: true
        case .queued, .downloading, .paused, .waiting: false
        }
    }

    /// Whether a transfer is (or is about to be) working on it, or will be without anybody asking.
    public var isPending: Bool {
        switch self {
        case .queued, .downloading, .waiting: true
        case .paused, .completed, .failed, .cancelled: false
        }
    }
}
