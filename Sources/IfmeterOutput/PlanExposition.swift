import IfmeterCore
import IfmeterModel

extension UsageTable {
    /// Each planned interface's current cycle, sorted by (namespace, name).
    package func planGauges() -> [PlanGauge] {
        interfaces.compactMap { i in
            guard let row = i.rows.first(where: { $0.current }), let status = row.plan else { return nil }
            return PlanGauge(
                plan: status.plan, key: i.key, kind: i.kind, cycle: PeriodUsage(period: row.period, counters: row.counters, quality: row.quality),
                zone: zone, now: now)
        }
    }
}

extension ExpositionWriter {
    /// The plans' families (serve with --state): quota, use and cycle.
    mutating func writePlans(_ plans: [PlanGauge]) {
        guard !plans.isEmpty else { return }
        let note = "Current within one sample: the state file as of its last save plus what was counted since. \(Self.caveat)"
        header("ifmeter_plan_quota_bytes", .gauge, unit: "bytes", help: "The plan's quota per billing cycle (ifmeter plan set). \(note)")
        for p in plans {
            if let q = p.quotaBytes { planSample("ifmeter_plan_quota_bytes", p, value: .unsigned(q)) }
        }
        header(
            "ifmeter_plan_used_bytes", .gauge, unit: "bytes",
            help:
                "Bytes used in the current billing cycle in the plan's direction; a lower bound when ifmeter_plan_used_lower_bound is 1. \(note)")
        for p in plans { planSample("ifmeter_plan_used_bytes", p, value: .unsigned(p.usedBytes)) }
        header("ifmeter_plan_used_lower_bound", .gauge, help: "1 when the cycle's use is a lower bound (traffic was lost), else 0. \(note)")
        for p in plans { planSample("ifmeter_plan_used_lower_bound", p, value: .unsigned(p.lowerBound ? 1 : 0)) }
        if plans.contains(where: { $0.projectedBytes != nil }) {
            header(
                "ifmeter_plan_projected_bytes", .gauge, unit: "bytes",
                help:
                    "The current cycle's use at its end if it goes on at its average rate so far (an estimate, as usage --check judges it: exit 5 when it passes the quota). \(note)"
            )
            for p in plans { if let bytes = p.projectedBytes { planSample("ifmeter_plan_projected_bytes", p, value: .unsigned(bytes)) } }
        }
        header(
            "ifmeter_plan_cycle_start_timestamp_seconds", .gauge, unit: "seconds", help: "When the current billing cycle started (Unix time). \(note)"
        )
        for p in plans { planSample("ifmeter_plan_cycle_start_timestamp_seconds", p, value: .signed(p.cycleStart)) }
        header("ifmeter_plan_cycle_end_timestamp_seconds", .gauge, unit: "seconds", help: "When the current billing cycle ends (Unix time). \(note)")
        for p in plans { planSample("ifmeter_plan_cycle_end_timestamp_seconds", p, value: .signed(p.cycleEnd)) }
    }

    mutating func planSample(_ name: String, _ p: PlanGauge, value: SeriesValue) {
        var labels = [("direction", p.direction.rawValue), ("interface", p.name)]
        // No kind label while the kind is not known (nothing saved yet).
        if let kind = p.kind { labels.append(("kind", kind.rawValue)) }
        if !p.netns.isEmpty { labels.append(("netns", p.netns)) }
        labeledSample(name, labels, value)
    }
}
