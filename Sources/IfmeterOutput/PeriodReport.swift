import IfmeterCore

/// A periodic export report, schema `ifmeter.export` version 2
/// (`schemas/ifmeter-report.v2.schema.json`).
package struct PeriodReport: Sendable {
    package struct Period: Sendable {
        /// Unix times (written as RFC 3339) and monotonic seconds.
        package var startWall: Double
        package var endWall: Double
        package var startMonotonic: Double
        package var endMonotonic: Double

        package init(startWall: Double, endWall: Double, startMonotonic: Double, endMonotonic: Double) {
            self.startWall = startWall
            self.endWall = endWall
            self.startMonotonic = startMonotonic
            self.endMonotonic = endMonotonic
        }

        /// How far the wall clock stepped during the period (`ClockStep`);
        /// 0 without a step.
        package var clockStepSeconds: Double {
            ClockStep.seconds(wall: (startWall, endWall), monotonic: (startMonotonic, endMonotonic))
        }
    }

    /// Where the totals come from when they persist (`--state`): the
    /// model's `StateInfo`.
    package typealias State = StateInfo

    package var host: String
    package var source: String
    package var period: Period
    package var interfaces: [InterfaceTotals]
    package var periodEntries: [SeriesKey: PeriodAccumulator.Entry]
    /// Unix time the totals count from without `--state`.
    package var since: Double
    package var state: State?
    /// `export --probe`: where the probes leave at the period's end, and
    /// each tunnel's outside bytes over the period.
    package var route: RouteExposition?

    /// When the totals count from: the state's, unless that is no time a
    /// calendar holds (a state file's meta said 1e300, inf or garbage):
    /// then this run's `since`, as for a state without one.
    package var totalsSince: Double {
        guard let state, LocalZone.second(state.since) != nil else { return since }
        return state.since
    }

    package init(
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
package struct PeriodReportRenderer: Sendable {
    package static var schemaName: String { JSONEnvelope.export.schema }
    package static var schemaVersion: Int { JSONEnvelope.export.version }

    package init() {}

    package func value(_ report: PeriodReport) -> JSONValue {
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
        var period: [String: JSONValue] = [
            "start": .string(RFC3339.format(report.period.startWall)),
            "end": .string(RFC3339.format(report.period.endWall)),
            "start_monotonic": .number(report.period.startMonotonic),
            "end_monotonic": .number(report.period.endMonotonic),
            "seconds": .number(seconds),
            "clock_step_seconds": .number(report.period.clockStepSeconds),
        ]
        if let note = ClockStep.sentence(report.period.clockStepSeconds, during: "this period") { period["note"] = .string(note) }
        var o: [String: JSONValue] = [
            "host": .string(report.host),
            "source": .string(report.source),
            "period": .object(period),
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
                "probes": .array(
                    route.egress.map { p in
                        .object([
                            "probe": .string(p.probe), "interface": p.interface.map(JSONValue.string) ?? .null,
                            "kind": p.classification.map { .string($0.kind.rawValue) } ?? .null, "via_tunnel": .bool(p.viaTunnel),
                        ])
                    }),
                "tunnels": .array(
                    route.outside.map { t in
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
        return JSONEnvelope.export.document(o)
    }

    /// One line of compact JSON.
    package func line(_ report: PeriodReport) -> String { JSONWriter().string(value(report)) }
}
