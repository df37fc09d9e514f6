import Foundation

/// How much room must stay free on a file system downloads write to (`--min-free`, config `min-free`).
///
/// Below it, running downloads stop and wait with their bytes kept, and nothing new starts there:
/// a disk filled to the last block breaks the rest of the machine (logs, the queue's own database,
/// other programs), and a half-written file that cannot finish helps nobody.
public enum SpaceFloor: Sendable, Hashable {
    /// 1 GiB or 1 % of the file system, whichever is smaller.
    case automatic
    case bytes(Int64)

    public static let automaticCap: Int64 = 1 << 30

    /// `2G`, `500M`, `0` (no floor: only a full disk stops downloads) or `auto`.
    public static func parse(_ text: String, what: String) throws(ByteCount.Invalid) -> SpaceFloor {
        let trimmed = text.trimmingWhitespace().lowercased()
        if trimmed == "auto" { return .automatic }
        if trimmed == "0" { return .bytes(0) }
        return .bytes(try ByteCount.parse(text, what: what))
    }

    /// The floor in bytes on a file system of `capacity` bytes.
    public func bytes(capacity: Int64) -> Int64 {
        switch self {
        case .automatic: min(Self.automaticCap, max(0, capacity / 100))
        case .bytes(let count): max(0, count)
        }
    }
}

/// One look at the file system that holds a part file (or the download directory).
public struct DiskReading: Sendable, Hashable, Codable {
    /// Bytes an unprivileged writer may still use.
    public var free: Int64
    /// The file system's size.
    public var capacity: Int64
    /// The floor that applies there (`SpaceFloor.bytes(capacity:)`).
    public var floor: Int64
    /// Which file system (its device number): readings of two directories on one are one disk.
    public var filesystem: UInt64
    /// Of `free`, what running downloads there will still write (the known rest of each): not
    /// room for another download, or two that each fit would fill the disk together.
    public var promised: Int64

    public init(free: Int64, capacity: Int64, floor: Int64, filesystem: UInt64, promised: Int64 = 0) {
        self.free = free
        self.capacity = capacity
        self.floor = floor
        self.filesystem = filesystem
        self.promised = promised
    }

    /// Under the floor: nothing may run or start there.
    public var isLow: Bool { free < floor }

    /// Whether `needs` more bytes fit beside what is promised and leave the floor free.
    public func fits(_ needs: Int64) -> Bool {
        let (total, overflow) = floor.addingReportingOverflow(max(0, needs))
        let (wanted, over) = total.addingReportingOverflow(max(0, promised))
        return !overflow && !over && free >= wanted
    }
}

/// Why a download waits for disk space.
public enum SpaceShortage: Sendable, Hashable {
    /// Free space is under the floor.
    case belowFloor
    /// The rest of the file (`needs` bytes, its size being known) would not fit above the floor.
    case cannotFit(needs: Int64)
    /// A write failed for want of room (ENOSPC, EDQUOT); the words say which.
    case writeFailed(String)

    /// `waiting for disk space (3.1 MiB free, floor 245 KiB)`: the row's words, the same in the
    /// table, the details pane, `haul get` and the JSON.
    public func words(_ reading: DiskReading?) -> String {
        if let reading, reading.floor >= reading.capacity, reading.capacity > 0 {
            return "waiting for disk space (the floor \(Format.bytes(reading.floor)) is more than the file system holds, \(Format.bytes(reading.capacity)): lower --min-free)"
        }
        var facts: [String] = []
        switch self {
        case .belowFloor:
            break
        case .cannotFit(let needs):
            if let reading, !reading.fits(needs), needs > reading.capacity - reading.floor {
                // Never enough, unless the file system grows or the floor goes down: said plainly,
                // the floor too when it is what leaves too little (a tester's 976 KiB on an empty 8
                // MiB file system read as a file larger than the disk).
                if needs <= reading.capacity {
                    return "waiting for disk space (needs \(Format.bytes(needs)); the file system holds \(Format.bytes(reading.capacity)) in all, floor \(Format.bytes(reading.floor)): lower --min-free)"
                }
                return "waiting for disk space (needs \(Format.bytes(needs)); the file system holds \(Format.bytes(reading.capacity)) in all)"
            }
            facts.append("needs \(Format.bytes(needs))")
        case .writeFailed(let what):
            facts.append(what)
        }
        if let reading {
            facts.append("\(Format.bytes(reading.free)) free, floor \(Format.bytes(reading.floor))")
            if reading.promised > 0, case .cannotFit = self {
                facts.append("\(Format.bytes(reading.promised)) of it promised to running downloads")
            }
        }
        return facts.isEmpty ? "waiting for disk space" : "waiting for disk space (\(facts.joined(separator: ", ")))"
    }
}
