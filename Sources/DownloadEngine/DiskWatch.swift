import DownloadCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads the file systems downloads write to: free space, size, the floor there, and which file
/// system it is.
public enum DiskWatch {
    /// The file system that holds `path`, a file that may not exist yet (its directory is read);
    /// nil when it cannot be read (the directory is gone) or counts no room.
    public static func reading(near path: String, floor: SpaceFloor) -> DiskReading? {
        reading(directory: directory(of: path), floor: floor)
    }

    /// The file system that holds `directory`.
    public static func reading(directory: String, floor: SpaceFloor) -> DiskReading? {
        var info = statvfs()
        var status = stat()
        guard statvfs(directory, &info) == 0, stat(directory, &status) == 0 else { return nil }
        // A file system that counts no blocks (ramfs, some FUSE ones) says nothing of its room: no
        // floor applies there (a tester's download into ramfs waited for room forever).
        guard info.f_blocks > 0 else { return nil }
        let free = bytes(UInt64(info.f_bavail), times: UInt64(info.f_frsize))
        let capacity = bytes(UInt64(info.f_blocks), times: UInt64(info.f_frsize))
        return DiskReading(free: free, capacity: capacity, floor: floor.bytes(capacity: capacity), filesystem: UInt64(status.st_dev))
    }

    /// The reading of each download's part file, one look per directory.
    ///
    /// A path in the directory of the one before it (the usual queue) takes that reading without a
    /// lookup: a check looks at every download of the queue, ten times a second while a thousand
    /// small files finish.
    static func readings(_ paths: [(DownloadID, String)], floor: SpaceFloor) -> [DownloadID: DiskReading] {
        var byDirectory: [String: DiskReading?] = [:]
        var readings: [DownloadID: DiskReading] = [:]
        readings.reserveCapacity(paths.count)
        var previous: (directory: String, reading: DiskReading?)?
        for (id, path) in paths {
            let directory = directory(of: path)
            let reading: DiskReading?
            if let previous, previous.directory == directory {
                reading = previous.reading
            } else {
                if byDirectory[directory] == nil { byDirectory[directory] = .some(self.reading(directory: directory, floor: floor)) }
                reading = byDirectory[directory] ?? nil
                previous = (directory, reading)
            }
            if let reading { readings[id] = reading }
        }
        return readings
    }

    /// The directory part of `path` (`.` for a bare name).
    ///
    /// Looked for in the UTF-8 bytes: a space check takes the directory of every download in the
    /// queue, and `lastIndex(of:)` over characters cost 5,300 instructions a path (callgrind).
    public static func directory(of path: String) -> String {
        let bytes = path.utf8
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == bytes.startIndex ? "/" : String(path[..<slash])
    }

    private static func bytes(_ count: UInt64, times size: UInt64) -> Int64 {
        let (product, overflow) = count.multipliedReportingOverflow(by: size)
        return overflow || product > UInt64(Int64.max) ? .max : Int64(product)
    }
}
