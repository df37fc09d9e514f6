import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1

/// One answer to a request: a JSON body with its status, and work to start once it is sent.
struct Reply: Sendable {
    var status: HTTPResponseStatus
    var body: Data
    var headers: [(String, String)] = []
    /// Started after the answer is written and the connection closed (`POST /v1/stop`).
    var then: (@Sendable () async -> Void)?

    init(_ status: HTTPResponseStatus, _ value: some Encodable, headers: [(String, String)] = [], then: (@Sendable () async -> Void)? = nil) {
        self.status = status
        body = Wire.encode(value)
        self.headers = headers
        self.then = then
    }

    init(_ status: HTTPResponseStatus, json: Data) {
        self.status = status
        body = json
    }

    static func failure(_ status: HTTPResponseStatus, _ sentence: String, headers: [(String, String)] = []) -> Reply {
        Reply(status, Wire.Failure(error: sentence), headers: headers)
    }

    static let done = Reply(.ok, Wire.Done())
}

/// The request line's path, split.
enum Route {
    /// The path of a request target, without its query.
    static func path(_ uri: String) -> String {
        String(uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }
}

extension ControlServer {
    /// The answer to one whole request.
    func respond(_ head: HTTPRequestHead, _ body: ByteBuffer) async -> Reply {
        let parts = Route.path(head.uri).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, parts[0].isEmpty, parts[1] == "v1" else { return .failure(.notFound, "no such path: \(Self.shown(head.uri))") }
        let method = head.method
        let rest = Array(parts.dropFirst(2))
        if rest.count >= 2, rest[0] == "downloads" {
            return await download(method, rest[1], rest.count == 3 ? rest[2] : rest.count == 2 ? nil : "/", body)
        }
        switch rest {
        case ["downloads"]:
            switch method {
            case .GET: return await listing()
            case .POST: return await schedule(body)
            default: return Self.wrongMethod(method, allowed: "GET, POST")
            }
        case ["snapshot"]:
            guard method == .GET else { return Self.wrongMethod(method, allowed: "GET") }
            return await queueCall(nil) { () async throws(QueueControlError) in Reply(.ok, try await self.queue.snapshot()) }
        case ["edit"]:
            guard method == .POST else { return Self.wrongMethod(method, allowed: "POST") }
            let edit: (QueueEdit, [DownloadID])
            do { edit = try Self.edit(body) } catch { return .failure(.badRequest, error.description) }
            return await edited(edit.0, edit.1)
        case ["pause-all"]:
            guard method == .POST else { return Self.wrongMethod(method, allowed: "POST") }
            return await queueCall(nil) { () async throws(QueueControlError) in try await self.queue.pauseAll(); return .done }
        case ["resume-all"]:
            guard method == .POST else { return Self.wrongMethod(method, allowed: "POST") }
            return await queueCall(nil) { () async throws(QueueControlError) in try await self.queue.resumeAll(); return .done }
        case ["purge"]:
            guard method == .POST else { return Self.wrongMethod(method, allowed: "POST") }
            let ids: [DownloadID]?
            do { ids = try Self.purgeIDs(body) } catch { return .failure(.badRequest, error.description) }
            return await queueCall(nil) { () async throws(QueueControlError) in try await self.queue.purgePaused(only: ids); return .done }
        case ["limit"]:
            guard method == .PUT else { return Self.wrongMethod(method, allowed: "PUT") }
            let limit: Int64?
            do { limit = try Self.limit(body) } catch { return .failure(.badRequest, error.description) }
            return await queueCall(nil) { () async throws(QueueControlError) in try await self.queue.setLimit(limit); return .done }
        case ["clear-completed"]:
            guard method == .POST else { return Self.wrongMethod(method, allowed: "POST") }
            return await queueCall(nil) { () async throws(QueueControlError) in Reply(.ok, Wire.Cleared(cleared: try await self.queue.clearCompleted())) }
        case ["history"]:
            guard method == .GET else { return Self.wrongMethod(method, allowed: "GET") }
            return await queueCall(nil) { () async throws(QueueControlError) in Reply(.ok, try await self.queue.history(nil).map(Wire.HistoryLine.init)) }
        case ["max-active"]:
            guard method == .PUT else { return Self.wrongMethod(method, allowed: "PUT") }
            let count: Wire.MaxActive
            do { count = try Self.decode(body) } catch { return .failure(.badRequest, error.description) }
            guard QueueLimits.maxActive.contains(count.maxActive) else {
                return .failure(.badRequest, "max_active must be between \(QueueLimits.maxActive.lowerBound) and \(QueueLimits.maxActive.upperBound)")
            }
            return await queueCall(nil) { () async throws(QueueControlError) in try await self.queue.setMaxActive(count.maxActive); return .done }
        case ["stop"]:
            guard method == .POST else { return Self.wrongMethod(method, allowed: "POST") }
            let queue = queue
            return Reply(.accepted, Wire.Done()) { try? await queue.stop() }
        default:
            return .failure(.notFound, "no such path: \(Self.shown(head.uri))")
        }
    }

    /// `/v1/downloads/{id}` (DELETE removes), `/v1/downloads/{id}/{verb}` (POST),
    /// `/v1/downloads/{id}/limit` (PUT) and `/v1/downloads/{id}/history` (GET).
    private func download(_ method: HTTPMethod, _ text: String, _ verb: String?, _ body: ByteBuffer) async -> Reply {
        guard let verb else {
            guard method == .DELETE else { return Self.wrongMethod(method, allowed: "DELETE") }
            guard let id = Self.id(text) else { return Self.noDownload(text) }
            return await queueCall(id) { () async throws(QueueControlError) in try await self.queue.remove(id); return .done }
        }
        let allowed: HTTPMethod
        switch verb {
        case "pause", "resume", "cancel", "move": allowed = .POST
        case "limit": allowed = .PUT
        case "history": allowed = .GET
        default: return .failure(.notFound, "no such path: /v1/downloads/\(Self.shown(text))/\(Self.shown(verb))")
        }
        guard method == allowed else { return Self.wrongMethod(method, allowed: allowed.rawValue) }
        guard let id = Self.id(text) else { return Self.noDownload(text) }
        return await command(verb, id, body)
    }

    private func command(_ verb: String, _ id: DownloadID, _ body: ByteBuffer) async -> Reply {
        let queue = queue
        switch verb {
        case "pause": return await queueCall(id) { () async throws(QueueControlError) in try await queue.pause(id); return .done }
        case "resume":
            return await queueCall(id) { () async throws(QueueControlError) in Reply(.ok, Wire.Resumed(displaced: try await queue.resume(id))) }
        case "limit":
            let limit: Int64?
            do { limit = try Self.limit(body) } catch { return .failure(.badRequest, error.description) }
            return await queueCall(id) { () async throws(QueueControlError) in try await queue.setLimit(limit, for: id); return .done }
        case "history":
            return await queueCall(id) { () async throws(QueueControlError) in Reply(.ok, try await queue.history(id).map(Wire.HistoryLine.init)) }
        case "cancel": return await queueCall(id) { () async throws(QueueControlError) in try await queue.cancel(id); return .done }
        default:
            let move: Wire.Move
            do { move = try Self.decode(body) } catch { return .failure(.badRequest, error.description) }
            guard move.to >= 0 else { return .failure(.badRequest, "to must be a position from 0 (the top of the queue)") }
            return await queueCall(id) { () async throws(QueueControlError) in try await queue.move(id, to: move.to); return .done }
        }
    }

    private func listing() async -> Reply {
        await queueCall(nil) { () async throws(QueueControlError) in
            let snapshot = try await self.queue.snapshot()
            return Reply(.ok, json: QueueListing.json(snapshot.downloads.map { QueueListing.object(for: $0, live: true) }))
        }
    }

    private func schedule(_ body: ByteBuffer) async -> Reply {
        let requests: [QueueRequest]
        do {
            let form: QueueForm = try Self.decode(body)
            requests = try form.requests()
        } catch let error as QueueForm.Invalid {
            return .failure(.badRequest, error.description)
        } catch let error as BadBody {
            return .failure(.badRequest, error.description)
        } catch {
            return .failure(.badRequest, "the body is not a request to queue URLs")
        }
        return await queueCall(nil) { () async throws(QueueControlError) in Reply(.created, try await self.queue.schedule(requests)) }
    }

    /// An edit of several downloads, all or nothing: refused, 404 when one of them is not in the
    /// queue, else 409.
    private func edited(_ edit: QueueEdit, _ ids: [DownloadID]) async -> Reply {
        do {
            return Reply(.ok, Wire.Edited(displaced: try await queue.edit(edit, ids)))
        } catch {
            switch error.kind {
            case .unavailable, .closed:
                return .failure(.serviceUnavailable, error.message)
            case .refused:
                let snapshot = try? await queue.snapshot()
                if let snapshot, ids.contains(where: { snapshot[$0] == nil }) { return .failure(.notFound, error.message) }
                return .failure(.conflict, error.message)
            }
        }
    }

    /// The queue's answer, or its refusal as a status: 404 for a download it does not have, 409 for
    /// one whose state forbids the intent, 503 while it cannot be reached or is closing.
    private func queueCall(_ id: DownloadID?, _ work: () async throws(QueueControlError) -> Reply) async -> Reply {
        do {
            return try await work()
        } catch {
            switch error.kind {
            case .unavailable, .closed:
                return .failure(.serviceUnavailable, error.message)
            case .refused:
                // Told apart by the queue itself, not by the sentence: is the download there?
                if let id, (try? await queue.snapshot())?[id] == nil { return .failure(.notFound, error.message) }
                return .failure(.conflict, error.message)
            }
        }
    }

    // MARK: Parsing

    struct BadBody: Error, CustomStringConvertible {
        var description: String
    }

    static func decode<T: Decodable>(_ body: ByteBuffer) throws(BadBody) -> T {
        guard body.readableBytes > 0 else { throw BadBody(description: "the body is empty; a JSON object is expected") }
        do {
            return try JSONDecoder().decode(T.self, from: Data(body.readableBytesView))
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            throw BadBody(description: "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type")
        } catch let DecodingError.keyNotFound(key, _) {
            throw BadBody(description: "'\(key.stringValue)' is missing")
        } catch {
            throw BadBody(description: "the body is not valid JSON")
        }
    }

    /// The downloads of a purge's `{"ids": [N, …]}` body; nil without a body (every paused one).
    static func purgeIDs(_ body: ByteBuffer) throws(BadBody) -> [DownloadID]? {
        guard body.readableBytes > 0 else { return nil }
        let purge: Wire.Purge = try decode(body)
        return purge.ids.map { DownloadID($0) }
    }

    /// The change and the downloads of an edit's `{"edit": "pause", "ids": [N, …]}` body, checked.
    static func edit(_ body: ByteBuffer) throws(BadBody) -> (QueueEdit, [DownloadID]) {
        let edit: Wire.Edit = try decode(body)
        guard let kind = QueueEdit(rawValue: edit.edit) else {
            throw BadBody(description: "edit must be one of \(QueueEdit.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard !edit.ids.isEmpty else { throw BadBody(description: "ids must name at least one download") }
        guard edit.ids.allSatisfy({ $0 > 0 }) else { throw BadBody(description: "ids must be download ids (from 1)") }
        return (kind, edit.ids.map { DownloadID($0) })
    }

    /// The limit of a `{"limit": N}` body, checked: nil for none (null or 0).
    static func limit(_ body: ByteBuffer) throws(BadBody) -> Int64? {
        let limit: Wire.Limit = try decode(body)
        if let problem = QueueLimits.rateProblem(limit.limit, "limit") { throw BadBody(description: problem) }
        return QueueLimits.rate(limit.limit)
    }

    private static func id(_ text: String) -> DownloadID? {
        guard let value = Int64(text), value > 0 else { return nil }
        return DownloadID(value)
    }

    private static func noDownload(_ text: String) -> Reply {
        .failure(.notFound, "no download \(shown(text))")
    }

    private static func wrongMethod(_ method: HTTPMethod, allowed: String) -> Reply {
        .failure(.methodNotAllowed, "\(method.rawValue) is not allowed here (use \(allowed))", headers: [("allow", allowed)])
    }

    /// A client's text, safe to put in a sentence (and a log line).
    static func shown(_ text: String) -> String {
        TerminalText.sanitize(String(text.prefix(200)))
    }
}
