import IfmeterCore
import IfmeterOutput
import Testing

@Suite struct ExpositionTests {
    func input(_ families: ExpositionFamilies = .ifmeter) throws -> ExpositionInput {
        // tun0 recreated (its counter keeps growing), wg0 lower bound.
        let text = try String(contentsOf: fixtures.appendingPathComponent("traces/recreation.jsonl"), encoding: .utf8)
        var (engine, _) = try replay(text)
        var weird = InterfaceSample(name: "we\"ird\\n\nx", index: 99, counters: Counters(rxBytes: 5, txBytes: 6, rxPackets: 1, txPackets: 1))
        weird.kernelStats = KernelLinkStats(values: Array(1...24).map(UInt64.init))
        engine.apply(Sample(time: 4, interfaces: [weird]))
        return ExpositionInput(
            interfaces: engine.interfaces.map(ExpositionRow.init),
            health: ExporterHealth(version: "9.9", source: "netlink", samples: 5, startTime: 1_700_000_000, intervalSeconds: 1),
            families: families)
    }

    func text(_ families: ExpositionFamilies = .ifmeter) throws -> String {
        String(decoding: PrometheusTextRenderer().render(try input(families)), as: UTF8.self)
    }

    @Test func countersContinueTheKernelCounter() throws {
        let out = try text()
        // tun0's baseline 1000 + 2100 counted: never down across its recreation.
        #expect(out.contains(#"ifmeter_receive_bytes_total{interface="tun0",kind="tunnel"} 3100"#))
        #expect(out.contains(#"ifmeter_interface_recreations_total{interface="tun0",kind="tunnel"} 1"#))
        #expect(out.contains(#"ifmeter_interface_quality{interface="wg0",kind="tunnel",quality="lower-bound"} 1"#))
        #expect(out.contains(#"ifmeter_interface_quality{interface="wg0",kind="tunnel",quality="exact"} 0"#))
        #expect(out.contains("# TYPE ifmeter_receive_bytes_total counter"))
        #expect(out.contains("ifmeter_build_info{revision=\"unknown\",source=\"netlink\",version=\"9.9\"} 1"))
        #expect(!out.contains("_created"))
        #expect(!out.contains("node_network"))
    }

    /// The format's escapes for backslash and the quote; a control
    /// character (here a newline in the name) becomes the text a text
    /// output shows for it, `\x0a`, whose backslash the format escapes in
    /// turn (issue 21: no raw control byte reaches a terminal through a
    /// scrape).
    @Test func labelValuesAreEscaped() throws {
        let out = try text()
        #expect(out.contains(#"interface="we\"ird\\n\\x0ax""#))
        #expect(!out.contains("\u{1B}") && !out.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
    }

    @Test func openMetricsDiffers() throws {
        let om = String(decoding: OpenMetricsRenderer().render(try input()), as: UTF8.self)
        #expect(om.hasSuffix("# EOF\n"))
        #expect(om.contains("# TYPE ifmeter_receive_bytes counter\n# UNIT ifmeter_receive_bytes bytes\n"))
        #expect(om.contains("# TYPE ifmeter_build info\n"))
        #expect(om.contains("ifmeter_samples_created 1700000000.0\n"))
        #expect(!om.contains("ifmeter_receive_bytes_created"))
    }

    @Test func nodeFamiliesUseNodeExporterNamesAndLegacySums() throws {
        let out = try text(.ifmeterAndNode)
        #expect(out.contains("# HELP node_network_receive_bytes_total Network device statistic receive_bytes.\n"))
        // Fields 1...24 in rtnl_link_stats64 order: rx_dropped 7 + rx_missed_errors 16.
        #expect(out.contains(#"node_network_receive_drop_total{device="we\"ird\\n\\x0ax"} 23"#))
        // frame 14 + length 11 + over 12 + crc 13.
        #expect(out.contains(#"node_network_receive_frame_total{device="we\"ird\\n\\x0ax"} 50"#))
        // carrier 18 + aborted 17 + heartbeat 20 + window 21.
        #expect(out.contains(#"node_network_transmit_carrier_total{device="we\"ird\\n\\x0ax"} 76"#))
        #expect(out.contains(#"node_network_receive_nohandler_total{device="we\"ird\\n\\x0ax"} 24"#))
        let only = try text(.nodeOnly)
        #expect(only.contains("node_network_transmit_packets_total") && !only.contains("ifmeter_receive_bytes_total"))
        #expect(only.contains("ifmeter_samples_total 5"))
    }

    @Test(
        arguments: [
            (
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                true
            ),
            ("application/openmetrics-text; version=1.0.0", true),
            ("text/plain;version=0.0.4", false),
            ("*/*", false),
            (nil, false),
            ("application/openmetrics-text;version=2.0.0", false),
            ("text/plain;q=1, application/openmetrics-text;q=0.5", false),
            ("application/openmetrics-text;q=0", false),
        ] as [(String?, Bool)])
    func negotiation(accept: String?, openMetrics: Bool) {
        #expect(ExpositionNegotiation.prefersOpenMetrics(accept: accept) == openMetrics)
    }
}
