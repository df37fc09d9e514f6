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
    switch state.overlay {
    case .help:
        for (offset, line) in painter.help(rows: layout.bottom - 1).enumerated() {
            lines[1 + offset] = line
        }
    case .log(let log):
        for (offset, line) in painter.log(log, rows: layout.bottom - 1).enumerated() {
            lines[1 + offset] = line
        }
    default:
        lines[1] = painter.titles(columns)
        let rows = state.rows
        if rows.isEmpty, layout.tableHeight > 0 {
            let empty = state.snapshot.downloads.isEmpty
                ? "  No downloads yet: press a to add URLs, ? for help."
                : "  No row matches: Esc shows all \(state.snapshot.downloads.count)."
            lines[layout.tableTop] = painter.plain(empty, .dim)
        }
        for row in 0..<layout.tableHeight {
            let index = state.scrollTop + row
            guard rows.indices.contains(index) else { break }
            let download = rows[index]
            lines[layout.tableTop + row] = painter.row(download, columns, selected: download.id == state.selected)
        }
        if layout.detailsHeight > 0 {
            for (offset, line) in painter.details(rows: layout.detailsHeight).enumerated() {
                lines[layout.detailsTop + offset] = line
            }
        }
    }
    var cursor: Point?
    // Where the selection is, when the table scrolls: said at the right end of the bottom line.
    let position = layout.tableHeight < state.rows.count && state.overlay == nil ? "row \(state.selectedIndex + 1) of \(state.rows.count)" : nil
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
    case .help, .log:
        // What the keys do here, in place of the table's hints.
        let arrows = state.unicode ? "↑/↓" : "Up/Down"
        lines[layout.bottom] = state.message.map { painter.plain($0.text, $0.isError ? Style(color: .red, bold: true) : .bold) }
            ?? painter.plain("\(arrows) PgUp/PgDn Home/End scroll\(state.unicode ? " · " : ", ")any other key closes", .dim)
    case nil:
        if let message = state.message {
            lines[layout.bottom] = painter.withPosition(position) { room in
                painter.plain(message.text, message.isError ? Style(color: .red, bold: true) : .bold, width: room)
            }
        } else {
            lines[layout.bottom] = painter.withPosition(position) { room in painter.hints(width: room) }
        }
    }
    return Frame(width: width, height: height, lines: lines, cursor: cursor)
}

extension ViewState {
    /// Lines the details pane has for the selected download, its paths and reasons wrapped.
    var detailLineCount: Int {
        Painter(state: self, width: max(0, width)).detailContent().count
    }
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
    func plain(_ text: String, _ style: Style = .plain, fill: Bool = false, width: Int? = nil) -> Line {
        var line = LineBuilder(width: width ?? self.width, unicode: unicode)
        line.add(clean(text), style)
        if fill { line.fill(style) }
        return line.line
    }

    /// The line `body` draws in the room it is given, with `position` right-aligned after it when
    /// there is one (and the screen has room for both).
    func withPosition(_ position: String?, _ body: (Int) -> Line) -> Line {
        guard let position, width >= ScreenText.width(position) + 20 else { return body(width) }
        let tail = ScreenText.width(position)
        var line = body(width - tail - 2)
        var builder = LineBuilder(width: width, unicode: unicode)
        for span in line.spans { builder.add(span.text, span.style) }
        builder.space(width - tail - builder.used)
        builder.add(position, .dim)
        line = builder.line
        return line
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

    static let stateOrder = ["downloading", "finishing", "waiting", "queued", "paused", "failed", "completed", "cancelled"]

    /// How much each header item matters: on a narrow screen the least important go first, so a
    /// failure, a wait, a filter or how many run at once never hide behind totals.
    static func priority(forWord word: String) -> Int {
        switch word {
        case "failed": 2
        case "waiting": 3
        case "downloading", "finishing": 4
        case "queued": 7
        case "paused": 8
        default: 9
        }
    }

    /// "haul" and the total speed, then whole items in a fixed order while they fit: a low disk,
    /// the filter, counts per state, how many run at once, the limit, bytes saved by resuming, free
    /// space. What does not fit is left out least important first, and an ellipsis says so.
    func header() -> Line {
        let snapshot = state.snapshot
        var line = LineBuilder(width: width, unicode: unicode)
        line.add("haul", .bold)
        line.add(unicode ? "  ↓ " : "  down ")
        let speed = Format.speed(snapshot.totalBytesPerSecond)
        line.add(speed == "-" ? "0 B/s" : speed, .bold)
        struct Item {
            var text: String
            var style: Style
            var priority: Int
            /// Counts follow each other with a dot, everything else with two spaces.
            var isCount = false
        }
        var items: [Item] = []
        if let space = snapshot.space, space.isLow {
            // Downloads there wait: said first and in the warning colour; shorter where the whole
            // sentence does not fit.
            let forms = ["disk low: \(Format.bytes(space.free)) free, floor \(Format.bytes(space.floor))", "disk low: \(Format.bytes(space.free)) free", "disk low"]
            let room = line.remaining - 2
            items.append(Item(text: forms.first { ScreenText.width($0) <= room } ?? "disk low", style: Self.warning, priority: 0))
        }
        if state.isNarrowed {
            var what: [String] = []
            if !state.filter.isEmpty { what.append("filter: \(clean(state.filter))") }
            if let kind = state.kind { what.append("\(kind.rawValue) only") }
            let text = what.joined(separator: ", ") + " (\(state.rows.count) of \(snapshot.downloads.count))"
            items.append(Item(text: ScreenText.fit(text, max(1, line.remaining - 4), unicode: unicode), style: Style(color: .cyan, bold: true, reverse: true), priority: 1))
        }
        let countsByState = snapshot.countsByState
        for word in Self.stateOrder {
            guard let count = countsByState[word], count > 0 else { continue }
            items.append(Item(text: "\(count) \(word)", style: Self.style(forWord: word), priority: Self.priority(forWord: word), isCount: true))
        }
        if snapshot.downloads.isEmpty { items.append(Item(text: "empty queue", style: .plain, priority: 4)) }
        items.append(Item(text: "\(snapshot.maxActive) at once", style: .dim, priority: 5))
        if let limit = snapshot.limit { items.append(Item(text: "limit \(Format.speed(Double(limit)))", style: Style(color: .yellow), priority: 6)) }
        let saved = snapshot.totalBytesSavedByResume
        if saved > 0 { items.append(Item(text: "resumes saved \(Format.bytes(saved))", style: .plain, priority: 10)) }
        if let space = snapshot.space, !space.isLow { items.append(Item(text: "\(Format.bytes(space.free)) free", style: .plain, priority: 11)) }

        func separators(_ kept: [Item]) -> [String] {
            kept.indices.map { index in index > 0 && kept[index].isCount && kept[index - 1].isCount ? (unicode ? " · " : ", ") : "  " }
        }
        func cells(_ kept: [Item]) -> Int {
            zip(kept, separators(kept)).reduce(0) { $0 + ScreenText.width($1.1) + ScreenText.width($1.0.text) }
        }
        var kept = items
        // Leave out the least important (the later of equals) until the rest and the ellipsis fit.
        while !kept.isEmpty, cells(kept) + (kept.count < items.count ? 2 : 0) > line.remaining {
            let worst = kept.indices.max { kept[$0].priority < kept[$1].priority || (kept[$0].priority == kept[$1].priority && $0 < $1) }
            guard let worst else { break }
            kept.remove(at: worst)
        }
        for (item, separator) in zip(kept, separators(kept)) {
            line.add(separator)
            line.add(item.text, item.style)
        }
        if kept.count < items.count, line.remaining >= 2 { line.add(unicode ? " …" : " ~", .dim) }
        return line.line
    }

    // MARK: Table

    func titles(_ columns: Columns) -> Line {
        var line = LineBuilder(width: width, unicode: unicode)
        let style = Style(bold: true, underline: false)
        let sorting = state.sorting
        // The sorted column says so, and which way (▼ largest first).
        func title(_ text: String, _ key: SortKey) -> String {
            guard sorting.key == key else { return text }
            return text + (sorting.descending ? (unicode ? "▼" : "v") : (unicode ? "▲" : "^"))
        }
        line.field(title("NAME", .name), columns.name, style)
        if columns.state > 0 { line.space(); line.field(title("STATE", .state), columns.state, style) }
        let progressWidth = columns.bar + columns.percent + (columns.bar > 0 && columns.percent > 0 ? 1 : 0)
        if progressWidth > 0 { line.space(); line.field(title(columns.bar > 0 ? "PROGRESS" : "DONE", .progress), progressWidth, style) }
        if columns.bytes > 0 { line.space(); line.field(title("BYTES", .size), columns.bytes, style, right: true) }
        if columns.speed > 0 { line.space(); line.field(title("SPEED", .speed), columns.speed, style, right: true) }
        if columns.eta > 0 { line.space(); line.field(title("ETA", .eta), columns.eta, style, right: true) }
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
        line.field(ScreenText.fitMiddle(clean(download.displayName), columns.name, unicode: unicode), columns.name, styled(selected ? .bold : .plain))
        if columns.state > 0 {
            line.space(1, styled(.plain))
            // One row per file: a segmented download says how many connections fetch its parts.
            let word = download.state == .downloading && download.connections > 1 ? "\(download.connections) conns" : download.shownWord
            line.field(word, columns.state, styled(Self.style(forWord: download.shownWord)))
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
            let seconds = until.timeIntervalSince(state.now)
            // Its time came, and every slot is taken: it starts at the next free one.
            guard seconds > 0 else { return "retry due: waits for a free slot (\(reason))" }
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
        case "finishing": Style(color: .cyan)
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

    /// The details pane in `rows` lines: its content, cut or padded.
    func details(rows: Int) -> [Line] {
        guard rows > 0 else { return [] }
        var lines = Array(detailContent().prefix(rows))
        while lines.count < rows { lines.append(Line()) }
        return lines
    }

    /// Every line of the details pane: paths, URLs and reasons wrapped onto the lines below them
    /// rather than cut (a person must be able to read a path whole, and compare two digests).
    func detailContent() -> [Line] {
        guard width > 0 else { return [] }
        guard let download = state.selectedDownload else {
            return [rule("details"), plain("  nothing selected", .dim)]
        }
        var lines = [rule("#\(download.id.rawValue) \(clean(download.displayName))")]
        let room = max(1, width - 11)
        func field(_ label: String, _ value: String, _ style: Style = .plain) {
            var line = LineBuilder(width: width, unicode: unicode)
            line.field(label, 11, .bold)
            line.add(value, style)
            lines.append(line.line)
        }
        /// `value` on as many lines as it needs, up to `most`; the last one ends in an ellipsis
        /// when even they are not enough.
        /// Prose breaks after a space where it can; paths and URLs break anywhere (a space in a path
        /// must stay visible where it is).
        func wrapped(_ label: String, _ value: String, _ style: Style = .plain, most: Int = 6, words: Bool = true) {
            var rest = clean(value)
            var label = label
            for count in 1...max(1, most) {
                var piece = ScreenText.prefix(rest, room)
                if words, piece.unicodeScalars.count < rest.unicodeScalars.count,
                   let space = piece.unicodeScalars.lastIndex(of: " "),
                   piece.unicodeScalars.distance(from: piece.unicodeScalars.startIndex, to: space) >= room / 2 {
                    piece = String(piece.unicodeScalars[...space])
                }
                let after = Self.dropping(piece, from: rest)
                if count == most, !after.isEmpty {
                    field(label, ScreenText.fit(rest, room, unicode: unicode), style)
                    return
                }
                field(label, piece, style)
                rest = after
                label = ""
                if rest.isEmpty || piece.isEmpty { return }
            }
        }
        wrapped("URL", download.url.redactingPassword, most: 4, words: false)
        if let finalURL = download.finalURL, finalURL != download.url {
            wrapped("Final URL", finalURL.redactingPassword, most: 4, words: false)
        }
        wrapped(download.completedPath == nil ? "Saving to" : "Saved to", download.targetPath, words: false)
        if download.state != .completed {
            wrapped("Part file", download.partPath, .dim, most: 3, words: false)
        }
        var validators: [String] = []
        if let etag = download.etag { validators.append("ETag \(etag)") }
        if let lastModified = download.lastModified { validators.append("Last-Modified \(lastModified)") }
        wrapped("Validators", validators.isEmpty ? "none: a resume is trusted only when the length matches" : validators.joined(separator: unicode ? " · " : ", "), most: 3)
        let dot = unicode ? " · " : ", "
        var http = if let status = download.lastStatus {
            "HTTP \(status)" + dot
        } else {
            // Only while one may still come: an answer the download could not use (a 404, a 503)
            // is not kept as its status, and the failure or the wait below names it.
            switch download.state {
            case .queued, .downloading, .paused: "no response yet" + dot
            case .failed, .waiting, .waitingForSpace, .completed, .cancelled: ""
            }
        }
        http += "\(Format.bytes(download.bytesOnDisk)) of \(download.totalBytes.map(Format.bytes) ?? "unknown size")"
        if download.state == .downloading { http += dot + Format.speed(download.bytesPerSecond) }
        if download.state == .downloading, download.connections > 1 { http += dot + "\(download.connections) connections" }
        if !download.segments.isEmpty { http += dot + "\(download.segments.count) parts" }
        field("Status", clean("\(download.state.word)  \(http)"), Self.style(for: download.state))
        wrapped("Limit", limitWords(download), most: 2)
        wrapped("Resumes", resumeHistory(download), most: 3)
        // A checksum mismatch names two full digests (256 hex digits for sha-512) for a person to compare.
        if case .failed(let reason) = download.state {
            wrapped("Failed", reason, Self.style(for: download.state), most: 17)
        } else if download.isPurged, let reason = download.lastError {
            wrapped("Purged", reason, Self.style(for: download.state), most: 17)
        } else if download.state != .completed, let reason = reasonText(download) {
            wrapped("Waiting", reason, Self.style(for: download.state), most: 17)
        } else {
            wrapped("Last error", download.lastError ?? "none", most: 17)
        }
        if let hook = download.hook {
            wrapped("Hook", Self.hookDetails(hook), hook.succeeded || hook.isPending ? .plain : Style(color: .red), most: 4)
        }
        return lines
    }

    /// The details pane's words for a download's speed limits: its own and the queue's.
    func limitWords(_ download: Download) -> String {
        let own = download.limit.map { "\(Format.speed(Double($0))) for this download" } ?? "none of its own (l sets one)"
        let all = state.snapshot.limit.map { "\(Format.speed(Double($0))) for all (L)" } ?? "none for all (L sets one)"
        return own + (unicode ? " · " : ", ") + all
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
            let check = download.overlapChecked ? "\(download.overlapGround): checked by overlap"
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

    /// The bindings that have a hint word, as many whole ones as fit in `width` cells.
    func hints(width: Int) -> Line {
        var line = LineBuilder(width: width, unicode: unicode)
        for action in KeyMap.hinted {
            // The demo cannot detach: its key is not offered (pressing it says why).
            if action == .detach, state.cannotDetach != nil { continue }
            guard let binding = KeyMap.bindings.first(where: { $0.action == action }), let hint = binding.hint else { continue }
            // The first key is enough here (`q`, `space`, `d`); the help lists them all.
            let label = KeyMap.firstLabel(binding, unicode: unicode)
            let needed = (line.used == 0 ? 0 : 2) + ScreenText.width(label) + 1 + ScreenText.width(hint)
            guard needed <= line.remaining else { break }
            if line.used > 0 { line.space(2) }
            line.add(label, .bold)
            line.add(" " + hint, .dim)
        }
        return line.line
    }

    /// The prompt's label and its text, scrolled so the cursor stays visible; the cursor's column.
    func prompt(_ prompt: Prompt) -> (Line, Int) {
        var line = LineBuilder(width: width, unicode: unicode)
        let label: String
        switch prompt.purpose {
        case .add: label = "Add URL: "
        case .find: label = "Find: "
        case .limitAll: label = "Limit all downloads to (2M, 500K, 0 for none): "
        case .limitDownload(let id):
            let name = state.snapshot[id].map { clean($0.displayName) } ?? "#\(id.rawValue)"
            let words = " to (2M, 500K, 0 for none): "
            // The name is what gets cut; the typed text keeps at least a third of the line.
            let room = max(4, width * 2 / 3 - ScreenText.width(words) - 6)
            label = "Limit " + ScreenText.fit(name, room, unicode: unicode) + words
        }
        line.add(ScreenText.fit(label, max(1, width * 2 / 3), unicode: unicode), .bold)
        let room = max(1, line.remaining - 1)
        let before = clean(String(prompt.text[..<prompt.cursor]))
        let after = clean(String(prompt.text[prompt.cursor...]))
        let shown = ScreenText.suffix(before, room)
        line.add(shown)
        let cursorX = line.used
        line.add(ScreenText.prefix(after, line.remaining))
        return (line.line, min(cursorX, width - 1))
    }

    /// The key table, one binding a line, from `state.helpTop` on, in `rows` lines (the title
    /// says which lines show and how to scroll).
    func help(rows: Int) -> [Line] {
        guard rows > 0 else { return [] }
        let labelWidth = KeyMap.bindings.map { ScreenText.width(KeyMap.label($0, unicode: unicode)) }.max() ?? 0
        var entries = KeyMap.bindings.map { (KeyMap.label($0, unicode: unicode), $0.summary) }
        entries.append(HelpText.mouse)
        let shown = max(0, rows - 1)
        let top = min(max(0, state.helpTop), max(0, entries.count - shown))
        let title = shown >= entries.count ? "keys" : "keys \(top + 1)-\(min(entries.count, top + shown)) of \(entries.count)"
        var lines = [rule(title)]
        for (label, summary) in entries.dropFirst(top).prefix(shown) {
            var line = LineBuilder(width: width, unicode: unicode)
            line.space(2)
            line.field(label, labelWidth + 2, .bold)
            line.add(summary)
            lines.append(line.line)
        }
        return lines
    }

    /// A download's log, or the whole queue's recent events, in `rows` lines: the newest at the
    /// bottom unless scrolled.
    func log(_ log: LogView, rows: Int) -> [Line] {
        guard rows > 0 else { return [] }
        let whose = log.download.map { id in "log of #\(id.rawValue) " + (state.snapshot[id].map { clean($0.displayName) } ?? "") } ?? "recent events"
        var lines = [rule(whose)]
        if let error = log.error {
            lines.append(plain("  cannot read the log: \(error)", Style(color: .red, bold: true)))
        }
        guard let entries = log.entries else {
            if log.error == nil { lines.append(plain(unicode ? "  reading…" : "  reading...", .dim)) }
            return Array(lines.prefix(rows))
        }
        if entries.isEmpty { lines.append(plain("  nothing recorded yet", .dim)) }
        let shown = max(0, rows - lines.count)
        let top = min(max(0, log.top ?? Int.max / 2), max(0, entries.count - shown))
        let calendar = { var calendar = Calendar(identifier: .gregorian); calendar.timeZone = state.timeZone; return calendar }()
        for entry in entries.dropFirst(top).prefix(shown) {
            var line = LineBuilder(width: width, unicode: unicode)
            let parts = calendar.dateComponents([.month, .day, .hour, .minute, .second], from: entry.time)
            func two(_ value: Int?) -> String { let value = value ?? 0; return value < 10 ? "0\(value)" : "\(value)" }
            let sameDay = calendar.isDate(entry.time, inSameDayAs: state.now)
            let time = (sameDay ? "" : "\(two(parts.month))-\(two(parts.day)) ") + "\(two(parts.hour)):\(two(parts.minute)):\(two(parts.second))"
            line.add(time + " ", .dim)
            line.field(entry.kind.rawValue, 10, Self.style(forKind: entry.kind))
            if log.download == nil {
                let name = state.snapshot[entry.download].map { clean($0.displayName) } ?? "#\(entry.download.rawValue)"
                line.add(ScreenText.fit(name, max(8, width / 4), unicode: unicode) + " ", .bold)
            }
            line.add(clean(entry.text))
            lines.append(line.line)
        }
        return lines
    }

    static func style(forKind kind: HistoryEntry.Kind) -> Style {
        switch kind {
        case .error, .failed: Style(color: .red, bold: true)
        case .restarted: Style(color: .yellow, bold: true)
        case .waiting: Style(color: .magenta)
        case .completed: Style(color: .green)
        case .resumed, .response, .started: Style(color: .cyan)
        case .paused: Style(color: .yellow)
        case .added, .cancelled, .setting: .dim
        }
    }
}
