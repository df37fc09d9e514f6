import Foundation
import NIOHTTP1

/// One GET in flight, as the transfer sees it: its head, its first bytes, and its body written into
/// a sink. Two kinds: `ResponseStream` (AsyncHTTPClient: https, proxies) and `DirectStream` (plain
/// http on a socket of haul's own, the body spliced from the socket into the file).
protocol ResponseBody: AnyObject, Sendable {
    /// The response head, and the URL that answered it (without `user:pass@`).
    func head() async throws -> (HTTPResponseHead, URL?)
    /// The first `count` bytes of the body, once they came (fewer when the body ended sooner),
    /// before anything is written; they stay held for `write(into:)`.
    func early(_ count: Int) async throws -> [UInt8]
    /// Writes the body into `sink` and returns when it ended.
    func write(into sink: BodySink) async throws -> ResponseStream.End
    /// Drops the response and its body.
    func discard()
    /// Stops the request; a body being written keeps what reached the file.
    func cancel()
    /// Where the next byte would go once everything taken is written; nil before `write(into:)`.
    var position: Int64? { get }
}

extension ResponseStream: ResponseBody {}
