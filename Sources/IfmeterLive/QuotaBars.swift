import IfmeterCore
import IfmeterSystem

extension LiveRenderer {
    /// A quota bar per planned interface with a quota (live with --state):
    /// the current cycle's use as of the last save, ≥ when a lower bound.
    /// At most three, and only on screens tall enough for the rows too.
    func quotaLines(_ model: LiveModel, width: Int, height: Int) -> [Line] {
        let planned = model.plans.filter { $0.quotaBytes != nil }
        guard !planned.isEmpty, height >= 16 else { return [] }
        let shown = Array(planned.prefix(3))
        return shown.enumerated().map { n, p in
            let quota = p.quotaBytes ?? 1
            let ratio = quota == 0 ? 1 : Double(p.usedBytes) / Double(quota)
            let mark = p.lowerBound ? "≥" : ""
            let name = truncate(SeriesKey(netns: p.netns, name: p.name).display, 16)
            let figures = " \(mark)\(Units.fixed(ratio * 100, 1))% of \(Units.bytes(quota)) \(p.direction.rawValue)"
            let end = p.lastDay
            let tail =
                width >= 90 ? " · cycle ends \(end)" + (n == 0 && planned.count > shown.count ? " · +\(planned.count - shown.count) more" : "") : ""
            let barWidth = max(6, min(30, width - 10 - name.count - figures.count - tail.count))
            let filled = min(barWidth, Int((min(ratio, 1) * Double(barWidth)).rounded(.down)))
            var line = Line(width: width, ascii: ascii).text("quota ", bold).text(pad(name, 16)).text(" [")
            line = line.text(String(repeating: "█", count: filled), ratio > 1 ? danger : (ratio > 0.9 ? warning : rxStyle))
            line = line.text(String(repeating: "░", count: barWidth - filled), dim).text("]")
            line = line.text(figures, ratio > 1 ? danger : plain)
            if ratio > 1 { line = line.text(" OVER", danger) }
            return line.text(tail, dim)
        }
    }
}
