import DownloadCore
import Foundation
import Testing

@Suite struct ContentRangeTests {
    @Test func parsesTheThreeForms() {
        #expect(ContentRange("bytes 0-99/1000") == ContentRange(range: 0...99, total: 1000))
        #expect(ContentRange("bytes 5-9/*") == ContentRange(range: 5...9, total: nil))
        #expect(ContentRange("bytes */1000") == ContentRange(range: nil, total: 1000))
        #expect(ContentRange("  Bytes 1-1/2 ") == ContentRange(range: 1...1, total: 2))
    }

    @Test func rejectsNonsense() {
        for value in ["", "bytes", "bytes 9-5/10", "bytes 0-10/10", "bytes */*", "items 0-1/2", "bytes -1-5/10", "bytes 0-1/2/3", "bytes a-b/c"] {
            #expect(ContentRange(value) == nil, "\(value)")
        }
    }
}

@Suite struct RetryAfterTests {
    @Test func secondsAndDates() {
        let now = Date(timeIntervalSince1970: 1_767_225_600)
        #expect(RetryAfter.seconds(from: "120", now: now) == 120)
        #expect(RetryAfter.seconds(from: HTTPDate.format(now.addingTimeInterval(30)), now: now) == 30)
        #expect(RetryAfter.seconds(from: HTTPDate.format(now.addingTimeInterval(-30)), now: now) == 0)
        #expect(RetryAfter.seconds(from: "soon", now: now) == nil)
        #expect(RetryAfter.seconds(from: "-5", now: now) == nil)
    }
}

@Suite struct ContentDispositionTests {
    @Test func plainAndQuotedNames() {
        #expect(ContentDisposition.fileName(from: "attachment; filename=report.pdf") == "report.pdf")
        #expect(ContentDisposition.fileName(from: "attachment; filename=\"a; b.txt\"") == "a; b.txt")
        #expect(ContentDisposition.fileName(from: "attachment; filename=\"say \\\"hi\\\".txt\"") == "say \"hi\".txt")
        #expect(ContentDisposition.fileName(from: "inline") == nil)
    }

    @Test func extendedNamesWin() {
        #expect(ContentDisposition.fileName(from: "attachment; filename=\"fallback.txt\"; filename*=UTF-8''na%C3%AFve%20file.txt") == "naïve file.txt")
        #expect(ContentDisposition.fileName(from: "attachment; filename*=iso-8859-1'en'caf%E9.txt") == "café.txt")
        #expect(ContentDisposition.fileName(from: "attachment; filename*=UTF-8''bad%ZZ; filename=ok.txt") == "ok.txt")
    }
}

@Suite struct FileNamingTests {
    @Test func traversalAndSeparatorsLeaveOnlyTheLastComponent() {
        #expect(FileNaming.sanitize("../../etc/passwd") == "passwd")
        #expect(FileNaming.sanitize("/absolute/path.txt") == "path.txt")
        #expect(FileNaming.sanitize("C:\\Windows\\evil.exe") == "evil.exe")
        #expect(FileNaming.sanitize("..") == nil)
        #expect(FileNaming.sanitize("a/..") == nil)
        #expect(FileNaming.sanitize(".") == nil)
        #expect(FileNaming.sanitize("") == nil)
    }

    @Test func controlCharactersAndEscapesAreRemoved() {
        #expect(FileNaming.sanitize("evil\u{1B}[31mred\u{07}.txt") == "evil[31mred.txt")
        #expect(FileNaming.sanitize("nul\u{0}byte") == "nulbyte")
        #expect(FileNaming.sanitize("bidi\u{202E}txt.exe") == "biditxt.exe")
        #expect(FileNaming.sanitize("  spaced.txt \n") == "spaced.txt")
    }

    @Test func longNamesAreCutOnACharacterBoundaryKeepingTheExtension() throws {
        let long = String(repeating: "é", count: 500) + ".tar.gz"
        let name = try #require(FileNaming.sanitize(long))
        #expect(name.utf8.count <= FileNaming.maxNameBytes)
        #expect(name.hasSuffix(".gz"))
        #expect(name.hasPrefix("éé"))
        let emoji = try #require(FileNaming.sanitize(String(repeating: "👍", count: 300)))
        #expect(emoji.utf8.count <= FileNaming.maxNameBytes)
        #expect(emoji.allSatisfy { $0 == "👍" })
    }

    @Test func namesFromURLs() {
        #expect(FileNaming.name(for: URL(string: "http://h.test/dir/file%20one.iso?x=1")!) == "file one.iso")
        #expect(FileNaming.name(for: URL(string: "http://h.test/")!) == "index.html")
        #expect(FileNaming.name(for: URL(string: "http://h.test")!) == "index.html")
        #expect(FileNaming.name(for: URL(string: "http://h.test/a/%2E%2E")!) == "index.html")
    }

    @Test func candidatesNeverRepeat() {
        #expect((0..<3).map { FileNaming.candidate("f.txt", attempt: $0) } == ["f.txt", "f.txt.1", "f.txt.2"])
    }
}

@Suite struct URLTests {
    @Test func passwordsAreRedacted() {
        #expect(URL(string: "https://bob:secret@h.test/x")!.redactingPassword == "https://bob:***@h.test/x")
        #expect(URL(string: "https://h.test/x")!.redactingPassword == "https://h.test/x")
    }

    @Test func coalescingKeysIgnoreCaseDefaultPortsAndFragments() {
        let key = URL(string: "http://h.test/x")!.coalescingKey
        #expect(URL(string: "HTTP://H.TEST:80/x#frag")!.coalescingKey == key)
        #expect(URL(string: "http://h.test:8080/x")!.coalescingKey != key)
        #expect(URL(string: "http://h.test/X")!.coalescingKey != key)
        #expect(URL(string: "http://h.test")!.coalescingKey == URL(string: "http://h.test/")!.coalescingKey)
    }

    @Test func aPathWithAnEscapeThatIsNotUTF8KeepsItsOwnKey() throws {
        // Decoded, such a path reads as empty: it must not pass for `/`, nor for another such path.
        let latin = try #require(URL(string: "http://h.test/caf%E9.bin"))
        let root = try #require(URL(string: "http://h.test/"))
        let other = try #require(URL(string: "http://h.test/caf%E8.bin"))
        #expect(latin.coalescingKey == "http://h.test/caf%E9.bin")
        #expect(latin.coalescingKey != root.coalescingKey)
        #expect(latin.coalescingKey != other.coalescingKey)
        // Nor is a redirect from one to another a loop.
        #expect(Redirects.decide(status: 302, location: "/caf%E8.bin", from: latin, visited: [latin], allowDowngrade: false) == .follow(other))
    }

    @Test func aWrittenPortIsReadAsWrittenAndAPasswordNeverShown() throws {
        #expect(try URLValidation.parse("http://h.test:/a").port == nil, "an empty port is the default")
        #expect(try URLValidation.parse("http://u:p:q@[::1]:8080/a?x=:9#:7").port == 8080)
        #expect(try URLValidation.parse("http://h.test/a:99999").port == nil, "a colon in the path is no port")
        #expect(try URLValidation.parse("http://h.test:000080/a").port == 80)
        let refused = URLValidation.Invalid(input: "http://u:hunter2@127.0.0.1:0/a", reason: "port 0 is not between 1 and 65535")
        #expect(refused.description == "invalid URL 'http://u:***@127.0.0.1:0/a': port 0 is not between 1 and 65535")
        #expect(URLValidation.redactingPassword("https://user@h.test/a") == "https://user@h.test/a")
        #expect(URLValidation.redactingPassword("http://h.test/a@b:c") == "http://h.test/a@b:c")
    }

    @Test func validationAcceptsHTTPAndHTTPS() throws {
        #expect(try URLValidation.parse("http://h.test/a").absoluteString == "http://h.test/a")
        #expect(try URLValidation.parse("HTTPS://h.test:8443/a?b=c").host == "h.test")
    }

    @Test func validationRejectsWithAReason() {
        let cases: [(String, String)] = [
            ("ftp://h.test/file", "unsupported scheme 'ftp' (only http and https)"),
            ("h.test/file", "no scheme (use http:// or https://)"),
            ("http:///nohost", "no host"),
            ("http://h.test/a\r\nX-Evil: 1", "contains control characters"),
            ("http://h.test/a b", "contains spaces"),
            ("https://127.0.0.1:99999/x", "port 99999 is not between 1 and 65535"),
            ("http://h.test:0/x", "port 0 is not between 1 and 65535"),
            ("", "empty"),
            ("http://[::1", "not a URL"),
            // A port that does not fit an integer: the URL parser dropped it (port 80 then).
            ("http://127.0.0.1:99999999999999999999/x", "port 99999999999999999999 is not between 1 and 65535"),
            ("http://u:p@[::1]:65536/x", "port 65536 is not between 1 and 65535"),
            ("http://h.test:000000/x", "port 0 is not between 1 and 65535"),
        ]
        for (input, reason) in cases {
            #expect(throws: URLValidation.Invalid(input: input, reason: reason)) { try URLValidation.parse(input) }
        }
    }
}

@Suite struct FormatTests {
    @Test func utcTimesToTheNearestMillisecond() {
        #expect(Format.utc(Date(timeIntervalSince1970: 0)) == "1970-01-01 00:00:00.000")
        #expect(Format.utc(Date(timeIntervalSince1970: 1_764_000_000.123), separator: "T") == "2025-11-24T16:00:00.123")
        #expect(Format.utc(Date(timeIntervalSince1970: 1_795_000_000.9996)) == "2026-11-18 11:06:41.000")
        #expect(Format.utc(Date(timeIntervalSince1970: -1.25)) == "1969-12-31 23:59:58.750")
        #expect(Format.utc(Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29 00:00:00.000")
        // A separator of other than one byte: written as given.
        #expect(Format.utc(Date(timeIntervalSince1970: 951_782_400), separator: " at ") == "2000-02-29 at 00:00:00.000")
        #expect(Format.utc(Date(timeIntervalSince1970: 951_782_400), separator: "") == "2000-02-2900:00:00.000")
    }

    @Test func bytes() {
        #expect(Format.bytes(0) == "0 B")
        #expect(Format.bytes(1023) == "1023 B")
        #expect(Format.bytes(1024) == "1.0 KiB")
        #expect(Format.bytes(1536) == "1.5 KiB")
        #expect(Format.bytes(1024 * 1024 - 1) == "1023 KiB")
        #expect(Format.bytes(10 * 1024 * 1024 + 300 * 1024) == "10.2 MiB")
        #expect(Format.bytes(5 * 1024 * 1024 * 1024) == "5.0 GiB")
        #expect(Format.bytes(-5) == "0 B")
        // Two counts that would read alike are said in bytes (a failed row said `97.6 KiB of 97.6 KiB`).
        #expect(Format.bytesApart(99_999, 100_000) == "99999 B of 100000 B")
        #expect(Format.bytesApart(4096, 4097) == "4096 B of 4097 B")
        #expect(Format.bytesApart(50_000, 100_000) == "48.8 KiB of 97.6 KiB")
        #expect(Format.bytesApart(100_000, 100_000) == "97.6 KiB of 97.6 KiB")
    }

    @Test func speedsAndDurations() {
        #expect(Format.speed(0) == "-")
        #expect(Format.speed(.infinity) == "-")
        #expect(Format.speed(2.5 * 1024 * 1024) == "2.5 MiB/s")
        #expect(Format.duration(nil) == "-")
        #expect(Format.duration(0) == "0s")
        #expect(Format.duration(44.2) == "45s")
        #expect(Format.duration(187) == "3m07s")
        #expect(Format.duration(7500) == "2h05m")
        #expect(Format.duration(3 * 86400 + 4 * 3600) == "3d04h")
        #expect(Format.duration(1e12) == ">999d")
        #expect(Format.duration(-1) == "-")
    }

    @Test func percents() {
        #expect(Format.percent(nil) == "-")
        #expect(Format.percent(0.999) == "99%")
        #expect(Format.percent(1) == "100%")
        #expect(Format.percent(2) == "100%")
    }
}

@Suite struct BackoffAndSpeedTests {
    @Test func jitterStaysWithinTheSpread() {
        let backoff = Backoff(initial: 1, cap: 60, spread: 0.25)
        #expect(backoff.delay(failures: 1, retryAfter: nil, jitter: 0) == 0.75)
        #expect(backoff.delay(failures: 1, retryAfter: nil, jitter: 0.999_999) < 1.25)
        #expect(backoff.delay(failures: 3, retryAfter: nil, jitter: 0.5) == 4)
        #expect(backoff.delay(failures: 100, retryAfter: nil, jitter: 0.999) == 60)
        #expect(backoff.delay(failures: 1, retryAfter: 10, jitter: 0.5) == 10)
        #expect(backoff.delay(failures: 1, retryAfter: 86_400, jitter: 0.5) == Backoff.longestRetryAfter)
    }

    @Test func speedOverASlidingWindow() {
        var meter = SpeedMeter(window: 3)
        #expect(meter.bytesPerSecond == 0)
        meter.record(bytes: 0, at: 0)
        meter.record(bytes: 1000, at: 1)
        #expect(meter.bytesPerSecond == 1000)
        for second in 2...10 { meter.record(bytes: 1000 + Int64(second - 1) * 100, at: Double(second)) }
        #expect(meter.bytesPerSecond == 100, "old fast samples leave the window")
        meter.record(bytes: 0, at: 11)
        #expect(meter.bytesPerSecond == 0, "a restart from zero starts a new measurement")
    }

    /// A throttled server sending 100 KiB once a second, sampled ten times a second: the speed reads
    /// 100 KiB/s wherever the window cuts, and falls when the bytes stop.
    @Test func burstsOnceASecondReadAsTheirRate() {
        var meter = SpeedMeter(window: 3)
        var lowest = Double.infinity
        var highest = 0.0
        for tick in 0...100 {
            let time = Double(tick) / 10 + 0.05
            let bursts = Int64(time.rounded(.down)) + 1
            meter.record(bytes: bursts * 102_400, at: time)
            if time > 4 {
                lowest = min(lowest, meter.bytesPerSecond)
                highest = max(highest, meter.bytesPerSecond)
            }
        }
        #expect(lowest > 0.95 * 102_400 && highest < 1.05 * 102_400, "\(lowest)...\(highest)")
        let stalled = Int64(11) * 102_400
        for tick in 101...160 { meter.record(bytes: stalled, at: Double(tick) / 10) }
        #expect(meter.bytesPerSecond == 0, "six quiet seconds: \(meter.bytesPerSecond)")
    }

    /// A transfer that stops reads what came in the last window once the quiet is longer than bursts
    /// are apart, and zero once a whole window passed without a byte: a tester's stalled transfer
    /// read 31.9, then 20.6, 12.1, 8.5 KiB/s with an ETA for the 30 s before the stall was noticed.
    @Test func aStalledTransferReadsZeroOnceAWindowPassedWithoutAByte() {
        var meter = SpeedMeter(window: 3)
        for tick in 0...50 { meter.record(bytes: Int64(tick) * 10_000, at: Double(tick) / 10) }
        #expect(abs(meter.bytesPerSecond - 100_000) < 1)
        // Quiet from 5.0 s on, sampled ten times a second.
        var readings: [Double: Double] = [:]
        for tick in 51...120 {
            meter.record(bytes: 500_000, at: Double(tick) / 10)
            readings[Double(tick) / 10] = meter.bytesPerSecond
        }
        #expect(readings[6.5] == 100_000, "within the gap between bursts: the rate while it came")
        // 7.5 s: the window 4.5–7.5 s holds the last half second of bytes.
        #expect(abs((readings[7.5] ?? 0) - 50_000 / 3) < 1, "\(readings[7.5] ?? -1)")
        #expect(readings[8.0] == 0 && readings[12.0] == 0, "a whole window without a byte")
        #expect(readings.values.allSatisfy { $0 <= 100_000 }, "never above the rate it had")
    }
}

@Suite struct TrimmingTests {
    /// The fast path takes text with visible ASCII at both ends as it is; everything else goes to
    /// Foundation, so the result is always Foundation's.
    @Test func trimsAsFoundationDoes() {
        let samples = [
            "", " ", "\t", "http://a/b", " http://a/b", "http://a/b ", "\thttp://a/b\t", "a", " a ", "a b",
            "\u{00A0}x\u{00A0}", "\u{2003}name\u{3000}", "x\u{00A0}", "é", " é ", "名前", "\r\nline\r\n", "\nx", "x\n", "\u{85}x\u{85}",
        ]
        for sample in samples {
            #expect(sample.trimmingWhitespace() == sample.trimmingCharacters(in: .whitespaces), "\(sample.debugDescription)")
            #expect(
                sample.trimmingWhitespace(newlines: true) == sample.trimmingCharacters(in: .whitespacesAndNewlines), "\(sample.debugDescription)"
            )
            let padded = "[\(sample)]".dropFirst().dropLast()
            #expect(padded.trimmingWhitespace() == padded.trimmingCharacters(in: .whitespaces), "substring \(sample.debugDescription)")
        }
    }
}

@Suite struct UTCFormatTests {
    /// Digit by digit, as Foundation formats the same instant, across the years a clock can show.
    @Test func matchesFoundationsFormatter() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            // Whole milliseconds from 1600 (Foundation turns Julian before 1582) to 9999: no
            // rounding for the two to differ on.
            let milliseconds = Int64.random(in: -11_676_096_000_000...253_402_300_799_000, using: &generator)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            #expect(Format.utc(date) == formatter.string(from: date), "\(milliseconds) ms")
        }
    }
}
