#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSplice
import DownloadCore

/// Putting a finished file where a requester wants it.
enum FilePlacement {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        /// The part file is not the one the transfer wrote and synced: nothing of it may be trusted.
        var partFileChanged = false

        /// Where a write found no room (ENOSPC, EDQUOT), in the row's words: the download waits
        /// for room there (`SessionStateMachine.placementLacksRoom`).
        var noRoom: (path: String, words: String)?

        init(_ operation: String, _ path: String, _ code: Int32) {
            description = "cannot \(operation) \(TerminalText.sanitize(path)): \(String(cString: strerror(code)))"
            if let words = PartFile.Failure.roomWords(code) { noRoom = (path, words) }
            unwritable = code == EROFS || code == EACCES
        }

        /// The placement got past the names `claimed` was built for (`looked`): it is tried again
        /// with more (`SessionStateMachine.widerClaimWindow`).
        var needsMoreClaims = false

        static func moreClaimsNeeded(_ path: String) -> Failure {
            var failure = Failure(description: "cannot find a free name for \(TerminalText.sanitize(path)): the names other downloads hold were not looked at", partFileChanged: false)
            failure.needsMoreClaims = true
            return failure
        }

        /// The files were placed at `placed`, and the sync of `directory` that would make their
        /// names durable failed (`code`): the download fails, saying where its files are.
        static func directoryNotSynced(_ directory: String, _ code: Int32, placed: [String]) -> Failure {
            let paths = placed.map(TerminalText.sanitize).joined(separator: ", ")
            return Failure(
                description: "placed at \(paths), but \(TerminalText.sanitize(directory)) could not be synced (\(String(cString: strerror(code)))): the name may not survive a power cut; a retry fetches the file again",
                partFileChanged: false
            )
        }

        /// A read-only or forbidden destination: the download pauses until a person fixes it (as a
        /// part file that cannot be written does), its file whole.
        var unwritable = false

        private init(description: String, partFileChanged: Bool) {
            self.description = description
            self.partFileChanged = partFileChanged
        }

        /// The file at `path` changed (`change`, in words) after the transfer wrote and synced it.
        static func partFileChanged(_ path: String, _ change: String) -> Failure {
            Failure(
                description: "the part file \(TerminalText.sanitize(path)) changed after haul wrote it (\(change)): another program wrote or replaced it; not placed, and a retry fetches the file again",
                partFileChanged: true
            )
        }

        /// The file at `path` is a part file another download (of this queue or another) marked.
        static func anotherDownloadsPartFile(_ path: String) -> Failure {
            Failure(description: "\(TerminalText.sanitize(path)) is another download's part file: not replaced (its bytes stay, and so do this file's)", partFileChanged: false)
        }
    }

    /// Places `source` at `destination` and returns the path written.
    ///
    /// `.file` replaces what is there (atomically, by rename); `.directory` never overwrites: it takes
    /// `name`, else `name.1`, `name.2` … (the candidate `first` before them all), claiming the name
    /// with `link(2)` so that no other process can take it between the check and the write. With
    /// `move` the source goes away; otherwise the requester gets a hard link, or a copy where links
    /// are impossible.
    /// Names in `claimed` (another download's part file or exact destination) are passed over;
    /// `claimed` holds those of the attempts `first` and `0..<looked` (`claimedNames`), and a
    /// placement that gets past them throws `needsMoreClaims`, having changed nothing.
    static func place(
        _ source: String, at destination: Destination, name: String, first: Int = 0, claimed: Set<String> = [],
        looked: Int = FileNaming.placementAttempts, move: Bool
    ) throws(Failure) -> String {
        switch destination {
        case .file(let path):
            // `-o` names whatever the person wants replaced, but never another download's bytes
            // between writes (another queue's paused part file: it would resume from this file).
            if PartFileOwner.mark(path: path) != nil { throw .anotherDownloadsPartFile(path) }
            if move {
                guard rename(source, path) == 0 else { throw Failure("move the file to", path, errno) }
                return path
            }
            let temporary = temporary(beside: path, "haul-tmp")
            try linkOrCopy(source, to: temporary)
            guard rename(temporary, path) == 0 else {
                let code = errno
                unlink(temporary)
                throw Failure("move the file to", path, code)
            }
            return path
        case .directory(let directory):
            // A move renames without replacing, in one step (a `link` and an `unlink` cost the
            // directory two changes: 5 % of the CPU samples of a thousand small files). Where that
            // fails for another reason than a taken name, the way below (a link, else a copy) is
            // taken and words any error.
            var renames = move
            for attempt in attempts(first: first) {
                let candidate = join(directory, FileNaming.candidate(name, attempt: attempt))
                if attempt != first, attempt >= looked { throw .moreClaimsNeeded(candidate) }
                if claimed.contains(candidate) { continue }
                if renames {
                    if DirectoryLock.change(candidate, { haul_rename_noreplace(source, candidate) }) == 0 { return candidate }
                    if errno == EEXIST { continue }
                    renames = false
                }
                if DirectoryLock.change(candidate, { link(source, candidate) }) == 0 {
                    // The data keeps its new name: a quick removal, which may take the lock.
                    if move { DirectoryLock.change(source) { _ = unlink(source) } }
                    return candidate
                }
                let code = errno
                if code == EEXIST { continue }
                guard code == EPERM || code == EXDEV || code == EMLINK || code == ENOTSUP else {
                    throw Failure("create", candidate, code)
                }
                // No hard links here: a copy, made beside the name and synced, then given the name
                // without replacing anything. Copied under the name itself, a kill -9 half-way left a
                // truncated file there, passed over by the next placement for good (a tester).
                guard try copyIn(source, as: candidate) else { continue }
                // The source's last name: its blocks are freed, never under the directory's lock.
                if move { unlink(source) }
                return candidate
            }
            throw Failure("find a free name for", join(directory, name), EEXIST)
        }
    }

    /// The file at `destination` with the source's `stamp` (a link to it, or a copy haul made,
    /// which keeps its size and modification time), other than those in `besides`; nil when none.
    ///
    /// Only when it is the one file there with that stamp: files of one size written in one tick
    /// of the coarse clock share a stamp, and another download's copies, made by a process that
    /// died with this one's, may be there too (a tester's requester took another URL's copy so).
    /// With two, a new one is made.
    static func earlierPlacement(of stamp: FileStamp, at destination: Destination, name: String, besides: Set<String>) -> String? {
        let found = candidates(at: destination, name: name).filter { $0.stamp == stamp && !besides.contains($0.path) }
        return found.count == 1 ? found[0].path : nil
    }

    /// Where a placement at `destination` may have put a file, with the stamps found there: its
    /// exact path, or in its directory the names a placement of `name` tries (`candidates(in:)`).
    static func candidates(at destination: Destination, name: String, first: Int = 0) -> [StampedFile] {
        switch destination {
        case .file(let path):
            FileSync.stamp(path).map { [StampedFile(path: path, stamp: $0)] } ?? []
        case .directory(let directory):
            candidates(in: directory, name: name, first: first)
        }
    }

    /// The candidates of a name in the order a placement tries them: `first`, then from `name` on.
    private static func attempts(first: Int) -> UnfoldSequence<Int, Int> {
        // The state -1 stands for `first`; then 0, 1 … without it, up to 10,000 names.
        sequence(state: -1) { next in
            if next == -1 {
                next = 0
                return first
            }
            if next == first { next += 1 }
            guard next < FileNaming.placementAttempts else { return nil }
            defer { next += 1 }
            return next
        }
    }

    private static func linkOrCopy(_ source: String, to path: String) throws(Failure) {
        if DirectoryLock.change(path, { link(source, path) }) == 0 { return }
        guard try copy(source, toNew: path) else { throw Failure("create", path, EEXIST) }
    }

    /// A name beside `path` for a file on its way there: `NAME.KIND-` and eight random hex digits,
    /// shortened like a part file's name when `path` uses all of NAME_MAX. Made exclusively by the
    /// caller: never a file that is there. A fixed name, removed first, deleted a person's file of
    /// that name, and two placements of one name at once each removed the other's (a tester: one
    /// requester was handed the other URL's bytes, exit 0).
    private static func temporary(beside path: String, _ kind: String) -> String {
        SessionStateMachine.partPath(ofFile: path, suffix: ".\(kind)-" + String(UInt32.random(in: .min ... .max) | 1 << 31, radix: 16))
    }

    /// Copies `source` into a new file at `path` by way of a temporary file beside it
    /// (`temporary(beside:)`); false when `path` already exists.
    private static func copyIn(_ source: String, as path: String) throws(Failure) -> Bool {
        let temporary = temporary(beside: path, "haul-copy")
        guard try copy(source, toNew: temporary) else { throw Failure("create", temporary, EEXIST) }
        if DirectoryLock.change(path, { haul_rename_noreplace(temporary, path) }) == 0 { return true }
        var code = errno
        // A file system without renames that keep what is there: a link, else (none either) a
        // rename once nothing is there.
        if code != EEXIST {
            if DirectoryLock.change(path, { link(temporary, path) }) == 0 {
                unlink(temporary)
                return true
            }
            code = errno
            if code != EEXIST, access(path, F_OK) != 0, errno == ENOENT {
                if DirectoryLock.change(path, { rename(temporary, path) }) == 0 { return true }
                code = errno
            }
        }
        unlink(temporary)
        if code == EEXIST { return false }
        throw Failure("create", path, code)
    }

    /// Copies `source` into a new file at `path`; false when `path` already exists.
    private static func copy(_ source: String, toNew path: String) throws(Failure) -> Bool {
        let input = open(source, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard input >= 0 else { throw Failure("read", source, errno) }
        defer { close(input) }
        let output = DirectoryLock.change(path) { open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        if output < 0 {
            if errno == EEXIST { return false }
            throw Failure("create", path, errno)
        }
        defer { close(output) }
        // 256 KiB at a time: copies of 1 MiB at a time took several times as long (see
        // `DirectStream.spliceSize`).
        let size = 256 << 10
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(input, buffer, size)
            if count == 0 {
                // The source's times, as a link would have them: the copy keeps the part file's
                // stamp, by which a recovery knows it (`QueueRecovery`).
                var status = stat()
                if fstat(input, &status) == 0 {
                    var times = [status.st_atim, status.st_mtim]
                    _ = futimens(output, &times)
                }
                // On stable storage before any commit names it, as the part file was.
                guard fsync(output) == 0 else {
                    let code = errno
                    unlink(path)
                    throw Failure("write", path, code)
                }
                return true
            }
            if count < 0 {
                if errno == EINTR { continue }
                let code = errno
                unlink(path)
                throw Failure("read", source, code)
            }
            var done = 0
            while done < count {
                let written = write(output, buffer + done, count - done)
                if written < 0 {
                    if errno == EINTR { continue }
                    let code = errno
                    unlink(path)
                    throw Failure("write", path, code)
                }
                done += written
            }
        }
    }

    /// The files in `directory` under the names a placement of `name` tries in turn (the candidate
    /// `first`, then `name`, `name.1`, …), with their stamps, in that order: where a file moved
    /// there is (see `QueueRecovery.plan`), even when a person removed a file it was placed beside.
    /// Every such name in the directory: a placement passes over names other downloads hold,
    /// free on disk, so a file may be far past the last name taken before it (a tester's recovery
    /// looked no further than eight free names in a row, and fetched a placed file again).
    static func candidates(in directory: String, name: String, first: Int = 0) -> [StampedFile] {
        guard let listing = opendir(directory) else { return [] }
        var taken: [Int] = []
        while let entry = readdir(listing) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let attempt = FileNaming.attempt(ofName: entryName, for: name) { taken.append(attempt) }
        }
        closedir(listing)
        let ordered = taken.filter { $0 == first } + taken.filter { $0 != first }.sorted()
        return ordered.compactMap { attempt in
            let path = join(directory, FileNaming.candidate(name, attempt: attempt))
            return FileSync.stamp(path).map { StampedFile(path: path, stamp: $0) }
        }
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
