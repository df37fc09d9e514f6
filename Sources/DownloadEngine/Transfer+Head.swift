import AsyncHTTPClient
import DownloadCore
import Foundation
import NIOCore
import NIOHTTP1

extension Transfer {
    /// Sends a GET of `url` and waits for the response head; a request that found its connection
    /// closed before any byte of a response is sent once more.
    ///
    /// AsyncHTTPClient hands out a pooled keep-alive connection that the server may have closed a
    /// moment before (a 302 without `Connection: close`, then a close; a keep-alive timeout running
    /// out as the request leaves): such a request fails with `ioOnClosedChannel` or
    /// `remoteConnectionClosed` although the server never saw it, or saw it and said nothing. curl
    /// and wget send it again on a new connection. The closed connection has left the pool by then,
    /// so the second request gets a fresh one. Only once: a server that closes every connection
    /// unanswered is a failure of the attempt, retried with backoff.
    ///
    /// Plain http without a proxy goes on a socket of haul's own (`DirectStream`); the rest through
    /// AsyncHTTPClient, by the route `HTTPClients` gives it.
    func response(to url: URL, range: ClosedRange<Int64>?, ifRange: String?) async throws -> (any ResponseBody, HTTPResponseHead, URL?) {
        // Added and redirected URLs are checked before; a row stored by an older haul is not.
        if let problem = URLValidation.portProblem(url) { throw Refused(reason: "cannot request \(url.redactingPassword): \(problem)") }
        #if os(Linux)
        let direct = DirectStream.carries(url, proxy: clients.proxy(for: url))
        #else
        let direct = false
        #endif
        let route = direct ? nil : clients.route(for: url)
        if !direct, route == nil {
            throw Refused(reason: "cannot request \(url.redactingPassword): no loopback port for the bridge that sends its target as written")
        }
        var resent = false
        while true {
            let stream: any ResponseBody
            var setsTarget = false
            if let route {
                let client = ResponseStream(progress: progress, throttle: throttle, stallTimeout: stallTimeout)
                client.start(try request(url, range: range, ifRange: ifRange, setsTarget: route.setsTarget), on: route.client, headTimeout: headTimeout)
                stream = client
                setsTarget = route.setsTarget
            } else {
                #if os(Linux)
                let timeouts = DirectStream.Timeouts(connect: clients.connectTimeout, head: headTimeout, stall: stallTimeout)
                stream = DirectStream(url: Self.withoutCredentials(url), headers: requestHeaders(url, range: range, ifRange: ifRange), progress: progress, throttle: throttle, timeouts: timeouts)
                #else
                // Not reached: `direct` is false off Linux, where every request has a route.
                throw Refused(reason: "cannot request \(url.redactingPassword)")
                #endif
            }
            do {
                let (head, answered) = try await stream.head()
                // The client asked for the placeholder; the answer is the URL's.
                return (stream, head, setsTarget ? Self.withoutCredentials(url) : answered)
            } catch {
                stream.cancel()
                if !resent, !Task.isCancelled, Self.closedBeforeResponse(error) {
                    resent = true
                    continue
                }
                if resent, Self.closedBeforeResponse(error), await speaksTLSInstead(url) {
                    throw WrongProtocol()
                }
                guard let route else { throw error }
                throw await explaining(error, for: url, route: route) ?? error
            }
        }
    }

    /// Whether `error` says the connection was closed with no response byte read.
    static func closedBeforeResponse(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError { return error == .remoteConnectionClosed }
        if let error = error as? ChannelError { return error == .ioOnClosedChannel || error == .eof }
        return false
    }

    /// Whether an http URL's port, which closed two requests unanswered, speaks TLS (checked only
    /// for a direct connection: through a proxy the port is the proxy's business).
    private func speaksTLSInstead(_ url: URL) async -> Bool {
        guard url.scheme?.lowercased() == "http", clients.proxy(for: url) == nil, let host = url.host else { return false }
        return await TLSProbe.speaksTLS(host: host, port: url.port ?? 80, group: HTTPClient.defaultEventLoopGroup, timeout: .seconds(3))
    }

    /// An http URL whose server speaks TLS on its port.
    struct WrongProtocol: Error {}
}
