import NIOCore
import Synchronization

/// A limit on bytes per second shared by transfers: the session's (`--limit-rate`, every transfer
/// together) or one download's (every connection of it together). The rate can change while
/// transfers run; nil is no limit.
///
/// A virtual-time bucket: each chunk reserves its share of the rate after the chunks before it,
/// and the caller waits until its share comes due (a quarter second of burst is allowed). No actor
/// hop and no lock: the reservation is one compare-and-swap per chunk, and an unlimited limiter
/// costs one atomic load.
final class RateLimiter: Sendable {
    private static let burst: Double = 0.25
    /// Bytes per second as a `Double`'s bits; 0 for no limit.
    private let rateBits: Atomic<UInt64>
    /// When the bytes reserved so far will have been "sent" at the rate, in seconds since
    /// `origin`, as a `Double`'s bits.
    private let due = Atomic<UInt64>(0)
    /// Bumped by every change of the rate: a wait that began before it ends at once (the next
    /// chunk pays at the new rate).
    private let changes = Atomic<UInt64>(0)
    private let origin = ContinuousClock.now

    init(bytesPerSecond: Int64? = nil) {
        rateBits = Atomic(Self.bits(bytesPerSecond))
    }

    /// The rate now, nil for none.
    var bytesPerSecond: Int64? {
        let rate = Double(bitPattern: rateBits.load(ordering: .relaxed))
        guard rate > 0 else { return nil }
        // `Int64.max` as a Double is 2^63, one past what an Int64 holds.
        return rate < 0x1p63 ? Int64(rate) : .max
    }

    /// How many times the rate changed.
    var generation: UInt64 {
        changes.load(ordering: .acquiring)
    }

    /// Sets the rate (nil or 0: none), for the chunks from now on: the debt of the old rate is
    /// forgotten, and waits that began under it end (see `generation`).
    func setRate(_ bytesPerSecond: Int64?) {
        rateBits.store(Self.bits(bytesPerSecond), ordering: .relaxed)
        due.store(now().bitPattern, ordering: .relaxed)
        changes.add(1, ordering: .releasing)
    }

    /// How long the caller must wait after receiving `bytes` to stay within the rate.
    func reserve(_ bytes: Int) -> Duration {
        let rate = Double(bitPattern: rateBits.load(ordering: .relaxed))
        guard rate > 0 else { return .zero }
        let now = now()
        var expected = due.load(ordering: .relaxed)
        var wait: Double
        while true {
            let next = max(Double(bitPattern: expected), now - Self.burst) + Double(bytes) / rate
            wait = next - now
            let (exchanged, found) = due.compareExchange(expected: expected, desired: next.bitPattern, ordering: .relaxed)
            if exchanged { break }
            expected = found
        }
        return wait > 0.001 ? .milliseconds(Int64(wait * 1000)) : .zero
    }

    private func now() -> Double {
        let elapsed = origin.duration(to: .now).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }

    private static func bits(_ bytesPerSecond: Int64?) -> UInt64 {
        guard let bytesPerSecond, bytesPerSecond > 0 else { return 0 }
        return Double(bytesPerSecond).bitPattern
    }
}

/// The limits one transfer obeys: the session's and its download's. A chunk waits for the longer
/// of their waits.
struct Throttle: Sendable {
    let limiters: [RateLimiter]

    init(_ limiters: RateLimiter?...) {
        self.limiters = limiters.compactMap { $0 }
    }

    /// How long to wait after receiving `bytes`.
    func reserve(_ bytes: Int) -> Duration {
        var wait = Duration.zero
        for limiter in limiters { wait = max(wait, limiter.reserve(bytes)) }
        return wait
    }

    /// How long to wait after receiving `bytes` whose read began at the limits' `generation`:
    /// nothing when a limit changed meanwhile. Bytes taken under the old limits are forgotten, as
    /// their debt is: a megabyte spliced at full speed just before a limit of 200 KiB/s came would
    /// otherwise be charged 5 s of it (a loaded test suite measured 82 KiB/s over the 4 s after
    /// such a limit came, the splice charged 4.9 s).
    func reserve(_ bytes: Int, readSince generation: UInt64) -> Duration {
        self.generation == generation ? reserve(bytes) : .zero
    }

    /// Changes whenever any of the limits changes.
    var generation: UInt64 {
        limiters.reduce(0) { $0 &+ $1.generation }
    }

    /// A future that completes after `wait`, or as soon as a limit changes: a transfer held back
    /// by a low limit goes on within `Self.recheck` of the limit being raised or removed.
    func pause(for wait: Duration, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let parts = wait.components
        let nanoseconds = parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000
        // Short waits (most of them) are one timer, as before limits could change.
        guard nanoseconds > Self.recheck.nanoseconds else {
            return loop.scheduleTask(in: .nanoseconds(nanoseconds)) {}.futureResult
        }
        let promise = loop.makePromise(of: Void.self)
        let deadline = NIODeadline.now() + .nanoseconds(nanoseconds)
        let generation = generation
        Self.step(promise, until: deadline, generation: generation, self, on: loop)
        return promise.futureResult
    }

    /// How often a long wait looks whether a limit changed.
    static let recheck = TimeAmount.milliseconds(200)

    private static func step(_ promise: EventLoopPromise<Void>, until deadline: NIODeadline, generation: UInt64, _ throttle: Throttle, on loop: any EventLoop) {
        let left = deadline - NIODeadline.now()
        guard left > .zero, throttle.generation == generation else {
            promise.succeed()
            return
        }
        loop.scheduleTask(in: min(left, recheck)) {
            step(promise, until: deadline, generation: generation, throttle, on: loop)
        }
    }
}
