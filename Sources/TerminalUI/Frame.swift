/// A colour a span asks for; the backend drops it under `NO_COLOR` or on a terminal without colours.
public enum Color: Int, Sendable, Hashable, CaseIterable {
    case red = 1, green, yellow, blue, magenta, cyan
}

/// How a span is drawn.
public struct Style: Sendable, Hashable {
    public var color: Color?
    public var bold = false
    public var reverse = false
    public var dim = false
    public var underline = false

    public init(color: Color? = nil, bold: Bool = false, reverse: Bool = false, dim: Bool = false, underline: Bool = false) {
        self.color = color
        self.bold = bold
        self.reverse = reverse
        self.dim = dim
        self.underline = underline
    }

    public static let plain = Style()
    public static let bold = Style(bold: true)
    public static let dim = Style(dim: true)
    public static let reverse = Style(reverse: true)
}

/// A run of clean text in one style.
public struct Span: Sendable, Hashable {
    public var text: String
    public var style: Style

    public init(_ text: String, _ style: Style = .plain) {
        self.text = text
        self.style = style
    }
}

/// One screen line: spans that together take at most the frame's width.
public struct Line: Sendable, Hashable {
    public var spans: [Span]

    public init(_ spans: [Span] = []) {
        self.spans = spans
    }

    public var text: String { spans.map(\.text).joined() }
    public var width: Int { ScreenText.width(text) }
}

/// A cell position on the screen.
public struct Point: Sendable, Hashable {
    public var x: Int
    public var y: Int

    public init(x: Int, y: Int) {
        self.x = x
        self.y = y
    }
}

/// Everything the screen shows at one moment: exactly `height` lines, none wider than `width`, and
/// where the cursor is (nil hides it).
public struct Frame: Sendable, Hashable {
    public var width: Int
    public var height: Int
    public var lines: [Line]
    public var cursor: Point?

    public init(width: Int, height: Int, lines: [Line], cursor: Point? = nil) {
        self.width = width
        self.height = height
        self.lines = lines
        self.cursor = cursor
    }

    /// The frame's text, one line per row, trailing spaces kept (tests compare it whole).
    public var text: String { lines.map(\.text).joined(separator: "\n") }
}

/// Builds one line left to right, never past its width.
struct LineBuilder {
    let width: Int
    let unicode: Bool
    private(set) var spans: [Span] = []
    private(set) var used = 0

    init(width: Int, unicode: Bool) {
        self.width = width
        self.unicode = unicode
    }

    var remaining: Int { max(0, width - used) }

    /// Appends `text` (already clean), cut with an ellipsis where the line ends.
    mutating func add(_ text: String, _ style: Style = .plain) {
        guard remaining > 0, !text.isEmpty else { return }
        let fitted = ScreenText.fit(text, remaining, unicode: unicode)
        used += ScreenText.width(fitted)
        if let last = spans.last, last.style == style {
            spans[spans.count - 1].text += fitted
        } else {
            spans.append(Span(fitted, style))
        }
    }

    /// Appends `text` in a field of exactly `cells` (cut or padded); right-aligned when asked.
    mutating func field(_ text: String, _ cells: Int, _ style: Style = .plain, right: Bool = false) {
        guard cells > 0 else { return }
        let fitted = ScreenText.fit(text, cells, unicode: unicode)
        let gap = String(repeating: " ", count: max(0, cells - ScreenText.width(fitted)))
        add(right ? gap + fitted : fitted + gap, style)
    }

    mutating func space(_ count: Int = 1, _ style: Style = .plain) {
        add(String(repeating: " ", count: count), style)
    }

    /// Fills the rest of the line (a selected row is reversed to the edge).
    mutating func fill(_ style: Style = .plain) {
        space(remaining, style)
    }

    var line: Line { Line(spans) }
}
