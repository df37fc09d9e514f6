/// Where each part of the screen goes at the state's size; the reducer (scrolling, paging) and
/// `render` share it so they never disagree.
struct Layout {
    static let minimumWidth = 20
    static let minimumHeight = 5
    /// The details pane's height on a screen that cannot show all of it and a few rows.
    static let detailsHeight = 9

    /// Below 20×5 only "terminal too small" is drawn.
    let tooSmall: Bool
    /// Row 0 is the header, row 1 the column titles, the last row the hint bar.
    let tableTop = 2
    let tableHeight: Int
    let detailsTop: Int
    let detailsHeight: Int
    let bottom: Int

    init(_ state: ViewState) {
        self.init(width: state.width, height: state.height, showDetails: state.showDetails, detailLines: state.showDetails ? state.detailLineCount : 0)
    }

    /// `detailLines`: the lines the details pane has (paths and reasons wrapped), which it takes
    /// when the screen has room for them and three table rows.
    init(width: Int, height: Int, showDetails: Bool, detailLines: Int = Self.detailsHeight) {
        tooSmall = width < Self.minimumWidth || height < Self.minimumHeight
        bottom = max(0, height - 1)
        let available = tooSmall ? 0 : height - 3
        if showDetails {
            // The pane takes its full height only when at least three table rows stay visible;
            // on a short screen it takes the whole area, and the selection still moves under it.
            let wanted = max(2, detailLines)
            if available >= wanted + 3 {
                detailsHeight = wanted
            } else {
                detailsHeight = available >= Self.detailsHeight + 3 ? available - 3 : available
            }
        } else {
            detailsHeight = 0
        }
        tableHeight = available - detailsHeight
        detailsTop = tableTop + tableHeight
    }
}

/// Which table columns fit a width, and how wide each is (0: left out).
struct Columns: Equatable {
    var name = 0
    var state = 11
    var bar = 0
    var percent = 4
    var bytes = 0
    var speed = 0
    var eta = 0
    var resume = 0
    /// Units as `12.3M` instead of `12.3 MiB`.
    var compact = false

    static let gap = 1

    /// The widest set of columns that leaves the name at least its minimum, most useful first.
    static func fitting(_ width: Int) -> Columns {
        let candidates: [(Columns, minimumName: Int)] = [
            (Columns(bar: 20, bytes: 17, speed: 10, eta: 6, resume: 14), 24),
            (Columns(bar: 10, bytes: 17, speed: 10, eta: 6, resume: 14), 20),
            (Columns(bar: 8, bytes: 11, speed: 8, eta: 6, resume: 9, compact: true), 12),
            // Narrower, RESUMED AT goes before SPEED and ETA: how fast and how long matter more.
            (Columns(bar: 6, bytes: 11, speed: 8, eta: 6, compact: true), 12),
            (Columns(bytes: 11, speed: 8, eta: 6, compact: true), 12),
            (Columns(bytes: 11, speed: 8, compact: true), 12),
            (Columns(), 6),
            (Columns(state: 0), 1),
        ]
        for (candidate, minimumName) in candidates {
            var columns = candidate
            let room = width - columns.fixedWidth
            guard room >= minimumName else { continue }
            // Spare room goes to the name up to 48 cells, then to the bar up to 40, then the name.
            columns.name = min(room, max(minimumName, 48))
            var spare = room - columns.name
            if columns.bar > 0 {
                let grow = min(spare, max(0, 40 - columns.bar))
                columns.bar += grow
                spare -= grow
            }
            columns.name += spare
            return columns
        }
        return Columns(name: max(0, width), state: 0, percent: 0)
    }

    /// Everything but the name, gaps included.
    var fixedWidth: Int {
        let others = [state, bar, percent, bytes, speed, eta, resume].filter { $0 > 0 }
        return others.reduce(0, +) + others.count * Self.gap
    }
}
