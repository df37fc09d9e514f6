import Foundation

extension SessionStateMachine {
    /// What the first request of an attempt asked for: the history's `started` entry.
    public enum AttemptStart: Sendable, Hashable {
        /// One request, front to back, as the resume rules planned it.
        case request(RequestPlan)
        /// The parts of a segmented download resumed: `count` parts with bytes left, each asked
        /// for with `If-Range`; `kept` bytes of all parts on disk.
        case parts(count: Int, kept: Int64, ifRange: String?)
    }

    /// `the directory /dl` or `/dl/a.iso`, for the history.
    static func words(_ destination: Destination) -> String {
        switch destination {
        case .directory(let path): "the directory \(path)"
        case .file(let path): path
        }
    }

    /// `requested from 1.2 MiB: Range bytes=1192755-, If-Range "abc", the 64.0 KiB before it to compare
    /// with the disk`, `requested the whole file`.
    static func words(_ start: AttemptStart) -> String {
        switch start {
        case .request(.fresh(let discarding)):
            return "requested the whole file" + (discarding.map { " (\($0))" } ?? "")
        case .request(.resume(let offset, let ifRange)):
            let validator = ifRange.map { ", If-Range \($0)" } ?? ", no If-Range"
            let checked = ResumeRules.checked(before: offset)
            return "requested from \(Format.bytes(offset)): Range bytes=\(offset - checked)-\(validator), "
                + "the \(Format.bytes(checked)) before it to compare with the disk"
        case .request(.overlap(let offset, let overlap)):
            return "requested from \(Format.bytes(offset)) without a validator it can trust: Range bytes=\(offset - overlap)-, "
                + "the \(Format.bytes(overlap)) before it to compare with the disk"
        case .parts(let count, let kept, let ifRange):
            let validator = ifRange.map { ", each with If-Range \($0)" } ?? ""
            return "requested the \(count) \(count == 1 ? "part" : "parts") left, \(Format.bytes(kept)) kept\(validator)"
        }
    }

    /// `HTTP 206 from 1.2 MiB, 10.0 MiB in all, ETag "abc"`.
    static func words(_ info: ResponseInfo) -> String {
        var text = "HTTP \(info.status)"
        if case .resumed(let offset, _) = info.disposition, info.status == 206 { text += " from \(Format.bytes(offset))" }
        text += info.total.map { ", \(Format.bytes($0)) in all" } ?? ", length unknown"
        if let etag = info.validators.etag {
            text += ", ETag \(etag)"
        } else if let date = info.validators.lastModified {
            text += ", Last-Modified \(date)"
        } else {
            text += ", no validator"
        }
        if let type = info.contentType { text += ", \(type)" }
        return text
    }

    /// `resumed at 1.2 MiB (If-Range checked)`.
    static func resumeWords(_ offset: Int64, verified: Bool, overlap: Bool) -> String {
        let how = overlap ? "checked by overlap" : verified ? "If-Range checked" : "unverified: no validator, same length"
        return "resumed at \(Format.bytes(offset)) (\(how))"
    }
}
