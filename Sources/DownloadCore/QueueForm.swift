import Foundation

/// Limits a queue's requests are held to, wherever they come from (flags, the config file, the
/// control socket).
public enum QueueLimits {
    /// Downloads running at once.
    public static let maxActive = 1...32
    /// Connections per file, like aria2c's `-x` (whose limit is 16).
    public static let connections = 1...16
    /// The lowest speed limit, in bytes per second: below 1 KiB/s a single network read would take
    /// over a minute to pay for.
    public static let minimumRate: Int64 = 1024
    /// The highest speed limit, in bytes per second (1024T, a pebibyte): any faster is no limit,
    /// and a number near `Int64.max` would overflow the arithmetic that paces the bytes.
    public static let maximumRate: Int64 = 1 << 50

    /// Why `bytesPerSecond` cannot be a speed limit, in one sentence; nil when it can (nil and 0
    /// mean none).
    public static func rateProblem(_ bytesPerSecond: Int64?, _ name: String) -> String? {
        guard let bytesPerSecond, bytesPerSecond != 0 else { return nil }
        guard bytesPerSecond >= minimumRate else {
            return "\(name) must be at least \(minimumRate) bytes a second (1K), or 0 for none"
        }
        guard bytesPerSecond <= maximumRate else {
            return "\(name) must be at most \(maximumRate) bytes a second (1024T), or 0 for none"
        }
        return nil
    }

    /// A limit as the queue keeps it: nil for none (0 says none too).
    public static func rate(_ bytesPerSecond: Int64?) -> Int64? {
        guard let bytesPerSecond, bytesPerSecond > 0 else { return nil }
        return bytesPerSecond
    }
}

/// What a control socket client asks to queue: the body of `POST /v1/downloads`.
///
/// `url` or `urls` (or both), and where they go: `dir` (named by the server or the URL) or
/// `output` (one URL's own file), absolute paths, as the socket's server has no working directory
/// of the client's. Checked with the rules the command line applies to the same options.
public struct QueueForm: Sendable, Hashable, Codable {
    public var url: String?
    public var urls: [String]?
    public var dir: String?
    public var output: String?
    /// `Name: value`, as `-H` takes them.
    public var headers: [String]?
    /// `sha-256=HEX` or `sha-512=HEX`, for a single URL.
    public var checksum: String?
    public var connections: Int?
    /// Each download's own speed limit in bytes per second (`--limit-rate-each`); 0 or null for none.
    public var limit: Int64?

    public init(url: String? = nil, urls: [String]? = nil, dir: String? = nil, output: String? = nil,
                headers: [String]? = nil, checksum: String? = nil, connections: Int? = nil, limit: Int64? = nil) {
        self.url = url
        self.urls = urls
        self.dir = dir
        self.output = output
        self.headers = headers
        self.checksum = checksum
        self.connections = connections
        self.limit = limit
    }

    /// Why a form cannot be queued, in one sentence.
    public struct Invalid: Error, Hashable, CustomStringConvertible {
        public var description: String

        public init(_ description: String) {
            self.description = description
        }
    }

    /// The requests of the form, or the first problem; the destination is checked on the disk (it
    /// must be a writable directory), nothing is created.
    public func requests() throws(Invalid) -> [QueueRequest] {
        var parsed: [URL] = []
        for text in (url.map { [$0] } ?? []) + (urls ?? []) {
            do {
                parsed.append(try URLValidation.parse(text))
            } catch {
                throw Invalid(error.description)
            }
        }
        guard !parsed.isEmpty else { throw Invalid("no URL given: send \"url\" or \"urls\"") }
        var options = RequestOptions()
        for text in headers ?? [] {
            do {
                options.headers = HeaderField.merged(options.headers, [try HeaderField.parse(text)])
            } catch {
                throw Invalid(error.description)
            }
        }
        if let connections {
            guard QueueLimits.connections.contains(connections) else {
                throw Invalid("connections must be between \(QueueLimits.connections.lowerBound) and \(QueueLimits.connections.upperBound)")
            }
            options.connections = connections
        }
        if let problem = QueueLimits.rateProblem(limit, "limit") { throw Invalid(problem) }
        let limit = QueueLimits.rate(limit)
        if let checksum {
            guard parsed.count == 1 else { throw Invalid("checksum checks a single URL; give one URL with it") }
            do {
                options.checksum = try Checksum.parse(checksum)
            } catch {
                throw Invalid(error.description)
            }
        }
        switch (dir, output) {
        case (nil, nil):
            throw Invalid("say where the files go: \"dir\" or \"output\" (an absolute path)")
        case (.some, .some):
            throw Invalid("give \"dir\" or \"output\", not both")
        case (.some(let dir), nil):
            let path = try Self.absolute(dir, "dir")
            if let problem = LocalDirectory.problem(path) { throw Invalid(problem) }
            return parsed.map { QueueRequest(url: $0, destination: .directory(path), options: options, limit: limit) }
        case (nil, .some(let output)):
            guard parsed.count == 1 else { throw Invalid("output takes a single URL; use dir for several") }
            let path = try Self.absolute(output, "output")
            if let problem = LocalDirectory.outputProblem(path, option: "output") { throw Invalid(problem) }
            return [QueueRequest(url: parsed[0], destination: .file(path), options: options, limit: limit)]
        }
    }

    /// `path` with `.` and `..` resolved, when it is absolute (a trailing slash kept: `output` refuses it).
    private static func absolute(_ path: String, _ name: String) throws(Invalid) -> String {
        guard path.hasPrefix("/"), !path.unicodeScalars.contains(where: TerminalText.isControl) else {
            throw Invalid("\(name) must be an absolute path, not '\(TerminalText.sanitize(path))'")
        }
        let standardized = (path as NSString).standardizingPath
        return path.hasSuffix("/") && !standardized.hasSuffix("/") ? standardized + "/" : standardized
    }
}
