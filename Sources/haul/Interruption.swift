import DownloadEngine
import Dispatch
import Foundation
import Synchronization

/// SIGINT, SIGTERM and SIGHUP (a dropped SSH connection): pause every transfer with its data,
/// checkpoint, and leave within two seconds with 128 + the signal's number.
///
/// A runner (the UI that runs the queue) takes a hang-up as a detach instead (`onHangUp`): the
/// downloads go on without the terminal, and only SIGINT and SIGTERM stop them.
///
/// The first signal shuts the session down (transfers stop, part files are fsync'd, rows are
/// committed as paused) and the command exits once that is done. Should that take too long (a huge
/// amount of unsynced data), a watchdog leaves anyway at 1.8 s: the bytes `write` accepted are in
/// the page cache and the next start resumes from them. A second signal leaves at once, unless
/// it came with the first (within half a second: two sent together, which skipped the pause and
/// the checkpoint, found by a tester); a person's second Ctrl-C comes later.
final class Interruption: Sendable {
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    private let state = Received()
    private let onHangUp: (@Sendable () -> Void)?
    /// Kept so the sources live as long as this value.
    private let sources: Mutex<[any DispatchSourceSignal]>

    private final class Received: Sendable {
        /// The first signal and when it came.
        let first = Mutex<(signal: Int32, at: ContinuousClock.Instant)?>(nil)
    }

    /// A second signal sooner than this after the first came with it: ignored.
    static let together: Duration = .milliseconds(500)

    /// `beforeForcedExit` runs right before a watchdog or a second signal leaves without the normal
    /// path (the terminal UI puts the terminal back there).
    init(session: DownloadSession, beforeForcedExit: @escaping @Sendable () -> Void = {}, onHangUp: (@Sendable () -> Void)? = nil) {
        self.onHangUp = onHangUp
        // A write to a terminal that went away must fail with EPIPE/EIO, not kill the process, and a
        // file size limit must fail a write with EFBIG (the download pauses), not kill it either.
        signal(SIGPIPE, SIG_IGN)
        signal(SIGXFSZ, SIG_IGN)
        let state = self.state
        sources = Mutex(Self.watch(Self.signals) { number in
            if number == SIGHUP, let onHangUp {
                onHangUp()
                return
            }
            Self.handle(number, state: state, session: session, beforeForcedExit: beforeForcedExit)
        })
    }

    /// Takes `signals` from their default actions and runs `handler` for each that arrives (on a
    /// dispatch queue, never in a signal handler); the sources must be kept while they are wanted.
    static func watch(_ signals: [Int32], _ handler: @escaping @Sendable (Int32) -> Void) -> [any DispatchSourceSignal] {
        signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(number) }
            source.resume()
            return source
        }
    }

    /// The signal that interrupted the run, if any.
    var received: Int32? {
        state.first.withLock { $0?.signal }
    }

    private static func handle(_ number: Int32, state: Received, session: DownloadSession, beforeForcedExit: @escaping @Sendable () -> Void) {
        let now = ContinuousClock.now
        let earlier = state.first.withLock { received in
            defer { if received == nil { received = (number, now) } }
            return received?.at
        }
        if let earlier {
            guard now - earlier >= together else { return }
            beforeForcedExit()
            _exit(128 + number)
        }
        Task { await session.shutdown() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 1.8) {
            beforeForcedExit()
            _exit(128 + number)
        }
    }
}
