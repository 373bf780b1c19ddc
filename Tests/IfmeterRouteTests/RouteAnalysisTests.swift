#if os(Linux)
import Glibc
import IfmeterCore
import IfmeterRoute
@testable import IfmeterSampling
import Testing

/// Route analysis against a routing table of the test's own: which rule
/// names each tunnel's underlay, how the default route outside the tunnels
/// is chosen, what a probe without a route says. No namespace, no kernel.
/// (RouteTests runs `route` and `serve --probe` against real routes.)
@Suite struct RouteAnalysisTests {
    struct Table: RouteTable {
        var decisions: [IPAddress: RouteDecision] = [:]
        var defaults: [DefaultRoute] = []
        func lookup(_ address: IPAddress) throws(SystemError) -> RouteDecision {
            decisions[address]
                ?? RouteDecision(
                    destination: address, failure: SystemError(call: "RTM_GETROUTE", errno: ENETUNREACH, message: "Network is unreachable"))
        }
        func defaultRoutes() throws(SystemError) -> [DefaultRoute] { defaults }
    }

    static func link(_ name: String, _ index: Int, _ kind: InterfaceKind, evidence: String = "test", arphrd: Int? = nil) -> InterfaceSample {
        InterfaceSample(
            name: name, index: index, classification: Classification(kind: kind, evidence: evidence), counters: Counters(),
            attributes: arphrd.map { LinkAttributes(arphrdType: $0) })
    }

    static let links = [
        link("eth0", 2, .ethernet, arphrd: 1), link("wwan0", 3, .cellular, arphrd: 519), link("tun0", 4, .tunnel),
        link("wg0", 5, .tunnel, evidence: "netlink link kind wireguard"), link("eth1", 6, .ethernet, arphrd: 1),
    ]

    static func settings(
        probes: [String] = [], underlays: [String: String] = [:], endpoints: [String: String] = [:], overheads: [String: Int] = [:]
    ) -> RouteSettings {
        RouteSettings(
            probes: probes.map { ($0, IPAddress($0)!) }, underlays: underlays, endpoints: endpoints.mapValues { IPAddress($0)! },
            overheads: overheads, namespace: nil)
    }

    static func route(_ index: Int, metric: Int, table: Int = 254, ipv6: Bool = false) -> DefaultRoute {
        DefaultRoute(interfaceIndex: index, gateway: nil, metric: metric, table: table, ipv6: ipv6)
    }

    @Test func anUnderlayNamedBeatsTheEndpointWhichBeatsTheDefaultRoute() throws {
        var table = Table(defaults: [Self.route(3, metric: 100)])
        let endpoint = IPAddress("192.0.2.7")!
        table.decisions[endpoint] = RouteDecision(destination: endpoint, interfaceIndex: 6)
        let analysis = RouteAnalysis(
            router: table, interfaces: Self.links, options: Self.settings(underlays: ["tun0": "eth0"], endpoints: ["wg0": "192.0.2.7"]))
        let tunnels = try analysis.tunnels()
        #expect(tunnels.map(\.tunnel) == ["tun0", "wg0"], "sorted")
        #expect(tunnels[0].underlay == "eth0")
        #expect(tunnels[0].evidence == "--underlay")
        #expect(tunnels[1].underlay == "eth1")
        #expect(tunnels[1].evidence == "route to the endpoint 192.0.2.7")
        // WireGuard's outer headers (60) and Ethernet's link header (14); a
        // plain tun over UDP (28).
        #expect(tunnels[1].overheadBytes == 74)
        #expect(tunnels[0].overheadBytes == 42)
        #expect(!tunnels.contains { $0.sharedUnderlay })
    }

    @Test func theDefaultRouteOutsideTheTunnelsIsIPv4TheMainTableThenTheLowestMetric() throws {
        let table = Table(defaults: [
            Self.route(4, metric: 0), // a tunnel's own default: never its underlay
            Self.route(2, metric: 50, ipv6: true),
            Self.route(6, metric: 10, table: 100),
            Self.route(2, metric: 600),
            Self.route(3, metric: 200),
        ])
        let tunnels = try RouteAnalysis(router: table, interfaces: Self.links, options: Self.settings()).tunnels()
        #expect(tunnels.map(\.underlay) == ["wwan0", "wwan0"])
        #expect(tunnels[0].evidence == "default route outside the tunnels (IPv4, metric 200, table 254)")
        // Two tunnels on one underlay: each estimate holds the other's packets.
        #expect(tunnels.allSatisfy { $0.sharedUnderlay })
        // A raw-IP modem has no link header: 28 for the tun, 60 for WireGuard.
        #expect(tunnels.map(\.overheadBytes) == [28, 60])
    }

    @Test func withoutARouteATunnelSaysSoAndAnOverheadGivenIsKept() throws {
        let analysis = RouteAnalysis(
            router: Table(), interfaces: Self.links, options: Self.settings(endpoints: ["wg0": "198.51.100.1"], overheads: ["tun0": 33]))
        let tunnels = try analysis.tunnels()
        #expect(tunnels[0].underlay == nil)
        #expect(tunnels[0].evidence == "no default route outside the tunnels")
        #expect(tunnels[0].overheadBytes == 33)
        #expect(tunnels[1].evidence == "no route to the endpoint 198.51.100.1")
    }

    @Test func aProbeSaysWhereItLeavesOrWhyItCannot() throws {
        var table = Table()
        let viaTunnel = IPAddress("10.8.0.1")!
        let gateway = IPAddress("192.168.1.1")!
        let outside = IPAddress("2001:db8::1")!
        let unknownLink = IPAddress("203.0.113.9")!
        table.decisions[viaTunnel] = RouteDecision(destination: viaTunnel, interfaceIndex: 4)
        table.decisions[outside] = RouteDecision(destination: outside, interfaceIndex: 2, gateway: gateway)
        table.decisions[unknownLink] = RouteDecision(destination: unknownLink, interfaceIndex: 99)
        let probes = try RouteAnalysis(
            router: table, interfaces: Self.links,
            options: Self.settings(probes: ["10.8.0.1", "2001:db8::1", "203.0.113.9", "198.51.100.2"])
        ).probes()
        #expect(probes.map(\.interface) == ["tun0", "eth0", "ifindex 99", nil])
        #expect(probes[0].viaTunnel && !probes[0].leavesOutside)
        #expect(probes[1].leavesOutside && probes[1].gateway == "192.168.1.1")
        #expect(probes[3].failure == "Network is unreachable")
    }
}
#endif
