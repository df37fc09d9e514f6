import ArgumentParser
import DownloadCore
import DownloadEngine
import Foundation

/// How the queue runs: `-j`, tries, timeouts, the rate limit, trust roots, fsync.
struct SessionOptions: ParsableArguments {
    @Option(name: [.customShort("j"), .customLong("max-active")], help: ArgumentHelp(
        "How many downloads run at once, 1 to 32 (default: max-active in the config, else what < and > last chose, else 3).",
        valueName: "n"
    ))
    var maxActive: String?

    @Option(help: ArgumentHelp("Failed attempts in a row before a download fails (default 20).", valueName: "n"))
    var maxTries: String?

    @Option(help: ArgumentHelp("Seconds to wait for a connection (default 10).", valueName: "s"))
    var connectTimeout: String?

    @Option(help: ArgumentHelp("Seconds without a byte that count as a stall, retried from the bytes on disk (default 30).", valueName: "s"))
    var stallTimeout: String?

    @Option(help: ArgumentHelp(
        "Limit all downloads together to RATE bytes a second: 500K, 2M (K = 1024); for this run (default: limit-rate in the config, else the limit last set while the queue ran).",
        valueName: "rate"
    ))
    var limitRate: String?

    @Option(help: ArgumentHelp("Trust only the CA certificates in this PEM FILE (replaces the system's, like curl --cacert).", valueName: "file"))
    var caCertificate: String?

    @Flag(inversion: .prefixedNo, help: "fsync each file before it is reported completed (default; --no-fsync for scratch downloads).")
    var fsync: Bool?

    @Flag(help: "Follow a redirect from https to http (refused by default: the rest would travel unencrypted).")
    var allowDowngrade = false

    @Option(help: ArgumentHelp(
        "Free space to keep where downloads go: under it they wait, bytes kept, and go on when there is room (default: 1G or 1% of the file system, whichever is smaller; 0: only a full disk stops them).",
        valueName: "size"
    ))
    var minFree: String?

    @Flag(help: "When free space stays under --min-free, discard the partial data of paused downloads, least recently used first (their rows stay, paused at 0 B).")
    var purgeWhenLow = false

    @Option(help: ArgumentHelp(
        "Run PROGRAM when a download completes, with the file as its argument and HAUL_* variables (no shell; a path or a name in PATH).",
        valueName: "program"
    ))
    var onComplete: String?

    @Option(help: ArgumentHelp(
        "Run PROGRAM when a download fails, with its part file as its argument and HAUL_* variables (no shell; a path or a name in PATH).",
        valueName: "program"
    ))
    var onFail: String?

    @Option(help: ArgumentHelp("Kill a hook still running after this long, with its children: 30s, 10m, 1h or seconds (default 10m).", valueName: "duration"))
    var hookTimeout: String?

    /// `settings` with these flags and the environment's proxies on top, checked.
    func apply(to settings: Settings, environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) -> Settings {
        var settings = settings
        if let maxActive { settings.maxActive = try OptionCheck.integer(maxActive, "--max-active", in: OptionCheck.maxActive) }
        if let maxTries { settings.maxTries = try OptionCheck.integer(maxTries, "--max-tries", in: OptionCheck.maxTries) }
        if let connectTimeout { settings.connectTimeout = try OptionCheck.integer(connectTimeout, "--connect-timeout", in: OptionCheck.seconds) }
        if let stallTimeout { settings.stallTimeout = try OptionCheck.integer(stallTimeout, "--stall-timeout", in: OptionCheck.seconds) }
        if let limitRate { settings.limitRate = try OptionCheck.rate(limitRate, "--limit-rate") }
        if let caCertificate {
            let working = FileManager.default.currentDirectoryPath
            settings.caCertificate = LocalPath.absolute(caCertificate, in: working)
        }
        if let fsync { settings.fsync = fsync }
        if allowDowngrade { settings.allowDowngrade = true }
        if let minFree { settings.minFree = try OptionCheck.floor(minFree, "--min-free") }
        if purgeWhenLow { settings.purgeWhenLow = true }
        if let onComplete { settings.onComplete = onComplete }
        if let onFail { settings.onFail = onFail }
        if let hookTimeout { settings.hookTimeout = try OptionCheck.duration(hookTimeout, "--hook-timeout") }
        // Each program is found and checked now: a hook that cannot run is bad input, said before
        // anything is queued or downloaded.
        let working = FileManager.default.currentDirectoryPath
        if let program = settings.onComplete {
            let name = onComplete == nil ? "the config's on-complete" : "--on-complete"
            settings.onComplete = try OptionCheck.program(program, name, in: working, path: environment["PATH"])
        }
        if let program = settings.onFail {
            settings.onFail = try OptionCheck.program(program, onFail == nil ? "the config's on-fail" : "--on-fail", in: working, path: environment["PATH"])
        }
        do {
            if let path = settings.caCertificate { try TrustRoots.check(path) }
        } catch {
            throw UsageError(message: error.description)
        }
        do {
            settings.proxies = try ProxySettings.from(environment: environment)
        } catch {
            throw UsageError(message: error.description)
        }
        return settings
    }

    /// The engine's configuration for checked `settings`.
    ///
    /// Its logger is set by the caller once the log is set up (a logger made earlier writes to stderr).
    ///
    /// `downloadDirectory`: where new downloads go, whose free space the header shows.
    static func configuration(_ settings: Settings, maxActive: Int, downloadDirectory: String) -> DownloadSession.Configuration {
        var configuration = DownloadSession.Configuration()
        configuration.minFree = settings.minFree
        configuration.purgeWhenLow = settings.purgeWhenLow
        configuration.spaceDirectory = downloadDirectory
        configuration.maxActive = maxActive
        configuration.maxTries = settings.maxTries
        configuration.connectTimeout = .seconds(settings.connectTimeout)
        configuration.stallTimeout = .seconds(settings.stallTimeout)
        configuration.limitBytesPerSecond = settings.limitRate
        configuration.caCertificatePath = settings.caCertificate
        configuration.syncOnCompletion = settings.fsync
        configuration.allowDowngrade = settings.allowDowngrade
        configuration.proxies = settings.proxies
        if let userAgent = settings.userAgent { configuration.userAgent = userAgent }
        configuration.hooks.programs[.complete] = settings.onComplete
        configuration.hooks.programs[.fail] = settings.onFail
        configuration.hooks.timeLimit = .seconds(settings.hookTimeout)
        return configuration
    }

    /// Hooks given as flags to a command that hands its downloads to a runner: the runner runs its
    /// own hooks, so these would silently never run.
    func refuseHooks(runner pid: Int32) throws(UsageError) {
        if onComplete != nil || onFail != nil || hookTimeout != nil {
            throw UsageError(message: "haul (pid \(pid)) runs this queue with its own hooks: give --on-complete, --on-fail and --hook-timeout to the haul that runs the queue")
        }
        // What the runner trusts is its own: a tester's `--ca-certificate` here was dropped without
        // a word (a server it does not sign was fetched, exit 0; or refused, advising the option).
        if caCertificate != nil || allowDowngrade {
            throw UsageError(message: "haul (pid \(pid)) runs this queue and trusts what it was started with: give --ca-certificate and --allow-downgrade to the haul that runs the queue")
        }
    }
}

/// What a command adds to the queue: URLs, `-i FILE`, where they go, and what each asks of its server.
struct AddOptions: ParsableArguments {
    @Argument(help: "http:// or https:// URLs.")
    var urls: [String] = []

    @Option(name: [.short, .customLong("input-file")], help: ArgumentHelp("Also the URLs listed in FILE (one per line, # comments).", valueName: "file"))
    var inputFile: String?

    @Option(name: [.short, .customLong("dir")], help: ArgumentHelp(
        "Directory for downloads named by the server or the URL (default: dir in the config, else the current directory).",
        valueName: "dir"
    ))
    var directory: String?

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("Write the single URL's download to FILE (relative to -d).", valueName: "file"))
    var output: String?

    @Option(name: [.customShort("H"), .customLong("header")], help: ArgumentHelp(
        "Send this header with every request of these downloads (repeatable; kept with each download).",
        valueName: "name: value"
    ))
    var headers: [String] = []

    @Option(help: ArgumentHelp("User-Agent for these downloads (and the default of this run).", valueName: "text"))
    var userAgent: String?

    @Option(help: ArgumentHelp(
        "Fetch each file over up to N connections at once, in parts, when its server does ranges (1-16, default 1); also the most connections to one host.",
        valueName: "n"
    ))
    var connections: String?

    @Option(help: ArgumentHelp("Verify the single download at completion: sha-256=HEX or sha-512=HEX; a mismatch fails it and keeps the .part.", valueName: "algo=hex"))
    var checksum: String?

    @Option(help: ArgumentHelp(
        "Limit each of these downloads to RATE bytes a second of its own (500K, 2M; 0 for none), kept with it, beside --limit-rate.",
        valueName: "rate"
    ))
    var limitRateEach: String?

    /// One URL to add: where it goes and what it asks.
    /// One URL to queue: the engine's request, so a batch goes to the session as it is.
    typealias Request = DownloadSession.Request

    /// `settings` with the per-run flags of this group on top (the user agent).
    func apply(to settings: Settings) throws(UsageError) -> Settings {
        var settings = settings
        if let userAgent { settings.userAgent = try OptionCheck.userAgent(userAgent) }
        if let connections { settings.connections = try OptionCheck.integer(connections, "--connections", in: OptionCheck.connections) }
        if let limitRateEach { settings.limitRateEach = try OptionCheck.rateOrNone(limitRateEach, "--limit-rate-each") }
        return settings
    }

    /// Every URL with its destination and options, or one line naming the first problem. Nothing
    /// is touched: the directory is only checked.
    ///
    /// No download goes into the state directory `state`: its queue, lock and log are no one's
    /// download (a tester's `-o STATE/queue.sqlite` was placed over the queue: every later command
    /// found it damaged, and the paused rows' bytes lost their rows).
    func requests(_ settings: Settings, requireURL: Bool, state: String) throws(UsageError) -> [Request] {
        let parsed = try validatedURLs()
        if requireURL, parsed.isEmpty { throw UsageError(message: "no URL given") }
        if directory?.isEmpty == true { throw UsageError(message: "-d/--dir is empty: give a directory") }
        if output?.isEmpty == true { throw UsageError(message: "-o/--output is empty: give a file") }
        if output != nil, inputFile != nil { throw UsageError(message: "-o/--output takes a single URL; it cannot be used with -i/--input-file") }
        if output != nil, parsed.count != 1 { throw UsageError(message: "-o/--output takes a single URL; use -d/--dir for several") }
        if checksum != nil, parsed.count != 1 || inputFile != nil {
            throw UsageError(message: "--checksum checks a single URL; give one URL with it")
        }
        var options = try defaultOptions(settings)
        if let checksum { options.checksum = try OptionCheck.checksum(checksum) }

        let directory = downloadDirectory(settings)
        if let output, let url = parsed.first {
            let path = LocalPath.absolute(output, in: directory)
            if let problem = LocalDirectory.outputProblem(path, option: "-o/--output") { throw UsageError(message: problem) }
            if LocalPath.isInside(DiskWatch.directory(of: path), state) {
                throw UsageError(message: "-o/--output \(TerminalText.sanitize(path)) is in haul's state directory, which holds the queue: choose another place")
            }
            try Self.checkFloor(settings.minFree, near: path)
            return [Request(url: url, destination: .file(path), options: options, limit: settings.limitRateEach)]
        }
        try LocalPath.checkWritableDirectory(directory)
        if !parsed.isEmpty, LocalPath.isInside(directory, state) {
            throw UsageError(message: "the download directory \(TerminalText.sanitize(directory)) is in haul's state directory, which holds the queue: choose another with -d")
        }
        try Self.checkFloor(settings.minFree, near: directory + "/")
        return parsed.map { Request(url: $0, destination: .directory(directory), options: options, limit: settings.limitRateEach) }
    }

    /// A floor the file system where `path` goes can never give is bad input: nothing could ever
    /// download there, and `--purge-when-low` would chase it in vain.
    static func checkFloor(_ floor: SpaceFloor, near path: String) throws(UsageError) {
        guard case .bytes(let bytes) = floor, let reading = DiskWatch.reading(near: path, floor: floor), bytes >= reading.capacity else { return }
        let directory = TerminalText.sanitize(DiskWatch.directory(of: path))
        throw UsageError(message: "min-free \(Format.bytes(bytes)) is more than the file system of \(directory) holds (\(Format.bytes(reading.capacity))): nothing could ever download there")
    }

    /// The download directory new URLs (the UI's `a` too) go to, absolute: paths are stored in the
    /// queue, which outlives this working directory.
    func downloadDirectory(_ settings: Settings) -> String {
        let working = FileManager.default.currentDirectoryPath
        return directory.map { LocalPath.absolute($0, in: working) } ?? settings.directory ?? working
    }

    /// The headers every URL added in this run asks for (for the UI's `a` too).
    func defaultOptions(_ settings: Settings) throws(UsageError) -> RequestOptions {
        var options = RequestOptions(headers: settings.headers, connections: settings.connections)
        if let connections { options.connections = try OptionCheck.integer(connections, "--connections", in: OptionCheck.connections) }
        for text in headers { options.headers = HeaderField.merged(options.headers, [try OptionCheck.header(text)]) }
        if let userAgent {
            options.headers = HeaderField.merged(options.headers, [HeaderField(name: "User-Agent", value: try OptionCheck.userAgent(userAgent))])
        }
        return options
    }

    /// The URLs of the arguments and of `-i FILE`, or a one-line error naming the bad one.
    private func validatedURLs() throws(UsageError) -> [URL] {
        var parsed: [URL] = []
        for text in urls {
            do {
                parsed.append(try URLValidation.parse(text))
            } catch {
                throw UsageError(message: error.description)
            }
        }
        guard let inputFile else { return parsed }
        let contents: String
        do {
            contents = try LocalPath.readText(inputFile)
        } catch {
            throw UsageError(message: "cannot read \(TerminalText.sanitize(inputFile)): \(error.message)")
        }
        for (number, line) in LocalPath.lines(of: contents).enumerated() {
            let text = line.trimmingWhitespace(newlines: true)
            guard !text.isEmpty, !text.hasPrefix("#") else { continue }
            do {
                parsed.append(try URLValidation.parse(text))
            } catch {
                throw UsageError(message: "\(TerminalText.sanitize(inputFile)):\(number + 1): \(error.description)")
            }
        }
        if parsed.isEmpty { throw UsageError(message: "\(TerminalText.sanitize(inputFile)) lists no URL") }
        return parsed
    }
}

/// How the terminal UI draws.
struct DisplayOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Most redraws a second, 1 to 10 (default 10).", valueName: "hz"))
    var refresh: String?

    @Flag(inversion: .prefixedNo, help: "Draw bars and marks in ASCII (automatic when the locale is not UTF-8).")
    var ascii: Bool?

    @Flag(inversion: .prefixedNo, help: "Clicks select rows and the wheel scrolls (default); --no-mouse leaves the mouse to the terminal.")
    var mouse: Bool?

    func apply(to settings: Settings) throws(UsageError) -> Settings {
        var settings = settings
        if let refresh { settings.refresh = try OptionCheck.refresh(refresh, "--refresh") }
        if let ascii { settings.ascii = ascii }
        if let mouse { settings.mouse = mouse }
        return settings
    }
}
