import Foundation

/// The validators remembered from the response that started the bytes on disk.
public struct Validators: Sendable, Hashable {
    public var etag: String?
    public var lastModified: String?
    /// The response's `Last-Modified` was less than a second before its `Date`: the file changed
    /// within the second it was first answered, and a second change in that second may keep both
    /// validators (a date has one-second steps; nginx's ETag is the second and the size). Such
    /// validators are not strong (RFC 9110 8.8.2.2): a resume is checked by overlap instead.
    public var recentlyChanged: Bool

    public init(etag: String? = nil, lastModified: String? = nil, recentlyChanged: Bool = false) {
        self.etag = etag
        self.lastModified = lastModified
        self.recentlyChanged = recentlyChanged
    }

    /// Whether the entity tag may be used in `If-Range` (weak tags may not, RFC 9110 13.1.5).
    public var hasStrongETag: Bool {
        guard let etag else { return false }
        return !etag.hasPrefix("W/")
    }

    /// Whether `lastModified` names one version (RFC 9110 8.8.2.2): a date haul reads, at least a
    /// second before its answer. A date it cannot read cannot be shown to be strong (a tester's
    /// server sent ISO 8601 dates; a file rewritten within the second was resumed on the date and
    /// spliced, exit 0).
    public var hasStrongDate: Bool {
        guard let lastModified, !recentlyChanged else { return false }
        return HTTPDate.seconds(lastModified) != nil
    }

    /// The `If-Range` value: the strong ETag, else a strong Last-Modified; nil when a resume cannot
    /// be verified by them (none, a weak tag alone, a date haul cannot read, or validators of a
    /// file changed within their second).
    public var ifRange: String? {
        if recentlyChanged { return nil }
        if hasStrongETag { return etag }
        return hasStrongDate ? lastModified : nil
    }

    /// Whether `lastModified` was less than a second before the response's `date` (or, without a
    /// `Date`, before `now`): see `recentlyChanged`. False when there is no date to compare.
    public static func changedRecently(lastModified: String?, date: String?, now: Date) -> Bool {
        guard let lastModified, let modified = HTTPDate.seconds(lastModified) else { return false }
        let answered = date.flatMap(HTTPDate.seconds) ?? Int64(now.timeIntervalSince1970.rounded(.down))
        return answered - modified < 1
    }

    public var isEmpty: Bool { etag == nil && lastModified == nil }

    /// Why these validators cannot verify a resume (no `ifRange`), in words; nil when they can. A
    /// tester's row said `no validator` of a strong ETag distrusted as of a change within its second.
    public var whyUnverifiable: String? {
        guard ifRange == nil else { return nil }
        if recentlyChanged { return "validators of a change within their second" }
        if isEmpty { return "no validator" }
        if lastModified == nil { return "a weak ETag alone" }
        return "a Last-Modified haul cannot read"
    }
}

extension Download {
    /// Why the latest resume was checked by overlap alone: `no validator`, `a weak ETag alone` …
    public var overlapGround: String {
        Validators(etag: etag, lastModified: lastModified, recentlyChanged: recentlyChanged).whyUnverifiable ?? "no validator"
    }
}

/// What the first request of an attempt asks for.
public enum RequestPlan: Sendable, Hashable {
    /// The whole resource; the part file is emptied first. `discarding` says why existing bytes go.
    case fresh(discarding: String?)
    /// The bytes from `offset` on, with `If-Range` when there is a validator. The request starts
    /// `checked` bytes earlier (`Range: bytes=(offset - checked)-`): those come again and are
    /// compared with the disk before anything is appended, as for `overlap`. A validator can hide a
    /// change (a tester: nginx's `proxy_cache` answers with its own `Date`, so a file rewritten
    /// twice in one second kept one ETag and one Last-Modified that looked strong; after an
    /// eviction the cache fetched the new version, and its range was appended to the old bytes,
    /// "verified with If-Range", exit 0).
    case resume(from: Int64, ifRange: String?)
    /// No validator: `Range: bytes=(offset - overlap)-`, so that the first `overlap` bytes of the
    /// answer can be compared with the last `overlap` bytes on disk before anything is appended.
    case overlap(from: Int64, overlap: Int64)

    /// The bytes on disk this plan keeps, nil for a fetch from zero.
    public var kept: Int64? {
        switch self {
        case .fresh: nil
        case .resume(let offset, _), .overlap(let offset, _): offset
        }
    }

    /// How many bytes before the kept ones the request asks for again, to compare with the disk.
    public var checked: Int64 {
        switch self {
        case .fresh: 0
        case .resume(let offset, _): ResumeRules.checked(before: offset)
        case .overlap(_, let overlap): overlap
        }
    }

    /// Where the requested bytes start: the kept ones less those checked, nil for the whole resource.
    public var rangeStart: Int64? { kept.map { $0 - checked } }
}

/// How the bytes of a response relate to the bytes already on disk.
public enum Disposition: Sendable, Hashable {
    /// A download from zero with nothing before it.
    case fresh
    /// A 206 that continues the part file at `from`.
    case resumed(from: Int64, verified: Bool)
    /// Existing bytes were discarded and the download starts again at zero.
    case restarted(reason: String)
}

/// What to do with a response, decided before any byte of its body is written.
public enum ResponseDecision: Sendable, Hashable {
    /// Write the body at `offset` (truncating the part file there), up to `total` when known.
    case write(offset: Int64, total: Int64?, disposition: Disposition)
    /// Never append this body: empty the part file and ask for the whole resource again.
    case refetch(reason: String)
    /// A transient failure: wait and try again from the bytes on disk.
    case retry(reason: String, retryAfter: String?)
    /// A permanent failure.
    case fail(reason: String)
    /// Compare the first `overlap` bytes of the body with the part file's bytes at `offset`: equal,
    /// write the body from `offset` on (the same bytes again, then the rest, up to `total` when
    /// known); different, the resource changed and is fetched again from zero. `validated`: the
    /// request carried `If-Range` too.
    case verify(offset: Int64, overlap: Int64, total: Int64?, validated: Bool)
}

/// The response head facts the resume rules look at.
public struct ResponseFacts: Sendable, Hashable {
    public var status: Int
    public var reasonPhrase: String
    public var contentLength: Int64?
    public var contentRange: String?
    public var etag: String?
    public var lastModified: String?
    public var retryAfter: String?
    /// The `Date` header: when the server answered (to tell how fresh `lastModified` is).
    public var date: String?
    /// The `Transfer-Encoding` headers, joined with commas.
    public var transferEncoding: String?
    /// `WWW-Authenticate` (401) or `Proxy-Authenticate` (407): the credentials asked for.
    public var authenticate: String?
    /// The `Content-Type` header as sent.
    public var contentType: String?
    /// The request carried credentials (`user:pass@` in the URL or an `Authorization` header): a
    /// 401 then means they were refused, not that they are missing.
    public var sentCredentials: Bool = false
    /// The request carried the proxy's credentials (`user:pass@` in the proxy URL): a 407 then
    /// means they were refused (a tester's wrong password was told to give one).
    public var sentProxyCredentials: Bool = false
    /// For a request through a proxy in absolute form, whether the proxy answered itself; nil for
    /// the server's answer (or no proxy).
    public var source: ResponseSource?

    public init(
        status: Int, reasonPhrase: String = "", contentLength: Int64? = nil, contentRange: String? = nil,
        etag: String? = nil, lastModified: String? = nil, retryAfter: String? = nil, authenticate: String? = nil,
        contentType: String? = nil, date: String? = nil, transferEncoding: String? = nil
    ) {
        self.date = date
        self.transferEncoding = transferEncoding
        self.contentType = contentType
        self.authenticate = authenticate
        self.status = status
        self.reasonPhrase = reasonPhrase
        self.contentLength = contentLength
        self.contentRange = contentRange
        self.etag = etag
        self.lastModified = lastModified
        self.retryAfter = retryAfter
    }

    /// The media type (`text/html`), lower-cased, without parameters; nil when not sent.
    public var mediaType: String? {
        guard let contentType else { return nil }
        let type = contentType.prefix { $0 != ";" }.trimmingWhitespace().lowercased()
        return type.isEmpty ? nil : TerminalText.sanitize(String(type.prefix(80)))
    }

    /// "HTTP 404 Not Found"; "HTTP 403 Forbidden (from the proxy 127.0.0.1:3128)" for a proxy's own.
    public var statusText: String {
        let phrase = TerminalText.sanitize(reasonPhrase).trimmingWhitespace()
        return (phrase.isEmpty ? "HTTP \(status)" : "HTTP \(status) \(phrase)") + (source?.suffix(status: status) ?? "")
    }

    /// Why a 4xx fails the download; a 401 or 407 names the credentials the server asks for.
    public var failureText: String {
        switch status {
        case 401 where sentCredentials:
            return "\(statusText): the server refused the credentials given for \(asked == "some" ? "this URL" : asked)"
        case 401:
            return "\(statusText): the server wants \(asked) credentials; give them as user:pass@ in the URL or with -H 'Authorization: …'"
        case 407 where sentProxyCredentials:
            return "\(statusText): the proxy refused the credentials given in the proxy URL for \(asked == "some" ? "it" : asked)"
        case 407:
            return "\(statusText): the proxy wants \(asked) credentials; give them as user:pass@ in the proxy URL"
        default:
            return statusText
        }
    }

    /// "Basic (realm "files")" from `Basic realm="files"`; the scheme alone when there is no realm.
    private var asked: String {
        guard let authenticate = authenticate.map({ TerminalText.sanitize($0).trimmingWhitespace() }),
              !authenticate.isEmpty else { return "some" }
        let scheme = String(authenticate.prefix { $0 != " " && $0 != "," }.prefix(20))
        guard let start = authenticate.range(of: "realm=\"", options: .caseInsensitive)?.upperBound,
              let end = authenticate[start...].firstIndex(of: "\"") else { return scheme }
        return "\(scheme) (realm \"\(authenticate[start..<end].prefix(60))\")"
    }
}


extension ResponseFacts {
    /// A transfer coding besides `chunked` (and `identity`) the body came in: `gzip` in
    /// `Transfer-Encoding: gzip, chunked` (a tester's server; haul sends no `TE`, so a server may
    /// not use one, and neither decoder undoes it: the gzip bytes were saved as the file).
    public var undecodedCoding: String? {
        guard let transferEncoding else { return nil }
        let codings = transferEncoding.split(separator: ",").map { $0.trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
        if let other = codings.first(where: { $0 != "chunked" && $0 != "identity" }) { return other }
        // Chunked must come last (RFC 9112 6.1): after it, the body runs to the close with its
        // chunks' framing in it (a tester's `chunked, identity` was saved framing and all, exit 0).
        if codings.contains("chunked"), codings.last != "chunked" { return codings.joined(separator: ", ") }
        return nil
    }
}

/// The resume rules of DESIGN.md as pure functions: what to ask for, and what to make of the answer.
public enum ResumeRules {
    /// How many bytes before the end of the part file a resume without validators asks for again,
    /// to compare them with the bytes on disk (fewer when the part file is shorter).
    public static let overlapLength: Int64 = 64 * 1024

    /// How many bytes before the end of the part file a resume with a validator asks for again, to
    /// compare them with the disk: a second check behind the validator, for one that hid a change.
    /// A page: any rewrite of the bytes there shows; it fits a fresh connection's first window, and
    /// takes four seconds at the least limit (1 KiB/s), where 64 KiB would take a minute.
    public static let checkLength: Int64 = 4 * 1024

    /// How many bytes before `offset` a resume with a validator asks for again: `checkLength`,
    /// fewer for a shorter file.
    public static func checked(before offset: Int64) -> Int64 { min(checkLength, offset) }

    /// The request for a part file of `partLength` bytes.
    public static func plan(partLength: Int64, knownTotal: Int64?, validators: Validators) -> RequestPlan {
        guard partLength > 0 else { return .fresh(discarding: nil) }
        if let knownTotal, partLength > knownTotal {
            return .fresh(discarding: "part file longer than the resource")
        }
        guard let ifRange = validators.ifRange else {
            // Without a validator the length must be known (a changed one says the resource
            // changed), and the bytes before the end are fetched again and compared (a change at
            // the same length shows there).
            guard knownTotal != nil else {
                if validators.recentlyChanged {
                    return .fresh(discarding: "the file changed within the second it was answered, and no length to check a resume against")
                }
                return .fresh(discarding: "no validator or length to check a resume against")
            }
            return .overlap(from: partLength, overlap: min(overlapLength, partLength))
        }
        return .resume(from: partLength, ifRange: ifRange)
    }

    /// The decision for a response to `plan`, given what was known before it (`knownType`: the
    /// media type of the response that started the bytes on disk).
    public static func decide(
        plan: RequestPlan, response: ResponseFacts, knownTotal: Int64?, validators: Validators, knownType: String? = nil
    ) -> ResponseDecision {
        if let coding = response.undecodedCoding { return .fail(reason: undecoded(coding)) }
        switch response.status {
        case 200:
            if let offset = plan.kept,
               let page = errorPage(response, kept: offset, knownTotal: knownTotal, validators: validators, knownType: knownType) {
                return .fail(reason: page)
            }
            // A 200 answering a resume under the stored validator with another length is another
            // version, said so: the validator did not follow the bytes (`python3 -m http.server`
            // with a file replaced keeping its date, Apache's `FileETag INode`, nginx's `etag off`,
            // ranges off). Refused, such a download failed at every try, for good (a tester); the
            // body is taken at its own length, as any fresh one. (A proxy that cannot carry a
            // length past 4 GiB sends such a 200 too: the row says the length changed.)
            if plan.kept != nil, let length = response.contentLength, let knownTotal, length != knownTotal, sameBytes(response, validators) {
                return .write(offset: 0, total: length, disposition: .restarted(reason: "resource changed (length \(length), was \(knownTotal), under the same validator)"))
            }
            return .write(offset: 0, total: lengthOf200(response, knownTotal: knownTotal, validators: validators), disposition: dispositionOf200(plan: plan, response: response, validators: validators))
        case 204:
            // No content: the resource is empty (saved as an empty file, as curl does). Answering a
            // resume, it says nothing of the bytes kept: they stay, and the download fails.
            if let offset = plan.kept {
                return .fail(reason: "\(response.statusText) answering a resume after \(Format.bytes(offset)): the bytes are kept")
            }
            return .write(offset: 0, total: 0, disposition: dispositionOf200(plan: plan, response: response, validators: validators))
        case 206:
            if case .overlap(let offset, let overlap) = plan {
                return decideOverlap(from: offset, overlap: overlap, response: response, knownTotal: knownTotal, validators: validators)
            }
            return decide206(plan: plan, response: response, knownTotal: knownTotal, validators: validators)
        case 416:
            // Every resume asks again for bytes before the end of the part file (`RequestPlan.checked`):
            // a range there that cannot be satisfied is of a resource shorter than the bytes kept. A
            // file found whole comes as a 206 of those bytes, compared with the disk (a bare 416 at the
            // end says nothing of which version ends there: a tester's server ignored If-Range, and a
            // new version of the same length was taken for the end of the old one).
            guard plan.kept != nil else { return .fail(reason: "\(response.statusText) for a request without Range") }
            if let reason = changedVersion(response, validators) { return .refetch(reason: reason) }
            return .refetch(reason: "range not satisfiable (resource shorter than the part file)")
        case 408, 429, 500...599:
            return .retry(reason: response.statusText, retryAfter: response.retryAfter)
        case 400...499:
            return .fail(reason: response.failureText)
        default:
            return .fail(reason: "unexpected \(response.statusText)")
        }
    }

    /// The length a 200's body must reach: its `Content-Length`; without one (chunked, or ended by
    /// a close), the length known for the strong ETag it carries, the stored one: the same strong
    /// tag is the same bytes (a tester: a range-ignoring server's close-delimited 200, cut short,
    /// was reported completed, exit 0, though haul knew the file's length).
    static func lengthOf200(_ response: ResponseFacts, knownTotal: Int64?, validators: Validators) -> Int64? {
        if let length = response.contentLength { return length }
        guard let knownTotal, sameBytes(response, validators) else { return nil }
        return knownTotal
    }

    /// Whether `response` carries the stored strong validator: the same bytes. A strong tag, the
    /// same; else a Last-Modified a second or more before its answer's Date, which is strong too
    /// (RFC 9110 8.8.2.2): the same date, and no other tag (a tester's short 200 carrying the
    /// stored date was completed, exit 0).
    static func sameBytes(_ response: ResponseFacts, _ validators: Validators) -> Bool {
        if validators.hasStrongETag {
            return response.etag != nil && response.etag == validators.etag
        }
        guard validators.hasStrongDate, let date = validators.lastModified, response.lastModified == date else { return false }
        return changedVersion(response, validators) == nil
    }

    private static func dispositionOf200(plan: RequestPlan, response: ResponseFacts, validators: Validators) -> Disposition {
        switch plan {
        case .fresh(discarding: nil):
            return .fresh
        case .fresh(discarding: let reason?):
            return .restarted(reason: reason)
        case .resume, .overlap:
            // A 200 to a Range + If-Range request: either the validator no longer matches, or the
            // server does not do ranges. Telling them apart only changes what the row says.
            return .restarted(reason: whyWhole(response, validators))
        }
    }

    /// A 206 to a resume without validators (or with a weak tag alone, or validators of a recent
    /// change): it must start `overlap` bytes before the end of the part file, for a resource of the
    /// length known, and name no other version than the stored validators (a weak tag compared
    /// weakly: a tester's changed `W/"wk-2"` was appended after `W/"wk-1"`); the overlap is then
    /// compared with the disk.
    private static func decideOverlap(
        from offset: Int64, overlap: Int64, response: ResponseFacts, knownTotal: Int64?, validators: Validators
    ) -> ResponseDecision {
        let start = offset - overlap
        guard let header = response.contentRange, let contentRange = ContentRange(header), let range = contentRange.range else {
            return .refetch(reason: "206 without a valid Content-Range")
        }
        guard range.lowerBound == start else {
            return .refetch(reason: "server sent bytes from \(range.lowerBound), asked for \(start)")
        }
        if let reason = mismatch(of: response, range: range, validators: validators) { return .refetch(reason: reason) }
        guard let knownTotal, let total = contentRange.total else {
            return .refetch(reason: "cannot verify a resume without validators")
        }
        guard total == knownTotal else {
            return .refetch(reason: "resource changed (length \(total), was \(knownTotal))")
        }
        return .verify(offset: start, overlap: overlap, total: total, validated: false)
    }

    /// The media types of pages, as error pages are served.
    private static let pageTypes: Set<String> = ["text/html", "text/plain", "application/xhtml+xml"]

    /// Why a 200 answering a resume of `kept` bytes looks like an error page rather than the file, or
    /// nil when it may be the file (a new version, or a server that ignores ranges).
    ///
    /// Proxies, captive portals and overloaded servers answer with a small page and status 200.
    /// Taken for a new version, it would throw the good bytes on disk away and be saved as the file,
    /// so the download fails instead with what the server sent, keeping its bytes. It looks like one
    /// when it is an HTML or text page where the file was not (or nothing said what the file was,
    /// and the page drops the validators the file had), or when it is far smaller than the file
    /// (less than half) without a validator to say the file changed.
    static func errorPage(_ response: ResponseFacts, kept: Int64, knownTotal: Int64?, validators: Validators, knownType: String?) -> String? {
        let type = response.mediaType
        let page = type.map(pageTypes.contains) ?? false
        let wasPage = knownType.map { pageTypes.contains($0.lowercased()) }
        let unvalidated = response.etag == nil && response.lastModified == nil
        let total = knownTotal ?? kept
        let suspicious = (page && wasPage == false)
            || (page && wasPage == nil && unvalidated && !validators.isEmpty)
            || (unvalidated && response.contentLength.map { $0 < total / 2 } == true)
        guard suspicious else { return nil }
        let size = response.contentLength.map { Format.bytes($0) } ?? "unknown length"
        let what = [type, size, unvalidated ? "no validators" : nil].compactMap { $0 }.joined(separator: ", ")
        return "the server answered the resume with HTTP 200 (\(what)) instead of the file: it looks like an error page, "
            + "so the \(Format.bytes(kept)) on disk are kept (cancel and add the URL again if it is the new file)"
    }

    /// Why a 200 answered a Range + If-Range request: the validator no longer matches, the server
    /// would not take a date as the validator, or it does not do ranges. Telling them apart only
    /// changes what the row says.
    ///
    /// Entity tags are compared weakly here (`W/"x"` and `"x"` are the same version): Apache makes a
    /// file's tag weak when it is asked for within a second of the file's change, and a resume then
    /// carries the date, which Apache refuses until the file is a minute old (its 200 then brings
    /// the same tag, strong).
    static func whyWhole(_ response: ResponseFacts, _ validators: Validators) -> String {
        if let stored = validators.etag {
            guard let now = response.etag, opaque(now) == opaque(stored) else { return "resource changed" }
            // The same strong tag is the same bytes, whatever the date says.
            if validators.hasStrongETag, now == stored { return "server ignores ranges" }
        }
        if let stored = validators.lastModified {
            if let now = response.lastModified {
                if now != stored { return "resource changed" }
            } else if validators.etag == nil {
                return "resource changed"
            }
        }
        if !validators.hasStrongETag, validators.lastModified != nil {
            return "server would not resume on the Last-Modified date"
        }
        return "server ignores ranges"
    }

    /// An entity tag without its weakness mark (`W/`).
    private static func opaque(_ etag: String) -> Substring {
        etag.hasPrefix("W/") ? etag.dropFirst(2) : Substring(etag)
    }

    /// Why a 206 in several parts (`multipart/byteranges`) is never written: haul asks for one range,
    /// and such a body holds each part's headers and boundary besides its bytes (a tester's server
    /// sent one range so, with a `Content-Range` of its own and no length: the framing was written
    /// into the file, completed, exit 0). Nil for any other type.
    static func multipart(_ response: ResponseFacts) -> String? {
        guard response.mediaType == "multipart/byteranges" else { return nil }
        return "206 in several parts (multipart/byteranges) where one range was asked for"
    }

    /// Why a 206 that starts where asked cannot be appended: its body is in several parts, or not
    /// the length its Content-Range says (it starts elsewhere), or its validators name another
    /// version than the bytes on disk. Found by use (a tester): a first answer with a weak ETag (Apache, within a
    /// second of a change) made the resume carry the date, which the same second's new version
    /// matched; its 206 brought another ETag, and was appended: a file of both, exit 0. And a 206
    /// whose body was 500 bytes longer than its range was written at the offset asked for.
    static func mismatch(of response: ResponseFacts, range: ClosedRange<Int64>, validators: Validators) -> String? {
        if let multipart = multipart(response) { return multipart }
        let length = range.upperBound - range.lowerBound + 1
        if let body = response.contentLength, body != length {
            return "206 whose body (\(body) bytes) is not its Content-Range (\(length) bytes)"
        }
        return changedVersion(response, validators)
    }

    /// Why a response names another version than `validators`: an ETag or a Last-Modified of its
    /// own that differs from the stored one; nil when those it carries agree.
    static func changedVersion(_ response: ResponseFacts, _ validators: Validators) -> String? {
        if let stored = validators.etag, let etag = response.etag {
            // A strong tag must come back as it was; a weak one names the same version with or
            // without its `W/` (Apache makes it strong a second after the change).
            let same = validators.hasStrongETag ? etag == stored : opaque(etag) == opaque(stored)
            if !same { return "resource changed (ETag)" }
        }
        if let stored = validators.lastModified, let date = response.lastModified, date != stored {
            return "resource changed (Last-Modified)"
        }
        return nil
    }

    /// Why a body in `coding` is refused: its bytes are not the file's.
    static func undecoded(_ coding: String) -> String {
        "the server sent the body in a transfer coding haul does not decode (\(TerminalText.sanitize(String(coding.prefix(40))))), not the file's bytes"
    }

    /// Why a 206 to an `If-Range` cannot be taken as the version on disk: it carries none of the
    /// validators that version had, so nothing shows the server compared them (a tester: a mirror
    /// behind a redirect, or a balancer's other server, answered the range of another build without
    /// any; it was appended). RFC 9110 15.3.7: a 206 carries the ETag a 200 would have.
    public static func unconfirmed(_ response: ResponseFacts, _ validators: Validators) -> String? {
        let echoed = (validators.etag != nil && response.etag != nil) || (validators.lastModified != nil && response.lastModified != nil)
        if validators.isEmpty || echoed { return nil }
        return "206 without the ETag or Last-Modified the file had: nothing shows it is the same version"
    }

    /// The resource's length when a 206 carries all of it: `bytes 0-(T-1)/T`, its body T bytes.
    private static func wholeBody(_ response: ResponseFacts) -> Int64? {
        guard let header = response.contentRange, let contentRange = ContentRange(header), let range = contentRange.range,
              let total = contentRange.total, range.lowerBound == 0, range.upperBound == total - 1, multipart(response) == nil,
              response.contentLength.map({ $0 == total }) ?? true else { return nil }
        return total
    }

    private static func decide206(
        plan: RequestPlan, response: ResponseFacts, knownTotal: Int64?, validators: Validators
    ) -> ResponseDecision {
        guard case .resume(let kept, let ifRange) = plan else {
            // The whole resource as a 206 (`bytes 0-(T-1)/T`) is its 200, as curl and wget take it
            // (a tester's server); any other part of it, asked for by nobody, is refused.
            if case .fresh = plan, let whole = wholeBody(response) {
                return .write(offset: 0, total: whole, disposition: dispositionOf200(plan: plan, response: response, validators: validators))
            }
            return .fail(reason: "\(response.statusText) for a request without Range")
        }
        guard let header = response.contentRange, let contentRange = ContentRange(header),
              let range = contentRange.range
        else {
            return .refetch(reason: "206 without a valid Content-Range")
        }
        let checked = plan.checked
        let offset = kept - checked
        guard range.lowerBound == offset else {
            return .refetch(reason: "server sent bytes from \(range.lowerBound), asked for \(offset)")
        }
        if let knownTotal, let total = contentRange.total, total != knownTotal {
            return .refetch(reason: "resource changed (length \(total), was \(knownTotal))")
        }
        // A range past the known end (`bytes N-E/*` says no length) is of another version (a
        // tester's was cut at the old length and reported completed).
        if let knownTotal, range.upperBound >= knownTotal {
            return .refetch(reason: "resource changed (bytes up to \(range.upperBound + 1), was \(knownTotal))")
        }
        if let reason = mismatch(of: response, range: range, validators: validators) {
            return .refetch(reason: reason)
        }
        if ifRange != nil, let reason = unconfirmed(response, validators) {
            return .refetch(reason: reason)
        }
        if ifRange == nil {
            // Unverified: the only evidence is the length, so it must be known on both sides.
            guard let knownTotal, contentRange.total == knownTotal else {
                return .refetch(reason: "cannot verify a resume without validators")
            }
        }
        return .verify(offset: offset, overlap: checked, total: contentRange.total ?? knownTotal, validated: ifRange != nil)
    }
}

/// What to do with the response to a request for one part of a segmented download.
public enum PartDecision: Sendable, Hashable {
    /// Write the body at the part's offset.
    case write
    /// Never write this body into the parts: the resource changed (or stopped doing ranges), so the
    /// whole file starts over. `freshBody` when the response is a 200 that carries the whole new version.
    case restart(reason: String, freshBody: Bool)
    /// A transient failure of this connection.
    case retry(reason: String, retryAfter: String?)
    case fail(reason: String)
}

extension ResumeRules {
    /// The decision for the response to `Range: bytes=from-(to-1)` with `If-Range`, for a resource of
    /// `total` bytes whose parts were fetched under `validators`.
    public static func decidePart(
        from: Int64, response: ResponseFacts, total: Int64, validators: Validators, knownType: String? = nil, kept: Int64 = 0
    ) -> PartDecision {
        if let coding = response.undecodedCoding { return .fail(reason: undecoded(coding)) }
        switch response.status {
        case 206:
            guard let header = response.contentRange, let contentRange = ContentRange(header), let range = contentRange.range else {
                return .restart(reason: "206 without a valid Content-Range", freshBody: false)
            }
            guard range.lowerBound == from else {
                return .restart(reason: "server sent bytes from \(range.lowerBound), asked for \(from)", freshBody: false)
            }
            if let length = contentRange.total, length != total {
                return .restart(reason: "resource changed (length \(length), was \(total))", freshBody: false)
            }
            if let reason = mismatch(of: response, range: range, validators: validators) ?? unconfirmed(response, validators) {
                return .restart(reason: reason, freshBody: false)
            }
            return .write
        case 200:
            if let page = errorPage(response, kept: kept, knownTotal: total, validators: validators, knownType: knownType) {
                return .fail(reason: page)
            }
            return .restart(reason: whyWhole(response, validators), freshBody: true)
        case 416:
            return .restart(reason: "range not satisfiable (resource shorter than before)", freshBody: false)
        case 408, 429, 500...599:
            return .retry(reason: response.statusText, retryAfter: response.retryAfter)
        case 400...499:
            return .fail(reason: response.failureText)
        default:
            return .fail(reason: "unexpected \(response.statusText)")
        }
    }
}
