import AsyncHTTPClient
import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// Bytes on disk of a running attempt.
///
/// The transfer stores after every write; the session's ticker reads about ten times a second. This is
/// what keeps actor hops off the per-chunk path.
final class TransferProgress: Sendable {
    let bytesOnDisk = Atomic<Int64>(0)
    /// Odd while the part file is being cut back (the bytes counted so far stop being true), bumped
    /// again when done: a checkpoint that saw another value, or an odd one, claims nothing.
    let truncations = Atomic<Int>(0)

    /// Cuts `file` to `offset`, telling concurrent checkpoints that the bytes they counted are void.
    func truncate(_ file: PartFile, to offset: Int64) throws(PartFile.Failure) {
        truncations.add(1, ordering: .sequentiallyConsistent)
        defer { truncations.add(1, ordering: .sequentiallyConsistent) }
        bytesOnDisk.store(offset, ordering: .sequentiallyConsistent)
        try file.truncate(to: offset)
    }
}

/// One HTTP attempt of one download: a request (a `Range` resume when there are bytes to keep), the
/// resume rules applied to its response, and the body streamed into the part file.
struct Transfer: Sendable {
    typealias Outcome = SessionStateMachine.Outcome

    let order: SessionStateMachine.TransferOrder
    let client: HTTPClient
    let progress: TransferProgress
    /// The session's `--limit-rate`, shared by every transfer.
    let limiter: RateLimiter?
    let userAgent: String
    /// Limit for the response head to arrive (connecting included).
    let headTimeout: TimeAmount
    /// Seconds without a byte that count as a stall (the client's read timeout), for the message.
    let stallSeconds: Int64
    /// fsync the part file before reporting completion.
    let syncOnCompletion: Bool
    /// The validators and total that describe the part file now, read when the attempt really starts
    /// (the previous attempt on the file may have changed them after this one was ordered); nil when
    /// the download or the session is gone.
    let basis: @Sendable () async -> (validators: Validators, knownTotal: Int64?)?
    /// Called once per attempt, when the response that will be written has been accepted.
    let responded: @Sendable (SessionStateMachine.ResponseInfo) async -> Void

    /// Runs the attempt to its end and says how it ended and how many bytes the part file holds.
    ///
    /// The part file is opened (created) only once a response worth writing arrived, so a 404 or a
    /// refused connection leaves no file behind.
    func run() async -> (outcome: Outcome, bytesOnDisk: Int64) {
        let startLength: Int64
        do {
            startLength = try PartFile.existingLength(order.partPath)
        } catch {
            return (Self.outcome(of: error), 0)
        }
        progress.bytesOnDisk.store(startLength, ordering: .relaxed)
        guard !Task.isCancelled, let (validators, knownTotal) = await basis() else { return (.stopped, startLength) }
        var attempt = Attempt(path: order.partPath, validators: validators, knownTotal: knownTotal)
        attempt.startLength = startLength
        do {
            let outcome = try await fetch(&attempt)
            return (outcome, attempt.length)
        } catch let failure as PartFile.Failure {
            return (Self.outcome(of: failure), attempt.length)
        } catch {
            if Task.isCancelled { return (.stopped, attempt.length) }
            return (classify(error, progressed: attempt.grew), attempt.length)
        }
    }

    /// The part file of one attempt, opened on first use, and what is known about its bytes.
    private struct Attempt {
        var path: String
        var validators: Validators
        var knownTotal: Int64?
        var file: PartFile?
        var startLength: Int64 = 0
        /// Whether the bytes found were discarded (a restart from zero).
        var restarted = false

        init(path: String, validators: Validators, knownTotal: Int64?) {
            self.path = path
            self.validators = validators
            self.knownTotal = knownTotal
        }

        /// Bytes in the part file now.
        var length: Int64 { file?.length ?? startLength }

        /// Whether the attempt left more of the same version than it found. A restart never counts
        /// (it can only succeed by completing), or a server that ignores ranges and drops every
        /// connection would be retried forever.
        var grew: Bool { !restarted && length > startLength }

        mutating func open() throws(PartFile.Failure) -> PartFile {
            if let file { return file }
            let opened = try PartFile(path: path)
            file = opened
            return opened
        }
    }

    private static func outcome(of failure: PartFile.Failure) -> Outcome {
        failure.isDiskFull ? .diskFull(reason: failure.description) : .fatal(reason: failure.description)
    }

    private func fetch(_ attempt: inout Attempt) async throws -> Outcome {
        let validators = attempt.validators
        let knownTotal = attempt.knownTotal
        var plan = ResumeRules.plan(partLength: attempt.startLength, knownTotal: knownTotal, validators: validators)
        var refetched = false
        while true {
            let response = try await client.execute(request(for: plan), timeout: headTimeout)
            let facts = Self.facts(of: response)
            switch ResumeRules.decide(plan: plan, response: facts, knownTotal: knownTotal, validators: validators) {
            case .write(let offset, let total, let disposition):
                // Bytes are thrown away only here, once the replacement is in hand.
                let file = try attempt.open()
                defer { file.close() }
                if case .restarted = disposition { attempt.restarted = true }
                if file.length != offset { try progress.truncate(file, to: offset) }
                progress.bytesOnDisk.store(offset, ordering: .relaxed)
                await responded(info(response, facts: facts, total: total, disposition: disposition))
                return try await stream(response.body, into: file, total: total, progressed: { attempt.grew })
            case .complete(let total):
                await responded(info(response, facts: facts, total: total, disposition: .resumed(from: total, verified: validators.ifRange != nil)))
                if syncOnCompletion { try await FileSync.syncOrThrow(order.partPath) }
                return await verified(order.partPath)
            case .refetch(let reason):
                // Never append this body. One fresh request per attempt; a second oddity is an error.
                guard !refetched else { return .fatal(reason: reason) }
                refetched = true
                plan = .fresh(discarding: reason)
            case .retry(let reason, let retryAfter):
                return .retryable(reason: reason, retryAfter: retryAfter.flatMap { RetryAfter.seconds(from: $0, now: Date()) }, progressed: false)
            case .fail(let reason):
                return .fatal(reason: reason)
            }
        }
    }

    /// Writes the body at the end of the part file, never past `total`.
    private func stream(_ body: HTTPClientResponse.Body, into file: PartFile, total: Int64?, progressed: () -> Bool) async throws -> Outcome {
        for try await var buffer in body {
            if let total {
                let room = total - file.length
                guard room > 0 else { break }
                if Int64(buffer.readableBytes) > room, let slice = buffer.readSlice(length: Int(room)) {
                    buffer = slice
                }
            }
            let count = buffer.readableBytes
            try file.append(buffer)
            progress.bytesOnDisk.store(file.length, ordering: .relaxed)
            if let limiter {
                let wait = limiter.reserve(count)
                if wait > .zero { try await Task.sleep(for: wait) }
            }
        }
        if let total, file.length < total {
            // A body that ended short of the total (a partial 206, a close the client did not flag)
            // is never success: keep the prefix and resume from it.
            return .retryable(
                reason: "body ended at \(Format.bytes(file.length)) of \(Format.bytes(total))",
                retryAfter: nil, progressed: progressed()
            )
        }
        // On a thread of its own: a sync of much dirty data must not hold a cooperative thread.
        if syncOnCompletion { try await FileSync.syncOrThrow(file.path) }
        return await verified(file.path)
    }

    /// Completed, unless the file misses the checksum it was asked to have: then it fails and the
    /// bytes stay in the part file.
    private func verified(_ path: String) async -> Outcome {
        guard let checksum = order.options.checksum else { return .completed }
        if let mismatch = await FileDigest.mismatch(path, checksum) { return .fatal(reason: mismatch) }
        return .completed
    }

    private func request(for plan: RequestPlan) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: order.url.absoluteString)
        request.method = .GET
        request.headers.add(name: "User-Agent", value: userAgent)
        for field in order.options.headers {
            if field.name.lowercased() == "user-agent" {
                request.headers.replaceOrAdd(name: field.name, value: field.value)
            } else {
                request.headers.add(name: field.name, value: field.value)
            }
        }
        // Ranges count bytes of the representation: a compressed one would make offsets meaningless.
        request.headers.add(name: "Accept-Encoding", value: "identity")
        if case .resume(let offset, let ifRange) = plan {
            request.headers.add(name: "Range", value: "bytes=\(offset)-")
            if let ifRange { request.headers.add(name: "If-Range", value: ifRange) }
        }
        return request
    }

    private static func facts(of response: HTTPClientResponse) -> ResponseFacts {
        let headers = response.headers
        return ResponseFacts(
            status: Int(response.status.code),
            reasonPhrase: response.status.reasonPhrase,
            contentLength: headers.first(name: "Content-Length").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) },
            contentRange: headers.first(name: "Content-Range"),
            etag: headers.first(name: "ETag").map(Self.trimmed),
            lastModified: headers.first(name: "Last-Modified").map(Self.trimmed),
            retryAfter: headers.first(name: "Retry-After")
        )
    }

    private func info(_ response: HTTPClientResponse, facts: ResponseFacts, total: Int64?, disposition: Disposition) -> SessionStateMachine.ResponseInfo {
        let proposed = response.headers.first(name: "Content-Disposition").flatMap(ContentDisposition.fileName(from:))
        return .init(
            status: facts.status,
            total: total,
            validators: Validators(etag: facts.etag, lastModified: facts.lastModified),
            finalURL: response.url,
            serverFileName: proposed.flatMap(FileNaming.sanitize),
            disposition: disposition
        )
    }

    /// A stored validator is sent back in `If-Range`, where a newline would make the request invalid.
    private static func trimmed(_ value: String) -> String {
        String(value.unicodeScalars.filter { !TerminalText.isControl($0) }.map(Character.init)).trimmingCharacters(in: .whitespaces)
    }

    /// Network trouble waits and retries; a broken request or redirect fails for good.
    private func classify(_ error: any Error, progressed: Bool) -> Outcome {
        if let error = error as? HTTPClientError {
            if error == .readTimeout {
                return .retryable(reason: "stalled: no data for \(stallSeconds) s", retryAfter: nil, progressed: progressed)
            }
            if error == .connectTimeout {
                return .retryable(reason: "connection timed out", retryAfter: nil, progressed: progressed)
            }
            if error == .deadlineExceeded {
                return .retryable(reason: "no response within \(headTimeout.nanoseconds / 1_000_000_000) s", retryAfter: nil, progressed: progressed)
            }
            if error == .remoteConnectionClosed {
                return .retryable(reason: "connection closed by the server", retryAfter: nil, progressed: progressed)
            }
            if error == .redirectLimitReached { return .fatal(reason: "too many redirects") }
            if error == .redirectCycleDetected { return .fatal(reason: "redirect loop") }
            if [.invalidURL, .emptyHost, .emptyScheme].contains(error) || String(describing: error).contains("unsupportedScheme") {
                return .fatal(reason: "invalid URL: \(TerminalText.sanitize(String(describing: error)))")
            }
        }
        return .retryable(reason: Self.describe(error), retryAfter: nil, progressed: progressed)
    }

    private static func describe(_ error: any Error) -> String {
        let text = String(describing: error)
        if text.contains("connectionRefused") || text.contains("Connection refused") { return "connection refused" }
        if text.contains("Connection reset") || text.contains("ECONNRESET") { return "connection reset" }
        return TerminalText.sanitize(text)
    }
}
