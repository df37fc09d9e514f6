import Foundation

/// What a response means for the redirect chain of one request. haul follows redirects itself, so
/// every hop is checked: its scheme, a downgrade from https to http, loops and the hop limit.
public enum Redirects {
    /// Hops followed before giving up (curl's and AsyncHTTPClient's default too).
    public static let maxHops = 10

    public enum Decision: Sendable, Hashable {
        /// Not a redirect: this response is the answer.
        case answer
        /// Send the same request to this URL.
        case follow(URL)
        /// Stop the download for good, with a one-line reason.
        case refuse(reason: String)
    }

    /// The decision for a response with `status` and `location` to a request for `current`.
    ///
    /// - Parameters:
    ///   - visited: every URL of the chain so far (the first request's included).
    ///   - allowDowngrade: `--allow-downgrade`: an https URL may redirect to http.
    public static func decide(
        status: Int, location: String?, from current: URL, visited: [URL], allowDowngrade: Bool
    ) -> Decision {
        guard [301, 302, 303, 307, 308].contains(status) else { return .answer }
        guard let location = location?.trimmingWhitespace(), !location.isEmpty else {
            return .refuse(reason: "HTTP \(status) redirect without a Location")
        }
        let shown = TerminalText.sanitize(String(location.prefix(200)))
        guard !location.unicodeScalars.contains(where: TerminalText.isControl),
              // Encoded like a URL a person gives: raw non-ASCII as UTF-8, escapes kept as sent.
              let target = URL(string: RequestTarget.encode(location), relativeTo: current)?.absoluteURL,
              let scheme = target.scheme?.lowercased()
        else {
            return .refuse(reason: "HTTP \(status) redirect to an invalid URL '\(shown)'")
        }
        // The scheme before the host: `file:///etc/passwd` has no host, and is refused for its
        // scheme, not taken for a malformed http URL.
        guard scheme == "http" || scheme == "https" else {
            return .refuse(reason: "refused a redirect to \(TerminalText.sanitize(String(target.redactingPassword.prefix(200)))): only http and https")
        }
        guard let host = target.host, !host.isEmpty else {
            return .refuse(reason: "HTTP \(status) redirect to an invalid URL '\(shown)'")
        }
        if let problem = URLValidation.portProblem(target) {
            return .refuse(reason: "HTTP \(status) redirect to '\(shown)': \(problem)")
        }
        if current.scheme?.lowercased() == "https", scheme == "http", !allowDowngrade {
            return .refuse(reason: "refused a redirect from https to http: \(target.redactingPassword) (--allow-downgrade allows it)")
        }
        if let problem = RequestTarget.problem(target) {
            return .refuse(reason: "HTTP \(status) redirect to '\(shown)': \(problem)")
        }
        let key = target.coalescingKey
        if visited.contains(where: { $0.coalescingKey == key }) {
            return .refuse(reason: "redirect loop: \(target.redactingPassword) was visited before")
        }
        guard visited.count <= maxHops else {
            return .refuse(reason: "too many redirects (more than \(maxHops))")
        }
        return .follow(target)
    }

    /// Whether a request to `target` goes to the origin (scheme, host and port) of `original`:
    /// credentials (`Authorization`, `Cookie`, `user:pass@`) are sent only there.
    public static func sameOrigin(_ target: URL, _ original: URL) -> Bool {
        func origin(_ url: URL) -> String {
            let scheme = url.scheme?.lowercased() ?? ""
            let port = url.port ?? (scheme == "https" ? 443 : 80)
            return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
        }
        return origin(target) == origin(original)
    }
}
