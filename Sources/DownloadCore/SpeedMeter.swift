/// Speed over a sliding window (about three seconds), from byte counts sampled at monotonic times.
///
/// Only samples where the count changed are kept, and the speed is measured from the first change in
/// the window to the last: a throttled server that sends a burst once a second (nginx `limit_rate`)
/// then reads at its true rate, instead of swinging by a third with where the window happens to cut
/// between bursts. A download quiet for longer than bursts are apart reads what came in the last
/// window, and zero once a whole window passed without a byte (a tester's stalled transfer read
/// 31.9, then 20.6, 12.1, 8.5 KiB/s with an ETA for the 30 s before its stall was noticed: the
/// quiet only stretched the span it was divided by).
public struct SpeedMeter: Sendable, Hashable {
    public var window: Double
    /// How long a transfer may go without a byte before the quiet counts against its speed.
    public var burstGap: Double = 2
    private var samples: [(time: Double, bytes: Int64)] = []
    private var latest: Double?

    public init(window: Double = 3) {
        self.window = window
    }

    /// Records that `bytes` were on disk at `time` (seconds on a monotonic clock).
    public mutating func record(bytes: Int64, at time: Double) {
        if let last = samples.last, bytes < last.bytes {
            // The part file was emptied (a restart): the old samples describe another download.
            samples.removeAll()
        }
        latest = time
        if let last = samples.last, bytes == last.bytes { return }
        samples.append((time, bytes))
        while samples.count > 2, time - samples[1].time >= window {
            samples.removeFirst()
        }
    }

    /// Bytes per second over the window; 0 until two samples lie apart.
    public var bytesPerSecond: Double {
        guard let first = samples.first, let last = samples.last, let latest, last.time > first.time else { return 0 }
        guard latest - last.time > burstGap else { return Double(last.bytes - first.bytes) / (last.time - first.time) }
        // Quiet: what came in the window that ends now. The count at its start is the last sample
        // at or before it (the first one when the window reaches further back).
        let start = latest - window
        guard start < last.time else { return 0 }
        let before = samples.last { $0.time <= start }?.bytes ?? first.bytes
        return Double(last.bytes - before) / window
    }

    public mutating func reset() {
        samples.removeAll()
        latest = nil
    }

    public static func == (lhs: SpeedMeter, rhs: SpeedMeter) -> Bool {
        lhs.window == rhs.window && lhs.latest == rhs.latest && lhs.samples.elementsEqual(rhs.samples) { $0.time == $1.time && $0.bytes == $1.bytes }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(window)
        hasher.combine(samples.count)
    }
}
