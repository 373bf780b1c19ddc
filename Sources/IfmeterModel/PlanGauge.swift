import IfmeterCore

/// A planned interface's current cycle, as serve exposes it.
package struct PlanGauge: Sendable, Hashable {
    package var name: String
    package var netns: String
    /// Nil while nothing was saved for the interface (its kind is not known).
    package var kind: InterfaceKind?
    package var direction: Plan.Direction
    package var quotaBytes: UInt64?
    package var usedBytes: UInt64
    package var lowerBound: Bool
    package var cycleStart: Int64
    package var cycleEnd: Int64
    /// The cycle's last local day, YYYY-MM-DD.
    package var lastDay: String
    /// The cycle's use at its end at its average rate so far (an
    /// estimate, as `usage --cycle` and `--check` give it); nil when it
    /// cannot be told (the cycle's first second).
    package var projectedBytes: UInt64?

    package init(
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
    package static let projectionSettles: Int64 = 86400

    package static func projection(used: UInt64, start: Int64, end: Int64, now: Int64) -> UInt64? {
        guard now - start >= min(projectionSettles, (end - start) / 10), now < end, now > start else { return nil }
        let fraction = Double(end - start) / Double(now - start)
        return UInt64(min(9.2e18, (Double(used) * fraction).rounded()))
    }
}

extension PlanGauge {
    /// The gauge of `plan` for the interface `key` over one cycle's usage:
    /// the one place a cycle's use, quality and projection become a gauge
    /// (the plan feed's, and a usage table's current rows).
    package init(plan: Plan, key: SeriesKey, kind: InterfaceKind?, cycle: PeriodUsage, zone: LocalZone, now: Int64) {
        let used = plan.direction.used(cycle.counters)
        self.init(
            name: key.name, netns: key.netns, kind: kind, direction: plan.direction, quotaBytes: plan.quotaBytes, usedBytes: used,
            lowerBound: cycle.quality == .lowerBound, cycleStart: cycle.period.start, cycleEnd: cycle.period.end,
            lastDay: PeriodCalendar.dayLabel(zone, cycle.period.end))
        projectedBytes = Self.projection(used: used, start: cycle.period.start, end: cycle.period.end, now: now)
    }

    /// Each planned interface's current cycle, sorted by (namespace, name),
    /// from the state file's slices: its planned interfaces with usage and,
    /// from `names`, those without (their kind from `kinds`, by stored
    /// name). `key` reads a stored name (`NAME`, `NS/NAME`).
    package static func current(
        plans: [Plan], slices: [UsageSlice], names: [String], kinds: [String: InterfaceKind], zone: LocalZone, now: Int64,
        key: (String) -> SeriesKey
    ) -> [PlanGauge] {
        guard !plans.isEmpty else { return [] }
        let calendar = PeriodCalendar(zone: zone)
        var byName = Dictionary(grouping: slices.filter { Plan.find(for: $0.name, in: plans) != nil }, by: \.name)
        for name in names where byName[name] == nil && Plan.find(for: name, in: plans) != nil { byName[name] = [] }
        var gauges: [(SeriesKey, PlanGauge)] = []
        for (name, mine) in byName {
            guard let plan = Plan.find(for: name, in: plans) else { continue }
            let cycle = calendar.period(.cycle, containing: now, cycleDay: plan.cycleStartDay)
            let usage =
                calendar.group(mine, by: .cycle, cycleDay: plan.cycleStartDay).first { $0.period.start == cycle.start }
                ?? PeriodUsage(period: cycle, counters: .zero, quality: .exact)
            let k = key(name)
            gauges.append((k, PlanGauge(plan: plan, key: k, kind: mine.last?.kind ?? kinds[name], cycle: usage, zone: zone, now: now)))
        }
        return gauges.sorted { $0.0 < $1.0 }.map(\.1)
    }
}
