import DownloadCore
import Foundation

/// A kind of row the table can be narrowed to (`1` to `5`), in the spirit of Surge's tabs.
public enum RowKind: String, Sendable, Hashable, CaseIterable {
    /// Transferring, or waiting to retry or for disk space.
    case active
    case queued
    case paused
    case failed
    /// Completed or cancelled.
    case done

    /// The key that shows only this kind: `1` to `5`, in this order.
    public var key: Character {
        switch self {
        case .active: "1"
        case .queued: "2"
        case .paused: "3"
        case .failed: "4"
        case .done: "5"
        }
    }

    public func contains(_ state: DownloadState) -> Bool {
        switch state {
        case .downloading, .waiting, .waitingForSpace: self == .active
        case .queued: self == .queued
        case .paused: self == .paused
        case .failed: self == .failed
        case .completed, .cancelled: self == .done
        }
    }
}

/// What the rows on screen are ordered by (`s` goes to the next, `S` reverses).
public enum SortKey: String, Sendable, Hashable, CaseIterable {
    case queue, name, progress, speed, eta, size, state

    /// Whether the natural order puts the largest first (fastest, most done, biggest).
    var descending: Bool {
        switch self {
        case .progress, .speed, .size: true
        case .queue, .name, .eta, .state: false
        }
    }
}

/// The order of the rows on screen; the queue's own order never changes with it.
public struct Sorting: Sendable, Hashable {
    public var key: SortKey
    public var reversed: Bool

    public init(key: SortKey = .queue, reversed: Bool = false) {
        self.key = key
        self.reversed = reversed
    }

    /// Whether the rows go largest first as shown (the column header's mark).
    var descending: Bool { key.descending != reversed }

    /// The message line's words for it (`sorted by speed, fastest first`).
    var words: String {
        switch (key, reversed) {
        case (.queue, false): "in queue order"
        case (.queue, true): "in reverse queue order (the queue's order is unchanged)"
        case (.name, _): "sorted by name, \(reversed ? "Z to A" : "A to Z")"
        case (.progress, _): "sorted by progress, \(reversed ? "least" : "most") done first"
        case (.speed, _): "sorted by speed, \(reversed ? "slowest" : "fastest") first"
        case (.eta, _): "sorted by ETA, \(reversed ? "latest" : "soonest") first"
        case (.size, _): "sorted by size, \(reversed ? "smallest" : "largest") first"
        case (.state, _): "sorted by state\(reversed ? ", reversed" : "")"
        }
    }
}

/// How the queue becomes the rows on screen.
enum RowOrder {
    /// The downloads whose name or URL contains `filter` (ignoring case) and whose state is of
    /// `kind`, ordered by `sorting`; ties keep the queue's order.
    static func rows(_ downloads: [Download], filter: String, kind: RowKind?, sorting: Sorting) -> [Download] {
        var rows = downloads
        if let kind { rows = rows.filter { kind.contains($0.state) } }
        let needle = filter.trimmingCharacters(in: .whitespaces).lowercased()
        if !needle.isEmpty {
            rows = rows.filter { $0.displayName.lowercased().contains(needle) || $0.url.redactingPassword.lowercased().contains(needle) }
        }
        switch sorting.key {
        case .queue:
            return sorting.reversed ? rows.reversed() : rows
        case .name:
            return ordered(rows, sorting) { $0.displayName.lowercased() }
        case .progress:
            return ordered(rows, sorting) { $0.fractionDone }
        case .speed:
            return ordered(rows, sorting) { $0.state == .downloading ? $0.bytesPerSecond : nil }
        case .eta:
            return ordered(rows, sorting) { $0.secondsRemaining }
        case .size:
            return ordered(rows, sorting) { $0.totalBytes }
        case .state:
            return ordered(rows, sorting) { download in Painter.stateOrder.firstIndex(of: download.shownWord) }
        }
    }

    /// `rows` by `key` in the sorting's direction; rows without a key (no speed, unknown size) go
    /// last either way; ties keep the queue's order.
    private static func ordered<Value: Comparable>(_ rows: [Download], _ sorting: Sorting, by key: (Download) -> Value?) -> [Download] {
        let keyed = rows.enumerated().map { (index: $0.offset, key: key($0.element), row: $0.element) }
        let descending = sorting.descending
        return keyed.sorted { left, right in
            switch (left.key, right.key) {
            case (let a?, let b?):
                if a != b { return descending ? a > b : a < b }
            case (.some, nil): return true
            case (nil, .some): return false
            case (nil, nil): break
            }
            return left.index < right.index
        }.map(\.row)
    }
}

/// The help's lines: the key table, then how the mouse works.
enum HelpText {
    static let mouse = (label: "mouse", summary: "a click selects a row, the wheel scrolls (Shift and drag selects text)")

    /// Lines below the help's title.
    static var count: Int { KeyMap.bindings.count + 1 }
}
