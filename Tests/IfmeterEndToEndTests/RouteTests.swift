import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ifmeter route` against a real tunnel: two namespaces joined by a veth
/// (the underlay), a tun in each, and a forwarder carrying the tuns'
/// packets as UDP over the veth.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct RouteTests {
    func json(_ text: String) throws -> JSONValue { try JSONParser.parse(text) }

    func probe(_ report: JSONValue) -> JSONValue? {
        guard case .array(let list)? = report["probes"] else { return nil }
        return list.first
    }

    func tunnelEntry(_ report: JSONValue, _ name: String) -> JSONValue? {
        guard case .array(let list)? = report["tunnels"] else { return nil }
        return list.first { $0["tunnel"]?.stringValue == name }
    }

    @Test func theVerdictFollowsTheDefaultRoute() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let tunnel = try UDPTunnel(over: pair)
        defer { tunnel.stop() }
        // Everything through the tunnel.
        try pair.a.ip("route", "add", "default", "dev", tunnel.tunA)
        var result = try ifmeter(["route", "--netns", pair.a.name, "--probe", "192.0.2.99", "--format", "json"])
        #expect(result.status == 0, "\(result.err)")
        var report = try json(result.out)
        #expect(probe(report)?["interface"]?.stringValue == tunnel.tunA)
        #expect(probe(report)?["via_tunnel"] == .bool(true) && probe(report)?["kind"]?.stringValue == "tunnel")
        #expect(report["estimate"] == .bool(true))
        // The tunnel's underlay: no default route outside the tunnel now,
        // so it must be named (or found by its endpoint).
        #expect(tunnelEntry(report, tunnel.tunA)?["underlay"] == .null)
        result = try ifmeter([
            "route", "--netns", pair.a.name, "--probe", "192.0.2.99", "--endpoint", "\(tunnel.tunA)=\(pair.ipB)", "--format", "json",
        ])
        report = try json(result.out)
        #expect(tunnelEntry(report, tunnel.tunA)?["underlay"]?.stringValue == pair.nameA)
        #expect(tunnelEntry(report, tunnel.tunA)?["evidence"]?.stringValue?.contains("endpoint") == true)

        // A split route: ordinary traffic leaves by the veth.
        try pair.a.ip("route", "replace", "default", "via", pair.ipB, "dev", pair.nameA)
        result = try ifmeter(["route", "--netns", pair.a.name, "--probe", "192.0.2.99", "--format", "json"])
        #expect(result.status == 3, "\(result.err)")
        report = try json(result.out)
        #expect(probe(report)?["interface"]?.stringValue == pair.nameA && probe(report)?["via_tunnel"] == .bool(false))
        #expect(probe(report)?["gateway"]?.stringValue == pair.ipB)
        #expect(tunnelEntry(report, tunnel.tunA)?["underlay"]?.stringValue == pair.nameA, "the best default route outside the tunnels")
        let text = try ifmeter(["route", "--netns", pair.a.name, "--probe", "192.0.2.99"])
        #expect(text.status == 3 && text.out.contains("OUTSIDE the tunnels") && text.out.contains("estimate"), "\(text.out)")

        // A probe with no route leaves nowhere: not a leak.
        try pair.a.ip("route", "del", "default")
        result = try ifmeter(["route", "--netns", pair.a.name, "--probe", "192.0.2.99", "--probe", "2001:db8::1", "--format", "json"])
        #expect(result.status == 0, "\(result.out)")
    }

    /// The outside estimate over a window: within 2% of what went around
    /// the tunnel, and 0 (within one packet's overhead) when nothing did.
    @Test func theOutsideEstimateCountsWhatWentAround() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let tunnel = try UDPTunnel(over: pair)
        defer { tunnel.stop() }
        try pair.a.ip("route", "add", "default", "dev", tunnel.tunA)
        let binary = try ifmeterBinary()

        func window(inside: Int, around: Int) throws -> JSONValue {
            let route = try Background(
                [
                    "ip", "netns", "exec", pair.a.name, binary, "route", "--probe", "192.0.2.99", "--over", "2500ms",
                    "--underlay", "\(tunnel.tunA)=\(pair.nameA)", "--format", "json",
                ], name: "route-over")
            // Blocked in the window's wait (a poll of about 2.5 s): its first
            // sample is taken, and the second one is not until it returns.
            func inTheWindow() -> Bool { (route.process.pollTimeout ?? 0) >= 1000 }
            _ = try waitFor("route's first sample") {
                try route.requireRunning()
                return inTheWindow() ? true : nil
            }
            if inside > 0 { try tunnel.sendUDP(to: tunnel.ipB, port: 9100, count: inside, payload: 700) }
            if around > 0 { try tunnel.sendUDP(to: pair.ipB, port: 9101, count: around, payload: 900) }
            try #require(inTheWindow(), "the traffic is sent within the window")
            _ = route.process.wait(timeout: 10)
            #expect(route.stop() == 0, "\(route.log)")
            return try json(route.log)
        }

        let aroundCount = 300, aroundPayload = 900
        let mixed = try window(inside: 400, around: aroundCount)
        let t = try #require(tunnelEntry(mixed, tunnel.tunA), "\(mixed)")
        #expect(t["overhead_bytes"]?.uint64Value == 42, "a tun over UDP and IPv4 (28) on an Ethernet-like veth (14)")
        let sentAround = UInt64(aroundCount) * VethPair.frameBytes(payload: aroundPayload)
        let outsideTx = try #require(t["outside_bytes"]?["tx"]?.uint64Value)
        let tunnelTx = try #require(t["tunnel_bytes"]?["tx"]?.uint64Value)
        #expect(tunnelTx == 400 * UInt64(20 + 8 + 700), "the tunnel carried what went inside it")
        let error = abs(Double(outsideTx) - Double(sentAround)) / Double(sentAround)
        #expect(error <= 0.02, "outside tx \(outsideTx) against \(sentAround) sent around the tunnel")
        #expect(t["quality"]?.stringValue == "exact" && t["uncertain"] == .bool(false))

        let quiet = try window(inside: 400, around: 0)
        let q = try #require(tunnelEntry(quiet, tunnel.tunA))
        let quietTx = try #require(q["outside_bytes"]?["tx"]?.uint64Value)
        let quietRx = try #require(q["outside_bytes"]?["rx"]?.uint64Value)
        #expect(quietTx <= 42 && quietRx <= 42, "nothing went around: outside \(quietTx)/\(quietRx)")
        #expect((q["tunnel_bytes"]?["tx"]?.uint64Value ?? 0) > 0)
    }

    /// serve --probe follows a route change within one interval, and its
    /// outside counter counts what went around the tunnel; promtool checks it.
    @Test func serveFollowsTheRouteAndCountsTheOutside() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let tunnel = try UDPTunnel(over: pair)
        defer { tunnel.stop() }
        try pair.a.ip("route", "add", "default", "dev", tunnel.tunA)
        let server = try Background(
            [
                "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "serve", "--interval", "300ms", "--listen", "127.0.0.1:9874",
                "--probe", "192.0.2.99", "--underlay", "\(tunnel.tunA)=\(pair.nameA)",
            ], name: "serve-probe")
        func metrics() throws -> String { try RawHTTP.request("/metrics", port: 9874, in: pair.a.name).text }
        let egressTun = #"ifmeter_route_egress_info{interface="tA",kind="tunnel",probe="192.0.2.99"} 1"#
        var text = try waitFor("the probe's route in the exposition") {
            try server.requireRunning()
            return (try? metrics()).flatMap { $0.contains(egressTun) ? $0 : nil }
        }
        let promtool = try run(["promtool", "check", "metrics"], input: text, allowFailure: true)
        #expect(promtool.status == 0, "promtool: \(promtool.out)\(promtool.err)")

        // The default route moves to the veth: by the second sample after
        // the change (the first may have begun before it), the exposition
        // says so. Counted in samples, not guessed in seconds.
        func samples(_ text: String) -> Int? {
            text.split(separator: "\n").first { $0.hasPrefix("ifmeter_samples_total ") }.flatMap { Int($0.split(separator: " ")[1]) }
        }
        try pair.a.ip("route", "replace", "default", "via", pair.ipB, "dev", pair.nameA)
        let samplesAtChange = try #require(samples(try metrics()))
        let egressVeth = #"ifmeter_route_egress_info{interface="vA",kind="virtual",probe="192.0.2.99"} 1"#
        text = try waitFor("the new route in the exposition") { (try? metrics()).flatMap { $0.contains(egressVeth) ? $0 : nil } }
        let samplesWhenSeen = try #require(samples(text))
        #expect(
            samplesWhenSeen <= samplesAtChange + 2,
            "followed within one interval: seen at sample \(samplesWhenSeen), the change at \(samplesAtChange)")

        // Traffic around the tunnel is counted as outside.
        let outsideLine = #"ifmeter_tunnel_outside_bytes_total{direction="tx",tunnel="tA",underlay="vA"}"#
        func outside(_ text: String) -> UInt64 {
            text.split(separator: "\n").first { $0.hasPrefix(outsideLine) }.flatMap { UInt64($0.split(separator: " ").last ?? "") } ?? 0
        }
        let before = outside(text)
        try tunnel.sendUDP(to: pair.ipB, port: 9102, count: 200, payload: 800)
        let sent = 200 * VethPair.frameBytes(payload: 800)
        text = try waitFor("the outside bytes counted") {
            let t = try metrics()
            return outside(t) >= before + sent ? t : nil
        }
        #expect(Double(outside(text) - before) <= Double(sent) * 1.02, "outside \(outside(text) - before) against \(sent) sent")
        #expect(server.stop() == 0)
    }

    /// Issue 48, part 4: with `--state`, the outside counter is kept in the
    /// state file like the other totals. Each restart's first figure is at
    /// least what /metrics showed before the last save: a kill -9 right
    /// after a save (SIGHUP) and a clean stop (its own last save) lose
    /// nothing counted before them; a reload that builds the route feed
    /// again (changed probes) goes on from it too. Before, each started
    /// again from 0.
    @Test func theOutsideCounterGoesOnAcrossAKillAndARestart() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let tunnel = try UDPTunnel(over: pair)
        defer { tunnel.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-outside-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 19_402
        // The probes and the underlay in a config file, which a reload reads again.
        let config = dir + "/ifmeter.yml"
        func configure(_ probes: String) throws {
            try "serve:\n  probe: [\(probes)]\n  underlay: ['\(tunnel.tunA)=\(pair.nameA)']\n".write(
                toFile: config, atomically: true, encoding: .utf8)
        }
        try configure("192.0.2.99")
        func start(_ name: String) throws -> Background {
            try startServe(
                in: pair.a, port: port, name: name, ["--listen", "127.0.0.1:\(port)", "--state", dir + "/state.db", "--config", config])
        }
        func metrics() throws -> String { try RawHTTP.request("/metrics", port: port, in: pair.a.name).text }
        func value(_ text: String, _ series: String) -> UInt64? {
            text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { UInt64($0.split(separator: " ").last ?? "") }
        }
        let outside = #"ifmeter_tunnel_outside_bytes_total{direction="tx",tunnel="tA",underlay="vA"}"#
        let sent = 200 * VethPair.frameBytes(payload: 800)
        /// Sends traffic beside the tunnel (straight over the veth) and
        /// waits until the counter has it.
        func sendAround(_ server: Background, from start: UInt64) throws -> UInt64 {
            try pair.sendUDP(count: 200, payload: 800, port: 9104)
            return try waitFor("the outside bytes counted") {
                try server.requireRunning()
                return value(try metrics(), outside).flatMap { $0 >= start + sent ? $0 : nil }
            }
        }
        /// The counter as a restarted serve first shows it.
        func first(_ server: Background) throws -> UInt64 {
            try waitFor("the outside counter on /metrics") {
                try server.requireRunning()
                return value(try metrics(), outside)
            }
        }

        var server = try start("serve-outside-1")
        let counted = try sendAround(server, from: 0)
        // A save (SIGHUP saves and goes on), then kill -9.
        let saves = try #require(value(try metrics(), "ifmeter_state_saves_total"))
        kill(server.process.processIdentifier, SIGHUP)
        _ = try waitFor("the save SIGHUP asks for") {
            try server.requireRunning()
            return value(try metrics(), "ifmeter_state_saves_total").flatMap { $0 > saves ? true : nil }
        }
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        server = try start("serve-outside-2")
        let afterKill = try first(server)
        #expect(afterKill >= counted, "after kill -9: \(afterKill), before it: \(counted)")

        // More traffic, then a clean stop: its last save keeps all of it.
        let countedAgain = try sendAround(server, from: afterKill)
        #expect(server.stop() == 0, "\(server.log)")
        server = try start("serve-outside-3")
        let afterStop = try first(server)
        #expect(afterStop >= countedAgain, "after a clean stop: \(afterStop), before it: \(countedAgain)")

        // Another probe: SIGHUP builds the route feed again, from the totals.
        let countedBeforeReload = try sendAround(server, from: afterStop)
        try configure("192.0.2.99, 192.0.2.98")
        kill(server.process.processIdentifier, SIGHUP)
        // The new feed's first publish names the new probe (with no route there: no interface).
        let egress = #"probe="192.0.2.98"}"#
        let afterReload = try waitFor("the reloaded route feed on /metrics") {
            try server.requireRunning()
            let text = try metrics()
            return text.contains(egress) ? value(text, outside) : nil
        }
        #expect(afterReload >= countedBeforeReload, "after a reload: \(afterReload), before it: \(countedBeforeReload)")
        #expect(server.stop() == 0)
    }

    /// The live view's summary line names where the probe's packets leave,
    /// and changes when the route does.
    @Test func theLiveViewSaysWhereTheRouteGoes() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let tunnel = try UDPTunnel(over: pair)
        defer { tunnel.stop() }
        try pair.a.ip("route", "add", "default", "dev", tunnel.tunA)
        let socket = "ifmt-route-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { _ = try? run(["tmux", "-L", socket, "kill-server"], allowFailure: true) }
        try runDetached([
            "tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "live", "-x", "120", "-y", "30",
            "TERM=xterm-256color ip netns exec \(pair.a.name) \(try ifmeterBinary()) live --interval 300ms --probe 192.0.2.99 --underlay tA=vA",
        ])
        func screen(containing text: String) throws -> String {
            try waitFor("'\(text)' on the screen") {
                let s = try run(["tmux", "-L", socket, "capture-pane", "-p", "-t", "live"]).out
                return s.contains(text) ? s : nil
            }
        }
        _ = try screen(containing: "route 192.0.2.99 → tA (tunnel)")
        _ = try screen(containing: "outside ≈↓")
        try pair.a.ip("route", "replace", "default", "via", pair.ipB, "dev", pair.nameA)
        _ = try screen(containing: "route 192.0.2.99 → vA (outside the tunnels)")
    }

    /// export --probe: each period's JSON says where the probe leaves and
    /// the outside bytes of that period; the schema accepts it.
    @Test func exportCarriesTheRouteAndThePeriodsOutsideBytes() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let tunnel = try UDPTunnel(over: pair)
        defer { tunnel.stop() }
        try pair.a.ip("route", "add", "default", "dev", tunnel.tunA)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-route-export-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let export = try Background(
            [
                "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "export", "--interval", "200ms", "--every", "1s", "--json-lines", path,
                "--probe", "192.0.2.99", "--underlay", "\(tunnel.tunA)=\(pair.nameA)",
            ], name: "export-route")
        func outsideTx(_ period: JSONValue) -> UInt64 {
            guard case .array(let tunnels)? = period["route"]?["tunnels"] else { return 0 }
            return tunnels.first { $0["tunnel"]?.stringValue == tunnel.tunA }?["outside_bytes"]?["tx"]?.uint64Value ?? 0
        }
        /// The periods written so far (an unfinished last line is not one).
        func periods() -> [JSONValue] {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        }
        // A first period: sampling has begun, the traffic is counted.
        _ = try waitFor("export's first period") {
            try export.requireRunning()
            return periods().isEmpty ? nil : true
        }
        try tunnel.sendUDP(to: pair.ipB, port: 9103, count: 150, payload: 600)
        let sent = 150 * VethPair.frameBytes(payload: 600)
        _ = try waitFor("export's periods to count the \(sent) bytes sent around the tunnel") {
            periods().map(outsideTx).reduce(0, +) >= sent ? true : nil
        }
        #expect(export.stop() == 0, "\(export.log)")
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        // The schema checker takes one JSON document per file.
        let documents = lines.indices.map { path + ".\($0).json" }
        defer { for file in documents { try? FileManager.default.removeItem(atPath: file) } }
        for (line, file) in zip(lines, documents) { try String(line).write(toFile: file, atomically: true, encoding: .utf8) }
        let schema = try checkJSONSchema(documents)
        #expect(schema.ok && !lines.isEmpty, "\(schema.output)")
        var outside: UInt64 = 0
        for line in lines {
            let period = try JSONParser.parse(String(line))
            guard case .array(let probes)? = period["route"]?["probes"], case .array? = period["route"]?["tunnels"] else {
                throw TestFailure("no route in \(line)")
            }
            #expect(probes.first?["interface"]?.stringValue == tunnel.tunA && probes.first?["via_tunnel"] == .bool(true))
            outside += outsideTx(period)
        }
        #expect(Double(outside) >= Double(sent) && Double(outside) <= Double(sent) * 1.02, "periods' outside tx \(outside) against \(sent)")
    }

    @Test func badValuesAreUsageErrors() throws {
        for (arguments, needle) in [
            (["route", "--probe", "not-an-address"], "--probe"),
            (["route", "--underlay", "tun0"], "--underlay"),
            (["route", "--overhead", "tun0=-3"], "--overhead"),
            (["route", "--endpoint", "tun0=999.1.1.1"], "--endpoint"),
            (["route", "--all-netns"], "one --netns"),
        ] {
            let result = try ifmeter(arguments)
            #expect(result.status == 64 && result.err.contains(needle) && result.err.split(separator: "\n").count == 1, "\(arguments): \(result.err)")
        }
    }

    @Test func theEstimateIsFlooredAndOverflowSafe() {
        #expect(OutsideEstimate.outside(underlay: 1000, tunnel: 600, packets: 5, overhead: 42) == 190)
        #expect(OutsideEstimate.outside(underlay: 100, tunnel: 600, packets: 5, overhead: 42) == 0)
        #expect(OutsideEstimate.outside(underlay: 100, tunnel: .max, packets: .max, overhead: 42) == 0)
        #expect(TunnelUnderlay.defaultOverhead(tunnel: Classification(kind: .tunnel, evidence: "link-kind:wireguard"), underlayARPHRD: 519) == 60)
        #expect(TunnelUnderlay.defaultOverhead(tunnel: Classification(kind: .tunnel, evidence: "link-kind:tun"), underlayARPHRD: 1) == 42)
    }
}
