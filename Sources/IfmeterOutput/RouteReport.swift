import IfmeterCore

/// What `ifmeter route` reports.
package struct RouteReport: Sendable {
    package var probes: [ProbeRoute]
    package var tunnels: [(underlay: TunnelUnderlay, estimate: OutsideEstimate?)]

    package init(probes: [ProbeRoute], tunnels: [(underlay: TunnelUnderlay, estimate: OutsideEstimate?)]) {
        self.probes = probes
        self.tunnels = tunnels
    }

    /// Ordinary traffic leaves outside the tunnels: some probe's packets
    /// would leave by an interface that is not a tunnel. A probe with no
    /// route leaves nowhere, so it does not count against the tunnels.
    package var leaksOutside: Bool { probes.contains { $0.leavesOutside } }

    package static let caveat = """
        The outside estimate is underlay bytes minus tunnel bytes minus tunnel packets x overhead, floored at 0: \
        the traffic that used the underlay without the tunnel (local network traffic, the tunnel's own control \
        traffic, and leaks). It is an estimate from interface counters; a wrong overhead or a second tunnel on \
        the same underlay moves it.
        """

    package func json(window: Bool) -> JSONValue {
        func pair(_ p: (rx: UInt64, tx: UInt64)) -> JSONValue { .object(["rx": .number(p.rx), "tx": .number(p.tx)]) }
        let probes = probes.map { p -> JSONValue in
            var o: [String: JSONValue] = [
                "probe": .string(p.probe),
                "interface": p.interface.map(JSONValue.string) ?? .null,
                "kind": p.classification.map { .string($0.kind.rawValue) } ?? .null,
                "evidence": p.classification.map { .string($0.evidence) } ?? .null,
                "gateway": p.gateway.map(JSONValue.string) ?? .null,
                "via_tunnel": .bool(p.viaTunnel),
            ]
            if let failure = p.failure { o["no_route"] = .string(failure) }
            return .object(o)
        }
        let tunnels = tunnels.map { t -> JSONValue in
            var o: [String: JSONValue] = [
                "tunnel": .string(t.underlay.tunnel),
                "underlay": t.underlay.underlay.map(JSONValue.string) ?? .null,
                "evidence": .string(t.underlay.evidence),
                "overhead_bytes": .number(t.underlay.overheadBytes),
                "shared_underlay": .bool(t.underlay.sharedUnderlay),
            ]
            if window, let e = t.estimate {
                o["window"] = .number(e.seconds)
                o["tunnel_bytes"] = pair(e.tunnelBytes)
                o["tunnel_packets"] = pair(e.tunnelPackets)
                o["underlay_bytes"] = pair(e.underlayBytes)
                o["outside_bytes"] = pair(e.outsideBytes)
                o["quality"] = .string(e.quality.name)
                o["uncertain"] = .bool(e.uncertain)
            }
            return .object(o)
        }
        return JSONEnvelope.route.document([
            "caveat": .string(Caveat.sentence + " " + Self.caveat),
            "leaves_outside_tunnels": .bool(leaksOutside),
            "probes": .array(probes),
            "tunnels": .array(tunnels),
        ])
    }

    package func text(window: Bool, bits: Bool = false) -> String {
        var out = ""
        var probeTable = TextTable(headers: ["PROBE", "INTERFACE", "KIND", "EVIDENCE", "GATEWAY", "VIA TUNNEL"])
        for p in probes {
            probeTable.add([
                p.probe, p.interface.map { TerminalText.escaped($0) } ?? "-", p.classification?.kind.rawValue ?? "-",
                p.classification?.evidence ?? "-", p.gateway ?? "-",
                p.interface == nil ? "no route (\(p.failure ?? "unreachable"))" : (p.viaTunnel ? "yes" : "NO"),
            ])
        }
        out += probeTable.lines().joined(separator: "\n") + "\n\n"
        if tunnels.isEmpty {
            out += "No tunnel interfaces.\n\n"
        } else {
            var headers = ["TUNNEL", "UNDERLAY", "EVIDENCE", "OVERHEAD"]
            if window { headers += ["WINDOW", "TUNNEL RX", "TUNNEL TX", "UNDERLAY RX", "UNDERLAY TX", "OUTSIDE RX", "OUTSIDE TX", "QUALITY"] }
            var table = TextTable(headers: headers, rightAligned: window ? [3, 4, 5, 6, 7, 8, 9, 10] : [3])
            for t in tunnels {
                var row = [
                    TerminalText.escaped(t.underlay.tunnel), t.underlay.underlay.map { TerminalText.escaped($0) } ?? "-",
                    t.underlay.evidence + (t.underlay.sharedUnderlay ? " (shared)" : ""), "\(t.underlay.overheadBytes) B",
                ]
                if window {
                    if let e = t.estimate {
                        let mark = e.uncertain ? "?" : e.quality.mark
                        func marked(_ figure: String) -> String { mark.isEmpty ? figure : mark + " " + figure }
                        row += [
                            Units.duration(e.seconds), Units.bytes(e.tunnelBytes.rx), Units.bytes(e.tunnelBytes.tx),
                            Units.bytes(e.underlayBytes.rx), Units.bytes(e.underlayBytes.tx),
                            marked(Units.bytes(e.outsideBytes.rx)), marked(Units.bytes(e.outsideBytes.tx)),
                            e.uncertain ? "uncertain" : e.quality.name,
                        ]
                    } else {
                        row += ["-", "-", "-", "-", "-", "-", "-", "no underlay"]
                    }
                }
                table.add(row)
            }
            out += table.lines().joined(separator: "\n") + "\n\n"
        }
        let outside = probes.filter(\.leavesOutside)
        if let first = outside.first {
            out += "Verdict: ordinary traffic leaves OUTSIDE the tunnels: \(first.probe) by \(TerminalText.escaped(first.interface ?? "-"))"
            out += outside.count > 1 ? " (and \(outside.count - 1) more probes).\n" : ".\n"
        } else if probes.contains(where: \.viaTunnel) {
            out += "Verdict: every probe that has a route leaves through a tunnel.\n"
        } else {
            out += "Verdict: no probe has a route; nothing would leave.\n"
        }
        out += wordWrap(Self.caveat, width: 100).joined(separator: "\n") + "\n"
        out += Caveat.sentence + "\n"
        return out
    }
}
