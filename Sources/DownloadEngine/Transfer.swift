import AsyncHTTPClient
import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// Bytes on disk of a running attempt.
///
/// The response streams store after every write; the session's ticker reads about ten times a
/// second. This is what keeps actor hops off the per-chunk path.
final class TransferProgress: Sendable {
    let bytesOnDisk = Atomic<Int64>(0)
    /// Starts written bytes on their way to disk while the body still comes, when the file is
    /// fsync'd at the end (nil otherwise).
    let writeback: EarlyWriteback?
    /// Odd while the part file is being cut back (the bytes counted so far stop being true), bumped
    /// again when done: a checkpoint that saw another value, or an odd one, claims nothing.
    let truncations = Atomic<Int>(0)
    /// Connections the attempt has open (for the row).
    let connections = Atomic<Int>(0)
    private let parts = Mutex<SharedBoard?>(nil)

    init(writesBack: Bool = false) {
        writeback = writesBack ? EarlyWriteback() : nil
    }

    /// The live parts of a segmented attempt; nil while the file is fetched front to back.
    var board: SharedBoard? {
        get { parts.withLock { $0 } }
        set { parts.withLock { $0 = newValue } }
    }

    /// Cuts `file` to `offset`, telling concurrent checkpoints that the bytes they counted are void.
    func truncate(_ file: PartFile, to offset: Int64) throws(PartFile.Failure) {
        truncations.add(1, ordering: .sequentiallyConsistent)
        defer { truncations.add(1, ordering: .sequentiallyConsistent) }
        bytesOnDisk.store(offset, ordering: .sequentiallyConsistent)
        try file.truncate(to: offset)
    }

    /// Replaces the part file at `path` with `bytes`, durably (`PartFile.replace`), telling
    /// concurrent checkpoints that the bytes they counted are void.
    func replace(_ path: String, with bytes: [UInt8], owner: String?) async throws(PartFile.Failure) {
        truncations.add(1, ordering: .sequentiallyConsistent)
        defer { truncations.add(1, ordering: .sequentiallyConsistent) }
        bytesOnDisk.store(0, ordering: .sequentiallyConsistent)
        try await FileSync.run { PartFile.replace(path, with: bytes, owner: owner) }.get()
    }
}

/// Connections open per host, over every download of a session: `--connections N` lets a download
/// add connections only while its host has fewer than N. A download's first connection is never
/// refused (the queue's `-j` already limits those).
final class HostConnections: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    func open(_ host: String) {
        counts.withLock { $0[host, default: 0] += 1 }
    }

    /// Opens up to `wanted` more connections to `host` while it has fewer than `cap`; returns how many.
    func openExtra(_ host: String, upTo wanted: Int, cap: Int) -> Int {
        counts.withLock { counts in
            let granted = max(0, min(wanted, cap - counts[host, default: 0]))
            counts[host, default: 0] += granted
            return granted
        }
    }

    func close(_ host: String, count: Int = 1) {
        guard count > 0 else { return }
        counts.withLock { counts in
            let left = counts[host, default: 0] - count
            counts[host] = left > 0 ? left : nil
        }
    }
}

/// One attempt of one download: a request (a `Range` resume when there are bytes to keep), the
/// resume rules applied to its response, and the body streamed into the part file. With
/// `--connections N` and a server that does ranges, the attempt splits the rest of the file into
/// parts fetched at once, each with `If-Range`; a changed resource restarts the whole file.
struct Transfer: Sendable {
    typealias Outcome = SessionStateMachine.Outcome

    /// How an attempt ended, the bytes on disk, and the parts of a segmented file as written.
    struct Result: Sendable {
        var outcome: Outcome
        var bytesOnDisk: Int64
        var segments: [Segment]?
        /// The finished part file's stamp (`completed` only): committed with the completed row, it
        /// tells the placed file apart from any other after a crash between its move and the
        /// commit that names it (a move or a link keeps size and modification time).
        var partStamp: FileStamp?
    }

    let order: SessionStateMachine.TransferOrder
    /// The clients by URL (a redirect may lead to a URL another proxy serves).
    let clients: HTTPClients
    /// `--allow-downgrade`: follow a redirect from https to http.
    let allowDowngrade: Bool
    let progress: TransferProgress
    let hosts: HostConnections
    /// The session's limit (`--limit-rate`, shared by every transfer) and the download's own
    /// (shared by its connections).
    let throttle: Throttle
    let userAgent: String
    /// Limit for the response head to arrive (connecting included).
    let headTimeout: TimeAmount
    /// Time without a byte, while a response is ready for more, that counts as a stall.
    let stallTimeout: TimeAmount
    /// Seconds without a byte that count as a stall, for the message.
    var stallSeconds: Int64 { stallTimeout.nanoseconds / 1_000_000_000 }
    /// fsync the part file before reporting completion.
    let syncOnCompletion: Bool
    /// The mark of this download's part files (`PartFileOwner`: its queue and id); nil: no marks.
    let owner: String?
    /// The free space that must stay where the part file is (`--min-free`).
    let floor: SpaceFloor
    /// Records that this attempt will write `needs` more bytes on the file system read as the
    /// reading (nil: unknown), and says what the session's other running transfers will still
    /// write there. One at a time on the session: two downloads checked at once never both take
    /// the same room.
    let claimSpace: @Sendable (Int64?, DiskReading) async -> Int64
    /// The attempt's start, in one call on the session (each call there is a hand-off between
    /// threads; a thousand small files made three of them before their first request): what
    /// describes the part file now, read when the attempt really starts (the previous attempt on
    /// the file may have changed it after this one was ordered); the room it claims on the file
    /// system of the reading, as `claimSpace` records it; and, when the attempt goes on to fetch
    /// front to back, its first request, noted as `began` notes one. Nil when the download or the
    /// session is gone.
    let prepare: @Sendable (Preparation) async -> Prepared?
    /// Called before each request of the attempt that decides what its bytes are (not for the
    /// part requests of a split), with what it asks for: the history's `started` entries.
    let began: @Sendable (SessionStateMachine.AttemptStart) async -> Void
    /// Called once per attempt, when the response that will be written has been accepted.
    let responded: @Sendable (SessionStateMachine.ResponseInfo) async -> Void
    /// The file is about to be split into these parts: returns once they are committed (false when
    /// the attempt no longer runs). Nothing is written past the first part's bytes before that.
    let split: @Sendable ([Segment]) async -> Bool
    /// The parts are about to be thrown away (the resource changed): returns once the store no
    /// longer describes them, so that no crash can make the emptied file pass for them.
    let discardVersion: @Sendable () async -> Void
    /// Every byte is in the part file (this many in all), which is synced next: the attempt needs
    /// the network no more and gives its slot to the next download (`transferWritten`). Called
    /// only before a sync (`syncOnCompletion`); without one, the attempt's end frees the slot.
    let written: @Sendable (Int64) async -> Void

    private var host: String { order.url.host ?? "" }

    /// Runs the attempt to its end and says how it ended and what the part file holds.
    ///
    /// The part file is opened (created) only once a response worth writing arrived, so a 404 or a
    /// refused connection leaves no file behind.
    func run() async -> Result {
        hosts.open(host)
        progress.connections.store(1, ordering: .relaxed)
        defer {
            hosts.close(host)
            progress.connections.store(0, ordering: .relaxed)
        }
        let startLength: Int64
        do {
            startLength = try PartFile.existingLength(order.partPath)
        } catch {
            return Result(outcome: outcome(of: error), bytesOnDisk: 0)
        }
        // Bytes another download marked (of another queue, or one removed from this one) are its
        // own: not resumed from, nor restarted over. Nor are bytes without a mark found by a
        // download that has none of its own: it did not write them (a person's `NAME.part`, a file
        // haul delivered under that name); before, it restarted over them.
        if startLength > 0 {
            let holder = PartFileOwner.holder(of: PartFileOwner.mark(path: order.partPath), owner: owner, hasBytes: order.hasBytes)
            if holder != .own { return Result(outcome: .partFileTaken(path: order.partPath, marked: holder == .another), bytesOnDisk: 0) }
        }
        progress.bytesOnDisk.store(startLength, ordering: .relaxed)
        guard !Task.isCancelled,
              let prepared = await prepare(Preparation(startLength: startLength, reading: DiskWatch.reading(near: order.partPath, floor: floor)))
        else { return Result(outcome: .stopped, bytesOnDisk: startLength) }
        let basis = prepared.basis
        // No request while the disk is under its floor, or when the known rest cannot fit: the
        // download waits for room with its bytes, instead of failing half-way.
        if let short = prepared.shortage {
            return Result(outcome: short, bytesOnDisk: startLength, segments: basis.segments.isEmpty ? nil : basis.segments)
        }
        var attempt = Attempt(path: order.partPath, validators: basis.validators, knownTotal: basis.knownTotal)
        attempt.knownType = basis.contentType
        attempt.startLength = startLength
        attempt.owner = owner
        attempt.hasBytes = order.hasBytes
        defer { attempt.file?.close() }
        let outcome: Outcome
        do {
            if basis.segments.isEmpty {
                let plan = prepared.firstRequest ?? ResumeRules.plan(partLength: startLength, knownTotal: basis.knownTotal, validators: basis.validators)
                outcome = try await fetch(&attempt, plan: plan, allowSplit: true, noted: prepared.firstRequest != nil)
            } else {
                outcome = try await resumeParts(&attempt, basis)
            }
        } catch let failure as PartFile.Failure {
            outcome = self.outcome(of: failure)
        } catch {
            outcome = Task.isCancelled ? .stopped : classify(error, progressed: attempt.grew)
        }
        let ended = Task.isCancelled && outcome != .completed ? .stopped : outcome
        // Another's file holds nothing of this download's.
        let taken = if case .partFileTaken = ended { true } else { false }
        return Result(
            outcome: ended, bytesOnDisk: taken ? 0 : attempt.length, segments: taken ? nil : attempt.board?.segments,
            // The file this attempt wrote, whatever its name now (the placement checks that the
            // name still leads to it); by its name when it opened none.
            partStamp: ended == .completed ? attempt.file?.stamp ?? FileSync.stamp(attempt.path) : nil
        )
    }

    /// The part file of one attempt, opened on first use, and what is known about its bytes.
    private struct Attempt {
        var path: String
        var validators: Validators
        var knownTotal: Int64?
        /// The media type of the response that started the bytes on disk.
        var knownType: String?
        var file: PartFile?
        /// The download's mark on the file (`PartFileOwner`).
        var owner: String?
        /// Whether the download's row has bytes of its own: only then is an unmarked file its own.
        var hasBytes = true
        var startLength: Int64 = 0
        /// Whether the bytes found were discarded (a restart from zero).
        var restarted = false
        /// The live parts, once the file is segmented.
        var board: SharedBoard?

        init(path: String, validators: Validators, knownTotal: Int64?) {
            self.path = path
            self.validators = validators
            self.knownTotal = knownTotal
        }

        /// Bytes in the part file now (of all parts, when segmented).
        var length: Int64 { board?.withBoard(\.bytesOnDisk) ?? file?.length ?? startLength }

        /// Whether the attempt left more of the same version than it found. A restart never counts
        /// (it can only succeed by completing), or a server that ignores ranges and drops every
        /// connection would be retried forever.
        var grew: Bool { !restarted && length > startLength }

        mutating func open() throws(PartFile.Failure) -> PartFile {
            if let file { return file }
            let opened = try PartFile(path: path, owner: owner, adoptsUnmarked: hasBytes)
            file = opened
            return opened
        }
    }

    /// Waiting for disk space when the part file's file system is under its floor, or when
    /// `needs` more bytes (the rest of a file of known size) would not fit above it; nil when
    /// they fit, nothing more is needed, or the free space cannot be told.
    func spaceShortage(needs: Int64, sizeKnown: Bool) async -> Outcome? {
        guard Self.claims(needs: needs, sizeKnown: sizeKnown), var reading = DiskWatch.reading(near: order.partPath, floor: floor) else { return nil }
        reading.promised = await claimSpace(sizeKnown ? needs : nil, reading)
        return Self.shortage(reading, needs: needs, sizeKnown: sizeKnown)
    }

    /// Whether an attempt that will write `needs` more bytes (`sizeKnown`) claims room and looks at
    /// the free space: not when the known rest is nothing.
    static func claims(needs: Int64, sizeKnown: Bool) -> Bool {
        !sizeKnown || needs > 0
    }

    /// How the attempt waits for room, by `reading` (with what the others promised): nil when the
    /// known rest fits and the floor is free.
    static func shortage(_ reading: DiskReading, needs: Int64, sizeKnown: Bool) -> Outcome? {
        if sizeKnown, !reading.fits(needs) { return .noSpace(.cannotFit(needs: needs), reading: reading) }
        return reading.fits(0) ? nil : .noSpace(.belowFloor, reading: reading)
    }

    /// What an attempt gives the session at its start (`prepare`): its part file's length and the
    /// reading of the file system there (nil when it cannot be read: no room is claimed).
    struct Preparation: Sendable {
        var startLength: Int64
        var reading: DiskReading?
    }

    /// The session's answer to `prepare`.
    struct Prepared: Sendable {
        var basis: SessionStateMachine.ResumeBasis
        /// Why the attempt waits for room instead of sending a request; nil: it goes on.
        var shortage: Outcome?
        /// The first request of a front-to-back fetch, noted in the session; nil when the attempt
        /// waits for room or resumes parts.
        var firstRequest: RequestPlan?
    }

    /// How a failure of the part file ends the attempt: no room waits for it, a file that cannot
    /// be written pauses, anything else fails.
    func outcome(of failure: PartFile.Failure) -> Outcome {
        // Another process writes the file: the download waits and tries again (it may be done by
        // then, and the next attempt starts a file of its own).
        if failure.isBusy { return .retryable(reason: failure.description, retryAfter: nil, progressed: false) }
        // Another download's bytes (found when the file was opened, or replaced): a name of its own.
        if failure.isForeign { return .partFileTaken(path: failure.path, marked: !failure.isUnmarked) }
        if failure.isOutOfSpace {
            return .noSpace(.writeFailed(failure.spaceWords), reading: DiskWatch.reading(near: failure.path, floor: floor))
        }
        return failure.pausesDownload ? .cannotWrite(reason: failure.description) : .fatal(reason: failure.description)
    }

    /// A transient failure; `retryAfter` is the header's text.
    private static func retryable(_ reason: String, retryAfter: String?) -> Outcome {
        .retryable(reason: reason, retryAfter: retryAfter.flatMap { RetryAfter.seconds(from: $0, now: Date()) }, progressed: false)
    }

    // MARK: Front to back

    /// `noted`: the session noted the first request already (`prepare`).
    private func fetch(_ attempt: inout Attempt, plan: RequestPlan, allowSplit: Bool, noted: Bool = false) async throws -> Outcome {
        let validators = attempt.validators
        let knownTotal = attempt.knownTotal
        var plan = plan
        var refetched = false
        var noted = noted
        while true {
            if !noted { await began(.request(plan)) }
            noted = false
            let (stream, head, finalURL) = try await open(range: plan.range, ifRange: plan.ifRange)
            let facts = self.facts(of: head, at: finalURL)
            let (offset, total, disposition): (Int64, Int64?, Disposition)
            /// The part file's length to keep: `offset`, unless an overlap was checked (the body
            /// then starts before the end of the file, with the very bytes that are there).
            var keep: Int64?
            /// The overlap was the only check (no `If-Range`): the row says so.
            var checkedWithoutValidator = false
            switch ResumeRules.decide(plan: plan, response: facts, knownTotal: knownTotal, validators: validators, knownType: attempt.knownType) {
            case .write(let at, let length, let how):
                (offset, total, disposition) = (at, length, how)
            case .refetch(let reason):
                // Never append this body. One fresh request per attempt; a second oddity is an error.
                stream.discard()
                guard !refetched else { return .fatal(reason: reason) }
                refetched = true
                plan = .fresh(discarding: reason)
                continue
            case .retry(let reason, let retryAfter):
                stream.discard()
                return Self.retryable(reason, retryAfter: retryAfter)
            case .fail(let reason):
                stream.discard()
                return .fatal(reason: reason)
            case .verify(let at, let overlap, let length, let validated):
                // Nothing is appended before the bytes just before the end of the part file came
                // again, equal to those on disk: another version of the same length shows there,
                // where `Range: bytes=N-` would have spliced it, without a validator or behind one
                // that hid the change (a cache's own `Date` on a file rewritten within a second).
                guard let same = try await Self.sameAsDisk(stream, path: attempt.path, at: at, count: Int(overlap)) else {
                    stream.discard()
                    return Self.retryable("body ended before the resume could be checked", retryAfter: nil)
                }
                guard same else {
                    stream.discard()
                    let reason = "resource changed (checked by overlap)"
                    guard !refetched else { return .fatal(reason: reason) }
                    refetched = true
                    plan = .fresh(discarding: reason)
                    continue
                }
                (offset, total, disposition) = (at, length, .resumed(from: at + overlap, verified: true))
                keep = at + overlap
                checkedWithoutValidator = !validated
            }
            // Said before the first byte, not by a full disk half-way: nothing is written (a new
            // download leaves no file), and the bytes of a resume stay for when there is room.
            // Bytes past `offset` are freed by the cut below, so they count as room.
            let found = attempt.file?.length ?? attempt.startLength
            if let total, let short = await spaceShortage(needs: total - max(offset, found), sizeKnown: true) {
                stream.discard()
                return short
            }
            // Bytes are thrown away only here, once the replacement is on disk: the new version's
            // first bytes came and were synced in a file of their own, which then takes the part
            // file's name (a connection that drops right after the head of a new version costs
            // nothing, and a crash finds the old bytes or the new ones).
            var replaced = false
            if case .restarted = disposition, attempt.startLength > 0 {
                do {
                    try await replacePartFile(&attempt, with: stream)
                } catch {
                    stream.cancel()
                    throw error
                }
                // Parts kept until now (`restartWhole`) are gone with the old file.
                attempt.board = nil
                replaced = true
            }
            let file: PartFile
            do {
                file = try attempt.open()
                if case .restarted = disposition { attempt.restarted = true }
                // A replaced file holds the body's first bytes, which the stream writes again at 0.
                if !replaced, file.length != keep ?? offset { try progress.truncate(file, to: keep ?? offset) }
            } catch {
                stream.discard()
                throw error
            }
            progress.bytesOnDisk.store(keep ?? offset, ordering: .relaxed)
            var info = info(head, finalURL: finalURL, facts: facts, total: total, disposition: disposition)
            info.checkedByOverlap = checkedWithoutValidator
            await responded(info)
            // The version's validators decide a split: a resume's are those stored with its first
            // answer (a tester's file changed within the second of its first answer was resumed by
            // overlap, split on the resume's answer, and its parts, unverifiable, thrown away at the
            // next resume: 13.9 MiB of an unchanged file).
            let version: Validators = if case .resumed = disposition { validators } else { info.validators }
            if allowSplit, let total, let parts = await splitIfWorthIt(head: head, facts: facts, version: version, info: info, offset: offset, total: total) {
                do {
                    try file.truncate(to: total)
                } catch {
                    hosts.close(host, count: parts.count - 1)
                    stream.discard()
                    throw error
                }
                let board = SharedBoard(parts)
                board.withBoard { $0.assign(part: 0, to: 0) }
                attempt.board = board
                progress.board = board
                let context = PartsContext(
                    descriptor: file.descriptor, path: file.path, board: board, validators: info.validators, total: total,
                    startBytes: offset, respondedAlready: true, knownType: info.contentType
                )
                return try await runParts(&attempt, file: file, context: context, first: stream, extraConnections: parts.count - 1)
            }
            // A 206's body ends where its Content-Range does, whatever comes after (a tester: a
            // chunked or closed 206 carried 500 bytes past its range, and they were written).
            let end = facts.status == 206 ? facts.contentRange.flatMap(ContentRange.init)?.range.map { $0.upperBound + 1 } : nil
            return try await writeFrontToBack(stream, into: file, from: offset, total: total, end: end, progressed: attempt.grew)
        }
    }

    /// Bytes of a new version synced before the old ones go (a body shorter than this: all of it).
    static let restartProofBytes = 16 * 1024

    /// Puts the first bytes of `stream` (a new version, from zero) in place of the part file,
    /// durably; the stream still writes them, at 0, when it is written out.
    private func replacePartFile(_ attempt: inout Attempt, with stream: any ResponseBody) async throws {
        let first = try await stream.early(Self.restartProofBytes)
        // The descriptor open now is the old file's; the next `open()` finds the new one.
        attempt.file?.close()
        attempt.file = nil
        try await progress.replace(attempt.path, with: first, owner: owner)
    }

    /// Streams a body accepted at `offset` into the file, up to the total or a 206's `end`, then
    /// decides how the attempt ended.
    private func writeFrontToBack(
        _ stream: any ResponseBody, into file: PartFile, from offset: Int64, total: Int64?, end: Int64?, progressed: @autoclosure () -> Bool
    ) async throws -> Outcome {
        do {
            defer { file.wrote(upTo: stream.position ?? offset) }
            let limit = [total, end].compactMap { $0 }.min()
            _ = try await stream.write(into: .prefix(descriptor: file.descriptor, path: file.path, position: offset, total: limit))
        }
        // A 206 without a length (`bytes N-E/*`) still promised its range (a tester's ended early
        // and was reported completed, exit 0).
        if let promised = total ?? end, file.length < promised {
            // A body that ended short of the total (a partial 206, a close the client did not flag)
            // is never success: keep the prefix and resume from it.
            return .retryable(
                reason: "body ended at \(Format.bytesApart(file.length, promised))",
                retryAfter: nil, progressed: progressed()
            )
        }
        // On a thread of its own: a sync of much dirty data must not hold a cooperative thread.
        if syncOnCompletion {
            await written(file.length)
            try await FileSync.syncOrThrow(file)
        }
        return await verified(file.path)
    }

    /// The parts to split the rest of the file into, committed, with the extra connections opened;
    /// nil when the file is fetched front to back: one connection asked for, no room on the host,
    /// a server that does not say it does ranges, no validator for `If-Range`, or too little left.
    /// `version`: the validators of the version on disk, which the parts' `If-Range` carries.
    private func splitIfWorthIt(
        head: HTTPResponseHead, facts: ResponseFacts, version: Validators, info: SessionStateMachine.ResponseInfo, offset: Int64, total: Int64
    ) async -> [Segment]? {
        let connections = order.options.connections
        guard connections > 1, version.ifRange != nil, info.validators.ifRange != nil, total - offset >= 2 * Segments.minimumPart else { return nil }
        let ranges = facts.status == 206 || head.headers[canonicalForm: "Accept-Ranges"].contains { $0.lowercased() == "bytes" }
        guard ranges else { return nil }
        let wanted = Segments.partCount(remaining: total - offset, connections: connections)
        let extra = hosts.openExtra(host, upTo: wanted - 1, cap: connections)
        guard extra > 0 else { return nil }
        let parts = Segments.split(offset: offset, total: total, count: extra + 1)
        guard await split(parts) else {
            hosts.close(host, count: extra)
            return nil
        }
        return parts
    }

    // MARK: Parts

    /// What every connection of a segmented attempt shares.
    private struct PartsContext: Sendable {
        var descriptor: Int32
        var path: String
        var board: SharedBoard
        var validators: Validators
        var total: Int64
        /// Bytes of all parts when the attempt began (what a resume kept).
        var startBytes: Int64
        var respondedAlready: Bool
        /// The media type of the response that started the bytes.
        var knownType: String?
    }

    /// How one connection of a segmented attempt ended.
    private enum ConnectionEnd: Sendable {
        /// No work left it could take.
        case idle
        case failed(Outcome)
        /// The resource changed: the whole file starts over, with `fresh` (a 200 carrying the new
        /// version, its head already read) when there is one.
        case restart(reason: String, fresh: (any ResponseBody)?)
    }

    /// Resumes a segmented file: every part with bytes left, each request with `If-Range`. Parts
    /// whose validators cannot go in `If-Range` (a queue of an earlier haul: a date it cannot read;
    /// a version changed within its second that was split all the same) are checked by 64 KiB of
    /// overlap instead, as one connection's resume is: their bytes are never thrown away unchecked.
    private func resumeParts(_ attempt: inout Attempt, _ basis: SessionStateMachine.ResumeBasis) async throws -> Outcome {
        guard let total = basis.knownTotal, Segments.isValid(basis.segments, total: total) else {
            return try await restartWhole(&attempt, reason: "stored parts cannot be checked", fresh: nil)
        }
        let board = SharedBoard(basis.segments)
        let startBytes = board.withBoard(\.bytesOnDisk)
        // As before a first byte: the parts' missing bytes must fit (the holes take no room yet),
        // or the download waits for room with its parts kept, rather than filling the disk half-way.
        if let short = await spaceShortage(needs: total - startBytes, sizeKnown: true) {
            return short
        }
        let file = try attempt.open()
        if file.length != total { try file.truncate(to: total) }
        attempt.startLength = startBytes
        attempt.board = board
        progress.board = board
        progress.bytesOnDisk.store(startBytes, ordering: .relaxed)
        let left = board.withBoard { $0.parts.filter { $0.next < $0.end }.count }
        await began(.parts(count: left, kept: startBytes, ifRange: basis.validators.ifRange))
        switch try await checkKeptBytes(board: board, path: file.path, basis: basis, total: total) {
        case .idle:
            break
        case .restart(let reason, let fresh):
            return try await restartWhole(&attempt, reason: reason, fresh: fresh)
        case .failed(let outcome):
            return outcome
        }
        let connections = max(1, order.options.connections)
        let extra = hosts.openExtra(host, upTo: connections - 1, cap: connections)
        let context = PartsContext(
            descriptor: file.descriptor, path: file.path, board: board, validators: basis.validators, total: total,
            startBytes: startBytes, respondedAlready: false, knownType: basis.contentType
        )
        return try await runParts(&attempt, file: file, context: context, first: nil, extraConnections: extra)
    }

    /// Runs `1 + extraConnections` connections over the parts until none is left or one fails the
    /// file; the first connection starts with `first`, a response already streaming part 0.
    private func runParts(_ attempt: inout Attempt, file: PartFile, context: PartsContext, first: (any ResponseBody)?, extraConnections: Int) async throws -> Outcome {
        let responded = Once()
        if context.respondedAlready { _ = responded.claim() }
        var restart: (reason: String, fresh: (any ResponseBody)?)?
        var stop: Outcome?
        var failure: Outcome?
        await withTaskGroup(of: ConnectionEnd.self) { group in
            for index in 0...extraConnections {
                let stream = index == 0 ? first : nil
                group.addTask { await self.connection(index, first: stream, context: context, responded: responded) }
            }
            for await end in group {
                switch end {
                case .idle:
                    continue
                case .restart(let reason, let fresh):
                    // One restart is enough: another connection's new version is dropped.
                    if restart == nil { restart = (reason, fresh) } else { fresh?.discard() }
                    group.cancelAll()
                case .failed(let outcome):
                    switch outcome {
                    case .fatal, .cannotWrite, .noSpace:
                        if stop == nil { stop = outcome }
                        group.cancelAll()
                    default:
                        if failure == nil { failure = outcome }
                    }
                }
            }
        }
        hosts.close(host, count: extraConnections)
        progress.connections.store(1, ordering: .relaxed)
        if Task.isCancelled || stop != nil {
            // A new version nobody will write must not hold its connection.
            restart?.fresh?.discard()
            return stop ?? .stopped
        }
        if let restart {
            return try await restartWhole(&attempt, reason: restart.reason, fresh: restart.fresh)
        }
        if context.board.withBoard(\.isComplete) {
            if syncOnCompletion {
                await written(context.total)
                try await FileSync.syncOrThrow(file)
            }
            return await verified(file.path)
        }
        if case .retryable(let reason, let retryAfter, _) = failure {
            return .retryable(reason: reason, retryAfter: retryAfter, progressed: attempt.grew)
        }
        if case .protocolError(let reason) = failure {
            // The server's fault, said as such; an attempt that grew is progress and waits anew.
            return attempt.grew ? .retryable(reason: reason, retryAfter: nil, progressed: true) : .protocolError(reason: reason)
        }
        let left = context.total - context.board.withBoard(\.bytesOnDisk)
        return .retryable(reason: "connections ended with \(Format.bytes(left)) left", retryAfter: nil, progressed: attempt.grew)
    }

    /// Asks for the 4 KiB before the end of the longest part written (`ResumeRules.checkLength`,
    /// with `If-Range`; 64 KiB without one, `ResumeRules.overlapLength`) and compares them with the
    /// disk before any part is appended to, as a resume of one connection does: a validator can
    /// hide a change (a tester's nginx served two files of one size and date behind a redirect that
    /// changed between two resumes, under one ETag: the parts of both were completed as one file,
    /// "verified with If-Range", exit 0). `idle`: the same bytes (or none kept to compare);
    /// `restart`: another version.
    private func checkKeptBytes(board: SharedBoard, path: String, basis: SessionStateMachine.ResumeBasis, total: Int64) async throws -> ConnectionEnd {
        let longest = board.withBoard { board in board.parts.max { $0.next - $0.start < $1.next - $1.start } }
        guard let longest, longest.next > longest.start else { return .idle }
        let window = basis.validators.ifRange == nil ? ResumeRules.overlapLength : ResumeRules.checkLength
        let count = min(window, longest.next - longest.start)
        let from = longest.next - count
        let (stream, head, finalURL) = try await open(range: from...(longest.next - 1), ifRange: basis.validators.ifRange)
        let facts = self.facts(of: head, at: finalURL)
        let kept = board.withBoard(\.bytesOnDisk)
        let decision = ResumeRules.decidePart(from: from, response: facts, total: total, validators: basis.validators, knownType: basis.contentType, kept: kept)
        if let end = Self.end(of: decision, stream) { return end }
        let same = try await Self.sameAsDisk(stream, path: path, at: from, count: Int(count))
        stream.discard()
        guard let same else { return .failed(Self.retryable("body ended before the resume could be checked", retryAfter: nil)) }
        return same ? .idle : .restart(reason: "resource changed (checked by overlap)", fresh: nil)
    }

    /// Whether the first `count` bytes of `stream` are the part file's at `offset`; nil when the
    /// body ends before them. The stream keeps them, and writes them again when it is written out.
    private static func sameAsDisk(_ stream: any ResponseBody, path: String, at offset: Int64, count: Int) async throws -> Bool? {
        let received: [UInt8]
        do {
            received = try await stream.early(count)
        } catch {
            stream.cancel()
            throw error
        }
        guard received.count == count else { return nil }
        return PartFile.bytes(of: path, at: offset, count: count) == received
    }

    /// How a part's answer ends its connection, its stream discarded unless it carries the new
    /// version; nil for `write`.
    private static func end(of decision: PartDecision, _ stream: any ResponseBody) -> ConnectionEnd? {
        switch decision {
        case .write:
            return nil
        case .restart(let reason, let freshBody):
            if freshBody { return .restart(reason: reason, fresh: stream) }
            stream.discard()
            return .restart(reason: reason, fresh: nil)
        case .retry(let reason, let retryAfter):
            stream.discard()
            return .failed(retryable(reason, retryAfter: retryAfter))
        case .fail(let reason):
            stream.discard()
            return .failed(.fatal(reason: reason))
        }
    }

    /// One connection: its first response (if any), then one part after another (taking half of the
    /// largest remainder when no part is free) until nothing is worth a request.
    private func connection(_ index: Int, first: (any ResponseBody)?, context: PartsContext, responded: Once) async -> ConnectionEnd {
        let board = context.board
        if index > 0 { progress.connections.add(1, ordering: .relaxed) }
        defer { if index > 0 { progress.connections.subtract(1, ordering: .relaxed) } }
        if let first {
            let from = board.withBoard { $0.parts.first?.next ?? 0 }
            defer { board.withBoard { $0.release(part: 0) } }
            do {
                _ = try await first.write(into: .part(descriptor: context.descriptor, path: context.path, board: board, part: 0, position: from))
            } catch {
                return ended(by: error)
            }
        }
        while !Task.isCancelled, let claim = board.withBoard({ $0.claim(for: index) }) {
            // However this part ends, its unwritten reservation goes back before the next claim.
            defer { board.withBoard { $0.release(part: claim.part) } }
            let opened: (any ResponseBody, HTTPResponseHead, URL)
            do {
                opened = try await open(range: claim.from...(claim.to - 1), ifRange: context.validators.ifRange)
            } catch {
                return ended(by: error)
            }
            let (stream, head, finalURL) = opened
            do {
                let facts = self.facts(of: head, at: finalURL)
                let kept = board.withBoard(\.bytesOnDisk)
                let decision = ResumeRules.decidePart(
                    from: claim.from, response: facts, total: context.total, validators: context.validators, knownType: context.knownType, kept: kept
                )
                if let end = Self.end(of: decision, stream) { return end }
                if responded.claim() {
                    // Parts with no byte written yet resume nothing (a tester's row said `resumed at 0 B`).
                    let disposition: Disposition = context.startBytes > 0 ? .resumed(from: context.startBytes, verified: true) : .fresh
                    await self.responded(info(head, finalURL: finalURL, facts: facts, total: context.total, disposition: disposition))
                }
                _ = try await stream.write(into: .part(descriptor: context.descriptor, path: context.path, board: board, part: claim.part, position: claim.from))
                if (stream.position ?? claim.from) == claim.from {
                    // A response without a byte would be asked for again and again.
                    return .failed(.retryable(reason: "server sent no bytes of a part", retryAfter: nil, progressed: false))
                }
            } catch {
                stream.cancel()
                return ended(by: error)
            }
        }
        return .idle
    }

    private func ended(by error: any Error) -> ConnectionEnd {
        if let failure = error as? PartFile.Failure { return .failed(outcome(of: failure)) }
        if Task.isCancelled { return .idle }
        return .failed(classify(error, progressed: false))
    }

    /// Throws the parts away and fetches the file again from zero, front to back: with `fresh`, the
    /// 200 that already carries the new version, else with a new request.
    private func restartWhole(_ attempt: inout Attempt, reason: String, fresh: (any ResponseBody)?) async throws -> Outcome {
        // The store forgets the parts before the file loses them; no record of written parts may
        // come after it (they are read from the board).
        progress.board = nil
        guard let fresh else {
            // Nothing goes before a new version's first bytes are synced in the part file's place,
            // which the new request's 200 does (`fetch`, as for one connection); until then the
            // parts stay, in the file and in the store. A tester's server answered one part with a
            // 416 (or a 206 at another offset), then 503s: every part was emptied at once, 5 MiB.
            // The board stays the attempt's account of the bytes until the replacement.
            attempt.startLength = try attempt.file.map(\.length) ?? PartFile.existingLength(attempt.path)
            return try await fetch(&attempt, plan: .fresh(discarding: reason), allowSplit: false)
        }
        do {
            // The parts stay until the new version's first bytes are synced in their place (the
            // store's parts then claim more than the file holds: a crash in between starts over).
            try await replacePartFile(&attempt, with: fresh)
        } catch {
            fresh.cancel()
            throw error
        }
        await discardVersion()
        attempt.board = nil
        attempt.restarted = true
        let file: PartFile
        do {
            file = try attempt.open()
        } catch {
            fresh.discard()
            throw error
        }
        // Already read: this returns at once.
        let (head, finalURL) = try await fresh.head()
        let facts = self.facts(of: head, at: finalURL ?? order.url)
        await responded(info(head, finalURL: finalURL, facts: facts, total: facts.contentLength, disposition: .restarted(reason: reason)))
        return try await writeFrontToBack(fresh, into: file, from: 0, total: facts.contentLength, end: nil, progressed: false)
    }

    /// Completed, unless the file misses the checksum it was asked to have: then it fails and the
    /// bytes stay in the part file.
    private func verified(_ path: String) async -> Outcome {
        guard let checksum = order.options.checksum else { return .completed }
        if let mismatch = await FileDigest.mismatch(path, checksum) { return .fatal(reason: mismatch) }
        return .completed
    }

    /// The response to a GET of the URL as requested (resumes too, never a redirect target of an
    /// earlier attempt) asking for `range`, once it is not a redirect; and the URL that answered.
    ///
    /// Redirects are followed here, each hop with the same range and validator, and each checked
    /// (`Redirects.decide`): a refused hop fails the download with its reason.
    private func open(range: ClosedRange<Int64>?, ifRange: String?) async throws -> (any ResponseBody, HTTPResponseHead, URL) {
        var url = order.url
        var visited = [url]
        while true {
            let (stream, head, answered) = try await response(to: url, range: range, ifRange: ifRange)
            let decision = Redirects.decide(
                status: Int(head.status.code), location: head.headers.first(name: "Location"), from: url, visited: visited,
                allowDowngrade: allowDowngrade
            )
            switch decision {
            case .answer:
                // The URL as sent: without `user:pass@`.
                return (stream, head, answered ?? url)
            case .follow(let target):
                stream.discard()
                url = target
                visited.append(target)
            case .refuse(let reason):
                stream.discard()
                throw Refused(reason: reason)
            }
        }
    }

    /// A request haul does not send (a redirect it does not follow, a target the client would send
    /// otherwise than written): the download fails with the reason.
    struct Refused: Error {
        var reason: String
    }

    /// A GET of `url` asking for `range`. Credentials (`user:pass@`, `Authorization` and `Cookie`
    /// headers) go only to the origin of the URL as requested, never to where it redirects.
    ///
    /// With `setsTarget`, the client gets `RequestTarget.placeholder(for: url)` and the exact target
    /// goes in `X-Haul-Target` for the bridge, which puts it in the request line; the `Host` header
    /// is the URL's own.
    func request(_ url: URL, range: ClosedRange<Int64>?, ifRange: String?, setsTarget: Bool = false) throws -> HTTPClient.Request {
        var headers = requestHeaders(url, range: range, ifRange: ifRange)
        let sent = Self.withoutCredentials(url)
        guard setsTarget else { return try HTTPClient.Request(url: sent.absoluteString, method: .GET, headers: headers) }
        guard let placeholder = RequestTarget.placeholder(for: sent) else { throw Refused(reason: "cannot request \(url.redactingPassword): its target cannot be sent as written") }
        headers.add(name: RequestForwarder.targetHeader, value: RequestTarget.expected(sent))
        if !headers.contains(name: "Host") { headers.add(name: "Host", value: RequestTarget.authority(sent)) }
        return try HTTPClient.Request(url: placeholder.absoluteString, method: .GET, headers: headers)
    }

    /// The headers of a GET of `url` (a direct request writes them itself: no client's request,
    /// which parses the URL again, is made for it).
    func requestHeaders(_ url: URL, range: ClosedRange<Int64>?, ifRange: String?) -> HTTPHeaders {
        let sameOrigin = Redirects.sameOrigin(url, order.url)
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: userAgent)
        for field in order.options.headers {
            let name = field.name.lowercased()
            if !sameOrigin, name == "authorization" || name == "cookie" { continue }
            // Only haul sets the target a bridge sends.
            if name == RequestForwarder.targetHeader.lowercased() { continue }
            if name == "user-agent" {
                headers.replaceOrAdd(name: field.name, value: field.value)
            } else {
                headers.add(name: field.name, value: field.value)
            }
        }
        if sameOrigin, !headers.contains(name: "Authorization"), let user = order.url.user(percentEncoded: false) {
            // Like curl: `user:pass@` in the URL is sent as Basic credentials, to its origin only
            // (a redirect to another path of that origin included).
            let credentials = "\(user):\(order.url.password(percentEncoded: false) ?? "")"
            headers.add(name: "Authorization", value: "Basic " + Data(credentials.utf8).base64EncodedString())
        }
        // Ranges count bytes of the representation: a compressed one would make offsets meaningless.
        headers.add(name: "Accept-Encoding", value: "identity")
        if let range {
            // An open range (`bytes=N-`) when the upper bound is the largest value.
            headers.add(name: "Range", value: range.upperBound == .max ? "bytes=\(range.lowerBound)-" : "bytes=\(range.lowerBound)-\(range.upperBound)")
            if let ifRange { headers.add(name: "If-Range", value: ifRange) }
        }
        return headers
    }

    /// `url` without its `user:pass@` (sent as a header, never in the request line).
    static func withoutCredentials(_ url: URL) -> URL {
        guard url.user != nil, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        components.user = nil
        components.password = nil
        return components.url ?? url
    }

    /// What the resume rules look at in the answer to a request for `url`.
    ///
    /// Whether credentials went with the request decides what a 401 says: those of the URL as
    /// requested go only to its origin (see `request`).
    private func facts(of head: HTTPResponseHead, at url: URL) -> ResponseFacts {
        var facts = Self.facts(of: head)
        facts.sentCredentials = Redirects.sameOrigin(url, order.url)
            && (order.url.user != nil || order.options.headers.contains { $0.name.lowercased() == "authorization" })
        // Plain http goes to the proxy in absolute form: its own error page comes back the same way
        // (https answers come through the tunnel, from the server).
        if url.scheme?.lowercased() == "http", let proxy = clients.proxy(for: url) {
            facts.source = ResponseSource.of(headers: head.headers.map { ($0.name, $0.value) }, proxy: proxy.description)
            facts.sentProxyCredentials = proxy.user != nil
        }
        return facts
    }

    private static func facts(of head: HTTPResponseHead) -> ResponseFacts {
        let headers = head.headers
        return ResponseFacts(
            status: Int(head.status.code),
            reasonPhrase: head.status.reasonPhrase,
            contentLength: headers.first(name: "Content-Length").flatMap { Int64($0.trimmingWhitespace()) },
            contentRange: headers.first(name: "Content-Range"),
            etag: headers.first(name: "ETag").map(Self.trimmed),
            lastModified: headers.first(name: "Last-Modified").map(Self.trimmed),
            retryAfter: headers.first(name: "Retry-After"),
            authenticate: headers.first(name: head.status.code == 407 ? "Proxy-Authenticate" : "WWW-Authenticate"),
            contentType: headers.first(name: "Content-Type"),
            date: headers.first(name: "Date"),
            transferEncoding: headers.contains(name: "Transfer-Encoding") ? headers[canonicalForm: "Transfer-Encoding"].joined(separator: ",") : nil
        )
    }

    private func info(_ head: HTTPResponseHead, finalURL: URL?, facts: ResponseFacts, total: Int64?, disposition: Disposition) -> SessionStateMachine.ResponseInfo {
        let proposed = head.headers.first(name: "Content-Disposition").flatMap(ContentDisposition.fileName(from:))
        return .init(
            status: facts.status,
            total: total,
            validators: Validators(
                etag: facts.etag, lastModified: facts.lastModified,
                recentlyChanged: Validators.changedRecently(lastModified: facts.lastModified, date: facts.date, now: Date())
            ),
            finalURL: finalURL,
            serverFileName: proposed.flatMap(FileNaming.sanitize),
            disposition: disposition,
            contentType: facts.mediaType
        )
    }

    /// A stored validator is sent back in `If-Range`, where a newline would make the request invalid.
    ///
    /// A value without control characters (every validator a server sends) is only trimmed: the
    /// filter and the characters it rebuilt cost 14,000 instructions a response (callgrind).
    static func trimmed(_ value: String) -> String {
        guard value.unicodeScalars.contains(where: TerminalText.isControl) else { return value.trimmingWhitespace() }
        return String(value.unicodeScalars.filter { !TerminalText.isControl($0) }.map(Character.init)).trimmingWhitespace()
    }
}

extension RequestPlan {
    /// The `Range` this plan asks for (open-ended), nil for the whole resource.
    var range: ClosedRange<Int64>? {
        rangeStart.map { $0...Int64.max }
    }

    var ifRange: String? {
        if case .resume(_, let ifRange) = self { return ifRange }
        return nil
    }
}

/// True for exactly one caller.
final class Once: Sendable {
    private let taken = Atomic<Bool>(false)

    func claim() -> Bool {
        !taken.exchange(true, ordering: .relaxed)
    }
}
