import Foundation

extension StringProtocol {
    /// The text without leading and trailing white space (`.whitespaces`, or with `newlines`
    /// `.whitespacesAndNewlines`), as Foundation's `trimmingCharacters` trims it; text that starts
    /// and ends with a visible ASCII character (a URL of an input list) is taken as it is, without
    /// the trip through Foundation, which cost a thousand-line list more than its parsing.
    public func trimmingWhitespace(newlines: Bool = false) -> String {
        let text = String(self)
        if let first = text.utf8.first, let last = text.utf8.last, Self.isVisibleASCII(first), Self.isVisibleASCII(last) {
            return text
        }
        return text.trimmingCharacters(in: newlines ? .whitespacesAndNewlines : .whitespaces)
    }

    private static func isVisibleASCII(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F
    }
}
