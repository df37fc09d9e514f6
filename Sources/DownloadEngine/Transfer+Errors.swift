#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AsyncHTTPClient
import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// What an error that ended an attempt means for the download, and one line in haul's words for it.
///
/// Errors are told apart by type and code (NIO's `HTTPParserError`, NIOSSL's errors, AsyncHTTPClient's
/// `HTTPClientError`, errno), never by their description: a library's wording is not an interface,
/// and its type names and build paths must never reach the person reading the row.
extension Transfer {
    /// Network trouble waits and retries; a broken request, redirect, certificate or proxy refusal
    /// fails for good; a server that breaks HTTP or TLS is tried twice more, then fails.
    func classify(_ error: any Error, progressed: Bool) -> Outcome {
        if let refused = error as? Refused { return .fatal(reason: refused.reason) }
        if let refused = error as? ProxyRefused { return refused.outcome }
        // A certificate that is not trusted now will not be on the next try either.
        if let tls = Self.tlsFailure(error) { return .fatal(reason: tls) }
        if let broken = Self.protocolFailure(error) {
            // Bytes written before the break were good: that attempt counts as progress.
            return progressed ? .retryable(reason: broken, retryAfter: nil, progressed: true) : .protocolError(reason: broken)
        }
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
            if [.invalidURL, .emptyHost, .emptyScheme].contains(error) {
                return .fatal(reason: "invalid URL")
            }
        }
        return .retryable(reason: Self.describe(error), retryAfter: nil, progressed: progressed)
    }

    /// A short line for a network error that is worth another try.
    static func describe(_ error: any Error) -> String {
        if let error = error as? IOError { return describe(errno: error.errnoCode) }
        if let error = error as? NIOConnectionError {
            if error.dnsAAAAError != nil || error.dnsAError != nil, error.connectionErrors.isEmpty { return "host name not found" }
            if let io = error.connectionErrors.first?.error as? IOError { return describe(errno: io.errnoCode) }
            return "cannot connect"
        }
        if let error = error as? ChannelError, error == .ioOnClosedChannel || error == .eof || error == .outputClosed {
            return "connection closed by the server"
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .writeTimeout: return "the server took no data for too long"
            case .tlsHandshakeTimeout: return "TLS handshake timed out"
            case .httpProxyHandshakeTimeout: return "the proxy did not answer in time"
            case .uncleanShutdown: return "connection closed by the server mid-response"
            default: break
            }
        }
        if let error = error as? NIOSSLError, error == .uncleanShutdown { return "connection closed by the server mid-response" }
        if let error = error as? HTTPParserError, error == .invalidEOFState || error == .closedConnection {
            return "connection closed by the server mid-response"
        }
        if error is CancellationError { return "interrupted" }
        #if os(Linux)
        if error is DirectStream.HostNotFound { return "host name not found" }
        #endif
        // Never a library's type name or build path: the log file keeps the detail.
        return "network error"
    }

    /// "connection refused", "connection reset" … from an errno.
    static func describe(errno code: Int32) -> String {
        switch code {
        case ECONNREFUSED: "connection refused"
        case ECONNRESET: "connection reset"
        case ETIMEDOUT: "connection timed out"
        case EHOSTUNREACH: "host unreachable"
        case ENETUNREACH: "network unreachable"
        case EPIPE: "connection closed by the server"
        default: String(cString: strerror(code)).lowercased()
        }
    }

    /// A clear line for a certificate the client refused; nil for any other error.
    static func tlsFailure(_ error: any Error) -> String? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return "TLS: the server's certificate is not for this host name"
        }
        let reasons = boringSSLReasons(error)
        // TLS 1.3 asks after the handshake, with an alert on the first read (a tester's servers: a
        // `network error`, retried for some fourteen minutes). TLS 1.2 fails the handshake.
        if reasons.contains(BoringSSLReason.certificateRequired) {
            return "TLS: the server asks for a client certificate, which haul does not send"
        }
        if reasons.contains(BoringSSLReason.noApplicationProtocol) {
            return "TLS: the server speaks only HTTP/2, which haul does not (it speaks HTTP/1.1)"
        }
        if reasons.contains(where: BoringSSLReason.unsupportedProtocol.contains) {
            return "TLS: the server speaks only TLS 1.1 or older, which haul does not accept (as curl)"
        }
        guard reasons.contains(BoringSSLReason.certificateVerifyFailed) else { return nil }
        // BoringSSL says only that verification failed, not why.
        return "TLS: the server's certificate is not trusted (self-signed, expired, or from a CA this system does not trust);"
            + " --ca-certificate FILE trusts the CA in FILE"
    }

    /// One sentence for a response that breaks HTTP, or a TLS handshake that cannot work; nil for
    /// any other error.
    static func protocolFailure(_ error: any Error) -> String? {
        if error is WrongProtocol { return "the server speaks TLS on this port: use https://" }
        if let parser = error as? HTTPParserError {
            switch parser {
            case .invalidEOFState, .closedConnection:
                // A body cut short by a close: network trouble, not a server that breaks HTTP.
                return nil
            case .invalidHeaderToken, .invalidCharactersUsed:
                return "the server sent an invalid header"
            case .invalidContentLength, .unexpectedContentLength:
                return "the server sent an invalid or conflicting Content-Length"
            case .headerOverflow:
                return "the server sent a response head too large to read"
            case .invalidChunkSize:
                return "the server sent an invalid chunked body"
            default:
                return "the server's response is not valid HTTP"
            }
        }
        if let client = error as? HTTPClientError {
            switch client {
            case .identityCodingIncorrectlyPresent:
                return "the server's response is not valid HTTP"
            default:
                return nil
            }
        }
        let reasons = boringSSLReasons(error)
        if reasons.contains(where: BoringSSLReason.notTLS.contains) {
            return "the server does not speak TLS on this port"
        }
        if case .handshakeFailed? = error as? NIOSSLError {
            return "the TLS handshake with the server failed"
        }
        return nil
    }

    /// BoringSSL's reason codes (library SSL) in a handshake failure, or in a failure after it.
    static func boringSSLReasons(_ error: any Error) -> [Int] {
        let failure: BoringSSLError
        if case .handshakeFailed(let during)? = error as? NIOSSLError {
            failure = during
        } else if let after = error as? BoringSSLError {
            // After the handshake: an alert on a read.
            failure = after
        } else {
            return []
        }
        let stack: NIOBoringSSLErrorStack
        switch failure {
        case .sslError(let errors), .unknownError(let errors): stack = errors
        default: return []
        }
        return stack.compactMap { entry in
            guard let packed = packedCode(entry) else { return nil }
            // ERR_GET_LIB and ERR_GET_REASON: the library in the top byte, the reason in the low 12 bits.
            guard packed >> 24 == BoringSSLReason.librarySSL else { return nil }
            return Int(packed & 0xFFF)
        }
    }

    /// The packed BoringSSL error code (`ERR_get_error`) of one entry of a handshake failure.
    ///
    /// NIOSSL keeps the code in a private case (`boringSSLErrorInfo(code, file, line)`) and offers
    /// no accessor: it is read from the value by reflection, as the `UInt32` it is, never from the
    /// description's text. nil for an entry NIOSSL made up itself (no code).
    static func packedCode(_ entry: BoringSSLInternalError) -> UInt32? {
        for child in Mirror(reflecting: entry).children {
            for info in Mirror(reflecting: child.value).children where info.label == "boringSSLErrorInfo" {
                return Mirror(reflecting: info.value).children.first?.value as? UInt32
            }
        }
        return nil
    }
}

/// BoringSSL's codes that haul tells apart (`include/openssl/ssl.h`).
enum BoringSSLReason {
    static let librarySSL: UInt32 = 16
    static let certificateVerifyFailed = 125
    /// The peer's TLS 1.3 alert `certificate_required` (SSL_R_TLSV1_ALERT_CERTIFICATE_REQUIRED).
    static let certificateRequired = 1116
    /// The peer's alert `no_application_protocol` (SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL): none
    /// of the protocols haul offers by ALPN (`http/1.1`) is the server's (an HTTP/2-only server).
    static let noApplicationProtocol = 1120
    /// No version both sides take, haul's least being TLS 1.2: its own refusal of the server's
    /// (SSL_R_UNSUPPORTED_PROTOCOL), or the server's alert (SSL_R_TLSV1_ALERT_PROTOCOL_VERSION).
    static let unsupportedProtocol: Set<Int> = [240, 1070]
    /// A peer that answered in something other than TLS: WRONG_VERSION_NUMBER, HTTP_REQUEST,
    /// HTTPS_PROXY_REQUEST, RECORD_TOO_LARGE (plain text read as a record length).
    static let notTLS: Set<Int> = [247, 156, 155, 200]
}

extension Transfer {
    /// The failure of a request whose way to the server could not be opened, in haul's words; nil
    /// when `error` is not such a failure.
    ///
    /// AsyncHTTPClient reports every refusal of its proxy (haul's bridge too) as
    /// `invalidProxyResponse` (a 407 as `proxyAuthenticationRequired`), without the status: the way
    /// is opened once more (a probe, as `Upstream` opens it: `CONNECT` and closed, for a proxy) to
    /// learn why, and the server's own errors through a bridge (a refused connection, an untrusted
    /// certificate) are said as for a direct request.
    func explaining(_ error: any Error, for url: URL, route: HTTPClients.Route) async -> (any Error)? {
        let upstream: Upstream
        switch route.way {
        case .direct:
            return nil
        case .proxyConnect(let way):
            // The client connects to the proxy itself: a connection that fails is the proxy's.
            if let proxy = way.route.proxy, let reason = Self.connectFailure(error) {
                return ProxyRefused(outcome: .retryable(reason: "cannot reach the proxy \(proxy): \(reason)", retryAfter: nil, progressed: false))
            }
            upstream = way
        case .bridge(let way):
            // A bridge for the absolute form connects to the proxy alone: a connection that fails
            // is the proxy's (a tester's http URL through a proxy that dropped every connection
            // said `connection timed out`, as if the server had; the https URL named the proxy).
            if case .absoluteForm(let proxy) = way.route, let reason = Self.connectFailure(error) {
                return ProxyRefused(outcome: .retryable(reason: "cannot reach the proxy \(proxy): \(reason)", retryAfter: nil, progressed: false))
            }
            upstream = way
        }
        guard let error = error as? HTTPClientError,
              [.invalidProxyResponse, .proxyAuthenticationRequired, .httpProxyHandshakeTimeout].contains(error) else { return nil }
        let host = url.host ?? ""
        let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        let target = "\(TerminalText.sanitize(host.contains(":") ? "[\(host)]" : host)):\(port)"
        if error == .httpProxyHandshakeTimeout {
            // The client's connect timeout ran out: opening the way again would wait as long.
            let reason = switch upstream.route {
            case .absoluteForm(let proxy): "cannot reach the proxy \(proxy): connection timed out"
            // Only the client's own CONNECT goes to a proxy without TLS after it.
            case .origin(let proxy?, false): "the proxy \(proxy) did not answer CONNECT to \(target)"
            case .origin(let proxy?, true): "connection timed out (through the proxy \(proxy))"
            case .origin(nil, _): "connection timed out"
            }
            return ProxyRefused(outcome: .retryable(reason: reason, retryAfter: nil, progressed: false))
        }
        if let failure = await upstream.probe(host: host, port: port, group: HTTPClient.defaultEventLoopGroup) {
            return ProxyRefused.explaining(failure, target: target, sentCredentials: upstream.route.proxy?.user != nil)
        }
        // The way opened this time: say what the client saw.
        if error == .proxyAuthenticationRequired {
            var facts = ResponseFacts(status: 407, reasonPhrase: "Proxy Authentication Required")
            facts.sentProxyCredentials = upstream.route.proxy?.user != nil
            return ProxyRefused(outcome: .fatal(reason: facts.failureText))
        }
        guard case .proxyConnect = route.way, let proxy = upstream.route.proxy else { return nil }
        return ProxyRefused(outcome: .retryable(reason: "the proxy \(proxy) did not open a tunnel to \(target)", retryAfter: nil, progressed: false))
    }

    /// Why a connection could not be made ("connection refused"), or nil when `error` is not a
    /// failure to connect.
    static func connectFailure(_ error: any Error) -> String? {
        if let error = error as? HTTPClientError, error == .connectTimeout { return "connection timed out" }
        if error is NIOConnectionError { return describe(error) }
        if let error = error as? IOError, [ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH].contains(error.errnoCode) { return describe(error) }
        return nil
    }
}

/// A proxy would not carry the request: its own words, and whether to try again.
struct ProxyRefused: Error {
    var outcome: SessionStateMachine.Outcome

    /// What a failure to open the way to `target` (`host:port`) means; the server's own errors
    /// are left to `classify`, as for a direct request. `sentCredentials`: the proxy was given
    /// credentials (its 407 refused them).
    static func explaining(_ failure: any Error, target: String, sentCredentials: Bool) -> any Error {
        guard let failure = failure as? Upstream.Failure else { return failure }
        switch failure {
        case .proxyUnreachable(let proxy, let error):
            return ProxyRefused(outcome: .retryable(reason: "cannot reach the proxy \(proxy): \(Transfer.describe(error))", retryAfter: nil, progressed: false))
        case .refused(let status, let phrase, let authenticate) where status == 407:
            var facts = ResponseFacts(status: 407, reasonPhrase: phrase, authenticate: authenticate)
            facts.sentProxyCredentials = sentCredentials
            return ProxyRefused(outcome: .fatal(reason: facts.failureText))
        case .refused(let status, _, _):
            let reason = "proxy refused CONNECT to \(target): \(status)"
            // A proxy that cannot reach the server now (502, 503, 504) may later.
            return ProxyRefused(outcome: status >= 500 ? .retryable(reason: reason, retryAfter: nil, progressed: false) : .fatal(reason: reason))
        case .closedByProxy:
            return ProxyRefused(outcome: .retryable(reason: "the proxy closed the connection without answering CONNECT to \(target)", retryAfter: nil, progressed: false))
        case .proxyTimedOut:
            return ProxyRefused(outcome: .retryable(reason: "the proxy did not answer CONNECT to \(target)", retryAfter: nil, progressed: false))
        case .handshakeTimedOut:
            return ProxyRefused(outcome: .retryable(reason: "TLS handshake timed out", retryAfter: nil, progressed: false))
        case .noTLS:
            return ProxyRefused(outcome: .fatal(reason: "TLS cannot be set up (the trust roots cannot be read)"))
        }
    }
}
