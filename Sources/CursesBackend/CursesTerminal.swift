import CNCurses
import Foundation
import Synchronization
import TerminalUI

/// The terminal, owned by curses on one dedicated thread for its whole life.
///
/// Every curses call happens on that thread: it starts curses, draws the newest frame from a
/// mailbox (only the lines that changed; ncurses then sends only the cells that changed), reads keys
/// with a 50 ms timeout and yields them, and ends curses. Frames dropped from the mailbox are never
/// missed: only the newest one matters.
public final class CursesTerminal: TerminalScreen {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Keys (in batches) and sizes, in order; never dropped. Finishes when the terminal stops.
    public let events: AsyncStream<TerminalEvent>
    /// Whether the locale is UTF-8 (else only ASCII is drawn).
    public let unicode: Bool
    private let shared: Shared

    /// What the caller and the curses thread exchange.
    private final class Shared: Sendable {
        struct Mail {
            var frame: Frame?
            var repaint = false
            /// Texts for the clipboard (OSC 52), written after the next draw.
            var copies: [String] = []
            var stop = false
            var stopped = false
            var waiters: [CheckedContinuation<Void, Never>] = []
        }

        let mail = Mutex(Mail())
    }

    /// Says why the terminal cannot run the UI, before anything starts: not a terminal, `TERM`
    /// unset, unknown to terminfo, or unable to move the cursor (`dumb`).
    public static func check() throws(Failure) {
        guard isatty(STDIN_FILENO) == 1, isatty(STDOUT_FILENO) == 1 else {
            throw Failure(description: "the terminal UI needs a terminal on stdin and stdout (use haul get in scripts)")
        }
        let name = ScreenText.clean(ProcessInfo.processInfo.environment["TERM"] ?? "", unicode: false)
        let advice = "use haul get, or set TERM=xterm-256color"
        switch Int(haul_check_terminal()) {
        case HAUL_TERMINAL_UNSET:
            throw Failure(description: "TERM is not set, so the terminal UI cannot tell what this terminal can do; \(advice)")
        case HAUL_TERMINAL_UNKNOWN:
            throw Failure(description: "TERM=\(name) is a terminal type this system has no terminfo entry for; \(advice)")
        case HAUL_TERMINAL_NO_CURSOR:
            throw Failure(description: "TERM=\(name) cannot move the cursor, which the terminal UI needs; \(advice)")
        default:
            return
        }
    }

    /// Starts curses on the controlling terminal, or says why it cannot (not a terminal, unknown
    /// `TERM`). `colors` false draws without colour (`NO_COLOR`); so does a terminal without any.
    /// `mouse` reports clicks and the wheel (the terminal's own selection then needs Shift).
    public init(colors: Bool, mouse: Bool = true) async throws(Failure) {
        try Self.check()
        // Only the character type: ncurses needs it for wide characters; nothing else may change.
        setlocale(LC_CTYPE, "")
        unicode = haul_locale_is_utf8() != 0
        let (events, continuation) = AsyncStream.makeStream(of: TerminalEvent.self, bufferingPolicy: .unbounded)
        self.events = events
        let shared = Shared()
        self.shared = shared
        // Awaited, not waited for: no thread of the cooperative pool blocks while curses starts.
        let started: Result<Void, Failure> = await withCheckedContinuation { ready in
            let thread = Thread {
                Self.run(shared: shared, colors: colors, mouse: mouse, events: continuation) { ready.resume(returning: $0) }
            }
            thread.name = "haul.curses"
            thread.start()
        }
        if case .failure(let failure) = started {
            throw failure
        }
    }

    /// Hands the newest frame to the curses thread (an older, undrawn one is dropped).
    public func show(_ frame: Frame) {
        shared.mail.withLock { $0.frame = frame }
    }

    /// Repaints every cell with the next frame (Ctrl-L).
    public func repaint() {
        shared.mail.withLock { $0.repaint = true }
    }

    /// Puts `text` on the terminal's clipboard with OSC 52, from the curses thread after its next
    /// draw (the sequence carries the text in base64: nothing in it can reach the terminal as a
    /// command). Most terminals accept it, over SSH too; tmux with `set-clipboard on`.
    public func copy(_ text: String) -> Bool {
        guard isatty(STDOUT_FILENO) == 1 else { return false }
        shared.mail.withLock { $0.copies.append(text) }
        return true
    }

    /// Ends curses and restores the terminal; returns once it is restored. Safe to call twice.
    public func stop() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let done = shared.mail.withLock { mail -> Bool in
                if mail.stopped { return true }
                mail.stop = true
                mail.waiters.append(waiter)
                return false
            }
            if done { waiter.resume() }
        }
    }

    // MARK: The curses thread

    private static func run(
        shared: Shared,
        colors: Bool,
        mouse: Bool,
        events: AsyncStream<TerminalEvent>.Continuation,
        started: (Result<Void, Failure>) -> Void
    ) {
        Emergency.save()
        guard haul_start() == 0 else {
            let name = ProcessInfo.processInfo.environment["TERM"] ?? "unset"
            started(.failure(Failure(description: "cannot use this terminal (TERM=\(name))")))
            return
        }
        // raw, not cbreak: Ctrl-C, Ctrl-\\ and Ctrl-Z arrive as keys (Ctrl-C quits like q) instead of
        // signals whose ncurses handlers would draw from another thread, and Ctrl-S cannot freeze
        // the output (no XON/XOFF) with the curses thread stuck in a write.
        raw()
        noecho()
        nonl()
        _ = haul_keypad()
        _ = haul_intrflush()
        set_escdelay(25)
        timeout(50)
        if mouse { haul_mouse_on() }
        Emergency.remember(mouse: mouse)
        var screen = Screen(colors: colors && has_colors())
        screen.setUpColors()
        started(.success(()))
        events.yield(.resize(width: Int(haul_cols()), height: Int(haul_lines())))

        var lastActivity = ContinuousClock.now
        while true {
            let (frame, repaint, copies, stop) = shared.mail.withLock { mail in
                defer {
                    mail.frame = nil
                    mail.repaint = false
                    mail.copies = []
                }
                return (mail.frame, mail.repaint, mail.copies, mail.stop)
            }
            if stop { break }
            if repaint { screen.forgetDrawn(repaintAll: true) }
            // Ctrl-L with nothing new to show repaints what is there.
            if let frame = frame ?? (repaint ? screen.last : nil) { screen.draw(frame) }
            for text in copies { Self.writeClipboard(text) }
            // After two quiet seconds the wait grows to 250 ms: an idle haul wakes four times a
            // second instead of twenty. A key ends the quiet at once, so what it asks for is drawn
            // within 50 ms; only a change nobody asked for can take up to 250 ms to show.
            if frame != nil || repaint { lastActivity = .now }
            let quiet = ContinuousClock.now - lastActivity > .seconds(2)
            if readKeys(into: events, screen: &screen, wait: quiet ? 250 : 50) {
                lastActivity = .now
            } else if Self.terminalGone() {
                // EOF or EIO on the terminal (its SSH connection or tmux went away): nothing more
                // can be read or drawn. The events end, and the UI's owner decides what follows.
                break
            }
        }
        endwin()
        Emergency.forget()
        events.finish()
        let waiters = shared.mail.withLock { mail in
            mail.stopped = true
            defer { mail.waiters = [] }
            return mail.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// OSC 52 straight to the terminal, after what curses buffered.
    private static func writeClipboard(_ text: String) {
        fflush(nil)
        let bytes = Array(("\u{1B}]52;c;" + Data(text.utf8).base64EncodedString() + "\u{07}").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }

    /// Whether the terminal on stdin hung up (the other end closed): `poll` says so at once.
    private static func terminalGone() -> Bool {
        var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) >= 0 else { return false }
        return descriptor.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0
    }

    /// Waits up to `wait` ms for a key, then takes every key already there (a paste arrives whole).
    ///
    /// - Returns: whether anything (a key, a resize) came.
    private static func readKeys(into events: AsyncStream<TerminalEvent>.Continuation, screen: inout Screen, wait: Int32) -> Bool {
        var keys: [Key] = []
        var code: UInt32 = 0
        var any = false
        timeout(wait)
        var result = haul_get_wch(&code)
        while result != ERR {
            any = true
            if result == KEY_CODE_YES, Int32(code) == KEY_RESIZE {
                if !keys.isEmpty { events.yield(.keys(keys)) }
                keys = []
                // The old cells mean nothing at the new size: the next frame draws every line.
                screen.forgetDrawn(repaintAll: false)
                events.yield(.resize(width: Int(haul_cols()), height: Int(haul_lines())))
            } else if result == KEY_CODE_YES, Int32(code) == KEY_MOUSE {
                var x: Int32 = 0
                var y: Int32 = 0
                switch Int(haul_mouse_event(&x, &y)) {
                case HAUL_MOUSE_CLICK: keys.append(.click(x: Int(x), y: Int(y)))
                case HAUL_MOUSE_WHEEL_UP: keys.append(.wheelUp)
                case HAUL_MOUSE_WHEEL_DOWN: keys.append(.wheelDown)
                default: break
                }
            } else if let key = Self.key(result: result, code: code) {
                keys.append(key)
            }
            timeout(0)
            result = haul_get_wch(&code)
        }
        if !keys.isEmpty { events.yield(.keys(keys)) }
        return any
    }

    static func key(result: Int32, code: UInt32) -> Key? {
        if result == KEY_CODE_YES {
            switch Int32(code) {
            case KEY_UP: return .up
            case KEY_DOWN: return .down
            case KEY_LEFT: return .left
            case KEY_RIGHT: return .right
            case KEY_PPAGE: return .pageUp
            case KEY_NPAGE: return .pageDown
            case KEY_HOME, KEY_FIND: return .home
            case KEY_END, KEY_SELECT, KEY_LL: return .end
            case KEY_BACKSPACE: return .backspace
            case KEY_DC: return .delete
            case KEY_ENTER: return .enter
            case (KEY_F0 + 1)...(KEY_F0 + 12): return .function(Int(Int32(code) - KEY_F0))
            default: return nil
            }
        }
        switch code {
        case 10, 13: return .enter
        case 27: return .escape
        case 8, 127: return .backspace
        case 9: return .tab
        case 1...26:
            return Unicode.Scalar(code + 96).map { .ctrl(Character($0)) }
        case 0..<32: return nil
        default:
            return Unicode.Scalar(code).map { .char(Character($0)) }
        }
    }
}

/// What is on the screen, so a frame redraws only the lines that changed.
private struct Screen {
    let colors: Bool
    private var drawn: [Line] = []
    private var drawnSize = (width: -1, height: -1)
    private var cursorVisible: Bool?
    private(set) var last: Frame?

    init(colors: Bool) {
        self.colors = colors
    }

    func setUpColors() {
        guard colors else { return }
        start_color()
        // -1: the terminal's own background, so haul looks at home in any theme; black where the
        // terminal cannot keep its default colours.
        let background: Int16 = use_default_colors() == OK ? -1 : 0
        let numbers: [TerminalUI.Color: Int16] = [.red: 1, .green: 2, .yellow: 3, .blue: 4, .magenta: 5, .cyan: 6]
        for (color, number) in numbers {
            init_pair(Int16(color.rawValue), number, background)
        }
    }

    mutating func forgetDrawn(repaintAll: Bool) {
        drawn = []
        if repaintAll { _ = haul_repaint_all() }
    }

    mutating func draw(_ frame: Frame) {
        // A frame laid out for another size (a resize raced it) would wrap: wait for the next one.
        guard frame.width == Int(haul_cols()), frame.height == Int(haul_lines()) else { return }
        last = frame
        if drawnSize != (frame.width, frame.height) {
            drawn = []
            drawnSize = (frame.width, frame.height)
        }
        for (y, line) in frame.lines.enumerated() {
            if y < drawn.count, drawn[y] == line { continue }
            var x = 0
            for span in line.spans where !span.text.isEmpty {
                apply(span.style)
                let characters = span.text.unicodeScalars.map { wchar_t(bitPattern: $0.value) }
                _ = haul_draw(Int32(y), Int32(x), characters, Int32(characters.count))
                x += ScreenText.width(span.text)
            }
            haul_style(0, 0)
            if x < frame.width {
                _ = haul_move(Int32(y), Int32(x))
                _ = haul_clear_to_eol()
            }
        }
        drawn = frame.lines
        let wantsCursor = frame.cursor != nil
        if cursorVisible != wantsCursor {
            curs_set(wantsCursor ? 1 : 0)
            cursorVisible = wantsCursor
        }
        if let cursor = frame.cursor {
            _ = haul_move(Int32(cursor.y), Int32(cursor.x))
        }
        _ = haul_refresh()
    }

    private func apply(_ style: Style) {
        var flags: UInt32 = 0
        if style.bold { flags |= UInt32(HAUL_BOLD) }
        if style.reverse { flags |= UInt32(HAUL_REVERSE) }
        if style.dim { flags |= UInt32(HAUL_DIM) }
        if style.underline { flags |= UInt32(HAUL_UNDERLINE) }
        let pair = colors ? Int16(style.color?.rawValue ?? 0) : 0
        haul_style(flags, pair)
    }
}

/// Puts the terminal back when the process leaves without the curses thread: a watchdog or a
/// second signal (`restoreTerminal`), or a crash (SIGSEGV, SIGABRT, a Swift trap), after which the
/// signal goes on as it would have.
///
/// Both paths run the same restore, which may only use async-signal-safe calls and memory prepared
/// beforehand: `tcsetattr` with the modes saved before curses started, and `write` of the terminal's
/// own reset strings (`sgr0 cnorm rmkx rmcup`), both kept in statics the curses thread fills.
public enum Emergency {
    nonisolated(unsafe) private static var modes = termios()
    nonisolated(unsafe) private static var hasModes = false
    nonisolated(unsafe) private static var reset: UnsafeMutableBufferPointer<UInt8>?
    nonisolated(unsafe) private static var armed: sig_atomic_t = 0
    private static let crashSignals: [Int32] = [SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV]

    /// The terminal's modes before curses changes them (on the curses thread, before `newterm`).
    static func save() {
        hasModes = tcgetattr(STDIN_FILENO, &modes) == 0
    }

    /// Called on the curses thread once curses is up: terminfo knows how this terminal leaves its
    /// full-screen mode. Arms the restore and the crash handlers. `mouse`: mouse reports are on,
    /// and go off too (a tester's shell, after a crash, got escape codes for every click).
    static func remember(mouse: Bool) {
        if reset == nil {
            var bytes: [UInt8] = []
            for name in ["sgr0", "cnorm", "rmkx", "rmcup"] {
                if let value = haul_terminfo(name) {
                    bytes += Array(String(cString: value).utf8)
                }
            }
            // What ncurses turns on for button presses (xterm's SGR encoding and its normal
            // tracking), turned off as its own exit does.
            if mouse { bytes += Array("\u{1B}[?1006;1000l".utf8) }
            bytes += Array("\r\n".utf8)
            let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
            _ = buffer.initialize(from: bytes)
            reset = buffer
        }
        armed = 1
        for number in crashSignals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                Emergency.restoreTerminal()
                // SA_RESETHAND put the default action back: the crash goes on as it would have.
                raise(number)
            }
            action.sa_flags = Int32(truncatingIfNeeded: SA_RESETHAND) | Int32(truncatingIfNeeded: SA_NODEFER)
            sigemptyset(&action.sa_mask)
            sigaction(number, &action, nil)
        }
    }

    /// Curses ended normally: nothing is left to restore.
    static func forget() {
        armed = 0
    }

    /// Restores the terminal if curses still owns it, once; for the last moments of a process.
    public static func restoreTerminal() {
        guard armed == 1 else { return }
        armed = 0
        if hasModes { tcsetattr(STDIN_FILENO, TCSANOW, &modes) }
        if let reset { _ = write(STDOUT_FILENO, reset.baseAddress, reset.count) }
    }
}
