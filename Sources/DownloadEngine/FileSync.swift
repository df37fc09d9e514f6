#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSplice
import DownloadCore
import Foundation

/// fsync and other blocking file work, on threads of their own.
///
/// A sync can take a long time when much data is dirty; it must never occupy one of the cooperative
/// pool's few threads (two on this machine), where transfers and the session run. The threads are
/// kept ones of our own, not a Dispatch queue, which let few jobs run at once on two cores: on a
/// journaled ext4, where syncs that run side by side share the journal's commit, a thousand small
/// files finishing sixteen at a time had their fsyncs run 1.06 at a time on average there (strace),
/// 1.57 here, and took 0.73 s with two of these threads against 0.59 s (6 runs in turns; the same
/// on a file system without a journal). At most 255 run at once: jobs stuck on a file
/// system that hangs (about one per download there) leave the others room, and a purge of a
/// thousand files does not start a thousand threads.
enum FileSync {
    private static let threads = BlockingThreads(name: "haul-files", idleTime: 10, limit: 255)

    /// Flushes the file at `path` to stable storage; false when it does not exist or the sync failed.
    ///
    /// Any descriptor of a file flushes all of its data, so this needs no access to the writer's.
    static func sync(_ path: String) async -> Bool {
        await run { syncNow(path) }
    }

    /// Flushes every file of `paths` in one pass (the syncs run side by side, so the file system's
    /// journal commits them together); each result says whether that file's sync succeeded.
    static func syncAll(_ paths: [String]) async -> [Bool] {
        guard paths.count > 1 else { return paths.isEmpty ? [] : [await sync(paths[0])] }
        return await withCheckedContinuation { continuation in
            let results = SyncResults(count: paths.count)
            for (index, path) in paths.enumerated() {
                threads.run {
                    if let values = results.set(index, syncNow(path)) { continuation.resume(returning: values) }
                }
            }
        }
    }

    /// Runs blocking `work` on the file-work threads.
    static func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            threads.run { continuation.resume(returning: work()) }
        }
    }

    /// Flushes the directories holding `paths`, each once: the names given or taken in them are
    /// then durable. A directory that cannot be opened, or whose file system does not sync
    /// directories (`EINVAL`, `ENOTSUP`), is passed over (the file is in place either way; only a
    /// power cut could then take its name back); a sync that failed otherwise (`EIO`: the disk
    /// failed, or the file system was shut down) is returned, the first one: nothing may say
    /// the name is durable (a tester's file was reported completed after its directory's sync
    /// failed, and was back under its part file's name after the power came back).
    ///
    /// Placements that ask at once share a sync (`DirectorySyncs`).
    @discardableResult
    static func syncDirectories(of paths: [String]) -> (directory: String, code: Int32)? {
        var seen: Set<String> = []
        var failed: (directory: String, code: Int32)?
        for path in paths {
            let directory = DiskWatch.directory(of: path)
            guard seen.insert(directory).inserted else { continue }
            let code = directorySyncs.sync(directory)
            if code != 0, code != EINVAL, code != ENOTSUP, code != EOPNOTSUPP, failed == nil { failed = (directory, code) }
        }
        return failed
    }

    private static let directorySyncs = DirectorySyncs()

    static func syncNow(_ path: String) -> Bool {
        syncError(path) == 0
    }

    /// Flushes the file at `path`; throws the `errno` of a failed open or sync.
    static func syncOrThrow(_ path: String) async throws(PartFile.Failure) {
        let code = await run { syncError(path) }
        if code != 0 { throw PartFile.Failure(operation: "sync", path: path, code: code) }
    }

    /// Flushes the open file `file` (no open by name: a thousand small files paid an open and a
    /// close each for it); throws the `errno` of a failed sync. `file` stays open meanwhile: the
    /// caller holds it across the call.
    static func syncOrThrow(_ file: PartFile) async throws(PartFile.Failure) {
        let descriptor = file.descriptor
        let code = await run { fsync(descriptor) == 0 ? 0 : errno }
        if code != 0 { throw PartFile.Failure(operation: "sync", path: file.path, code: code) }
    }

    /// 0, or the `errno` of the failed open or sync.
    private static func syncError(_ path: String) -> Int32 {
        // Not blocked by a FIFO a person left at the name (a tester's hung every later start).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return fsync(fd) == 0 ? 0 : errno
    }

    /// The length of the file at `path`, nil when there is none.
    static func length(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    /// The size and modification time of the file at `path`, nil when there is none.
    static func stamp(_ path: String) -> FileStamp? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return stamp(of: info)
    }

    /// The size and modification time `info` (a `stat` or `fstat`) gives.
    static func stamp(of info: stat) -> FileStamp {
        #if canImport(Darwin)
        let modified = info.st_mtimespec
        #else
        let modified = info.st_mtim
        #endif
        return FileStamp(size: Int64(info.st_size), modified: Int64(modified.tv_sec) * 1_000_000_000 + Int64(modified.tv_nsec))
    }

    /// Removes the part file at `path`, unless another process is writing it (it holds the file's
    /// lock) or another download than `owner` marked it (`PartFileOwner`): a cancel or a purge
    /// deletes its download's bytes, never another's of a part file of the same name in the same
    /// directory (another queue's, or kept bytes of one removed). False when it was left.
    ///
    /// `onlyMarked`: only a file carrying `owner`'s mark is removed (the download has no bytes of its
    /// own, so an unmarked file there is not its own).
    @discardableResult
    static func removePart(_ path: String, owner: String?, onlyMarked: Bool = false) -> Bool {
        switch PartFile.holding(path, owner: owner, { fd in
            if onlyMarked, owner == nil || PartFileOwner.mark(fd: fd, path: path) != owner { return false }
            return unlink(path) == 0
        }) {
        case .done(let removed): removed
        case .busy, .foreign: false
        case .unopened(let code): code == ENOENT
        }
    }

    /// Cuts the file at `path` to `length` bytes, unless another process is writing it (it holds
    /// the file's lock, `PartFile`) or another download than `owner` marked it: a queue restored
    /// beside another that keeps a part file of the same name in the same directory must not cut
    /// that file.
    static func cut(_ path: String, to length: Int64, owner: String?) -> Bool {
        guard case .done(let cut) = PartFile.holding(path, flags: O_WRONLY, owner: owner, { ftruncate($0, off_t(length)) == 0 }) else { return false }
        return cut
    }
}

/// This boot's identity, from `/proc/sys/kernel/random/boot_id`: a checkpoint taken in another boot
/// survived a reboot, and only its fsync'd offset can be trusted.
public enum BootID {
    public static func current() -> String? {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).trimmingWhitespace(newlines: true)
        return text.isEmpty ? nil : text
    }
}

/// The results of a sync pass, written from the pass's threads.
private final class SyncResults: @unchecked Sendable {
    // Guarded by `lock`.
    private var stored: [Bool]
    private var remaining: Int
    private let lock = NSLock()

    init(count: Int) {
        stored = Array(repeating: false, count: count)
        remaining = count
    }

    /// Records one sync's result; all of them once it was the last.
    func set(_ index: Int, _ value: Bool) -> [Bool]? {
        lock.withLock {
            stored[index] = value
            remaining -= 1
            return remaining == 0 ? stored : nil
        }
    }
}

/// The mount a path is on (`BootStamp`): its file system's device and the mount's unique id.
public enum MountID {
    /// Nil where the kernel gives no unique mount id (before Linux 6.8) or `path` cannot be read.
    public static func of(_ path: String) -> (device: UInt64, id: UInt64)? {
        var device: UInt64 = 0
        var mount: UInt64 = 0
        guard haul_mount_id(path, &device, &mount) == 0 else { return nil }
        return (device, mount)
    }
}

/// Syncs of directories, shared by those who ask for one at once (a group commit): a caller is
/// answered by the first sync of its directory that starts after it asked, which makes every name
/// given in the directory before then durable. A thousand small files, each moved to its name and
/// its directory synced, made a thousand syncs of one directory, each its own journal commit.
final class DirectorySyncs: Sendable {
    private struct Directory {
        var running = false
        /// When the last sync that ended had started (on `clock`).
        var finished: UInt64 = 0
        /// What it returned.
        var result: Int32 = 0
        /// Callers waiting for a sync.
        var waiting = 0
    }

    private let condition = NSCondition()
    private let perform: @Sendable (String) -> Int32

    /// `perform` syncs a directory and returns 0 or the `errno` of its failed sync (tests give one
    /// that counts and holds).
    init(perform: @escaping @Sendable (String) -> Int32 = DirectorySyncs.fsyncDirectory) {
        self.perform = perform
    }

    /// 0, or the `errno` of a failed sync; 0 too for a directory that cannot be opened.
    static func fsyncDirectory(_ directory: String) -> Int32 {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        return fsync(descriptor) == 0 ? 0 : errno
    }

    /// Counts calls and syncs started, in one order.
    private nonisolated(unsafe) var clock: UInt64 = 0
    private nonisolated(unsafe) var directories: [String: Directory] = [:]

    /// Returns once a sync of `directory` that started after the call has ended: 0, or the
    /// `errno` of the failed sync (of the last one that ended, which started after the call too).
    func sync(_ directory: String) -> Int32 {
        condition.lock()
        defer { condition.unlock() }
        clock += 1
        let asked = clock
        directories[directory, default: Directory()].waiting += 1
        while let state = directories[directory], state.finished < asked {
            guard !state.running else {
                condition.wait()
                continue
            }
            clock += 1
            let started = clock
            directories[directory]?.running = true
            condition.unlock()
            let result = perform(directory)
            condition.lock()
            directories[directory]?.finished = started
            directories[directory]?.result = result
            directories[directory]?.running = false
            condition.broadcast()
        }
        guard var entry = directories[directory] else { return 0 }
        entry.waiting -= 1
        // Forgotten once none waits: a queue writing into many directories keeps no entry each.
        directories[directory] = entry.waiting == 0 && !entry.running ? nil : entry
        return entry.result
    }
}
