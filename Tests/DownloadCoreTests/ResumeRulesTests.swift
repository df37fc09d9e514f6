import DownloadCore
import Foundation
import Testing

/// The resume rules of DESIGN.md: what to ask for, and what a response allows.
@Suite struct ResumeRulesTests {
    let strong = Validators(etag: "\"abc\"", lastModified: "Thu, 01 Jan 2026 00:00:00 GMT")

    // MARK: Plans

    @Test func nothingOnDiskAsksForTheWholeResource() {
        #expect(ResumeRules.plan(partLength: 0, knownTotal: nil, validators: Validators()) == .fresh(discarding: nil))
    }

    @Test func aStrongETagIsPreferredForIfRange() {
        #expect(ResumeRules.plan(partLength: 10, knownTotal: 100, validators: strong) == .resume(from: 10, ifRange: "\"abc\""))
    }

    @Test func aWeakETagFallsBackToLastModified() {
        let date = "Thu, 01 Jan 2026 00:00:00 GMT"
        let weak = Validators(etag: "W/\"abc\"", lastModified: date)
        #expect(ResumeRules.plan(partLength: 10, knownTotal: 100, validators: weak) == .resume(from: 10, ifRange: date))
        // A weak ETag alone cannot go in If-Range: the resume is checked by overlap instead.
        #expect(ResumeRules.plan(partLength: 10, knownTotal: 100, validators: Validators(etag: "W/\"abc\"")) == .overlap(from: 10, overlap: 10))
    }

    @Test func noValidatorButAKnownLengthResumesFromBeforeTheEndToCompareTheOverlap() {
        #expect(ResumeRules.plan(partLength: 10, knownTotal: 100, validators: Validators()) == .overlap(from: 10, overlap: 10))
        #expect(ResumeRules.plan(partLength: 300_000, knownTotal: 1_000_000, validators: Validators()) == .overlap(from: 300_000, overlap: 65_536))
    }

    @Test func anOverlapAnswerIsComparedBeforeAnythingIsAppended() {
        let none = Validators()
        let plan = RequestPlan.overlap(from: 300, overlap: 100)
        // From 200, for the length known: compare bytes 200-299 with the disk, then write from 200.
        let fits = ResponseFacts(status: 206, contentRange: "bytes 200-999/1000")
        #expect(decide(plan, fits, total: 1000, validators: none) == .verify(offset: 200, overlap: 100, total: 1000, validated: false))
        #expect(decide(plan, ResponseFacts(status: 206, contentRange: "bytes 300-999/1000"), total: 1000, validators: none) == .refetch(reason: "server sent bytes from 300, asked for 200"))
        #expect(decide(plan, ResponseFacts(status: 206, contentRange: "bytes 200-1199/1200"), total: 1000, validators: none) == .refetch(reason: "resource changed (length 1200, was 1000)"))
        #expect(decide(plan, ResponseFacts(status: 206, contentRange: "bytes 200-999/*"), total: 1000, validators: none) == .refetch(reason: "cannot verify a resume without validators"))
        #expect(decide(plan, ResponseFacts(status: 416, contentRange: "bytes */150"), total: 1000, validators: none) == .refetch(reason: "range not satisfiable (resource shorter than the part file)"))
        #expect(decide(plan, ResponseFacts(status: 200, contentLength: 1000), total: 1000, validators: none) == .write(offset: 0, total: 1000, disposition: .restarted(reason: "server ignores ranges")))
    }

    @Test func noValidatorAndNoLengthStartsOver() {
        #expect(ResumeRules.plan(partLength: 10, knownTotal: nil, validators: Validators()) == .fresh(discarding: "no validator or length to check a resume against"))
    }

    @Test func aPartFileLongerThanTheResourceStartsOver() {
        #expect(ResumeRules.plan(partLength: 101, knownTotal: 100, validators: strong) == .fresh(discarding: "part file longer than the resource"))
    }

    // MARK: Decisions

    func decide(_ plan: RequestPlan, _ response: ResponseFacts, total: Int64? = 100, validators: Validators? = nil) -> ResponseDecision {
        ResumeRules.decide(plan: plan, response: response, knownTotal: total, validators: validators ?? strong)
    }

    /// A 200 answering a resume under the stored validator with another length is another
    /// version, and the row says so: servers whose validators do not follow the bytes send it for
    /// a file replaced (a tester's refusal of it left python's http.server, Apache's `FileETag
    /// INode` and nginx's `etag off`, ranges off, failing at every try).
    @Test func a200OfAnotherLengthUnderTheSameValidatorIsAnotherVersionSaidSo() {
        let total: Int64 = 4_298_113_029
        let plan = RequestPlan.resume(from: 1_800_000, ifRange: "\"abc\"")
        let short = ResponseFacts(status: 200, contentLength: total % (1 << 32), etag: "\"abc\"")
        #expect(decide(plan, short, total: total) == .write(
            offset: 0, total: total % (1 << 32), disposition: .restarted(reason: "resource changed (length 3145733, was 4298113029, under the same validator)")
        ))
        #expect(decide(.fresh(discarding: "resource changed"), short, total: total) == .write(offset: 0, total: total % (1 << 32), disposition: .restarted(reason: "resource changed")))
        let same = ResponseFacts(status: 200, contentLength: total, etag: "\"abc\"")
        #expect(decide(plan, same, total: total) == .write(offset: 0, total: total, disposition: .restarted(reason: "server ignores ranges")))
        let other = ResponseFacts(status: 200, contentLength: 3_145_733, etag: "\"new\"")
        #expect(decide(plan, other, total: total) == .write(offset: 0, total: 3_145_733, disposition: .restarted(reason: "resource changed")))
        // A date, the same, and another length (python's http.server, a file replaced keeping its date).
        let dated = Validators(lastModified: "Sun, 01 Nov 2026 10:00:00 GMT")
        let byDate = RequestPlan.resume(from: 400, ifRange: "Sun, 01 Nov 2026 10:00:00 GMT")
        let datedShort = ResponseFacts(status: 200, contentLength: 600, lastModified: "Sun, 01 Nov 2026 10:00:00 GMT")
        #expect(decide(byDate, datedShort, total: 1000, validators: dated) == .write(
            offset: 0, total: 600, disposition: .restarted(reason: "resource changed (length 600, was 1000, under the same validator)")
        ))
    }

    // MARK: Found by a tester against servers of their own (eighteenth session)

    /// A weak tag alone resumes by overlap; a 206 with another weak tag is another version, even
    /// when the 64 KiB before the offset did not change (it was appended: a file of both, exit 0).
    @Test func anOverlapResumeComparesAWeakTagWeakly() {
        let weak = Validators(etag: "W/\"wk-1\"")
        let plan = ResumeRules.plan(partLength: 1_500_000, knownTotal: 3_000_000, validators: weak)
        #expect(plan == .overlap(from: 1_500_000, overlap: 65_536))
        let changed = ResponseFacts(status: 206, contentRange: "bytes 1434464-2999999/3000000", etag: "W/\"wk-2\"")
        #expect(decide(plan, changed, total: 3_000_000, validators: weak) == .refetch(reason: "resource changed (ETag)"))
        for same in ["W/\"wk-1\"", "\"wk-1\""] {
            let answer = ResponseFacts(status: 206, contentRange: "bytes 1434464-2999999/3000000", etag: same)
            #expect(decide(plan, answer, total: 3_000_000, validators: weak) == .verify(offset: 1_434_464, overlap: 65_536, total: 3_000_000, validated: false))
        }
    }

    /// RFC 9110 8.8.2.2: a Last-Modified less than a second before the answer's Date is weak. A file
    /// replaced within that second kept its date (and nginx's tag, the second and the size): the
    /// date's If-Range matched the new version and its range was appended.
    @Test func validatorsOfAChangeWithinTheSecondNeverVerifyAResume() {
        let modified = "Sat, 28 Nov 2026 03:00:00 GMT"
        #expect(Validators.changedRecently(lastModified: modified, date: modified, now: Date()))
        #expect(!Validators.changedRecently(lastModified: modified, date: "Sat, 28 Nov 2026 03:00:01 GMT", now: Date()))
        #expect(!Validators.changedRecently(lastModified: nil, date: modified, now: Date()))
        // Without a Date, the clock says when it was answered.
        let then = Date(timeIntervalSince1970: 1_795_834_800.5)
        #expect(Validators.changedRecently(lastModified: modified, date: nil, now: then))
        #expect(!Validators.changedRecently(lastModified: modified, date: nil, now: then.addingTimeInterval(1)))

        let recent = Validators(etag: "\"6929a0f0-800000\"", lastModified: modified, recentlyChanged: true)
        #expect(recent.ifRange == nil)
        #expect(ResumeRules.plan(partLength: 3_000_000, knownTotal: 8_388_608, validators: recent) == .overlap(from: 3_000_000, overlap: 65_536))
        #expect(ResumeRules.plan(partLength: 3_000_000, knownTotal: nil, validators: recent)
            == .fresh(discarding: "the file changed within the second it was answered, and no length to check a resume against"))
        #expect(Validators(etag: "\"a\"", lastModified: modified).ifRange == "\"a\"")
    }

    /// A 206 in several parts (`multipart/byteranges`) to a request for one range is never written,
    /// whatever its own Content-Range says: a tester's server sent one so, without a length, and its
    /// framing was written into the file.
    @Test func a206InSeveralPartsIsNeverWritten() {
        let reason = "206 in several parts (multipart/byteranges) where one range was asked for"
        let multipart = ResponseFacts(status: 206, contentRange: "bytes 0-99/100", etag: "\"abc\"", contentType: "multipart/byteranges; boundary=THIS_STRING_SEPARATES")
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), multipart) == .refetch(reason: reason))
        #expect(decide(.overlap(from: 40, overlap: 40), multipart, validators: Validators()) == .refetch(reason: reason))
        #expect(ResumeRules.decidePart(from: 0, response: multipart, total: 100, validators: strong) == .restart(reason: reason, freshBody: false))
        #expect(decide(.fresh(discarding: nil), multipart) == .fail(reason: "HTTP 206 for a request without Range"))
        // One range in its own type is written.
        var single = multipart
        single.contentType = "application/octet-stream"
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), single) == .verify(offset: 0, overlap: 40, total: 100, validated: true))
    }

    /// A Last-Modified haul cannot read (ISO 8601, no zone, epoch seconds) cannot be shown to be
    /// strong, so it never goes in If-Range: the resume is checked by overlap. A tester's server
    /// sent such dates, and a file rewritten within the second was resumed on the date and spliced.
    @Test func aDateHaulCannotReadNeverVerifiesAResume() {
        for unread in ["2026-11-28T08:22:04Z", "Sat, 28 Nov 2026 08:22:05", "1795854124", "yesterday at noon"] {
            let validators = Validators(lastModified: unread)
            #expect(!validators.hasStrongDate && validators.ifRange == nil, "\(unread)")
            #expect(ResumeRules.plan(partLength: 400_000, knownTotal: 4_194_304, validators: validators) == .overlap(from: 400_000, overlap: 65_536), "\(unread)")
            // A strong tag beside it still verifies.
            #expect(Validators(etag: "\"a\"", lastModified: unread).ifRange == "\"a\"")
        }
        #expect(Validators(lastModified: "Sun, 06 Nov 1994 08:49:37 GMT").ifRange == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(Validators(lastModified: "Sunday, 06-Nov-94 08:49:37 GMT").hasStrongDate)
    }

    /// A 206 to an If-Range without any validator the file had: a mirror or another server behind a
    /// balancer that ignores If-Range (another build, appended). One validator coming back is enough.
    @Test func a206WithoutTheFilesValidatorsIsNotAppended() {
        let plan = RequestPlan.resume(from: 40, ifRange: "\"abc\"")
        let bare = ResponseFacts(status: 206, contentLength: 100, contentRange: "bytes 0-99/100")
        let reason = "206 without the ETag or Last-Modified the file had: nothing shows it is the same version"
        #expect(decide(plan, bare) == .refetch(reason: reason))
        var dated = bare
        dated.lastModified = strong.lastModified
        #expect(decide(plan, dated) == .verify(offset: 0, overlap: 40, total: 100, validated: true))
        #expect(ResumeRules.decidePart(from: 50, response: ResponseFacts(status: 206, contentRange: "bytes 50-99/100"), total: 100, validators: strong)
            == .restart(reason: reason, freshBody: false))
    }

    /// A 416 whose ETag is another version's says nothing of this one's end: a new version of exactly
    /// the part file's length was taken for the rest of the old one, which was reported complete.
    /// No 416 is the end now: a resume asks for bytes before the end, which a file found whole sends.
    @Test func a416OfAnotherVersionIsNeverTheEnd() {
        let plan = RequestPlan.resume(from: 1_500_000, ifRange: "\"s1\"")
        let validators = Validators(etag: "\"s1\"")
        let other = ResponseFacts(status: 416, contentRange: "bytes */1500000", etag: "\"s2\"")
        #expect(decide(plan, other, total: nil, validators: validators) == .refetch(reason: "resource changed (ETag)"))
        let same = ResponseFacts(status: 416, contentRange: "bytes */1500000", etag: "\"s1\"")
        #expect(decide(plan, same, total: nil, validators: validators) == .refetch(reason: "range not satisfiable (resource shorter than the part file)"))
    }

    @Test func aBodyInATransferCodingHaulDoesNotDecodeIsRefused() {
        let reason = "the server sent the body in a transfer coding haul does not decode (gzip), not the file's bytes"
        let gzipped = ResponseFacts(status: 200, transferEncoding: "gzip, chunked")
        #expect(decide(.fresh(discarding: nil), gzipped) == .fail(reason: reason))
        #expect(ResumeRules.decidePart(from: 0, response: gzipped, total: 100, validators: strong) == .fail(reason: reason))
        for plain in ["chunked", "Chunked", "identity, chunked", " chunked "] {
            #expect(ResponseFacts(status: 200, transferEncoding: plain).undecodedCoding == nil, "\(plain)")
        }
        #expect(ResponseFacts(status: 200, transferEncoding: "x-custom,chunked").undecodedCoding == "x-custom")
        // Chunked not last: the body would be read to the close with its framing (a tester's
        // `chunked, identity` was saved so, exit 0; two headers join as one list).
        #expect(ResponseFacts(status: 200, transferEncoding: "chunked, identity").undecodedCoding == "chunked, identity")
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 200, transferEncoding: "chunked,Identity"))
            == .fail(reason: "the server sent the body in a transfer coding haul does not decode (chunked, identity), not the file's bytes"))
    }

    @Test func httpDatesAreReadInPlaceAndInTheirOldForms() {
        #expect(HTTPDate.seconds("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.seconds("Thu, 29 Feb 2024 23:59:59 GMT") == 1_709_251_199)
        #expect(HTTPDate.seconds("Sunday, 06-Nov-94 08:49:37 GMT") == 784_111_777)
        #expect(HTTPDate.seconds("Sun Nov  6 08:49:37 1994") == 784_111_777)
        for bad in ["", "soon", "Sun, 06 Xyz 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:61 GMX", "Sun, 0x Nov 1994 08:49:37 GMT"] {
            #expect(HTTPDate.seconds(bad) == nil, "\(bad)")
        }
    }

    @Test func aNoContentAnswerIsAnEmptyFileButNeverTheEndOfBytesKept() {
        let noContent = ResponseFacts(status: 204, reasonPhrase: "No Content", contentLength: 12, etag: "\"other\"")
        // From zero: the resource is empty (a Content-Length on a 204 is not a body).
        #expect(decide(.fresh(discarding: nil), noContent) == .write(offset: 0, total: 0, disposition: .fresh))
        #expect(decide(.fresh(discarding: "part file longer than the resource"), noContent)
            == .write(offset: 0, total: 0, disposition: .restarted(reason: "part file longer than the resource")))
        // Answering a resume, it says nothing of the bytes kept, whatever its validators.
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), noContent) == .fail(reason: "HTTP 204 No Content answering a resume after 40 B: the bytes are kept"))
        #expect(decide(.overlap(from: 40, overlap: 40), noContent, validators: Validators()) == .fail(reason: "HTTP 204 No Content answering a resume after 40 B: the bytes are kept"))
        // Nor for a part of a download over several connections.
        guard case .fail = ResumeRules.decidePart(from: 50, response: noContent, total: 100, validators: strong) else {
            Issue.record("a part answered by 204 must fail and keep its bytes")
            return
        }
    }

    /// A resume with a validator asks again for the 4 KiB before the bytes kept (all of them when
    /// fewer), and its 206 is compared with the disk before anything is appended: a validator can
    /// hide a change (nginx's proxy_cache, its own Date on a file rewritten within a second).
    @Test func a206FromTheCheckedBytesIsComparedWithTheDiskBeforeItIsAppended() {
        let short = RequestPlan.resume(from: 40, ifRange: "\"abc\"")
        #expect(short.checked == 40 && short.rangeStart == 0)
        let response = ResponseFacts(status: 206, contentLength: 100, contentRange: "bytes 0-99/100", etag: "\"abc\"")
        #expect(decide(short, response) == .verify(offset: 0, overlap: 40, total: 100, validated: true))
        let long = RequestPlan.resume(from: 300_000, ifRange: "\"abc\"")
        #expect(long.checked == 4096 && long.rangeStart == 295_904)
        let answer = ResponseFacts(status: 206, contentLength: 704_096, contentRange: "bytes 295904-999999/1000000", etag: "\"abc\"")
        #expect(decide(long, answer, total: 1_000_000) == .verify(offset: 295_904, overlap: 4096, total: 1_000_000, validated: true))
        #expect(RequestPlan.fresh(discarding: nil).rangeStart == nil)
    }

    @Test func a206AtTheWrongOffsetIsNeverAppended() {
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), ResponseFacts(status: 206, contentRange: "bytes 30-99/100")) == .refetch(reason: "server sent bytes from 30, asked for 0"))
        // The bytes kept on, without those to compare: never taken.
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), ResponseFacts(status: 206, contentRange: "bytes 40-99/100", etag: "\"abc\"")) == .refetch(reason: "server sent bytes from 40, asked for 0"))
    }

    @Test func a206WithAnotherTotalIsAChangedResource() {
        let response = ResponseFacts(status: 206, contentRange: "bytes 0-119/120")
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), response) == .refetch(reason: "resource changed (length 120, was 100)"))
    }

    @Test func a206WithAnotherStrongETagIsAChangedResource() {
        let response = ResponseFacts(status: 206, contentRange: "bytes 0-99/100", etag: "\"xyz\"")
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), response) == .refetch(reason: "resource changed (ETag)"))
    }

    @Test func a206WithoutContentRangeIsRefetched() {
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), ResponseFacts(status: 206)) == .refetch(reason: "206 without a valid Content-Range"))
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), ResponseFacts(status: 206, contentRange: "bytes 40-20/100")) == .refetch(reason: "206 without a valid Content-Range"))
    }

    @Test func anUnverified206NeedsTheSameKnownLength() {
        let none = Validators()
        let same = ResponseFacts(status: 206, contentRange: "bytes 0-99/100")
        #expect(decide(.resume(from: 40, ifRange: nil), same, validators: none) == .verify(offset: 0, overlap: 40, total: 100, validated: false))
        let unknown = ResponseFacts(status: 206, contentRange: "bytes 0-99/*")
        #expect(decide(.resume(from: 40, ifRange: nil), unknown, validators: none) == .refetch(reason: "cannot verify a resume without validators"))
    }

    @Test func a200ToARangeRequestRestartsAndSaysWhy() {
        let changed = ResponseFacts(status: 200, contentLength: 100, etag: "\"new\"")
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), changed) == .write(offset: 0, total: 100, disposition: .restarted(reason: "resource changed")))
        let same = ResponseFacts(status: 200, contentLength: 100, etag: "\"abc\"")
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), same) == .write(offset: 0, total: 100, disposition: .restarted(reason: "server ignores ranges")))
        let dateOnly = Validators(lastModified: "old")
        let newDate = ResponseFacts(status: 200, contentLength: 100, lastModified: "new")
        #expect(decide(.resume(from: 40, ifRange: "old"), newDate, validators: dateOnly) == .write(offset: 0, total: 100, disposition: .restarted(reason: "resource changed")))
    }

    /// A 206 to a resume by date (the stored tag weak) that brings another tag, or another date,
    /// is another version: never appended. Found by a tester with Apache: a file replaced within
    /// the same second as the first answer kept its date, so the 206 came, with the new file's
    /// tag; haul appended it and reported a file of both complete.
    @Test func a206OfAnotherVersionIsNeverAppendedWhateverTheIfRangeWas() {
        let date = "Fri, 27 Nov 2026 20:50:22 GMT"
        let weak = Validators(etag: "W/\"1e8480-6614cc0cb6be5\"", lastModified: date)
        let plan = RequestPlan.resume(from: 40, ifRange: date)
        func answer(etag: String?, lastModified: String? = nil) -> ResponseDecision {
            decide(plan, ResponseFacts(status: 206, contentLength: 100, contentRange: "bytes 0-99/100", etag: etag, lastModified: lastModified ?? date), validators: weak)
        }
        #expect(answer(etag: "\"1e8480-6614cc0d29960\"") == .refetch(reason: "resource changed (ETag)"))
        #expect(answer(etag: "W/\"1e8480-6614cc0d29960\"") == .refetch(reason: "resource changed (ETag)"))
        #expect(answer(etag: nil, lastModified: "Fri, 27 Nov 2026 20:50:23 GMT") == .refetch(reason: "resource changed (Last-Modified)"))
        // The same version: its tag strong now, or still weak.
        #expect(answer(etag: "\"1e8480-6614cc0cb6be5\"") == .verify(offset: 0, overlap: 40, total: 100, validated: true))
        #expect(answer(etag: "W/\"1e8480-6614cc0cb6be5\"") == .verify(offset: 0, overlap: 40, total: 100, validated: true))
        // A stored strong tag must come back exactly.
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), ResponseFacts(status: 206, contentLength: 100, contentRange: "bytes 0-99/100", etag: "W/\"abc\"")) == .refetch(reason: "resource changed (ETag)"))
        // The parts of a segmented download obey the same rule.
        #expect(ResumeRules.decidePart(from: 40, response: ResponseFacts(status: 206, contentLength: 60, contentRange: "bytes 40-99/100", etag: "\"other\"", lastModified: date), total: 100, validators: weak)
            == .restart(reason: "resource changed (ETag)", freshBody: false))
    }

    /// A 206 whose body is not the length its Content-Range says starts elsewhere than it claims:
    /// never written at the offset asked for. Found by a tester (a body 500 bytes longer).
    @Test func a206WhoseBodyIsNotItsRangeIsNeverAppended() {
        let response = ResponseFacts(status: 206, contentLength: 560, contentRange: "bytes 40-99/100", etag: "\"abc\"")
        let resumed = ResponseFacts(status: 206, contentLength: 600, contentRange: "bytes 0-99/100", etag: "\"abc\"")
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), resumed) == .refetch(reason: "206 whose body (600 bytes) is not its Content-Range (100 bytes)"))
        #expect(ResumeRules.decidePart(from: 40, response: response, total: 100, validators: strong) == .restart(reason: "206 whose body (560 bytes) is not its Content-Range (60 bytes)", freshBody: false))
        // Without a length (chunked), the range alone says where the body goes.
        let chunked = ResponseFacts(status: 206, contentRange: "bytes 0-99/100", etag: "\"abc\"")
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), chunked) == .verify(offset: 0, overlap: 40, total: 100, validated: true))
    }

    /// Apache: a file asked for within a second of its change gets a weak tag, so the resume
    /// carries the date, which Apache answers with the whole file until the file is a minute old
    /// (the tag strong by then). The row says so, not that the file changed.
    @Test func a200ToAResumeByDateSaysWhetherTheFileChanged() {
        let date = "Fri, 27 Nov 2026 20:50:22 GMT"
        let weak = Validators(etag: "W/\"186a0-66148356e8d88\"", lastModified: date)
        let plan = RequestPlan.resume(from: 40, ifRange: date)
        func restarted(_ response: ResponseFacts, _ validators: Validators = weak) -> ResponseDecision {
            decide(plan, response, validators: validators)
        }
        func write(_ reason: String) -> ResponseDecision { .write(offset: 0, total: 100, disposition: .restarted(reason: reason)) }
        let refused = "server would not resume on the Last-Modified date"
        // The same version: its tag strong now, or still weak; the date alone (no tag) the same.
        #expect(restarted(ResponseFacts(status: 200, contentLength: 100, etag: "\"186a0-66148356e8d88\"", lastModified: date)) == write(refused))
        #expect(restarted(ResponseFacts(status: 200, contentLength: 100, etag: "W/\"186a0-66148356e8d88\"", lastModified: date)) == write(refused))
        #expect(restarted(ResponseFacts(status: 200, contentLength: 100, lastModified: date), Validators(lastModified: date)) == write(refused))
        // Another version: another tag, another date, or the tag gone.
        #expect(restarted(ResponseFacts(status: 200, contentLength: 100, etag: "\"186a0-66148356e9000\"", lastModified: date)) == write("resource changed"))
        #expect(restarted(ResponseFacts(status: 200, contentLength: 100, etag: "W/\"186a0-66148356e8d88\"", lastModified: "Fri, 27 Nov 2026 20:50:23 GMT")) == write("resource changed"))
        #expect(restarted(ResponseFacts(status: 200, contentLength: 100, lastModified: date)) == write("resource changed"))
        // A strong tag matched is the same bytes: the server ignored the range, whatever the date says.
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), ResponseFacts(status: 200, contentLength: 100, etag: "\"abc\"", lastModified: "another date")) == write("server ignores ranges"))
        #expect(decide(.resume(from: 40, ifRange: "\"abc\""), ResponseFacts(status: 200, contentLength: 100, etag: "W/\"abc\"", lastModified: strong.lastModified)) == write("server ignores ranges"))
    }

    @Test func a200ToAFreshRequestIsFreshOrARestart() {
        let response = ResponseFacts(status: 200, contentLength: 100)
        #expect(decide(.fresh(discarding: nil), response) == .write(offset: 0, total: 100, disposition: .fresh))
        #expect(decide(.fresh(discarding: "why"), response) == .write(offset: 0, total: 100, disposition: .restarted(reason: "why")))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 200)) == .write(offset: 0, total: nil, disposition: .fresh))
    }

    /// A part file that holds the whole resource is found whole by the 206 of its last bytes,
    /// compared with the disk; a 416 at its end is never taken for it (it names no version).
    @Test func aFileFoundWholeIsCheckedByItsLastBytes() {
        let whole = RequestPlan.resume(from: 1_000_000, ifRange: "\"abc\"")
        let last = ResponseFacts(status: 206, contentLength: 4096, contentRange: "bytes 995904-999999/1000000", etag: "\"abc\"")
        #expect(decide(whole, last, total: 1_000_000) == .verify(offset: 995_904, overlap: 4096, total: 1_000_000, validated: true))
        let unsatisfiable = "range not satisfiable (resource shorter than the part file)"
        #expect(decide(.resume(from: 100, ifRange: "\"abc\""), ResponseFacts(status: 416, contentRange: "bytes */100")) == .refetch(reason: unsatisfiable))
        #expect(decide(.resume(from: 100, ifRange: "\"abc\""), ResponseFacts(status: 416)) == .refetch(reason: unsatisfiable))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 416)) == .fail(reason: "HTTP 416 for a request without Range"))
    }

    @Test func a416ForAResourceThatShrankToTheOffsetIsNotCompletion() {
        // Paused at 500 of 1000; the resource was replaced by a 500-byte version.
        #expect(decide(.resume(from: 500, ifRange: nil), ResponseFacts(status: 416, contentRange: "bytes */500"), total: 1000, validators: Validators()) == .refetch(reason: "range not satisfiable (resource shorter than the part file)"))
        #expect(decide(.resume(from: 500, ifRange: "\"abc\""), ResponseFacts(status: 416), total: nil) == .refetch(reason: "range not satisfiable (resource shorter than the part file)"))
    }

    @Test func a416ElsewhereRefetches() {
        #expect(decide(.resume(from: 60, ifRange: "\"abc\""), ResponseFacts(status: 416, contentRange: "bytes */50")) == .refetch(reason: "range not satisfiable (resource shorter than the part file)"))
    }

    @Test func transientStatusesRetryAndOthersFail() {
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 503, reasonPhrase: "Service Unavailable", retryAfter: "5")) == .retry(reason: "HTTP 503 Service Unavailable", retryAfter: "5"))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 429)) == .retry(reason: "HTTP 429", retryAfter: nil))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 408)) == .retry(reason: "HTTP 408", retryAfter: nil))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 404, reasonPhrase: "Not Found")) == .fail(reason: "HTTP 404 Not Found"))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 410)) == .fail(reason: "HTTP 410"))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 205)) == .fail(reason: "unexpected HTTP 205"))
        // The whole resource as a 206 is its 200 (curl and wget take it); a part of it is not.
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 206, contentRange: "bytes 0-9/10")) == .write(offset: 0, total: 10, disposition: .fresh))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 206, contentLength: 9, contentRange: "bytes 0-9/10")) == .fail(reason: "HTTP 206 for a request without Range"))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 206, contentRange: "bytes 0-8/10")) == .fail(reason: "HTTP 206 for a request without Range"))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 206, contentRange: "bytes 1-9/10")) == .fail(reason: "HTTP 206 for a request without Range"))
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 206, contentRange: "bytes 0-9/*")) == .fail(reason: "HTTP 206 for a request without Range"))
    }

    // MARK: Found by a tester against servers of their own (nineteenth session)

    /// A 200 without a Content-Length that bears the stored strong tag is the stored length: its
    /// body must reach it (a range-ignoring server's close-delimited 200, cut short, was taken whole).
    @Test func a200WithoutALengthBearingTheStoredStrongTagMustReachTheKnownLength() {
        let resume = RequestPlan.resume(from: 40, ifRange: "\"abc\"")
        #expect(decide(resume, ResponseFacts(status: 200, etag: "\"abc\""), total: 100) == .write(offset: 0, total: 100, disposition: .restarted(reason: "server ignores ranges")))
        // Another tag, a weak one, or none: nothing says its length.
        #expect(decide(resume, ResponseFacts(status: 200, etag: "\"xyz\""), total: 100) == .write(offset: 0, total: nil, disposition: .restarted(reason: "resource changed")))
        let date = "Thu, 01 Jan 2026 00:00:00 GMT"
        let weak = Validators(etag: "W/\"abc\"", lastModified: date)
        // A weak tag says nothing of the bytes; its date, an old one, does (below).
        #expect(decide(.resume(from: 40, ifRange: date), ResponseFacts(status: 200, etag: "W/\"abc\"", lastModified: date), total: 100, validators: weak).writtenTotal == 100)
        #expect(decide(.resume(from: 40, ifRange: date), ResponseFacts(status: 200, etag: "W/\"xyz\""), total: 100, validators: weak).writtenTotal == .some(nil))
        // A date haul cannot read is not shown to be strong: it says no length.
        let unread = Validators(lastModified: "2026-01-01T00:00:00Z")
        #expect(decide(.overlap(from: 40, overlap: 40), ResponseFacts(status: 200, lastModified: "2026-01-01T00:00:00Z"), total: 100, validators: unread).writtenTotal == .some(nil))
        #expect(decide(resume, ResponseFacts(status: 200), total: 100).writtenTotal == .some(nil))
        // A date a second or more older than its answer is strong: the same date is the length known.
        let dated = Validators(lastModified: "Thu, 01 Jan 2026 00:00:00 GMT")
        let byDate = RequestPlan.resume(from: 40, ifRange: "Thu, 01 Jan 2026 00:00:00 GMT")
        #expect(decide(byDate, ResponseFacts(status: 200, lastModified: "Thu, 01 Jan 2026 00:00:00 GMT"), total: 100, validators: dated).writtenTotal == 100)
        #expect(decide(byDate, ResponseFacts(status: 200, lastModified: "Fri, 02 Jan 2026 00:00:00 GMT"), total: 100, validators: dated).writtenTotal == .some(nil))
        var recent = dated
        recent.recentlyChanged = true
        #expect(decide(.overlap(from: 40, overlap: 40), ResponseFacts(status: 200, lastModified: "Thu, 01 Jan 2026 00:00:00 GMT"), total: 100, validators: recent).writtenTotal == .some(nil), "a date of a recent change is weak")
        // Its own length wins, and none is known without a stored one.
        #expect(decide(resume, ResponseFacts(status: 200, contentLength: 120, etag: "\"new\""), total: 100).writtenTotal == 120)
        #expect(decide(.fresh(discarding: nil), ResponseFacts(status: 200, etag: "\"abc\""), total: nil).writtenTotal == .some(nil))
    }

    /// A 206 whose range runs past the known end is another version, though its Content-Range
    /// gives no length (`/*`): a tester's was cut at the old length and reported completed.
    @Test func a206PastTheKnownEndIsAnotherVersion() {
        let resume = RequestPlan.resume(from: 40, ifRange: "\"abc\"")
        let tagged = { (range: String) in ResponseFacts(status: 206, contentRange: range, etag: "\"abc\"") }
        #expect(decide(resume, tagged("bytes 0-149/*"), total: 100) == .refetch(reason: "resource changed (bytes up to 150, was 100)"))
        #expect(decide(resume, tagged("bytes 0-100/*"), total: 100) == .refetch(reason: "resource changed (bytes up to 101, was 100)"))
        #expect(decide(resume, tagged("bytes 0-99/*"), total: 100) == .verify(offset: 0, overlap: 40, total: 100, validated: true))
        // No length known: the range says where the body ends (Transfer holds it to that).
        #expect(decide(resume, tagged("bytes 0-149/*"), total: nil) == .verify(offset: 0, overlap: 40, total: nil, validated: true))
    }

    @Test func aHostileReasonPhraseIsSanitized() {
        let facts = ResponseFacts(status: 500, reasonPhrase: "Oops\u{1B}[2J")
        #expect(facts.statusText == "HTTP 500 Oops?[2J")
    }
}

extension ResponseDecision {
    /// The total a `write` gives (`.some(nil)`: written without a known total); nil for any other decision.
    var writtenTotal: Int64?? {
        if case .write(_, let total, _) = self { return .some(total) }
        return nil
    }
}
