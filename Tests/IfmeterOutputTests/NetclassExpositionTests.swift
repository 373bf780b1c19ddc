import IfmeterCore
import IfmeterOutput
import Testing

/// The netclass families `--compat node` adds, from hand-made facts: the
/// rules node_exporter follows for links that are down, unknown speeds,
/// missing addresses and other namespaces.
@Suite struct NetclassExpositionTests {
    func render(_ samples: [InterfaceSample], _ families: ExpositionFamilies, openMetrics: Bool = false) -> String {
        var engine = DeltaEngine()
        engine.apply(Sample(time: 1, interfaces: samples))
        let input = ExpositionInput(
            interfaces: engine.interfaces.map(ExpositionRow.init),
            health: ExporterHealth(version: "9.9", source: "netlink", startTime: 1_700_000_000, intervalSeconds: 1),
            families: families)
        let bytes = openMetrics ? OpenMetricsRenderer().render(input) : PrometheusTextRenderer().render(input)
        return String(decoding: bytes, as: UTF8.self)
    }

    func link(
        _ name: String, index: Int, netns: String = "", operstate: String, mtu: UInt32, type: Int, facts: NetclassFacts
    ) -> InterfaceSample {
        var sample = InterfaceSample(
            name: name, netns: netns, index: index, counters: Counters(rxBytes: 1, txBytes: 2, rxPackets: 1, txPackets: 1),
            attributes: LinkAttributes(operstate: operstate, adminUp: facts.running, mtu: mtu, arphrdType: type, netclass: facts),
            kernelStats: KernelLinkStats(values: [1, 1, 1, 2]))
        sample.classification = Classification(kind: .virtual, evidence: "test")
        return sample
    }

    /// An Ethernet link that is up, with an unknown speed (-1) and an alias.
    var eth: InterfaceSample {
        var facts = NetclassFacts(
            address: [0x02, 0, 0, 0, 0xAB, 0x01], broadcast: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], ifalias: #"a "q""#,
            flags: 0x1003, linkFlags: 0x11043, transmitQueueLength: 1000, group: 3, carrierChanges: 5, carrierUpCount: 3,
            carrierDownCount: 2, ifaceLink: 7, carrier: 1, linkMode: 1)
        facts.sysfs.speedMbps = -1
        facts.sysfs.duplex = "unknown"
        facts.sysfs.devID = 2
        facts.sysfs.nameAssignType = 4
        facts.sysfs.addressAssignType = 0
        return link("eth0", index: 7, operstate: "up", mtu: 9000, type: 1, facts: facts)
    }

    /// A tun that is down: no address, no carrier, no sysfs readings.
    var tun: InterfaceSample {
        link(
            "tun0", index: 9, operstate: "down", mtu: 1500, type: 65534,
            facts: NetclassFacts(flags: 0x1090, linkFlags: 0x1090, transmitQueueLength: 500, ifaceLink: 9, carrier: 0))
    }

    @Test func valuesAndOmissionsFollowNodeExporter() {
        let out = render([eth, tun], .ifmeterAndNode)
        // Unknown speed: node_exporter multiplies -1 Mbit/s too.
        #expect(out.contains(#"node_network_speed_bytes{device="eth0"} -125000"#))
        #expect(
            out.contains(
                #"node_network_info{address="02:00:00:00:ab:01",broadcast="ff:ff:ff:ff:ff:ff",device="eth0",duplex="unknown",ifalias="a \"q\"",operstate="up"} 1"#
            ))
        #expect(out.contains(#"node_network_info{address="",broadcast="",device="tun0",duplex="",ifalias="",operstate="down"} 1"#))
        #expect(out.contains(#"node_network_flags{device="eth0"} 4099"#))
        #expect(out.contains(#"node_network_dormant{device="eth0"} 0"#))
        #expect(out.contains(#"node_network_carrier{device="eth0"} 1"#))
        #expect(out.contains(#"node_network_carrier_up_changes_total{device="eth0"} 3"#))
        #expect(out.contains(#"node_network_iface_link_mode{device="eth0"} 1"#))
        #expect(out.contains(#"node_network_device_id{device="eth0"} 2"#))
        #expect(out.contains(#"node_network_up{device="tun0"} 0"#))
        #expect(out.contains(#"node_network_protocol_type{device="tun0"} 65534"#))
        // A link that is down has no carrier, dormant, speed or sysfs facts.
        for family in ["carrier", "dormant", "speed_bytes", "device_id", "name_assign_type", "address_assign_type"] {
            #expect(!out.contains("node_network_\(family){device=\"tun0\"}"), "\(family)")
        }
        #expect(
            out.contains(
                "# HELP node_network_carrier_changes_total Network device property: carrier_changes_total\n# TYPE node_network_carrier_changes_total counter\n"
            ))
        #expect(out.contains("# TYPE node_network_info gauge\n"))
        // Families in name order, each once.
        let netdev = Set(
            ["receive", "transmit"].flatMap { direction in
                ["bytes", "compressed", "drop", "errs", "fifo", "frame", "multicast", "nohandler", "packets", "carrier", "colls"]
                    .map { "node_network_\(direction)_\($0)_total" }
            })
        let families = out.split(separator: "\n").filter { $0.hasPrefix("# TYPE node_network_") }
            .map { String($0.split(separator: " ")[2]) }.filter { !netdev.contains($0) }
        #expect(families == families.sorted() && families.count == 19, "\(families)")
    }

    @Test func otherNamespacesGetANetnsLabelInOrder() {
        var far = eth
        far.netns = "blue"
        let out = render([far], .nodeOnly)
        #expect(
            out.contains(
                #"node_network_info{address="02:00:00:00:ab:01",broadcast="ff:ff:ff:ff:ff:ff",device="eth0",duplex="unknown",ifalias="a \"q\"",netns="blue",operstate="up"} 1"#
            ))
        #expect(out.contains(#"node_network_mtu_bytes{device="eth0",netns="blue"} 9000"#))
        #expect(!out.contains("ifmeter_receive_bytes"))
    }

    @Test func loopbackHasNetclassButNoNetdevFamilies() {
        let lo = link(
            "lo", index: 1, operstate: "unknown", mtu: 65536, type: 772,
            facts: NetclassFacts(address: [0, 0, 0, 0, 0, 0], broadcast: [0, 0, 0, 0, 0, 0], flags: 9, linkFlags: 0x10049, ifaceLink: 1, carrier: 1))
        let out = render([lo], .ifmeterAndNode)
        #expect(out.contains(#"node_network_iface_id{device="lo"} 1"#))
        #expect(!out.contains(#"node_network_receive_bytes_total{device="lo"}"#))
        #expect(out.contains(#"ifmeter_receive_bytes_total{interface="lo",kind="virtual"} 1"#))
    }

    @Test func withoutFactsNoNetclassFamilies() {
        var plain = eth
        plain.attributes = LinkAttributes(operstate: "up", mtu: 1500)
        let out = render([plain], .ifmeterAndNode)
        #expect(out.contains("node_network_receive_bytes_total"))
        #expect(!out.contains("node_network_info"))
        #expect(!out.contains("node_network_up"))
    }

    @Test func openMetricsNamesCountersWithoutTotal() {
        let out = render([eth], .ifmeterAndNode, openMetrics: true)
        #expect(out.contains("# TYPE node_network_carrier_changes counter\nnode_network_carrier_changes_total{device=\"eth0\"} 5\n"))
        #expect(out.hasSuffix("# EOF\n"))
    }

    /// Kept per link for as long as it lives (4000 links at most a few
    /// hundred bytes each): the facts stay small.
    @Test func factsAreCompact() {
        #expect(MemoryLayout<NetclassFacts>.size <= 112, "\(MemoryLayout<NetclassFacts>.size)")
        let facts = eth.attributes!.netclass!
        #expect(facts.addresses.count == 12)
        #expect(NetclassFacts.spell(facts.broadcast) == "ff:ff:ff:ff:ff:ff")
        #expect(NetclassFacts.spell(NetclassFacts(address: []).address) == "")
    }
}
