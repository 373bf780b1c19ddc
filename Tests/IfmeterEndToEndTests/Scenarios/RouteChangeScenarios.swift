import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Route changes under the commands that follow routes: the default route
/// leaves the tunnel and comes back while live, serve and export run, and
/// each says what `ifmeter route` says at the same moment.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct RouteChangeScenarios {
    /// A veth pair with a tunnel carried over it as UDP, the default route
    /// on the tunnel.
    final class Scene {
        let pair: VethPair
        let tunnel: UDPTunnel

        init() throws {
            pair = try VethPair()
            tunnel = try UDPTunnel(over: pair)
            try pair.a.ip("route", "add", "default", "dev", tunnel.tunA)
        }

        deinit { tunnel.stop() }

        func routeOffTheTunnel() throws { try pair.a.ip("route", "replace", "default", "via", pair.ipB, "dev", pair.nameA) }
        func routeOnTheTunnel() throws { try pair.a.ip("route", "replace", "default", "dev", tunnel.tunA) }

        /// What `ifmeter route --probe 8.8.8.8` says now: the interface.
        func routeSays() throws -> String {
            let result = try ifmeter(["route", "--probe", "8.8.8.8", "--format", "json"], in: pair.a)
            let report = try JSONParser.parse(result.out)
            guard case .array(let probes)? = report["probes"], let name = probes.first?["interface"]?.stringValue else {
                throw TestFailure("no probe in \(result.out) \(result.err)")
            }
            return name
        }
    }

    /// Finding 3 of the honest-workflows issue: the live view's route line
    /// froze at "route 8.8.8.8 → tun0 (tunnel)" after the default route
    /// went off the tunnel and back, while `ifmeter route` answered right.
    /// Here with the defaults a user runs (no --probe, no --underlay), and
    /// traffic going through the tunnel and around it meanwhile.
    @Test func theLiveRouteLineFollowsTheRouteOffTheTunnelAndBack() throws {
        try Netns.requireRoot()
        let scene = try Scene()
        let socket = "ifmt-rc-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { _ = try? run(["tmux", "-L", socket, "kill-server"], allowFailure: true) }
        try runDetached([
            "tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "live", "-x", "130", "-y", "30",
            "TERM=xterm-256color ip netns exec \(scene.pair.a.name) \(try ifmeterBinary()) live --interval 300ms",
        ])
        func screen(containing text: String, timeout: Double = 5) throws -> String {
            try waitFor("'\(text)' on the screen", timeout: timeout) {
                let s = try run(["tmux", "-L", socket, "capture-pane", "-p", "-t", "live"]).out
                return s.contains(text) ? s : nil
            }
        }
        let onTunnel = "route 8.8.8.8 → tA (tunnel)"
        let offTunnel = "route 8.8.8.8 → vA (outside the tunnels)"
        _ = try screen(containing: onTunnel)
        for round in 0..<3 {
            try scene.tunnel.sendUDP(to: scene.pair.ipB, port: 9200, count: 50, payload: 500)
            try scene.routeOffTheTunnel()
            #expect(try scene.routeSays() == "vA")
            // Off the tunnel, the veth is the underlay: the outside rate shows.
            _ = try screen(containing: offTunnel + "  outside ≈↓")
            try scene.tunnel.sendUDP(to: scene.pair.ipB, port: 9201, count: 50, payload: 500)
            try scene.routeOnTheTunnel()
            #expect(try scene.routeSays() == "tA")
            // Back on the tunnel, with no default route outside it: no
            // underlay is known, so there is no outside rate to show, and
            // the last one must not stand still on the screen.
            let shown = try screen(containing: onTunnel + "  outside: unknown")
            #expect(!shown.contains("outside ≈") && !shown.contains("outside ?"), "round \(round): \(shown)")
            // `ifmeter route` says the same: no underlay for the tunnel.
            let route = try ifmeter(["route", "--probe", "8.8.8.8"], in: scene.pair.a)
            #expect(route.out.contains("no default route outside the tunnels"), "\(route.out)")
        }
    }

    /// serve --probe through the same changes: the egress family follows
    /// each one, and the outside counter grows by what went around the
    /// tunnel while the veth carried it, never while no underlay is known.
    @Test func serveFollowsTheRouteOffTheTunnelAndBack() throws {
        try Netns.requireRoot()
        let scene = try Scene()
        let server = try startServe(in: scene.pair.a, ["--probe", "8.8.8.8"])
        func egress(_ text: String) -> String? {
            Scenario.metric(text, "ifmeter_route_egress_info").first { $0.value == 1 }
                .flatMap { $0.key.split(separator: ",").first { $0.hasPrefix("interface=") } }
                .map { String($0.dropFirst("interface=\"".count).dropLast()) }
        }
        func outsideTx(_ text: String) -> Double {
            Scenario.metric(text, "ifmeter_tunnel_outside_bytes_total").filter { $0.key.contains("direction=\"tx\"") }.values.reduce(0, +)
        }
        func vethTx(_ text: String) -> Double {
            Scenario.metric(text, "ifmeter_transmit_bytes_total").filter { $0.key.contains("interface=\"vA\"") }.values.reduce(0, +)
        }
        _ = try waitFor("the tunnel as egress") { egress(try Scenario.scrape(scene.pair.a)) == "tA" ? true : nil }
        var around = 0.0
        for _ in 0..<2 {
            try scene.routeOffTheTunnel()
            let before = try waitFor("the veth as egress") { () -> String? in
                let text = try Scenario.scrape(scene.pair.a)
                return egress(text) == "vA" ? text : nil
            }
            // Datagrams sent straight out of the veth: around the tunnel.
            try sendUDP(from: scene.pair.a, to: scene.pair.ipB, in: scene.pair.b, port: 9300, count: 40, payload: 600)
            around += Double(40 * VethPair.frameBytes(payload: 600))
            let counted = try waitFor("the outside bytes counted") { () -> String? in
                let text = try Scenario.scrape(scene.pair.a)
                return outsideTx(text) >= outsideTx(before) + Double(40 * VethPair.frameBytes(payload: 600)) ? text : nil
            }
            try scene.routeOnTheTunnel()
            let back = try waitFor("the tunnel as egress again") { () -> String? in
                let text = try Scenario.scrape(scene.pair.a)
                return egress(text) == "tA" ? text : nil
            }
            // Through the tunnel now: nothing more goes around it.
            try scene.tunnel.sendUDP(to: scene.pair.ipB, port: 9301, count: 40, payload: 600)
            // A sample that counted them on the veth, so the outside
            // counter had its chance to grow.
            let after = try waitFor("the veth's bytes counted") { () -> String? in
                let text = try Scenario.scrape(scene.pair.a)
                return vethTx(text) >= vethTx(back) + Double(40 * VethPair.frameBytes(payload: 600)) ? text : nil
            }
            #expect(outsideTx(after) == outsideTx(back), "no underlay, nothing counted outside")
            #expect(outsideTx(counted) <= outsideTx(before) + Double(40 * VethPair.frameBytes(payload: 600)) * 1.02)
        }
        #expect(server.stop() == 0)
    }

    /// export --probe: each period's report names the egress of its end.
    @Test func exportPeriodsFollowTheRoute() throws {
        try Netns.requireRoot()
        let scene = try Scene()
        let dir = try ScenarioFolder("route-export")
        let exporter = try Scenario.start(
            scene.pair.a, "export", ["--interval", "100ms", "--every", "300ms", "--json-lines", dir["r.jsonl"], "--probe", "8.8.8.8"])
        func lastEgress() throws -> String? {
            let text = (try? String(contentsOfFile: dir["r.jsonl"], encoding: .utf8)) ?? ""
            guard let line = text.split(separator: "\n").last else { return nil }
            guard case .array(let probes)? = try JSONParser.parse(String(line))["route"]?["probes"] else { return nil }
            return probes.first?["interface"]?.stringValue
        }
        _ = try waitFor("a period on the tunnel") { try lastEgress() == "tA" ? true : nil }
        try scene.routeOffTheTunnel()
        _ = try waitFor("a period on the veth") { try lastEgress() == "vA" ? true : nil }
        try scene.routeOnTheTunnel()
        _ = try waitFor("a period on the tunnel again") { try lastEgress() == "tA" ? true : nil }
        #expect(exporter.stop() == 0, "\(exporter.log)")
    }
}
