import Foundation

/// Everything a person or a script may want to know about one download, as an immutable value.
///
/// The session owns the live copy; snapshots hand out copies.
public struct Download: Sendable, Hashable, Identifiable, Codable, CustomReflectable {
    // The fields live in one shared box, copied only when a copy that shares it is changed: a
    // download is copied into every snapshot, the ledger's last committed queue and the journal's
    // changes, and a copy of some forty fields (a dozen strings and arrays) was a retain for each;
    // issue 20's profile of a thousand small files counted copying and destroying downloads as the
    // largest part of haul's own code (a tenth of its user time, with the retains and releases).
    @usableFromInline var box: Box

    @inlinable public var id: DownloadID {
        get { box.fields.id }
        _modify { yield &fields.id }
    }
    /// The URL as requested; every request (resumes too) goes here, never to a redirect target.
    @inlinable public var url: URL {
        get { box.fields.url }
        _modify { yield &fields.url }
    }
    /// Where the first requester wants the file.
    @inlinable public var destination: Destination {
        get { box.fields.destination }
        _modify { yield &fields.destination }
    }
    /// Other requesters of the same URL (coalesced): each gets its own copy at completion.
    @inlinable public var extraDestinations: [Destination] {
        get { box.fields.extraDestinations }
        _modify { yield &fields.extraDestinations }
    }
    /// The partial file the bytes stream into.
    @inlinable public var partPath: String {
        get { box.fields.partPath }
        _modify { yield &fields.partPath }
    }
    /// Extra request headers and the checksum the finished file must match.
    @inlinable public var options: RequestOptions {
        get { box.fields.options }
        _modify { yield &fields.options }
    }
    /// Every file written at completion, the first requester's first.
    @inlinable public var completedPaths: [String] {
        get { box.fields.completedPaths }
        _modify { yield &fields.completedPaths }
    }
    /// What each file of `completedPaths` looked like when it was placed (same order; empty for a
    /// download completed before stamps were kept). Between its transfer's end and its placement,
    /// while `completedPaths` is empty, the one stamp of its finished part file, which its placed
    /// file keeps (see `QueueRecovery`).
    @inlinable public var completedStamps: [FileStamp] {
        get { box.fields.completedStamps }
        _modify { yield &fields.completedStamps }
    }
    /// The completed files a fetch again replaces, in requester order: they changed on disk after
    /// completion, and the new bytes go back where they were rather than beside them as `name.1`.
    @inlinable public var replacing: [String] {
        get { box.fields.replacing }
        _modify { yield &fields.replacing }
    }
    /// What each file of `replacing` looked like when the fetch again was decided (same order;
    /// empty when not known). A file in a directory haul chose the name in (`-d`) that changed
    /// again since is a person's: the new version goes beside it, never over it.
    @inlinable public var replacingStamps: [FileStamp] {
        get { box.fields.replacingStamps }
        _modify { yield &fields.replacingStamps }
    }
    @inlinable public var state: DownloadState {
        get { box.fields.state }
        _modify { yield &fields.state }
    }
    /// Bytes in the part file (the truth after a crash).
    @inlinable public var bytesOnDisk: Int64 {
        get { box.fields.bytesOnDisk }
        _modify { yield &fields.bytesOnDisk }
    }
    /// The resource's length, when the server said.
    @inlinable public var totalBytes: Int64? {
        get { box.fields.totalBytes }
        _modify { yield &fields.totalBytes }
    }
    /// Speed smoothed over about three seconds, in bytes per second.
    @inlinable public var bytesPerSecond: Double {
        get { box.fields.bytesPerSecond }
        _modify { yield &fields.bytesPerSecond }
    }
    /// Offset where the latest resume picked up (a 206 appended from here); nil when none did.
    @inlinable public var resumeOffset: Int64? {
        get { box.fields.resumeOffset }
        _modify { yield &fields.resumeOffset }
    }
    /// How many times a resume appended to existing bytes.
    @inlinable public var resumeCount: Int {
        get { box.fields.resumeCount }
        _modify { yield &fields.resumeCount }
    }
    /// Bytes that resumes did not have to fetch again.
    @inlinable public var bytesSavedByResume: Int64 {
        get { box.fields.bytesSavedByResume }
        _modify { yield &fields.bytesSavedByResume }
    }
    /// Whether the latest resume had no validator to check (allowed only because the length matched).
    @inlinable public var unverifiedResume: Bool {
        get { box.fields.unverifiedResume }
        _modify { yield &fields.unverifiedResume }
    }
    /// Whether the latest resume, without a validator, was checked by fetching the bytes before the
    /// end of the part file again and comparing them with the disk.
    @inlinable public var overlapChecked: Bool {
        get { box.fields.overlapChecked }
        _modify { yield &fields.overlapChecked }
    }
    /// The response that started the bytes on disk was answered within a second of the file's
    /// change (`Validators.recentlyChanged`): its validators do not verify a resume.
    @inlinable public var recentlyChanged: Bool {
        get { box.fields.recentlyChanged }
        _modify { yield &fields.recentlyChanged }
    }
    /// How many times the download had to start over from zero.
    @inlinable public var restartCount: Int {
        get { box.fields.restartCount }
        _modify { yield &fields.restartCount }
    }
    /// Why the latest restart from zero happened ("resource changed", "server ignores ranges" …).
    @inlinable public var restartReason: String? {
        get { box.fields.restartReason }
        _modify { yield &fields.restartReason }
    }
    /// The strong or weak entity tag from the first response, trimmed.
    @inlinable public var etag: String? {
        get { box.fields.etag }
        _modify { yield &fields.etag }
    }
    /// The Last-Modified date from the first response, as sent.
    @inlinable public var lastModified: String? {
        get { box.fields.lastModified }
        _modify { yield &fields.lastModified }
    }
    /// The media type of the response that started the bytes on disk (`application/zip`), if it said:
    /// a resume answered by an HTML page where the file was not one is an error page, not a new version.
    @inlinable public var contentType: String? {
        get { box.fields.contentType }
        _modify { yield &fields.contentType }
    }
    /// The file name the server proposed in Content-Disposition, already made safe.
    @inlinable public var serverFileName: String? {
        get { box.fields.serverFileName }
        _modify { yield &fields.serverFileName }
    }
    /// Where the request ended up after redirects.
    @inlinable public var finalURL: URL? {
        get { box.fields.finalURL }
        _modify { yield &fields.finalURL }
    }
    /// The status of the latest response.
    @inlinable public var lastStatus: Int? {
        get { box.fields.lastStatus }
        _modify { yield &fields.lastStatus }
    }
    /// The latest error, kept after a successful retry so the history stays visible.
    @inlinable public var lastError: String? {
        get { box.fields.lastError }
        _modify { yield &fields.lastError }
    }
    /// Failed attempts in a row (reset when an attempt makes progress).
    @inlinable public var failedAttempts: Int {
        get { box.fields.failedAttempts }
        _modify { yield &fields.failedAttempts }
    }
    /// When a transfer last worked on it (its latest attempt ended): purging for disk space takes
    /// the least recently used partial data first.
    @inlinable public var lastActive: Date? {
        get { box.fields.lastActive }
        _modify { yield &fields.lastActive }
    }
    /// Paused by a shutdown (quit, a signal, a dropped SSH connection), not by a person: the next
    /// process that runs the queue resumes it.
    @inlinable public var pausedByShutdown: Bool {
        get { box.fields.pausedByShutdown }
        _modify { yield &fields.pausedByShutdown }
    }
    /// An attempt runs but has no response yet (connecting, or waiting for the head); not stored.
    @inlinable public var connecting: Bool {
        get { box.fields.connecting }
        _modify { yield &fields.connecting }
    }
    /// Every byte is in: the file is being synced, or committed and moved into place. It needs the
    /// network no more (it holds no slot) but it is not `completed` yet; not stored. The screen
    /// says `finishing` (`shownWord`); the state stays `downloading` for scripts.
    @inlinable public var finishing: Bool {
        get { box.fields.finishing }
        _modify { yield &fields.finishing }
    }
    /// The parts of a segmented download as last made durable (fsync'd); empty when the part file is
    /// one prefix of the resource (its length is then the truth).
    @inlinable public var segments: [Segment] {
        get { box.fields.segments }
        _modify { yield &fields.segments }
    }
    /// The parts as written (not yet fsync'd) when last recorded, a few times a second: in the boot
    /// that wrote them the page cache holds those bytes, so a `kill -9` resumes each part there
    /// instead of at the last synced checkpoint. Never trusted after a reboot; empty when `segments`
    /// is as far along.
    @inlinable public var writtenSegments: [Segment] {
        get { box.fields.writtenSegments }
        _modify { yield &fields.writtenSegments }
    }
    /// Connections the running attempt has open; not stored.
    @inlinable public var connections: Int {
        get { box.fields.connections }
        _modify { yield &fields.connections }
    }
    /// The hook run for how the download ended (`--on-complete`, `--on-fail`); nil when none is
    /// configured, or the download was retried or fetched again since.
    @inlinable public var hook: HookRun? {
        get { box.fields.hook }
        _modify { yield &fields.hook }
    }
    /// This download's own speed limit in bytes per second (beside the queue's); nil when none.
    @inlinable public var limit: Int64? {
        get { box.fields.limit }
        _modify { yield &fields.limit }
    }

    public init(id: DownloadID, url: URL, destination: Destination, partPath: String) {
        box = Box(Fields(id: id, url: url, destination: destination, partPath: partPath))
    }

    public init(from decoder: any Decoder) throws {
        box = Box(try Fields(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try box.fields.encode(to: encoder)
    }

    public static func == (lhs: Download, rhs: Download) -> Bool {
        lhs.box === rhs.box || lhs.box.fields == rhs.box.fields
    }

    public func hash(into hasher: inout Hasher) {
        box.fields.hash(into: &hasher)
    }

    /// The fields, as `print` and a failed test's expectation show a download (not the box).
    public var customMirror: Mirror {
        Mirror(self, children: Mirror(reflecting: box.fields).children, displayStyle: .struct)
    }

    /// The fields, for a change: the box is copied first when another download shares it.
    @inlinable var fields: Fields {
        get { box.fields }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            yield &box.fields
        }
    }

    /// The stored fields of a download, in the order and with the names its JSON has always had.
    @usableFromInline struct Fields: Sendable, Hashable, Codable {
        @usableFromInline var id: DownloadID
        @usableFromInline var url: URL
        @usableFromInline var destination: Destination
        @usableFromInline var extraDestinations: [Destination] = []
        @usableFromInline var partPath: String
        @usableFromInline var options: RequestOptions = RequestOptions()
        @usableFromInline var completedPaths: [String] = []
        @usableFromInline var completedStamps: [FileStamp] = []
        @usableFromInline var replacing: [String] = []
        @usableFromInline var replacingStamps: [FileStamp] = []
        @usableFromInline var state: DownloadState = .queued
        @usableFromInline var bytesOnDisk: Int64 = 0
        @usableFromInline var totalBytes: Int64?
        @usableFromInline var bytesPerSecond: Double = 0
        @usableFromInline var resumeOffset: Int64?
        @usableFromInline var resumeCount: Int = 0
        @usableFromInline var bytesSavedByResume: Int64 = 0
        @usableFromInline var unverifiedResume: Bool = false
        @usableFromInline var overlapChecked: Bool = false
        @usableFromInline var restartCount: Int = 0
        @usableFromInline var restartReason: String?
        @usableFromInline var etag: String?
        @usableFromInline var lastModified: String?
        @usableFromInline var recentlyChanged: Bool = false
        @usableFromInline var contentType: String?
        @usableFromInline var serverFileName: String?
        @usableFromInline var finalURL: URL?
        @usableFromInline var lastStatus: Int?
        @usableFromInline var lastError: String?
        @usableFromInline var failedAttempts: Int = 0
        @usableFromInline var lastActive: Date?
        @usableFromInline var pausedByShutdown: Bool = false
        @usableFromInline var connecting: Bool = false
        @usableFromInline var finishing: Bool = false
        @usableFromInline var segments: [Segment] = []
        @usableFromInline var writtenSegments: [Segment] = []
        @usableFromInline var connections: Int = 0
        @usableFromInline var hook: HookRun?
        @usableFromInline var limit: Int64?
    }

    /// Holds the fields; changed only through `fields`, which never changes a shared box, so a box
    /// is never changed while another thread reads it.
    @usableFromInline final class Box: @unchecked Sendable {
        @usableFromInline var fields: Fields

        @usableFromInline init(_ fields: Fields) {
            self.fields = fields
        }
    }

    /// How every purge's words start (`purged: …`, `purged when disk space ran low: …`), in `lastError`.
    public static let purgedWords = "purged"

    /// Paused with its partial data purged (by `X`, or for disk space) and nothing fetched since: the
    /// row says so, as a resume fetches it from zero.
    public var isPurged: Bool {
        state == .paused && bytesOnDisk == 0 && lastError?.hasPrefix(Self.purgedWords) == true
    }

    /// The word the screen shows for the row: the state's, or `finishing` while a downloaded
    /// file is being placed (so the counts of rows downloading never pass how many run at once).
    public var shownWord: String {
        finishing && state == .downloading ? "finishing" : state.word
    }

    /// The file written at completion for the first requester (nil until then).
    public var completedPath: String? { completedPaths.first }

    /// The file written at completion for the requester that asked for `destination` (each
    /// requester gets its own: `completedPaths` follows `destination`, then `extraDestinations`);
    /// the first requester's when `destination` is none of them.
    public func completedPath(for destination: Destination) -> String? {
        let index = destination == self.destination ? 0 : extraDestinations.firstIndex(of: destination).map { $0 + 1 }
        if let index, completedPaths.indices.contains(index) { return completedPaths[index] }
        return completedPath
    }

    /// Fraction done in 0...1, when the total is known.
    public var fractionDone: Double? {
        guard let totalBytes, totalBytes > 0 else { return totalBytes == 0 ? 1 : nil }
        return min(1, Double(bytesOnDisk) / Double(totalBytes))
    }

    /// The name its file takes in a directory: the server's (`Content-Disposition`), else the URL's.
    public var fileName: String {
        serverFileName ?? FileNaming.name(for: url)
    }

    /// Which of `fileName`, `fileName.1` … a download into a directory tries first: the one its part
    /// file is named for (the second download of `f.bin` fetches into `f.bin.1.part` and becomes
    /// `f.bin.1`, whichever ends first), else `fileName` (0).
    public var firstAttempt: Int {
        guard case .directory(let directory) = destination, let slash = partPath.lastIndex(of: "/") else { return 0 }
        let parent = slash == partPath.startIndex ? "/" : String(partPath[..<slash])
        let trimmed = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        guard parent == trimmed else { return 0 }
        return FileNaming.attempt(ofPartName: String(partPath[partPath.index(after: slash)...]), for: fileName) ?? 0
    }

    /// The name a download into a directory gets unless that name is taken when it is placed.
    public var intendedName: String {
        FileNaming.candidate(fileName, attempt: firstAttempt)
    }

    /// Whether the row says the download has bytes of its own on disk (a checkpoint, validators,
    /// a length or parts): a part file without a queue's mark is then its own, as before marks
    /// were kept. One that says none takes no file it finds for its own (`TransferOrder.hasBytes`).
    public var hasBytesOfItsOwn: Bool {
        bytesOnDisk > 0 || etag != nil || lastModified != nil || totalBytes != nil || !segments.isEmpty
    }

    /// Forgets what described the version whose bytes were on disk (validators, type, length, parts,
    /// how it was last resumed): nothing stored may make an emptied part file look like a resumable one.
    mutating func forgetVersion() {
        forgetResume()
        segments = []
        writtenSegments = []
        etag = nil
        lastModified = nil
        recentlyChanged = false
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
