import IfmeterCore

/// Totals over a window: what `replay` prints and what a finished `sample`
/// or `record` run sums up.
package struct Report: Sendable {
    package var start: Double?
    package var end: Double?
    package var header: TraceHeader
    package var interfaces: [InterfaceTotals]

    package init(start: Double?, end: Double?, header: TraceHeader = TraceHeader(), interfaces: [InterfaceTotals]) {
        self.start = start
        self.end = end
        self.header = header
        self.interfaces = interfaces
    }

    /// The engine's totals, sorted by (namespace, name).
    package init(engine: DeltaEngine, header: TraceHeader = TraceHeader()) {
        self.init(start: engine.firstTime, end: engine.lastTime, header: header, interfaces: engine.interfaces)
    }
}

/// Turns a report into text of one format.
package protocol ReportRenderer: Sendable {
    func render(_ report: Report) -> String
}

/// The contract's JSON report (trace v1), with sorted keys and extra detail.
package struct JSONReportRenderer: ReportRenderer {
    package var indent: Int

    package init(indent: Int = 2) { self.indent = indent }

    package func render(_ report: Report) -> String {
        JSONWriter(indent: indent).string(value(report)) + "\n"
    }

    package func value(_ report: Report) -> JSONValue {
        var window: [String: JSONValue] = [
            "start": report.start.map(JSONValue.number) ?? .null,
            "end": report.end.map(JSONValue.number) ?? .null,
        ]
        if let start = report.start, let end = report.end { window["seconds"] = .number(end - start) }
        var o: [String: JSONValue] = [
            "window": .object(window),
            "interfaces": .array(report.interfaces.map(Self.interface)),
            "platform": .string(report.header.platform.rawValue),
        ]
        if let source = report.header.source { o["source"] = .string(source) }
        if let host = report.header.host { o["host"] = .string(host) }
        return JSONEnvelope.replay.document(o)
    }

    static func counters(_ counters: Counters) -> JSONValue {
        var o: [String: JSONValue] = [:]
        for key in CounterKey.required { o[key.jsonKey] = .number(counters.value(key)) }
        for key in CounterKey.extras where counters[key] != nil { o[key.jsonKey] = .number(counters.value(key)) }
        return .object(o)
    }

    static func events(_ events: EventCounts) -> JSONValue {
        .object([
            "wraps": .number(events.wraps), "resets": .number(events.resets),
            "recreations": .number(events.recreations), "deletions": .number(events.deletions),
        ])
    }

    static func interface(_ i: InterfaceTotals) -> JSONValue {
        var o: [String: JSONValue] = [
            "name": .string(i.name),
            "kind": .string(i.classification.kind.rawValue),
            "evidence": .string(i.classification.evidence),
            "totals": counters(i.totals),
            "quality": .string(i.quality.name),
            "lower_bound": .bool(i.quality == .lowerBound),
            "events": events(i.events),
            "width": .number(i.width.rawValue),
            "present": .bool(i.present),
        ]
        if let index = i.index { o["index"] = .number(index) }
        if let deletedAt = i.deletedAt { o["deleted_at"] = .number(deletedAt) }
        if !i.netns.isEmpty { o["netns"] = .string(i.netns) }
        return .object(o)
    }
}

/// An aligned table in IEC units, with quality marks and the caveats.
package struct TextReportRenderer: ReportRenderer {
    package var bits: Bool

    package init(bits: Bool = false) { self.bits = bits }

    package func render(_ report: Report) -> String {
        var lines: [String] = []
        var title = "ifmeter report"
        if let start = report.start, let end = report.end {
            title += ": \(Units.duration(end - start)) (t \(Units.fixed(start, 3)) to \(Units.fixed(end, 3)))"
        }
        if let source = report.header.source { title += ", source \(source)" }
        if let host = report.header.host { title += ", host \(host)" }
        lines.append(title)
        lines.append("")
        var table = TextTable(
            headers: ["INTERFACE", "KIND", "RX", "TX", "RX PKTS", "TX PKTS", "QUALITY", "EVENTS"],
            rightAligned: [2, 3, 4, 5])
        var shown = Set<Quality>()
        for i in report.interfaces {
            let q = i.quality
            shown.insert(q)
            let rx = bits ? Units.fixed(Double(i.totals.rxBytes) * 8, 0) + " bit" : Units.bytes(i.totals.rxBytes)
            let tx = bits ? Units.fixed(Double(i.totals.txBytes) * 8, 0) + " bit" : Units.bytes(i.totals.txBytes)
            table.add([
                i.key.display, i.classification.kind.rawValue, q.marked(rx), q.marked(tx),
                q.marked(Units.grouped(i.totals.rxPackets)), q.marked(Units.grouped(i.totals.txPackets)),
                q.name, i.events.summary,
            ])
        }
        lines += table.lines()
        if report.interfaces.isEmpty { lines.append("(no interfaces)") }
        lines.append("")
        lines += Caveat.legend(shown: shown)
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Columns padded to their widest cell.
package struct TextTable: Sendable {
    package var headers: [String]
    package var rightAligned: Set<Int>
    package private(set) var rows: [[String]] = []

    package init(headers: [String], rightAligned: Set<Int> = []) {
        self.headers = headers
        self.rightAligned = rightAligned
    }

    package mutating func add(_ row: [String]) { rows.append(row) }

    /// Columns at least this wide (by index): tables printed a part at a
    /// time line up.
    package var minimumWidths: [Int] = []

    /// The lines, headers first unless `headers` is false (a table's later
    /// part).
    package func lines(headers withHeaders: Bool = true) -> [String] {
        var widths = headers.map(Self.width)
        for (c, width) in minimumWidths.enumerated() where c < widths.count { widths[c] = max(widths[c], width) }
        for row in rows {
            for (c, cell) in row.enumerated() where c < widths.count { widths[c] = max(widths[c], Self.width(cell)) }
        }
        return ((withHeaders ? [headers] : []) + rows).map { row in
            var line = ""
            for (c, cell) in row.enumerated() {
                let pad = String(repeating: " ", count: widths[c] - Self.width(cell))
                if c > 0 { line += "  " }
                line += rightAligned.contains(c) ? pad + cell : cell + pad
            }
            while line.last == " " { line.removeLast() }
            return line
        }
    }

    /// Columns a cell takes in a terminal: one per scalar, which holds for the
    /// names, digits and marks ifmeter prints.
    package static func width(_ s: String) -> Int {
        // Scalars counted by their UTF-8 lead bytes (every byte but
        // 10xxxxxx continuations): a table of years counts millions.
        var n = 0
        for byte in s.utf8 where byte & 0xC0 != 0x80 { n += 1 }
        return n
    }
}
