import IfmeterCore

/// A planned interface's current cycle, as serve exposes it.
public struct PlanGauge: Sendable, Hashable {
    public var name: String
    public var netns: String
    /// Nil while nothing was saved for the interface (its kind is not known).
    public var kind: InterfaceKind?
    public var direction: Plan.Direction
    public var quotaBytes: UInt64?
    public var usedBytes: UInt64
    public var lowerBound: Bool
    public var cycleStart: Int64
    public var cycleEnd: Int64
    /// The cycle's last local day, YYYY-MM-DD.
    public var lastDay: String
    /// The cycle's use at its end at its average rate so far (an
    /// estimate, as `usage --cycle` and `--check` give it); nil when it
    /// cannot be told (the cycle's first second).
    public var projectedBytes: UInt64?

    public init(
        name: String, netns: String, kind: InterfaceKind?, direction: Plan.Direction, quotaBytes: UInt64?, usedBytes: UInt64,
        lowerBound: Bool, cycleStart: Int64, cycleEnd: Int64, lastDay: String
    ) {
        self.name = name
        self.netns = netns
        self.kind = kind
        self.direction = direction
        self.quotaBytes = quotaBytes
        self.usedBytes = usedBytes
        self.lowerBound = lowerBound
        self.cycleStart = cycleStart
        self.cycleEnd = cycleEnd
        self.lastDay = lastDay
    }

    /// `used` bytes `now` into the cycle, extended to its end at the
    /// average rate so far; nil in the cycle's first day (or tenth, for a
    /// shorter one): a minute into a 30-day cycle it would multiply
    /// whatever came first by 43,200, and any backup at midnight would look
    /// like the quota gone.
    public static let projectionSettles: Int64 = 86400

    public static func projection(used: UInt64, start: Int64, end: Int64, now: Int64) -> UInt64? {
        guard now - start >= min(projectionSettles, (end - start) / 10), now < end, now > start else { return nil }
        let fraction = Double(end - start) / Double(now - start)
        return UInt64(min(9.2e18, (Double(used) * fraction).rounded()))
    }
}

extension UsageTable {
    /// Each planned interface's current cycle, sorted by (namespace, name).
    public func planGauges() -> [PlanGauge] {
        interfaces.compactMap { i in
            guard let row = i.rows.first(where: { $0.current }), let status = row.plan else { return nil }
            var gauge = PlanGauge(
                name: i.key.name, netns: i.key.netns, kind: i.kind, direction: status.plan.direction, quotaBytes: status.plan.quotaBytes,
                usedBytes: status.usedBytes, lowerBound: row.quality == .lowerBound, cycleStart: row.period.start, cycleEnd: row.period.end,
                lastDay: PeriodCalendar.dayLabel(zone, row.period.end))
            gauge.projectedBytes = status.projectedBytes
            return gauge
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
