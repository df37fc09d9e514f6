import DownloadCore

/// The `Range` a resume of `kept` bytes with a validator asks for: from `ResumeRules.checkLength`
/// bytes before them (from 0 when fewer), which come again and are compared with the disk before
/// any byte is appended.
public func resumeRange(keeping kept: some BinaryInteger) -> String {
    let kept = Int64(kept)
    return "bytes=\(kept - ResumeRules.checked(before: kept))-"
}

/// The bytes kept that a resume's `Range` (with a validator) stands for; nil for no range, or one
/// that starts at 0 (a check of fewer bytes than `ResumeRules.checkLength` says nothing of its end).
public func keptBytes(ofResumeRange range: String?) -> Int64? {
    guard let range, range.hasPrefix("bytes="), range.hasSuffix("-"),
          let start = Int64(range.dropFirst("bytes=".count).dropLast()), start > 0 else { return nil }
    return start + ResumeRules.checkLength
}
