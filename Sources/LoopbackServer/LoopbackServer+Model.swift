import Foundation
import NIOHTTP1
/// Misbehaviour a loopback resource can be told to show.
public struct Faults: Sendable, Hashable {
    /// Send at most this many body bytes per second (per response).
    public var throttleBytesPerSecond: Int?
    /// Abort the connection with a TCP reset after this many body bytes…
    public var resetAfterBytes: Int?
    /// …in this many responses (then behave).
    public var resetCount: Int = 1
    /// Close the connection cleanly after this many body bytes (a body shorter than its length)…
    public var closeAfterBytes: Int?
    /// …in this many responses.
    public var closeCount: Int = 1
    /// Stop sending after this many body bytes and keep the connection open (a stall)…
    public var stallAfterBytes: Int?
    /// …in this many responses.
    public var stallCount: Int = 1
    /// Hold every body at these offsets of the resource (ascending), each until `release(path)` was
    /// called once more: a test reaches a known point however loaded the machine is.
    public var holdAt: [Int] = []
    /// Answer the first K requests with `failStatus` and `Retry-After`.
    public var failFirst: Int = 0
    public var failStatus: Int = 503
    public var retryAfter: String? = "0"
    /// 416 answers carry no ETag or Last-Modified (as nginx's).
    public var bare416 = false
    /// Answer every request without a Range header with `failStatus` (ranges are served).
    public var failWithoutRange = false
    /// Answer every request with this status and an empty body (404, 403 …).
    public var fixedStatus: Int?
    /// Answer Range requests with 200 and the whole body.
    public var ignoreRange = false
    /// Send no ETag.
    public var omitETag = false
    /// Send no Last-Modified.
    public var omitLastModified = false
    /// Send a weak ETag (`W/"…"`).
    public var weakETag = false
    /// No Content-Length: chunked transfer coding.
    public var chunked = false
    /// Serve 206 bodies starting this many bytes after the requested offset (and say so in Content-Range).
    public var rangeOffsetError: Int = 0
    /// End 206 bodies this many bytes before the end, with a matching Content-Range and
    /// Content-Length (a legal, properly framed partial answer)…
    public var shortRangeBy: Int = 0
    /// …in this many responses.
    public var shortRangeCount: Int = 1
    /// With `shortRangeBy`: the Content-Range still names the whole range asked for (with
    /// `chunked`, a body that ends early with a proper last chunk).
    public var shortRangeUnannounced = false
    /// Say `*` for the total in the Content-Range of every 206 (a length the server does not know).
    public var rangeTotalUnknown = false
    /// Send this Content-Disposition header verbatim.
    public var contentDisposition: String?
    /// Say a total this many bytes off in the Content-Range of every 206 (the body is right).
    public var rangeTotalError: Int = 0
    /// Send this many bytes more than the Content-Length says, after the body.
    public var extraBodyBytes: Int = 0
    /// Answer nothing to the first this-many requests (the connection stays open, silent).
    public var silentFirst: Int = 0
    /// Further `Name: value` headers on every answer (`WWW-Authenticate` with a 401 …).
    public var headers: [String] = []
    /// The resource changes (a new version: new bytes, ETag and Last-Modified) just before each of
    /// the first this-many Range requests is answered, as a file replaced while a download was paused.
    public var changeOnRangeRequests: Int = 0
    /// `Last-Modified` is the second the resource was served (`serve`) and every answer carries a
    /// `Date`: a first request within that second sees a file changed within its second (weak
    /// validators, RFC 9110 8.8.2.2), later ones the same date a second or more old.
    public var modifiedWhenServed = false
    /// Answer the first this-many Range requests with `200 text/html` and a small page without
    /// validators, as a proxy or an overloaded server does.
    public var errorPageOnRangeRequests: Int = 0
    /// Answer every request with these bytes, written to the socket as they are (a hand-made
    /// response: an invalid header, two Content-Lengths, a bare CR …), then close the connection.
    public var rawResponse: [UInt8]?
    /// End a `rawResponse` with a TCP reset (over TLS: no close_notify), not a clean close.
    public var rawReset = false

    public init() {}

    /// No validators at all.
    public static var noValidators: Faults {
        var faults = Faults()
        faults.omitETag = true
        faults.omitLastModified = true
        return faults
    }
}

/// One request as the server saw it and answered it.
public struct RequestRecord: Sendable, Hashable {
    public var method: String
    public var path: String
    /// The request line's target exactly as received (path and query, or a whole URL).
    public var target: String = ""
    public var range: String?
    public var ifRange: String?
    public var ifMatch: String?
    public var status: Int
    /// Body bytes written to the socket for this response.
    public var bodyBytesSent: Int
    /// Whether the whole body was sent.
    public var finished: Bool
    /// The request named a whole URL (`GET http://host/path`), as clients do through a proxy.
    public var absoluteForm: Bool = false
    /// The Host header.
    public var host: String?
    /// The User-Agent header.
    public var userAgent: String?
    /// Every header, in order.
    public var headers: [String] = []
}

extension RequestRecord {
    /// A request the server met with a close (`redirect(closeAfter:)`): status 0, no body.
    init(unansweredRequest request: HTTPRequestHead) {
        let path = String(request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        self.init(
            method: request.method.rawValue, path: path, range: request.headers.first(name: "Range"),
            ifRange: request.headers.first(name: "If-Range"), ifMatch: request.headers.first(name: "If-Match"),
            status: 0, bodyBytesSent: 0, finished: false, host: request.headers.first(name: "Host"),
            userAgent: request.headers.first(name: "User-Agent"), headers: request.headers.map { "\($0.name): \($0.value)" }
        )
    }
}

struct ResourceEntry {
    var size: Int
    var seed: UInt64
    var version: Int = 1
    var faults: Faults
    var failuresServed = 0
    var resetsServed = 0
    var closesServed = 0
    var stallsServed = 0
    var shortRangesServed = 0
    var changesServed = 0
    /// When `serve` was called: the `Last-Modified` of `Faults.modifiedWhenServed`.
    var servedAt = Date()
    /// Versions made by `change(_:size:keepingValidators:)` that the validators do not show.
    var hiddenChanges = 0
    var silencesServed = 0
    var errorPagesServed = 0
    /// How many of `faults.holdAt` the test has released.
    var holdsReleased = 0
}
