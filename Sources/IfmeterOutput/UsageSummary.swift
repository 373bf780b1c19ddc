import IfmeterCore

/// What `usage --summary` shows (vnstati -s), computed once for every
/// picture that draws it (the SVG here, the PNG in IfmeterImage): per
/// interface today, this cycle (by its plan; the calendar month without
/// one) and all time with their average rates and the share of a limit
/// used, and the last 24 hours by hour with the peak hour's rate and the
/// hour limit. Figures are as of the state file's last save, which `asOf`
/// gives (the drawing's time only when no save is known).
package struct UsageSummary: Sendable {
    /// A limit a figure is measured against: the plan's quota for the
    /// cycle, a `plan set --limit` for today or an hour.
    package struct Limit: Sendable, Hashable {
        /// `quota`, or the limit's period (`day`, `hour`, `month`, `year`).
        package var kind: String
        package var bytes: UInt64
        package var direction: Plan.Direction
    }

    package struct Figure: Sendable {
        package var title: String
        /// `today`, `cycle` or `all`.
        package var key: String
        package var period: UsagePeriod?
        package var usage: PeriodUsage
        /// rx + tx over the seconds from the period's start to `asOf`, in
        /// bits per second; nil for all time or when no second is covered.
        package var averageBitsPerSecond: Double?
        package var limit: Limit?

        package var totalBytes: UInt64 { usage.counters.rxBytes.saturatingAdd(usage.counters.txBytes) }

        /// The limit's direction used over the limit, in percent.
        package var percentUsed: Double? {
            guard let limit, limit.bytes > 0 else { return nil }
            return Double(limit.direction.used(usage.counters)) / Double(limit.bytes) * 100
        }
    }

    package struct Interface: Sendable {
        package var name: String
        package var kind: InterfaceKind?
        package var plan: Plan?
        /// Today, this cycle, all time.
        package var figures: [Figure]
        /// The first day with usage.
        package var since: String?
        /// The last 24 local hours, the current one last.
        package var hours: [PeriodUsage]
        /// The busiest of those hours' rx + tx over the hour, in bits per
        /// second; nil when none moved a byte.
        package var peakHourBitsPerSecond: Double?
        package var hourLimit: Limit?

        package var title: String {
            var title = TerminalText.escaped(name) + " (" + (kind?.rawValue ?? "kind not known yet") + ")"
            if let plan {
                title += ": plan '\(TerminalText.escaped(plan.pattern))', cycle from day \(plan.cycleStartDay)"
                if let q = plan.quotaBytes { title += ", quota \(Units.bytes(q)) \(plan.direction.rawValue)" }
            }
            return title
        }
    }

    package var interfaces: [Interface]
    package var zone: LocalZone
    /// The drawing's instant.
    package var now: Int64
    /// The last save (Unix time), when the file says one.
    package var savedAt: Double?

    /// The instant the figures stand at: the last save, else now.
    package var asOf: Int64 {
        guard let savedAt, savedAt.isFinite, savedAt > 0, savedAt < Double(now) + SaveStatus.futureTolerance else { return now }
        return Int64(savedAt.rounded(.down))
    }

    /// The title's words for `asOf`.
    package var asOfWords: String {
        guard savedAt != nil else { return "never saved; drawn \(zone.rfc3339(now))" }
        guard asOf != now || savedAt.map({ $0 < Double(now) + SaveStatus.futureTolerance }) == true else {
            return "drawn \(zone.rfc3339(now)) (the last save's time is ahead of this clock)"
        }
        return "as of the last save, \(zone.rfc3339(asOf))"
    }

    package init(
        slices: [UsageSlice], plans: [Plan], names: [String] = [], kinds: [String: InterfaceKind] = [:], zone: LocalZone, now: Int64,
        savedAt: Double? = nil
    ) {
        self.zone = zone
        self.now = now
        self.savedAt = savedAt
        interfaces = []
        var byName = Dictionary(grouping: slices, by: \.name)
        for name in names where byName[name] == nil { byName[name] = [] }
        interfaces = byName.keys.sorted { StoreKey.key($0) < StoreKey.key($1) }.map { interface($0, byName[$0] ?? [], plans: plans, kinds: kinds) }
    }

    /// The seconds of `period` up to `asOf`.
    func seconds(_ period: UsagePeriod) -> Int64 { max(0, min(asOf, period.end) - period.start) }

    func interface(_ name: String, _ mine: [UsageSlice], plans: [Plan], kinds: [String: InterfaceKind]) -> Interface {
        let calendar = PeriodCalendar(zone: zone)
        let plan = Plan.find(for: name, in: plans)
        func usage(_ kind: UsagePeriodKind, cycleDay: Int = 1) -> (UsagePeriod, PeriodUsage) {
            let period = calendar.period(kind, containing: now, cycleDay: cycleDay)
            let found = calendar.group(mine, by: kind, cycleDay: cycleDay).first { $0.period.start == period.start }
            return (period, found ?? PeriodUsage(period: period, counters: .zero, quality: .exact))
        }
        func rate(_ u: PeriodUsage) -> Double? {
            let s = seconds(u.period)
            return s > 0 ? Double(u.totalBytes) * 8 / Double(s) : nil
        }
        func limit(_ period: PeriodLimit.Period) -> Limit? {
            guard let plan, let l = plan.limits.first(where: { $0.period == period }) else { return nil }
            return Limit(kind: period.rawValue, bytes: l.bytes, direction: plan.direction)
        }
        var all = PeriodUsage(period: UsagePeriod(label: "all", start: 0, end: 0), counters: .zero, quality: .exact)
        for slice in mine { all.add(slice) }
        let (day, today) = usage(.day)
        let (cycle, thisCycle) = usage(.cycle, cycleDay: plan?.cycleStartDay ?? 1)
        let quota = plan.flatMap { p in p.quotaBytes.map { Limit(kind: "quota", bytes: $0, direction: p.direction) } }
        let since = mine.map(\.start).min().map { calendar.period(.day, containing: $0).label }
        let figures = [
            Figure(title: "Today, \(day.label)", key: "today", period: day, usage: today, averageBitsPerSecond: rate(today), limit: limit(.day)),
            Figure(
                title: plan != nil
                    ? "This cycle, \(cycle.label) – \(PeriodCalendar.dayLabel(zone, cycle.end))"
                    : "This month, \(calendar.period(.month, containing: now).label)",
                key: "cycle", period: cycle, usage: thisCycle, averageBitsPerSecond: rate(thisCycle),
                limit: quota ?? (plan != nil && cycle.start == calendar.period(.month, containing: now).start ? limit(.month) : nil)),
            Figure(title: "All time" + (since.map { ", since \($0)" } ?? ""), key: "all", period: nil, usage: all, limit: nil),
        ]
        let grouped = Dictionary(calendar.group(mine, by: .hour).map { ($0.period.start, $0) }, uniquingKeysWith: { a, _ in a })
        var periods: [UsagePeriod] = []
        var t = now
        while periods.count < 24 {
            let p = calendar.period(.hour, containing: t)
            if periods.last?.start != p.start { periods.append(p) }
            t = p.start - 1
        }
        periods.reverse()
        let hours = periods.map { grouped[$0.start] ?? PeriodUsage(period: $0, counters: .zero, quality: .exact) }
        let peak = hours.filter { $0.totalBytes > 0 }.map { Double($0.totalBytes) * 8 / Double(max(1, $0.period.end - $0.period.start)) }.max()
        return Interface(
            name: name, kind: mine.last?.kind ?? kinds[name], plan: plan, figures: figures, since: since, hours: hours, peakHourBitsPerSecond: peak,
            hourLimit: limit(.hour))
    }
}
