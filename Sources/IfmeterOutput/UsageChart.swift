import IfmeterCore

/// A usage table as an SVG bar chart: one panel per interface, a stacked
/// bar per period (rx below, tx above), lower-bound periods hatched and
/// marked ≥, a plan's quota as a dashed line, axes with byte units, and the
/// estimate caption. Plain SVG 1.1 (no script, no external resource), so
/// any browser or `rsvg-convert` renders it.
package struct UsageChart: Sendable {
    package var table: UsageTable
    /// The most recent periods drawn per panel.
    package var maxBars: Int

    package static let width = 900
    static let panelHeight = 300
    static let top = 56
    static let left = 92
    static let right = 24

    package init(table: UsageTable, maxBars: Int = 48) {
        self.table = table
        self.maxBars = maxBars
    }

    package func svg() -> String {
        let panels = table.interfaces.isEmpty ? 1 : table.interfaces.count
        let height = Self.top + panels * Self.panelHeight + 60
        let w = Self.width
        var s = """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(w)" height="\(height)" viewBox="0 0 \(w) \(height)" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">
            <title>ifmeter usage by \(table.granularity.rawValue) (estimates)</title>
            <defs><pattern id="lower" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff" fill-opacity="0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#222222" stroke-width="2" stroke-opacity="0.55"/></pattern></defs>
            <rect x="0" y="0" width="\(w)" height="\(height)" fill="#ffffff"/>
            <text x="\(Self.left)" y="24" font-size="16" font-weight="bold">Traffic by \(Self.title(table.granularity)) (estimates)</text>

            """
        // Legend.
        let lx = w - 430
        s += "<g font-size=\"11\">"
        s += "<rect x=\"\(lx)\" y=\"12\" width=\"12\" height=\"12\" fill=\"#3b7dd8\"/><text x=\"\(lx + 16)\" y=\"22\">received (rx)</text>"
        s += "<rect x=\"\(lx + 100)\" y=\"12\" width=\"12\" height=\"12\" fill=\"#f28e2b\"/><text x=\"\(lx + 116)\" y=\"22\">sent (tx)</text>"
        s +=
            "<rect x=\"\(lx + 180)\" y=\"12\" width=\"12\" height=\"12\" fill=\"url(#lower)\" stroke=\"#222222\"/><text x=\"\(lx + 196)\" y=\"22\">≥ lower bound</text>"
        s +=
            "<line x1=\"\(lx + 290)\" y1=\"18\" x2=\"\(lx + 318)\" y2=\"18\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/><text x=\"\(lx + 322)\" y=\"22\">plan quota</text>"
        s += "</g>\n"
        if table.interfaces.isEmpty {
            s += "<text x=\"\(Self.left)\" y=\"\(Self.top + 40)\">No usage recorded yet.</text>\n"
        }
        for (n, i) in table.interfaces.enumerated() {
            s += panel(i, y: Self.top + n * Self.panelHeight)
        }
        let captionY = height - 30
        s += "<text x=\"\(Self.left)\" y=\"\(captionY)\" font-size=\"11\" fill=\"#333333\">\(Self.xml(Caveat.estimate))</text>\n"
        s +=
            "<text x=\"\(Self.left)\" y=\"\(captionY + 16)\" font-size=\"11\" fill=\"#333333\">Local time; traffic is split at hour boundaries by time. ≥ marks a lower bound: the true value is at least the bar.</text>\n"
        s += "</svg>\n"
        return s
    }

    package static func title(_ kind: UsagePeriodKind) -> String {
        switch kind {
        case .fiveMinutes: "five minutes"
        case .hour: "hour"
        case .day: "day"
        case .month: "month"
        case .year: "year"
        case .cycle: "billing cycle"
        case .top: "top day"
        }
    }

    func panel(_ i: UsageTable.Interface, y: Int) -> String {
        let rows = Array(i.rows.suffix(maxBars))
        let plotTop = y + 30, plotBottom = y + Self.panelHeight - 70
        let plotLeft = Self.left, plotRight = Self.width - Self.right
        let quota = table.granularity == .cycle ? i.plan?.quotaBytes : nil
        // A quota of one direction is compared with bars of that direction:
        // stacked rx + tx bars under a tx quota's line would tell a false story.
        let only: Plan.Direction? = quota != nil && i.plan?.direction != .both ? i.plan?.direction : nil
        let peak = max(rows.map { only?.used($0.counters) ?? $0.totalBytes }.max() ?? 0, quota ?? 0, 1)
        let axis = Self.axis(peak.saturatingAdd(peak / 20)) // headroom above the tallest bar
        func yOf(_ v: UInt64) -> Double {
            Double(plotBottom) - Double(v) / axis.top * Double(plotBottom - plotTop)
        }
        var s = "<g>\n"
        var title = TerminalText.escaped(i.stored) + " (" + i.kindText + ")"
        if let plan = i.plan, table.granularity == .cycle {
            title += ": plan cycle from day \(plan.cycleStartDay)"
            if let q = plan.quotaBytes { title += ", quota \(Units.bytes(q)) \(plan.direction.rawValue)" }
        }
        if i.rows.count > rows.count { title += " — the last \(rows.count) of \(i.rows.count)" }
        s += "<text x=\"\(plotLeft)\" y=\"\(y + 18)\" font-size=\"13\" font-weight=\"bold\">\(Self.xml(title))</text>\n"
        if let only {
            let other = only == .tx ? "received (rx)" : "sent (tx)"
            s +=
                "<text x=\"\(plotRight)\" y=\"\(y + 18)\" text-anchor=\"end\" font-size=\"11\">Bars: \(Self.directionWords(only)) only, what the quota counts (\(other) not drawn)</text>\n"
        }
        // Y axis, grid and labels.
        for t in 0...axis.ticks {
            let yy = Self.f(Double(plotBottom) - Double(t) / Double(axis.ticks) * Double(plotBottom - plotTop))
            s += "<line x1=\"\(plotLeft)\" y1=\"\(yy)\" x2=\"\(plotRight)\" y2=\"\(yy)\" stroke=\"#dddddd\"/>"
            s += "<text x=\"\(plotLeft - 6)\" y=\"\(yy)\" dy=\"4\" text-anchor=\"end\" font-size=\"11\">\(Self.xml(axis.label(t)))</text>\n"
        }
        s += "<line x1=\"\(plotLeft)\" y1=\"\(plotTop)\" x2=\"\(plotLeft)\" y2=\"\(plotBottom)\" stroke=\"#000000\"/>"
        s += "<line x1=\"\(plotLeft)\" y1=\"\(plotBottom)\" x2=\"\(plotRight)\" y2=\"\(plotBottom)\" stroke=\"#000000\"/>\n"
        let axisTitle = only.map { "bytes \(Self.directionWords($0))" } ?? "bytes (rx + tx)"
        s +=
            "<text transform=\"translate(\(plotLeft - 70) \((plotTop + plotBottom) / 2)) rotate(-90)\" text-anchor=\"middle\" font-size=\"11\">\(axisTitle)</text>\n"
        // Bars.
        let slot = Double(plotRight - plotLeft) / Double(max(rows.count, 1))
        let barWidth = min(60, max(2, slot * 0.7))
        let labelEvery = max(1, Int((Double(rows.count) * 60 / Double(plotRight - plotLeft)).rounded(.up)))
        for (n, r) in rows.enumerated() {
            let x = Double(plotLeft) + slot * Double(n) + (slot - barWidth) / 2
            // One direction's bar (a one-direction quota) is drawn as the rx part alone.
            let bottomPart = only.map { $0.used(r.counters) } ?? r.counters.rxBytes
            let rxTop = yOf(bottomPart), totalTop = only == nil ? yOf(r.totalBytes) : rxTop
            let tip = "\(r.period.label): rx \(Units.bytes(r.counters.rxBytes)), tx \(Units.bytes(r.counters.txBytes)), \(r.quality.name)"
            s += "<g><title>\(Self.xml(tip))</title>"
            s +=
                "<rect x=\"\(Self.f(x))\" y=\"\(Self.f(rxTop))\" width=\"\(Self.f(barWidth))\" height=\"\(Self.f(Double(plotBottom) - rxTop))\" fill=\"\(only == .tx ? "#f28e2b" : "#3b7dd8")\"/>"
            if only == nil {
                s +=
                    "<rect x=\"\(Self.f(x))\" y=\"\(Self.f(totalTop))\" width=\"\(Self.f(barWidth))\" height=\"\(Self.f(rxTop - totalTop))\" fill=\"#f28e2b\"/>"
            }
            if r.quality == .lowerBound {
                s +=
                    "<rect x=\"\(Self.f(x))\" y=\"\(Self.f(totalTop))\" width=\"\(Self.f(barWidth))\" height=\"\(Self.f(Double(plotBottom) - totalTop))\" fill=\"url(#lower)\" stroke=\"#222222\"/>"
                s += "<text x=\"\(Self.f(x + barWidth / 2))\" y=\"\(Self.f(totalTop - 4))\" text-anchor=\"middle\" font-size=\"11\">≥</text>"
            }
            s += "</g>\n"
            if n % labelEvery == 0 {
                let lx = Self.f(x + barWidth / 2)
                s +=
                    "<text transform=\"translate(\(lx) \(plotBottom + 12)) rotate(35)\" font-size=\"10\">\(Self.xml(Self.short(r.period.label)))</text>\n"
            }
        }
        if let quota {
            let qy = Self.f(yOf(quota))
            s +=
                "<line x1=\"\(plotLeft)\" y1=\"\(qy)\" x2=\"\(plotRight)\" y2=\"\(qy)\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>"
            s +=
                "<text x=\"\(plotRight)\" y=\"\(qy)\" dy=\"-4\" text-anchor=\"end\" font-size=\"11\" fill=\"#d62728\">quota \(Self.xml(Units.bytes(quota)))</text>\n"
        }
        if rows.isEmpty {
            s += "<text x=\"\(plotLeft + 10)\" y=\"\((plotTop + plotBottom) / 2)\">No periods.</text>\n"
        }
        s += "</g>\n"
        return s
    }

    /// A label short enough for the axis: an hour's label without its offset.
    package static func short(_ label: String) -> String {
        if label.count > 16, let plus = label.lastIndex(where: { $0 == "+" || $0 == "-" }), label.distance(from: plus, to: label.endIndex) == 6 {
            return String(label[..<plus])
        }
        return label
    }

    /// A round step (1, 2 or 5 times a power of ten, in the binary unit
    /// the labels use: B, KiB, MiB, ...) and a tick count covering `peak`.
    /// step × ticks never overflows, for any peak up to 2^64-1 (totals near
    /// it come only from crafted state files): where a round step's top
    /// would pass 2^64-1, the peak itself is the one tick.
    static func scale(_ peak: UInt64) -> (UInt64, Int) {
        for exponent: UInt64 in 0..<7 {
            let unit: UInt64 = 1 << (10 * exponent) // B to EiB
            for m: UInt64 in [1, 2, 5, 10, 20, 50, 100, 200, 500] {
                let (step, overflow) = m.multipliedReportingOverflow(by: unit)
                if overflow { return (max(peak, 1), 1) }
                let ticks = max(1, peak / step + (peak % step == 0 ? 0 : 1))
                if ticks <= 5 {
                    if step.multipliedReportingOverflow(by: ticks).overflow { return (max(peak, 1), 1) }
                    return (step, Int(ticks))
                }
            }
        }
        return (max(peak, 1), 1)
    }

    static func directionWords(_ d: Plan.Direction) -> String {
        switch d {
        case .rx: "received (rx)"
        case .tx: "sent (tx)"
        case .both: "(rx + tx)"
        }
    }

    /// A y axis: `ticks` steps of `step` bytes, labelled in one binary unit
    /// (B, KiB, ..., EiB) with a 1, 2 or 5 step (0.1 to 500 of the unit),
    /// every label under 1000 of its unit (900 MiB tops out at 1.0 GiB,
    /// never "1000 MiB"). Computed in `Double`, so any peak up to 2^64-1
    /// has an axis.
    package struct Axis: Sendable, Hashable {
        package var step: Double
        package var ticks: Int
        /// The unit's index in B, KiB, MiB, ...
        package var unit: Int
        /// The step in that unit (0.1 to 500).
        package var stepInUnit: Double
        package var decimals: Int

        package var top: Double { step * Double(ticks) }

        /// The label of tick `t` (0 is "0").
        package func label(_ t: Int) -> String {
            t == 0 ? "0" : Units.fixed(stepInUnit * Double(t), decimals) + " " + UsageChart.units[unit]
        }
    }

    static let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]

    /// The finest round axis with at most five ticks covering `peak`.
    package static func axis(_ peak: UInt64) -> Axis {
        let peak = Double(max(peak, 1))
        var best: Axis?
        var size = 1.0
        for unit in 0..<units.count {
            defer { size *= 1024 }
            for (e, power) in [(-1, 0.1), (0, 1.0), (1, 10.0), (2, 100.0)] where unit > 0 || e >= 0 {
                for m in [1.0, 2, 5] {
                    let inUnit = m * power
                    let step = inUnit * size
                    let needed = (peak / step - 1e-9).rounded(.up)
                    guard needed <= 5 else { continue }
                    let ticks = max(1, Int(needed))
                    guard inUnit * Double(ticks) < 999.5 else { continue }
                    if best.map({ step < $0.step }) ?? true {
                        best = Axis(step: step, ticks: ticks, unit: unit, stepInUnit: inUnit, decimals: e < 0 ? 1 : 0)
                    }
                }
            }
        }
        return best ?? Axis(step: peak, ticks: 1, unit: 0, stepInUnit: peak, decimals: 0)
    }

    static func f(_ v: Double) -> String { Units.fixed(v, 1) }

    /// Text for XML, in an attribute or an element: every name and label
    /// in a chart goes through here. Control characters and the invisible
    /// ones are escaped visibly first, as the text outputs write them
    /// (`TerminalText`: `\x1b`, `\u{202e}`), since XML 1.0 cannot carry
    /// most C0 controls even as character references; U+FFFE and U+FFFF,
    /// which no XML document may hold, become `\u{fffe}` and `\u{ffff}`;
    /// then the five special characters become entities. Scalar by scalar:
    /// `<` followed by a combining accent is one `Character`, and must be
    /// escaped all the same.
    package static func xml(_ text: String) -> String {
        var out = ""
        for scalar in TerminalText.escaped(text).unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\u{FFFE}": out += "\\u{fffe}"
            case "\u{FFFF}": out += "\\u{ffff}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
