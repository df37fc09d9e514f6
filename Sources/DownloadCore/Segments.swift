/// One part of a segmented download: bytes `start..<end` of the resource, of which `start..<next`
/// are in the part file.
///
/// The parts of a download tile the resource: sorted, the first starts at 0, each ends where the
/// next starts, the last ends at the total. A part file of a segmented download has holes, so its
/// length says nothing; only the parts do.
public struct Segment: Sendable, Hashable, Codable, CustomStringConvertible {
    public var start: Int64
    public var next: Int64
    public var end: Int64

    public init(start: Int64, next: Int64, end: Int64) {
        self.start = start
        self.next = next
        self.end = end
    }

    /// Bytes of this part in the part file.
    public var done: Int64 { next - start }
    /// Bytes of this part still to fetch.
    public var remaining: Int64 { end - next }
    public var isComplete: Bool { next >= end }

    /// `start-next-end`, as the store keeps it.
    public var description: String { "\(start)-\(next)-\(end)" }
}

/// Splitting, stealing and storing the parts of a segmented download.
public enum Segments {
    /// No part is made smaller than this: a new connection costs a request and a slow start.
    public static let minimumPart: Int64 = 1 << 20
    /// An idle connection takes half of a running part only when that half is at least this big.
    public static let minimumSteal: Int64 = 256 << 10

    /// Bytes on disk of all parts.
    public static func bytesOnDisk(_ parts: [Segment]) -> Int64 {
        parts.reduce(0) { $0 + $1.done }
    }

    /// Whether `parts` are the same parts as `base`, none behind it and some further along.
    public static func isAhead(_ parts: [Segment], of base: [Segment]) -> Bool {
        guard parts.count == base.count, !parts.isEmpty else { return false }
        for (part, old) in zip(parts, base) {
            guard part.start == old.start, part.end == old.end, part.next >= old.next else { return false }
        }
        return bytesOnDisk(parts) > bytesOnDisk(base)
    }

    /// How many parts `remaining` bytes are worth, at most `connections`.
    public static func partCount(remaining: Int64, connections: Int) -> Int {
        guard remaining > 0 else { return 1 }
        return max(1, min(connections, Int(min(remaining / minimumPart, Int64(Int32.max)))))
    }

    /// The parts of a resource of `total` bytes whose first `offset` bytes are on disk: the first
    /// part holds those bytes and its share of the rest, `count` parts of near-equal remaining work.
    public static func split(offset: Int64, total: Int64, count: Int) -> [Segment] {
        let offset = min(max(0, offset), total)
        let count = max(1, count)
        let remaining = total - offset
        let share = remaining / Int64(count)
        var parts: [Segment] = []
        var start: Int64 = 0
        var boundary = offset
        for index in 0..<count {
            let end = index == count - 1 ? total : boundary + share
            parts.append(Segment(start: start, next: index == 0 ? offset : start, end: end))
            start = end
            boundary = end
        }
        return parts
    }

    /// Whether `parts` tile `0..<total` with consistent offsets.
    public static func isValid(_ parts: [Segment], total: Int64?) -> Bool {
        guard let total, let first = parts.first, let last = parts.last, first.start == 0, last.end == total else { return false }
        for (index, part) in parts.enumerated() {
            guard part.start <= part.next, part.next <= part.end, part.start < part.end || total == 0 else { return false }
            if index > 0, parts[index - 1].end != part.start { return false }
        }
        return true
    }

    /// The same parts with every complete part merged into the one after it, which keeps the list
    /// short: a complete part followed by another is one part whose bytes start where the first did.
    public static func merged(_ parts: [Segment]) -> [Segment] {
        var result: [Segment] = []
        for part in parts {
            if let last = result.last, last.isComplete, last.end == part.start {
                result[result.count - 1] = Segment(start: last.start, next: part.next, end: part.end)
            } else {
                result.append(part)
            }
        }
        return result
    }

    /// `start-next-end` per part, separated by commas.
    public static func encode(_ parts: [Segment]) -> String {
        parts.map(\.description).joined(separator: ",")
    }

    /// The parts `encode` wrote; nil for anything that does not parse.
    public static func decode(_ text: String) -> [Segment]? {
        var parts: [Segment] = []
        for field in text.split(separator: ",") {
            let numbers = field.split(separator: "-", omittingEmptySubsequences: false).compactMap { Int64($0) }
            guard numbers.count == 3 else { return nil }
            parts.append(Segment(start: numbers[0], next: numbers[1], end: numbers[2]))
        }
        return parts
    }
}

/// The live parts of a running segmented attempt: which connection owns which part, and how far each
/// may write. The engine keeps one behind a lock; every decision is here, as a pure value.
///
/// A part's bytes move through three marks: `next` (written), `reserved` (handed to a writer, maybe
/// still in its buffer) and `end`. A connection that runs out of work steals the upper half of the
/// largest unreserved remainder; the owner of that part stops at the new end.
public struct SegmentBoard: Sendable, Hashable {
    public struct Part: Sendable, Hashable {
        public var id: Int
        public var start: Int64
        public var next: Int64
        public var reserved: Int64
        public var end: Int64
        public var owner: Int?
    }

    /// A part handed to a connection: fetch `from..<to`.
    public struct Claim: Sendable, Hashable {
        public var part: Int
        public var from: Int64
        public var to: Int64

        public init(part: Int, from: Int64, to: Int64) {
            self.part = part
            self.from = from
            self.to = to
        }
    }

    public private(set) var parts: [Part]
    private var nextID: Int

    public init(_ segments: [Segment]) {
        parts = segments.enumerated().map { index, segment in
            Part(id: index, start: segment.start, next: segment.next, reserved: segment.next, end: segment.end, owner: nil)
        }
        nextID = segments.count
    }

    /// The parts as they are on disk (written bytes only), merged.
    public var segments: [Segment] {
        Segments.merged(parts.map { Segment(start: $0.start, next: $0.next, end: $0.end) })
    }

    public var isComplete: Bool { parts.allSatisfy { $0.next >= $0.end } }
    public var bytesOnDisk: Int64 { parts.reduce(0) { $0 + ($1.next - $1.start) } }

    /// Gives `part` to `connection` (the first connection keeps the part its response already serves).
    public mutating func assign(part: Int, to connection: Int) {
        guard let index = index(of: part) else { return }
        parts[index].owner = connection
    }

    /// Work for `connection`: the first part with bytes left that nobody owns, else the upper half of
    /// the largest remainder another connection is fetching; nil when nothing is worth a request.
    public mutating func claim(for connection: Int) -> Claim? {
        if let index = parts.firstIndex(where: { $0.owner == nil && $0.reserved < $0.end }) {
            parts[index].owner = connection
            return Claim(part: parts[index].id, from: parts[index].reserved, to: parts[index].end)
        }
        guard let victim = parts.indices.max(by: { parts[$0].end - parts[$0].reserved < parts[$1].end - parts[$1].reserved }) else { return nil }
        let remaining = parts[victim].end - parts[victim].reserved
        guard remaining >= 2 * Segments.minimumSteal else { return nil }
        let middle = parts[victim].reserved + remaining / 2
        let stolen = Part(id: nextID, start: middle, next: middle, reserved: middle, end: parts[victim].end, owner: connection)
        nextID += 1
        parts[victim].end = middle
        parts.insert(stolen, at: victim + 1)
        return Claim(part: stolen.id, from: middle, to: stolen.end)
    }

    /// Up to `count` more bytes for `part`'s writer, who is at `position`: fewer when the part ends
    /// sooner (stolen from, or complete), zero when the writer must stop.
    public mutating func reserve(part: Int, at position: Int64, count: Int64) -> Int64 {
        guard let index = index(of: part), parts[index].reserved == position else { return 0 }
        let granted = max(0, min(count, parts[index].end - position))
        parts[index].reserved += granted
        return granted
    }

    /// `count` reserved bytes of `part` are now in the file.
    public mutating func wrote(part: Int, count: Int64) {
        guard let index = index(of: part) else { return }
        parts[index].next = min(parts[index].reserved, parts[index].next + count)
    }

    /// The writer of `part` stopped; reserved bytes it never wrote go back to the part.
    public mutating func release(part: Int) {
        guard let index = index(of: part) else { return }
        parts[index].owner = nil
        parts[index].reserved = parts[index].next
    }

    /// Where `part` ends now (a steal moves it down).
    public func end(of part: Int) -> Int64? {
        index(of: part).map { parts[$0].end }
    }

    private func index(of part: Int) -> Int? {
        parts.firstIndex { $0.id == part }
    }
}
