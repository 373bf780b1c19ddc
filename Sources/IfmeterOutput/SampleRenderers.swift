import IfmeterCore

/// Renders what `ifmeter list` shows: metadata, no traffic.
package struct ListRenderer: Sendable {
    package init() {}

    package func text(_ sample: Sample, source: String) -> String {
        var table = TextTable(
            headers: ["INDEX", "INTERFACE", "KIND", "EVIDENCE", "WIDTH", "SPEED", "OPERSTATE", "MTU"],
            rightAligned: [0, 4, 7])
        for i in sample.interfaces.sorted(by: { $0.key < $1.key }) {
            let attributes = i.attributes
            var speed = "-"
            if let ceiling = i.speedBps {
                speed = Units.rate(bytesPerSecond: Double(ceiling) / 8, bits: true)
            } else if let reported = attributes?.reportedSpeedBps {
                speed = "(" + Units.rate(bytesPerSecond: Double(reported) / 8, bits: true) + ")"
            }
            table.add([
                i.index.map(String.init) ?? "-", i.key.display, i.kind?.rawValue ?? "-",
                i.classification?.evidence ?? "-", "\(i.width.rawValue)-bit", speed,
                attributes?.operstate ?? "-", attributes?.mtu.map(String.init) ?? "-",
            ])
        }
        var lines = table.lines()
        lines.append("")
        lines.append("Source: \(source). SPEED in parentheses is what the driver reports but is no limit (not hardware).")
        return lines.joined(separator: "\n") + "\n"
    }

    package func json(_ sample: Sample, source: String) -> JSONValue {
        JSONEnvelope.list.document(
            [
                "source": .string(source),
                "interfaces": .array(sample.interfaces.sorted(by: { $0.key < $1.key }).map(Self.describe)),
            ], caveats: [Caveat.estimate])
    }

    /// Everything a sample knows about one interface, counters aside.
    static func describe(_ i: InterfaceSample) -> JSONValue {
        var o: [String: JSONValue] = ["name": .string(i.name), "width": .number(i.width.rawValue)]
        if !i.netns.isEmpty { o["netns"] = .string(i.netns) }
        if let index = i.index { o["index"] = .number(index) }
        if let c = i.classification {
            o["kind"] = .string(c.kind.rawValue)
            o["evidence"] = .string(c.evidence)
        }
        o["speed_bps"] = i.speedBps.map { .number($0) } ?? .null
        if let a = i.attributes {
            if let s = a.operstate { o["operstate"] = .string(s) }
            if let up = a.adminUp { o["admin_up"] = .bool(up) }
            if let mtu = a.mtu { o["mtu"] = .number(mtu) }
            if let t = a.arphrdType { o["arphrd_type"] = .number(t) }
            if let r = a.reportedSpeedBps { o["reported_speed_bps"] = .number(r) }
            if let h = a.isHardware { o["hardware"] = .bool(h) }
        }
        return .object(o)
    }
}

/// Renders one sample's raw counters: what `ifmeter sample` prints without
/// `--count`.
package struct SnapshotRenderer: Sendable {
    package var bits: Bool

    package init(bits: Bool = false) { self.bits = bits }

    package func text(_ sample: Sample, source: String) -> String {
        var table = TextTable(
            headers: ["INTERFACE", "INDEX", "KIND", "RX", "TX", "RX PKTS", "TX PKTS", "WIDTH"],
            rightAligned: [1, 3, 4, 5, 6])
        for i in sample.interfaces.sorted(by: { $0.key < $1.key }) {
            let c = i.counters
            table.add([
                i.key.display, i.index.map(String.init) ?? "-", i.kind?.rawValue ?? "-",
                size(c.rxBytes), size(c.txBytes),
                Units.grouped(c.rxPackets), Units.grouped(c.txPackets), "\(i.width.rawValue)-bit",
            ])
        }
        var lines = table.lines()
        lines.append("")
        lines.append("Counters since each interface was created, read by \(source). A 32-bit counter wraps at 4 GiB.")
        if !bits { lines.append("Sizes from 1 KiB up are rounded; --format json gives every counter exactly.") }
        lines.append(Caveat.estimate)
        return lines.joined(separator: "\n") + "\n"
    }

    private func size(_ bytes: UInt64) -> String {
        bits ? Units.fixed(Double(bytes) * 8, 0) + " bit" : Units.bytes(bytes)
    }

    package func json(_ sample: Sample, source: String) -> JSONValue {
        JSONEnvelope.sample.document(
            [
                "source": .string(source),
                "t": .number(sample.time),
                "interfaces": .array(
                    sample.interfaces.sorted(by: { $0.key < $1.key }).map { i in
                        guard case .object(var o) = ListRenderer.describe(i) else { return .null }
                        o["counters"] = JSONReportRenderer.counters(i.counters)
                        return .object(o)
                    }),
            ], caveats: [Caveat.estimate])
    }
}

/// Renders one interval: each interface's delta, rate and running total.
package struct IntervalRenderer: Sendable {
    package var bits: Bool

    package init(bits: Bool = false) { self.bits = bits }

    /// `heading`: the interval's wall-clock time as people read it (the
    /// monotonic `t` without it); `clockStep`: how far the wall clock
    /// stepped during the interval (`ClockStep`), said under the heading;
    /// `shown` gathers the quality marks printed, for the legend at the end.
    package func text(
        deltas: [InterfaceDelta], totals: (SeriesKey) -> InterfaceTotals?, time: Double, seconds: Double?, heading: String? = nil,
        clockStep: Double = 0, wide: Bool = false, shown: inout Set<Quality>
    ) -> String {
        var headers = ["INTERFACE", "KIND", "RX RATE", "TX RATE", "RX", "TX", "RX PKTS", "TX PKTS"]
        if wide { headers += ["RX PKT/S", "TX PKT/S", "RX ERR", "TX ERR", "RX DROP", "TX DROP"] }
        headers += ["TOTAL RX", "TOTAL TX", "NOTE"]
        var table = TextTable(headers: headers, rightAligned: Set(2..<(headers.count - 1)))
        for d in deltas.sorted(by: { $0.key < $1.key }) {
            let q = d.quality
            shown.insert(q)
            let rx = d.rate(.rxBytes).map { q.marked(Units.rate(bytesPerSecond: $0, bits: bits)) } ?? "-"
            let tx = d.rate(.txBytes).map { q.marked(Units.rate(bytesPerSecond: $0, bits: bits)) } ?? "-"
            var totalRx = "-", totalTx = "-"
            if let t = totals(d.key) {
                shown.insert(t.quality)
                totalRx = t.quality.marked(Units.bytes(t.totals.rxBytes))
                totalTx = t.quality.marked(Units.bytes(t.totals.txBytes))
            }
            var row = [
                d.key.display, d.classification.kind.rawValue, rx, tx,
                q.marked(Units.bytes(d.counters.rxBytes)), q.marked(Units.bytes(d.counters.txBytes)),
                q.marked(Units.grouped(d.counters.rxPackets)), q.marked(Units.grouped(d.counters.txPackets)),
            ]
            if wide {
                func perSecond(_ key: CounterKey) -> String {
                    d.rate(key).map { q.marked(Units.fixed($0, $0 < 10 ? 1 : 0)) } ?? "-"
                }
                func count(_ key: CounterKey) -> String {
                    d.counters.has(key) ? q.marked(Units.grouped(d.counters.value(key))) : "-"
                }
                row += [perSecond(.rxPackets), perSecond(.txPackets), count(.rxErrors), count(.txErrors), count(.rxDropped), count(.txDropped)]
            }
            row += [totalRx, totalTx, d.change.note]
            table.add(row)
        }
        var head = heading ?? "t=\(Units.fixed(time, 3))"
        if let seconds { head += " (interval \(Units.duration(seconds)))" }
        if let step = ClockStep.sentence(clockStep, during: "this interval") { head += "\n" + step }
        return ([head] + table.lines()).joined(separator: "\n") + "\n"
    }

    /// `clockStep`: as for `text`; `clock_step_seconds` and `note` are
    /// there only when the wall clock stepped (an interval without a step
    /// is as before).
    package func json(
        deltas: [InterfaceDelta], totals: (SeriesKey) -> InterfaceTotals?, time: Double, seconds: Double?, wallTime: String? = nil,
        clockStep: Double = 0
    ) -> JSONValue {
        var step: [String: JSONValue] = [:]
        if let note = ClockStep.sentence(clockStep, during: "this interval") {
            step = ["clock_step_seconds": .number(clockStep), "note": .string(note)]
        }
        return JSONEnvelope.interval.document(
            step.merging([
                "t": .number(time),
                "time": wallTime.map(JSONValue.string) ?? .null,
                "seconds": seconds.map(JSONValue.number) ?? .null,
                "interfaces": .array(
                    deltas.sorted(by: { $0.key < $1.key }).map { d in
                        var o: [String: JSONValue] = [
                            "name": .string(d.name),
                            "netns": d.netns.isEmpty ? .null : .string(d.netns),
                            "kind": .string(d.classification.kind.rawValue),
                            "evidence": .string(d.classification.evidence),
                            "change": .string(d.change.rawValue),
                            "quality": .string(d.quality.name),
                            "delta": JSONReportRenderer.counters(d.counters),
                            "seconds": d.seconds.map(JSONValue.number) ?? .null,
                        ]
                        if let index = d.index { o["index"] = .number(index) }
                        var rates: [String: JSONValue] = [:]
                        for key in d.counters.keys { rates[key.jsonKey + "_per_second"] = d.rate(key).map(JSONValue.number) ?? .null }
                        o["rates"] = .object(rates)
                        if let t = totals(d.key) {
                            o["totals"] = JSONReportRenderer.counters(t.totals)
                            o["totals_quality"] = .string(t.quality.name)
                        }
                        return .object(o)
                    }),
            ]) { a, _ in a })
    }
}
