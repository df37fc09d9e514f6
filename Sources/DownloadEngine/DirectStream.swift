#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AsyncHTTPClient
import CSplice
import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

#if os(Linux)
/// One GET over plain http without a proxy, on a socket of haul's own (or one a whole response
/// left open, `IdleConnections`) and a thread of its own (one of `BlockingThreads`, kept for the
/// next request): once the transfer says where the body goes, its bytes move from the socket into
/// the part file inside the kernel (`splice` through a pipe), never copied through haul's memory.
///
/// That copy is what a download mostly costs (issue 20's profile: copying out of the socket was
/// a third of one big file's CPU); https and proxies keep AsyncHTTPClient (`ResponseStream`).
/// What happens to the response is decided by the same `BodyRelay` as there: the head, the early
/// bytes held in memory, the clamp to the total or the part's end, the rate limits, the stall
/// watch. A chunked body, and the bytes before the sink is known, are read into memory as there.
///
/// Every wait is a `poll` on the socket and a wake pipe, so `cancel()` and the transfer's
/// decisions reach the thread at once; nothing else ever blocks it, but the name lookup.
final class DirectStream: ResponseBody {
    typealias Relay = BodyRelay<CheckedContinuation<HTTPResponseHead, any Error>, CheckedContinuation<Void, any Error>, Paused>

    /// A pause of reading (too many bytes held): the thread waits until the relay lets it go.
    struct Paused: Sendable {}

    /// A host name that does not resolve.
    struct HostNotFound: Error {}

    struct Timeouts: Sendable {
        var connect: TimeAmount
        /// From the start to the response head.
        var head: TimeAmount
        /// No byte for this long, while the stream is ready for more.
        var stall: TimeAmount
    }

    private struct State {
        var relay = Relay()
        /// Reading waits for the relay (a pause it has not let go yet).
        var paused = false
        /// The transfer stopped the request, or the sink took all it wanted.
        var stop: (any Error)?
        /// The thread ended, with this error (nil: the body finished); nil while it runs.
        var finished: Result<Void, any Error>?
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Bytes moved with one splice: the pipe's size. Not more: 1 GiB spliced 1 MiB at a time took
    /// 0.33–0.42 s in most runs and 0.69–2.28 s in 5 of 16 (in turns; all five runs of one
    /// benchmark), three quarters of it in copying the pipe's pages into the page cache; 512 KiB
    /// had such runs too (3 of 9), 256 KiB none (16 runs, 0.41–0.53 s). `dd` shows the same edge
    /// on this machine, whatever the order of the sizes: 1 GiB written 1 MiB at a time took
    /// 0.70–1.43 s of system time, 512 KiB or less 0.15–0.49 s.
    static let spliceSize = 256 << 10
    /// Bytes read at once into memory (held bytes, chunked bodies).
    static let readSize = 256 << 10
    /// Bytes read at once while the head is not complete.
    static let headReadSize = 64 << 10
    /// Room made for a body of known length with the bytes read with its head: a small file is
    /// held whole while its head is decided on.
    static let holdRoom = 256 << 10

    private let state = Mutex(State())
    private let progress: TransferProgress
    private let throttle: Throttle
    private let timeouts: Timeouts
    private let url: URL
    /// The wake pipe: written by whoever wants the thread to look at the state again.
    private let wake: (read: Int32, write: Int32)
    /// Why the wake pipe could not be made (0: it was).
    private let wakeError: Int32

    /// Starts the request for `url` (plain http; `headers` as the transfer built them).
    init(url: URL, headers: HTTPHeaders, progress: TransferProgress, throttle: Throttle, timeouts: Timeouts) {
        self.url = url
        self.progress = progress
        self.throttle = throttle
        self.timeouts = timeouts
        var fds: [Int32] = [-1, -1]
        wakeError = haul_pipe(&fds) == 0 ? 0 : errno
        wake = wakeError == 0 ? (fds[0], fds[1]) : (-1, -1)
        let request = Self.request(url, headers: headers)
        BlockingThreads.shared.run { [self] in run(request: request) }
    }

    deinit {
        if wake.read >= 0 { close(wake.read) }
        if wake.write >= 0 { close(wake.write) }
    }

    /// Whether a request for `url` goes this way: plain http, no proxy.
    static func carries(_ url: URL, proxy: ProxySettings.Server?) -> Bool {
        proxy == nil && url.scheme?.lowercased() == "http" && url.host.map { !$0.isEmpty } == true
    }

    /// The request's bytes: the target exactly as the URL writes it (`/caf%E9.bin` too), `Host`
    /// as AsyncHTTPClient writes it, and the transfer's headers; HTTP/1.1 keeps the connection
    /// for the next request (`IdleConnections`).
    static func request(_ url: URL, headers: HTTPHeaders) -> [UInt8] {
        var text = "GET \(RequestTarget.expected(url)) HTTP/1.1\r\n"
        if !headers.contains(name: "Host") { text += "Host: \(RequestTarget.authority(url))\r\n" }
        for (name, value) in headers {
            text += "\(name): \(value)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8)
    }

    // MARK: What the transfer calls

    func head() async throws -> (HTTPResponseHead, URL?) {
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponseHead, any Error>) in
                if let ready = state.withLock({ $0.relay.awaitHead(continuation) }) { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
        return (head, Transfer.withoutCredentials(url))
    }

    func early(_ count: Int) async throws -> [UInt8] {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if let ready = state.withLock({ $0.relay.awaitEarly(count, continuation) }) { continuation.resume(with: ready) }
            }
        } onCancel: {
            cancel()
        }
        return state.withLock { $0.relay.earlyBytes(count) }
    }

    func write(into sink: BodySink) async throws -> ResponseStream.End {
        let running = state.withLock { state in
            let start = state.relay.relay(to: sink)
            var stop = start.stopRequest
            if let write = start.write, case .stop = progress.carryOut(write, on: &state.relay) { stop = true }
            if stop, state.stop == nil { state.stop = SinkFull() }
            if start.resume != nil { state.paused = false }
            return state.finished == nil
        }
        // A small body is often all read (and now written) before the sink came: no thread to wake.
        if running { signal() }
        let error = await withTaskCancellationHandler {
            await finished()
        } onCancel: {
            cancel()
        }
        return try state.withLock { $0.relay.outcome(taskError: error) }.get()
    }

    func discard() {
        state.withLock { state in
            if state.relay.drop() != nil { state.paused = false }
        }
        cancel()
    }

    func cancel() {
        state.withLock { state in
            _ = state.relay.cancel()
            if state.stop == nil { state.stop = HTTPClientError.cancelled }
        }
        signal()
    }

    var position: Int64? {
        state.withLock { $0.relay.position }
    }

    /// Waits for the thread's end: its error, nil when the body finished.
    private func finished() async -> (any Error)? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.finished != nil { return true }
                state.finishWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
        return state.withLock { state in
            if case .failure(let error) = state.finished { return error }
            return nil
        }
    }

    // MARK: The thread

    private func run(request: [UInt8]) {
        var socket: Int32 = -1
        var error: (any Error)?
        var reusable = false
        let key = IdleConnections.key(url)
        do {
            guard wakeError == 0 else { throw IOError(errnoCode: wakeError, reason: "pipe") }
            let start = NIODeadline.now()
            let headDeadline = start + timeouts.head
            var reused = false
            if let idle = IdleConnections.shared.take(key) {
                (socket, reused) = (idle, true)
            } else {
                socket = try connect(deadline: start + timeouts.connect, headDeadline: headDeadline)
            }
            var answer: (head: Head, rest: ByteBuffer)
            while true {
                do {
                    try send(request, on: socket, deadline: headDeadline)
                    answer = try readHead(socket, deadline: headDeadline)
                    // A server that times a kept connection out may say so (408) as it closes it:
                    // that is no answer to this request.
                    guard reused, answer.head.response.status == .requestTimeout else { break }
                } catch let failure where reused && socketBytes.load(ordering: .relaxed) == 0 && Self.closedUnanswered(failure) {
                    // A kept connection the server closed meanwhile (its keep-alive ran out).
                }
                // The same request once more, on a new connection, as every HTTP client does for a GET.
                close(socket)
                socket = -1
                reused = false
                socketBytes.store(0, ordering: .relaxed)
                socket = try connect(deadline: NIODeadline.now() + timeouts.connect, headDeadline: headDeadline)
            }
            // Handed on, so that the relay holds the only reference to the first bytes' buffer
            // (and adds to it in place).
            let head = answer.head
            var rest = answer.rest
            answer.rest = ByteBuffer()
            let headBytes = socketBytes.load(ordering: .relaxed) - Int64(rest.readableBytes)
            let waiter = state.withLock { state -> CheckedContinuation<HTTPResponseHead, any Error>? in
                guard case .settled(let waiter) = state.relay.headArrived(head.response) else { return nil }
                return waiter
            }
            waiter?.resume(returning: head.response)
            do {
                try body(socket, framing: head.framing, rest: &rest)
            } catch let stop as SinkFull {
                // The sink took all it wanted; the connection is still good if the body was whole.
                error = stop
            }
            if case .length(let length) = head.framing, socketBytes.load(ordering: .relaxed) == headBytes + length {
                reusable = Self.keepsAlive(head.response)
            }
        } catch let caught {
            error = caught
        }
        if socket >= 0 {
            if reusable, state.withLock({ $0.stop == nil || $0.stop is SinkFull }) {
                IdleConnections.shared.put(key, socket)
            } else {
                close(socket)
            }
        }
        closePipe()
        finish(error)
    }

    /// Bytes this stream took from its socket (the head, the body); a kept connection is kept
    /// again only when they are exactly the head and its `Content-Length`.
    private let socketBytes = Atomic<Int64>(0)

    /// Whether the connection may carry the next request: HTTP/1.1 without `Connection: close`.
    static func keepsAlive(_ head: HTTPResponseHead) -> Bool {
        guard head.version == .http1_1 else { return false }
        return !head.headers[canonicalForm: "Connection"].contains { $0.lowercased() == "close" }
    }

    /// A failure that says the server closed the connection before a byte of the answer came.
    static func closedUnanswered(_ error: any Error) -> Bool {
        if let client = error as? HTTPClientError, client == .remoteConnectionClosed { return true }
        if let io = error as? IOError { return [ECONNRESET, EPIPE, ECONNABORTED].contains(io.errnoCode) }
        return false
    }

    /// The request ended (`error`: how; nil when the body finished): every byte taken reaches the
    /// file, and whoever waits hears.
    private func finish(_ error: (any Error)?) {
        let (end, early, waiters) = state.withLock { state in
            let end = state.relay.ended(error)
            if let write = end.write { _ = progress.carryOut(write, on: &state.relay) }
            state.finished = error.map { .failure($0) } ?? .success(())
            let waiters = state.finishWaiters
            state.finishWaiters = []
            return (end, state.relay.wakeEarly(), waiters)
        }
        end.failHead?.resume(throwing: error ?? HTTPClientError.remoteConnectionClosed)
        if let (waiter, ready) = early { waiter.resume(with: ready) }
        for waiter in waiters { waiter.resume() }
    }

    /// One address a name resolved to, copied out of `getaddrinfo`'s list.
    private struct Address: @unchecked Sendable {
        var family: Int32
        var storage: sockaddr_storage
        var length: socklen_t
    }

    /// The answer of a name lookup running on a thread of its own.
    private final class Lookup: Sendable {
        let answer = Mutex<[Address]?>(nil)
    }

    /// How long a connection attempt goes on alone before the next address is tried beside it
    /// (RFC 8305's connection attempt delay).
    static let attemptDelay = TimeAmount.milliseconds(250)

    /// Opens a connection to the URL's host and port: its addresses tried IPv6 and IPv4 in turns,
    /// a new attempt beside the others every `attemptDelay` (Happy Eyeballs, as AsyncHTTPClient
    /// connects); the first to connect wins.
    private func connect(deadline: NIODeadline, headDeadline: NIODeadline) throws -> Int32 {
        let until = min(deadline, headDeadline)
        let timeout: any Error = deadline <= headDeadline ? HTTPClientError.connectTimeout : HTTPClientError.deadlineExceeded
        let addresses = try resolve(until: until, timeout: timeout)
        var pending: [Int32] = []
        defer { for fd in pending { close(fd) } }
        var next = 0
        var lastError = ECONNREFUSED
        var nextStart = NIODeadline.now()
        while true {
            if let stop = state.withLock({ $0.stop }) { throw stop }
            let now = NIODeadline.now()
            guard now < until else { throw timeout }
            if next < addresses.count, pending.isEmpty || now >= nextStart {
                let address = addresses[next]
                next += 1
                nextStart = now + Self.attemptDelay
                let fd = Glibc.socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard fd >= 0 else {
                    lastError = errno
                    continue
                }
                var storage = address.storage
                let result = withUnsafePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, address.length) }
                }
                if result == 0 { return fd }
                if errno == EINPROGRESS {
                    pending.append(fd)
                } else {
                    lastError = errno
                    close(fd)
                }
                continue
            }
            if pending.isEmpty { throw IOError(errnoCode: lastError, reason: "connect") }
            var fds = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)] + pending.map { pollfd(fd: $0, events: Int16(POLLOUT), revents: 0) }
            let wakeAt = next < addresses.count ? min(until, nextStart) : until
            let result = poll(&fds, nfds_t(fds.count), Self.milliseconds(until: wakeAt))
            if result < 0, errno != EINTR { throw IOError(errnoCode: errno, reason: "poll") }
            if fds[0].revents != 0 { drainWake() }
            for (index, entry) in fds.enumerated().dropFirst().reversed() where entry.revents != 0 {
                let fd = pending.remove(at: index - 1)
                var code: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length)
                if code == 0 { return fd }
                lastError = code
                close(fd)
                // A refusal starts the next attempt at once.
                nextStart = NIODeadline.now()
            }
        }
    }

    /// The URL's addresses, IPv6 and IPv4 in turns (the family `getaddrinfo` put first, first).
    /// The lookup runs on a thread of its own: a cancel or the deadline does not wait for it.
    private func resolve(until deadline: NIODeadline, timeout: any Error) throws -> [Address] {
        let written = url.host ?? ""
        let host = written.hasPrefix("[") && written.hasSuffix("]") ? String(written.dropFirst().dropLast()) : written
        let port = url.port ?? 80
        // An address written out needs no lookup (and no thread).
        let numeric = Self.addresses(of: host, port: port, numericOnly: true)
        if !numeric.isEmpty { return numeric }
        let lookup = Lookup()
        // Holds the stream (and so its wake pipe) until the lookup returns.
        BlockingThreads.shared.run { [self] in
            let found = Self.addresses(of: host, port: port)
            lookup.answer.withLock { $0 = found }
            signal()
        }
        while true {
            if let found = lookup.answer.withLock({ $0 }) {
                guard !found.isEmpty else { throw HostNotFound() }
                return found
            }
            guard NIODeadline.now() < deadline else { throw timeout }
            _ = try waitFor(-1, events: 0, until: deadline)
        }
    }

    /// `getaddrinfo`'s answer, copied, IPv6 and IPv4 in turns; empty when the name does not resolve
    /// (or, `numericOnly`, is not an address).
    private static func addresses(of host: String, port: Int, numericOnly: Bool = false) -> [Address] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        // Numeric only: an address written out, never a query of the name service.
        if numericOnly { hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0 else { return [] }
        defer { freeaddrinfo(found) }
        var first: [Address] = []
        var other: [Address] = []
        var next = found
        while let info = next {
            next = info.pointee.ai_next
            guard let socketAddress = info.pointee.ai_addr, Int(info.pointee.ai_addrlen) <= MemoryLayout<sockaddr_storage>.size else { continue }
            var storage = sockaddr_storage()
            withUnsafeMutableBytes(of: &storage) { target in
                target.copyMemory(from: UnsafeRawBufferPointer(start: socketAddress, count: Int(info.pointee.ai_addrlen)))
            }
            let address = Address(family: info.pointee.ai_family, storage: storage, length: info.pointee.ai_addrlen)
            if first.isEmpty || first[0].family == address.family { first.append(address) } else { other.append(address) }
        }
        var ordered: [Address] = []
        for index in 0..<max(first.count, other.count) {
            if index < first.count { ordered.append(first[index]) }
            if index < other.count { ordered.append(other[index]) }
        }
        return ordered
    }

    /// Milliseconds from now to `deadline`, rounded up, for `poll` (-1: no deadline).
    private static func milliseconds(until deadline: NIODeadline) -> Int32 {
        if deadline == .distantFuture { return -1 }
        let left = (deadline - NIODeadline.now()).nanoseconds
        return left <= 0 ? 0 : Int32(clamping: (left + 999_999) / 1_000_000)
    }

    private func send(_ request: [UInt8], on socket: Int32, deadline: NIODeadline) throws {
        var sent = 0
        while sent < request.count {
            let result = request.withUnsafeBytes { bytes in
                Glibc.send(socket, bytes.baseAddress.map { $0 + sent }, request.count - sent, Int32(MSG_NOSIGNAL))
            }
            if result > 0 {
                sent += result
            } else if result < 0, errno == EAGAIN || errno == EINTR {
                guard try waitUntilReady(socket, events: POLLOUT, until: deadline) else { throw HTTPClientError.deadlineExceeded }
            } else {
                throw IOError(errnoCode: result < 0 ? errno : EPIPE, reason: "send")
            }
        }
    }

    private struct Head {
        var response: HTTPResponseHead
        var framing: HTTPWire.Framing
    }

    /// Reads until the response head is complete; returns it and the body bytes read with it, in
    /// a buffer with room for the rest of a body of known length up to `holdRoom` (the relay holds
    /// it as it is and adds what comes next in place: no copy of the first bytes, no growth).
    private func readHead(_ socket: Int32, deadline: NIODeadline) throws -> (Head, ByteBuffer) {
        var bytes: [UInt8] = []
        while true {
            guard try waitUntilReady(socket, events: POLLIN, until: deadline) else { throw HTTPClientError.deadlineExceeded }
            // Into memory that is never zeroed first: a zeroed 64 KiB buffer cost every response
            // 64 KiB of `memset`, most of it for bytes the read never reached.
            var count = 0
            var code: Int32 = 0
            let chunk = [UInt8](unsafeUninitializedCapacity: Self.headReadSize) { buffer, initialized in
                count = read(socket, buffer.baseAddress, buffer.count)
                if count < 0 { code = errno }
                initialized = max(0, count)
            }
            if count < 0 {
                if code == EAGAIN || code == EINTR { continue }
                throw IOError(errnoCode: code, reason: "read")
            }
            // Closed with nothing said, or half a head: as AsyncHTTPClient says either.
            if count == 0 { throw bytes.isEmpty ? HTTPClientError.remoteConnectionClosed : HTTPParserError.invalidEOFState }
            socketBytes.add(Int64(count), ordering: .relaxed)
            if bytes.isEmpty { bytes = chunk } else { bytes += chunk }
            let parsed: (head: HTTPWire.Head, length: Int)?
            do {
                parsed = try HTTPWire.parseHead(bytes)
            } catch {
                throw Self.parserError(error)
            }
            guard let (wire, length) = parsed else { continue }
            var headers = HTTPHeaders()
            for field in wire.fields { headers.add(name: field.name, value: field.value) }
            let response = HTTPResponseHead(
                version: HTTPVersion(major: wire.major, minor: wire.minor),
                status: HTTPResponseStatus(statusCode: wire.status, reasonPhrase: wire.reason),
                headers: headers
            )
            var room = bytes.count - length
            if case .length(let total) = wire.framing { room = max(room, Int(min(total, Int64(Self.holdRoom)))) }
            var rest = ByteBufferAllocator().buffer(capacity: room)
            rest.writeBytes(bytes[length...])
            return (Head(response: response, framing: wire.framing), rest)
        }
    }

    /// NIO's parser error for the same fault, so a server gets the same words either way.
    static func parserError(_ failure: HTTPWire.Failure) -> HTTPParserError {
        switch failure {
        case .notHTTP: .invalidConstant
        case .invalidHeader: .invalidHeaderToken
        case .invalidContentLength: .invalidContentLength
        case .headTooLarge: .headerOverflow
        case .invalidChunk: .invalidChunkSize
        case .lengthWithTransferEncoding: .unexpectedContentLength
        }
    }

    // MARK: The body

    /// Reads the body as `framing` says it ends, `rest` its first bytes (taken: left empty).
    private func body(_ socket: Int32, framing: HTTPWire.Framing, rest: inout ByteBuffer) throws {
        var first = rest
        rest = ByteBuffer()
        switch framing {
        case .none:
            return
        case .chunked:
            var decoder = HTTPWire.ChunkedDecoder()
            var buffer = ByteBuffer()
            try chunked(first, &decoder)
            first = ByteBuffer()
            while !decoder.isDone {
                let generation = throttle.generation
                guard let chunk = try readChunk(socket, limit: readStep(Self.readSize), into: &buffer) else { throw HTTPParserError.invalidEOFState }
                try chunked(chunk, &decoder, readSince: generation)
            }
        case .length, .untilClose:
            var left: Int64? = if case .length(let length) = framing { length } else { nil }
            if first.readableBytes > 0 {
                if let left, left < first.readableBytes { first.moveWriterIndex(to: first.readerIndex + Int(left)) }
                let count = first.readableBytes
                try received(first)
                first = ByteBuffer()
                left = left.map { $0 - Int64(count) }
            }
            var splices = true
            var buffer = ByteBuffer()
            while left.map({ $0 > 0 }) ?? true {
                let wanted = left.map { Int(min($0, Int64(Self.spliceSize))) } ?? Self.spliceSize
                let moved: Int
                if splices, try readyToSplice(socket) {
                    switch try splice(socket, wanted) {
                    case .moved(let count):
                        moved = count
                    case .end:
                        moved = 0
                    case .fallBack(let count):
                        splices = false
                        moved = count
                        if count == 0 { continue }
                    }
                } else {
                    let generation = throttle.generation
                    guard let chunk = try readChunk(socket, limit: readStep(min(wanted, Self.readSize)), into: &buffer) else {
                        moved = 0
                        break
                    }
                    try received(chunk, readSince: generation)
                    moved = chunk.readableBytes
                }
                if moved == 0 { break }
                left = left.map { $0 - Int64(moved) }
            }
            // A body shorter than its length: cut off (AsyncHTTPClient's parser says the same).
            if let left, left > 0 { throw HTTPParserError.invalidEOFState }
        }
    }

    /// Hands the data of a chunked body's next bytes to the relay.
    private func chunked(_ buffer: ByteBuffer, _ decoder: inout HTTPWire.ChunkedDecoder, readSince generation: UInt64? = nil) throws {
        let ranges: [Range<Int>]
        do {
            ranges = try buffer.withUnsafeReadableBytes { raw throws(HTTPWire.Failure) in try decoder.decode(raw) }
        } catch {
            throw Self.parserError(error)
        }
        for range in ranges where !range.isEmpty {
            if let slice = buffer.getSlice(at: buffer.readerIndex + range.lowerBound, length: range.count) { try received(slice, readSince: generation) }
        }
    }

    /// Whether the next bytes may be spliced: the sink is known and nothing waits in memory (what
    /// waits is written first). Waits while reading is paused; throws when the request stops.
    private func readyToSplice(_ socket: Int32) throws -> Bool {
        while true {
            let (ready, waitForRelay) = try state.withLock { state throws -> (Bool, Bool) in
                if let stop = state.stop { throw stop }
                if state.paused { return (false, true) }
                guard case .relaying = state.relay.body else { return (false, false) }
                return (true, false)
            }
            guard waitForRelay else {
                // What waits in memory goes first.
                if ready { try flushQueue() }
                return ready
            }
            try waitForWake()
        }
    }

    /// What a splice did.
    private enum Spliced {
        /// This many bytes left the socket (and those the sink took are in the file).
        case moved(Int)
        /// The socket's end.
        case end
        /// The kernel cannot splice here (a file it does not splice into, TCP's urgent mark, where
        /// splice stops while a read goes on): read from here on. `moved` bytes left the socket.
        case fallBack(moved: Int)
    }

    /// Moves up to `count` bytes from the socket into the file.
    private func splice(_ socket: Int32, _ count: Int) throws -> Spliced {
        let pipe = try dataPipe()
        let generation = throttle.generation
        let step = readStep(count)
        var moved = 0
        while true {
            try waitForData(socket)
            moved = haul_splice(socket, pipe.write, nil, step, 1)
            if moved > 0 {
                socketBytes.add(Int64(moved), ordering: .relaxed)
                break
            }
            if moved == 0 {
                // The end, or an urgent mark with more bytes after it: only a read tells them apart.
                var byte: UInt8 = 0
                return recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0 ? .end : .fallBack(moved: 0)
            }
            if errno == EINTR { continue }
            // The socket is readable (poll said so), yet splice moves nothing: an urgent mark.
            if errno == EAGAIN || errno == EINVAL || errno == ENOSYS { return .fallBack(moved: 0) }
            throw IOError(errnoCode: errno, reason: "read")
        }
        let received = state.withLock { $0.relay.receivedInPipe(moved) }
        guard case .write(let write) = received else {
            if case .stop(let error) = received { throw error }
            return .moved(moved)
        }
        var offset = write.position
        var left = write.count
        var code: Int32?
        while left > 0 {
            let result = haul_splice(pipe.read, write.descriptor, &offset, left, 0)
            if result > 0 {
                left -= result
            } else if result < 0, errno == EINTR {
                continue
            } else if result < 0, errno == EINVAL, left == write.count {
                // A file the kernel does not splice into: these bytes are written from memory,
                // the next ones read.
                let (written, failed) = copyOut(of: pipe.read, count: left, to: write.descriptor, at: offset)
                try finishSplice(write, written: written, error: failed, readSince: generation)
                return .fallBack(moved: moved)
            } else {
                code = result < 0 ? errno : EIO
                break
            }
        }
        try finishSplice(write, written: write.count - left, error: code, readSince: generation)
        return .moved(moved)
    }

    /// Tells the relay what a splice wrote, and carries out what follows: the rate limit's wait,
    /// or the stop (thrown).
    private func finishSplice(_ write: Relay.Write, written: Int, error code: Int32?, readSince generation: UInt64) throws {
        let next = state.withLock { progress.wrote(write, written: written, error: code, on: &$0.relay) }
        switch next {
        case .stop(let error): throw error
        case .readOn(let took, _): try pauseForLimit(took, readSince: generation)
        case .pause, .write: break
        }
    }

    /// Writes `count` bytes waiting in `pipe` at `offset` of `descriptor` through memory.
    private func copyOut(of pipe: Int32, count: Int, to descriptor: Int32, at offset: Int64) -> (Int, Int32?) {
        var buffer = [UInt8](repeating: 0, count: count)
        var have = 0
        while have < count {
            let result = buffer.withUnsafeMutableBytes { read(pipe, $0.baseAddress.map { $0 + have }, count - have) }
            if result <= 0 {
                if result < 0, errno == EINTR { continue }
                return (0, result < 0 ? errno : EIO)
            }
            have += result
        }
        return ResponseStream.gather([ByteBuffer(bytes: buffer)], count: count, to: descriptor, at: offset)
    }

    private let pipe = Mutex<(read: Int32, write: Int32)?>(nil)

    /// The pipe bodies are spliced through, made on first use (`spliceSize` when the system allows).
    private func dataPipe() throws -> (read: Int32, write: Int32) {
        try pipe.withLock { pipe in
            if let pipe { return pipe }
            var fds: [Int32] = [-1, -1]
            guard haul_pipe(&fds) == 0 else { throw IOError(errnoCode: errno, reason: "pipe") }
            _ = haul_set_pipe_size(fds[1], Int32(Self.spliceSize))
            pipe = (fds[0], fds[1])
            return (fds[0], fds[1])
        }
    }

    /// Closes the data pipe (bytes left in it were never taken).
    private func closePipe() {
        pipe.withLock { pipe in
            if let open = pipe {
                close(open.read)
                close(open.write)
            }
            pipe = nil
        }
    }

    /// The next bytes from the socket, at most `limit`, read into `buffer` (its storage reused
    /// once the relay holds no slice of it: no allocation per read); nil at its end.
    private func readChunk(_ socket: Int32, limit: Int, into buffer: inout ByteBuffer) throws -> ByteBuffer? {
        while true {
            if let stop = state.withLock({ $0.stop }) { throw stop }
            try waitForData(socket)
            buffer.clear()
            var count = 0
            var code: Int32 = 0
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: limit) { raw in
                count = read(socket, raw.baseAddress, limit)
                code = errno
                return max(0, count)
            }
            if count < 0 {
                if code == EAGAIN || code == EINTR { continue }
                throw IOError(errnoCode: code, reason: "read")
            }
            if count == 0 { return nil }
            socketBytes.add(Int64(count), ordering: .relaxed)
            return buffer
        }
    }

    /// Hands `chunk` to the relay and carries out what it says: writes, a pause, the rate limit.
    private func received(_ chunk: ByteBuffer, readSince generation: UInt64? = nil) throws {
        let received = state.withLock { state -> Relay.Received in
            var received = state.relay.received(chunk)
            if case .write(let write) = received { received = progress.carryOut(write, on: &state.relay) }
            if case .pause = received {
                state.relay.paused(Paused())
                state.paused = true
            }
            return received
        }
        switch received {
        case .stop(let error):
            throw error
        case .pause(let wake):
            wake?.resume()
            // Held (no file to write them to yet) is read all the same: the bytes count against the
            // limits now (a tester's 16 KiB files, read whole with their heads and held, took no
            // time at all under `--limit-rate 128K`: 80 times the limit).
            try pauseForLimit(chunk.readableBytes, readSince: generation)
        case .readOn(let took, let wake):
            wake?.resume()
            try pauseForLimit(took, readSince: generation)
        case .write:
            break
        }
    }

    /// How many bytes to take from the socket at most, of `count`: a limited stream takes small
    /// steps, so its waits stay short: a quarter of a second of its lowest limit, 4 to 64 KiB (64 KiB
    /// at 5 KiB/s came once in 13 s, and the row read no speed most of the time).
    private func readStep(_ count: Int) -> Int {
        guard let lowest = throttle.limiters.compactMap(\.bytesPerSecond).min() else { return count }
        return min(count, Int(min(64 << 10, max(4 << 10, lowest / 4))))
    }

    /// Waits as long as the rate limits say after `took` bytes read since the limits' `generation`
    /// (nil: already in memory), less when a limit changes.
    private func pauseForLimit(_ took: Int, readSince generation: UInt64?) throws {
        guard took > 0 else { return }
        let wait = generation.map { throttle.reserve(took, readSince: $0) } ?? throttle.reserve(took)
        guard wait > .zero else { return }
        let parts = wait.components
        let deadline = NIODeadline.now() + .nanoseconds(parts.seconds * 1_000_000_000 + parts.attoseconds / 1_000_000_000)
        let generation = throttle.generation
        while NIODeadline.now() < deadline, throttle.generation == generation {
            // Bytes taken meanwhile (the held ones, once the sink is known) are written soon, not
            // after the wait.
            let step = state.withLock { $0.relay.hasQueued } ? ResponseStream.idleFlushDelay : Throttle.recheck
            _ = try waitFor(-1, events: 0, until: min(deadline, NIODeadline.now() + step))
            try flushQueue()
        }
    }

    /// Writes what waits in the queue; throws when that stops the request.
    private func flushQueue() throws {
        try state.withLock { state throws in
            if let write = state.relay.flushQueue(), case .stop(let error) = progress.carryOut(write, on: &state.relay) { throw error }
        }
    }

    /// Waits until the socket has bytes (or its end); throws the stall as the client's read timeout.
    /// Bytes left waiting in the queue are written within `ResponseStream.idleFlushDelay`.
    private func waitForData(_ socket: Int32) throws {
        var deadline = NIODeadline.now() + timeouts.stall
        while true {
            let (queued, paused) = try state.withLock { state throws -> (Bool, Bool) in
                if let stop = state.stop { throw stop }
                return (state.relay.hasQueued, state.paused)
            }
            if paused {
                // Not a stall: reading waits for the transfer.
                try waitForWake()
                deadline = NIODeadline.now() + timeouts.stall
                continue
            }
            let until = queued ? min(deadline, NIODeadline.now() + ResponseStream.idleFlushDelay) : deadline
            if try waitFor(socket, events: POLLIN, until: until) { return }
            if queued {
                try flushQueue()
                continue
            }
            if NIODeadline.now() >= deadline { throw HTTPClientError.readTimeout }
        }
    }

    /// Waits until `fd` is ready for `events`: false only at `deadline` (a wake, which may be left
    /// over from a name lookup, is not one); throws when the request stops.
    private func waitUntilReady(_ fd: Int32, events: Int32, until deadline: NIODeadline) throws -> Bool {
        while NIODeadline.now() < deadline {
            if try waitFor(fd, events: events, until: deadline) { return true }
        }
        return false
    }

    /// Waits for the wake pipe only; throws when the request stops.
    private func waitForWake() throws {
        while true {
            if let stop = state.withLock({ $0.stop }) { throw stop }
            if !state.withLock({ $0.paused }) { return }
            _ = try waitFor(-1, events: 0, until: .distantFuture)
        }
    }

    /// Polls `fd` for `events` and the wake pipe until `deadline`: true when `fd` is ready, false
    /// at the deadline or on a wake (the caller looks at the state again); throws when the
    /// request stops.
    private func waitFor(_ fd: Int32, events: Int32, until deadline: NIODeadline) throws -> Bool {
        while true {
            if let stop = state.withLock({ $0.stop }) { throw stop }
            var fds = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(events), revents: 0)]
            // Rounded up: a poll that returns 0 means the deadline passed.
            let result = poll(&fds, fd >= 0 ? 2 : 1, Self.milliseconds(until: deadline))
            if result < 0 {
                if errno == EINTR { continue }
                throw IOError(errnoCode: errno, reason: "poll")
            }
            if fds[0].revents != 0 {
                drainWake()
                if let stop = state.withLock({ $0.stop }) { throw stop }
                return false
            }
            if fd >= 0, fds[1].revents != 0 { return true }
            if result == 0 { return false }
        }
    }

    private func signal() {
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write, &byte, 1)
    }

    private func drainWake() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while bytes.withUnsafeMutableBytes({ read(wake.read, $0.baseAddress, $0.count) }) > 0 {}
    }

}
#endif
