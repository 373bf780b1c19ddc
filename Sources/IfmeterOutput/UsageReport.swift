import IfmeterCore
import IfmeterModel

/// Usage by period for every interface of a state file: what `usage`
/// prints, checks and draws.
package struct UsageTable: Sendable {
    /// A planned interface's standing in one cycle.
    package struct PlanStatus: Sendable, Hashable {
        package var plan: Plan
        package var usedBytes: UInt64
        /// used / quota; nil without a quota.
        package var usedRatio: Double?
        /// Used is over the quota (for a lower bound: over for certain).
        package var over: Bool?
        /// The current cycle's use at its end, at its average so far
        /// (an estimate); nil for past cycles.
        package var projectedBytes: UInt64?
    }

    package struct Row: Sendable, Hashable {
        package var period: UsagePeriod
        package var counters: Counters
        package var quality: Quality
        package var plan: PlanStatus?
        /// The period holds `now`.
        package var current: Bool
        /// The seconds the figures cover: the period's, cut to now for the
        /// current one and to `--begin`/`--end`.
        package var seconds: Int64 = 0

        /// rx + tx, stopping at 2^64-1.
        package var totalBytes: UInt64 { counters.rxBytes.saturatingAdd(counters.txBytes) }

        /// rx + tx over the seconds covered, in bits per second (vnStat's
        /// average rate column); nil when no second is covered yet.
        package var averageBitsPerSecond: Double? {
            seconds > 0 ? Double(totalBytes) * 8 / Double(seconds) : nil
        }
    }

    package struct Interface: Sendable {
        /// The stored name: `NAME` or `NS/NAME`.
        package var stored: String
        /// Nil for a planned interface nothing was saved for yet (no usage,
        /// no row of its own): its kind is not known (not "other", which is
        /// a kind).
        package var kind: InterfaceKind?
        package var plan: Plan?
        package var rows: [Row]
        /// Its alias (`ifmeter state alias`), shown beside the name.
        package var alias: String?

        /// The kind, or that it is not known yet.
        package var kindText: String { kind?.rawValue ?? "kind not known yet" }

        package var key: SeriesKey {
            guard let slash = stored.firstIndex(of: "/") else { return SeriesKey(name: stored) }
            return SeriesKey(netns: String(stored[..<slash]), name: String(stored[stored.index(after: slash)...]))
        }
    }

    package var granularity: UsagePeriodKind
    package var interfaces: [Interface]
    package var zone: LocalZone
    package var now: Int64
    /// What the state file says of its writer: reports say when it last
    /// saved, and a stale save first (nil: not known, as in tests).
    package var saves: SaveStatus?
    /// The state file's path, as reports name it.
    package var path = ""
    /// Unix time now, to the fraction (`now` is whole seconds): how old the
    /// last save is.
    package var wallTime: Double
    /// Said instead of "No usage recorded yet" when there are no
    /// interfaces (a filter that matched none of the file's).
    package var emptyNote: String?

    /// Groups stored slices into periods. `top` keeps each interface's N
    /// biggest days (by total). For cycles, a planned interface's cycle
    /// starts on its plan's day (others use the calendar month) and its
    /// current cycle is shown even when nothing was used yet. `kinds`: the
    /// kinds the file holds by stored name, for an interface without usage.
    ///
    /// `begin` and `end` (Unix times, `usage --begin/--end`): only the
    /// usage in between is summed, and only the periods it falls in are
    /// shown; `limit`: at most that many rows per interface, the latest
    /// (`usage --limit`).
    package init(
        slices: [UsageSlice], plans: [Plan], granularity: UsagePeriodKind, top: Int? = nil, zone: LocalZone, now: Int64,
        names: [String] = [], kinds: [String: InterfaceKind] = [:], begin: Int64? = nil, end: Int64? = nil, limit: Int? = nil,
        cache: PeriodCache? = nil
    ) {
        let slices = begin == nil && end == nil ? slices : slices.filter { $0.start >= (begin ?? .min) && $0.start < (end ?? .max) }
        self.granularity = granularity
        self.zone = zone
        self.now = now
        wallTime = Double(now)
        let calendar = PeriodCalendar(zone: zone)
        var byName = Dictionary(grouping: slices, by: \.name)
        if granularity == .cycle {
            // Planned interfaces known to the file, even without usage.
            for name in names where byName[name] == nil && Plan.find(for: name, in: plans) != nil { byName[name] = [] }
        }
        var list: [Interface] = []
        for (name, mine) in byName {
            let plan = Plan.find(for: name, in: plans)
            let cycleDay = plan?.cycleStartDay ?? 1
            var periods = calendar.group(mine, by: granularity, cycleDay: cycleDay, cache: cache)
            if granularity == .cycle, plan != nil {
                let current = calendar.period(.cycle, containing: now, cycleDay: cycleDay)
                if !periods.contains(where: { $0.period.start == current.start }) {
                    periods.append(PeriodUsage(period: current, counters: .zero, quality: .exact))
                }
            }
            if granularity == .top, let top {
                periods = Array(periods.sorted { ($0.totalBytes, $1.period.start) > ($1.totalBytes, $0.period.start) }.prefix(top))
            }
            let rows = periods.map { p -> Row in
                let current = p.period.start <= now && now < p.period.end
                var status: PlanStatus?
                if granularity == .cycle, let plan {
                    let used = plan.direction.used(p.counters)
                    let projected = current ? PlanGauge.projection(used: used, start: p.period.start, end: p.period.end, now: now) : nil
                    status = PlanStatus(
                        plan: plan, usedBytes: used,
                        usedRatio: plan.quotaBytes.map { $0 == 0 ? (used == 0 ? 0 : .infinity) : Double(used) / Double($0) },
                        over: plan.quotaBytes.map { used > $0 }, projectedBytes: projected)
                }
                var row = Row(period: p.period, counters: p.counters, quality: p.quality, plan: status, current: current)
                let from = max(p.period.start, begin ?? .min), to = min(p.period.end, end ?? .max, max(now, p.period.start))
                row.seconds = max(0, to - from)
                return row
            }
            let kept = limit.map { granularity == .top ? Array(rows.prefix($0)) : Array(rows.suffix($0)) } ?? rows
            list.append(Interface(stored: name, kind: mine.last?.kind ?? kinds[name], plan: plan, rows: kept))
        }
        interfaces = list.sorted { $0.key < $1.key }
    }

    // MARK: checks

    /// The outcome of `usage --check`.
    package struct Check: Sendable {
        package enum Verdict: Int, Sendable, Comparable {
            /// Under now, and the cycle's projection too.
            case under = 0
            /// Under now, but projected over the quota by the cycle's end
            /// at its average rate so far: a warning before the fact.
            case projectedOver = 5
            case unknown = 4, over = 3
            var rank: Int {
                switch self {
                case .under: 0
                case .projectedOver: 1
                case .unknown: 2
                case .over: 3
                }
            }
            package static func < (a: Verdict, b: Verdict) -> Bool { a.rank < b.rank }
        }
        package var verdict: Verdict
        /// One line per planned interface, and per plan that matches nothing.
        package var lines: [String]
        package var exitCode: Int32 { Int32(verdict.rawValue) }
    }

    /// Every planned interface's current cycle against its quota: over (3)
    /// when any is over (a lower bound over the quota is over for certain),
    /// else unknown (4) when a lower bound is under its quota, else
    /// projected over (5) when the cycle's use, extended to its end at its
    /// average rate so far (the figure `--cycle` shows), passes the quota,
    /// else under (0).
    /// `slices`: the stored usage, for the limits per hour, day, month or
    /// year (`Plan.limits`), each checked in the period holding `now` with
    /// the cycle quota's rules.
    package func check(plans: [Plan], slices: [UsageSlice] = []) -> Check {
        var verdict = Check.Verdict.under
        var lines: [String] = []
        // A stale file's figures are as of its last save: the use now is
        // at least that, so under the quota cannot be proven. So with a save
        // in the future (a clock that was ahead or stepped back) or no time.
        let staleWarning = saves?.warning(now: wallTime, zone: zone)
        if let staleWarning { lines.append(staleWarning) }
        /// One verdict line, for a cycle quota or a period limit (`bound`);
        /// `projected`: the cycle's projection when it passes the quota.
        func judge(
            _ name: String, over: Bool, lowerBound: Bool, used: String, of: String, when: String, bound: String, projected: String? = nil
        ) {
            if over {
                verdict = max(verdict, .over)
                lines.append("OVER \(name): \(lowerBound ? "at least " : "")\(used) used of \(of), \(when).")
            } else if lowerBound {
                verdict = max(verdict, .unknown)
                lines.append("UNKNOWN \(name): at least \(used) used of \(of), \(when): a lower bound under the \(bound) cannot prove it is under.")
            } else if staleWarning != nil {
                verdict = max(verdict, .unknown)
                lines.append(
                    "UNKNOWN \(name): \(used) used of \(of) as of the last save, \(when): that save is not current, so under cannot be proven.")
            } else if let projected {
                verdict = max(verdict, .projectedOver)
                lines.append(
                    "PROJECTED OVER \(name): \(used) used of \(of), \(when); at its average rate so far the cycle ends at \(projected) (an estimate)."
                )
            } else {
                lines.append("under \(name): \(used) used of \(of), \(when).")
            }
        }
        for i in interfaces {
            guard let row = i.rows.first(where: { $0.current }), let status = row.plan, let quota = status.plan.quotaBytes else { continue }
            let used = "\(Units.bytes(status.usedBytes)) (\(status.usedBytes) B, \(status.plan.direction.rawValue))"
            let limit = "\(Units.bytes(quota)) (\(quota) B)"
            let cycle = "cycle from \(zone.rfc3339(row.period.start))"
            let projected = status.projectedBytes.flatMap { $0 > quota ? "\(Units.bytes($0)) (\($0) B)" : nil }
            judge(
                TerminalText.escaped(i.stored), over: status.usedBytes > quota, lowerBound: row.quality == .lowerBound, used: used, of: limit,
                when: cycle, bound: "quota", projected: projected)
        }
        let calendar = PeriodCalendar(zone: zone)
        let byName = Dictionary(grouping: slices, by: \.name)
        for i in interfaces {
            guard let plan = i.plan, !plan.limits.isEmpty else { continue }
            for limit in plan.limits {
                let period = calendar.period(limit.period.kind, containing: now)
                let mine = (byName[i.stored] ?? []).filter { period.start <= $0.start && $0.start < period.end }
                let usage = calendar.group(mine, by: limit.period.kind).first
                let quality = usage?.quality ?? .exact
                let usedBytes = plan.direction.used(usage?.counters ?? .zero)
                let used = "\(Units.bytes(usedBytes)) (\(usedBytes) B, \(plan.direction.rawValue))"
                let of = "\(Units.bytes(limit.bytes)) (\(limit.bytes) B)"
                let name = TerminalText.escaped(i.stored) + " \(limit.period.rawValue) limit"
                let when = "\(limit.period.rawValue) \(period.label)"
                judge(name, over: usedBytes > limit.bytes, lowerBound: quality == .lowerBound, used: used, of: of, when: when, bound: "limit")
            }
        }
        let stored = interfaces.map(\.stored)
        for plan in plans.sorted(by: { $0.pattern < $1.pattern }) where !stored.contains(where: { plan.matches($0) }) {
            lines.append("note: plan '\(TerminalText.escaped(plan.pattern))' matches no interface with usage in this state file.")
        }
        if plans.isEmpty { lines.append("note: no plans in this state file (see 'ifmeter plan set'); nothing to check.") }
        if let saves, staleWarning == nil { lines.append(saves.sentence(now: wallTime, zone: zone)) }
        return Check(verdict: verdict, lines: lines)
    }

    // MARK: output

    package func json() -> JSONValue { json(interfaces: .array(interfaces.map { json($0, periods: .array($0.rows.map(json))) })) }

    /// The document around `interfaces`; with `next` (a page cut short:
    /// the URL of the next), schema version 7.
    package func json(interfaces: JSONValue, next: String? = nil) -> JSONValue {
        var o: [String: JSONValue] = ["granularity": .string(granularity.rawValue), "interfaces": interfaces]
        if let saves { o["state"] = saves.json(now: wallTime, zone: zone, path: path) }
        if let next {
            o["next"] = .string(next)
            return JSONEnvelope.usagePage.document(o)
        }
        return (granularity == .fiveMinutes ? JSONEnvelope.usageFiveMinutes : JSONEnvelope.usage).document(o)
    }

    /// An interface's object around `periods`.
    package func json(_ i: Interface, periods: JSONValue) -> JSONValue {
        var o: [String: JSONValue] = [
            "name": .string(i.key.name), "kind": i.kind.map { .string($0.rawValue) } ?? .null, "periods": periods,
        ]
        if !i.key.netns.isEmpty { o["netns"] = .string(i.key.netns) }
        if let alias = i.alias { o["alias"] = .string(alias) }
        return .object(o)
    }

    package func json(_ row: Row) -> JSONValue {
        var o: [String: JSONValue] = [
            "period": .string(row.period.label),
            "start": .string(zone.rfc3339(row.period.start)), "end": .string(zone.rfc3339(row.period.end)),
            "rx_bytes": .number(row.counters.rxBytes), "tx_bytes": .number(row.counters.txBytes),
            "rx_packets": .number(row.counters.rxPackets), "tx_packets": .number(row.counters.txPackets),
            "quality": .string(row.quality.name),
            "seconds": .number(row.seconds),
            "average_bits_per_second": row.averageBitsPerSecond.map { .number($0) } ?? .null,
        ]
        if let s = row.plan {
            var plan: [String: JSONValue] = [
                "cycle_start_day": .number(s.plan.cycleStartDay),
                "quota_bytes": s.plan.quotaBytes.map { .number($0) } ?? .null,
                "direction": .string(s.plan.direction.rawValue),
                "used_bytes": .number(s.usedBytes),
                "used_ratio": s.usedRatio.flatMap { $0.isFinite ? .number($0) : nil } ?? .null,
                "over": s.over.map(JSONValue.bool) ?? .null,
            ]
            if let projected = s.projectedBytes {
                plan["projection"] = .object([
                    "bytes": .number(projected), "at": .string(zone.rfc3339(row.period.end)), "estimate": .bool(true),
                    "over": s.plan.quotaBytes.map { .bool(projected > $0) } ?? .null,
                    "note": .string("An estimate: the cycle's use so far, extended to its end at its average rate so far."),
                ])
            }
            o["plan"] = .object(plan)
        }
        return .object(o)
    }

    package static let csvHeader =
        "interface,netns,kind,granularity,period,start,end,rx_bytes,tx_bytes,rx_packets,tx_packets,total_bytes,quality,quota_bytes,used_bytes,over,projected_bytes,estimate,seconds,average_bits_per_second"

    /// CSV (RFC 4180 quoting, LF line ends), one row per period; the `estimate` column is always
    /// true: the figures are estimates from interface counters.
    package func csv() -> String {
        var out = Self.csvHeader + "\n"
        for i in interfaces { out += csv(i, rows: i.rows) }
        return out
    }

    /// The CSV lines of some of an interface's rows.
    package func csv(_ i: Interface, rows: [Row]) -> String {
        // Scalar by scalar: `"` or `,` followed by a combining accent is one
        // Character, and must be quoted all the same.
        func field(_ s: String) -> String {
            s.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                ? "\"" + s.replacingAll("\"", with: "\"\"") + "\"" : s
        }
        var out = ""
        do {
            for r in rows {
                let fields: [String] = [
                    i.key.name, i.key.netns, i.kind?.rawValue ?? "", granularity.rawValue, r.period.label,
                    zone.rfc3339(r.period.start), zone.rfc3339(r.period.end),
                    String(r.counters.rxBytes), String(r.counters.txBytes), String(r.counters.rxPackets), String(r.counters.txPackets),
                    String(r.totalBytes), r.quality.name,
                    r.plan?.plan.quotaBytes.map { String($0) } ?? "", r.plan.map { String($0.usedBytes) } ?? "",
                    r.plan?.over.map { $0 ? "true" : "false" } ?? "", r.plan?.projectedBytes.map { String($0) } ?? "", "true",
                    String(r.seconds), r.averageBitsPerSecond.map { Units.fixed($0, 3) } ?? "",
                ]
                out += fields.map(field).joined(separator: ",") + "\n"
            }
        }
        return out
    }

    /// The usage tables' JSON version: 3 added `state` (when the file was
    /// last saved, by whom, and whether that is stale), 5 each period's
    /// `seconds` and `average_bits_per_second`.
    package static var schemaVersion: Int { JSONEnvelope.usage.version }

    package func text(path: String) -> String {
        var out = textHead(path: path, empty: interfaces.isEmpty)
        var shown = Set<Quality>()
        for i in interfaces {
            out += textTitle(i)
            var table = textTable(i)
            for r in i.rows { table.add(textCells(r, plan: i.plan != nil, shown: &shown)) }
            out += table.lines().map { "  " + $0 }.joined(separator: "\n") + "\n"
            out += textProjection(i) + "\n"
        }
        return out + textFoot(shown: shown)
    }

    /// What comes before the interfaces: how current the figures are, or
    /// that there is nothing to show.
    package func textHead(path: String, empty: Bool) -> String {
        var out = ""
        if let saves {
            // First, where it cannot be missed: how current the figures are.
            out += (saves.warning(now: wallTime, zone: zone) ?? saves.sentence(now: wallTime, zone: zone)) + "\n\n"
        }
        if empty { out += (emptyNote ?? "No usage recorded yet in \(TerminalText.escaped(path)).") + "\n" }
        return out
    }

    /// An interface's title line.
    package func textTitle(_ i: Interface) -> String {
        var title = TerminalText.escaped(i.stored) + (i.alias.map { " [\(TerminalText.escaped($0))]" } ?? "") + " (\(i.kindText))"
        if granularity == .cycle, let plan = i.plan {
            title += ": plan '\(TerminalText.escaped(plan.pattern))', cycle from day \(plan.cycleStartDay)"
            if let q = plan.quotaBytes { title += ", quota \(Units.bytes(q)) \(plan.direction.rawValue)" }
        }
        return title + "\n"
    }

    /// An interface's empty table: its headers.
    package func textTable(_ i: Interface) -> TextTable {
        let header: String =
            switch granularity {
            case .fiveMinutes: "5 MINUTES"
            case .hour: "HOUR"
            case .day: "DAY"
            case .month: "MONTH"
            case .year: "YEAR"
            case .cycle: "CYCLE"
            case .top: "TOP DAY"
            }
        var headers = [header, "RX", "TX", "TOTAL", "AVG RATE", "QUALITY"]
        if granularity == .cycle, i.plan != nil { headers += ["USED", "OF QUOTA"] }
        return TextTable(headers: headers, rightAligned: [1, 2, 3, 4, 6, 7])
    }

    /// A row's cells; `plan`: the table has the plan's columns.
    package func textCells(_ r: Row, plan: Bool, shown: inout Set<Quality>) -> [String] {
        let q = r.quality
        shown.insert(q)
        var cells = [
            r.period.label + (granularity == .cycle ? " – " + PeriodCalendar.dayLabel(zone, r.period.end) : ""),
            q.marked(Units.bytes(r.counters.rxBytes)), q.marked(Units.bytes(r.counters.txBytes)),
            q.marked(Units.bytes(r.totalBytes)),
            r.averageBitsPerSecond.map { q.marked(Units.rate(bytesPerSecond: $0 / 8, bits: true)) } ?? "-", q.name,
        ]
        if let s = r.plan {
            cells.append(q.marked(Units.bytes(s.usedBytes)))
            cells.append(s.usedRatio.map { $0.isFinite ? Units.fixed($0 * 100, 1) + "%" + (s.over == true ? " OVER" : "") : "-" } ?? "-")
        } else if granularity == .cycle, plan {
            cells += ["", ""]
        }
        return cells
    }

    /// The current cycle's projection under its table, if any.
    package func textProjection(_ i: Interface) -> String {
        var out = ""
        for r in i.rows where r.current {
            if let projected = r.plan?.projectedBytes {
                var line = "  Projected by the cycle's end at the average so far (an estimate): \(Units.bytes(projected))"
                if let q = r.plan?.plan.quotaBytes { line += projected > q ? ", over the quota" : ", under the quota" }
                out += line + ".\n"
            }
        }
        return out
    }

    /// What comes after the interfaces: how periods are made, and what the
    /// qualities shown mean.
    package func textFoot(shown: Set<Quality>) -> String {
        var out = ""
        if granularity == .fiveMinutes {
            out +=
                "Periods are local time (five-minute slots, kept \(FiveMinuteSplit.keptHours) hours; traffic is split at slot boundaries by time).\n"
        } else {
            out += "Periods are local time (\(granularity == .hour ? "hours" : "hours summed"); traffic is split at hour boundaries by time).\n"
        }
        out += Caveat.legend(shown: shown).joined(separator: "\n") + "\n"
        return out
    }
}

extension String {
    /// Every `target` scalar replaced, also where a combining mark after
    /// it makes one Character of the two.
    func replacingAll(_ target: Unicode.Scalar, with replacement: String) -> String {
        var out = ""
        for scalar in unicodeScalars {
            if scalar == target { out += replacement } else { out.unicodeScalars.append(scalar) }
        }
        return out
    }
}
