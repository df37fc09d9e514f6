import Foundation

/// Everything a person or a script may want to know about one download, as an immutable value.
///
/// The session owns the live copy; snapshots hand out copies.
public struct Download: Sendable, Hashable, Identifiable, Codable {
    public var id: DownloadID
    /// The URL as requested; every request (resumes too) goes here, never to a redirect target.
    public var url: URL
    /// Where the first requester wants the file.
    public var destination: Destination
    /// Other requesters of the same URL (coalesced): each gets its own copy at completion.
    public var extraDestinations: [Destination] = []
    /// The partial file the bytes stream into.
    public var partPath: String
    /// Extra request headers and the checksum the finished file must match.
    public var options = RequestOptions()
    /// Every file written at completion, the first requester's first.
    public var completedPaths: [String] = []
    /// What each file of `completedPaths` looked like when it was placed (same order; empty for a
    /// download completed before stamps were kept).
    public var completedStamps: [FileStamp] = []
    /// The completed files a fetch again replaces, in requester order: they changed on disk after
    /// completion, and the new bytes go back where they were rather than beside them as `name.1`.
    public var replacing: [String] = []
    /// What each file of `replacing` looked like when the fetch again was decided (same order;
    /// empty when not known). A file in a directory haul chose the name in (`-d`) that changed
    /// again since is a person's: the new version goes beside it, never over it.
    public var replacingStamps: [FileStamp] = []
    public var state: DownloadState = .queued
    /// Bytes in the part file (the truth after a crash).
    public var bytesOnDisk: Int64 = 0
    /// The resource's length, when the server said.
    public var totalBytes: Int64?
    /// Speed smoothed over about three seconds, in bytes per second.
    public var bytesPerSecond: Double = 0
    /// Offset where the latest resume picked up (a 206 appended from here); nil when none did.
    public var resumeOffset: Int64?
    /// How many times a resume appended to existing bytes.
    public var resumeCount: Int = 0
    /// Bytes that resumes did not have to fetch again.
    public var bytesSavedByResume: Int64 = 0
    /// Whether the latest resume had no validator to check (allowed only because the length matched).
    public var unverifiedResume: Bool = false
    /// Whether the latest resume, without a validator, was checked by fetching the bytes before the
    /// end of the part file again and comparing them with the disk.
    public var overlapChecked: Bool = false
    /// How many times the download had to start over from zero.
    public var restartCount: Int = 0
    /// Why the latest restart from zero happened ("resource changed", "server ignores ranges" …).
    public var restartReason: String?
    /// The strong or weak entity tag from the first response, trimmed.
    public var etag: String?
    /// The Last-Modified date from the first response, as sent.
    public var lastModified: String?
    /// The media type of the response that started the bytes on disk (`application/zip`), if it said:
    /// a resume answered by an HTML page where the file was not one is an error page, not a new version.
    public var contentType: String?
    /// The file name the server proposed in Content-Disposition, already made safe.
    public var serverFileName: String?
    /// Where the request ended up after redirects.
    public var finalURL: URL?
    /// The status of the latest response.
    public var lastStatus: Int?
    /// The latest error, kept after a successful retry so the history stays visible.
    public var lastError: String?
    /// Failed attempts in a row (reset when an attempt makes progress).
    public var failedAttempts: Int = 0
    /// When a transfer last worked on it (its latest attempt ended): purging for disk space takes
    /// the least recently used partial data first.
    public var lastActive: Date?
    /// Paused by a shutdown (quit, a signal, a dropped SSH connection), not by a person: the next
    /// process that runs the queue resumes it.
    public var pausedByShutdown: Bool = false
    /// An attempt runs but has no response yet (connecting, or waiting for the head); not stored.
    public var connecting: Bool = false
    /// The parts of a segmented download as last made durable (fsync'd); empty when the part file is
    /// one prefix of the resource (its length is then the truth).
    public var segments: [Segment] = []
    /// The parts as written (not yet fsync'd) when last recorded, a few times a second: in the boot
    /// that wrote them the page cache holds those bytes, so a `kill -9` resumes each part there
    /// instead of at the last synced checkpoint. Never trusted after a reboot; empty when `segments`
    /// is as far along.
    public var writtenSegments: [Segment] = []
    /// Connections the running attempt has open; not stored.
    public var connections: Int = 0
    /// The hook run for how the download ended (`--on-complete`, `--on-fail`); nil when none is
    /// configured, or the download was retried or fetched again since.
    public var hook: HookRun?
    /// This download's own speed limit in bytes per second (beside the queue's); nil when none.
    public var limit: Int64?

    public init(id: DownloadID, url: URL, destination: Destination, partPath: String) {
        self.id = id
        self.url = url
        self.destination = destination
        self.partPath = partPath
    }

    /// How every purge's words start (`purged: …`, `purged when disk space ran low: …`), in `lastError`.
    public static let purgedWords = "purged"

    /// Paused with its partial data purged (by `X`, or for disk space) and nothing fetched since: the
    /// row says so, as a resume fetches it from zero.
    public var isPurged: Bool {
        state == .paused && bytesOnDisk == 0 && lastError?.hasPrefix(Self.purgedWords) == true
    }

    /// The file written at completion for the first requester (nil until then).
    public var completedPath: String? { completedPaths.first }

    /// Fraction done in 0...1, when the total is known.
    public var fractionDone: Double? {
        guard let totalBytes, totalBytes > 0 else { return totalBytes == 0 ? 1 : nil }
        return min(1, Double(bytesOnDisk) / Double(totalBytes))
    }

    /// Forgets what described the version whose bytes were on disk (validators, type, length, parts,
    /// how it was last resumed): nothing stored may make an emptied part file look like a resumable one.
    mutating func forgetVersion() {
        forgetResume()
        segments = []
        writtenSegments = []
        etag = nil
        lastModified = nil
        contentType = nil
        totalBytes = nil
        bytesOnDisk = 0
    }

    /// Forgets where and how the latest resume picked up (the bytes it kept are gone).
    mutating func forgetResume() {
        resumeOffset = nil
        unverifiedResume = false
        overlapChecked = false
    }

    /// Seconds left at the current speed, when both the total and a speed are known.
    public var secondsRemaining: Double? {
        guard let totalBytes, bytesPerSecond > 0, state == .downloading else { return nil }
        return Double(max(0, totalBytes - bytesOnDisk)) / bytesPerSecond
    }
}
