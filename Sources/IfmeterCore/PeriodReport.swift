/// Sums an export period's deltas per interface.
public struct PeriodAccumulator: Sendable {
    public struct Entry: Sendable, Hashable {
        public var classification: Classification
        public var counters = Counters.zero
        public var quality = Quality.exact
        /// Discontinuities seen in the period (wrap, reset, recreated, ...).
        public var changes: [DeltaChange] = []

        mutating func add(_ d: InterfaceDelta) {
            classification = d.classification
            counters.add(d.counters)
            quality = max(quality, d.quality)
            if d.change != .steady, !changes.contains(d.change) { changes.append(d.change) }
        }
    }

    public private(set) var entries: [SeriesKey: Entry] = [:]

    public init() {}

    /// Adds a sample's deltas. An idle interval (steady, exact, nothing
    /// counted) adds nothing, so it costs nothing: an interface without an
    /// entry had no traffic in the period.
    public mutating func add(_ deltas: [InterfaceDelta]) {
        for d in deltas where d.change != .baseline {
            if d.isIdle { continue }
            entries[d.key, default: Entry(classification: d.classification)].add(d)
        }
    }

    /// Makes an interface's entry a lower bound (adding an empty one when it
    /// has none): some of its traffic is known to be missing.
    public mutating func markLowerBound(_ key: SeriesKey, classification: Classification) {
        entries[key, default: Entry(classification: classification)].quality = .lowerBound
    }

    /// Puts back entries taken but not used (a failed save), adding them to
    /// whatever came since.
    public mutating func putBack(_ taken: [SeriesKey: Entry]) {
        for (name, old) in taken {
            var e = entries[name] ?? Entry(classification: old.classification)
            e.counters.add(old.counters)
            e.quality = max(e.quality, old.quality)
            e.changes = old.changes + e.changes.filter { !old.changes.contains($0) }
            entries[name] = e
        }
    }

    /// Returns the entries and starts a new period.
    public mutating func take() -> [SeriesKey: Entry] {
        defer { entries = [:] }
        return entries
    }
}

/// A periodic export report, schema `ifmeter.export` version 1
/// (`schemas/ifmeter-report.v1.schema.json`).
public struct PeriodReport: Sendable {
    public struct Period: Sendable {
        /// Unix times (written as RFC 3339) and monotonic seconds.
        public var startWall: Double
        public var endWall: Double
        public var startMonotonic: Double
        public var endMonotonic: Double

        public init(startWall: Double, endWall: Double, startMonotonic: Double, endMonotonic: Double) {
            self.startWall = startWall
            self.endWall = endWall
            self.startMonotonic = startMonotonic
            self.endMonotonic = endMonotonic
        }
    }

    /// Where the totals come from when they persist (`--state`).
    public struct State: Sendable {
        public var path: String
        /// Unix time the totals count from.
        public var since: Double
        public var restored: Bool
        public var sameBoot: Bool

        public init(path: String, since: Double, restored: Bool, sameBoot: Bool) {
            self.path = path
            self.since = since
            self.restored = restored
            self.sameBoot = sameBoot
        }
    }

    public var host: String
    public var source: String
    public var period: Period
    public var interfaces: [InterfaceTotals]
    public var periodEntries: [SeriesKey: PeriodAccumulator.Entry]
    /// Unix time the totals count from without `--state`.
    public var since: Double
    public var state: State?
    /// `export --probe`: where the probes leave at the period's end, and
    /// each tunnel's outside bytes over the period.
    public var route: RouteExposition?

    /// When the totals count from: the state's, unless that is no time a
    /// calendar holds (a state file's meta said 1e300, inf or garbage):
    /// then this run's `since`, as for a state without one.
    public var totalsSince: Double {
        guard let state, LocalZone.second(state.since) != nil else { return since }
        return state.since
    }

    public init(
        host: String, source: String, period: Period, interfaces: [InterfaceTotals],
        periodEntries: [SeriesKey: PeriodAccumulator.Entry], since: Double, state: State?
    ) {
        self.host = host
        self.source = source
        self.period = period
        self.interfaces = interfaces
        self.periodEntries = periodEntries
        self.since = since
        self.state = state
    }
}

/// Renders a `PeriodReport` as JSON, with sorted keys.
public struct PeriodReportRenderer: Sendable {
    public static let schemaName = "ifmeter.export"
    public static let schemaVersion = 1

    public init() {}

    public func value(_ report: PeriodReport) -> JSONValue {
        let seconds = report.period.endMonotonic - report.period.startMonotonic
        var summary = TrafficSummary()
        var interfaces: [JSONValue] = []
        for i in report.interfaces {
            let entry = report.periodEntries[i.key]
            let delta = entry?.counters ?? .zero
            summary.add(i.classification.kind, rx: Double(delta.rxBytes), tx: Double(delta.txBytes))
            var rates: [String: JSONValue] = [:]
            for key in CounterKey.required {
                rates[key.jsonKey + "_per_second"] = seconds > 0 ? .number(Double(delta.value(key)) / seconds) : .null
            }
            var o: [String: JSONValue] = [
                "name": .string(i.name),
                "kind": .string(i.classification.kind.rawValue),
                "evidence": .string(i.classification.evidence),
                "present": .bool(i.present),
                "width": .number(i.width.rawValue),
                "period": .object([
                    "counters": JSONReportRenderer.counters(delta),
                    "quality": .string((entry?.quality ?? .exact).name),
                    "changes": .array((entry?.changes ?? []).map { .string($0.rawValue) }),
                ]),
                "rates": .object(rates),
                "totals": JSONReportRenderer.counters(i.totals),
                "quality": .string(i.quality.name),
                "lower_bound": .bool(i.quality == .lowerBound),
                "events": JSONReportRenderer.events(i.events),
            ]
            o["index"] = i.index.map { .number($0) } ?? .null
            if !i.netns.isEmpty { o["netns"] = .string(i.netns) }
            interfaces.append(.object(o))
        }
        func pair(_ rx: Double, _ tx: Double) -> JSONValue {
            .object([
                "rx_bytes": .number(UInt64(clampingBytes: rx)), "tx_bytes": .number(UInt64(clampingBytes: tx)),
                "rx_bytes_per_second": seconds > 0 ? .number(rx / seconds) : .null,
                "tx_bytes_per_second": seconds > 0 ? .number(tx / seconds) : .null,
            ])
        }
        var o: [String: JSONValue] = [
            "schema": .string(Self.schemaName),
            "schema_version": .number(Self.schemaVersion),
            "estimate": .bool(true),
            "caveats": .array(Caveat.all.map(JSONValue.string)),
            "host": .string(report.host),
            "source": .string(report.source),
            "period": .object([
                "start": .string(RFC3339.format(report.period.startWall)),
                "end": .string(RFC3339.format(report.period.endWall)),
                "start_monotonic": .number(report.period.startMonotonic),
                "end_monotonic": .number(report.period.endMonotonic),
                "seconds": .number(seconds),
            ]),
            "totals_since": .string(RFC3339.format(report.totalsSince)),
            "interfaces": .array(interfaces),
            "summary": .object([
                "physical": pair(summary.physicalRx, summary.physicalTx),
                "tunnel": pair(summary.tunnelRx, summary.tunnelTx),
                "note": .string(TrafficSummary.note),
            ]),
        ]
        if let route = report.route {
            o["route"] = .object([
                "probes": .array(route.egress.map { p in
                    .object([
                        "probe": .string(p.probe), "interface": p.interface.map(JSONValue.string) ?? .null,
                        "kind": p.classification.map { .string($0.kind.rawValue) } ?? .null, "via_tunnel": .bool(p.viaTunnel),
                    ])
                }),
                "tunnels": .array(route.outside.map { t in
                    .object([
                        "tunnel": .string(t.tunnel), "underlay": .string(t.underlay),
                        "outside_bytes": .object(["rx": .number(t.rxBytes), "tx": .number(t.txBytes)]), "uncertain": .bool(t.uncertain),
                    ])
                }),
                "note": .string(RouteReport.caveat),
            ])
        }
        if let state = report.state {
            var note: String
            if !state.restored {
                note = "New state: totals count from its creation."
            } else if state.sameBoot {
                note = "Restored: the kernel counters went on while ifmeter was stopped, so that traffic is counted."
            } else {
                note = "Restored across a reboot: traffic between the last save and the reboot is unknown, so restored totals are lower bounds."
            }
            o["state"] = .object([
                "path": .string(state.path), "since": .string(RFC3339.format(report.totalsSince)),
                "restored": .bool(state.restored), "same_boot": .bool(state.sameBoot), "note": .string(note),
            ])
        }
        return .object(o)
    }

    /// One line of compact JSON.
    public func line(_ report: PeriodReport) -> String { JSONWriter().string(value(report)) }
}

/// RFC 3339 timestamps in UTC, with milliseconds, without Foundation.
public enum RFC3339 {
    /// Any `Double`: a time outside `LocalZone.printable` (years 0001 to
    /// 9999), or not finite, is clamped to its nearest end (NaN to the
    /// epoch), never a trap. Callers that read a time from a file check it
    /// first (`LocalZone.second`) and say what it is.
    public static func format(_ unix: Double) -> String {
        let limits = Double(LocalZone.printable.lowerBound)...Double(LocalZone.printable.upperBound)
        let unix = unix.isNaN ? 0 : min(max(unix, limits.lowerBound), limits.upperBound)
        let millis = Int64((unix * 1000).rounded(.down))
        var seconds = millis / 1000
        let ms = Int(millis - seconds * 1000)
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        seconds -= days * 86400
        let (y, m, d) = civil(fromDays: days)
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(Int(seconds / 3600), 2)):\(pad(Int(seconds % 3600 / 60), 2)):\(pad(Int(seconds % 60), 2)).\(pad(ms, 3))Z"
    }

    /// Howard Hinnant's days-to-civil.
    static func civil(fromDays z0: Int64) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(m <= 2 ? y + 1 : y), Int(m), Int(d))
    }
}

extension UInt64 {
    /// A byte sum kept as a `Double`, as a whole number: NaN and negatives
    /// are 0, and past 2^64-1 it stops there (never a trap).
    init(clampingBytes value: Double) {
        if !(value > 0) {
            self = 0
        } else if value >= 18_446_744_073_709_551_616.0 {
            self = .max
        } else {
            self = UInt64(value)
        }
    }
}
