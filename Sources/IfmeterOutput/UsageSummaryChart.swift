import IfmeterCore

/// `usage --svg FILE --summary`: one picture per state file (vnstati -s):
/// per interface today, this cycle (by its plan; the calendar month
/// without one), all time, and the last 24 hours by hour as stacked rx/tx
/// bars. Every figure carries its exact bytes and quality in `data-`
/// attributes, so a test (or a script) reads the same numbers
/// `usage --format json` gives.
public struct UsageSummaryChart: Sendable {
    public var slices: [UsageSlice]
    public var plans: [Plan]
    public var names: [String]
    public var kinds: [String: InterfaceKind]
    public var zone: LocalZone
    public var now: Int64

    static let width = 900
    static let panelHeight = 290
    static let top = 58

    public init(slices: [UsageSlice], plans: [Plan], names: [String] = [], kinds: [String: InterfaceKind] = [:], zone: LocalZone, now: Int64) {
        self.slices = slices
        self.plans = plans
        self.names = names
        self.kinds = kinds
        self.zone = zone
        self.now = now
    }

    struct Figure {
        var title: String
        var key: String
        var period: UsagePeriod?
        var usage: PeriodUsage
    }

    public func svg() -> String {
        var byName = Dictionary(grouping: slices, by: \.name)
        for name in names where byName[name] == nil { byName[name] = [] }
        let ordered = byName.keys.sorted { StoreKey.key($0) < StoreKey.key($1) }
        let panels = max(1, ordered.count)
        let height = Self.top + panels * Self.panelHeight + 40
        let w = Self.width
        var s = """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(w)" height="\(height)" viewBox="0 0 \(w) \(height)" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">
            <title>ifmeter usage summary (estimates)</title>
            <defs><pattern id="lower" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff" fill-opacity="0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#222222" stroke-width="2" stroke-opacity="0.55"/></pattern></defs>
            <rect x="0" y="0" width="\(w)" height="\(height)" fill="#ffffff"/>
            <text x="24" y="26" font-size="16" font-weight="bold">Traffic summary (estimates), as of \(UsageChart.xml(zone.rfc3339(now)))</text>
            <g font-size="11"><rect x="560" y="36" width="12" height="12" fill="#3b7dd8"/><text x="576" y="46">received (rx)</text><rect x="660" y="36" width="12" height="12" fill="#f28e2b"/><text x="676" y="46">sent (tx)</text><rect x="750" y="36" width="12" height="12" fill="url(#lower)" stroke="#222222"/><text x="766" y="46">≥ lower bound</text></g>

            """
        if ordered.isEmpty { s += "<text x=\"24\" y=\"\(Self.top + 40)\">No usage recorded yet.</text>\n" }
        for (n, name) in ordered.enumerated() {
            s += panel(name, byName[name] ?? [], y: Self.top + n * Self.panelHeight)
        }
        s +=
            "<text x=\"24\" y=\"\(height - 22)\" font-size=\"11\" fill=\"#333333\">\(UsageChart.xml(Caveat.estimate))</text>\n"
        s +=
            "<text x=\"24\" y=\"\(height - 8)\" font-size=\"11\" fill=\"#333333\">Local time. ≥ marks a lower bound: the true value is at least the figure.</text>\n"
        s += "</svg>\n"
        return s
    }

    func panel(_ name: String, _ mine: [UsageSlice], y: Int) -> String {
        let calendar = PeriodCalendar(zone: zone)
        let plan = Plan.find(for: name, in: plans)
        func usage(_ kind: UsagePeriodKind, cycleDay: Int = 1) -> (UsagePeriod, PeriodUsage) {
            let period = calendar.period(kind, containing: now, cycleDay: cycleDay)
            let found = calendar.group(mine, by: kind, cycleDay: cycleDay).first { $0.period.start == period.start }
            return (period, found ?? PeriodUsage(period: period, counters: .zero, quality: .exact))
        }
        var all = PeriodUsage(period: UsagePeriod(label: "all", start: 0, end: 0), counters: .zero, quality: .exact)
        for slice in mine { all.add(slice) }
        let (day, today) = usage(.day)
        let (cycle, thisCycle) = usage(.cycle, cycleDay: plan?.cycleStartDay ?? 1)
        let since = mine.map(\.start).min().map { calendar.period(.day, containing: $0).label }
        let figures = [
            Figure(title: "Today, \(day.label)", key: "today", period: day, usage: today),
            Figure(
                title: plan != nil
                    ? "This cycle, \(cycle.label) – \(PeriodCalendar.dayLabel(zone, cycle.end))"
                    : "This month, \(calendar.period(.month, containing: now).label)",
                key: "cycle", period: cycle, usage: thisCycle),
            Figure(title: "All time" + (since.map { ", since \($0)" } ?? ""), key: "all", period: nil, usage: all),
        ]
        let kind = mine.last?.kind ?? kinds[name]
        var s = "<g class=\"interface\" data-name=\"\(UsageChart.xml(name))\">\n"
        var title = TerminalText.escaped(name) + " (" + (kind?.rawValue ?? "kind not known yet") + ")"
        if let plan {
            title += ": plan '\(TerminalText.escaped(plan.pattern))', cycle from day \(plan.cycleStartDay)"
            if let q = plan.quotaBytes { title += ", quota \(Units.bytes(q)) \(plan.direction.rawValue)" }
        }
        s += "<text x=\"24\" y=\"\(y + 20)\" font-size=\"14\" font-weight=\"bold\">\(UsageChart.xml(title))</text>\n"
        for (n, f) in figures.enumerated() {
            let x = 24 + n * 288
            let q = f.usage.quality
            let c = f.usage.counters
            let total = c.rxBytes.saturatingAdd(c.txBytes)
            s +=
                "<g class=\"figure\" data-period=\"\(f.key)\" data-rx=\"\(c.rxBytes)\" data-tx=\"\(c.txBytes)\" data-total=\"\(total)\" data-quality=\"\(q.name)\""
                + (f.period.map { " data-start=\"\(zone.rfc3339($0.start))\"" } ?? "") + ">"
            s += "<rect x=\"\(x)\" y=\"\(y + 30)\" width=\"276\" height=\"78\" rx=\"6\" fill=\"#f4f6fa\" stroke=\"#c8cfdc\"/>"
            s += "<text x=\"\(x + 10)\" y=\"\(y + 48)\" font-size=\"12\" font-weight=\"bold\">\(UsageChart.xml(f.title))</text>"
            s +=
                "<text x=\"\(x + 10)\" y=\"\(y + 68)\"><tspan fill=\"#1f5fb4\">rx \(UsageChart.xml(q.marked(Units.bytes(c.rxBytes))))</tspan><tspan dx=\"14\" fill=\"#b35806\">tx \(UsageChart.xml(q.marked(Units.bytes(c.txBytes))))</tspan></text>"
            s +=
                "<text x=\"\(x + 10)\" y=\"\(y + 94)\" font-size=\"16\" font-weight=\"bold\">\(UsageChart.xml(q.marked(Units.bytes(total))))</text>"
            s += "<text x=\"\(x + 266)\" y=\"\(y + 94)\" text-anchor=\"end\" font-size=\"11\" fill=\"#555555\">total, \(q.name)</text></g>\n"
        }
        s += hours(mine, y: y + 124)
        s += "</g>\n"
        return s
    }

    /// The last 24 local hours (the current one last), stacked rx/tx.
    func hours(_ mine: [UsageSlice], y: Int) -> String {
        let calendar = PeriodCalendar(zone: zone)
        let grouped = Dictionary(calendar.group(mine, by: .hour).map { ($0.period.start, $0) }, uniquingKeysWith: { a, _ in a })
        var periods: [UsagePeriod] = []
        var t = now
        while periods.count < 24 {
            let p = calendar.period(.hour, containing: t)
            if periods.last?.start != p.start { periods.append(p) }
            t = p.start - 1
        }
        periods.reverse()
        let rows = periods.map { grouped[$0.start] ?? PeriodUsage(period: $0, counters: .zero, quality: .exact) }
        let left = 92, right = Self.width - 24, plotTop = y + 18, plotBottom = y + 128
        let peak = max(rows.map(\.totalBytes).max() ?? 0, 1)
        let axis = UsageChart.axis(peak.saturatingAdd(peak / 20))
        func yOf(_ v: UInt64) -> Double { Double(plotBottom) - Double(v) / axis.top * Double(plotBottom - plotTop) }
        var s = "<text x=\"\(left)\" y=\"\(y + 10)\" font-size=\"12\" font-weight=\"bold\">The last 24 hours, by hour</text>\n"
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
            s +=
                "<g class=\"hour\" data-start=\"\(zone.rfc3339(r.period.start))\" data-rx=\"\(r.counters.rxBytes)\" data-tx=\"\(r.counters.txBytes)\" data-quality=\"\(r.quality.name)\"><title>\(UsageChart.xml(tip))</title>"
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
                    "<text x=\"\(UsageChart.f(x + barWidth / 2))\" y=\"\(plotBottom + 14)\" text-anchor=\"middle\" font-size=\"10\">\(LocalZone.pad(c.hour)):00</text>"
            }
            s += "\n"
        }
        return s
    }
}
