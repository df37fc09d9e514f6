import DownloadCore
import Foundation
import Testing

/// A 200 to a resume that looks like an error page never destroys the bytes on disk.
@Suite struct ErrorPageRulesTests {
    let validators = Validators(etag: "\"v1\"", lastModified: "Thu, 01 Jan 2026 00:00:00 GMT")
    let kept: Int64 = 300 * 1024
    let total: Int64 = 1024 * 1024
    var resume: RequestPlan { .resume(from: kept, ifRange: "\"v1\"") }

    func decide(_ response: ResponseFacts, knownType: String? = "application/octet-stream", validators: Validators? = nil) -> ResponseDecision {
        ResumeRules.decide(plan: resume, response: response, knownTotal: total, validators: validators ?? self.validators, knownType: knownType)
    }

    @Test func aSmallHTMLPageWithoutValidatorsFailsKeepingTheBytes() {
        let page = ResponseFacts(status: 200, contentLength: 67, contentType: "text/html; charset=utf-8")
        #expect(decide(page) == .fail(reason: "the server answered the resume with HTTP 200 (text/html, 67 B, no validators) instead of the file: it looks like an error page, so the 300 KiB on disk are kept (cancel and add the URL again if it is the new file)"))
    }

    @Test func anHTMLPageWhereTheFileWasNotIsAnErrorPageEvenWithValidatorsAndTheRightSize() {
        let page = ResponseFacts(status: 200, contentLength: total, etag: "\"v2\"", contentType: "text/html")
        guard case .fail(let reason) = decide(page) else {
            Issue.record("taken for a new version")
            return
        }
        #expect(reason.contains("(text/html, 1.0 MiB)"), "\(reason)")
    }

    @Test func withoutAKnownTypeAPageThatDropsTheValidatorsIsAnErrorPage() {
        let page = ResponseFacts(status: 200, contentLength: total, contentType: "text/plain")
        #expect(decide(page, knownType: nil).isFailure)
        // The same page with validators of its own may be a new version of an untyped file.
        let versioned = ResponseFacts(status: 200, contentLength: total, etag: "\"v2\"", contentType: "text/plain")
        #expect(decide(versioned, knownType: nil) == .write(offset: 0, total: total, disposition: .restarted(reason: "resource changed")))
    }

    @Test func aBodyFarSmallerThanTheFileWithoutValidatorsIsAnErrorPage() {
        let small = ResponseFacts(status: 200, contentLength: total / 2 - 1, contentType: "application/octet-stream")
        #expect(decide(small).isFailure)
        let half = ResponseFacts(status: 200, contentLength: total / 2, contentType: "application/octet-stream")
        #expect(!decide(half).isFailure, "half the size may be a new version")
    }

    @Test func realNewVersionsAndServersThatIgnoreRangesStillRestart() {
        // A new version, smaller, with validators of its own.
        let changed = ResponseFacts(status: 200, contentLength: 1000, etag: "\"v2\"", contentType: "application/octet-stream")
        #expect(decide(changed) == .write(offset: 0, total: 1000, disposition: .restarted(reason: "resource changed")))
        // The same file from a server that ignores ranges.
        let same = ResponseFacts(status: 200, contentLength: total, etag: "\"v1\"", contentType: "application/octet-stream")
        #expect(decide(same) == .write(offset: 0, total: total, disposition: .restarted(reason: "server ignores ranges")))
        // An HTML download whose page changed.
        let html = ResponseFacts(status: 200, contentLength: 5000, etag: "\"v2\"", contentType: "text/html")
        #expect(decide(html, knownType: "text/html") == .write(offset: 0, total: 5000, disposition: .restarted(reason: "resource changed")))
        // A server without validators that ignores ranges, same length.
        let bare = ResponseFacts(status: 200, contentLength: total)
        #expect(decide(bare, knownType: nil, validators: Validators()) == .write(offset: 0, total: total, disposition: .restarted(reason: "server ignores ranges")))
        // Not a resume: a 200 is simply the file.
        #expect(ResumeRules.decide(plan: .fresh(discarding: nil), response: ResponseFacts(status: 200, contentLength: 67, contentType: "text/html"), knownTotal: nil, validators: Validators()) == .write(offset: 0, total: 67, disposition: .fresh))
    }

    @Test func aPartAnsweredByAnErrorPageFailsTheFileKeepingItsParts() {
        let page = ResponseFacts(status: 200, contentLength: 67, contentType: "text/html")
        let decision = ResumeRules.decidePart(from: 2_000_000, response: page, total: 8_000_000, validators: validators, knownType: "application/zip", kept: 3_000_000)
        guard case .fail(let reason) = decision else {
            Issue.record("\(decision)")
            return
        }
        #expect(reason.contains("the 2.8 MiB on disk are kept"), "\(reason)")
        let changed = ResponseFacts(status: 200, contentLength: 8_000_000, etag: "\"v2\"", contentType: "application/zip")
        #expect(ResumeRules.decidePart(from: 2_000_000, response: changed, total: 8_000_000, validators: validators, knownType: "application/zip") == .restart(reason: "resource changed", freshBody: true))
    }
}

extension ResponseDecision {
    var isFailure: Bool {
        if case .fail = self { return true }
        return false
    }
}
