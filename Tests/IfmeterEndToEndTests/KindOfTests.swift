import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// `--kind-of PATTERN=KIND` (issue 23): a raw-IP modem that is a tun
/// underneath, `wwan0`, is a tunnel by its link kind; the user's word makes
/// it cellular, shown with its evidence everywhere kinds are, and `route`
/// takes it as cellular.
@Suite(.serialized, .blocking)
struct KindOfTests {
    /// The entry of `name` in `list --format json`.
    func listed(_ out: String, _ name: String) throws -> JSONValue? {
        guard case .array(let list)? = try JSONParser.parse(out)["interfaces"] else { return nil }
        return list.first { $0["name"]?.stringValue == name }
    }

    @Test func badValuesAreOneUsageLine() throws {
        for (value, words) in [
            ("wwan0", "expected PATTERN=KIND"), ("=cellular", "expected PATTERN=KIND"), ("wwan*=modem", "unknown kind 'modem'"),
            ("wwan*=", "unknown kind ''"),
        ] {
            let result = try ifmeter(["list", "--kind-of", value])
            #expect(result.status == 64, "\(value): \(result.status)")
            let lines = result.err.split(separator: "\n")
            #expect(lines.count == 1 && lines.first?.hasPrefix("Error: ") == true && result.err.contains(words), "\(value): \(result.err)")
            #expect(result.err.contains("--help"), "a hint: \(result.err)")
            #expect(result.out.isEmpty)
        }
        for command in ["sample", "serve", "export", "live", "record", "route"] {
            let help = try ifmeter([command, "--help"])
            #expect(help.out.contains("--kind-of"), "\(command) takes --kind-of")
        }
    }

    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func aTunNamedWwanIsCellularByTheUsersWord() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let fd = try ns.openTun("wwan0")
        defer { close(fd) }
        try ns.ip("link", "set", "wwan0", "up")
        var result = try ifmeter(["list", "--format", "json"], in: ns)
        #expect(result.status == 0, "\(result.err)")
        var entry = try listed(result.out, "wwan0")
        #expect(entry?["kind"]?.stringValue == "tunnel" && entry?["evidence"]?.stringValue == "link-kind:tun", "\(String(describing: entry))")

        result = try ifmeter(["list", "--format", "json", "--kind-of", "wwan*=cellular"], in: ns)
        entry = try listed(result.out, "wwan0")
        #expect(entry?["kind"]?.stringValue == "cellular" && entry?["evidence"]?.stringValue == "user:--kind-of", "\(String(describing: entry))")
        #expect(try listed(result.out, "lo")?["kind"]?.stringValue == "loopback", "other interfaces keep the kernel's word")
        let text = try ifmeter(["list", "--kind-of", "wwan*=cellular"], in: ns)
        #expect(
            text.out.split(separator: "\n").contains { $0.contains("wwan0") && $0.contains("cellular") && $0.contains("user:--kind-of") },
            "\(text.out)")
        // Before the filters: --kind cellular finds it.
        let only = try ifmeter(["sample", "--kind", "cellular", "--kind-of", "wwan*=cellular", "--format", "json"], in: ns)
        #expect(only.status == 0 && only.out.contains("\"wwan0\"") && !only.out.contains("\"lo\""), "\(only.out.prefix(400)) \(only.err)")

        // /metrics labels.
        let server = try startServe(in: ns, port: 19501, ["--listen", "127.0.0.1:19501", "--kind-of", "wwan*=cellular"])
        let metrics = try Scenario.scrape(ns, port: 19501)
        #expect(server.stop() == 0)
        let info = metrics.split(separator: "\n").first { $0.hasPrefix("ifmeter_interface_info{") && $0.contains("interface=\"wwan0\"") }
        #expect(info.map { $0.contains("kind=\"cellular\"") && $0.contains("evidence=\"user:--kind-of\"") } == true, "\(String(describing: info))")
    }

    /// A real tunnel (tA, carried as UDP over the veth) and wwan0, a tun
    /// the kernel calls a tunnel too: both lean on the default route's
    /// veth, so tA's outside estimate was uncertain (a shared underlay).
    /// Said to be cellular, wwan0 is no second tunnel.
    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func routeTakesTheUsersKind() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let tunnel = try UDPTunnel(over: pair)
        defer { tunnel.stop() }
        let fd = try pair.a.openTun("wwan0")
        defer { close(fd) }
        try pair.a.ip("link", "set", "wwan0", "up")
        try pair.a.ip("route", "add", "default", "via", pair.ipB, "dev", pair.nameA)
        func tunnels(_ extra: [String]) throws -> [String: JSONValue] {
            let result = try ifmeter(["route", "--netns", pair.a.name, "--probe", "192.0.2.99", "--format", "json"] + extra)
            #expect(result.status == 3, "outside the tunnels: \(result.err)")
            guard case .array(let list)? = try JSONParser.parse(result.out)["tunnels"] else { return [:] }
            var byName: [String: JSONValue] = [:]
            for t in list { if let name = t["tunnel"]?.stringValue { byName[name] = t } }
            return byName
        }
        let before = try tunnels([])
        #expect(before["wwan0"] != nil && before[tunnel.tunA]?["shared_underlay"] == .bool(true), "\(before)")
        let after = try tunnels(["--kind-of", "\(pair.a.name)/wwan*=cellular"])
        #expect(after["wwan0"] == nil, "not a tunnel: \(after)")
        #expect(after[tunnel.tunA]?["shared_underlay"] == .bool(false), "\(after)")
    }
}
