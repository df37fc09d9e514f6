import Foundation

/// What is on stable storage, what the journal holds, and when the queue may show it: the
/// commit-then-show pipeline as a pure value whose events return actions (sync these files, commit
/// now or after a moment, show later), carried out by `DownloadSession`.
///
/// Three promises live here, and each has its transition tests (`DurabilityLedgerTests`):
/// - A row never claims more bytes than are fsync'd (`durable`): a checkpoint is the bytes counted
///   before a sync began, and only once the sync succeeded. Without fsync (`--no-fsync`) the claim
///   is marked unsynced, which is trusted until a reboot.
/// - A change is committed before the snapshot that shows it is published: a commit takes every
///   change made until it starts, and the snapshot is taken with it. One kind of change may be
///   shown first: a queued download's start and its response, while none of its bytes is written
///   and its body is small (`smallBody`: a crash that lost them fetches at most that again; a
///   larger body's bytes wait for its response to be committed). Its row waits (`rowWait`) for the
///   download's next change and is written with it: a small file's row was written 4.2 times on
///   average (its addition, its start and response, together or apart, its completion and its
///   placement), now 3.
/// - Commits are grouped: one commit is in flight at a time; everything asked for meanwhile joins
///   the next one, and a transfer's event waits `joinWindow` for others to share its commit. A
///   thousand downloads finishing together cost a few transactions, not a thousand.
public struct DurabilityLedger: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// Whether the part files are fsync'd before a checkpoint claims their bytes.
        public var syncs: Bool
        /// How long a transfer's event waits for others to share its commit and snapshot.
        public var joinWindow: Duration = .milliseconds(10)
        /// The least time between two snapshots only transfer events asked for, per download in
        /// the queue (a snapshot copies the whole queue and each reader looks at all of it) …
        public var gapPerDownload: Duration = .microseconds(50)
        /// … and at most this.
        public var longestGap: Duration = .milliseconds(250)
        /// How many times a commit is tried while the journal works (a busy database may pass);
        /// once it failed, one try a commit until one succeeds (a full disk stays full).
        public var triesWhileHealthy: Int = 6
        /// How long a row whose only news is a start and a response (`onlyStarted`) waits for the
        /// download's next change before it is written on its own (`haul list` in another shell
        /// says `downloading` this much later).
        public var rowWait: Duration = .seconds(1)

        public init(syncs: Bool) {
            self.syncs = syncs
        }
    }

    /// What the owner does next.
    public enum Action: Sendable, Hashable {
        /// Calls `beginCommit(token)` once `after` has passed (zero: now).
        case commit(token: UInt64, after: Duration)
        /// fsyncs each order's part file (all in one pass), then reports each with `synced`.
        case sync([SyncOrder])
        /// Asks for a showing publish once `after` has passed (`trailingShowDue`), to show what a
        /// throttled snapshot left out.
        case showLater(after: Duration)
        /// Asks for a commit once `after` has passed (`waitingRowsDue`), to write the rows that
        /// waited `rowWait` for a change of their download.
        case writeLater(after: Duration)
    }

    /// A part file to fsync for a checkpoint, and what the checkpoint will claim once it is.
    public struct SyncOrder: Sendable, Hashable {
        public var id: DownloadID
        public var attempt: AttemptID
        public var path: String
        /// The bytes written before the sync began (read before it, like `parts`).
        public var bytes: Int64
        /// A segmented download's parts as written then; nil for a prefix.
        public var parts: [Segment]?

        public init(id: DownloadID, attempt: AttemptID, path: String, bytes: Int64, parts: [Segment]?) {
            self.id = id
            self.attempt = attempt
            self.path = path
            self.bytes = bytes
            self.parts = parts
        }
    }

    /// A running transfer as sampled for a checkpoint: what its sync would claim, and whether its
    /// part file is being cut (an odd truncation count), when its bytes count for nothing.
    public struct Sample: Sendable, Hashable {
        public var order: SyncOrder
        public var truncating: Bool

        public init(_ order: SyncOrder, truncating: Bool = false) {
            self.order = order
            self.truncating = truncating
        }
    }

    /// What a checkpoint's sync came to.
    public enum Checkpoint: Sendable, Hashable {
        /// Nothing changes (the sync failed, the file was cut meanwhile, the attempt is over, or a
        /// later checkpoint already claims more).
        case ignored
        /// The row may claim the bytes: the owner records `parts` (when not nil) in the session
        /// machine, and publishes.
        case accepted(parts: [Segment]?)
    }

    /// One commit: the changes it writes, whether its snapshot is shown, and how often to try.
    public struct Commit: Sendable, Hashable {
        /// Every publish asked for up to this token is settled once this commit ends.
        public var token: UInt64
        public var changes: QueueChanges
        /// Show the snapshot taken with the changes once they are committed.
        public var show: Bool
        public var tries: Int
    }

    public let configuration: Configuration

    // MARK: What the disk holds

    /// How far each part file is known to be fsync'd: the most its row may claim.
    public private(set) var durable: [DownloadID: Int64] = [:]
    /// Downloads whose `durable` claim was counted without an fsync (`--no-fsync`); cleared by a sync.
    public private(set) var unsynced: Set<DownloadID> = []
    /// Downloads whose checkpoint sync is running: one at a time each.
    public private(set) var syncing: Set<DownloadID> = []

    // MARK: What the journal holds

    /// Each download as the journal last committed it (speed zero, bytes the checkpoint).
    private var committed: [DownloadID: Download] = [:]
    private var committedOrder: [DownloadID] = []
    private var committedPositions: [DownloadID: Int] = [:]
    /// The rows last committed as unsynced.
    private var committedUnsynced: Set<DownloadID> = []
    /// Downloads whose row must be looked at again (a new checkpoint, a failed commit).
    public private(set) var dirty: Set<DownloadID> = []
    /// Removals whose commit failed: the next commit deletes them again.
    private var uncommittedRemovals: Set<DownloadID> = []
    /// Rows whose only news is a start and a response (`onlyStarted`), with when they began to
    /// wait for the download's next change; they stay `dirty`.
    public private(set) var waitingRows: [DownloadID: ContinuousClock.Instant] = [:]
    /// A `writeLater` is asked for and has not come yet.
    private var writePending = false
    /// History entries (stamped when taken) for the next commit that writes anything else.
    public private(set) var historyOutbox: [HistoryEntry] = []
    /// The global limit changed since the last commit: the next one stores it.
    private var limitChanged = false
    /// Why the journal refuses commits, from the first that failed until one succeeds.
    public private(set) var failure: String?

    // MARK: The pipeline

    private enum Pipeline: Sendable, Hashable {
        case idle
        /// A commit waits for its start (`joinWindow`, or now).
        case gathering(Gathering)
        /// A commit is in flight; `next` gathers what is asked for meanwhile.
        case committing(token: UInt64, next: Gathering?)
    }

    private struct Gathering: Sendable, Hashable {
        var token: UInt64
        var showing: Bool
        /// A person's intent asked: the commit starts at once and its snapshot is not throttled.
        var urgent: Bool
        /// Something waits for the commit (a person, or a finished file before it is placed): it
        /// starts at once, without waiting `joinWindow` for others.
        var startsNow: Bool
    }

    private var pipeline = Pipeline.idle
    private var lastToken: UInt64 = 0
    /// When the last snapshot was shown (nil: never).
    private var lastShown: ContinuousClock.Instant?
    /// A trailing show is asked for (`showLater`) and has not come yet.
    private var trailingPending = false

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The newest token handed out: settling it settles every publish asked for so far.
    public var newestToken: UInt64 { lastToken }

    /// Whether a commit is in flight or waits to start.
    public var isBusy: Bool { pipeline != .idle }

    // MARK: Publishing

    /// Asks for the changes made so far to be committed and then shown (`showing`); returns the
    /// token the request is settled with and what to do.
    ///
    /// `soon`: a transfer's event, which may wait `joinWindow` for others to share its commit and
    /// whose snapshot may be throttled. A person's intent (`soon` false) starts a waiting commit at
    /// once. `awaited`: a transfer's event that something waits for (a finished file is placed only
    /// once its row says completed): its commit starts at once too,
    /// and its snapshot may still be throttled. `quiet`: no transfer runs and no file is being
    /// placed, so nothing else will come to share the commit or follow its snapshot: a transfer's
    /// event is then committed and shown at once, as a person's intent is (the last file of a
    /// queue is shown done without waiting for a throttle meant for a busy one).
    public mutating func publish(
        showing: Bool = true, soon: Bool = false, awaited: Bool = false, quiet: Bool = false
    ) -> (token: UInt64, actions: [Action]) {
        let soon = soon && !quiet
        let now = !soon || awaited
        switch pipeline {
        case .idle:
            let gathering = Gathering(token: nextToken(), showing: showing, urgent: !soon, startsNow: now)
            pipeline = .gathering(gathering)
            return (gathering.token, [.commit(token: gathering.token, after: now ? .zero : configuration.joinWindow)])
        case .gathering(var gathering):
            gathering.showing = gathering.showing || showing
            gathering.urgent = gathering.urgent || !soon
            var actions: [Action] = []
            if now && !gathering.startsNow {
                gathering.startsNow = true
                // Cuts the wait short; the first of the two calls to `beginCommit` wins.
                actions.append(.commit(token: gathering.token, after: .zero))
            }
            pipeline = .gathering(gathering)
            return (gathering.token, actions)
        case .committing(let token, let waiting):
            // Everything asked for meanwhile starts as soon as the commit in flight ends.
            var next = waiting ?? Gathering(token: nextToken(), showing: false, urgent: false, startsNow: true)
            next.showing = next.showing || showing
            next.urgent = next.urgent || !soon
            pipeline = .committing(token: token, next: next)
            return (next.token, [])
        }
    }

    /// Starts the commit `token`: takes every change made until now (the owner takes the snapshot
    /// to show at the same moment, when `show` says so). Nil when `token` already started (a wait
    /// cut short calls twice) or was never asked for.
    ///
    /// The queue's length (in `machine`) sets how long a throttled snapshot waits; `now` is the
    /// owner's clock.
    public mutating func beginCommit(
        _ token: UInt64, machine: inout SessionStateMachine, journaled: Bool, bootID: String?, now: ContinuousClock.Instant
    ) -> (commit: Commit, actions: [Action])? {
        guard case .gathering(let gathering) = pipeline, gathering.token == token else { return nil }
        pipeline = .committing(token: token, next: nil)
        let changes = takeChanges(&machine, journaled: journaled, bootID: bootID, now: now)
        var show = gathering.showing
        var actions: [Action] = []
        if !writePending, let first = waitingRows.values.min() {
            writePending = true
            actions.append(.writeLater(after: max(.zero, configuration.rowWait - first.duration(to: now))))
        }
        if show, !gathering.urgent, let lastShown {
            let since = lastShown.duration(to: now)
            let gap = min(configuration.longestGap, configuration.gapPerDownload * machine.order.count)
            if since < gap {
                show = false
                if !trailingPending {
                    trailingPending = true
                    actions.append(.showLater(after: gap - since))
                }
            }
        }
        let tries = failure == nil ? configuration.triesWhileHealthy : 1
        return (Commit(token: token, changes: changes, show: show, tries: tries), actions)
    }

    /// The commit ended (`failure` nil: written). A failed commit's rows, removals, positions,
    /// limit and history are written again by the next. Returns the actions: the next commit,
    /// when anything was asked for meanwhile.
    public mutating func commitEnded(_ commit: Commit, failure: JournalFailure?, now: ContinuousClock.Instant) -> [Action] {
        if failure != nil { forget(commit.changes) }
        self.failure = failure.map { "cannot save the queue: \($0.description)" }
        if commit.show { lastShown = now }
        guard case .committing(let token, let next) = pipeline, token == commit.token else { return [] }
        guard let next else {
            pipeline = .idle
            return []
        }
        // Everything asked for while this commit was in flight shares the next one, at once.
        pipeline = .gathering(next)
        return [.commit(token: next.token, after: .zero)]
    }

    /// The trailing show asked for by `showLater` is due: a showing publish of a transfer's kind.
    public mutating func trailingShowDue() -> (token: UInt64, actions: [Action]) {
        trailingPending = false
        return publish(showing: true, soon: true)
    }

    /// The commit asked for by `writeLater` is due: the rows that waited `rowWait` are written (a
    /// publish of a transfer's kind that shows nothing new).
    public mutating func waitingRowsDue() -> (token: UInt64, actions: [Action]) {
        writePending = false
        return publish(showing: false, soon: true)
    }

    // MARK: Changes and history

    /// Notes history entries for the next commit that writes anything else.
    public mutating func note(_ entries: [HistoryEntry]) {
        historyOutbox += entries
    }

    /// The global limit changed: the next commit stores it.
    public mutating func limitDidChange() {
        limitChanged = true
    }

    /// The entries of `id` (all with nil) taken but not committed yet.
    public func pendingHistory(_ id: DownloadID?) -> [HistoryEntry] {
        id.map { id in historyOutbox.filter { $0.download == id } } ?? historyOutbox
    }

    /// The rows that differ from what the journal holds, assumed committed from here on.
    ///
    /// A row that is not completed or cancelled claims at most its `durable` bytes. History rides
    /// on a commit that writes something else, never one of its own; a row whose only news is a
    /// start and a response waits up to `rowWait` for the download's next change. `flushing` (the
    /// last commit of a shutdown) takes it all.
    private mutating func takeChanges(
        _ machine: inout SessionStateMachine, journaled: Bool, bootID: String?, now: ContinuousClock.Instant
    ) -> QueueChanges {
        let touched = machine.takeTouched()
        guard journaled else { return QueueChanges() }
        var changes = QueueChanges()
        changes.bootID = bootID
        if limitChanged {
            changes.limit = QueueChanges.LimitSetting(machine.configuration.limit)
            limitChanged = false
        }
        let order = machine.order
        if order != committedOrder || committedPositions.count != order.count {
            for (index, id) in order.enumerated() where committedPositions[id] != index {
                changes.positions[id] = index
                committedPositions[id] = index
            }
            committedOrder = order
        }
        let repositioned = !changes.positions.isEmpty
        var writtenPartsOnly = true
        var stillDirty: Set<DownloadID> = []
        for id in touched.union(dirty) {
            guard let download = machine.download(id) else {
                if committed.removeValue(forKey: id) != nil || uncommittedRemovals.remove(id) != nil { changes.removed.append(id) }
                committedPositions[id] = nil
                committedUnsynced.remove(id)
                waitingRows[id] = nil
                continue
            }
            var row = Self.row(download)
            var rowUnsynced = false
            if download.state != .completed && download.state != .cancelled {
                let claim = min(download.bytesOnDisk, durable[id] ?? 0)
                if row.bytesOnDisk != claim { row.bytesOnDisk = claim }
                rowUnsynced = unsynced.contains(id)
            }
            let old = committed[id]
            guard old != row || committedUnsynced.contains(id) != rowUnsynced else {
                waitingRows[id] = nil
                continue
            }
            // Only while nothing is written, as the machine last saw it: from the first byte on, the
            // validators are worth having on disk (a `kill -9` keeps what the page cache holds, and
            // a resume without them and a known length starts over).
            if !flushing, download.bytesOnDisk == 0, let old, Self.onlyStarted(old, row) {
                let since = waitingRows[id] ?? now
                if since.duration(to: now) < configuration.rowWait {
                    waitingRows[id] = since
                    stillDirty.insert(id)
                    continue
                }
            }
            waitingRows[id] = nil
            if writtenPartsOnly {
                writtenPartsOnly = old.map { Self.onlyWrittenPartsDiffer($0, row) } == true && committedUnsynced.contains(id) == rowUnsynced
            }
            committed[id] = row
            if rowUnsynced {
                committedUnsynced.insert(id)
                changes.unsynced.insert(id)
            } else {
                committedUnsynced.remove(id)
            }
            changes.saved.append(row)
            if let index = committedPositions[id] { changes.positions[id] = index }
        }
        dirty = stillDirty
        if !historyOutbox.isEmpty, !changes.isEmpty || flushing {
            changes.history = historyOutbox
            historyOutbox = []
        }
        changes.writtenPartsOnly = writtenPartsOnly && !changes.saved.isEmpty && !repositioned && changes.removed.isEmpty
            && changes.history.isEmpty && changes.limit == nil
        return changes
    }

    /// Whether `row` is `old` with other parts as written, and nothing else changed.
    static func onlyWrittenPartsDiffer(_ old: Download, _ row: Download) -> Bool {
        guard old.writtenSegments != row.writtenSegments else { return false }
        var moved = old
        moved.writtenSegments = row.writtenSegments
        return moved == row
    }

    /// Set for the last commit of a shutdown: it takes the history entries that wait for a change,
    /// and the rows that wait for one.
    public var flushing = false

    /// Forgets that `changes` were committed, so the next commit writes them again.
    private mutating func forget(_ changes: QueueChanges) {
        // Before what was taken since: the history keeps its order.
        historyOutbox = changes.history + historyOutbox
        if changes.limit != nil { limitChanged = true }
        for download in changes.saved { committed[download.id] = nil }
        dirty.formUnion(changes.saved.map(\.id))
        dirty.formUnion(changes.removed)
        uncommittedRemovals.formUnion(changes.removed)
        if !changes.positions.isEmpty {
            committedPositions = [:]
            committedOrder = []
        }
    }

    /// The largest body whose start and response may wait to be written (`onlyStarted`). Bytes come
    /// faster than the machine's count of them (a tick every 100 ms), so a row that waits while
    /// "nothing is written" may lose validators of bytes already on disk (a `kill -9`, or a disk
    /// that fills before the next commit can be written): without them a resume starts over. A
    /// small body costs at most this to fetch again; a larger or unknown one is written at once.
    public static let smallBody: Int64 = 1 << 20

    /// A download as the journal stores it: no speed, and none of what is not stored (an attempt's
    /// connections), so that a change of those alone writes nothing.
    public static func row(_ download: Download) -> Download {
        var row = download
        // Each only when it differs: a change to a download shared with the machine copies it.
        if row.bytesPerSecond != 0 { row.bytesPerSecond = 0 }
        if row.connecting { row.connecting = false }
        if row.connections != 0 { row.connections = 0 }
        return row
    }

    /// Whether `row` differs from the committed `old` only by what a queued download's start and
    /// its response fill in, with nothing durable on either side, for a body of known length up
    /// to `smallBody`: a crash that lost the change would fetch it again from the start, at most
    /// that much twice. Anything else (a pause, a requester, a restart, a part split, a byte
    /// claimed, a larger or unknown length) is written by the next commit; so is this, once the
    /// download has written a byte (`takeChanges`).
    public static func onlyStarted(_ old: Download, _ row: Download) -> Bool {
        guard old.state == .queued, row.state == .downloading, old.bytesOnDisk == 0, row.bytesOnDisk == 0,
              row.segments.isEmpty, row.writtenSegments.isEmpty,
              let total = row.totalBytes, total <= smallBody else { return false }
        var started = old
        started.state = row.state
        started.etag = row.etag
        started.lastModified = row.lastModified
        started.recentlyChanged = row.recentlyChanged
        started.contentType = row.contentType
        started.totalBytes = row.totalBytes
        started.serverFileName = row.serverFileName
        started.finalURL = row.finalURL
        started.lastStatus = row.lastStatus
        return started == row
    }

    // MARK: Restoring

    /// A download as a journal stored it (`stored`) and as recovery reconciled it with its part
    /// file (`recovered`): `synced` when the part file was fsync'd just now, so all of it is
    /// durable; `storedUnsynced` when its checkpoint was taken without an fsync.
    public mutating func restored(_ recovered: Download, stored: Download, synced: Bool, storedUnsynced: Bool) {
        let id = recovered.id
        committed[id] = Self.row(stored)
        durable[id] = synced ? recovered.bytesOnDisk : min(recovered.bytesOnDisk, stored.bytesOnDisk)
        if storedUnsynced {
            committedUnsynced.insert(id)
            if !synced { unsynced.insert(id) }
        }
    }

    /// The journal's order and positions after a restore. Positions that are not exactly the
    /// queue order are rewritten, once, by the first commit (only those that differ: a long queue
    /// in order costs nothing).
    public mutating func restoredOrder(_ order: [DownloadID], positions: [DownloadID: Int]) {
        committedOrder = order
        committedPositions = positions
        if order.enumerated().contains(where: { positions[$0.element] != $0.offset }) { committedOrder = [] }
    }

    // MARK: Transfers

    /// The part file starts from nothing (a fresh or restarted response, a version thrown away, a
    /// completed file fetched again): none of the new bytes are synced.
    public mutating func emptied(_ id: DownloadID) {
        durable[id] = 0
    }

    /// A resume from `offset`: what lies past it is about to be overwritten.
    public mutating func resumed(_ id: DownloadID, from offset: Int64) {
        durable[id] = min(durable[id] ?? 0, offset)
    }

    /// The download is gone from the queue.
    public mutating func forgot(_ id: DownloadID) {
        durable[id] = nil
        unsynced.remove(id)
    }

    /// An attempt splits the file into `parts`: the first part claims no more than is synced.
    /// Returns the parts to record.
    public mutating func split(_ id: DownloadID, _ parts: [Segment]) -> [Segment] {
        var parts = parts
        if !parts.isEmpty { parts[0].next = min(parts[0].next, max(parts[0].start, durable[id] ?? 0)) }
        durable[id] = Segments.bytesOnDisk(parts)
        return parts
    }

    /// An attempt ended and its part file was fsync'd (`synced`) with `bytes` in it: they are
    /// durable (not for a cancelled download, whose file is going).
    public mutating func attemptEnded(_ id: DownloadID, bytes: Int64, synced: Bool, cancelled: Bool) {
        guard synced, !cancelled else { return }
        durable[id] = bytes
        unsynced.remove(id)
        dirty.insert(id)
    }

    /// Checkpoints fall due: the part files of the running downloads that grew are synced in one
    /// pass (`.sync`); without fsync their bytes are claimed at once, unsynced (returned: the owner
    /// records their parts, when not nil, and publishes).
    public mutating func checkpointDue(_ samples: [Sample]) -> (actions: [Action], claimed: [SyncOrder]) {
        var orders: [SyncOrder] = []
        var claimed: [SyncOrder] = []
        for sample in samples where !syncing.contains(sample.order.id) {
            let order = sample.order
            guard !sample.truncating, order.bytes > durable[order.id] ?? 0 else { continue }
            if configuration.syncs {
                syncing.insert(order.id)
                orders.append(order)
            } else if claim(order, synced: false) {
                claimed.append(order)
            }
        }
        return (orders.isEmpty ? [] : [.sync(orders)], claimed)
    }

    /// A checkpoint's sync ended. `valid`: it succeeded, and the file was neither cut nor had its
    /// parts thrown away since the bytes were counted; `current`: the attempt still runs.
    public mutating func synced(_ order: SyncOrder, valid: Bool, current: Bool) -> Checkpoint {
        syncing.remove(order.id)
        guard valid, current, claim(order, synced: true) else { return .ignored }
        return .accepted(parts: order.parts)
    }

    private mutating func claim(_ order: SyncOrder, synced: Bool) -> Bool {
        if order.parts != nil {
            // Parts only ever grow within an attempt; a later reading supersedes an earlier one.
            guard order.bytes >= durable[order.id] ?? 0 else { return false }
            durable[order.id] = order.bytes
        } else {
            durable[order.id] = max(durable[order.id] ?? 0, order.bytes)
        }
        if !synced { unsynced.insert(order.id) }
        dirty.insert(order.id)
        return true
    }

    private mutating func nextToken() -> UInt64 {
        lastToken &+= 1
        return lastToken
    }
}
