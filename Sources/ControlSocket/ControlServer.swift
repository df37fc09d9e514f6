import DownloadCore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The runner's control socket: `<state>/haul.sock`, where other shells, their `haul` and `curl`
/// steer the queue over HTTP/1.1 with JSON bodies.
///
/// Only the user running the queue may connect: the socket file is mode 0600 from the moment it
/// exists, and every connection's peer is checked with `SO_PEERCRED` (another uid gets a 403).
/// Every connection has its own task; a client that stops reading holds up nobody (see `events`).
public final class ControlServer: Sendable {
    typealias Connection = NIOAsyncChannel<ControlInbound, HTTPServerResponsePart>
    /// A connection, and when its socket takes more bytes (its gate keeps count).
    typealias Accepted = (connection: Connection, writability: Writability)

    /// Why the socket could not be served, in one line.
    public struct Failure: Error, Hashable, CustomStringConvertible {
        public var description: String
    }

    /// What the server puts up with from a client.
    struct Limits: Sendable {
        /// The largest request body taken.
        var maxBody = 1 << 20
        /// How long a request may take to arrive in full (and an idle connection may stay).
        var requestTimeout = TimeAmount.seconds(10)
        /// The least time between two lines of an event stream (at most ~10 a second).
        var eventInterval = Duration.milliseconds(100)
        /// How long a closing connection is given to read its last answer.
        var linger = TimeAmount.seconds(1)
    }

    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        /// The event streams running, ended (cleanly, with the last chunk) by `shutdown`.
        var streams: [ObjectIdentifier: AsyncStream<SessionSnapshot>.Continuation] = [:]
        var stopping = false
    }

    public let socketPath: String
    let queue: any QueueControl
    let logger: Logger
    let limits: Limits
    private let serverChannel: any Channel
    private let state = Mutex(State())
    private let connections: Connections

    /// Listens on `socketPath`, replacing a stale socket there; the caller holds the queue's lock,
    /// so no other server can own it.
    public static func start(socketPath: String, queue: any QueueControl, logger: Logger) async throws(Failure) -> ControlServer {
        try await start(socketPath: socketPath, queue: queue, logger: logger, limits: Limits())
    }

    static func start(socketPath: String, queue: any QueueControl, logger: Logger, limits: Limits) async throws(Failure) -> ControlServer {
        let bound = try ListeningSocket.bind(socketPath)
        // NIO closes the descriptor it is given when its channel fails after taking it, but not
        // when it fails before: it gets a copy, and this one is closed here in every case. A
        // second close of a number would close whatever file took it meanwhile (a part file, the
        // database). The price, on the one path where NIO never took its copy: that copy stays
        // open, its path unlinked.
        let socket = ListeningSocket.copy(of: bound)
        let copyError = errno
        close(bound)
        guard let socket else {
            unlink(socketPath)
            throw Failure(description: "cannot listen on \(socketPath): \(ListeningSocket.reason(copyError))")
        }
        // Each connection is handed to a task of its own as it is accepted. (Through the async
        // `bind`, an accepted connection waited in the listening channel's stream: one the stream
        // dropped, as the server closed, trapped in NIO (`Deinited NIOAsyncWriter without calling
        // finish()`, swift-nio#2813), and a loaded CI run crashed so.)
        let connections = Connections()
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).childChannelInitializer { channel in
                PeerCredentials.of(channel).map(Optional.some).recover { _ in nil }.flatMapThrowing { peer in
                    let refusal: (HTTPResponseStatus, String)?
                    if let peer, peer.uid == getuid() {
                        refusal = nil
                    } else {
                        logger.warning("control socket: refused a connection", metadata: ["uid": "\(peer.map { String($0.uid) } ?? "?")", "pid": "\(peer.map { String($0.pid) } ?? "?")"])
                        refusal = (.forbidden, "only the user running this queue may steer it")
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
                    let writability = Writability()
                    try channel.pipeline.syncOperations.addHandler(RequestGate(limits: limits, refusal: refusal, writability: writability))
                    connections.start((try Connection(wrappingChannelSynchronously: channel), writability))
                }
            }.withBoundSocket(socket).get()
        } catch {
            unlink(socketPath)
            throw Failure(description: "cannot listen on \(socketPath): \(ListeningSocket.reason(of: error))")
        }
        let server = ControlServer(socketPath: socketPath, queue: queue, logger: logger, limits: limits, channel: channel, connections: connections)
        connections.serve { accepted in await server.serve(accepted.connection, accepted.writability) }
        logger.info("control socket listening", metadata: ["path": "\(socketPath)"])
        return server
    }

    private init(socketPath: String, queue: any QueueControl, logger: Logger, limits: Limits, channel: any Channel, connections: Connections) {
        self.socketPath = socketPath
        self.queue = queue
        self.logger = logger
        self.limits = limits
        serverChannel = channel
        self.connections = connections
    }

    /// Stops listening, removes the socket file, ends every event stream with its last chunk and
    /// closes every connection; returns when all are done.
    public func shutdown() async {
        try? await serverChannel.close()
        unlink(socketPath)
        let (streams, channels) = state.withLock { state in
            state.stopping = true
            return (Array(state.streams.values), state.channels)
        }
        for stream in streams { stream.finish() }
        // A connection between requests is closed now; an event stream's end is written first.
        let streaming = state.withLock { Set($0.streams.keys) }
        for (key, channel) in channels where !streaming.contains(key) { try? await channel.close() }
        // A client that stopped reading cannot take its stream's end: it is closed after a grace.
        let closer = Task {
            try? await Task.sleep(for: .seconds(1))
            let open = self.state.withLock { Array($0.channels.values) }
            for channel in open { try? await channel.close() }
        }
        await connections.ended()
        closer.cancel()
    }

    /// The bytes each event stream has written that its client has not taken yet (for the tests:
    /// a client that stops reading must not make this grow).
    func eventBacklogs() async -> [Int] {
        let channels = state.withLock { state in state.streams.keys.compactMap { state.channels[$0] } }
        var backlogs: [Int] = []
        for channel in channels {
            if let bytes = try? await channel.getOption(.bufferedWritableBytes).get() { backlogs.append(bytes) }
        }
        return backlogs
    }

    // MARK: Connections

    private func serve(_ connection: Connection, _ writability: Writability) async {
        let channel = connection.channel
        let key = ObjectIdentifier(channel)
        let stopping = state.withLock { state in
            state.channels[key] = channel
            return state.stopping
        }
        defer { _ = state.withLock { $0.channels.removeValue(forKey: key) } }
        guard !stopping else {
            // Through `executeThenClose`, which finishes the connection's writer: one dropped
            // unfinished traps in NIO.
            try? await connection.executeThenClose { _, _ in }
            return
        }
        do {
            try await connection.executeThenClose { inbound, outbound in
                for try await message in inbound {
                    switch message {
                    case .refuse(let status, let sentence):
                        logger.debug("control socket: refused a request", metadata: ["status": "\(status.code)", "why": "\(sentence)"])
                        try await write(Reply(status, Wire.Failure(error: sentence)), keepAlive: false, to: outbound)
                        await linger(channel)
                        return
                    case .request(let head, let body):
                        if head.method == .GET, Route.path(head.uri) == "/v1/events" {
                            await events(head, channel: channel, writability: writability, to: outbound)
                            await finish(channel)
                            return
                        }
                        let reply = await respond(head, body)
                        let keepAlive = head.isKeepAlive && reply.then == nil
                        try await write(reply, keepAlive: keepAlive, to: outbound)
                        if let then = reply.then {
                            // The answer is out before the work starts (stop ends this server).
                            await finish(channel)
                            Task { await then() }
                            return
                        }
                        guard keepAlive else {
                            await finish(channel)
                            return
                        }
                    }
                }
            }
        } catch {
            logger.debug("control socket: connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// Returns once everything written has reached the socket: a close drops what is still
    /// waiting to be written (a large answer to a client that reads slower than it is written).
    private func finish(_ channel: any Channel) async {
        try? await channel.close(mode: .output)
    }

    /// Lets the client read an answer sent before its request was read in full: no more is sent,
    /// what comes is dropped, and the connection closes when the client does or after a grace.
    private func linger(_ channel: any Channel) async {
        await finish(channel)
        let closed = channel.closeFuture
        let grace = channel.eventLoop.scheduleTask(in: limits.linger) { channel.close(promise: nil) }
        try? await closed.get()
        grace.cancel()
    }

    private func write(_ reply: Reply, keepAlive: Bool, to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(reply.body.count + 1))
        headers.add(name: "connection", value: keepAlive ? "keep-alive" : "close")
        for (name, value) in reply.headers { headers.add(name: name, value: value) }
        var body = ByteBuffer(bytes: reply.body)
        body.writeString("\n")
        try await outbound.write(contentsOf: [
            .head(HTTPResponseHead(version: .http1_1, status: reply.status, headers: headers)),
            .body(.byteBuffer(body)),
            .end(nil),
        ])
    }

    // MARK: Events

    /// `GET /v1/events`: the queue, then one line per change, at most every `eventInterval`, until the
    /// queue ends, the server stops or the client goes.
    ///
    /// Newest wins per client: the session's pictures reach this stream through a buffer of one, and
    /// no line is made while the client's socket is full (past NIO's high watermark: at most the
    /// line that filled it waits). Nothing queues meanwhile: the next line says what changed since
    /// the line last written, however long the client lagged.
    private func events(_ head: HTTPRequestHead, channel: any Channel, writability: Writability, to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async {
        let (stream, continuation) = AsyncStream.makeStream(of: SessionSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let key = ObjectIdentifier(channel)
        let stopping = state.withLock { state in
            state.streams[key] = continuation
            return state.stopping
        }
        defer { _ = state.withLock { $0.streams.removeValue(forKey: key) } }
        if stopping { continuation.finish() }
        let queue = queue
        let feed = Task {
            for await snapshot in queue.snapshots() { continuation.yield(snapshot) }
            continuation.finish()
        }
        defer { feed.cancel() }
        // The client hung up: nothing more to write (a wait for the next change would never notice).
        channel.closeFuture.whenComplete { _ in continuation.finish() }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/x-ndjson")
        headers.add(name: "transfer-encoding", value: "chunked")
        headers.add(name: "cache-control", value: "no-store")
        let encoder = Wire.encoder()
        do {
            try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)))
            var sent: SessionSnapshot?
            var pictures = stream.makeAsyncIterator()
            while true {
                // While the client's socket is full nothing is written and nothing queues: the
                // stream keeps only the newest picture, and the line made once it empties goes
                // from the picture last sent to that one.
                await writability.wait()
                guard let snapshot = await pictures.next() else { break }
                if let line = sent.map({ EventLine.changes(from: $0, to: snapshot) }) ?? EventLine.snapshot(snapshot) {
                    var buffer = ByteBuffer(bytes: try encoder.encode(line))
                    buffer.writeString("\n")
                    try await outbound.write(.body(.byteBuffer(buffer)))
                    sent = snapshot
                }
                try await Task.sleep(for: limits.eventInterval)
            }
            try await outbound.write(.end(nil))
        } catch {
            logger.debug("control socket: event stream ended", metadata: ["error": "\(error)"])
        }
    }
}

/// The connections the listening socket accepts, each served in a task of its own from the
/// moment it is accepted (`start`, on its event loop); those accepted before the server is ready
/// (`serve`) wait for it. `ended` returns once every one started has ended.
final class Connections: Sendable {
    typealias Accepted = ControlServer.Accepted

    private struct State {
        var server: (@Sendable (Accepted) async -> Void)?
        var waiting: [Accepted] = []
        var running: [UInt64: Task<Void, Never>] = [:]
        var next: UInt64 = 0
    }

    private let state = Mutex(State())

    /// A connection was accepted: served at once, or once the server is ready.
    func start(_ accepted: Accepted) {
        state.withLock { state in
            guard let server = state.server else {
                state.waiting.append(accepted)
                return
            }
            launch(accepted, server, &state)
        }
    }

    /// The server is ready: every connection from now on, and those waiting, go to `server`.
    func serve(_ server: @escaping @Sendable (Accepted) async -> Void) {
        state.withLock { state in
            state.server = server
            for accepted in state.waiting { launch(accepted, server, &state) }
            state.waiting = []
        }
    }

    /// Returns once every connection started has ended (those started meanwhile too).
    func ended() async {
        while let task = state.withLock({ $0.running.values.first }) {
            await task.value
        }
    }

    private func launch(_ accepted: Accepted, _ server: @escaping @Sendable (Accepted) async -> Void, _ state: inout State) {
        let id = state.next
        state.next += 1
        state.running[id] = Task {
            await server(accepted)
            self.finished(id)
        }
    }

    private func finished(_ id: UInt64) {
        _ = state.withLock { $0.running.removeValue(forKey: id) }
    }
}
