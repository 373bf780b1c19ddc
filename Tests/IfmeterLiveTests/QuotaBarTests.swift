import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterLive
import Testing

/// Quota bars for planned interfaces (live with --state).
@Suite struct QuotaBarTests {
    func model(_ plans: [PlanGauge]) -> LiveModel {
        var model = LiveModel(host: "h", source: "netlink", interval: 1)
        model.plans = plans
        return model
    }

    func gauge(_ name: String, used: UInt64, quota: UInt64?, lowerBound: Bool = false) -> PlanGauge {
        PlanGauge(
            name: name, netns: "", kind: .ethernet, direction: .both, quotaBytes: quota, usedBytes: used, lowerBound: lowerBound,
            cycleStart: 1_796_000_000, cycleEnd: 1_798_000_000, lastDay: "2026-12-23")
    }

    @Test func aBarPerQuotaWithItsShareAndLowerBounds() {
        let screen = LiveRenderer(color: false).render(
            model([
                gauge("eth0", used: 250, quota: 1000), gauge("wwan0", used: 1500, quota: 1000, lowerBound: true), gauge("wg0", used: 5, quota: nil),
            ]),
            width: 120, height: 30)
        let bars = screen.filter { $0.hasPrefix("quota ") }
        #expect(bars.count == 2, "interfaces without a quota get no bar: \(bars)")
        let eth = bars.first { $0.contains("eth0") } ?? ""
        #expect(eth.contains("25.0% of 1000 B both") && eth.contains("cycle ends 2026-12-23"))
        let filled = eth.filter { $0 == "█" }.count, empty = eth.filter { $0 == "░" }.count
        #expect(filled > 0 && abs(Double(filled) / Double(filled + empty) - 0.25) < 0.05, "the bar is a quarter full")
        let over = bars.first { $0.contains("wwan0") } ?? ""
        #expect(over.contains("≥150.0%") && over.contains("OVER") && !over.contains("░"))
        // Every line still fits the width.
        #expect(screen.allSatisfy { $0.count <= 120 })
    }

    @Test func noPlansNoBarsAndSmallScreensSkipThem() {
        #expect(!LiveRenderer(color: false).render(model([]), width: 100, height: 30).contains { $0.hasPrefix("quota ") })
        #expect(
            !LiveRenderer(color: false).render(model([gauge("eth0", used: 1, quota: 2)]), width: 60, height: 12)
                .contains { $0.hasPrefix("quota ") })
    }
}
