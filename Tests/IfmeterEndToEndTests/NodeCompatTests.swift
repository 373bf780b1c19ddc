import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve --compat node` beside a real node_exporter (Debian's 1.5, netdev
/// and netclass collectors, nothing else) in the same test namespace: every
/// node_network_* family it serves, with the same HELP, type, labels and
/// values.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct NodeCompatTests {
    static let port: UInt16 = 9874
    /// `serve --netns` listens in the test's own namespace: a port of the
    /// tests' range.
    static let outsidePort: UInt16 = 19461

    /// What node_exporter reads from sysfs and neither netlink nor ethtool
    /// has: absent when ifmeter samples a namespace from outside.
    static let sysfsOnly: Set<String> = [
        "node_network_address_assign_type", "node_network_device_id", "node_network_name_assign_type",
    ]

    /// One text exposition's node_network_* families: HELP and TYPE by
    /// family, and every sample by name and labels.
    struct Families {
        var help: [String: String] = [:]
        var type: [String: String] = [:]
        var samples: [Series: Double] = [:]

        struct Series: Hashable, CustomStringConvertible {
            var name: String
            var labels: [String: String]
            var description: String {
                name + "{" + labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",") + "}"
            }
        }

        init(_ text: String) throws {
            for line in text.split(separator: "\n") {
                if line.hasPrefix("# HELP node_network_") || line.hasPrefix("# TYPE node_network_") {
                    let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
                    if parts[1] == "HELP" { help[parts[2]] = parts.count > 3 ? parts[3] : "" } else { type[parts[2]] = parts[3] }
                } else if line.hasPrefix("node_network_") {
                    let (series, value) = try Self.parse(Substring(line))
                    samples[series] = value
                }
            }
        }

        /// `name{label="value",...} number`, values unescaped.
        static func parse(_ line: Substring) throws -> (Series, Double) {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                throw TestFailure("no value in \(line)")
            }
            let head = line[..<space]
            guard let brace = head.firstIndex(of: "{") else { return (Series(name: String(head), labels: [:]), value) }
            var labels: [String: String] = [:]
            var rest = head[head.index(after: brace)...].dropLast() // without the closing brace
            while !rest.isEmpty {
                guard let equals = rest.firstIndex(of: "=") else { throw TestFailure("bad labels in \(line)") }
                let label = String(rest[..<equals])
                rest = rest[rest.index(equals, offsetBy: 2)...] // past ="
                var text = ""
                var escaped = false
                while let c = rest.first {
                    rest = rest.dropFirst()
                    if escaped {
                        text.append(c == "n" ? "\n" : c)
                        escaped = false
                    } else if c == "\\" {
                        escaped = true
                    } else if c == "\"" {
                        break
                    } else {
                        text.append(c)
                    }
                }
                labels[label] = text
                if rest.first == "," { rest = rest.dropFirst() }
            }
            return (Series(name: String(head[..<brace]), labels: labels), value)
        }
    }

    /// The namespace under test: a veth to another namespace with an
    /// alias, a set MTU, queue length and group; a bridge whose port is
    /// made promiscuous by the bridge (not by hand, so netlink's flags and
    /// sysfs's differ); a tun that is down and one that is up.
    final class Setup {
        let pair: VethPair
        var tunFD: Int32 = -1
        var ns: TestNamespace { pair.a }

        init() throws {
            pair = try VethPair()
            try ns.ip("tuntap", "add", "mode", "tun", "dev", "tun0")
            try ns.ip("link", "add", "vC", "type", "veth", "peer", "name", "vD")
            // Without multicast snooping: a snooping bridge sends two IGMP
            // reports of its own (224.0.0.106) in its first second up.
            try ns.ip("link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
        }

        /// Changes made while the exporters run: ifmeter must follow them
        /// from link notifications (its periodic refresh is 10 s away).
        func change() throws {
            try ns.ip("link", "set", "vA", "alias", #"uplink "a" \ 1"#, "mtu", "1400", "txqueuelen", "500", "group", "7")
            try ns.ip("link", "set", "vC", "master", "br0")
            for device in ["vC", "vD", "br0"] { try ns.ip("link", "set", device, "up") }
            tunFD = try ns.openTun("tun1")
            try ns.ip("link", "set", "tun1", "up")
            // Two carrier flaps on vA, seen from the other end.
            for _ in 0..<2 {
                try pair.b.ip("link", "set", pair.nameB, "down")
                try pair.b.ip("link", "set", pair.nameB, "up")
            }
            _ = try waitFor("vA's carrier") {
                try ns.ip("-o", "link", "show", "dev", "vA").contains("LOWER_UP") ? true : nil
            }
        }

        /// Traffic on the veth and into the tun; returns when it is over.
        func traffic() throws {
            try pair.sendUDP(count: 200, payload: 700)
            let packet = ipv4Packet(payload: 300)
            for _ in 0..<20 { _ = write(tunFD, packet, packet.count) }
        }

        deinit { if tunFD >= 0 { close(tunFD) } }
    }

    func nodeExporter(_ ns: TestNamespace) throws -> Background {
        let exporter = try Background(
            [
                "ip", "netns", "exec", ns.name, "prometheus-node-exporter", "--collector.disable-defaults", "--collector.netdev",
                "--collector.netclass", "--web.listen-address=127.0.0.1:9100",
            ], name: "node-exporter")
        _ = try waitFor("node_exporter") { try? RawHTTP.request("/metrics", port: 9100, in: ns.name) }
        return exporter
    }

    func scrape(port: UInt16, in ns: String?, openMetrics: Bool = false) throws -> String {
        let accept = openMetrics ? "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5" : "*/*"
        let result = try RawHTTP.request("/metrics", port: port, in: ns, headers: ["Accept": accept])
        guard result.status == 200 else { throw TestFailure("scrape: status \(result.status)") }
        return result.text
    }

    /// node_exporter's scrape and ifmeter's (`ours`), taken when nothing
    /// moved. The test's traffic is over, but the kernel may still send a
    /// packet of its own (a snooping bridge's IGMP report, at a random delay
    /// after it came up), so they count only when node_exporter read the
    /// same values before and after ifmeter's scrape, with an ifmeter sample
    /// taken in between (ifmeter_samples_total moved past its value after
    /// node_exporter's first read).
    func quietScrapes(_ ns: TestNamespace, ours: () throws -> String) throws -> (theirs: Families, ours: Families, text: String) {
        func samples(_ text: String) throws -> Double {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ifmeter_samples_total ") }),
                let value = Double(line.split(separator: " ")[1])
            else { throw TestFailure("no ifmeter_samples_total in ifmeter's scrape") }
            return value
        }
        for _ in 1...10 {
            let before = try Families(try scrape(port: 9100, in: ns.name))
            let taken = try samples(try ours())
            let text = try waitFor("an ifmeter sample after node_exporter's read") { () throws -> String? in
                let text = try ours()
                return try samples(text) > taken ? text : nil
            }
            let theirs = try Families(try scrape(port: 9100, in: ns.name))
            if theirs.samples == before.samples { return (theirs, try Families(text), text) }
        }
        throw TestFailure("the counters never stood still from one of node_exporter's reads to the next, ten times")
    }

    @Test func compatNodeServesWhatNodeExporterServes() throws {
        try Netns.requireRoot()
        let setup = try Setup()
        let ns = setup.ns
        let server = try startServe(in: ns, port: Self.port, ["--compat", "node"])
        defer { server.stop() }
        let exporter = try nodeExporter(ns)
        defer { exporter.stop() }
        try setup.change()
        try setup.traffic()
        let (theirs, ours, text) = try quietScrapes(ns) { try scrape(port: Self.port, in: ns.name) }

        // node_exporter's families are the ones expected (its defaults did
        // not change under the test), and the setup shows in them.
        let expected = [
            "up", "info", "speed_bytes", "mtu_bytes", "carrier", "carrier_changes_total", "flags", "iface_link",
            "address_assign_type", "name_assign_type", "device_id", "transmit_queue_length", "net_dev_group",
            "receive_bytes_total", "transmit_packets_total",
        ].map { "node_network_" + $0 }
        for family in expected { #expect(theirs.type[family] != nil, "node_exporter serves \(family)") }
        #expect(theirs.type.count == 36, "node_exporter 1.5: 17 netdev and 19 netclass families: \(theirs.type.keys.sorted())")
        let vA = ["device": "vA"]
        #expect(theirs.samples[.init(name: "node_network_mtu_bytes", labels: vA)] == 1400)
        #expect(theirs.samples[.init(name: "node_network_carrier_changes_total", labels: vA)] ?? 0 >= 5)
        let vCFlags = UInt32(theirs.samples[.init(name: "node_network_flags", labels: ["device": "vC"])] ?? 0)
        #expect(vCFlags & 0x100 != 0, "the bridge port is promiscuous")
        #expect(theirs.samples.keys.contains { $0.name == "node_network_info" && $0.labels["ifalias"] == #"uplink "a" \ 1"# })
        #expect(theirs.samples[.init(name: "node_network_receive_packets_total", labels: ["device": "tun1"])] == 20)

        // The same families, HELP, types, series and values.
        #expect(ours.type == theirs.type)
        #expect(ours.help == theirs.help)
        let missing = Set(theirs.samples.keys).subtracting(ours.samples.keys)
        let extra = Set(ours.samples.keys).subtracting(theirs.samples.keys)
        #expect(missing.isEmpty, "node_exporter's series ifmeter lacks: \(missing.map(\.description).sorted())")
        #expect(extra.isEmpty, "series only ifmeter serves: \(extra.map(\.description).sorted())")
        var compared = 0
        for (series, value) in theirs.samples {
            guard let mine = ours.samples[series] else { continue }
            #expect(mine == value, "\(series): ifmeter \(mine), node_exporter \(value)")
            compared += 1
        }
        #expect(compared > 36 * 3)

        // ifmeter's own families keep their interface label.
        #expect(text.contains(#"ifmeter_receive_bytes_total{interface="vA",kind="virtual"} "#))

        // Valid in both formats: promtool reads the text format (Debian
        // 12's cannot read OpenMetrics), prometheus_client's parser
        // OpenMetrics.
        let promtool = try run(["promtool", "check", "metrics"], input: text, allowFailure: true)
        #expect(promtool.status == 0, "promtool: \(promtool.out)\(promtool.err)")
        let om = try scrape(port: Self.port, in: ns.name, openMetrics: true)
        #expect(om.contains("# TYPE node_network_carrier_changes counter\n"))
        let parser = """
            import sys
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
            families = {f.name: f for f in text_string_to_metric_families(sys.stdin.read())}
            print(families["node_network_carrier_changes"].type, families["node_network_info"].type, len(families["node_network_up"].samples))
            """
        let parsed = try run(["/usr/bin/python3", "-c", parser], input: om, allowFailure: true)
        #expect(parsed.status == 0, "OpenMetrics parser: \(parsed.err)")
        let interfaces = theirs.samples.keys.filter { $0.name == "node_network_up" }.count
        #expect(parsed.out.trimmingCharacters(in: .whitespacesAndNewlines) == "counter gauge \(interfaces)")
        #expect(server.stop() == 0, "\(server.log)")
    }

    /// From outside the namespace (`--netns`) sysfs shows another
    /// namespace, so netlink is read, and the drivers are asked for speed
    /// and duplex (ethtool): every family but three sysfs-only ones is there
    /// with node_exporter's values (and a netns label).
    @Test func fromOutsideAllButSysfsOnlyFamiliesMatch() throws {
        try Netns.requireRoot()
        let setup = try Setup()
        let ns = setup.ns
        let server = try Background(
            [
                try ifmeterBinary(), "serve", "--interval", "300ms", "--compat", "node", "--netns", ns.name,
                "--listen", "127.0.0.1:\(Self.outsidePort)",
            ], name: "serve")
        defer { server.stop() }
        _ = try waitFor("ifmeter serve") { try? RawHTTP.request("/metrics", port: Self.outsidePort, in: nil) }
        let exporter = try nodeExporter(ns)
        defer { exporter.stop() }
        try setup.change()
        try setup.traffic()
        let (theirs, ours, _) = try quietScrapes(ns) { try scrape(port: Self.outsidePort, in: nil) }

        #expect(Set(ours.type.keys) == Set(theirs.type.keys).subtracting(Self.sysfsOnly))
        var compared = 0
        for (series, value) in theirs.samples where !Self.sysfsOnly.contains(series.name) {
            var labels = series.labels
            labels["netns"] = ns.name
            let mine = ours.samples[.init(name: series.name, labels: labels)]
            #expect(mine == value, "\(series): ifmeter \(String(describing: mine)), node_exporter \(value)")
            compared += 1
        }
        #expect(compared > 33 * 3)
        #expect(ours.samples.count == compared, "no other series")
    }
}
