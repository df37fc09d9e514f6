/// What a new process makes of a persisted download, given what it finds on disk.
///
/// The bytes on disk are the truth after a crash: what `write(2)` accepted before a `kill -9` is in
/// the page cache and survives, so the part file's real length is where to resume. After a reboot
/// that is no longer true (unsynced pages may be zeros or gone), so only the checkpoint, which was
/// fsync'd before it was written, is trusted; a checkpoint taken without an fsync (`--no-fsync`) is
/// not, and the download starts over.
public enum QueueRecovery {
    /// What to do with one download before the queue runs.
    public struct Plan: Sendable, Hashable {
        /// The download as the new process should see it (bytes, notes).
        public var download: Download
        /// Cut the part file to this length first (after a reboot).
        public var truncateTo: Int64?
        /// The completed part file still waits to be placed at its destination (the process died
        /// between completion and the move).
        public var needsFinalize: Bool
        /// A line for the log about what was found, when anything was off.
        public var note: String?
        /// The file the previous process placed and died before naming in a commit: the owner
        /// records it as placed (`SessionStateMachine.finalized`), which runs what follows a
        /// placement (the `complete` hook).
        public var placed: StampedFile?
        /// With `placed`, the files it placed for the download's other requesters, in their order.
        public var placedExtras: [StampedFile] = []
    }

    /// Reconciles a persisted download with its part file.
    ///
    /// - Parameters:
    ///   - download: the row as loaded; its `bytesOnDisk` is the last fsync'd checkpoint.
    ///   - partLength: the part file's length now, nil when there is none.
    ///   - checkpointBoot: the boot id stored with the checkpoint.
    ///   - checkpointSynced: false when the checkpoint was stored without an fsync (`--no-fsync`).
    ///   - currentBoot: this boot's id (nil when unknown: then no reboot is assumed).
    ///   - destinationFileLength: the length of the file at a `.file` destination, nil when none.
    ///   - placedCandidates: for a completed download with its part file's stamp and neither a
    ///     completed path nor a part file (`placementStamp`), where its placement may have moved
    ///     it, with their stamps: its exact path, or in its directory the files under the names a
    ///     placement tries in turn (`name`, `name.1`, …); and the file it replaces there, if any.
    ///   - extraCandidates: the same for each of its other requesters, in their order (a hard link
    ///     or a copy of the file keeps its stamp).
    public static func plan(
        _ download: Download, partLength: Int64?, checkpointBoot: String?, checkpointSynced: Bool = true,
        currentBoot: String?, destinationFileLength: Int64? = nil, placedCandidates: [StampedFile] = [],
        extraCandidates: [[StampedFile]] = []
    ) -> Plan {
        var download = download
        download.bytesPerSecond = 0
        // Written parts are the page cache's word: good in the boot that wrote them, and only there.
        let written = download.writtenSegments
        download.writtenSegments = []
        let rebooted = checkpointBoot != nil && currentBoot != nil && checkpointBoot != currentBoot
        // The same boot, the file system mounted again since (`BootStamp.current`): its page cache is gone too.
        let lost = currentBoot?.hasSuffix(BootStamp.remounted) == true ? "its file system was mounted again" : "rebooted"
        switch download.state {
        case .cancelled:
            return Plan(download: download, truncateTo: nil, needsFinalize: false, note: nil)
        case .completed:
            guard download.completedPaths.isEmpty else {
                return Plan(download: download, truncateTo: nil, needsFinalize: false, note: nil)
            }
            // The process died after the last byte and before (or while) the file was placed.
            if let partLength, download.totalBytes == nil || partLength == download.totalBytes {
                download.bytesOnDisk = partLength
                return Plan(download: download, truncateTo: nil, needsFinalize: true, note: "placing a completed file the previous process did not")
            }
            // Moved, and the process died before the commit that named the file: the placed file
            // is the one with the part file's stamp (a rename keeps its size and modification time
            // to the nanosecond), never one that merely has its name and length.
            if let partStamp = placementStamp(download) {
                if isAmbiguous(download, stamp: partStamp, primary: placedCandidates, extras: extraCandidates) {
                    return unplaced(download, reason: "the file it placed before the previous process ended cannot be told from another file (the same size and modification time)")
                }
                if let (placed, extras) = placedFiles(download, stamp: partStamp, primary: placedCandidates, extras: extraCandidates) {
                    let also = extras.isEmpty ? "" : " (and for its other requesters at \(extras.map(\.path).joined(separator: ", ")))"
                    return Plan(
                        download: download, truncateTo: nil, needsFinalize: false,
                        note: "found the file the previous process placed at \(placed.path)\(also)", placed: placed, placedExtras: extras
                    )
                }
            } else if case .file(let path) = download.destination, let length = destinationFileLength,
                      download.totalBytes == nil || length == download.totalBytes {
                // A row from before part files were stamped: its exact path, by its length.
                download.completedPaths = [path]
                return Plan(download: download, truncateTo: nil, needsFinalize: false, note: nil)
            }
            return unplaced(download, reason: "completed file was not placed before the previous process ended")
        case .queued, .downloading, .waiting, .waitingForSpace, .paused, .failed:
            break
        }
        if rebooted && !checkpointSynced && (partLength ?? 0 > 0 || download.bytesOnDisk > 0 || !download.segments.isEmpty) {
            // Nothing of the file was fsync'd: any of it may be zeros now. Starting over empties it.
            download.segments = []
            return startOver(download, reason: "\(lost), and the part file was never synced (--no-fsync)", truncateTo: partLength == nil ? nil : 0)
        }
        if !download.segments.isEmpty {
            let sameBoot = currentBoot != nil && checkpointBoot == currentBoot
            if sameBoot, !written.isEmpty, Segments.isValid(written, total: download.totalBytes),
               Segments.bytesOnDisk(written) > Segments.bytesOnDisk(download.segments) {
                var ahead = download
                ahead.segments = written
                let plan = segmented(ahead, partLength: partLength)
                if plan.note == nil { return plan }
            }
            return segmented(download, partLength: partLength)
        }
        guard let partLength else {
            guard download.bytesOnDisk > 0 else {
                return Plan(download: download, truncateTo: nil, needsFinalize: false, note: nil)
            }
            return startOver(download, reason: "part file was missing")
        }
        if rebooted && partLength > download.bytesOnDisk {
            let checkpoint = download.bytesOnDisk
            download.lastError = "\(lost): resuming from the last synced checkpoint at \(Format.bytes(checkpoint))"
            return Plan(download: download, truncateTo: checkpoint, needsFinalize: false, note: download.lastError)
        }
        download.bytesOnDisk = partLength
        return Plan(download: download, truncateTo: nil, needsFinalize: false, note: nil)
    }

    /// A completed download whose placed file is not known: fetched again from zero.
    private static func unplaced(_ download: Download, reason: String) -> Plan {
        var download = download
        download.state = .queued
        // The finished part file's stamp goes with it: nothing of that file is left to know.
        download.completedStamps = []
        return startOver(download, reason: reason)
    }

    /// The plan of a download whose placed file another download's plan found too (`contested`):
    /// the two files cannot be told apart, and neither is taken.
    public static func contestedPlan(_ download: Download) -> Plan {
        unplaced(download, reason: "the file it placed before the previous process ended cannot be told from another download's (the same size and modification time)")
    }

    /// The candidates of a placement recovery (see `plan`) without the files other downloads are
    /// known to have been placed as (`held`): a file with the part file's stamp there is theirs
    /// (a tester's recovery took another row's file of the same size and time, and its bytes were
    /// then replaced).
    public static func unheld(_ candidates: [StampedFile], held: Set<String>) -> [StampedFile] {
        candidates.filter { !held.contains($0.path) }
    }

    /// The downloads among `plans` whose found file (`placed`, `placedExtras`) another plan found
    /// too: files of one size written in one tick of the clock share their stamps, and which is
    /// whose cannot be known.
    public static func contested(_ plans: [Plan]) -> Set<DownloadID> {
        var finders: [String: [DownloadID]] = [:]
        for plan in plans {
            guard let placed = plan.placed else { continue }
            for path in Set(([placed] + plan.placedExtras).map(\.path)) { finders[path, default: []].append(plan.download.id) }
        }
        return Set(finders.values.filter { $0.count > 1 }.flatMap { $0 })
    }

    /// The finished part file's stamp, when recovery should look for the files `download`'s
    /// placement made: it is completed, holds that stamp and no completed path.
    public static func placementStamp(_ download: Download) -> FileStamp? {
        guard download.state == .completed, download.completedPaths.isEmpty, download.completedStamps.count == 1 else { return nil }
        return download.completedStamps[0]
    }

    /// Whether more files have the part file's `stamp` where `download`'s requesters' files may be
    /// than it has requesters there: files of one size written in one tick of the coarse clock
    /// share a stamp, and a person's file may be one (a tester's recovery took a person's file of
    /// the same size and moment for the download's, and reported it completed). Requesters whose
    /// files may be at the same names (one directory) are counted together.
    private static func isAmbiguous(_ download: Download, stamp: FileStamp, primary: [StampedFile], extras: [[StampedFile]]) -> Bool {
        let lists = [primary] + Array(extras.prefix(download.extraDestinations.count))
        var requesters: [Set<StampedFile>: Int] = [:]
        for list in lists { requesters[Set(list), default: 0] += 1 }
        return requesters.contains { files, count in files.filter { $0.stamp == stamp }.count > count }
    }

    /// The file of every requester of `download`, each a different file with the part file's
    /// `stamp` among its candidates; nil unless every one is found (the download then starts
    /// over, as it would have: a file of a requester is never left unplaced).
    private static func placedFiles(
        _ download: Download, stamp: FileStamp, primary: [StampedFile], extras: [[StampedFile]]
    ) -> (StampedFile, [StampedFile])? {
        guard let placed = primary.first(where: { $0.stamp == stamp }), extras.count >= download.extraDestinations.count else { return nil }
        var taken: Set<String> = [placed.path]
        var found: [StampedFile] = []
        for candidates in extras.prefix(download.extraDestinations.count) {
            // Two requesters in one directory each have a file of their own (a link, or a copy).
            guard let file = candidates.first(where: { $0.stamp == stamp && !taken.contains($0.path) }) else { return nil }
            taken.insert(file.path)
            found.append(file)
        }
        return (placed, found)
    }

    /// A segmented part file has holes, so its length proves nothing: the parts stored (fsync'd before
    /// they were) are the truth, in this boot and after a reboot alike, and in this boot the parts
    /// recorded as written are ahead of them. Bytes written after the last record are fetched again;
    /// parts that claim bytes the file cannot hold are not trusted.
    private static func segmented(_ download: Download, partLength: Int64?) -> Plan {
        var download = download
        let parts = download.segments
        // Starting over empties the file: its holes must never pass for a prefix.
        let emptied = partLength == nil ? nil : Int64(0)
        guard Segments.isValid(parts, total: download.totalBytes) else {
            download.segments = []
            return startOver(download, reason: "stored parts did not describe the file", truncateTo: emptied)
        }
        let claimed = parts.filter { $0.done > 0 }.map(\.next).max() ?? 0
        guard let partLength, partLength >= claimed else {
            download.segments = []
            return startOver(download, reason: partLength == nil ? "part file was missing" : "part file shorter than its parts", truncateTo: emptied)
        }
        download.bytesOnDisk = Segments.bytesOnDisk(parts)
        return Plan(download: download, truncateTo: nil, needsFinalize: false, note: nil)
    }

    private static func startOver(_ download: Download, reason: String, truncateTo: Int64? = nil) -> Plan {
        var download = download
        download.bytesOnDisk = 0
        download.forgetResume()
        download.restartCount += 1
        download.restartReason = reason
        download.lastError = "\(reason): starting over from zero"
        return Plan(download: download, truncateTo: truncateTo, needsFinalize: false, note: download.lastError)
    }
}
