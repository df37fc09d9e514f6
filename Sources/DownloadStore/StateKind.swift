import DownloadCore

/// What a row's `state` column holds: the kind of the download's state, in the store's own words.
///
/// The stored words are this enum's raw values, spelled here and nowhere else, so the screen's
/// wording (`DownloadState.word`) can change without a migration. Until v13 the column held the
/// screen's word, with one `waiting` for two states told apart by `waitingUntil`; the two waits are
/// kinds of their own now. Never change a raw value: add a kind and a migration.
enum StateKind: String, Codable, Sendable, CaseIterable {
    case queued = "queued"
    case downloading = "downloading"
    case paused = "paused"
    /// Waiting for a retry's time (`waitingUntil`).
    case waitingForRetry = "waitingForRetry"
    /// Waiting for room on its file system.
    case waitingForSpace = "waitingForSpace"
    case completed = "completed"
    case failed = "failed"
    case cancelled = "cancelled"

    init(_ state: DownloadState) {
        switch state {
        case .queued: self = .queued
        case .downloading: self = .downloading
        case .paused: self = .paused
        case .waiting: self = .waitingForRetry
        case .waitingForSpace: self = .waitingForSpace
        case .completed: self = .completed
        case .failed: self = .failed
        case .cancelled: self = .cancelled
        }
    }
}

/// A row whose state is none this version stores (a newer haul's, or a damaged file).
struct UnreadableState: Error {
    var id: Int64
    var stored: String
}
