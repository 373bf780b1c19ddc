import IfmeterCore

/// `usage --svg FILE --summary`: one picture per state file (vnstati -s):
/// per interface today, this cycle (by its plan; the calendar month
/// without one) and all time with their average rates and the share of a
/// limit used (a bar with the limit's line), and the last 24 hours by hour
/// as stacked rx/tx bars with the peak hour's rate and the hour limit's
/// line. "As of" is the state file's last save, not the drawing. Every
/// figure carries its exact bytes and quality in `data-` attributes
/// (`data-percent`, `data-limit` where a limit applies), so a test (or a
/// script) reads the same numbers `usage --format json` gives.
package struct UsageSummaryChart: Sendable {
    package var summary: UsageSummary

    static let width = 900
    static let panelHeight = 214
    static let top = 58

    package init(
        slices: [UsageSlice], plans: [Plan], names: [String] = [], kinds: [String: InterfaceKind] = [:], zone: LocalZone, now: Int64,
        savedAt: Double? = nil
    ) {
        summary = UsageSummary(slices: slices, plans: plans, names: names, kinds: kinds, zone: zone, now: now, savedAt: savedAt)
    }

    package init(summary: UsageSummary) { self.summary = summary }

    static func bits(_ bps: Double?) -> String { bps.map { Units.rate(bytesPerSecond: $0 / 8, bits: true) } ?? "-" }

    static func percent(_ p: Double) -> String { Units.fixed(p, 1) + "%" }

    package func svg() -> String {
        let zone = summary.zone
        let panels = max(1, summary.interfaces.count)
        let height = Self.top + panels * Self.panelHeight + 36
        let w = Self.width
        let asOf = summary.asOfWords
        var s = """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(w)" height="\(height)" viewBox="0 0 \(w) \(height)" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">
            <title>ifmeter usage summary (estimates)</title>
            <defs><pattern id="lower" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff" fill-opacity="0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#222222" stroke-width="2" stroke-opacity="0.55"/></pattern></defs>
            <rect x="0" y="0" width="\(w)" height="\(height)" fill="#ffffff"/>
            <text x="24" y="26" font-size="16" font-weight="bold" data-as-of="\(UsageChart.xml(zone.rfc3339(summary.asOf)))">Traffic summary (estimates), \(UsageChart.xml(asOf))</text>
            <g font-size="11"><rect x="460" y="36" width="12" height="12" fill="#3b7dd8"/><text x="476" y="46">received (rx)</text><rect x="560" y="36" width="12" height="12" fill="#f28e2b"/><text x="576" y="46">sent (tx)</text><rect x="650" y="36" width="12" height="12" fill="url(#lower)" stroke="#222222"/><text x="666" y="46">≥ lower bound</text><line x1="770" y1="42" x2="794" y2="42" stroke="#d62728" stroke-width="2" stroke-dasharray="5 3"/><text x="798" y="46">limit</text></g>

            """
        if summary.interfaces.isEmpty { s += "<text x=\"24\" y=\"\(Self.top + 40)\">No usage recorded yet.</text>\n" }
        for (n, i) in summary.interfaces.enumerated() {
            s += panel(i, y: Self.top + n * Self.panelHeight)
        }
        s +=
            "<text x=\"24\" y=\"\(height - 20)\" font-size=\"11\" fill=\"#333333\">\(UsageChart.xml(Caveat.estimate))</text>\n"
        s +=
            "<text x=\"24\" y=\"\(height - 6)\" font-size=\"11\" fill=\"#333333\">Local time. ≥ marks a lower bound: the true value is at least the figure. Rates are averages over the period so far.</text>\n"
        s += "</svg>\n"
        return s
    }

    func panel(_ i: UsageSummary.Interface, y: Int) -> String {
        let zone = summary.zone
        var s = "<g class=\"interface\" data-name=\"\(UsageChart.xml(i.name))\">\n"
        s += "<text x=\"24\" y=\"\(y + 16)\" font-size=\"14\" font-weight=\"bold\">\(UsageChart.xml(i.title))</text>\n"
        for (n, f) in i.figures.enumerated() {
            let x = 24 + n * 288
            let q = f.usage.quality
            let c = f.usage.counters
            var data =
                "data-period=\"\(f.key)\" data-rx=\"\(c.rxBytes)\" data-tx=\"\(c.txBytes)\" data-total=\"\(f.totalBytes)\" data-quality=\"\(q.name)\""
            if let p = f.period { data += " data-start=\"\(zone.rfc3339(p.start))\"" }
            if let r = f.averageBitsPerSecond { data += " data-rate-bps=\"\(Units.fixed(r, 0))\"" }
            if let l = f.limit, let p = f.percentUsed {
                data += " data-limit=\"\(l.bytes)\" data-limit-kind=\"\(l.kind)\" data-limit-direction=\"\(l.direction.rawValue)\""
                data += " data-percent=\"\(Units.fixed(p, 1))\""
            }
            s += "<g class=\"figure\" \(data)>"
            s += "<rect x=\"\(x)\" y=\"\(y + 24)\" width=\"276\" height=\"76\" rx=\"6\" fill=\"#f4f6fa\" stroke=\"#c8cfdc\"/>"
            s += "<text x=\"\(x + 10)\" y=\"\(y + 40)\" font-size=\"12\" font-weight=\"bold\">\(UsageChart.xml(f.title))</text>"
            s +=
                "<text x=\"\(x + 10)\" y=\"\(y + 56)\" font-size=\"11\"><tspan fill=\"#1f5fb4\">rx \(UsageChart.xml(q.marked(Units.bytes(c.rxBytes))))</tspan><tspan dx=\"12\" fill=\"#b35806\">tx \(UsageChart.xml(q.marked(Units.bytes(c.txBytes))))</tspan></text>"
            s +=
                "<text x=\"\(x + 10)\" y=\"\(y + 76)\" font-size=\"15\" font-weight=\"bold\">\(UsageChart.xml(q.marked(Units.bytes(f.totalBytes))))</text>"
            let right = f.averageBitsPerSecond.map { "avg " + Self.bits($0) } ?? "total, \(q.name)"
            s += "<text x=\"\(x + 266)\" y=\"\(y + 76)\" text-anchor=\"end\" font-size=\"11\" fill=\"#555555\">\(UsageChart.xml(right))</text>"
            if let l = f.limit, let p = f.percentUsed {
                // The share of the limit: a bar to the limit's line at 80% of
                // the width, so use past the limit shows past the line.
                let barX = Double(x + 10), full = 256.0, line = full * 0.8
                let used = min(full, line * p / 100)
                let color = p >= 100 ? "#d62728" : "#2ca02c"
                s += "<rect x=\"\(UsageChart.f(barX))\" y=\"\(y + 84)\" width=\"\(UsageChart.f(full))\" height=\"5\" fill=\"#e3e7ee\"/>"
                s += "<rect x=\"\(UsageChart.f(barX))\" y=\"\(y + 84)\" width=\"\(UsageChart.f(used))\" height=\"5\" fill=\"\(color)\"/>"
                s +=
                    "<line class=\"limit\" x1=\"\(UsageChart.f(barX + line))\" y1=\"\(y + 81)\" x2=\"\(UsageChart.f(barX + line))\" y2=\"\(y + 92)\" stroke=\"#d62728\" stroke-width=\"2\"/>"
                let words = "\(q.marked(Self.percent(p))) of the \(l.kind == "quota" ? "quota" : l.kind + " limit") \(Units.bytes(l.bytes))"
                s += "<text x=\"\(x + 266)\" y=\"\(y + 97)\" text-anchor=\"end\" font-size=\"9\" fill=\"#333333\">\(UsageChart.xml(words))</text>"
            }
            s += "</g>\n"
        }
        s += hours(i, y: y + 106)
        s += "</g>\n"
        return s
    }

    /// The last 24 local hours (the current one last), stacked rx/tx, the
    /// hour limit's line where a plan sets one.
    func hours(_ i: UsageSummary.Interface, y: Int) -> String {
        let zone = summary.zone
        let rows = i.hours
        let left = 92, right = Self.width - 24, plotTop = y + 16, plotBottom = y + 88
        let limit = i.hourLimit
        let peak = max(rows.map(\.totalBytes).max() ?? 0, 1)
        let axis = UsageChart.axis(peak.saturatingAdd(peak / 20))
        func yOf(_ v: UInt64) -> Double { Double(plotBottom) - min(Double(v) / axis.top, 1.04) * Double(plotBottom - plotTop) }
        var peakData = ""
        if let p = i.peakHourBitsPerSecond { peakData = " data-peak-hour-bps=\"\(Units.fixed(p, 0))\"" }
        var s = "<g class=\"hours\"\(peakData)>"
        s += "<text x=\"\(left)\" y=\"\(y + 8)\" font-size=\"12\" font-weight=\"bold\">The last 24 hours, by hour</text>"
        s +=
            "<text x=\"\(right)\" y=\"\(y + 8)\" text-anchor=\"end\" font-size=\"11\" fill=\"#555555\">peak hour \(UsageChart.xml(Self.bits(i.peakHourBitsPerSecond)))</text></g>\n"
        for t in 0...axis.ticks {
            let yy = UsageChart.f(Double(plotBottom) - Double(t) / Double(axis.ticks) * Double(plotBottom - plotTop))
            s += "<line x1=\"\(left)\" y1=\"\(yy)\" x2=\"\(right)\" y2=\"\(yy)\" stroke=\"#dddddd\"/>"
            s += "<text x=\"\(left - 6)\" y=\"\(yy)\" dy=\"4\" text-anchor=\"end\" font-size=\"10\">\(UsageChart.xml(axis.label(t)))</text>\n"
        }
        s += "<line x1=\"\(left)\" y1=\"\(plotBottom)\" x2=\"\(right)\" y2=\"\(plotBottom)\" stroke=\"#000000\"/>\n"
        let slot = Double(right - left) / 24
        let barWidth = slot * 0.72
        for (n, r) in rows.enumerated() {
            let x = Double(left) + slot * Double(n) + (slot - barWidth) / 2
            let rxTop = yOf(r.counters.rxBytes), totalTop = yOf(r.totalBytes)
            let tip = "\(r.period.label): rx \(Units.bytes(r.counters.rxBytes)), tx \(Units.bytes(r.counters.txBytes)), \(r.quality.name)"
            var data = "data-start=\"\(zone.rfc3339(r.period.start))\" data-rx=\"\(r.counters.rxBytes)\" data-tx=\"\(r.counters.txBytes)\""
            data += " data-quality=\"\(r.quality.name)\""
            if let limit {
                data += " data-percent=\"\(Units.fixed(Double(limit.direction.used(r.counters)) / Double(limit.bytes) * 100, 1))\""
            }
            s += "<g class=\"hour\" \(data)><title>\(UsageChart.xml(tip))</title>"
            s +=
                "<rect x=\"\(UsageChart.f(x))\" y=\"\(UsageChart.f(rxTop))\" width=\"\(UsageChart.f(barWidth))\" height=\"\(UsageChart.f(Double(plotBottom) - rxTop))\" fill=\"#3b7dd8\"/>"
            s +=
                "<rect x=\"\(UsageChart.f(x))\" y=\"\(UsageChart.f(totalTop))\" width=\"\(UsageChart.f(barWidth))\" height=\"\(UsageChart.f(rxTop - totalTop))\" fill=\"#f28e2b\"/>"
            if r.quality == .lowerBound {
                s +=
                    "<rect x=\"\(UsageChart.f(x))\" y=\"\(UsageChart.f(totalTop))\" width=\"\(UsageChart.f(barWidth))\" height=\"\(UsageChart.f(Double(plotBottom) - totalTop))\" fill=\"url(#lower)\"/>"
                s +=
                    "<text x=\"\(UsageChart.f(x + barWidth / 2))\" y=\"\(UsageChart.f(totalTop - 3))\" text-anchor=\"middle\" font-size=\"10\">≥</text>"
            }
            s += "</g>"
            if n % 3 == 0 || n == rows.count - 1 {
                let c = zone.civil(r.period.start)
                s +=
                    "<text x=\"\(UsageChart.f(x + barWidth / 2))\" y=\"\(plotBottom + 12)\" text-anchor=\"middle\" font-size=\"10\">\(LocalZone.pad(c.hour)):00</text>"
            }
            s += "\n"
        }
        if let limit {
            // A limit within the scale is a line at its height; one above
            // it (the bars would be flat under it) is said at the top.
            var g =
                "<g class=\"limit\" data-period=\"hour\" data-limit=\"\(limit.bytes)\" data-limit-direction=\"\(limit.direction.rawValue)\""
            let words = "hour limit \(Units.bytes(limit.bytes)) \(limit.direction.rawValue)"
            if Double(limit.bytes) <= axis.top {
                let ly = UsageChart.f(yOf(limit.bytes))
                g +=
                    "><line x1=\"\(left)\" y1=\"\(ly)\" x2=\"\(right)\" y2=\"\(ly)\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>"
                g += "<text x=\"\(left + 4)\" y=\"\(ly)\" dy=\"-3\" font-size=\"10\" fill=\"#d62728\">\(UsageChart.xml(words))</text></g>\n"
            } else {
                g += " data-above-scale=\"true\">"
                g +=
                    "<text x=\"\(right - 200)\" y=\"\(y + 8)\" text-anchor=\"end\" font-size=\"10\" fill=\"#d62728\">\(UsageChart.xml(words)), above the scale</text></g>\n"
            }
            s += g
        }
        return s
    }
}
