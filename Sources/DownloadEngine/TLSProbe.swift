import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Finds out whether a port that closed plain-http requests unanswered speaks TLS instead.
///
/// A TLS server (openssl s_server, NIOSSL) meets a plain request with a bare close, which looks like
/// an overloaded server; only a handshake tells the two apart. Nothing is verified: the question is
/// only whether the peer completes a TLS handshake.
enum TLSProbe {
    /// True when a TLS handshake with `host:port` completes within `timeout`.
    static func speaksTLS(host: String, port: Int, group: any EventLoopGroup, timeout: TimeAmount) async -> Bool {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        guard let context = try? NIOSSLContext(configuration: configuration) else { return false }
        let loop = group.next()
        let done = loop.makePromise(of: Bool.self)
        loop.scheduleTask(in: timeout) { done.succeed(false) }
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
                    try channel.pipeline.syncOperations.addHandler(HandshakeWatcher(done))
                }
            }
            .connect(host: host, port: port)
        connected.whenFailure { _ in done.succeed(false) }
        let answer = (try? await done.futureResult.get()) ?? false
        if let channel = try? await connected.get() { try? await channel.close() }
        return answer
    }

    /// Succeeds `done` with true on a completed handshake, false on an error or a close.
    private final class HandshakeWatcher: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        private let done: EventLoopPromise<Bool>

        init(_ done: EventLoopPromise<Bool>) {
            self.done = done
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted? = event as? TLSUserEvent { done.succeed(true) }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            done.succeed(false)
        }

        func channelInactive(context: ChannelHandlerContext) {
            done.succeed(false)
            context.fireChannelInactive()
        }
    }
}
