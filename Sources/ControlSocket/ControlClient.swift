import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A queue run by another process, steered through its control socket: what another login's UI
/// and `haul add` use, with no idea the queue is not theirs.
///
/// Each call is one request on a connection of its own (a Unix socket costs next to nothing), so a
/// runner that went away is noticed at the next call. `snapshots()` follows `GET /v1/events`.
public final class ControlClient: QueueControl {
    typealias Connection = NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>

    public let socketPath: String
    /// The longest a request waits for its answer.
    let answerTimeout: TimeAmount
    /// The longest a look at the queue (a `GET`) waits for its answer: a runner stopped with Ctrl-Z
    /// held every command, `haul list` too, for the two minutes an add of many URLs may need (a tester).
    static let lookTimeout: TimeAmount = .seconds(15)

    private init(socketPath: String, answerTimeout: TimeAmount) {
        self.socketPath = socketPath
        self.answerTimeout = answerTimeout
    }

    /// A client of the queue served at `socketPath`, or nil when nothing answers there (no file,
    /// a stale socket nobody listens on): the caller then edits the queue's database itself.
    ///
    /// A request whose answer does not come within `answerTimeout` (a hung runner) fails with
    /// `.unavailable`, saying so; the default leaves room for ten thousand URLs queued at once.
    public static func connect(socketPath: String, answerTimeout: TimeAmount = .seconds(120)) async -> ControlClient? {
        guard let connection = try? await open(socketPath) else { return nil }
        try? await connection.channel.close()
        return ControlClient(socketPath: socketPath, answerTimeout: answerTimeout)
    }

    private static func open(_ path: String) async throws -> Connection {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(2))
            .connect(unixDomainSocketPath: path) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try Connection(wrappingChannelSynchronously: channel)
                }
            }
    }

    // MARK: QueueControl

    public func snapshot() async throws(QueueControlError) -> SessionSnapshot {
        try await call(.GET, "/v1/snapshot")
    }

    public func schedule(_ requests: [QueueRequest]) async throws(QueueControlError) -> QueueScheduled {
        var scheduled = QueueScheduled(ids: [])
        // The socket's form has one destination and one set of options: requests that share them
        // go together, in order.
        var start = requests.startIndex
        while start < requests.endIndex {
            var end = start + 1
            while end < requests.endIndex, requests[end].destination == requests[start].destination,
                  requests[end].options == requests[start].options, requests[end].limit == requests[start].limit,
                  requests[start].options.checksum == nil,
                  case .directory = requests[start].destination {
                end += 1
            }
            let made: QueueScheduled = try await call(.POST, "/v1/downloads", body: Self.form(requests[start..<end]))
            scheduled.ids += made.ids
            scheduled.notes += made.notes
            start = end
        }
        return scheduled
    }

    public func pause(_ id: DownloadID) async throws(QueueControlError) {
        try await send(.POST, "/v1/downloads/\(id)/pause")
    }

    @discardableResult
    public func resume(_ id: DownloadID) async throws(QueueControlError) -> DownloadID? {
        let answer: Wire.Resumed = try await call(.POST, "/v1/downloads/\(id)/resume")
        return answer.displaced
    }

    public func cancel(_ id: DownloadID) async throws(QueueControlError) {
        try await send(.POST, "/v1/downloads/\(id)/cancel")
    }

    public func remove(_ id: DownloadID) async throws(QueueControlError) {
        try await send(.DELETE, "/v1/downloads/\(id)")
    }

    public func edit(_ edit: QueueEdit, _ ids: [DownloadID]) async throws(QueueControlError) -> [MadeRoom] {
        let answer: Wire.Edited = try await call(.POST, "/v1/edit", body: Wire.Edit(edit: edit.rawValue, ids: ids.map(\.rawValue)))
        return answer.displaced
    }

    public func move(_ id: DownloadID, to index: Int) async throws(QueueControlError) {
        try await send(.POST, "/v1/downloads/\(id)/move", body: Wire.Move(to: index))
    }

    public func pauseAll() async throws(QueueControlError) {
        try await send(.POST, "/v1/pause-all")
    }

    public func resumeAll() async throws(QueueControlError) {
        try await send(.POST, "/v1/resume-all")
    }

    public func purgePaused(only ids: [DownloadID]?) async throws(QueueControlError) {
        guard let ids else { return try await send(.POST, "/v1/purge") }
        try await send(.POST, "/v1/purge", body: Wire.Purge(ids: ids.map(\.rawValue)))
    }

    public func setMaxActive(_ count: Int) async throws(QueueControlError) {
        try await send(.PUT, "/v1/max-active", body: Wire.MaxActive(maxActive: count))
    }

    public func setLimit(_ bytesPerSecond: Int64?) async throws(QueueControlError) {
        try await send(.PUT, "/v1/limit", body: Wire.Limit(limit: bytesPerSecond))
    }

    public func setLimit(_ bytesPerSecond: Int64?, for id: DownloadID) async throws(QueueControlError) {
        try await send(.PUT, "/v1/downloads/\(id)/limit", body: Wire.Limit(limit: bytesPerSecond))
    }

    public func clearCompleted() async throws(QueueControlError) -> Int {
        let answer: Wire.Cleared = try await call(.POST, "/v1/clear-completed")
        return answer.cleared
    }

    public func history(_ id: DownloadID?) async throws(QueueControlError) -> [HistoryEntry] {
        let lines: [Wire.HistoryLine] = try await call(.GET, id.map { "/v1/downloads/\($0)/history" } ?? "/v1/history")
        return lines.compactMap(\.entry)
    }

    public func stop() async throws(QueueControlError) {
        try await send(.POST, "/v1/stop")
    }

    /// The queue as the runner publishes it, rebuilt from `GET /v1/events`: its first line, then each
    /// line of changes. Newest wins; ends when the connection does (the runner exited).
    public func snapshots() -> AsyncStream<SessionSnapshot> {
        let (stream, continuation) = AsyncStream.makeStream(of: SessionSnapshot.self, bufferingPolicy: .bufferingNewest(1))
        let path = socketPath
        let task = Task {
            await Self.follow(path, into: continuation)
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private static func follow(_ path: String, into continuation: AsyncStream<SessionSnapshot>.Continuation) async {
        guard let connection = try? await open(path) else { return }
        try? await connection.executeThenClose { inbound, outbound in
            try await outbound.write(contentsOf: [.head(head(.GET, "/v1/events", bodyLength: nil)), .end(nil)])
            var pending = ByteBuffer()
            var current: SessionSnapshot?
            let decoder = JSONDecoder()
            for try await part in inbound {
                switch part {
                case .head(let head):
                    guard head.status == .ok || head.status.code < 200 else { return }
                case .body(var chunk):
                    pending.writeBuffer(&chunk)
                    while let newline = pending.readableBytesView.firstIndex(of: UInt8(ascii: "\n")),
                          let line = pending.readSlice(length: newline - pending.readerIndex) {
                        pending.moveReaderIndex(forwardBy: 1)
                        // A line that is not an event: the stream is not haul's, stop following.
                        guard let event = try? decoder.decode(EventLine.self, from: Data(line.readableBytesView)) else { return }
                        let snapshot = event.applied(to: current)
                        current = snapshot
                        continuation.yield(snapshot)
                    }
                    pending.discardReadBytes()
                case .end:
                    return
                }
            }
        }
    }

    // MARK: Requests

    static func form(_ requests: ArraySlice<QueueRequest>) -> QueueForm {
        let first = requests.first
        var form = QueueForm(urls: requests.map(\.url.absoluteString))
        switch first?.destination {
        case .directory(let path): form.dir = path
        case .file(let path): form.output = path
        case nil: break
        }
        if let options = first?.options {
            form.headers = options.headers.map(\.description)
            form.checksum = options.checksum?.description
            form.connections = options.connections
        }
        form.limit = first?.limit
        return form
    }

    private func send(_ method: HTTPMethod, _ path: String) async throws(QueueControlError) {
        let _: Wire.Done = try await call(method, path)
    }

    private func send(_ method: HTTPMethod, _ path: String, body: some Encodable) async throws(QueueControlError) {
        let _: Wire.Done = try await call(method, path, body: body)
    }

    private func call<T: Decodable>(_ method: HTTPMethod, _ path: String) async throws(QueueControlError) -> T {
        try await call(method, path, data: nil)
    }

    private func call<T: Decodable>(_ method: HTTPMethod, _ path: String, body: some Encodable) async throws(QueueControlError) -> T {
        try await call(method, path, data: Wire.encode(body))
    }

    /// One request and its decoded answer; the server's sentence as the error for any other status.
    private func call<T: Decodable>(_ method: HTTPMethod, _ path: String, data: Data?) async throws(QueueControlError) -> T {
        let (status, body) = try await exchange(method, path, data)
        guard (200..<300).contains(status.code) else {
            let sentence = (try? JSONDecoder().decode(Wire.Failure.self, from: body))?.error ?? "the queue answered \(status.code) \(status.reasonPhrase)"
            throw QueueControlError(status == .serviceUnavailable ? .closed : .refused, sentence)
        }
        do {
            return try JSONDecoder().decode(T.self, from: body)
        } catch {
            throw QueueControlError(.unavailable, "the haul running the queue answered something haul cannot read")
        }
    }

    private func exchange(_ method: HTTPMethod, _ path: String, _ data: Data?) async throws(QueueControlError) -> (HTTPResponseStatus, Data) {
        let connection: Connection
        do {
            connection = try await Self.open(socketPath)
        } catch {
            throw QueueControlError(.unavailable, "no haul runs this queue: nothing answers on \(socketPath)")
        }
        // A runner that takes the connection and never answers (hung) must not hold a command
        // forever: the connection is closed after `answerTimeout`, and the call says so.
        let channel = connection.channel
        let started = ContinuousClock.now
        let answerTimeout = method == .GET ? min(answerTimeout, Self.lookTimeout) : answerTimeout
        let timeout = channel.eventLoop.scheduleTask(in: answerTimeout) { channel.close(promise: nil) }
        defer { timeout.cancel() }
        let answer: (HTTPResponseStatus, Data)?
        do {
            answer = try await connection.executeThenClose { inbound, outbound in
                var parts: [HTTPClientRequestPart] = [.head(Self.head(method, path, bodyLength: data?.count))]
                if let data { parts.append(.body(.byteBuffer(ByteBuffer(bytes: data)))) }
                parts.append(.end(nil))
                try await outbound.write(contentsOf: parts)
                var status: HTTPResponseStatus?
                var body = Data()
                for try await part in inbound {
                    switch part {
                    // 1xx answers come before the real one.
                    case .head(let head) where head.status.code >= 200: status = head.status
                    case .head: break
                    case .body(let chunk): body.append(contentsOf: chunk.readableBytesView)
                    case .end: if let status { return (status, body) }
                    }
                }
                return nil
            }
        } catch {
            answer = nil
        }
        guard let answer else {
            if ContinuousClock.now - started >= .nanoseconds(answerTimeout.nanoseconds) {
                throw QueueControlError(.unavailable, "the haul running the queue did not answer within \(Duration.nanoseconds(answerTimeout.nanoseconds))")
            }
            throw QueueControlError(.unavailable, "the haul running the queue went away before it answered")
        }
        return answer
    }

    private static func head(_ method: HTTPMethod, _ path: String, bodyLength: Int?) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.add(name: "host", value: "haul")
        if let bodyLength {
            headers.add(name: "content-type", value: "application/json")
            headers.add(name: "content-length", value: String(bodyLength))
        }
        headers.add(name: "connection", value: "close")
        return HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)
    }
}
