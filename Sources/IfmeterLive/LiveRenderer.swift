import IfmeterCore

/// Draws the live view: a pure function from the model and the terminal's
/// size to screen lines, each exactly `width` columns wide (escape codes
/// aside), `height` lines in all.
public struct LiveRenderer: Sendable {
    /// ANSI colours; off for NO_COLOR and dumb terminals.
    public var color: Bool

    public init(color: Bool) { self.color = color }

    public static let minimumWidth = 40
    public static let minimumHeight = 8

    public func render(_ model: LiveModel, width: Int, height: Int) -> [String] {
        let width = max(width, 1), height = max(height, 1)
        guard width >= Self.minimumWidth, height >= Self.minimumHeight else {
            return tooSmall(width: width, height: height)
        }
        if model.helpOpen { return help(model, width: width, height: height) }
        var lines: [Line] = []
        lines.append(header(model, width: width))
        let layout = Layout(width: width, model: model)
        lines.append(layout.titles(style: self))
        let rows = model.visibleSlots()
        let selectedSlot = model.selected.flatMap(model.slot(of:))
        let footer = footerLines(model, width: width)
        let summary = summaryLines(model, width: width) + quotaLines(model, width: width, height: height)
        var detail: [Line] = []
        if model.detailOpen, let key = model.selected, let selected = model.row(for: key) {
            detail = detailLines(selected, model: model, width: width, height: height)
        }
        // Rows get what the fixed parts leave (at least one).
        let fixed = lines.count + summary.count + footer.count + detail.count + (detail.isEmpty ? 0 : 1)
        var room = height - fixed
        if room < 1 {
            detail = Array(detail.prefix(max(0, detail.count + room - 1)))
            room = 1
        }
        let selectedIndex = rows.firstIndex { $0 == selectedSlot } ?? 0
        var first = min(max(0, model.scroll), max(0, rows.count - room))
        if selectedIndex < first { first = selectedIndex }
        if selectedIndex >= first + room { first = selectedIndex - room + 1 }
        for slot in rows.dropFirst(first).prefix(room) {
            lines.append(layout.row(model.row(at: slot), model: model, selected: slot == selectedSlot, style: self))
        }
        if rows.isEmpty {
            lines.append(Line(width: width).text(model.isEmpty ? "  waiting for the first interval…" : "  no interface matches the filter or kinds shown", dim))
        }
        while lines.count < height - footer.count - detail.count - (detail.isEmpty ? 0 : 1) - summary.count {
            lines.append(Line(width: width))
        }
        lines += summary
        if !detail.isEmpty {
            lines.append(Line(width: width).text(String(repeating: "─", count: width), dim))
            lines += detail
        }
        lines += footer
        return lines.prefix(height).map { $0.finish() }
    }

    // MARK: parts

    func header(_ model: LiveModel, width: Int) -> Line {
        var line = Line(width: width)
        line = line.text("ifmeter", bold)
        if width >= 60 {
            line = line.text(" · \(model.host) · \(model.source) · every \(Units.duration(model.interval)) · by \(model.sort.rawValue)")
        } else {
            line = line.text(" \(model.source) \(Units.duration(model.interval)) by \(model.sort.rawValue)")
        }
        if model.bits { line = line.text(" · bits") }
        if !model.filter.isEmpty { line = line.text(" · filter \(model.filter)") }
        if !model.hiddenKinds.isEmpty {
            line = line.text(" · hiding " + InterfaceKind.allCases.filter { model.hiddenKinds.contains($0) }.map(\.rawValue).joined(separator: ","))
        }
        if model.paused { line = line.text(" · PAUSED", warning) }
        return line
    }

    /// Physical traffic, and tunnel traffic apart: it rides inside the
    /// physical links, so adding the two would count it twice.
    func summaryLines(_ model: LiveModel, width: Int) -> [Line] {
        let summary = model.summary
        let (physicalRx, physicalTx, tunnelRx, tunnelTx) = (summary.physicalRx, summary.physicalTx, summary.tunnelRx, summary.tunnelTx)
        let r = { (v: Double) in Units.rate(bytesPerSecond: v, bits: model.bits) }
        let physical = Line(width: width).text("physical ", bold).text("↓\(r(physicalRx)) ↑\(r(physicalTx))")
        var routeLines: [Line] = []
        if let route = model.route { routeLines.append(self.routeLine(route, width: width, rate: r)) }
        if width >= 72 {
            var line = physical.text("  tunnel ", bold).text("↓\(r(tunnelRx)) ↑\(r(tunnelTx))")
            if width >= 100 { line = line.text(" " + TrafficSummary.wideNote, dim) }
            return [line] + routeLines
        }
        return [physical, Line(width: width).text("tunnel   ", bold).text("↓\(r(tunnelRx)) ↑\(r(tunnelTx))").text(" " + TrafficSummary.narrowNote, dim)]
            + routeLines
    }

    /// `route 8.8.8.8 → tun0 (tunnel)  outside ↓.. ↑..`: the kernel's routing
    /// decision for the probe, and what went around the tunnels.
    func routeLine(_ route: RouteSummary, width: Int, rate: (Double) -> String) -> Line {
        var line = Line(width: width).text("route ", bold)
        if let interface = route.interface {
            let alarm = route.tunnels && !route.viaTunnel
            line = line.text("\(route.probe) → ").text(TerminalText.escaped(interface), alarm ? warning : bold)
                .text(route.viaTunnel ? " (tunnel)" : route.tunnels ? " (outside the tunnels)" : " (no tunnel here)", alarm ? warning : dim)
        } else {
            line = line.text("\(route.probe): no route", dim)
        }
        if let rx = route.outsideRx, let tx = route.outsideTx {
            let mark = route.uncertain ? "?" : ""
            line = line.text("  outside ", bold).text("\(mark)↓\(rate(rx)) \(mark)↑\(rate(tx))")
            if width >= 100 { line = line.text(" around the tunnels: local traffic, tunnel control, leaks", dim) }
        }
        return line
    }

    func footerLines(_ model: LiveModel, width: Int) -> [Line] {
        var status = Line(width: width)
        if model.editingFilter {
            status = status.text("filter: ", bold).text(model.filterDraft + "▏").text("  Enter apply · Esc cancel", dim)
        } else if let note = model.note, model.now - note.time < 5 {
            status = status.text(note.text, warning)
        } else {
            status = status.text(width >= 110
                ? "q quit · ↑↓ jk select · Enter detail · s sort · b bits · f filter · 1-7 kinds · p pause · r zero · ? help"
                : width >= 80
                    ? "q quit · jk select · Enter detail · s sort · b bits · f filter · 1-7 kinds · p · r · ?"
                    : "q jk Enter s b f 1-7 p r, ? help", dim)
        }
        let caveat = Caveat.line(fitting: width)
        return [status, Line(width: width).text(caveat, dim)]
    }

    func detailLines(_ row: LiveInterface, model: LiveModel, width: Int, height: Int) -> [Line] {
        let graphHeight = height >= 36 ? 4 : (height >= 26 ? 3 : 2)
        var lines: [Line] = []
        var title = Line(width: width).text(row.key.display, bold).text(" ").text(row.kind.rawValue, kindStyle(row.kind))
        title = title.text("  \(row.classification.evidence) · \(row.width.rawValue)-bit counters")
        if let index = row.index { title = title.text(" · index \(index)") }
        if let operstate = row.operstate { title = title.text(" · \(operstate)") }
        lines.append(title)
        var speed = "speed: "
        if let ceiling = row.speedCeilingBps {
            speed += Units.rate(bytesPerSecond: Double(ceiling) / 8, bits: true) + " (a ceiling for wrap checks)"
        } else if let reported = row.reportedSpeedBps {
            speed += Units.rate(bytesPerSecond: Double(reported) / 8, bits: true) + " reported, no limit (not hardware)"
        } else {
            speed += "unknown"
        }
        lines.append(Line(width: width).text(speed))
        let r = { (v: Double) in Units.rate(bytesPerSecond: v, bits: model.bits) }
        let graphWidth = max(10, width - 22)
        for (label, history, peak, average) in [
            ("rx", row.rxHistory, row.peakRx, row.averageRx), ("tx", row.txHistory, row.peakTx, row.averageTx),
        ] {
            let graph = Graph.blocks(history.suffix(graphWidth), width: graphWidth, height: graphHeight)
            for (n, text) in graph.enumerated() {
                var line = Line(width: width)
                let caption = n == 0 ? "\(label) peak" : (n == 1 ? "   avg" : "")
                let value = n == 0 ? r(peak) : (n == 1 ? r(average) : "")
                line = line.text(pad(caption, 8)).text(padLeft(value, 12) + " ")
                line = line.text(text, label == "rx" ? rxStyle : txStyle)
                lines.append(line)
            }
        }
        let events = row.recentEvents.suffix(3).reversed()
        var eventLine = Line(width: width).text("events: ", bold)
        if events.isEmpty {
            eventLine = eventLine.text("none", dim)
        } else {
            eventLine = eventLine.text(events.map { "\(Self.clock($0.time)) \($0.text)" }.joined(separator: " · "))
        }
        lines.append(eventLine)
        return lines
    }

    func help(_ model: LiveModel, width: Int, height: Int) -> [String] {
        let text = [
            "ifmeter live: keys", "",
            "q, Ctrl-C   quit", "↑ ↓, j k   select an interface", "Enter      open or close its detail",
            "b          bits or bytes per second", "s          sort by rate, total or name",
            "f, /       filter names (a glob, or a part of the name)",
            "1..7       show or hide wifi, cellular, tunnel, ethernet, loopback, virtual, other",
            "p          pause the figures (sampling goes on)", "r          zero the totals (their quality starts over)",
            "?          this help", "",
        ] + wordWrap(Caveat.paragraph, width: 72) + [
            "", "Any key closes this help.",
        ]
        var lines = text.prefix(height).map { Line(width: width).text($0, $0 == text[0] ? bold : plain).finish() }
        while lines.count < height { lines.append(Line(width: width).finish()) }
        return lines
    }

    func tooSmall(width: Int, height: Int) -> [String] {
        var lines = [String](repeating: String(repeating: " ", count: width), count: height)
        let message = "ifmeter: needs \(Self.minimumWidth)x\(Self.minimumHeight)"
        lines[0] = String(message.prefix(width)).padding(width)
        return lines
    }

    /// `HH:MM:SS` in UTC of a Unix time.
    public static func clock(_ time: Double) -> String {
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
    var showTotals: Int  // 0, 1 (rx) or 2 (rx and tx)
    let width: Int

    init(width: Int, model: LiveModel) {
        self.width = width
        let longest = model.isEmpty ? 4 : model.longestName
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
        sparkWidth = spare >= 8 ? min(spare, 30) : 0
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

    func titles(style: LiveRenderer) -> Line {
        var line = Line(width: width).text("  " + pad("NAME", nameWidth) + " " + pad("KIND", kindWidth) + " ")
        line = line.text(padLeft("RX/s", rateWidth) + " " + padLeft("TX/s", rateWidth))
        if sparkWidth > 0 { line = line.text(" " + pad("RECENT", sparkWidth)) }
        if showTotals >= 1 { line = line.text(" " + padLeft("TOTAL RX", totalWidth)) }
        if showTotals >= 2 { line = line.text(" " + padLeft("TOTAL TX", totalWidth)) }
        return line.styled(style.bold)
    }

    func row(_ row: LiveInterface, model: LiveModel, selected: Bool, style: LiveRenderer) -> Line {
        let gone = !row.present
        var line = Line(width: width)
        line = line.text(selected ? "› " : "  ", selected ? style.bold : style.plain)
        line = line.text(pad(truncate(row.key.display, nameWidth), nameWidth) + " ", gone ? style.dim : style.plain)
        let kind = shortKinds ? Self.shortKind(row.kind) : row.kind.rawValue
        line = line.text(pad(kind, kindWidth), gone ? style.dim : style.kindStyle(row.kind)).text(" ")
        let mark = row.rateQuality.mark
        let rate = { (v: Double?) -> String in
            guard let v, !gone else { return gone ? "gone" : "-" }
            return mark + Units.rate(bytesPerSecond: v, bits: model.bits)
        }
        line = line.text(padLeft(rate(row.rxRate), rateWidth) + " ", gone ? style.dim : style.rxStyle)
        line = line.text(padLeft(rate(row.txRate), rateWidth), gone ? style.dim : style.txStyle)
        if sparkWidth > 0 {
            let history = RateHistory.sums(row.rxHistory, row.txHistory, last: sparkWidth)
            line = line.text(" ").text(Graph.sparkline(history, width: sparkWidth), gone ? style.dim : style.plain)
        }
        let totalMark = row.quality.mark
        if showTotals >= 1 {
            line = line.text(" " + padLeft(totalMark + Units.bytes(row.totals.rxBytes), totalWidth), gone ? style.dim : style.qualityStyle(row.quality))
        }
        if showTotals >= 2 {
            line = line.text(" " + padLeft(totalMark + Units.bytes(row.totals.txBytes), totalWidth), gone ? style.dim : style.qualityStyle(row.quality))
        }
        if selected, style.color { line = line.styled(style.inverse) }
        return line
    }
}

/// Small charts in block characters.
enum Graph {
    static let levels: [Character] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"]

    /// One line, right-aligned: the newest value at the right end.
    static func sparkline(_ values: [Double], width: Int) -> String {
        let top = values.max() ?? 0
        var out = String(repeating: " ", count: max(0, width - values.count))
        for v in values.suffix(width) {
            out.append(top > 0 && v > 0 ? levels[max(1, Int((v / top * 8).rounded(.up)))] : (values.isEmpty ? " " : "▁"))
        }
        return out
    }

    /// `height` lines, the top one first, right-aligned.
    static func blocks(_ values: [Double], width: Int, height: Int) -> [String] {
        let top = values.max() ?? 0
        let padding = max(0, width - values.count)
        return (0..<height).map { level in
            let rowFromBottom = height - 1 - level
            var out = String(repeating: " ", count: padding)
            for v in values.suffix(width) {
                let eighths = top > 0 ? Int((v / top * Double(height * 8)).rounded(.up)) : 0
                let here = max(0, min(8, eighths - rowFromBottom * 8))
                out.append(levels[here])
            }
            return out
        }
    }
}

/// A screen line being built: text in styles, cut or padded to `width`.
struct Line {
    let width: Int
    private var content = ""
    private var used = 0
    private var lineStyle = ""

    init(width: Int) { self.width = width }

    /// Appends a piece. Consuming: the line's text is appended to in place,
    /// not copied for every piece.
    consuming func text(_ s: String, _ style: LiveRenderer.Style = LiveRenderer.Style(codes: "")) -> Line {
        var copy = self
        let room = copy.width - copy.used
        guard room > 0 else { return copy }
        var piece = s
        if piece.unicodeScalars.count > room {
            piece = String(String.UnicodeScalarView(piece.unicodeScalars.prefix(max(0, room - 1)))) + "…"
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
