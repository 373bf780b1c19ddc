import IfmeterCore

import IfmeterSystem

/// Draws the live view: a pure function from the model and the terminal's
/// size to screen lines, each exactly `width` columns wide (escape codes
/// aside), `height` lines in all.
package struct LiveRenderer: Sendable {
    /// ANSI colours; off for NO_COLOR and dumb terminals.
    package var color: Bool
    /// ASCII stand-ins for every drawn character (a locale without UTF-8).
    package var ascii: Bool

    package init(color: Bool, ascii: Bool = false) {
        self.color = color
        self.ascii = ascii
    }

    package static let minimumWidth = 40
    package static let minimumHeight = 8

    package func render(_ model: LiveModel, width: Int, height: Int) -> [String] {
        let width = max(width, 1), height = max(height, 1)
        guard width >= Self.minimumWidth, height >= Self.minimumHeight else {
            return tooSmall(width: width, height: height)
        }
        if model.helpOpen { return help(model, width: width, height: height) }
        var lines: [Line] = []
        var layout = Layout(width: width, model: model)
        let rows = model.visibleSlots()
        // One scale for every row's bars (the default): the highest rate
        // any row's bars show.
        if model.scale != .perRow, layout.sparkWidth > 0 {
            var top = 0.0
            for slot in rows {
                let row = model.row(at: slot)
                top = max(top, row.rxHistory.peak(last: layout.rxSparkWidth), row.txHistory.peak(last: layout.txSparkWidth))
            }
            layout.sharedTop = top
        }
        lines.append(header(model, width: width, sharedTop: layout.sparkWidth > 0 ? layout.sharedTop : nil))
        lines.append(layout.titles(style: self, packets: model.packets))
        // The rows are ranked already: the top row is the selection while
        // it follows the top.
        let selectedSlot = model.selectionFollowsTop ? rows.first : model.selected.flatMap(model.slot(of:))
        let selectedKey = selectedSlot.map { model.row(at: $0).key }
        let summary = summaryLines(model, width: width) + quotaLines(model, width: width, height: height)
        var detail: [Line] = []
        if model.detailOpen, let key = selectedKey, let selected = model.row(for: key) {
            detail = detailLines(selected, model: model, width: width, height: height)
        }
        // Rows get what the fixed parts leave (at least one).
        let fixed = lines.count + summary.count + Self.footerHeight + detail.count + (detail.isEmpty ? 0 : 1)
        var room = height - fixed
        if room < 1 {
            detail = Array(detail.prefix(max(0, detail.count + room - 1)))
            room = 1
        }
        let selectedIndex = rows.firstIndex { $0 == selectedSlot } ?? 0
        var first = min(max(0, model.scroll), max(0, rows.count - room))
        if selectedIndex < first { first = selectedIndex }
        if selectedIndex >= first + room { first = selectedIndex - room + 1 }
        // The marks the rows shown carry: the legend explains those only.
        var marks = MarksShown()
        for slot in rows.dropFirst(first).prefix(room) {
            let row = model.row(at: slot)
            if row.present, row.rxRate != nil || row.txRate != nil { marks.add(row.rateQuality) }
            if layout.showTotals > 0 { marks.add(row.quality) }
            lines.append(layout.row(row, model: model, selected: slot == selectedSlot, style: self))
        }
        if model.detailOpen, let key = selectedKey, let selected = model.row(for: key) { marks.add(selected.quality) }
        if let route = model.route, route.outsideRx != nil, route.outsideTx != nil {
            if route.uncertain { marks.uncertain = true } else { marks.derived = true }
        }
        let footer = footerLines(model, width: width, marks: marks)
        if rows.isEmpty {
            lines.append(
                Line(width: width, ascii: ascii).text(
                    model.isEmpty ? "  waiting for the first interval…" : "  no interface matches the filter or kinds shown", dim)
            )
        }
        while lines.count < height - Self.footerHeight - detail.count - (detail.isEmpty ? 0 : 1) - summary.count {
            lines.append(Line(width: width, ascii: ascii))
        }
        lines += summary
        if !detail.isEmpty {
            // The rule above the detail says what its graphs span.
            let resolution = model.span.resolution(interval: model.interval)
            let rule =
                "── graphs: \(Self.spanText(model, columns: Self.graphWidth(width), resolution: resolution)) · t: "
                + (model.span == .day ? "back to recent " : "longer ")
            lines.append(Line(width: width, ascii: ascii).text(rule + String(repeating: "─", count: max(0, width - rule.unicodeScalars.count)), dim))
            lines += detail
        }
        lines += footer
        return lines.prefix(height).map { $0.finish() }
    }

    static let footerHeight = 2

    /// How many rows the list shows at this size (what PgDn and PgUp move).
    package func listRows(_ model: LiveModel, width: Int, height: Int) -> Int {
        guard width >= Self.minimumWidth, height >= Self.minimumHeight, !model.helpOpen else { return 1 }
        // The detail's height, without drawing it: a title, speed,
        // addresses and counters; two graphs with a heading each; the time
        // axis and the events; and the rule above.
        var detail = 0
        if model.detailOpen, let key = model.selected, model.row(for: key) != nil {
            detail = 4 + 2 * (1 + Self.graphHeight(height)) + 2 + 1
        }
        let summary = summaryLines(model, width: width).count + quotaLines(model, width: width, height: height).count
        return max(1, height - 2 - summary - Self.footerHeight - detail)
    }

    // MARK: parts

    func header(_ model: LiveModel, width: Int, sharedTop: Double? = nil) -> Line {
        var line = Line(width: width, ascii: ascii)
        line = line.text("ifmeter", bold)
        if width >= 60 {
            line = line.text(" · \(model.host) · \(model.source) · every \(Units.duration(model.interval)) · by \(model.sort.rawValue)")
        } else {
            line = line.text(" \(model.source) \(Units.duration(model.interval)) by \(model.sort.rawValue)")
        }
        if model.bits { line = line.text(" · bits") }
        if model.packets { line = line.text(" · packets") }
        if !model.filter.isEmpty { line = line.text(" · filter \(model.filter)") }
        if !model.hiddenKinds.isEmpty {
            line = line.text(" · hiding " + InterfaceKind.allCases.filter { model.hiddenKinds.contains($0) }.map(\.rawValue).joined(separator: ","))
        }
        if model.paused { line = line.text(" · PAUSED", warning) }
        // Which scale the bars are on, said on screen.
        if let sharedTop {
            if model.scale != .perRow {
                let scale = model.scale == .log ? "one log scale" : "one scale"
                line = line.text(" · bars: \(scale), top \(Units.rate(bytesPerSecond: sharedTop, bits: model.bits))")
            } else {
                line = line.text(" · bars: each row its own scale", warning)
            }
        }
        return line
    }

    /// Physical traffic, and tunnel traffic apart: it rides inside the
    /// physical links, so adding the two would count it twice.
    func summaryLines(_ model: LiveModel, width: Int) -> [Line] {
        let summary = model.summary
        let (physicalRx, physicalTx, tunnelRx, tunnelTx) = (summary.physicalRx, summary.physicalTx, summary.tunnelRx, summary.tunnelTx)
        let r = { (v: Double) in Units.rate(bytesPerSecond: v, bits: model.bits) }
        let physical = Line(width: width, ascii: ascii).text("physical ", bold).text("↓\(r(physicalRx)) ↑\(r(physicalTx))")
        var routeLines: [Line] = []
        if let route = model.route { routeLines.append(self.routeLine(route, width: width, rate: r)) }
        if width >= 72 {
            var line = physical.text("  tunnel ", bold).text("↓\(r(tunnelRx)) ↑\(r(tunnelTx))")
            if width >= 100 { line = line.text(" " + TrafficSummary.wideNote, dim) }
            return [line] + routeLines
        }
        return [
            physical,
            Line(width: width, ascii: ascii).text("tunnel   ", bold).text("↓\(r(tunnelRx)) ↑\(r(tunnelTx))").text(
                " " + TrafficSummary.narrowNote, dim),
        ]
            + routeLines
    }

    /// `route 8.8.8.8 → tun0 (tunnel)  outside ↓.. ↑..`: the kernel's routing
    /// decision for the probe, and what went around the tunnels.
    func routeLine(_ route: RouteSummary, width: Int, rate: (Double) -> String) -> Line {
        var line = Line(width: width, ascii: ascii).text("route ", bold)
        if let interface = route.interface {
            let alarm = route.tunnels && !route.viaTunnel
            line = line.text("\(route.probe) → ").text(TerminalText.escaped(interface), alarm ? warning : bold)
                .text(route.viaTunnel ? " (tunnel)" : route.tunnels ? " (outside the tunnels)" : " (no tunnel here)", alarm ? warning : dim)
        } else {
            line = line.text("\(route.probe): no route", dim)
        }
        if let rx = route.outsideRx, let tx = route.outsideTx {
            let mark = route.uncertain ? "?" : "≈"
            line = line.text("  outside ", bold).text("\(mark)↓\(rate(rx)) \(mark)↑\(rate(tx))")
            if width >= 100 { line = line.text(" around the tunnels: local traffic, tunnel control, leaks", dim) }
        } else if route.underlayUnknown {
            line = line.text(
                width >= 100 ? "  outside: unknown (no underlay: no default route outside the tunnels; give --underlay)" : "  outside: unknown", dim)
        }
        return line
    }

    func footerLines(_ model: LiveModel, width: Int, marks: MarksShown = MarksShown()) -> [Line] {
        var status = Line(width: width, ascii: ascii)
        if model.editingFilter {
            status = status.text("filter: ", bold).text(model.filterDraft + "▏").text("  Enter apply · Esc cancel", dim)
        } else if let note = model.note, model.now - note.time < 5 {
            status = status.text(note.text, warning)
        } else {
            status = status.text(
                width >= 140
                    ? "q quit · ↑↓ jk PgUp PgDn Home End · Enter detail · t span · a scale · s sort · b units · f filter · 1-7 kinds · p pause · r zero · ? help"
                    : width >= 110
                        ? "q quit · jk PgDn/PgUp · Enter detail · t span · a scale · s sort · b units · f filter · 1-7 kinds · p · r · ?"
                        : width >= 80
                            ? "q quit · jk select · Enter detail · t span · a scale · s sort · b · f · 1-7 · p · r · ?"
                            : "q jk Enter t a s b f 1-7 p r, ? help", dim)
        }
        return [status, Line(width: width, ascii: ascii).text(Self.caveat(fitting: width, marks: marks), dim)]
    }

    /// What the figures are, and the marks on screen (only those): an
    /// exact figure carries no mark.
    static func caveat(fitting width: Int, marks: MarksShown) -> String {
        Caveat.line(
            fitting: width, lowerBound: marks.lowerBound, wrapCorrected: marks.wrapCorrected, derived: marks.derived,
            uncertain: marks.uncertain)
    }

    func detailLines(_ row: LiveInterface, model: LiveModel, width: Int, height: Int) -> [Line] {
        let graphHeight = Self.graphHeight(height)
        var lines: [Line] = []
        var title = Line(width: width, ascii: ascii).text(model.shownName(row.key), bold).text(" ").text(row.kind.rawValue, kindStyle(row.kind))
        title = title.text("  \(row.classification.evidence) · \(row.width.rawValue)-bit counters")
        if let index = row.index { title = title.text(" · index \(index)") }
        title = title.text(" · ").text(row.operstate ?? "state unknown", row.operstate == "up" || row.operstate == "unknown" ? plain : warning)
        if let mtu = row.mtu { title = title.text(" · MTU \(mtu)") }
        lines.append(title)
        var speed = "speed: "
        if let ceiling = row.speedCeilingBps {
            speed += Units.rate(bytesPerSecond: Double(ceiling) / 8, bits: true) + " (a ceiling for wrap checks)"
        } else if let reported = row.reportedSpeedBps {
            speed += Units.rate(bytesPerSecond: Double(reported) / 8, bits: true) + " reported, no limit (not hardware)"
        } else {
            speed += "unknown"
        }
        lines.append(Line(width: width, ascii: ascii).text(speed))
        lines.append(addressLine(row, model: model, width: width))
        lines.append(countersLine(row, width: width))
        let r = { (v: Double) in Units.rate(bytesPerSecond: v, bits: model.bits) }
        // y labels (6) and the axis (1) on the left; the graph takes the rest.
        let labelWidth = Self.axisLabelWidth
        let graphWidth = Self.graphWidth(width)
        let resolution = model.span.resolution(interval: model.interval)
        for tx in [false, true] {
            let values = row.history(model.span, tx: tx, last: graphWidth)
            var peak = 0.0, sum = 0.0, known = 0
            for v in values where !v.isNaN {
                peak = max(peak, v)
                sum += v
                known += 1
            }
            let axis = Axis(peak: peak, bits: model.bits)
            let now = tx ? row.txRate : row.rxRate
            let packets = row.intervalRate(tx ? .txPackets : .rxPackets)
            var head = Line(width: width, ascii: ascii).text(tx ? "tx" : "rx", bold)
            head = head.text("  now \(now.map { row.rateQuality.liveMark + r($0) } ?? "-")")
            if let packets { head = head.text(" (\(Units.perSecond(packets).dropLast(2)) pkt/s)") }
            head = head.text(" · peak \(r(peak)) · avg \(r(known > 0 ? sum / Double(known) : 0))")
            head = head.text(" · axis \(axis.unit)", dim)
            lines.append(head)
            let graph = Graph.blocks(values, width: graphWidth, height: graphHeight, top: axis.top)
            for (n, text) in graph.enumerated() {
                let label = axis.label(row: n, of: graphHeight)
                var line = Line(width: width, ascii: ascii).text(padLeft(label ?? "", labelWidth - 1) + (label == nil ? " │" : " ┤"), dim)
                line = line.text(text, tx ? txStyle : rxStyle)
                lines.append(line)
            }
        }
        let covered = min(graphWidth, model.span.capacity)
        lines.append(
            Line(width: width, ascii: ascii).text(
                Self.timeAxis(columns: graphWidth, resolution: resolution, labelWidth: labelWidth + 1, covered: covered), dim))
        let events = row.recentEvents.suffix(3).reversed()
        var eventLine = Line(width: width, ascii: ascii).text("events: ", bold)
        if events.isEmpty {
            eventLine = eventLine.text("none", dim)
        } else {
            eventLine = eventLine.text(events.map { "\(Self.clock($0.time)) \($0.text)" }.joined(separator: " · "))
        }
        lines.append(eventLine)
        return lines
    }

    static let axisLabelWidth = 7

    /// Rows per detail graph: six (as bmon) when the terminal has 40 lines.
    static func graphHeight(_ height: Int) -> Int { height >= 40 ? 6 : height >= 34 ? 4 : (height >= 26 ? 3 : 2) }

    /// The detail graphs' columns: the rate axis takes the left.
    static func graphWidth(_ width: Int) -> Int { max(10, width - axisLabelWidth - 1) }

    /// `MAC … · IPv4 … · IPv6 …`, from what the driver read for this row.
    func addressLine(_ row: LiveInterface, model: LiveModel, width: Int) -> Line {
        var line = Line(width: width, ascii: ascii)
        guard let addresses = model.addresses, addresses.key == row.key else {
            return line.text("addresses: ", bold).text("reading…", dim)
        }
        if let failure = addresses.failure { return line.text("addresses: ", bold).text(failure, warning) }
        line = line.text("MAC ", bold).text(addresses.mac ?? "none")
        line = line.text(" · IPv4 ", bold).text(addresses.ipv4.isEmpty ? "none" : addresses.ipv4.joined(separator: ", "))
        line = line.text(" · IPv6 ", bold).text(addresses.ipv6.isEmpty ? "none" : addresses.ipv6.joined(separator: ", "))
        return line
    }

    /// Packet rates, and errors and drops: totals since start, and the last
    /// interval's when there were any.
    func countersLine(_ row: LiveInterface, width: Int) -> Line {
        let mark = row.quality.liveMark
        func total(_ key: CounterKey) -> String { row.totals.has(key) ? mark + Units.grouped(row.totals.value(key)) : "-" }
        var line = Line(width: width, ascii: ascii).text("packets ", bold)
        let rxp = row.intervalRate(.rxPackets), txp = row.intervalRate(.txPackets)
        line = line.text("↓\(rxp.map(Units.perSecond) ?? "-") ↑\(txp.map(Units.perSecond) ?? "-")")
        for (name, rx, tx) in [("errors", CounterKey.rxErrors, CounterKey.txErrors), ("drops", .rxDropped, .txDropped)] {
            let any = (row.totals.has(rx) && row.totals.value(rx) > 0) || (row.totals.has(tx) && row.totals.value(tx) > 0)
            line = line.text(" · \(name) ", bold).text("↓\(total(rx)) ↑\(total(tx))", any ? warning : plain)
            let recent = (row.intervalRate(rx) ?? 0) + (row.intervalRate(tx) ?? 0)
            if recent > 0 { line = line.text(" (now \(Units.perSecond(recent)))", warning) }
        }
        return line.text(" since start", dim)
    }

    /// `last 2m in 1 s steps`: what the graph's columns cover (a narrow
    /// graph shows less than the span keeps).
    static func spanText(_ model: LiveModel, columns: Int, resolution: Double) -> String {
        let shown = Double(min(columns, model.span.capacity)) * resolution
        let whole = columns >= model.span.capacity && model.span != .recent
        return "\(whole ? model.span.title(interval: model.interval) : "last " + shortDuration(shown)) in \(Units.duration(resolution)) steps"
    }

    /// A time axis under a graph `columns` wide whose newest column is
    /// `now`: `-30s`, `-1m`, ... right-aligned to their columns, and none
    /// past the `covered` newest columns, the ones the span holds data for
    /// (a graph wider than the span's history is blank on the left).
    static func timeAxis(columns: Int, resolution: Double, labelWidth: Int, covered: Int? = nil) -> String {
        let oldest = Double(covered ?? columns) * resolution
        let ticks: [Double] = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 14400, 21600, 43200, 86400]
        let tick = ticks.first { $0 / resolution >= 18 } ?? 86400
        var cells = [Character](repeating: " ", count: labelWidth + columns)
        let nowLabel = Array("now")
        for (k, c) in nowLabel.enumerated() { cells[cells.count - nowLabel.count + k] = c }
        var age = tick
        while age <= oldest + 1e-9 {
            let column = columns - 1 - Int((age / resolution).rounded())
            if column < 0 { break }
            let label = Array("-" + shortDuration(age))
            let end = labelWidth + column
            let begin = end - label.count + 1
            // Keep clear of the label to the right (and of `now`).
            if begin >= labelWidth, end + 1 < cells.count - nowLabel.count, cells[begin...(end + 1)].allSatisfy({ $0 == " " }) {
                for (k, c) in label.enumerated() { cells[begin + k] = c }
            }
            age += tick
        }
        return String(cells)
    }

    /// `30s`, `2m`, `1h`, `1h30m`.
    static func shortDuration(_ seconds: Double) -> String {
        // Spans are intervals (at most a year) times columns: never near
        // Int's limits, but no Double is turned into an Int unchecked.
        guard seconds.isFinite, abs(seconds) < 1e15 else { return seconds.isNaN ? "?" : "∞" }
        let s = Int(seconds.rounded())
        if s < 60 { return "\(s)s" }
        if s < 3600 { return s % 60 == 0 ? "\(s / 60)m" : "\(s / 60)m\(s % 60)s" }
        return s % 3600 == 0 ? "\(s / 3600)h" : "\(s / 3600)h\(s % 3600 / 60)m"
    }

    func help(_ model: LiveModel, width: Int, height: Int) -> [String] {
        let text =
            [
                "ifmeter live: keys", "",
                "q, Ctrl-C   quit", "↑ ↓, j k   select an interface",
                "PgUp PgDn  a page up or down;  Home End (g G)  the first or last interface",
                "Enter      open or close its detail (addresses, packets, errors, drops, graphs)",
                "t, Tab     the detail graphs' span: last minutes, last hour, last day",
                "a          row bars: one scale for all, each row its own, or one log scale",
                "b          rates in bytes, bits or packets per second (bars and totals: bytes)",
                "s          sort by rate, total or name (va2 before va19)",
                "f, /       filter names (a glob, or a part of the name)",
                "1..7       show or hide wifi, cellular, tunnel, ethernet, loopback, virtual, other",
                "p          pause the figures (sampling goes on)", "r          zero the totals (their quality starts over)",
                "?          this help", "",
            ] + wordWrap(Self.helpCaveat, width: 72) + [
                "", "Any key closes this help.",
            ]
        var lines = text.prefix(height).map { Line(width: width, ascii: ascii).text($0, $0 == text[0] ? bold : plain).finish() }
        while lines.count < height { lines.append(Line(width: width, ascii: ascii).finish()) }
        return lines
    }

    /// What the figures are and what their marks mean; an exact figure
    /// carries none.
    static let helpCaveat =
        Caveat.sentence
        + " A figure without a mark is an exact reading of the counters; ~ marks one corrected for a 32-bit wrap,"
        + " ≥ a lower bound (traffic was lost to a reset or an unseen recreation). " + TrafficSummary.explanation

    func tooSmall(width: Int, height: Int) -> [String] {
        var lines = [String](repeating: String(repeating: " ", count: width), count: height)
        let message = "ifmeter: needs \(Self.minimumWidth)x\(Self.minimumHeight)"
        lines[0] = String(message.prefix(width)).padding(width)
        return lines
    }

    /// `HH:MM:SS` in UTC of a Unix time.
    package static func clock(_ time: Double) -> String {
        let seconds = Int(time.rounded(.down)) % 86400
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(seconds / 3600)):\(two(seconds % 3600 / 60)):\(two(seconds % 60))"
    }

    // MARK: styles

    struct Style: Sendable {
        var codes: String
    }

    var plain: Style { Style(codes: "") }
    var bold: Style { Style(codes: color ? "1" : "") }
    var dim: Style { Style(codes: color ? "2" : "") }
    var warning: Style { Style(codes: color ? "1;33" : "") }
    var danger: Style { Style(codes: color ? "31" : "") }
    var rxStyle: Style { Style(codes: color ? "32" : "") }
    var txStyle: Style { Style(codes: color ? "34" : "") }
    var inverse: Style { Style(codes: color ? "7" : "") }

    func kindStyle(_ kind: InterfaceKind) -> Style {
        guard color else { return plain }
        switch kind {
        case .wifi: return Style(codes: "36")
        case .cellular: return Style(codes: "35")
        case .tunnel: return Style(codes: "33")
        case .ethernet: return Style(codes: "32")
        case .loopback: return Style(codes: "2")
        case .virtual: return Style(codes: "34")
        case .other: return plain
        }
    }

    func qualityStyle(_ quality: Quality) -> Style {
        switch quality {
        case .exact: plain
        case .wrapCorrected: warning
        case .lowerBound: danger
        }
    }
}

/// The columns that fit a width: the sparkline goes first, then the totals.
struct Layout {
    var nameWidth: Int
    var kindWidth: Int
    var shortKinds: Bool
    var rateWidth: Int
    var sparkWidth: Int
    var totalWidth: Int
    var showTotals: Int // 0, 1 (rx) or 2 (rx and tx)
    let width: Int
    /// The top of the shared scale, when the rows share one.
    var sharedTop = 0.0
    /// The rx and tx bars, a space between them.
    var rxSparkWidth: Int { (sparkWidth - 1) / 2 }
    var txSparkWidth: Int { sparkWidth - 1 - rxSparkWidth }

    init(width: Int, model: LiveModel) {
        self.width = width
        var longest = model.isEmpty ? 4 : model.longestName
        for key in model.aliases.keys { longest = max(longest, model.shownName(key).unicodeScalars.count) }
        nameWidth = min(max(longest, 6), width >= 100 ? 18 : 12)
        shortKinds = width < 70
        kindWidth = shortKinds ? 4 : 8
        rateWidth = model.bits ? 12 : 11
        totalWidth = 11
        // marker(1) name kind rx tx, spaces between.
        var used = 2 + nameWidth + 1 + kindWidth + 1 + rateWidth + 1 + rateWidth
        showTotals = 0
        for _ in 0..<2 where used + 1 + totalWidth <= width {
            showTotals += 1
            used += 1 + totalWidth
        }
        let spare = width - used - 1
        sparkWidth = spare >= 9 ? min(spare, 41) : 0
    }

    static func shortKind(_ kind: InterfaceKind) -> String {
        switch kind {
        case .wifi: "wifi"
        case .cellular: "cell"
        case .tunnel: "tun"
        case .ethernet: "eth"
        case .loopback: "lo"
        case .virtual: "virt"
        case .other: "othr"
        }
    }

    func titles(style: LiveRenderer, packets: Bool) -> Line {
        var line = Line(width: width, ascii: style.ascii).text("  " + pad("NAME", nameWidth) + " " + pad("KIND", kindWidth) + " ")
        line = line.text(padLeft(packets ? "RX pkt/s" : "RX/s", rateWidth) + " " + padLeft(packets ? "TX pkt/s" : "TX/s", rateWidth))
        if sparkWidth > 0 {
            line = line.text(" " + pad(rxSparkWidth >= 9 ? "RECENT RX" : "RX", rxSparkWidth))
            line = line.text(" " + pad(txSparkWidth >= 9 ? "RECENT TX" : "TX", txSparkWidth))
        }
        if showTotals >= 1 { line = line.text(" " + padLeft("TOTAL RX", totalWidth)) }
        if showTotals >= 2 { line = line.text(" " + padLeft("TOTAL TX", totalWidth)) }
        return line.styled(style.bold)
    }

    func row(_ row: LiveInterface, model: LiveModel, selected: Bool, style: LiveRenderer) -> Line {
        let gone = !row.present
        var line = Line(width: width, ascii: style.ascii)
        line = line.text(selected ? "› " : "  ", selected ? style.bold : style.plain)
        line = line.text(pad(truncate(model.shownName(row.key), nameWidth), nameWidth) + " ", gone ? style.dim : style.plain)
        let kind = shortKinds ? Self.shortKind(row.kind) : row.kind.rawValue
        line = line.text(pad(kind, kindWidth), gone ? style.dim : style.kindStyle(row.kind)).text(" ")
        let mark = row.rateQuality.liveMark
        let rate = { (v: Double?) -> String in
            guard let v, !gone else { return gone ? "gone" : "-" }
            return mark + (model.packets ? String(Units.perSecond(v).dropLast(2)) : Units.rate(bytesPerSecond: v, bits: model.bits))
        }
        let rx = model.packets ? row.intervalRate(.rxPackets) : row.rxRate
        let tx = model.packets ? row.intervalRate(.txPackets) : row.txRate
        line = line.text(padLeft(rate(rx), rateWidth) + " ", gone ? style.dim : style.rxStyle)
        line = line.text(padLeft(rate(tx), rateWidth), gone ? style.dim : style.txStyle)
        if sparkWidth > 0 {
            // rx and tx apart, on the shared scale or the row's own.
            var rx = row.rxHistory.suffix(rxSparkWidth), tx = row.txHistory.suffix(txSparkWidth)
            var top = model.scale == .perRow ? max(rx.max() ?? 0, tx.max() ?? 0) : sharedTop
            if model.scale == .log {
                rx = rx.map { Math.log1p(max($0, 0)) }
                tx = tx.map { Math.log1p(max($0, 0)) }
                top = Math.log1p(top)
            }
            line = line.text(" ").text(Graph.sparkline(rx, width: rxSparkWidth, top: top), gone ? style.dim : style.rxStyle)
            line = line.text(" ").text(Graph.sparkline(tx, width: txSparkWidth, top: top), gone ? style.dim : style.txStyle)
        }
        let totalMark = row.quality.liveMark
        if showTotals >= 1 {
            line = line.text(
                " " + padLeft(totalMark + Units.bytes(row.totals.rxBytes), totalWidth), gone ? style.dim : style.qualityStyle(row.quality))
        }
        if showTotals >= 2 {
            line = line.text(
                " " + padLeft(totalMark + Units.bytes(row.totals.txBytes), totalWidth), gone ? style.dim : style.qualityStyle(row.quality))
        }
        if selected, style.color { line = line.styled(style.inverse) }
        return line
    }
}

/// The quality marks on screen, for the legend.
struct MarksShown {
    var lowerBound = false
    var wrapCorrected = false
    /// The route line's outside-the-tunnels estimate (`≈`), or its
    /// uncertain form (`?`).
    var derived = false
    var uncertain = false

    mutating func add(_ quality: Quality) {
        switch quality {
        case .exact: break
        case .lowerBound: lowerBound = true
        case .wrapCorrected: wrapCorrected = true
        }
    }
}

/// Small charts in block characters.
enum Graph {
    static let levels: [Character] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"]

    /// One line, right-aligned: the newest value at the right end, scaled
    /// to `top`. Nothing drawn for no traffic; traffic under a 32nd of the
    /// top is a dot (a trickle is not a small rate); any other at least ▁.
    static func sparkline(_ values: [Double], width: Int, top: Double) -> String {
        var out = String(repeating: " ", count: max(0, width - values.count))
        for v in values.suffix(width) {
            if top > 0, v > 0 {
                out.append(v * 32 < top ? "·" : levels[min(8, max(1, Int((v / top * 8).rounded(.up))))])
            } else {
                out.append(" ")
            }
        }
        return out
    }

    /// `height` lines, the top one first, right-aligned, scaled to `top`;
    /// an unknown value (NaN: no sample then) stays blank.
    static func blocks(_ values: [Double], width: Int, height: Int, top: Double) -> [String] {
        let padding = max(0, width - values.count)
        return (0..<height).map { level in
            let rowFromBottom = height - 1 - level
            var out = String(repeating: " ", count: padding)
            for v in values.suffix(width) {
                let eighths = top > 0 && !v.isNaN ? Int((v / top * Double(height * 8)).rounded(.up)) : 0
                let here = max(0, min(8, eighths - rowFromBottom * 8))
                // Some traffic shows on the bottom row, however little.
                out.append(levels[rowFromBottom == 0 && here == 0 && v > 0 ? 1 : here])
            }
            return out
        }
    }
}

/// A graph's rate axis: a round top above the peak, its unit, and labels.
struct Axis {
    /// Bytes per second at the top of the graph.
    let top: Double
    /// `MiB/s`, `Mbit/s`.
    let unit: String
    private let divisor: Double

    init(peak: Double, bits: Bool) {
        let base = bits ? 1000.0 : 1024.0
        let units = bits ? ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"] : ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s"]
        var v = max(peak * (bits ? 8 : 1), 1)
        var k = 0
        while v >= base, k < units.count - 1 {
            v /= base
            k += 1
        }
        let steps: [Double] = [
            1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 200, 250, 300, 400, 500, 600, 800, 1000,
        ]
        var nice = steps.first { $0 >= v - 1e-9 } ?? base
        if nice >= base, k < units.count - 1 {
            nice = 1
            k += 1
        }
        var divisor = 1.0
        for _ in 0..<k { divisor *= base }
        self.divisor = divisor
        unit = units[k]
        top = nice * divisor / (bits ? 8 : 1)
    }

    /// The label of a graph row (0 at the top), or nil: the top, the middle
    /// (4 rows or more) and zero at the bottom.
    func label(row: Int, of height: Int) -> String? {
        let value: Double
        if row == 0 {
            value = top
        } else if row == height - 1 {
            return "0"
        } else if height >= 4, row == height / 2 {
            value = top * Double(height - row) / Double(height)
        } else {
            return nil
        }
        let x = value * (unit.hasSuffix("bit/s") ? 8 : 1) / divisor
        return x < 9.995 ? Units.fixed(x, x.rounded() == x ? 0 : (x * 10).rounded() == x * 10 ? 1 : 2) : Units.fixed(x, 0)
    }
}

/// A screen line being built: text in styles, cut or padded to `width`.
struct Line {
    let width: Int
    /// Pieces are folded to ASCII (ASCIIText) before they are measured.
    let ascii: Bool
    private var content = ""
    private var used = 0
    private var lineStyle = ""

    init(width: Int, ascii: Bool = false) {
        self.width = width
        self.ascii = ascii
    }

    /// Appends a piece. Consuming: the line's text is appended to in place,
    /// not copied for every piece.
    consuming func text(_ s: String, _ style: LiveRenderer.Style = LiveRenderer.Style(codes: "")) -> Line {
        var copy = self
        let room = copy.width - copy.used
        guard room > 0 else { return copy }
        // Whatever a piece holds (a name in an event or a note included),
        // no control character reaches the terminal: the line's own styles
        // are the only escape sequences written.
        var piece = TerminalText.escaped(copy.ascii ? ASCIIText.folded(s) : s)
        if piece.unicodeScalars.count > room {
            piece = String(String.UnicodeScalarView(piece.unicodeScalars.prefix(max(0, room - 1)))) + (copy.ascii ? "." : "…")
        }
        copy.used += piece.unicodeScalars.count
        copy.content += style.codes.isEmpty ? piece : "\u{1B}[\(style.codes)m" + piece + "\u{1B}[0m" + copy.lineStyleCode
        return copy
    }

    /// A style for the whole line (selection), kept across pieces.
    func styled(_ style: LiveRenderer.Style) -> Line {
        guard !style.codes.isEmpty else { return self }
        var copy = self
        copy.lineStyle = style.codes
        copy.content = "\u{1B}[\(style.codes)m" + content.replacingOccurrences("\u{1B}[0m", "\u{1B}[0m\u{1B}[\(style.codes)m")
        return copy
    }

    private var lineStyleCode: String { lineStyle.isEmpty ? "" : "\u{1B}[\(lineStyle)m" }

    func finish() -> String {
        let fill = String(repeating: " ", count: max(0, width - used))
        if lineStyle.isEmpty && !content.contains("\u{1B}") { return content + fill }
        return content + fill + "\u{1B}[0m"
    }
}

func pad(_ s: String, _ width: Int) -> String { s.padding(width) }

func padLeft(_ s: String, _ width: Int) -> String {
    let count = s.unicodeScalars.count
    return count >= width ? s : String(repeating: " ", count: width - count) + s
}

func truncate(_ s: String, _ width: Int) -> String {
    s.unicodeScalars.count <= width ? s : String(String.UnicodeScalarView(s.unicodeScalars.prefix(width - 1))) + "…"
}

extension String {
    func padding(_ width: Int) -> String {
        let count = unicodeScalars.count
        return count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    func replacingOccurrences(_ target: String, _ replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let range = rest.range(of: target) {
            out += rest[..<range.lowerBound]
            out += replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }
}

extension Substring {
    func range(of target: String) -> Range<Substring.Index>? {
        let t = Array(target.unicodeScalars)
        var i = startIndex
        while i < endIndex {
            var j = i, k = 0
            while k < t.count, j < endIndex, self.unicodeScalars[j] == t[k] {
                j = self.unicodeScalars.index(after: j)
                k += 1
            }
            if k == t.count { return i..<j }
            i = self.unicodeScalars.index(after: i)
        }
        return nil
    }
}
