#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The directory that holds a queue: `queue.sqlite`, `haul.log` and the lock, mode 0700.
public struct StateDirectory: Sendable {
    public let path: String

    /// An error about the state directory, for one line on stderr.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Where the queue lives: `--state`, else `$HAUL_STATE_DIR`, else `$XDG_STATE_HOME/haul`, else
    /// `~/.local/state/haul`.
    public static func resolve(option: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(Failure) -> String {
        if let option, !option.isEmpty { return option }
        if let explicit = environment["HAUL_STATE_DIR"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return xdg + "/haul" }
        guard let home = environment["HOME"], !home.isEmpty else {
            throw Failure(description: "cannot find a state directory: set --state, HAUL_STATE_DIR or HOME")
        }
        return home + "/.local/state/haul"
    }

    /// Why `path` cannot be a state directory, found without changing anything: it is a file, or
    /// one of its parents is. Nil when it is a directory or can be made one. Every command says
    /// this first (before, `list` said `no downloads` of a file, and `start` pointed at a log
    /// inside it).
    public static func problem(at path: String) -> String? {
        var info = stat()
        if stat(path, &info) == 0 {
            return info.st_mode & S_IFMT == S_IFDIR ? nil : "the state directory is not a directory: \(path)"
        }
        return errno == ENOTDIR ? "the state directory cannot be made: part of \(path) is a file, not a directory" : nil
    }

    /// Why the queue at `path` cannot be read, when the directory or its database is there but a
    /// look at it fails otherwise than by not being there (`EIO`: a failing disk, a file system
    /// shut down); nil when both can be looked at or are simply missing. A tester's `haul list`
    /// said `no downloads`, exit 0, of a queue on a file system that had failed.
    public static func unreadable(at path: String) -> Failure? {
        for candidate in [path, path + "/queue.sqlite"] {
            var info = stat()
            guard stat(candidate, &info) != 0 else { continue }
            let code = errno
            if code == ENOENT || code == ENOTDIR { return nil }
            return Failure(description: "cannot read the queue at \(path): \(String(cString: strerror(code)))")
        }
        return nil
    }

    /// Opens the directory, creating it (and its parents) with mode 0700 when missing.
    ///
    /// An existing directory is tightened to 0700 when others could read it: it holds URLs that may
    /// carry tokens.
    public init(creatingAt path: String) throws(Failure) {
        self.path = path
        var info = stat()
        if stat(path, &info) != 0 {
            if let problem = Self.problem(at: path) { throw Failure(description: problem) }
            if let code = Self.makeDirectories(path) {
                throw Failure(description: "cannot create the state directory \(path): \(String(cString: strerror(code)))")
            }
            guard stat(path, &info) == 0 else { throw Failure(description: "cannot create the state directory \(path)") }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw Failure(description: "the state directory is not a directory: \(path)") }
        if info.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 {
            throw Failure(description: "cannot make the state directory private (0700): \(path): \(String(cString: strerror(errno)))")
        }
        guard access(path, W_OK | X_OK) == 0 else { throw Failure(description: "the state directory is not writable: \(path)") }
    }

    /// Opens an existing directory without creating or changing anything (for reading the queue).
    public init(existingAt path: String) throws(Failure) {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw Failure(description: "no queue at \(path)")
        }
        self.path = path
    }

    public var databasePath: String { path + "/queue.sqlite" }
    public var logPath: String { path + "/haul.log" }
    public var lockPath: String { path + "/lock" }

    /// Takes the directory's exclusive lock, held until the returned value is released (or the
    /// process ends, however it ends).
    ///
    /// - Throws: "queue in use by pid N" when another process holds it.
    public func lock() throws(Failure) -> QueueLock {
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot open \(lockPath): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            let holder = Self.readPID(fd)
            close(fd)
            if code == EWOULDBLOCK {
                throw Failure(description: "queue in use by pid \(holder.map(String.init) ?? "unknown") (\(path))")
            }
            throw Failure(description: "cannot lock \(lockPath): \(String(cString: strerror(code)))")
        }
        let text = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        return QueueLock(descriptor: fd)
    }

    /// The pid of the process that holds the lock; nil when none does.
    ///
    /// Asks the kernel who holds the lock (`/proc/locks`, by the lock file's device and inode),
    /// without touching the lock itself: probing it could make a haul starting at that moment fail.
    /// Neither the program's name nor a pid file decides: a haul renamed or copied is found, and
    /// a recycled pid is not taken for one. Where `/proc/locks` cannot be read, the pid the holder
    /// wrote is taken while that process runs.
    public func liveHolder() -> Int32? {
        var info = stat()
        guard stat(lockPath, &info) == 0 else { return nil }
        if let table = Self.wholeFile("/proc/locks") {
            return Self.flockHolder(in: table, device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        }
        let fd = open(lockPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let pid = Self.readPID(fd, attempts: 1), pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return nil }
        return pid
    }

    /// The pid of the `flock` holder of the file `device`/`inode` in the text of `/proc/locks`
    /// (`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`: the device as hex major:minor).
    static func flockHolder(in table: String, device: UInt64, inode: UInt64) -> Int32? {
        let major = ((device >> 8) & 0xFFF) | ((device >> 32) & ~UInt64(0xFFF))
        let minor = (device & 0xFF) | ((device >> 12) & ~UInt64(0xFF))
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            // A waiter's line starts with "->" and shifts the fields: only holders count.
            guard fields.count >= 6, fields[1] == "FLOCK", fields[3] == "WRITE" else { continue }
            let file = fields[5].split(separator: ":")
            guard file.count == 3, UInt64(file[0], radix: 16) == major, UInt64(file[1], radix: 16) == minor,
                  UInt64(file[2]) == inode, let pid = Int32(fields[4]), pid > 0 else { continue }
            return pid
        }
        return nil
    }

    /// The text of a file read to its end: a /proc file says its size is 0, and one read (or a
    /// reader that trusts the size) gets only its first page, where the lock looked for may not be.
    private static func wholeFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func readPID(_ fd: Int32, attempts: Int = 20) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        // The holder writes its pid right after locking: give it a moment.
        for _ in 0..<attempts {
            let count = pread(fd, &buffer, buffer.count, 0)
            if count > 0, let pid = Int32(String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) {
                return pid
            }
            usleep(5_000)
        }
        return nil
    }

    /// `mkdir -p` with mode 0700 for each directory made: nil when `path` is a directory now, else
    /// the `errno` of the step that failed (Foundation's error for a parent that is a file named
    /// none, and said `NSCocoaErrorDomain error 512`).
    private static func makeDirectories(_ path: String) -> Int32? {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + component
            if mkdir(prefix, 0o700) != 0, errno != EEXIST { return errno }
        }
        var info = stat()
        guard stat(path, &info) == 0 else { return errno }
        return info.st_mode & S_IFMT == S_IFDIR ? nil : ENOTDIR
    }
}

/// The exclusive lock on a state directory; released when dropped or when the process ends.
public final class QueueLock: Sendable {
    private let descriptor: Int32

    init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }
}
