import Synchronization

/// One limit on the bytes per second of every transfer of a session together (`--limit-rate`).
///
/// A virtual-time bucket: each chunk reserves its share of the rate after the chunks before it,
/// and the caller sleeps until its share comes due (a quarter second of burst is allowed). No
/// actor hop; one lock per chunk.
final class RateLimiter: Sendable {
    let bytesPerSecond: Double
    private let burst: Double = 0.25
    /// When the bytes reserved so far will have been "sent" at the rate, in seconds on `clock`.
    private let due = Mutex<Double>(0)
    private let clock = ContinuousClock()
    private let origin: ContinuousClock.Instant

    init(bytesPerSecond: Int64) {
        self.bytesPerSecond = Double(max(1, bytesPerSecond))
        origin = clock.now
    }

    /// How long the caller must wait after receiving `bytes` to stay within the rate.
    func reserve(_ bytes: Int) -> Duration {
        let elapsed = origin.duration(to: clock.now)
        let now = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let wait = due.withLock { due -> Double in
            due = max(due, now - burst) + Double(bytes) / bytesPerSecond
            return due - now
        }
        return wait > 0.001 ? .milliseconds(Int64(wait * 1000)) : .zero
    }
}
