/// glibc's `wcwidth`: the C library declares it only under `_XOPEN_SOURCE`, which Swift's Glibc
/// module is not built with. It is what ncurses measures with, so the layout agrees with the screen.
@_silgen_name("wcwidth")
private func systemWcwidth(_ character: Int32) -> Int32

/// Text as the terminal draws it: cleaned of anything that is not a printable character, measured in
/// terminal cells (`wcwidth`, as ncurses measures it), cut to fit.
///
/// Every string from a server or a person (names, URLs, errors) goes through `clean` before it is
/// drawn: an escape sequence in a file name must never reach the terminal.
public enum ScreenText {
    /// `text` without escape sequences (CSI, OSC, DCS and two-byte ones, 7- and 8-bit), with tabs
    /// and line breaks turned into spaces and every other control or unprintable character dropped;
    /// in ASCII mode every non-ASCII character becomes `?`.
    public static func clean(_ text: String, unicode: Bool = true) -> String {
        var output = String.UnicodeScalarView()
        var scalars = Array(text.unicodeScalars)[...]
        while let scalar = scalars.popFirst() {
            switch scalar.value {
            case 0x1B:
                skipEscapeSequence(&scalars)
            case 0x9B:
                skipControlSequence(&scalars)
            case 0x9D, 0x90, 0x98, 0x9E, 0x9F:
                skipString(&scalars)
            case 0x09, 0x0A, 0x0D:
                output.append(" ")
            default:
                if !unicode, scalar.value > 0x7E {
                    output.append("?")
                } else if scalar.value >= 0x20, !isUnprintable(scalar), scalar.value < 0x7F || systemWcwidth(Int32(bitPattern: scalar.value)) >= 0 {
                    output.append(scalar)
                }
            }
        }
        return String(output)
    }

    /// Cells `text` takes on the screen: the sum of `wcwidth` over its scalars, as ncurses counts.
    ///
    /// `text` must be clean; a scalar `wcwidth` does not know counts as one cell.
    public static func width(_ text: String) -> Int {
        var total = 0
        for scalar in text.unicodeScalars { total += cells(scalar) }
        return total
    }

    /// `text` cut to at most `width` cells, ending in `…` (`~` in ASCII mode) when it was cut; with
    /// `pad`, filled with spaces to exactly `width`.
    public static func fit(_ text: String, _ width: Int, pad: Bool = false, unicode: Bool = true) -> String {
        guard width > 0 else { return "" }
        let full = self.width(text)
        if full <= width {
            return pad ? text + String(repeating: " ", count: width - full) : text
        }
        let marker: Unicode.Scalar = unicode ? "…" : "~"
        let kept = prefix(text, width - 1)
        var result = String.UnicodeScalarView(kept.unicodeScalars)
        result.append(marker)
        let used = self.width(kept) + 1
        return String(result) + (pad ? String(repeating: " ", count: max(0, width - used)) : "")
    }

    /// `text` cut in the middle to at most `width` cells: its start, `…` (`~` in ASCII mode), and
    /// its end, which gets a third of the room. For names: `file-1.bin` … `file-40.bin`, cut at
    /// their ends, all looked alike (found by use).
    public static func fitMiddle(_ text: String, _ width: Int, unicode: Bool = true) -> String {
        guard width > 0 else { return "" }
        guard self.width(text) > width else { return text }
        guard width >= 6 else { return fit(text, width, unicode: unicode) }
        let room = width - 1
        let end = suffix(text, room / 3)
        let start = prefix(text, room - self.width(end))
        var result = String.UnicodeScalarView(start.unicodeScalars)
        result.append(unicode ? "…" : "~")
        result.append(contentsOf: end.unicodeScalars)
        return String(result)
    }

    /// The longest start of `text` that fits in `width` cells (zero-width marks stay with their base).
    public static func prefix(_ text: String, _ width: Int) -> String {
        var output = String.UnicodeScalarView()
        var used = 0
        for scalar in text.unicodeScalars {
            let size = cells(scalar)
            if used + size > width { break }
            used += size
            output.append(scalar)
        }
        return String(output)
    }

    /// The longest end of `text` that fits in `width` cells.
    public static func suffix(_ text: String, _ width: Int) -> String {
        var kept: [Unicode.Scalar] = []
        var used = 0
        for scalar in text.unicodeScalars.reversed() {
            let size = cells(scalar)
            if used + size > width { break }
            used += size
            kept.append(scalar)
        }
        return String(String.UnicodeScalarView(kept.reversed()))
    }

    static func cells(_ scalar: Unicode.Scalar) -> Int {
        if scalar.value < 0x7F { return scalar.value >= 0x20 ? 1 : 0 }
        let width = Int(systemWcwidth(Int32(bitPattern: scalar.value)))
        return width < 0 ? 1 : width
    }

    private static func isUnprintable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x7F...0x9F: true
        // Bidirectional overrides and isolates: they can make a name read backwards.
        case 0x202A...0x202E, 0x2066...0x2069: true
        // Joiners, variation selectors and skin tones make terminals merge emoji into fewer cells
        // than wcwidth counts: dropped, each emoji is drawn on its own at the width counted.
        case 0x200D, 0xFE0E, 0xFE0F, 0x1F3FB...0x1F3FF: true
        default: false
        }
    }

    /// After ESC: a CSI (`[` … final byte), an OSC/DCS/PM/APC/SOS string (… BEL or ST), or one byte.
    private static func skipEscapeSequence(_ scalars: inout ArraySlice<Unicode.Scalar>) {
        guard let next = scalars.popFirst() else { return }
        switch next {
        case "[": skipControlSequence(&scalars)
        case "]", "P", "^", "_", "X": skipString(&scalars)
        default:
            // ESC ( B and friends take one more byte; everything else is ESC + one byte.
            if next.value >= 0x20, next.value <= 0x2F { _ = scalars.popFirst() }
        }
    }

    /// Parameters and intermediates up to the final byte (0x40...0x7E), which is dropped too.
    private static func skipControlSequence(_ scalars: inout ArraySlice<Unicode.Scalar>) {
        while let scalar = scalars.popFirst() {
            if scalar.value >= 0x40, scalar.value <= 0x7E { return }
            if scalar.value < 0x20 || scalar.value > 0x7E { return }
        }
    }

    /// Up to BEL, ST (ESC \) or the 8-bit ST.
    private static func skipString(_ scalars: inout ArraySlice<Unicode.Scalar>) {
        while let scalar = scalars.popFirst() {
            if scalar.value == 0x07 || scalar.value == 0x9C { return }
            if scalar.value == 0x1B {
                if scalars.first == "\\" { scalars.removeFirst() }
                return
            }
        }
    }
}
