/// The identity of one download in a session's queue.
///
/// A plain integer so that the store can use it as a row id later; ids are never reused in one queue.
public struct DownloadID: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: Int64

    public init(rawValue: Int64) {
        self.rawValue = rawValue
    }

    public init(_ rawValue: Int64) {
        self.rawValue = rawValue
    }

    public static func < (lhs: DownloadID, rhs: DownloadID) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    public var description: String { String(rawValue) }
}

/// The identity of one HTTP attempt of one download.
///
/// Every transfer event carries the attempt it came from, so that events of an attempt that was paused,
/// cancelled or replaced ("late events") can be recognised and ignored.
public struct AttemptID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "#\(rawValue)" }
}
