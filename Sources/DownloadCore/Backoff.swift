/// Exponential backoff with jitter, and `Retry-After` as a floor.
public struct Backoff: Sendable, Hashable {
    /// Delay before the first retry, in seconds.
    public var initial: Double
    /// Longest delay, in seconds.
    public var cap: Double
    /// Spread of the jitter: 0.25 means ±25 %.
    public var spread: Double

    public init(initial: Double = 1, cap: Double = 60, spread: Double = 0.25) {
        self.initial = initial
        self.cap = cap
        self.spread = spread
    }

    public static let standard = Backoff()

    /// The longest `Retry-After` honoured, in seconds: a server asking for a day still gets a retry
    /// within the hour, and the row keeps counting down meanwhile.
    public static let longestRetryAfter: Double = 3600

    /// Seconds to wait after `failures` failures in a row (1 for the first), with `jitter` in 0..<1.
    public func delay(failures: Int, retryAfter: Double?, jitter: Double) -> Double {
        let exponent = Double(max(0, min(failures - 1, 30)))
        let base = min(cap, initial * pow2(exponent))
        let jittered = min(cap, base * (1 - spread + 2 * spread * jitter))
        return max(jittered, min(retryAfter ?? 0, Self.longestRetryAfter))
    }

    private func pow2(_ exponent: Double) -> Double {
        var value = 1.0
        for _ in 0..<Int(exponent) { value *= 2 }
        return value
    }
}
