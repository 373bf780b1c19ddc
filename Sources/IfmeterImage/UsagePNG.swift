import IfmeterCore
import IfmeterOutput

/// `usage --png FILE`: the usage charts as PNG images in vnstati's spirit
/// and sizes, drawn with cairo. A table's periods (five minutes to years,
/// cycles, top days) become one panel of stacked rx/tx bars per interface,
/// as `--svg` draws them; `--summary` becomes vnstati -s's picture, about
/// 500 × 200 per interface. Lower bounds are hatched and marked ≥, a
/// plan's quota and limits are red lines, times are local, and the
/// estimate caveat is in the picture. The figures drawn are in the PNG as
/// a `tEXt` chunk (`ifmeter:figures`, compact JSON with `usage --format
/// json`'s names), so a script or a test reads the numbers the bars show.
package enum UsagePNG {
    package static let figuresKey = "ifmeter:figures"

    static let rx: UInt32 = 0x3B7DD8
    static let tx: UInt32 = 0xF28E2B
    static let red: UInt32 = 0xD62728
    static let grid: UInt32 = 0xDDDDDD
    static let ink: UInt32 = 0x222222
    static let header: UInt32 = 0x2F3B4C

    // MARK: Charts by period

    static let chartWidth = 720
    static let chartPanel = 232
    static let chartTop = 40
    static let chartFoot = 40

    /// The table's periods, at most `maxBars` (the latest) per interface.
    package static func chart(_ table: UsageTable, maxBars: Int = 48) throws(CairoError) -> [UInt8] {
        let panels = max(1, table.interfaces.count)
        let height = chartTop + panels * chartPanel + chartFoot
        let png = try Cairo.png(width: chartWidth, height: height) { p in
            p.fill(0, 0, Double(chartWidth), Double(height), 0xFFFFFF)
            p.text("Traffic by \(UsageChart.title(table.granularity)) (estimates)", 12, 22, size: 14, bold: true)
            legend(p, x: Double(chartWidth) - 330, y: 12, limit: "quota")
            if table.interfaces.isEmpty { p.text("No usage recorded yet.", 12, Double(chartTop + 30)) }
            for (n, i) in table.interfaces.enumerated() {
                chartPanel(p, table, i, rows: Array(i.rows.suffix(maxBars)), y: Double(chartTop + n * chartPanel))
            }
            caveat(p, y: Double(height - 24), width: Double(chartWidth))
        }
        var bars: [JSONValue] = []
        for i in table.interfaces {
            let rows = i.rows.suffix(maxBars).map { r in
                row(label: r.period.label, start: table.zone.rfc3339(r.period.start), counters: r.counters, quality: r.quality)
            }
            bars.append(.object(["name": .string(i.stored), "periods": .array(rows)]))
        }
        let figures: JSONValue = .object([
            "kind": .string("chart"), "granularity": .string(table.granularity.rawValue), "interfaces": .array(bars),
        ])
        return try withFigures(figures, png)
    }

    static func row(label: String, start: String?, counters: Counters, quality: Quality) -> JSONValue {
        var o: [String: JSONValue] = [
            "period": .string(label), "rx_bytes": .number(String(counters.rxBytes)), "tx_bytes": .number(String(counters.txBytes)),
            "quality": .string(quality.name),
        ]
        if let start { o["start"] = .string(start) }
        return .object(o)
    }

    static func withFigures(_ figures: JSONValue, _ png: [UInt8]) throws(CairoError) -> [UInt8] {
        do {
            return try PNGChunks.inserting(text: JSONWriter().string(figures), key: figuresKey, into: png)
        } catch {
            throw CairoError(call: "cairo_surface_write_to_png_stream", status: "wrote no valid PNG: \(error)")
        }
    }

    static func legend(_ p: Painter, x: Double, y: Double, limit: String) {
        p.fill(x, y, 10, 10, rx)
        p.text("rx", x + 14, y + 9, size: 10)
        p.fill(x + 40, y, 10, 10, tx)
        p.text("tx", x + 54, y + 9, size: 10)
        p.fill(x + 80, y, 10, 10, 0xFFFFFF)
        p.hatch(x + 80, y, 10, 10)
        p.frame(x + 80, y, 10, 10, ink)
        p.text("≥ lower bound", x + 94, y + 9, size: 10)
        p.line(x + 190, y + 5, x + 214, y + 5, red, width: 2, dash: [5, 3])
        p.text(limit, x + 218, y + 9, size: 10)
    }

    static func caveat(_ p: Painter, y: Double, width: Double) {
        p.paragraph(
            Caveat.estimate + " Local time. ≥ marks a lower bound: the true value is at least the bar.", 12, y, width: width - 24, size: 9,
            0x333333)
    }

    static func chartPanel(_ p: Painter, _ table: UsageTable, _ i: UsageTable.Interface, rows: [UsageTable.Row], y: Double) {
        var title = TerminalText.escaped(i.stored) + " (" + i.kindText + ")"
        let quota = table.granularity == .cycle ? i.plan?.quotaBytes : nil
        if let plan = i.plan, table.granularity == .cycle {
            title += ": cycle from day \(plan.cycleStartDay)"
            if let q = plan.quotaBytes { title += ", quota \(Units.bytes(q)) \(plan.direction.rawValue)" }
        }
        if i.rows.count > rows.count { title += " — the last \(rows.count) of \(i.rows.count)" }
        p.text(title, 12, y + 16, size: 12, bold: true)
        let only: Plan.Direction? = quota != nil && i.plan?.direction != .both ? i.plan?.direction : nil
        let drawn = rows.map { r in
            Bar(counters: r.counters, quality: r.quality, label: short(r.period.label), only: only)
        }
        if let only { p.text("bars: \(only.rawValue) only, what the quota counts", Double(chartWidth) - 12, y + 16, size: 10, anchor: .end) }
        bars(p, drawn, left: 84, right: Double(chartWidth) - 14, top: y + 26, bottom: y + Double(chartPanel) - 52, limit: quota, limitText: "quota")
    }

    /// A bar's figures: stacked rx below tx, or one direction alone.
    struct Bar {
        var counters: Counters
        var quality: Quality
        var label: String
        var only: Plan.Direction? = nil

        var height: UInt64 { only?.used(counters) ?? counters.rxBytes.saturatingAdd(counters.txBytes) }
    }

    /// Bars between `left`/`right` and `top`/`bottom`, a y axis in bytes,
    /// labels under them (as many as fit) and `limit`'s dashed line.
    static func bars(
        _ p: Painter, _ bars: [Bar], left: Double, right: Double, top: Double, bottom: Double, limit: UInt64?, limitText: String,
        limitInScale: Bool = true, labelEvery given: Int? = nil, labelSize: Double = 9
    ) {
        // A quota is in the scale (as the SVG chart draws it); a limit not
        // in it, above the bars, is said at the top instead of flattening them.
        let peak = max(bars.map(\.height).max() ?? 0, limitInScale ? limit ?? 0 : 0, 1)
        let axis = UsageChart.axis(peak.saturatingAdd(peak / 20))
        func yOf(_ v: UInt64) -> Double { bottom - Double(v) / axis.top * (bottom - top) }
        for t in 0...axis.ticks {
            let yy = (bottom - Double(t) / Double(axis.ticks) * (bottom - top)).rounded() + 0.5
            p.line(left, yy, right, yy, grid)
            p.text(axis.label(t), left - 5, yy + 3, size: 9, anchor: .end)
        }
        p.line(left + 0.5, top, left + 0.5, bottom, 0x000000)
        p.line(left, bottom + 0.5, right, bottom + 0.5, 0x000000)
        let slot = (right - left) / Double(max(bars.count, 1))
        let width = min(40, max(1, slot * 0.72))
        let every = given ?? max(1, Int((Double(bars.count) * 64 / (right - left)).rounded(.up)))
        for (n, b) in bars.enumerated() {
            let x = left + slot * Double(n) + (slot - width) / 2
            let bottomPart = b.only.map { $0.used(b.counters) } ?? b.counters.rxBytes
            let rxTop = yOf(bottomPart), totalTop = yOf(b.height)
            p.fill(x, rxTop, width, bottom - rxTop, b.only == .tx ? tx : rx)
            if b.only == nil { p.fill(x, totalTop, width, rxTop - totalTop, tx) }
            if b.quality == .lowerBound {
                p.hatch(x, min(totalTop, bottom - 3), width, max(bottom - totalTop, 3))
                p.text("≥", x + width / 2, min(totalTop, bottom - 3) - 2, size: 9, anchor: .middle)
            }
            if n % every == 0 || (given != nil && n == bars.count - 1) {
                p.text(b.label, x + width / 2, bottom + 12, size: labelSize, anchor: .middle)
            }
        }
        if let limit, Double(limit) > axis.top {
            p.text("\(limitText) \(Units.bytes(limit)), above the scale", left + 4, top + 8, size: 9, red)
        } else if let limit {
            let ly = yOf(limit)
            p.line(left, ly, right, ly, red, width: 2, dash: [5, 3])
            p.text("\(limitText) \(Units.bytes(limit))", left + 4, ly - 3, size: 9, red)
        }
        if bars.isEmpty { p.text("No periods.", left + 10, (top + bottom) / 2) }
    }

    /// An axis label: an hour's or five minutes' time of day, a day's date
    /// without its year, others whole.
    static func short(_ label: String) -> String {
        let short = UsageChart.short(label)
        if short.count > 10, let t = short.firstIndex(where: { $0 == "T" || $0 == " " }) {
            return String(short[short.index(after: t)...].prefix(5))
        }
        if short.count == 10, short.dropFirst(4).first == "-" { return String(short.dropFirst(5)) }
        return short
    }

    // MARK: The summary (vnstati -s)

    static let summaryWidth = 500
    static let summaryPanel = 200
    static let summaryTop = 28
    static let summaryFoot = 34

    package static func summary(_ s: UsageSummary) throws(CairoError) -> [UInt8] {
        let panels = max(1, s.interfaces.count)
        let height = summaryTop + panels * summaryPanel + summaryFoot
        let asOf = s.asOfWords
        let png = try Cairo.png(width: summaryWidth, height: height) { p in
            p.fill(0, 0, Double(summaryWidth), Double(height), 0xFFFFFF)
            p.text("Traffic summary (estimates), \(asOf)", 8, 18, size: 10, bold: true)
            if s.interfaces.isEmpty { p.text("No usage recorded yet.", 8, Double(summaryTop + 30)) }
            for (n, i) in s.interfaces.enumerated() { summaryPanel(p, s, i, y: Double(summaryTop + n * summaryPanel)) }
            p.paragraph(
                Caveat.estimate + " Local time. ≥: a lower bound. Rates: averages over the period so far. Red: limits.", 8,
                Double(height - summaryFoot + 12), width: Double(summaryWidth) - 16, size: 8, 0x333333)
        }
        var list: [JSONValue] = []
        for i in s.interfaces {
            let figures = i.figures.map { f -> JSONValue in
                var o: [String: JSONValue] = [
                    "period": .string(f.key), "rx_bytes": .number(String(f.usage.counters.rxBytes)),
                    "tx_bytes": .number(String(f.usage.counters.txBytes)), "quality": .string(f.usage.quality.name),
                ]
                if let period = f.period { o["start"] = .string(s.zone.rfc3339(period.start)) }
                if let r = f.averageBitsPerSecond { o["average_bits_per_second"] = .number(Units.fixed(r, 0)) }
                if let l = f.limit, let pct = f.percentUsed {
                    o["limit_bytes"] = .number(String(l.bytes))
                    o["limit"] = .string(l.kind)
                    o["percent_used"] = .number(Units.fixed(pct, 1))
                }
                return .object(o)
            }
            let hours = i.hours.map { h in
                row(label: h.period.label, start: s.zone.rfc3339(h.period.start), counters: h.counters, quality: h.quality)
            }
            var o: [String: JSONValue] = ["name": .string(i.name), "figures": .array(figures), "hours": .array(hours)]
            if let peak = i.peakHourBitsPerSecond { o["peak_hour_bits_per_second"] = .number(Units.fixed(peak, 0)) }
            if let l = i.hourLimit { o["hour_limit_bytes"] = .number(String(l.bytes)) }
            list.append(.object(o))
        }
        var figures: [String: JSONValue] = ["kind": .string("summary"), "interfaces": .array(list)]
        figures["as_of"] = .string(s.zone.rfc3339(s.asOf))
        return try withFigures(.object(figures), png)
    }

    static func summaryPanel(_ p: Painter, _ s: UsageSummary, _ i: UsageSummary.Interface, y: Double) {
        let w = Double(summaryWidth)
        p.fill(4, y, w - 8, 18, header)
        p.text(i.title, 10, y + 13, size: 10, bold: true, 0xFFFFFF)
        // The figures: a row each, vnstati's columns.
        let cols: [Double] = [10, 262, 334, 410, 490]
        for (n, head) in ["", "rx", "tx", "total", "avg. rate"].enumerated() {
            p.text(head, cols[n], y + 31, size: 9, bold: true, 0x555555, anchor: n == 0 ? .start : .end)
        }
        var limits: [(String, String, Double)] = []
        for (n, f) in i.figures.enumerated() {
            let ry = y + 46 + Double(n) * 15
            let q = f.usage.quality
            if n % 2 == 0 { p.fill(4, ry - 11, w - 8, 15, 0xF4F6FA) }
            p.text(f.title, cols[0], ry, size: 9, ink)
            p.text(q.marked(Units.bytes(f.usage.counters.rxBytes)), cols[1], ry, size: 9, 0x1F5FB4, anchor: .end)
            p.text(q.marked(Units.bytes(f.usage.counters.txBytes)), cols[2], ry, size: 9, 0xB35806, anchor: .end)
            p.text(q.marked(Units.bytes(f.totalBytes)), cols[3], ry, size: 9, bold: true, anchor: .end)
            let rate = f.averageBitsPerSecond.map { Units.rate(bytesPerSecond: $0 / 8, bits: true) } ?? "-"
            p.text(rate, cols[4], ry, size: 9, anchor: .end)
            if let pct = f.percentUsed, let l = f.limit {
                let name = l.kind == "quota" ? "quota" : l.kind + " limit"
                limits.append(
                    (f.key == "today" ? "today" : "cycle", "\(q.marked(Units.fixed(pct, 1) + "%")) of the \(name) \(Units.bytes(l.bytes))", pct))
            }
        }
        // The share of each limit used: words, then a bar whose red line
        // is the limit (at 80% of the bar, so use past it shows past it).
        var x = 10.0
        for (n, (key, words, pct)) in limits.enumerated() {
            let text = (n == 0 ? "Used: " : "") + key + " " + words
            p.text(text, x, y + 103, size: 8, 0x333333)
            x += p.textWidth(text, size: 8) + 4
            let full = 40.0, line = full * 0.8
            p.fill(x, y + 97, full, 6, 0xE3E7EE)
            p.fill(x, y + 97, min(full, line * pct / 100), 6, pct >= 100 ? red : 0x2CA02C)
            p.line(x + line, y + 94, x + line, y + 106, red, width: 2)
            x += full + 10
        }
        // The last 24 hours, with the peak hour's rate and the hour limit.
        let peak = i.peakHourBitsPerSecond.map { Units.rate(bytesPerSecond: $0 / 8, bits: true) } ?? "-"
        p.text("last 24 hours; peak hour \(peak)", w - 10, y + 114, size: 9, 0x555555, anchor: .end)
        let bars = i.hours.map { h in
            Bar(counters: h.counters, quality: h.quality, label: LocalZone.pad(s.zone.civil(h.period.start).hour))
        }
        UsagePNG.bars(
            p, bars, left: 58, right: w - 10, top: y + 120, bottom: y + Double(summaryPanel) - 14, limit: i.hourLimit?.bytes, limitText: "hour limit",
            limitInScale: false, labelEvery: 3, labelSize: 8)
    }
}
