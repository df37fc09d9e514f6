import DownloadCore
import Foundation

/// What the UI draws on and reads keys from: the curses terminal, or a fake one in the tests.
public protocol TerminalScreen: Sendable {
    /// Keys and sizes; ends when the terminal goes away (a hang-up) or is stopped.
    var events: AsyncStream<TerminalEvent> { get }
    /// Hands over the newest frame (an older, undrawn one may be dropped).
    func show(_ frame: Frame)
    /// Repaints every cell with the next frame (Ctrl-L).
    func repaint()
    /// Asks the terminal to put `text` (clean) on its clipboard (OSC 52); false when it cannot be
    /// asked (not a terminal).
    func copy(_ text: String) -> Bool
}

/// Runs the terminal UI on a queue: merges keys, sizes and the queue's snapshots, feeds them to
/// the pure reducer, sends the commands to the queue and hands `render(state)` to the terminal.
///
/// The queue is this process's session or another haul's, through its control socket: the
/// controller cannot tell. The loop never waits for a command to be carried out: commands go to
/// one worker, in order, and keys and snapshots go on being drawn meanwhile; what a command did
/// shows when the snapshot says so, and a refusal comes back as a message.
///
/// Redraws follow the snapshots at most once per `refreshInterval`, and not at all when the frame
/// would not change; keys and resizes draw at once. Idle (no transfer, nothing waiting) nothing
/// wakes this loop.
public struct UIController: Sendable {
    /// Why the UI ended.
    public enum End: Sendable, Hashable {
        /// `q` (confirmed, when attached): stop the queue.
        case quit
        /// The detach key: leave the UI, the queue goes on.
        case detach
        /// The terminal went away (a hang-up, or it was stopped).
        case terminalGone
        /// The queue's snapshots ended: its runner exited (or this one shut down on a signal).
        case queueEnded
    }

    let queue: any QueueControl
    let terminal: any TerminalScreen
    let downloadDirectory: String
    /// Headers every URL added with `a` asks for.
    let defaults: RequestOptions
    /// The speed limit of its own every URL added with `a` gets (`--limit-rate-each`).
    let addLimit: Int64?
    /// `-j` or the config chose how many run at once, so `<` and `>` last only for this run.
    let maxActiveIsConfigured: Bool
    /// `--limit-rate` or the config chose the limit for all, so `L` lasts only for this run.
    let limitIsConfigured: Bool
    let refreshInterval: Duration
    /// Remembers how many run at once for the next start (`<`, `>`).
    let saveMaxActive: @Sendable (Int) -> Void
    let log: @Sendable (String) -> Void

    public init(
        queue: any QueueControl, terminal: any TerminalScreen, downloadDirectory: String, defaults: RequestOptions, addLimit: Int64? = nil,
        maxActiveIsConfigured: Bool, limitIsConfigured: Bool = false, refreshInterval: Duration, saveMaxActive: @escaping @Sendable (Int) -> Void = { _ in },
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.queue = queue
        self.terminal = terminal
        self.downloadDirectory = downloadDirectory
        self.defaults = defaults
        self.addLimit = addLimit
        self.maxActiveIsConfigured = maxActiveIsConfigured
        self.limitIsConfigured = limitIsConfigured
        self.refreshInterval = refreshInterval
        self.saveMaxActive = saveMaxActive
        self.log = log
    }

    private enum Input: Sendable {
        case terminal(TerminalEvent)
        case snapshot(SessionSnapshot)
        /// A command was carried out: what follows on screen.
        case done(Outcome)
        case tick
        case terminalEnded
        case queueEnded
    }

    /// What a command carried out on the queue brings back to the screen.
    enum Outcome: Sendable {
        case message(StatusMessage?)
        /// A resume took the slot of a download the queue started by itself.
        case displaced(resumed: DownloadID, displaced: DownloadID)
        case history([HistoryEntry], for: DownloadID?, error: String?)
    }

    /// Runs until `q`, the detach key, or the end of the terminal or of the queue's snapshots.
    public func run(_ initial: ViewState) async -> End {
        var state = initial
        let (inputs, feed) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .unbounded)
        let (commands, send) = AsyncStream.makeStream(of: Command.self, bufferingPolicy: .unbounded)
        let terminal = self.terminal
        let queue = self.queue
        let worker = self
        let tasks = [
            Task {
                for await event in terminal.events { feed.yield(.terminal(event)) }
                feed.yield(.terminalEnded)
            },
            Task {
                for await snapshot in queue.snapshots() { feed.yield(.snapshot(snapshot)) }
                feed.yield(.queueEnded)
            },
            // One command at a time, in the order the keys asked: `<<<` is three fewer, in turn.
            Task {
                for await command in commands {
                    let outcome = await worker.execute(command)
                    feed.yield(.done(outcome))
                }
            },
        ]
        defer {
            send.finish()
            for task in tasks { task.cancel() }
        }

        let clock = ContinuousClock()
        var lastDraw = clock.now - refreshInterval
        var lastFrame: Frame?
        var dirty = true
        var tickDue: ContinuousClock.Instant?
        // An open log is read again as the queue changes, at most once a second.
        var lastLogRead = clock.now
        var end = End.queueEnded

        loop: for await input in inputs {
            var drawNow = false
            switch input {
            case .terminal(.keys(let keys)):
                for command in state.handle(keys) {
                    switch command {
                    case .quit:
                        end = .quit
                        break loop
                    case .detach:
                        end = .detach
                        break loop
                    case .redraw:
                        terminal.repaint()
                    case .setMaxActive(let count) where maxActiveIsConfigured:
                        state.inform("\(count) at once for this run (-j or max-active in the config decides at the next start)")
                        send.yield(command)
                    case .setLimit where limitIsConfigured:
                        state.inform((state.message?.text ?? "limit set") + " for this run (--limit-rate or the config decides next start)")
                        send.yield(command)
                    case .loadHistory:
                        lastLogRead = clock.now
                        send.yield(command)
                    default:
                        send.yield(command)
                    }
                }
                drawNow = true
            case .terminal(.resize(let width, let height)):
                state.resize(width: width, height: height)
                drawNow = true
            case .snapshot(let snapshot):
                if snapshot != state.snapshot {
                    state.apply(snapshot)
                    dirty = true
                    if let log = state.openLog, clock.now - lastLogRead >= .seconds(1) {
                        lastLogRead = clock.now
                        send.yield(.loadHistory(log.download))
                    }
                }
            case .done(.message(let message)):
                if let message {
                    state.message = message
                    drawNow = true
                }
            case .done(.displaced(let resumed, let displaced)):
                let name = { (id: DownloadID) in state.snapshot[id].map { ScreenText.clean($0.displayName, unicode: state.unicode) } ?? "#\(id.rawValue)" }
                state.inform("\(name(resumed)) runs now; \(name(displaced)) went back to queued with its bytes")
                drawNow = true
            case .done(.history(let entries, let whose, let error)):
                state.received(entries, for: whose, error: error)
                drawNow = true
            case .tick:
                if let due = tickDue, clock.now >= due { tickDue = nil }
                // A waiting row counts down once a second even when no snapshot comes.
                if Self.hasCountdown(state.snapshot) { dirty = true }
            case .terminalEnded:
                end = .terminalGone
                break loop
            case .queueEnded:
                end = .queueEnded
                break loop
            }

            let now = clock.now
            if drawNow || (dirty && now - lastDraw >= refreshInterval) {
                state.now = Date()
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
        log("ui closed: \(end)")
        return end
    }

    /// Carries out one command on the queue; a refusal comes back as the message to show.
    func execute(_ command: Command) async -> Outcome {
        do throws(QueueControlError) {
            switch command {
            case .pause(let id): try await queue.pause(id)
            case .resume(let id):
                if let displaced = try await queue.resume(id) { return .displaced(resumed: id, displaced: displaced) }
            case .cancel(let id): try await queue.cancel(id)
            case .remove(let id): try await queue.remove(id)
            case .pauseAll: try await queue.pauseAll()
            case .resumeAll: try await queue.resumeAll()
            case .purgePaused(let ids): try await queue.purgePaused(only: ids)
            case .move(let id, let index): try await queue.move(id, to: index)
            case .setMaxActive(let count):
                try await queue.setMaxActive(count)
                saveMaxActive(count)
            case .setLimit(let limit): try await queue.setLimit(limit)
            case .setDownloadLimit(let id, let limit): try await queue.setLimit(limit, for: id)
            case .clearCompleted:
                let count = try await queue.clearCompleted()
                return .message(StatusMessage(count == 1 ? "cleared 1 completed row; its file stays" : "cleared \(count) completed rows; their files stay"))
            case .loadHistory(let id):
                do {
                    return .history(try await queue.history(id), for: id, error: nil)
                } catch {
                    return .history([], for: id, error: error.description)
                }
            case .copy(let text):
                guard terminal.copy(text) else { return .message(StatusMessage("cannot copy: the screen is not a terminal", isError: true)) }
                return .message(StatusMessage("copied with OSC 52 (where the terminal allows it): \(text)"))
            case .add(let urls):
                let requests = urls.map { QueueRequest(url: $0, destination: .directory(downloadDirectory), options: defaults, limit: addLimit) }
                let refused = await Self.add(requests, to: queue)
                if let first = refused.first {
                    return .message(StatusMessage(urls.count == 1 ? first : "added \(urls.count - refused.count) of \(urls.count): \(first)", isError: true))
                }
            case .redraw, .detach, .quit: break
            }
            return .message(nil)
        } catch {
            return .message(StatusMessage(error.description, isError: true))
        }
    }

    /// Schedules every request, one by one (one refused does not stop the others); the reasons of
    /// those the queue refused.
    public static func add(_ requests: [QueueRequest], to queue: any QueueControl) async -> [String] {
        var refused: [String] = []
        for request in requests {
            do {
                _ = try await queue.schedule([request])
            } catch {
                refused.append(error.description)
            }
        }
        return refused
    }

    private static func hasCountdown(_ snapshot: SessionSnapshot) -> Bool {
        snapshot.downloads.contains { if case .waiting = $0.state { true } else { false } }
    }
}
