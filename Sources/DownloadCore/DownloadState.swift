import Foundation

/// Where a download stands.
///
/// `waiting`, `waitingForSpace` and `failed` carry the reason a person reads in the row; `waiting`
/// also carries when the next try starts.
public enum DownloadState: Sendable, Hashable, Codable {
    case queued
    case downloading
    case paused
    case waiting(until: Date, reason: String)
    /// Stopped (or kept from starting) for want of disk space, bytes kept: starts again by itself
    /// once there is room (`SpaceShortage.words` is the reason).
    case waitingForSpace(reason: String)
    case completed
    case failed(reason: String)
    case cancelled

    /// The one word shown for the state.
    public var word: String {
        switch self {
        case .queued: "queued"
        case .downloading: "downloading"
        case .paused: "paused"
        case .waiting, .waitingForSpace: "waiting"
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
        case .queued, .downloading, .paused, .waiting, .waitingForSpace: false
        }
    }

    /// Whether a transfer is (or is about to be) working on it, or will be without anybody asking.
    public var isPending: Bool {
        switch self {
        case .queued, .downloading, .waiting, .waitingForSpace: true
        case .paused, .completed, .failed, .cancelled: false
        }
    }
}

extension DownloadState {
    /// What a retry whose time came says while it waits for a free slot (it stays `waiting`, its
    /// time past, and takes the next free slot before the queued downloads below it).
    public static let retryDueWords = "retry due: waits for a free slot"

    /// Whether this is a retry whose time came by `now`: it waits for a free slot.
    public func isRetryDue(at now: Date) -> Bool {
        if case .waiting(let until, _) = self { return until <= now }
        return false
    }

    /// Why the download waits or failed, in the row's words; nil for the other states.
    public var reason: String? {
        switch self {
        case .waiting(_, let reason), .waitingForSpace(let reason), .failed(let reason): reason
        case .queued, .downloading, .paused, .completed, .cancelled: nil
        }
    }
}
