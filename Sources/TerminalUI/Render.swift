import DownloadCore
import Foundation

/// Draws the whole screen for `state`: a pure function of the state (and the locale's `wcwidth`).
///
/// Every line is exactly `state.width` cells or shorter; the backend clears what follows. Nothing
/// here touches curses, the engine or the clock: the state carries `now`.
public func render(_ state: ViewState) -> Frame {
    let width = max(0, state.width)
    let height = max(0, state.height)
    guard width > 0, height > 0 else { return Frame(width: width, height: height, lines: Array(repeating: Line(), count: height)) }
    let layout = Layout(state)
    var lines = Array(repeating: Line(), count: height)
    if layout.tooSmall {
        lines[0] = Line([Span(ScreenText.fit("terminal too small", width, unicode: state.unicode), .bold)])
        return Frame(width: width, height: height, lines: lines)
    }
    let painter = Painter(state: state, width: width)
    lines[0] = painter.header()
    let columns = Columns.fitting(width)
    if case .help = state.overlay {
        for (offset, line) in painter.help(rows: layout.bottom - 1).enumerated() {
            lines[1 + offset] = line
        }
    } else {
        lines[1] = painter.titles(columns)
        let downloads = state.snapshot.downloads
        if downloads.isEmpty, layout.tableHeight > 0 {
            lines[layout.tableTop] = painter.plain("  No downloads yet: press a to add URLs, ? for help.", .dim)
        }
        for row in 0..<layout.tableHeight {
            let index = state.scrollTop + row
            guard downloads.indices.contains(index) else { break }
            let download = downloads[index]
            lines[layout.tableTop + row] = painter.row(download, columns, selected: download.id == state.selected)
        }
        if layout.detailsHeight > 0 {
            for (offset, line) in painter.details(rows: layout.detailsHeight).enumerated() {
                lines[layout.detailsTop + offset] = line
            }
        }
    }
    var cursor: Point?
    switch state.overlay {
    case .prompt(let prompt):
        let (line, x) = painter.prompt(prompt)
        lines[layout.bottom] = line
        cursor = Point(x: x, y: layout.bottom)
        if let error = prompt.error, layout.bottom > 1 {
            lines[layout.bottom - 1] = painter.plain((state.unicode ? "✗ " : "x ") + error, Style(color: .red, bold: true))
        }
    case .confirm(let confirmation):
        lines[layout.bottom] = painter.question(confirmation.question)
    case .help, nil:
        if let message = state.message {
            lines[layout.bottom] = painter.plain(message.text, message.isError ? Style(color: .red, bold: true) : .bold)
        } else {
            lines[layout.bottom] = painter.hints()
        }
    }
    return Frame(width: width, height: height, lines: lines, cursor: cursor)
}

/// The pieces of the screen, each a line (or lines) of at most `width` cells.
struct Painter {
    let state: ViewState
    let width: Int

    var unicode: Bool { state.unicode }

    func clean(_ text: String) -> String {
        ScreenText.clean(text, unicode: unicode)
    }

    /// `text` (cleaned here) on its own line.
    func plain(_ text: String, _ style: Style = .plain, fill: Bool = false) -> Line {
        var line = LineBuilder(width: width, unicode: unicode)
        line.add(clean(text), style)
        if fill { line.fill(style) }
        return line.line
    }

    /// A y/n question; the answer keys always show, the question is what gets cut.
    func question(_ text: String) -> Line {
        let style = Style(color: .yellow, bold: true, reverse: true)
        var line = LineBuilder(width: width, unicode: unicode)
        let answer = " y/n"
        line.add(ScreenText.fit(clean(text), max(1, width - answer.count), unicode: unicode), style)
        line.add(answer, style)
        line.fill(style)
        return line.line
    }

    // MARK: Header

    static let stateOrder = ["downloading", "waiting", "queued", "paused", "failed", "completed", "cancelled"]

    /// "haul", the total speed, then whole items while they fit: counts per state, bytes saved by
    /// resuming, free space, how many run at once.
    func header() -> Line {
        let snapshot = state.snapshot
        var line = LineBuilder(width: width, unicode: unicode)
        line.add("haul", .bold)
        line.add(unicode ? "  ↓ " : "  down ")
        let speed = Format.speed(snapshot.totalBytesPerSecond)
        line.add(speed == "-" ? "0 B/s" : speed, .bold)
        typealias Item = (separator: String, text: String, style: Style)
        var counts: [Item] = []
        let countsByState = snapshot.countsByState
        for word in Self.stateOrder {
            guard let count = countsByState[word], count > 0 else { continue }
            counts.append((counts.isEmpty ? "  " : (unicode ? " · " : ", "), "\(count) \(word)", Self.style(forWord: word)))
        }
        if snapshot.downloads.isEmpty { counts.append(("  ", "empty queue", .plain)) }
        var facts: [Item] = []
        let saved = snapshot.totalBytesSavedByResume
        if saved > 0 { facts.append(("  ", "resumes saved \(Format.bytes(saved))", .plain)) }
        var lowDisk: [Item] = []
        if let space = snapshot.space {
            if space.isLow {
                // Downloads there wait: said first and in the warning colour, never cut for counts;
                // shorter where the whole sentence does not fit.
                let forms = ["disk low: \(Format.bytes(space.free)) free, floor \(Format.bytes(space.floor))", "disk low: \(Format.bytes(space.free)) free", "disk low"]
                let room = line.remaining - 2
                lowDisk.append(("  ", forms.first { ScreenText.width($0) <= room } ?? "disk low", Self.warning))
            } else {
                facts.append(("  ", "\(Format.bytes(space.free)) free", .plain))
            }
        }
        let atOnce: Item = ("  ", "\(snapshot.maxActive) at once", .dim)
        var items = lowDisk + counts + facts + [atOnce]
        let total = items.reduce(line.used) { $0 + ScreenText.width($1.separator) + ScreenText.width($1.text) }
        if total > width {
            // Not everything fits: the bytes saved and the free space go first, and the counts
            // after them are cut whole, with an ellipsis.
            items = lowDisk + facts + counts + [atOnce]
        }
        for item in items {
            let needed = ScreenText.width(item.separator) + ScreenText.width(item.text)
            guard needed <= line.remaining else {
                if line.remaining >= 2 { line.add(unicode ? " …" : " ~", .dim) }
                break
            }
            line.add(item.separator)
            line.add(item.text, item.style)
        }
        return line.line
    }

    // MARK: Table

    func titles(_ columns: Columns) -> Line {
        var line = LineBuilder(width: width, unicode: unicode)
        let style = Style(bold: true, underline: false)
        line.field("NAME", columns.name, style)
        if columns.state > 0 { line.space(); line.field("STATE", columns.state, style) }
        let progressWidth = columns.bar + columns.percent + (columns.bar > 0 && columns.percent > 0 ? 1 : 0)
        if progressWidth > 0 { line.space(); line.field(columns.bar > 0 ? "PROGRESS" : "DONE", progressWidth, style) }
        if columns.bytes > 0 { line.space(); line.field("BYTES", columns.bytes, style, right: true) }
        if columns.speed > 0 { line.space(); line.field("SPEED", columns.speed, style, right: true) }
        if columns.eta > 0 { line.space(); line.field("ETA", columns.eta, style, right: true) }
        if columns.resume > 0 { line.space(); line.field(columns.compact ? "RESUMED" : "RESUMED AT", columns.resume, style, right: true) }
        return line.line
    }

    func row(_ download: Download, _ columns: Columns, selected: Bool) -> Line {
        var line = LineBuilder(width: width, unicode: unicode)
        // A selected row is reversed edge to edge; colours stay so the state still reads.
        func styled(_ style: Style) -> Style {
            var style = style
            if selected { style.reverse = true }
            return style
        }
        line.field(clean(download.displayName), columns.name, styled(selected ? .bold : .plain))
        if columns.state > 0 {
            line.space(1, styled(.plain))
            // One row per file: a segmented download says how many connections fetch its parts.
            let word = download.state == .downloading && download.connections > 1 ? "\(download.connections) conns" : download.state.word
            line.field(word, columns.state, styled(Self.style(for: download.state)))
        }
        if columns.bar > 0 {
            line.space(1, styled(.plain))
            for span in bar(download, columns.bar) {
                line.add(span.text, styled(span.style))
            }
        }
        if columns.percent > 0 {
            line.space(1, styled(.plain))
            line.field(Format.percent(download.fractionDone), columns.percent, styled(.plain), right: true)
        }
        // A waiting or failed row says why where speed, ETA and resume offset would go (or from the
        // bytes on, when those columns do not fit).
        let reason = reasonText(download)
        let afterBytes = [columns.speed, columns.eta, columns.resume].filter { $0 > 0 }
        let afterBytesWidth = afterBytes.reduce(0, +) + afterBytes.count
        let reasonFromBytes = reason != nil && afterBytesWidth < 14
        if columns.bytes > 0, !reasonFromBytes {
            line.space(1, styled(.plain))
            line.field(bytesText(download, compact: columns.compact), columns.bytes, styled(.plain), right: true)
        }
        if let reason, afterBytesWidth > 0 || reasonFromBytes {
            line.space(1, styled(.plain))
            line.add(clean(reason), styled(Self.style(for: download.state)))
            line.fill(styled(.plain))
            return line.line
        }
        let downloading = download.state == .downloading
        if downloading, download.connecting, columns.speed > 0 {
            line.space(1, styled(.plain))
            let cells = columns.speed + (columns.eta > 0 ? 1 + columns.eta : 0)
            line.field(unicode ? "connecting…" : "connecting...", cells, styled(.dim), right: true)
            if columns.resume > 0 {
                line.space(1, styled(.plain))
                line.field(resumeText(download, compact: columns.compact), columns.resume, styled(.dim), right: true)
            }
            line.fill(styled(.plain))
            return line.line
        }
        if columns.speed > 0 {
            line.space(1, styled(.plain))
            let speed = downloading ? (columns.compact ? Self.compactSpeed(download.bytesPerSecond) : Format.speed(download.bytesPerSecond)) : ""
            line.field(speed, columns.speed, styled(.plain), right: true)
        }
        if columns.eta > 0 {
            line.space(1, styled(.plain))
            line.field(downloading ? Format.duration(download.secondsRemaining) : "", columns.eta, styled(.plain), right: true)
        }
        if columns.resume > 0 {
            line.space(1, styled(.plain))
            line.field(resumeText(download, compact: columns.compact), columns.resume, styled(.dim), right: true)
        }
        line.fill(styled(.plain))
        return line.line
    }

    /// Eighth blocks in UTF-8 (`█████▍···`), `#####....` in ASCII; nothing known, nothing drawn.
    func bar(_ download: Download, _ cells: Int) -> [Span] {
        guard let fraction = download.fractionDone else {
            return [Span(String(repeating: unicode ? "·" : ".", count: cells), .dim)]
        }
        let color: Color = download.state == .completed ? .green : (download.state == .downloading ? .cyan : .blue)
        if !unicode {
            let filled = Int((fraction * Double(cells)).rounded(.down))
            return [Span(String(repeating: "#", count: filled), Style(color: color)), Span(String(repeating: ".", count: cells - filled), .dim)]
        }
        let eighths = Int((fraction * Double(cells * 8)).rounded(.down))
        let full = eighths / 8
        let partial = eighths % 8
        var filled = String(repeating: "█", count: full)
        let partials: [Character] = ["▏", "▎", "▍", "▌", "▋", "▊", "▉"]
        if partial > 0, full < cells { filled.append(partials[partial - 1]) }
        let empty = cells - full - (partial > 0 && full < cells ? 1 : 0)
        return [Span(filled, Style(color: color)), Span(String(repeating: "·", count: max(0, empty)), .dim)]
    }

    func bytesText(_ download: Download, compact: Bool) -> String {
        func format(_ count: Int64) -> String { compact ? Self.compactBytes(count) : Format.bytes(count) }
        let total = download.totalBytes.map(format) ?? "?"
        if download.state == .completed, let size = download.totalBytes { return format(size) }
        return "\(format(download.bytesOnDisk))/\(total)"
    }

    func resumeText(_ download: Download, compact: Bool) -> String {
        guard let offset = download.resumeOffset else { return "" }
        let times = unicode ? "×" : "x"
        let at = compact ? Self.compactBytes(offset) : Format.bytes(offset)
        return "\(at) \(times)\(download.resumeCount)"
    }

    /// `text` without its start `piece` (counted in scalars, as `ScreenText.prefix` cuts).
    static func dropping(_ piece: String, from text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.dropFirst(piece.unicodeScalars.count)))
    }

    /// Why a waiting row waits (with its countdown, or for disk space) or a failed row failed.
    func reasonText(_ download: Download) -> String? {
        switch download.state {
        case .waiting(let until, let reason):
            let seconds = max(0, until.timeIntervalSince(state.now))
            return "retry in \(Format.duration(seconds)): \(reason)"
        case .waitingForSpace(let reason):
            return reason
        case .paused where download.isPurged:
            return download.lastError
        case .failed(let reason):
            // The failure first: the hook's words follow it when there is room.
            return download.hook.map { "\(reason) · \($0.short)" } ?? reason
        case .completed:
            // Where a running row has its speed: how the download's hook went, in a few words.
            return download.hook?.short
        default:
            return nil
        }
    }

    /// Free space under the floor in the header.
    static let warning = Style(color: .yellow, bold: true, reverse: true)

    static func style(for state: DownloadState) -> Style {
        style(forWord: state.word)
    }

    static func style(forWord word: String) -> Style {
        switch word {
        case "queued": Style(color: .blue)
        case "downloading": Style(color: .cyan, bold: true)
        case "paused": Style(color: .yellow)
        case "waiting": Style(color: .magenta)
        case "completed": Style(color: .green)
        case "failed": Style(color: .red, bold: true)
        default: .dim
        }
    }

    /// `999B`, `1.5K`, `12.3M`, `512G`: at most five cells.
    static func compactBytes(_ count: Int64) -> String {
        if count < 1000 { return "\(max(0, count))B" }
        let units = ["K", "M", "G", "T", "P"]
        var value = Double(count) / 1024
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if value >= 100 { return "\(Int(value.rounded(.down)))\(units[unit])" }
        let tenths = Int64((value * 10).rounded(.down))
        return "\(tenths / 10).\(tenths % 10)\(units[unit])"
    }

    static func compactSpeed(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite, bytesPerSecond >= 1 else { return "-" }
        return compactBytes(Int64(bytesPerSecond)) + "/s"
    }

    // MARK: Details

    func details(rows: Int) -> [Line] {
        guard rows > 0 else { return [] }
        guard let download = state.selectedDownload else {
            return [rule("details"), plain("  nothing selected", .dim)].prefix(rows).map { $0 }
        }
        var lines = [rule("#\(download.id.rawValue) \(clean(download.displayName))")]
        func field(_ label: String, _ value: String, _ style: Style = .plain) {
            var line = LineBuilder(width: width, unicode: unicode)
            line.field(label, 11, .bold)
            line.add(clean(value), style)
            lines.append(line.line)
        }
        field("URL", download.url.redactingPassword)
        let target: String
        switch (download.completedPath, download.destination) {
        case (let path?, _): target = path
        case (nil, .file(let path)): target = path
        case (nil, .directory(let directory)): target = (directory as NSString).appendingPathComponent(download.displayName)
        }
        field(download.completedPath == nil ? "Saving to" : "Saved to", download.state == .completed ? target : "\(target)  (part file \(download.partPath))")
        if let finalURL = download.finalURL, finalURL != download.url {
            field("Final URL", finalURL.redactingPassword)
        }
        var validators: [String] = []
        if let etag = download.etag { validators.append("ETag \(etag)") }
        if let lastModified = download.lastModified { validators.append("Last-Modified \(lastModified)") }
        field("Validators", validators.isEmpty ? "none: a resume is trusted only when the length matches" : validators.joined(separator: unicode ? " · " : ", "))
        var http = download.lastStatus.map { "HTTP \($0)" } ?? "no response yet"
        http += unicode ? " · " : ", "
        http += "\(Format.bytes(download.bytesOnDisk)) of \(download.totalBytes.map(Format.bytes) ?? "unknown size")"
        if download.state == .downloading { http += (unicode ? " · " : ", ") + Format.speed(download.bytesPerSecond) }
        if download.state == .downloading, download.connections > 1 { http += (unicode ? " · " : ", ") + "\(download.connections) connections" }
        if !download.segments.isEmpty { http += (unicode ? " · " : ", ") + "\(download.segments.count) parts" }
        field("Status", "\(download.state.word)  \(http)", Self.style(for: download.state))
        field("Resumes", resumeHistory(download))
        // The reason wraps onto the lines below rather than being cut: a checksum mismatch names two
        // full digests (256 hex digits for sha-512) for a person to compare.
        func wrapped(_ label: String, _ value: String, _ style: Style = .plain) {
            var rest = clean(value)
            let room = max(1, width - 11)
            field(label, ScreenText.prefix(rest, room), style)
            rest = Self.dropping(ScreenText.prefix(rest, room), from: rest)
            while !rest.isEmpty, lines.count < rows {
                let piece = ScreenText.prefix(rest, room)
                guard !piece.isEmpty else { break }
                field("", piece, style)
                rest = Self.dropping(piece, from: rest)
            }
        }
        if case .failed(let reason) = download.state {
            wrapped("Failed", reason, Self.style(for: download.state))
        } else if download.isPurged, let reason = download.lastError {
            wrapped("Purged", reason, Self.style(for: download.state))
        } else if download.state != .completed, let reason = reasonText(download) {
            wrapped("Waiting", reason, Self.style(for: download.state))
        } else {
            wrapped("Last error", download.lastError ?? "none")
        }
        if let hook = download.hook {
            wrapped("Hook", Self.hookDetails(hook), hook.succeeded || hook.isPending ? .plain : Style(color: .red))
        }
        while lines.count < rows { lines.append(Line()) }
        return Array(lines.prefix(rows))
    }

    /// The details pane's words for a hook: which one, how it went, and where its output is.
    static func hookDetails(_ hook: HookRun) -> String {
        let which = "\(hook.event.option) \(hook.summary)"
        switch hook.status {
        case .pending: return which + " (runs again at the next start if haul stops before it ends)"
        case .exited(0, _): return which
        case .exited, .signalled, .timedOut: return which + ", see haul.log"
        case .couldNotStart: return which
        }
    }

    func resumeHistory(_ download: Download) -> String {
        var parts: [String] = []
        if let offset = download.resumeOffset {
            let times = download.resumeCount == 1 ? "1 resume" : "\(download.resumeCount) resumes"
            let check = download.overlapChecked ? "no validator: checked by overlap"
                : download.unverifiedResume ? "unverified: no validator, length matched" : "validator checked"
            parts.append("\(times), latest from \(Format.bytes(offset)) (\(check)); \(Format.bytes(download.bytesSavedByResume)) not fetched again")
        } else {
            parts.append("never resumed")
        }
        if download.restartCount > 0 {
            parts.append("restarted from zero \(download.restartCount)x" + (download.restartReason.map { " (\($0))" } ?? ""))
        }
        return parts.joined(separator: "; ")
    }

    func rule(_ title: String) -> Line {
        var line = LineBuilder(width: width, unicode: unicode)
        let dash = unicode ? "─" : "-"
        line.add(dash + " ", .dim)
        line.add(title, .bold)
        line.add(" ", .dim)
        line.add(String(repeating: dash, count: line.remaining), .dim)
        return line.line
    }

    // MARK: Bottom line and help

    /// The bindings that have a hint word, as many whole ones as fit.
    func hints() -> Line {
        var line = LineBuilder(width: width, unicode: unicode)
        // Quit and help first: on a narrow screen they are the hints that must stay.
        let first: Set<KeyAction> = [.quit, .help]
        let ordered = KeyMap.bindings.filter { first.contains($0.action) }.reversed() + KeyMap.bindings.filter { !first.contains($0.action) }
        for binding in ordered {
            guard let hint = binding.hint else { continue }
            // The first key is enough here (`q`, `space`, `d`); the help lists them all.
            let label = KeyMap.label(binding, unicode: unicode).split(separator: "/").first.map(String.init) ?? binding.label
            let needed = (line.used == 0 ? 0 : 2) + ScreenText.width(label) + 1 + ScreenText.width(hint)
            guard needed <= line.remaining else { break }
            if line.used > 0 { line.space(2) }
            line.add(label, .bold)
            line.add(" " + hint, .dim)
        }
        return line.line
    }

    /// "Add URL: " and the text, scrolled so the cursor stays visible; the cursor's column.
    func prompt(_ prompt: Prompt) -> (Line, Int) {
        var line = LineBuilder(width: width, unicode: unicode)
        let label = "Add URL: "
        line.add(label, .bold)
        let room = max(1, line.remaining - 1)
        let before = clean(String(prompt.text[..<prompt.cursor]))
        let after = clean(String(prompt.text[prompt.cursor...]))
        let shown = ScreenText.suffix(before, room)
        line.add(shown)
        let cursorX = line.used
        line.add(ScreenText.prefix(after, line.remaining))
        return (line.line, min(cursorX, width - 1))
    }

    /// The key table, one binding a line, as many as fit in `rows`.
    func help(rows: Int) -> [Line] {
        guard rows > 0 else { return [] }
        var lines = [rule("keys (any key closes)")]
        let labelWidth = KeyMap.bindings.map { ScreenText.width(KeyMap.label($0, unicode: unicode)) }.max() ?? 0
        for binding in KeyMap.bindings {
            var line = LineBuilder(width: width, unicode: unicode)
            line.space(2)
            line.field(KeyMap.label(binding, unicode: unicode), labelWidth + 2, .bold)
            line.add(binding.summary)
            lines.append(line.line)
        }
        if lines.count > rows {
            lines = Array(lines.prefix(rows - 1)) + [plain((unicode ? "  …" : "  ...") + " taller terminal shows all \(KeyMap.bindings.count) keys", .dim)]
        }
        return Array(lines.prefix(rows))
    }
}
