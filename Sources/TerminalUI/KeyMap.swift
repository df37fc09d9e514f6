/// A key as the terminal reported it.
public enum Key: Sendable, Hashable {
    /// A printable character (space included).
    case char(Character)
    /// Ctrl and a letter, lower-case (`ctrl("l")`).
    case ctrl(Character)
    case up, down, left, right, pageUp, pageDown, home, end
    case enter, escape, backspace, delete, tab
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
    case pauseAll, resumeAll, purge
    case moveUp, moveDown, fewerAtOnce, moreAtOnce
    case add, details, help, redraw, detach, quit
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
        KeyBinding(keys: [.char(" "), .char("p")], label: "space/p", action: .pauseOrResume, summary: "pause or resume the selected download", hint: "pause"),
        KeyBinding(keys: [.char("r")], label: "r", action: .resumeOrRetry, summary: "resume, or retry now", hint: "resume"),
        KeyBinding(keys: [.char("c")], label: "c", action: .cancel, summary: "cancel and delete its partial data (asks first)", hint: "cancel"),
        KeyBinding(keys: [.char("d"), .delete], label: "d/Del", action: .remove, summary: "remove a finished, failed or cancelled row (files stay)", hint: "remove"),
        KeyBinding(keys: [.char("P")], label: "P", action: .pauseAll, summary: "pause all"),
        KeyBinding(keys: [.char("R")], label: "R", action: .resumeAll, summary: "resume all"),
        KeyBinding(keys: [.char("X")], label: "X", action: .purge, summary: "purge the data of all paused downloads, keeping them (asks first)"),
        KeyBinding(keys: [.char("+")], label: "+", action: .moveUp, summary: "move up the queue"),
        KeyBinding(keys: [.char("-")], label: "-", action: .moveDown, summary: "move down the queue"),
        KeyBinding(keys: [.char("<")], label: "<", action: .fewerAtOnce, summary: "run fewer at once"),
        KeyBinding(keys: [.char(">")], label: ">", action: .moreAtOnce, summary: "run more at once"),
        KeyBinding(keys: [.char("a")], label: "a", action: .add, summary: "add URLs (several: separate with spaces)", hint: "add"),
        KeyBinding(keys: [.enter], label: "Enter", action: .details, summary: "show or hide the details pane", hint: "details"),
        KeyBinding(keys: [.char("?")], label: "?", action: .help, summary: "show or hide this help", hint: "help"),
        KeyBinding(keys: [.ctrl("l")], label: "Ctrl-L", action: .redraw, summary: "redraw the screen"),
        KeyBinding(keys: [.char("D")], label: "D", action: .detach, summary: "detach: leave the UI, the downloads go on (haul attaches again)", hint: "detach"),
        KeyBinding(keys: [.char("q"), .ctrl("c")], label: "q/Ctrl-C", action: .quit, summary: "quit: pause everything and stop the queue; it resumes next start", hint: "quit"),
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

    /// `label` with the arrows spelt out for an ASCII terminal.
    static func label(_ binding: KeyBinding, unicode: Bool) -> String {
        unicode ? binding.label : binding.label.replacingOccurrences(of: "↑", with: "Up").replacingOccurrences(of: "↓", with: "Down")
    }
}
