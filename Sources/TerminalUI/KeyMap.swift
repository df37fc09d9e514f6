/// A key as the terminal reported it.
public enum Key: Sendable, Hashable {
    /// A printable character (space included).
    case char(Character)
    /// Ctrl and a letter, lower-case (`ctrl("l")`).
    case ctrl(Character)
    case up, down, left, right, pageUp, pageDown, home, end
    case enter, escape, backspace, delete, tab
    /// A function key, F1 to F12.
    case function(Int)
    /// A mouse click (button 1) at a cell, where the terminal reports it.
    case click(x: Int, y: Int)
    /// The mouse wheel, one notch.
    case wheelUp, wheelDown
}

/// What the terminal thread reports.
public enum TerminalEvent: Sendable, Hashable {
    /// Keys read in one go: a paste arrives as one batch, which is how a newline inside a pasted
    /// list of URLs is told from the Enter that submits it.
    case keys([Key])
    /// The terminal's new size in cells.
    case resize(width: Int, height: Int)
}

/// Everything a key can ask for in the table.
public enum KeyAction: Sendable, Hashable, CaseIterable {
    case selectUp, selectDown, pageUp, pageDown, first, last
    case pauseOrResume, resumeOrRetry, cancel, remove
    case pauseAll, resumeAll, purge, clearCompleted
    case moveUp, moveDown, fewerAtOnce, moreAtOnce
    case find, showKind, sort, reverseSort
    case limitAll, limitSelected
    case add, details, history, recentEvents, copyPath, help, redraw, detach, quit
}

/// One row of the key table: the keys, how they read, what they do.
public struct KeyBinding: Sendable, Hashable {
    public var keys: [Key]
    /// How the keys are written in the help and the hint bar (`↑/k`).
    public var label: String
    public var action: KeyAction
    /// The help's description.
    public var summary: String
    /// The hint bar's word, for the bindings it shows (nil: help only).
    public var hint: String?
}

/// The one key table: the reducer, the help overlay and the hint bar all read it.
public enum KeyMap {
    public static let bindings: [KeyBinding] = [
        KeyBinding(keys: [.up, .char("k")], label: "↑/k", action: .selectUp, summary: "select the row above"),
        KeyBinding(keys: [.down, .char("j")], label: "↓/j", action: .selectDown, summary: "select the row below"),
        KeyBinding(keys: [.pageUp], label: "PgUp", action: .pageUp, summary: "one screen up"),
        KeyBinding(keys: [.pageDown], label: "PgDn", action: .pageDown, summary: "one screen down"),
        KeyBinding(keys: [.home], label: "Home", action: .first, summary: "first row"),
        KeyBinding(keys: [.end], label: "End", action: .last, summary: "last row"),
        KeyBinding(keys: [.char(" "), .char("p")], label: "space/p", action: .pauseOrResume, summary: "pause, or resume now (takes a slot at once)", hint: "pause"),
        KeyBinding(keys: [.char("r")], label: "r", action: .resumeOrRetry, summary: "resume, or retry now (takes a slot at once)", hint: "resume"),
        KeyBinding(keys: [.char("c"), .function(9)], label: "c/F9", action: .cancel, summary: "cancel and delete its partial data (asks first)", hint: "cancel"),
        KeyBinding(keys: [.char("d"), .delete], label: "d/Del", action: .remove, summary: "remove a finished, failed or cancelled row (files stay)", hint: "remove"),
        KeyBinding(keys: [.char("C")], label: "C", action: .clearCompleted, summary: "clear all completed rows (files stay; asks first)"),
        KeyBinding(keys: [.char("P")], label: "P", action: .pauseAll, summary: "pause all"),
        KeyBinding(keys: [.char("R")], label: "R", action: .resumeAll, summary: "resume all"),
        KeyBinding(keys: [.char("X")], label: "X", action: .purge, summary: "purge the data of paused downloads; they stay (asks first)"),
        KeyBinding(keys: [.char("+")], label: "+", action: .moveUp, summary: "move up the queue"),
        KeyBinding(keys: [.char("-")], label: "-", action: .moveDown, summary: "move down the queue"),
        KeyBinding(keys: [.char("<")], label: "<", action: .fewerAtOnce, summary: "run fewer at once"),
        KeyBinding(keys: [.char(">")], label: ">", action: .moreAtOnce, summary: "run more at once"),
        KeyBinding(keys: [.char("L")], label: "L", action: .limitAll, summary: "speed limit for all downloads (2M, 500K, 0 for none)"),
        KeyBinding(keys: [.char("l")], label: "l", action: .limitSelected, summary: "speed limit for the selected download"),
        KeyBinding(keys: [.char("/"), .function(3)], label: "/ or F3", action: .find, summary: "find: show rows whose name or URL has the text (Esc clears)", hint: "find"),
        KeyBinding(keys: RowKind.allCases.map { .char($0.key) } + [.char("0")], label: "1-5/0", action: .showKind, summary: "show only active, queued, paused, failed or done rows; 0 all"),
        KeyBinding(keys: [.char("s"), .function(6)], label: "s/F6", action: .sort, summary: "sort by the next column: queue, name, progress, speed, ETA, size, state", hint: "sort"),
        KeyBinding(keys: [.char("S")], label: "S", action: .reverseSort, summary: "reverse the sort (the queue's order never changes)"),
        KeyBinding(keys: [.char("a")], label: "a", action: .add, summary: "add URLs (several: separate with spaces)", hint: "add"),
        KeyBinding(keys: [.enter], label: "Enter", action: .details, summary: "show or hide the details pane", hint: "details"),
        KeyBinding(keys: [.char("h")], label: "h", action: .history, summary: "the selected download's log: attempts, responses, resumes, retries"),
        KeyBinding(keys: [.char("H")], label: "H", action: .recentEvents, summary: "the whole queue's recent events"),
        KeyBinding(keys: [.char("y")], label: "y", action: .copyPath, summary: "copy the selected file's path (OSC 52: the terminal's clipboard)"),
        KeyBinding(keys: [.char("?"), .function(1)], label: "?/F1", action: .help, summary: "show or hide this help", hint: "help"),
        KeyBinding(keys: [.ctrl("l")], label: "Ctrl-L", action: .redraw, summary: "redraw the screen"),
        KeyBinding(keys: [.char("D")], label: "D", action: .detach, summary: "detach: leave the UI, the downloads go on (haul attaches again)", hint: "detach"),
        KeyBinding(keys: [.char("q"), .function(10), .ctrl("c")], label: "q/F10/Ctrl-C", action: .quit, summary: "quit: pause everything and stop the queue; it resumes next start", hint: "quit"),
    ]

    private static let byKey: [Key: KeyAction] = {
        var table: [Key: KeyAction] = [:]
        for binding in bindings {
            for key in binding.keys { table[key] = binding.action }
        }
        return table
    }()

    /// The action `key` asks for in the table view.
    public static func action(for key: Key) -> KeyAction? {
        byKey[key]
    }

    /// The first key's label, for the hint bar (`q`, `space`, `/`); the help lists them all.
    static func firstLabel(_ binding: KeyBinding, unicode: Bool) -> String {
        let label = Self.label(binding, unicode: unicode)
        if label.hasPrefix("/ ") { return "/" }
        return label.split(separator: "/").first.map(String.init) ?? label
    }

    /// The actions the hint bar offers, most needed first: what does not fit is left out from the end.
    static let hinted: [KeyAction] = [.quit, .help, .pauseOrResume, .resumeOrRetry, .cancel, .remove, .add, .details, .find, .sort, .detach]

    /// `label` with the arrows spelt out for an ASCII terminal.
    static func label(_ binding: KeyBinding, unicode: Bool) -> String {
        unicode ? binding.label : binding.label.replacingOccurrences(of: "↑", with: "Up").replacingOccurrences(of: "↓", with: "Down")
    }
}
