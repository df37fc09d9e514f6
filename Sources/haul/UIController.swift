import CursesBackend
import DownloadCore
import DownloadEngine
import Foundation
import Logging
import TerminalUI

/// Runs the terminal UI: merges keys, sizes and the session's snapshots, feeds them to the pure
/// reducer, sends the commands to the session and hands `render(state)` to the terminal.
///
/// Redraws follow the snapshots at most once per `refreshInterval`, and not at all when the frame
/// would not change; keys and resizes draw at once. Idle (no transfer, nothing waiting) nothing
/// wakes this loop.
struct UIController {
    let session: DownloadSession
    let terminal: CursesTerminal
    let store: OpenStore
    let downloadDirectory: String
    /// Headers every URL added with `a` asks for.
    let defaults: RequestOptions
    /// `-j` or the config chose how many run at once, so `<` and `>` last only for this run.
    let maxActiveIsConfigured: Bool
    let refreshInterval: Duration
    let logger: Logger

    private enum Input: Sendable {
        case terminal(TerminalEvent)
        case snapshot(SessionSnapshot)
        case tick
        case ended
    }

    /// Returns on `q`, when the session shuts down (a signal), or when the terminal ends.
    func run(_ initial: ViewState) async {
        var state = initial
        let (inputs, feed) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .unbounded)
        let terminal = self.terminal
        let session = self.session
        let readers = [
            Task {
                for await event in terminal.events { feed.yield(.terminal(event)) }
                feed.yield(.ended)
            },
            Task {
                for await snapshot in session.snapshots { feed.yield(.snapshot(snapshot)) }
                feed.yield(.ended)
            },
        ]
        defer { for reader in readers { reader.cancel() } }

        let clock = ContinuousClock()
        var lastDraw = clock.now - refreshInterval
        var lastFrame: Frame?
        var dirty = true
        var tickDue: ContinuousClock.Instant?
        var lastDiskCheck = clock.now - .seconds(60)

        loop: for await input in inputs {
            var drawNow = false
            switch input {
            case .terminal(.keys(let keys)):
                for command in state.handle(keys) {
                    if command == .quit { break loop }
                    await execute(command, &state)
                }
                drawNow = true
            case .terminal(.resize(let width, let height)):
                state.resize(width: width, height: height)
                drawNow = true
            case .snapshot(let snapshot):
                if snapshot != state.snapshot {
                    state.apply(snapshot)
                    dirty = true
                }
            case .tick:
                if let due = tickDue, clock.now >= due { tickDue = nil }
                // A waiting row counts down once a second even when no snapshot comes.
                if Self.hasCountdown(state.snapshot) { dirty = true }
            case .ended:
                break loop
            }

            let now = clock.now
            if drawNow || (dirty && now - lastDraw >= refreshInterval) {
                state.now = Date()
                if now - lastDiskCheck >= .seconds(2) {
                    state.freeDiskBytes = Self.freeBytes(at: downloadDirectory)
                    lastDiskCheck = now
                }
                let frame = render(state)
                if frame != lastFrame {
                    terminal.show(frame)
                    lastFrame = frame
                }
                lastDraw = now
                dirty = false
            }
            // One tick on its way at a time, unless a sooner one is needed (a snapshot arriving
            // while the countdown's one-second tick is pending must not wait for it).
            let deadline: ContinuousClock.Instant? = dirty
                ? lastDraw + refreshInterval
                : (Self.hasCountdown(state.snapshot) ? now + .seconds(1) : nil)
            if let deadline, tickDue.map({ deadline < $0 }) ?? true {
                tickDue = deadline
                Task {
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    feed.yield(.tick)
                }
            }
        }
        logger.info("ui closed")
    }

    private func execute(_ command: Command, _ state: inout ViewState) async {
        do throws(DownloadSession.TransitionError) {
            switch command {
            case .pause(let id): try await session.pause(id)
            case .resume(let id): try await session.resume(id)
            case .cancel(let id): try await session.cancel(id)
            case .remove(let id): try await session.remove(id)
            case .pauseAll: await session.pauseAll()
            case .resumeAll: await session.resumeAll()
            case .purgePaused: await session.purgePaused()
            case .move(let id, let index): try await session.move(id, to: index)
            case .setMaxActive(let count):
                try await session.setMaxActive(count)
                store.saveMaxActive(count)
                if maxActiveIsConfigured {
                    state.inform("\(count) at once for this run (-j or max-active in the config decides at the next start)")
                }
            case .add(let urls):
                let requests = urls.map { AddOptions.Request(url: $0, destination: .directory(downloadDirectory), options: defaults) }
                let refused = await Self.add(requests, to: session)
                if let first = refused.first {
                    state.failed(urls.count == 1 ? first : "added \(urls.count - refused.count) of \(urls.count): \(first)")
                }
            case .redraw: terminal.repaint()
            case .quit: break
            }
        } catch {
            state.failed(error.description)
        }
    }

    /// Schedules every request; the reasons of those the session refused.
    static func add(_ requests: [AddOptions.Request], to session: DownloadSession) async -> [String] {
        var refused: [String] = []
        for request in requests {
            do {
                _ = try await session.schedule(request.url, to: request.destination, options: request.options)
            } catch {
                refused.append(error.description)
            }
        }
        return refused
    }

    private static func hasCountdown(_ snapshot: SessionSnapshot) -> Bool {
        snapshot.downloads.contains { if case .waiting = $0.state { true } else { false } }
    }

    /// Free bytes for an unprivileged user where downloads go.
    static func freeBytes(at path: String) -> Int64? {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return nil }
        let (bytes, overflow) = Int64(clamping: stats.f_bavail).multipliedReportingOverflow(by: Int64(clamping: stats.f_frsize))
        return overflow ? Int64.max : bytes
    }
}
