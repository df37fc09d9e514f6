/// Speed over a sliding window (about three seconds), from byte counts sampled at monotonic times.
public struct SpeedMeter: Sendable, Hashable {
    public var window: Double
    private var samples: [(time: Double, bytes: Int64)] = []

    public init(window: Double = 3) {
        self.window = window
    }

    /// Records that `bytes` were on disk at `time` (seconds on a monotonic clock).
    public mutating func record(bytes: Int64, at time: Double) {
        if let last = samples.last, bytes < last.bytes {
            // The part file was emptied (a restart): the old samples describe another download.
            samples.removeAll()
        }
        samples.append((time, bytes))
        while let first = samples.first, time - first.time > window, samples.count > 2 {
            samples.removeFirst()
        }
    }

    /// Bytes per second over the window; 0 until two samples lie apart.
    public var bytesPerSecond: Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time else { return 0 }
        return Double(last.bytes - first.bytes) / (last.time - first.time)
    }

    public mutating func reset() {
        samples.removeAll()
    }

    public static func == (lhs: SpeedMeter, rhs: SpeedMeter) -> Bool {
        lhs.window == rhs.window && lhs.samples.elementsEqual(rhs.samples) { $0.time == $1.time && $0.bytes == $1.bytes }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(window)
        hasher.combine(samples.count)
    }
}
