import Foundation
import IfmeterCore
import IfmeterOutput
import Testing

/// Rough edge 10: the chart's axis is round (1-2-5 steps in one unit, never
/// "1000 MiB"), and a quota of one direction is drawn against that direction.
@Suite struct UsageChartAxisTests {
    static let noon: Int64 = 1_796_040_000 // 2026-12-01T12:00:00Z

    func table(_ rx: [UInt64], _ tx: [UInt64], plan: Plan? = nil, granularity: UsagePeriodKind = .day) -> UsageTable {
        let slices = zip(rx, tx).enumerated().map { n, pair in
            UsageSlice(
                name: "wan0", kind: .ethernet, start: Self.noon - Int64(rx.count - n) * 86400, seconds: 3600,
                counters: Counters(rxBytes: pair.0, txBytes: pair.1, rxPackets: 1, txPackets: 1), quality: .exact)
        }
        return UsageTable(slices: slices, plans: plan.map { [$0] } ?? [], granularity: granularity, zone: .utc, now: Self.noon)
    }

    /// The y axis labels of a chart, bottom to top.
    func ticks(_ svg: String) -> [String] {
        let pattern = try! NSRegularExpression(pattern: #"dy="4" text-anchor="end" font-size="11">([^<]+)</text>"#)
        return pattern.matches(in: svg, range: NSRange(svg.startIndex..., in: svg)).compactMap { m in
            Range(m.range(at: 1), in: svg).map { String(svg[$0]) }
        }
    }

    static let peaks: [UInt64] = [
        2_300_000_000, 900 * 1_048_576, 1000 * 1_048_576, 1023 * 1_048_576, 5 * 1024, 700, 3 * 1_073_741_824 + 1,
        47 * 1_099_511_627_776, 1, 999,
    ]

    @Test(arguments: peaks)
    func ticksAreRoundStepsInOneUnit(peak: UInt64) throws {
        let svg = UsageChart(table: table([peak / 2, peak / 4], [peak / 2, peak / 4])).svg()
        let labels = ticks(svg)
        #expect(labels.count >= 2, "\(labels)")
        var units = Set<String>()
        var values: [Double] = []
        for label in labels.dropFirst() {
            let parts = label.split(separator: " ")
            #expect(parts.count == 2, "a number and a unit: \(label)")
            guard parts.count == 2, let value = Double(parts[0]) else { continue }
            units.insert(String(parts[1]))
            values.append(value)
            #expect(value < 1000, "never 1000 of a unit (the next unit says it): \(labels)")
        }
        #expect(units.count == 1, "one unit on the axis: \(labels)")
        guard let step = values.first else { return }
        let mantissa = step / pow(10, floor(log10(step)))
        #expect([1.0, 2.0, 5.0].contains { abs($0 - mantissa) < 1e-9 }, "a 1-2-5 step: \(labels)")
        for (n, v) in values.enumerated() {
            #expect(abs(v - step * Double(n + 1)) < 1e-9, "evenly spaced: \(labels)")
        }
        #expect(labels.first == "0", "the axis starts at 0: \(labels)")
        #expect(!svg.contains(">1000 "), "\(labels)")
    }

    @Test func aTxQuotaIsDrawnAgainstTxBars() throws {
        let plan = Plan(pattern: "wan0", cycleStartDay: 1, quotaBytes: 1_000_000, direction: .tx)
        let svg = UsageChart(table: table([9_000_000], [600_000], plan: plan, granularity: .cycle)).svg()
        #expect(!svg.contains("bytes (rx + tx)"), "the quota counts tx only: the bars must not be rx + tx")
        #expect(svg.contains("sent (tx)") && svg.contains("what the quota counts"))
        // The tallest tick covers tx (600 kB) and the quota, not rx + tx (9.6 MB).
        let top = ticks(svg).last ?? ""
        #expect(top == "1.5 MiB", "scaled to the quota (976 KiB) and tx, not to 9.6 MB: \(ticks(svg))")
        // Both directions: the bars are rx + tx, as before.
        let both = Plan(pattern: "wan0", cycleStartDay: 1, quotaBytes: 1_000_000, direction: .both)
        #expect(UsageChart(table: table([9_000_000], [600_000], plan: both, granularity: .cycle)).svg().contains("bytes (rx + tx)"))
    }
}
