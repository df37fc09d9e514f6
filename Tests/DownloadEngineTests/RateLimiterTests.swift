@testable import DownloadEngine
import Testing

/// The limits' bucket, without I/O: what a chunk is charged, and when a change of limit forgets it.
@Suite struct RateLimiterTests {
    static func seconds(_ duration: Duration) -> Double {
        duration / .seconds(1)
    }

    /// The largest rate reads back without trapping (`Int64.max` as a Double is 2^63, past an
    /// Int64): a control socket client's `Int64.max` crashed the runner before it was refused.
    @Test func theLargestRateReadsBackWithoutTrapping() {
        let limiter = RateLimiter(bytesPerSecond: .max)
        #expect(limiter.bytesPerSecond == .max)
        #expect(limiter.reserve(1 << 20) == .zero)
        limiter.setRate(1 << 50)
        #expect(limiter.bytesPerSecond == 1 << 50)
    }

    @Test func aChunkWaitsItsShareOfTheRateAfterTheChunksBeforeIt() {
        let limiter = RateLimiter(bytesPerSecond: 100_000)
        limiter.setRate(100_000)
        let throttle = Throttle(limiter)
        // 50,000 bytes at 100,000 a second: half a second each, the second after the first.
        let first = Self.seconds(throttle.reserve(50_000))
        let second = Self.seconds(throttle.reserve(50_000))
        #expect(abs(first - 0.5) < 0.05, "\(first)")
        #expect(abs(second - 1.0) < 0.05, "\(second)")
        #expect(Throttle().reserve(1 << 30) == .zero, "no limit, no wait")
    }

    @Test func bytesReadBeforeTheLimitChangedAreNotChargedToTheNewOne() {
        let limiter = RateLimiter()
        let throttle = Throttle(limiter)
        // A megabyte read at full speed while the limit came: nothing to wait, nothing reserved.
        let readSince = throttle.generation
        limiter.setRate(200 * 1024)
        #expect(throttle.reserve(1 << 20, readSince: readSince) == .zero)
        // The next chunk, read under the new limit, pays for itself only (about 0.32 s, not 5.3).
        let next = Self.seconds(throttle.reserve(64 << 10, readSince: throttle.generation))
        #expect(next > 0.25 && next < 0.4, "\(next)")

        // Either limit of a transfer's two changing forgets the chunk.
        let own = RateLimiter(bytesPerSecond: 100_000)
        let both = Throttle(RateLimiter(bytesPerSecond: 100_000), own)
        let before = both.generation
        own.setRate(50_000)
        #expect(both.reserve(100_000, readSince: before) == .zero)
        #expect(Self.seconds(both.reserve(100_000, readSince: both.generation)) > 1.5, "the new limit holds the next chunk")
    }
}
