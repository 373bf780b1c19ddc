import IfmeterCore
import IfmeterModel
import IfmeterOutput

/// An exposition with every family ifmeter renders: several interfaces
/// (in another namespace too), names and labels that need escaping (a
/// quote, a backslash, a newline, an escape character, a non-ASCII
/// letter), node_exporter's netdev and netclass families, plans, aliases,
/// probes and tunnels, remote write's status, the endpoint's, the state
/// file's and the process's figures.
enum TypedSeriesFixture {
    static func facts(alias: String?) -> NetclassFacts {
        var facts = NetclassFacts(
            address: [0x02, 0, 0, 0, 0xAB, 0x01], broadcast: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], ifalias: alias, flags: 0x1003,
            linkFlags: 0x11043, transmitQueueLength: 1000, group: 3, carrierChanges: 5, carrierUpCount: 3, carrierDownCount: 2, ifaceLink: 7,
            carrier: 1, linkMode: 1)
        facts.sysfs.speedMbps = -1
        facts.sysfs.duplex = "full"
        facts.sysfs.devID = 2
        return facts
    }

    /// Interface samples at time `t` (their counters grow with it).
    static func interfaces(_ t: UInt64, without: Set<String> = []) -> [InterfaceSample] {
        func link(_ name: String, netns: String = "", index: Int, kind: InterfaceKind, alias: String? = nil, bytes: UInt64) -> InterfaceSample {
            var sample = InterfaceSample(
                name: name, netns: netns, index: index, classification: Classification(kind: kind, evidence: "test \"\(name)\""),
                counters: Counters(rxBytes: bytes * t, txBytes: bytes * t / 2, rxPackets: t, txPackets: t, rxErrors: 1, txErrors: 0),
                attributes: LinkAttributes(
                    operstate: "up", adminUp: true, mtu: 1500, arphrdType: 1, reportedSpeedBps: 1_000_000_000, carrierChanges: 4,
                    netclass: facts(alias: alias)),
                kernelStats: KernelLinkStats(values: (1...24).map { UInt64($0) * t }))
            sample.classification = Classification(kind: kind, evidence: "test \"\(name)\"")
            return sample
        }
        return [
            link("eth0", index: 2, kind: .ethernet, alias: "uplink \"a\"", bytes: 1_000_000_007),
            link("we\"ird\\n\nx", index: 99, kind: .virtual, bytes: 5),
            link("tun0", netns: "ns \"a\"\\b", index: 3, kind: .tunnel, bytes: 18_446_744_073),
            link("wlan\u{1B}[31m", index: 4, kind: .wifi, bytes: 77),
            link("veth-ä", netns: "blue", index: 5, kind: .virtual, bytes: 3),
            link("lo", index: 1, kind: .loopback, bytes: 9),
        ].filter { !without.contains($0.name) }
    }

    static let plans: [PlanGauge] = {
        var a = PlanGauge(
            name: "eth0", netns: "", kind: .ethernet, direction: .both, quotaBytes: 500_000_000_000, usedBytes: 123_456_789_012,
            lowerBound: false, cycleStart: 1_700_000_000, cycleEnd: 1_702_592_000, lastDay: "2023-12-14")
        a.projectedBytes = 987_654_321_098
        let b = PlanGauge(
            name: "tun0", netns: "ns \"a\"\\b", kind: nil, direction: .rx, quotaBytes: nil, usedBytes: 42, lowerBound: true,
            cycleStart: -5, cycleEnd: 86_400, lastDay: "1970-01-01")
        return [a, b]
    }()

    static let aliases: [SeriesKey: String] = [
        SeriesKey(netns: "", name: "eth0"): "uplink \"main\"\nline", SeriesKey(netns: "blue", name: "veth-ä"): "side\u{7}",
    ]

    static let routes: RouteExposition = {
        var outside = OutsideTotal(tunnel: "tun0", underlay: "eth0")
        outside.rxBytes = 12_345
        outside.txBytes = 678
        outside.uncertain = true
        return RouteExposition(
            egress: [
                ProbeRoute(probe: "1.1.1.1", interface: "tun0", classification: Classification(kind: .tunnel, evidence: "x")),
                ProbeRoute(probe: "10.9.9.9"),
            ], outside: [outside])
    }()

    static let remoteWrite: [RemoteWriteStatus] = {
        var a = RemoteWriteStatus(url: "https://prom.example/api/v1/write")
        a.queueBytes = 1024
        a.queueSamples = 77
        a.sent = 1_000_000
        a.retried = 5
        a.droppedQueueFull = 1
        a.droppedRejected = 2
        a.droppedUnwritable = 3
        a.droppedCorrupt = 4
        a.duplicate = 6
        a.sentBytes = 999_999
        a.lastSuccess = 1_700_000_123.456
        return [a, RemoteWriteStatus(url: "http://second\"q\\/w")]
    }()

    static let process = ProcessMetrics(
        cpuSeconds: 12.34, residentBytes: 8_388_608, virtualBytes: 123_456_789, openFDs: 12, maxFDs: 1024, startTime: 1_699_999_999.5)

    static let httpClosed = HTTPConnectionCounts(deadline: 1, idle: 2, evicted: 3, budget: 4)

    /// The input, built directly (every health field set).
    static func input(_ families: ExpositionFamilies) -> ExpositionInput {
        var engine = DeltaEngine()
        engine.apply(Sample(time: 1, interfaces: interfaces(1)))
        engine.apply(Sample(time: 2, interfaces: interfaces(2)))
        var health = ExporterHealth(
            version: "9.9 \"beta\"", source: "netlink", samples: 2, sampleErrors: 1, overruns: 3, lastSampleSeconds: 0.00125,
            lastSampleTime: 1_700_000_002.5, startTime: 1_700_000_000, intervalSeconds: 1)
        health.httpClosed = httpClosed
        health.remoteWrite = remoteWrite
        health.revision = "abc123"
        health.process = process
        var state = StateHealth(saveEvery: 15, retryEvery: 5)
        state.saves = 4
        state.failures = 1
        state.lastSaveTime = 1_700_000_001
        state.failing = true
        state.recreations = 2
        health.state = state
        var input = ExpositionInput(interfaces: engine.interfaces.map(ExpositionRow.init), health: health, families: families, routes: routes)
        input.plans = plans
        input.aliases = aliases
        return input
    }
}
