import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// An HTTP/1.1 server on 127.0.0.1 serving deterministic resources with Range, validators and
/// fault injection, recording every request. For `haul demo` and the tests; never the internet.
public final class LoopbackServer: Sendable {
    private typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    private struct State {
        var resources: [String: ResourceEntry] = [:]
        var redirects: [String: (status: Int, location: String, closeAfter: Bool)] = [:]
        var log: [RequestRecord] = []
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// The ports of each request's connection (by its index in `log`): this server's and the client's.
        var ports: [Int: (server: Int, client: Int)] = [:]
        var inFlight = 0
        var peakInFlight = 0
    }

    /// The port the server listens on.
    public let port: Int
    public let host: String
    /// `https` when started with a certificate.
    public let scheme: String
    private let state = Mutex(State())
    private let serverChannel: any Channel
    private let acceptLoop: Mutex<Task<Void, Never>?> = Mutex(nil)
    /// A fixed date, so Last-Modified is the same on every run; each version adds a day.
    private static let epoch = Date(timeIntervalSince1970: 1_767_225_600)

    /// A PEM certificate chain and its private key: the server speaks HTTPS with them.
    public struct TLSFiles: Sendable {
        public var certificatePath: String
        public var keyPath: String

        public init(certificatePath: String, keyPath: String) {
            self.certificatePath = certificatePath
            self.keyPath = keyPath
        }
    }

    /// Starts a server; port 0 picks a free one. With `tls`, it speaks HTTPS.
    public static func start(host: String = "127.0.0.1", port: Int = 0, tls: TLSFiles? = nil) async throws -> LoopbackServer {
        let context = try tls.map { files in
            let configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMFile(files.certificatePath).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(file: files.keyPath, format: .pem))
            )
            return try NIOSSLContext(configuration: configuration)
        }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try Connection(wrappingChannelSynchronously: channel)
                }
            }
        let server = LoopbackServer(channel: channel, host: host, scheme: tls == nil ? "http" : "https")
        server.run(channel)
        return server
    }

    /// Why `start` failed, in words of haul's own: the system's for its error number (a port in
    /// use, no loopback address), never the networking library's description.
    public static func words(for error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)).lowercased() }
        if error is NIOSSLError { return "its TLS certificate or key cannot be used" }
        return "the system refused it"
    }

    private init(channel: NIOAsyncChannel<Connection, Never>, host: String, scheme: String) {
        serverChannel = channel.channel
        port = channel.channel.localAddress?.port ?? 0
        self.host = host
        self.scheme = scheme
    }

    private func run(_ channel: NIOAsyncChannel<Connection, Never>) {
        let task = Task<Void, Never> {
            try? await withThrowingDiscardingTaskGroup { group in
                try await channel.executeThenClose { inbound in
                    for try await connection in inbound {
                        group.addTask { await self.serve(connection) }
                    }
                }
            }
        }
        acceptLoop.withLock { $0 = task }
    }

    /// Stops listening and closes every connection.
    public func shutdown() async {
        try? await serverChannel.close()
        let open = state.withLock { Array($0.connections.values) }
        for channel in open { try? await channel.close() }
        let task = acceptLoop.withLock { $0 }
        task?.cancel()
        await task?.value
    }

    // MARK: Configuration

    /// `http://127.0.0.1:PORT/path` (`https` for a TLS server).
    public func url(_ path: String) -> URL {
        let slash = path.hasPrefix("/") ? "" : "/"
        // A literal built from a host and a port parses; fall back to the root only if it did not.
        return URL(string: "\(scheme)://\(host):\(port)\(slash)\(path)") ?? URL(fileURLWithPath: "/")
    }

    /// Serves `size` deterministic bytes at `path` (replacing what was there, version 1).
    public func serve(_ path: String, size: Int, seed: UInt64? = nil, faults: Faults = Faults()) {
        let seed = seed ?? Self.seed(for: path)
        state.withLock { $0.resources[path] = ResourceEntry(size: size, seed: seed, faults: faults) }
    }

    /// Answers `path` with a redirect to `location` (absolute or relative).
    ///
    /// With `closeAfter`, the redirect says nothing of closing (the connection looks reusable), and
    /// the next request that arrives on that connection is met by a close, unanswered: a keep-alive
    /// timeout that runs out just as the client reuses the connection, made certain.
    public func redirect(_ path: String, to location: String, status: Int = 302, closeAfter: Bool = false) {
        state.withLock { $0.redirects[path] = (status, location, closeAfter) }
    }

    /// Changes the resource: a new version with new bytes and new validators (same size unless
    /// given). `keepingValidators`: the new bytes keep the old ETag and Last-Modified, as a cache
    /// (nginx's `proxy_cache`, its own `Date`) serves a file its origin rewrote twice within one
    /// second, or as two files of one size and date behind a redirect that changed (nginx's tag is
    /// the date and the size).
    public func change(_ path: String, size: Int? = nil, keepingValidators: Bool = false) {
        state.withLock { state in
            state.resources[path]?.version += 1
            if keepingValidators { state.resources[path]?.hiddenChanges += 1 }
            if let size { state.resources[path]?.size = size }
        }
    }

    /// Replaces the faults of `path` and resets their counters.
    public func setFaults(_ path: String, _ faults: Faults) {
        state.withLock { state in
            guard var entry = state.resources[path] else { return }
            entry.faults = faults
            entry.failuresServed = 0
            entry.resetsServed = 0
            entry.closesServed = 0
            entry.stallsServed = 0
            entry.shortRangesServed = 0
            entry.holdsReleased = 0
            entry.errorPagesServed = 0
            state.resources[path] = entry
        }
    }

    /// Lets bodies of `path` go past the next of their `holdAt` offsets.
    public func release(_ path: String) {
        state.withLock { $0.resources[path]?.holdsReleased += 1 }
    }

    /// The current bytes of `path`.
    public func content(_ path: String) -> [UInt8] {
        guard let entry = state.withLock({ $0.resources[path] }) else { return [] }
        return LoopbackContent.bytes(seed: entry.seed, version: entry.version, range: 0..<entry.size)
    }

    /// SHA-256 (hex) of the current version of `path`.
    public func sha256(_ path: String) -> String {
        guard let entry = state.withLock({ $0.resources[path] }) else { return "" }
        return LoopbackContent.sha256(seed: entry.seed, version: entry.version, size: entry.size)
    }

    /// Every request so far, or those for `path`, in arrival order.
    public func requests(_ path: String? = nil) -> [RequestRecord] {
        state.withLock { state in
            guard let path else { return state.log }
            return state.log.filter { $0.path == path }
        }
    }

    /// The client's port of each request's connection, in the order the requests came (every
    /// path, or only `path`'s): two requests with one port came on one kept connection.
    public func clientPorts(_ path: String? = nil) -> [Int] {
        state.withLock { state in
            state.log.indices.compactMap { index in
                guard path == nil || state.log[index].path == path else { return nil }
                return state.ports[index]?.client
            }
        }
    }

    /// Body bytes written to the socket so far for `path` (every request), or for every path.
    public func bytesSent(_ path: String? = nil) -> Int {
        requests(path).reduce(0) { $0 + $1.bodyBytesSent }
    }

    /// Body bytes the clients have read so far for `path` (every request), or for every path: those
    /// written, less those still in the kernel between this server and the client (this socket's
    /// send queue and the client socket's receive queue, from `/proc/net/tcp`).
    ///
    /// What a client's speed is measured by on the server's side: on loopback the kernel buffers
    /// megabytes between the two (a receive buffer grows with bursts of reads), so the bytes
    /// written say how fast the buffers filled, not how fast the client reads.
    public func bytesDelivered(_ path: String? = nil) -> Int {
        let (log, ports) = state.withLock { state in (state.log, state.ports) }
        let queues = Self.tcpQueues()
        var delivered = 0
        for (index, record) in log.enumerated() where path == nil || record.path == path {
            var queued = 0
            if let (server, client) = ports[index] {
                queued = (queues[Self.pair(server, client)]?.sending ?? 0) + (queues[Self.pair(client, server)]?.receiving ?? 0)
            }
            delivered += max(0, record.bodyBytesSent - queued)
        }
        return delivered
    }

    /// How fast clients read `path` (or everything), in bytes a second: the least-squares slope
    /// of `bytesDelivered` sampled every 50 ms over `duration`.
    ///
    /// A client reads in bursts (a few hundred KiB at a time from a full socket, then nothing
    /// while its limit makes it wait): the fit over many samples smooths the steps that a
    /// difference of two readings would take for the rate.
    public func deliveryRate(_ path: String? = nil, over duration: Duration) async throws -> Double {
        try await sampledRate(over: duration) { bytesDelivered(path) }
    }

    private static func pair(_ local: Int, _ remote: Int) -> Int {
        local << 16 | remote
    }

    /// The send and receive queues of the loopback TCP sockets, by local and remote port.
    private static func tcpQueues() -> [Int: (sending: Int, receiving: Int)] {
        var queues: [Int: (sending: Int, receiving: Int)] = [:]
        for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
            // Read to the end: a /proc file says it is empty (size 0) to anything that asks first.
            guard let handle = FileHandle(forReadingAtPath: file), let data = try? handle.readToEnd() else { continue }
            try? handle.close()
            let text = String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                // `sl local_address rem_address st tx_queue:rx_queue …`, addresses as `HEX:PORT`.
                let fields = line.split(separator: " ")
                guard fields.count > 4, let local = fields[1].split(separator: ":").last, let remote = fields[2].split(separator: ":").last,
                      let localPort = Int(local, radix: 16), let remotePort = Int(remote, radix: 16) else { continue }
                let counts = fields[4].split(separator: ":")
                guard counts.count == 2, let sending = Int(counts[0], radix: 16), let receiving = Int(counts[1], radix: 16) else { continue }
                queues[pair(localPort, remotePort)] = (sending, receiving)
            }
        }
        return queues
    }

    /// The most responses that were being written at the same time.
    public var peakConcurrentResponses: Int {
        state.withLock { $0.peakInFlight }
    }

    /// A stable seed per path, so two paths never serve the same bytes.
    static func seed(for path: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in path.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01B3
        }
        return hash
    }

    // MARK: Serving

    private func serve(_ connection: Connection) async {
        let channel = connection.channel
        let key = ObjectIdentifier(channel)
        state.withLock { $0.connections[key] = channel }
        defer { _ = state.withLock { $0.connections.removeValue(forKey: key) } }
        do {
            try await connection.executeThenClose { inbound, outbound in
                var head: HTTPRequestHead?
                var closeOnNextRequest = false
                for try await part in inbound {
                    switch part {
                    case .head(let requestHead):
                        if closeOnNextRequest {
                            state.withLock { $0.log.append(RequestRecord(unansweredRequest: requestHead)) }
                            return
                        }
                        head = requestHead
                    case .body:
                        continue
                    case .end:
                        guard let requestHead = head else { continue }
                        head = nil
                        let (keepAlive, closeAfter) = try await respond(to: requestHead, outbound: outbound, channel: channel)
                        if !keepAlive || !requestHead.isKeepAlive {
                            // Closing only the output first waits for the body's pending writes,
                            // which the full close that follows would drop (a client that asked
                            // for `Connection: close` got a cut body).
                            try? await channel.close(mode: .output)
                            return
                        }
                        closeOnNextRequest = closeAfter
                    }
                }
            }
        } catch {
            // A client that went away mid-response: nothing to do but drop the connection.
        }
    }

    /// Writes one response; returns whether the connection may carry another, and whether the
    /// next request on it is to be met by a close (`redirect(closeAfter:)`).
    private func respond(
        to request: HTTPRequestHead, outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, channel: any Channel
    ) async throws -> (Bool, Bool) {
        var target = request.uri
        // A request through a proxy names the whole URL: serve its path (this server is the proxy).
        let absoluteForm = target.lowercased().hasPrefix("http://") || target.lowercased().hasPrefix("https://")
        if absoluteForm, let schemeEnd = target.range(of: "://") {
            let rest = target[schemeEnd.upperBound...]
            target = rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
        }
        let path = String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        let record = RequestRecord(
            method: request.method.rawValue, path: path, target: request.uri, range: request.headers.first(name: "Range"),
            ifRange: request.headers.first(name: "If-Range"), ifMatch: request.headers.first(name: "If-Match"),
            status: 0, bodyBytesSent: 0, finished: false, absoluteForm: absoluteForm,
            host: request.headers.first(name: "Host"), userAgent: request.headers.first(name: "User-Agent"),
            headers: request.headers.map { "\($0.name): \($0.value)" }
        )
        let ports = (channel.localAddress?.port, channel.remoteAddress?.port)
        let (index, plan) = state.withLock { state -> (Int, ResponsePlan) in
            state.log.append(record)
            if let server = ports.0, let client = ports.1 { state.ports[state.log.count - 1] = (server, client) }
            state.inFlight += 1
            state.peakInFlight = max(state.peakInFlight, state.inFlight)
            return (state.log.count - 1, Self.plan(for: request, path: path, state: &state))
        }
        defer { state.withLock { $0.inFlight -= 1 } }
        if plan.silent {
            try await channel.closeFuture.get()
            return (false, false)
        }
        if let raw = plan.raw {
            try await writeRaw(raw, channel: channel, reset: plan.rawReset)
            finish(index)
            return (false, false)
        }
        setStatus(index, plan.status)

        var headers = plan.headers
        headers.add(name: "Server", value: "haul-loopback")
        if !request.isKeepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: plan.status), headers: headers)))
        if let page = plan.page, request.method != .HEAD {
            try await outbound.write(.body(.byteBuffer(channel.allocator.buffer(string: page))))
            try await outbound.write(.end(nil))
            finish(index)
            return (true, false)
        }
        guard request.method != .HEAD, let body = plan.body else {
            try await outbound.write(.end(nil))
            finish(index)
            return (true, plan.closeAfter)
        }
        return (try await send(body, outbound: outbound, channel: channel, index: index), false)
    }

    /// Writes `bytes` to the socket past the HTTP encoder (they are the whole response), then
    /// closes the connection's output once they are out.
    private func writeRaw(_ bytes: [UInt8], channel: any Channel, reset: Bool) async throws {
        let written = try await channel.eventLoop.submit {
            let encoder = try channel.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self)
            let promise = channel.eventLoop.makePromise(of: Void.self)
            encoder.writeAndFlush(NIOAny(ByteBuffer(bytes: bytes)), promise: promise)
            return promise.futureResult
        }.get()
        guard reset else {
            try? await channel.close(mode: .output)
            return
        }
        try? await written.get()
        // A moment for the bytes to leave before the reset (which drops what is still queued).
        try? await Task.sleep(for: .milliseconds(100))
        if let provider = channel as? any SocketOptionProvider {
            try? await provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        }
        // Closed below TLS, if any: no close_notify goes out, as from a server that crashed.
        try? await channel.eventLoop.submit {
            let closer = SocketCloser()
            try channel.pipeline.syncOperations.addHandler(closer, position: .first)
            closer.context?.close(promise: nil)
        }.get()
    }

    private struct BodyPlan {
        var path: String
        var seed: UInt64
        var version: Int
        var range: Range<Int>
        var faults: Faults
        var reset: Bool
        var close: Bool
        var stall: Bool
    }

    private struct ResponsePlan {
        var status: Int
        var headers: HTTPHeaders
        var body: BodyPlan?
        /// Say nothing at all: hold the connection until the client gives up.
        var silent = false
        /// A fixed body instead of the resource's bytes.
        var page: String?
        /// Write these bytes instead of a response, then close.
        var raw: [UInt8]?
        /// End `raw` with a reset.
        var rawReset = false
        /// Meet the next request on this connection with a close.
        var closeAfter = false
    }

    /// Decides status, headers and body of a response; counts the faults it uses.
    private static func plan(for request: HTTPRequestHead, path: String, state: inout State) -> ResponsePlan {
        var headers = HTTPHeaders()
        if let redirect = state.redirects[path] {
            headers.add(name: "Location", value: redirect.location)
            headers.add(name: "Content-Length", value: "0")
            return ResponsePlan(status: redirect.status, headers: headers, body: nil, closeAfter: redirect.closeAfter)
        }
        guard var entry = state.resources[path] else {
            headers.add(name: "Content-Length", value: "0")
            return ResponsePlan(status: 404, headers: headers, body: nil)
        }
        defer { state.resources[path] = entry }
        let faults = entry.faults
        if entry.silencesServed < faults.silentFirst {
            entry.silencesServed += 1
            return ResponsePlan(status: 0, headers: headers, body: nil, silent: true)
        }
        if let raw = faults.rawResponse {
            return ResponsePlan(status: 0, headers: headers, body: nil, raw: raw, rawReset: faults.rawReset)
        }
        for line in faults.headers {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { headers.add(name: String(parts[0]), value: parts[1].trimmingCharacters(in: .whitespaces)) }
        }
        if let status = faults.fixedStatus {
            headers.add(name: "Content-Length", value: "0")
            return ResponsePlan(status: status, headers: headers, body: nil)
        }
        if entry.failuresServed < faults.failFirst || (faults.failWithoutRange && request.headers.first(name: "Range") == nil) {
            entry.failuresServed += 1
            if let retryAfter = faults.retryAfter { headers.add(name: "Retry-After", value: retryAfter) }
            headers.add(name: "Content-Length", value: "0")
            return ResponsePlan(status: faults.failStatus, headers: headers, body: nil)
        }

        if request.headers.first(name: "Range") != nil, entry.errorPagesServed < faults.errorPageOnRangeRequests {
            entry.errorPagesServed += 1
            let page = "<html><body><h1>Service temporarily unavailable</h1></body></html>"
            headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
            headers.add(name: "Content-Length", value: String(page.utf8.count))
            return ResponsePlan(status: 200, headers: headers, body: nil, page: page)
        }
        if request.headers.first(name: "Range") != nil, entry.changesServed < faults.changeOnRangeRequests {
            entry.changesServed += 1
            entry.version += 1
        }
        let tagVersion = entry.version - entry.hiddenChanges
        let strongTag = "\"\(String(entry.seed, radix: 16))-v\(tagVersion)\""
        let etag = faults.weakETag ? "W/" + strongTag : strongTag
        let lastModified = faults.modifiedWhenServed ? httpDate(entry.servedAt) : httpDate(epoch.addingTimeInterval(Double(tagVersion) * 86_400))
        if faults.modifiedWhenServed { headers.add(name: "Date", value: httpDate(Date())) }
        if !faults.omitETag { headers.add(name: "ETag", value: etag) }
        if !faults.omitLastModified { headers.add(name: "Last-Modified", value: lastModified) }
        headers.add(name: "Accept-Ranges", value: faults.ignoreRange ? "none" : "bytes")
        headers.add(name: "Content-Type", value: "application/octet-stream")
        if let disposition = faults.contentDisposition { headers.add(name: "Content-Disposition", value: disposition) }

        if let ifMatch = request.headers.first(name: "If-Match"), ifMatch != "*",
           faults.omitETag || !ifMatch.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }).contains(strongTag) {
            headers.add(name: "Content-Length", value: "0")
            return ResponsePlan(status: 412, headers: headers, body: nil)
        }

        var status = 200
        var range = 0..<entry.size
        if !faults.ignoreRange, let rangeHeader = request.headers.first(name: "Range"),
           ifRangeAllows(request.headers.first(name: "If-Range"), etag: faults.omitETag ? nil : etag, lastModified: faults.omitLastModified ? nil : lastModified) {
            switch parseRange(rangeHeader, size: entry.size) {
            case .none:
                break
            case .unsatisfiable:
                if faults.bare416 {
                    headers.remove(name: "ETag")
                    headers.remove(name: "Last-Modified")
                }
                headers.add(name: "Content-Range", value: "bytes */\(entry.size)")
                headers.add(name: "Content-Length", value: "0")
                return ResponsePlan(status: 416, headers: headers, body: nil)
            case .some(let requested):
                status = 206
                let start = min(requested.lowerBound + faults.rangeOffsetError, entry.size - 1)
                var end = requested.upperBound
                let announced = end
                if faults.shortRangeBy > 0, entry.shortRangesServed < faults.shortRangeCount {
                    entry.shortRangesServed += 1
                    end = max(start + 1, end - faults.shortRangeBy)
                }
                range = start..<end
                let last = (faults.shortRangeUnannounced ? announced : range.upperBound) - 1
                let total = faults.rangeTotalUnknown ? "*" : String(entry.size + faults.rangeTotalError)
                headers.add(name: "Content-Range", value: "bytes \(range.lowerBound)-\(last)/\(total)")
            }
        }
        if !faults.chunked { headers.add(name: "Content-Length", value: String(range.count)) }

        var body = BodyPlan(path: path, seed: entry.seed, version: entry.version, range: range, faults: faults, reset: false, close: false, stall: false)
        if request.method != .HEAD {
            if faults.resetAfterBytes != nil, entry.resetsServed < faults.resetCount {
                entry.resetsServed += 1
                body.reset = true
            } else if faults.closeAfterBytes != nil, entry.closesServed < faults.closeCount {
                entry.closesServed += 1
                body.close = true
            } else if faults.stallAfterBytes != nil, entry.stallsServed < faults.stallCount {
                entry.stallsServed += 1
                body.stall = true
            }
        }
        return ResponsePlan(status: status, headers: headers, body: body)
    }

    private enum RangeRequest {
        case none
        case unsatisfiable
        case some(Range<Int>)
    }

    /// One `bytes=` range (first-last, first-, -suffix); several ranges or bad syntax are ignored.
    private static func parseRange(_ header: String, size: Int) -> RangeRequest {
        let value = header.trimmingCharacters(in: .whitespaces)
        guard value.lowercased().hasPrefix("bytes="), !value.contains(",") else { return .none }
        let spec = value.dropFirst("bytes=".count)
        let bounds = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard bounds.count == 2 else { return .none }
        if bounds[0].isEmpty {
            guard let suffix = Int(bounds[1]), suffix > 0 else { return bounds[1] == "0" ? .unsatisfiable : .none }
            return size == 0 ? .unsatisfiable : .some(max(0, size - suffix)..<size)
        }
        guard let first = Int(bounds[0]), first >= 0 else { return .none }
        guard first < size else { return .unsatisfiable }
        if bounds[1].isEmpty { return .some(first..<size) }
        guard let last = Int(bounds[1]), last >= first else { return .none }
        return .some(first..<min(size, last + 1))
    }

    /// If-Range matches only a strong ETag exactly, or the exact Last-Modified date.
    private static func ifRangeAllows(_ ifRange: String?, etag: String?, lastModified: String?) -> Bool {
        guard let ifRange = ifRange?.trimmingCharacters(in: .whitespaces) else { return true }
        if let etag, !etag.hasPrefix("W/"), ifRange == etag { return true }
        if let lastModified, ifRange == lastModified { return true }
        return false
    }

    private func send(
        _ body: BodyPlan, outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, channel: any Channel, index: Int
    ) async throws -> Bool {
        let faults = body.faults
        let rate = faults.throttleBytesPerSecond
        let slice = rate.map { max(256, min(64 * 1024, $0 / 20)) } ?? 64 * 1024
        let cutoff: Int? = body.reset ? faults.resetAfterBytes : body.close ? faults.closeAfterBytes : body.stall ? faults.stallAfterBytes : nil
        let started = ContinuousClock.now
        var sent = 0
        var position = body.range.lowerBound
        while position < body.range.upperBound {
            var count = min(slice, body.range.upperBound - position)
            if let cutoff { count = min(count, cutoff - sent) }
            if let hold = faults.holdAt.firstIndex(where: { $0 >= position }), faults.holdAt[hold] < body.range.upperBound {
                if faults.holdAt[hold] == position {
                    guard try await held(body.path, until: hold + 1, channel: channel) else { return false }
                    if let next = faults.holdAt.first(where: { $0 > position }) { count = min(count, next - position) }
                } else {
                    count = min(count, faults.holdAt[hold] - position)
                }
            }
            if count > 0 {
                if let rate {
                    // Token bucket from the start of the body: sleep until these bytes are due.
                    let due = Double(sent + count) / Double(rate)
                    let elapsed = started.duration(to: .now)
                    let wait = due - (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
                    if wait > 0 { try await Task.sleep(for: .milliseconds(Int64(wait * 1000))) }
                }
                var buffer = channel.allocator.buffer(capacity: count)
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { pointer in
                    LoopbackContent.fill(UnsafeMutableRawBufferPointer(rebasing: pointer[0..<count]), seed: body.seed, version: body.version, from: position)
                    return count
                }
                try await outbound.write(.body(.byteBuffer(buffer)))
                sent += count
                position += count
                state.withLock { $0.log[index].bodyBytesSent = sent }
            }
            if let cutoff, sent >= cutoff {
                return try await misbehave(body, channel: channel)
            }
        }
        if faults.extraBodyBytes > 0 {
            // More than the Content-Length said: the client must not take it as part of the body.
            let extra = channel.allocator.buffer(repeating: 0x58, count: faults.extraBodyBytes)
            try await outbound.write(.body(.byteBuffer(extra)))
            try await outbound.write(.end(nil))
            finish(index)
            return false
        }
        try await outbound.write(.end(nil))
        finish(index)
        return true
    }

    /// Waits until `releases` holds of `path` were released; false when the client went away first.
    private func held(_ path: String, until releases: Int, channel: any Channel) async throws -> Bool {
        while state.withLock({ ($0.resources[path]?.holdsReleased ?? releases) < releases }) {
            guard channel.isActive else { return false }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// The end of a faulty body: a reset, a clean close, or silence until the client gives up.
    private func misbehave(_ body: BodyPlan, channel: any Channel) async throws -> Bool {
        if body.stall {
            let deadline = ContinuousClock.now + .seconds(120)
            while channel.isActive, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            return false
        }
        if body.reset {
            // SO_LINGER with a zero timeout turns close() into a TCP reset; bytes in flight may be lost.
            if let provider = channel as? any SocketOptionProvider {
                try? await provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
            }
            try? await channel.close()
            return false
        }
        // A clean FIN after every byte written so far: closing only the output waits for pending
        // writes, where a full close would drop them.
        try? await channel.close(mode: .output)
        return false
    }

    private func setStatus(_ index: Int, _ status: Int) {
        state.withLock { $0.log[index].status = status }
    }

    private func finish(_ index: Int) {
        state.withLock { $0.log[index].finished = true }
    }

    private static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}

/// How fast `reading` grows, in units a second: the least-squares slope of its values taken every
/// 50 ms over `duration` (see `LoopbackServer.deliveryRate`).
public func sampledRate(over duration: Duration, _ reading: () -> Int) async throws -> Double {
    let started = ContinuousClock.now
    var samples: [(time: Double, bytes: Double)] = []
    while true {
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        samples.append((seconds, Double(reading())))
        guard elapsed < duration else { break }
        try await Task.sleep(for: .milliseconds(50))
    }
    let count = Double(samples.count)
    let meanTime = samples.reduce(0) { $0 + $1.time } / count
    let meanBytes = samples.reduce(0) { $0 + $1.bytes } / count
    let covariance = samples.reduce(0) { $0 + ($1.time - meanTime) * ($1.bytes - meanBytes) }
    let variance = samples.reduce(0) { $0 + ($1.time - meanTime) * ($1.time - meanTime) }
    return variance > 0 ? covariance / variance : 0
}

/// Closes its channel's socket from the front of the pipeline, below any TLS handler (which would
/// send a close_notify first).
private final class SocketCloser: ChannelOutboundHandler {
    typealias OutboundIn = Any
    private(set) var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }
}
