/// Speed over a sliding window (about three seconds), from byte counts sampled at monotonic times.
///
/// Only samples where the count changed are kept, and the speed is measured from the first change in
/// the window to the last: a throttled server that sends a burst once a second (nginx `limit_rate`)
/// then reads at its true rate, instead of swinging by a third with where the window happens to cut
/// between bursts. A download that stops receiving falls towards zero once it has been quiet for
/// longer than bursts are apart.
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
        let quiet = latest - last.time
        let span = quiet > burstGap ? latest - first.time : last.time - first.time
        return Double(last.bytes - first.bytes) / span
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
