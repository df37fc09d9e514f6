import Foundation

/// Where a download may go: the checks of a destination that look at the disk, shared by the
/// command line and the control socket so both refuse the same paths in the same words.
///
/// The only I/O in DownloadCore, and only reads plus one probe file removed at once.
public enum LocalDirectory {
    /// Why new files cannot be made in the directory at `path`, in one line; nil when they can.
    public static func problem(_ path: String) -> String? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return "directory does not exist: \(path)"
        }
        guard isDirectory.boolValue else { return "not a directory: \(path)" }
        guard access(path, W_OK | X_OK) == 0 else { return "directory is not writable: \(path)" }
        // access() says yes to root everywhere; creating a file is the real test (removed at once).
        let probe = (path as NSString).appendingPathComponent(".haul-write-test-\(getpid())")
        let fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 || errno == EEXIST else {
            let code = errno
            // A file system that makes no files by name (`/proc`) says ENOENT: no file is missing.
            let why = code == ENOENT ? "no file can be made there" : String(cString: strerror(code))
            return "directory is not writable: \(path) (\(why))"
        }
        if fd >= 0 {
            close(fd)
            unlink(probe)
        }
        return nil
    }

    /// Why `path` (absolute) cannot be a download's own file (`-o`), in one line naming `option`;
    /// nil when it can. Refused before anything is queued or sent.
    public static func outputProblem(_ path: String, option: String) -> String? {
        guard !path.hasSuffix("/") else { return "\(option) names a file, not a directory: \(path)" }
        // No file system takes a longer name.
        let nameBytes = ((path as NSString).lastPathComponent).utf8.count
        guard nameBytes <= FileNaming.maxFileNameBytes else {
            return "\(option): the file name is \(nameBytes) bytes long; a name has at most \(FileNaming.maxFileNameBytes)"
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            return "\(option) names a directory: \(path)"
        }
        // A device, FIFO or socket would be replaced by a file (a tester's FIFO and `mknod` node
        // were; `-o /dev/null` as root would have replaced it). A symbolic link is replaced, as a file is.
        var info = stat()
        if lstat(path, &info) == 0, info.st_mode & S_IFMT != S_IFREG, info.st_mode & S_IFMT != S_IFLNK {
            return "\(option) names a device, FIFO or socket, not a file haul may replace: \(path)"
        }
        let parent = (path as NSString).deletingLastPathComponent
        return problem(parent.isEmpty ? "/" : parent)
    }
}
