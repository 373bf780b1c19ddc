import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 30, as a fleet runs it: one real Prometheus (with the shipped
/// rules) in a hub namespace scrapes one serve and receives the pushes of
/// two gateways, each in its own namespace with its own host name. gw-a has
/// a tunnel its probe routes through; gw-c has none. Pushed series carry
/// job and instance; no alert expression matches the wrong host; the route
/// alert matches gw-a alone once its route leaves outside the tunnel; an
/// interface that ends disappears at the next push (its stale marker)
/// while increase() over its life is the bytes sent; and every panel of
/// the Grafana dashboard returns data.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct FleetPrometheusTests {
    static let prometheusPort: UInt16 = 39620
    static let scrapedPort: UInt16 = 39621
    static let rules = repositoryRoot.appendingPathComponent("dist/prometheus/ifmeter-rules.yml").path

    /// The hub's Prometheus API.
    struct API {
        let hub: TestNamespace

        var prometheus: PrometheusAPI { PrometheusAPI(namespace: hub.name, port: FleetPrometheusTests.prometheusPort) }

        func query(_ promql: String) throws -> [JSONValue] { try prometheus.query(promql) }

        /// The `instance` labels of what `promql` returns.
        func instances(_ promql: String) throws -> Set<String> {
            Set(try query(promql).compactMap { $0["metric"]?["instance"]?.stringValue })
        }

        /// The raw samples of one series over `seconds` (stale markers are
        /// not among them).
        func samples(_ selector: String, seconds: Int) throws -> [Double] {
            guard let first = try query("\(selector)[\(seconds)s]").first, case .array(let values)? = first["values"] else { return [] }
            return values.compactMap { pair in
                guard case .array(let p) = pair, p.count == 2 else { return nil }
                return p[1].stringValue.flatMap(Double.init)
            }
        }
    }

    /// A gateway: a namespace joined to the hub by a veth, with a host name
    /// of its own (a UTS namespace) for the serve it runs.
    struct Gateway {
        let ns: TestNamespace
        let host: String
        let device: String
        let hubAddress: String

        init(hub: TestNamespace, host: String, subnet: Int) throws {
            ns = try TestNamespace()
            self.host = host
            device = "up\(subnet)"
            hubAddress = "10.79.\(subnet).1"
            try hub.ip("link", "add", "hub\(subnet)", "type", "veth", "peer", "name", device, "netns", ns.name)
            try hub.ip("addr", "add", hubAddress + "/24", "dev", "hub\(subnet)")
            try ns.ip("addr", "add", "10.79.\(subnet).2/24", "dev", device)
            try hub.ip("link", "set", "hub\(subnet)", "up")
            try ns.ip("link", "set", device, "up")
            try ns.ip("route", "add", "default", "via", hubAddress)
        }

        /// `ifmeter ARGUMENTS` as run on the gateway (its namespace, its host name).
        func command(_ arguments: [String]) throws -> [String] {
            let command = ([try ifmeterBinary()] + arguments).map { "'\($0)'" }.joined(separator: " ")
            return ["ip", "netns", "exec", ns.name, "unshare", "--uts", "sh", "-c", "hostname \(host) && exec \(command)"]
        }

        func serve(_ arguments: [String]) throws -> Background {
            try Background(try command(["serve"] + arguments), name: "serve-\(host)")
        }
    }

    @Test func aFleetPushesWithItsIdentityAndPagesTheRightHost() throws {
        try Netns.requireRoot()
        let hub = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-fleet-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try """
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        rule_files:
          - \(Self.rules)
        scrape_configs:
          - job_name: ifmeter
            static_configs:
              - targets: ['127.0.0.1:\(Self.scrapedPort)']
        """.write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
        let prometheus = try Background(
            [
                "ip", "netns", "exec", hub.name, "prometheus", "--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/data",
                "--web.listen-address=0.0.0.0:\(Self.prometheusPort)", "--web.enable-remote-write-receiver", "--log.level=warn",
            ], name: "prometheus-fleet")
        defer { _ = prometheus.stop() }
        let api = API(hub: hub)
        _ = try waitFor("Prometheus to answer") { try? api.query("vector(1)") }

        // The scraped serve, in the hub.
        let scraped = try Background(
            [
                "ip", "netns", "exec", hub.name, try ifmeterBinary(), "serve", "--interval", "500ms", "--listen",
                "127.0.0.1:\(Self.scrapedPort)",
            ], name: "serve-scraped")
        defer { _ = scraped.stop() }

        // gw-a: a tunnel its probe routes through, a plan, an underlay.
        let a = try Gateway(hub: hub, host: "gw-a", subnet: 1)
        let tun = try a.ns.openTun("tunA")
        defer { close(tun) }
        try a.ns.ip("link", "set", "tunA", "up")
        try a.ns.ip("route", "add", "192.0.2.99", "dev", "tunA")
        let stateA = dir + "/a.db"
        let plan = try run(
            try a.command(["plan", "set", a.device, "--state", stateA, "--cycle-start", "1", "--quota", "5GB", "--direction", "tx"]),
            allowFailure: true)
        try #require(plan.status == 0, "\(plan.err)")
        let push = { (g: Gateway) in
            [
                "--listen", "none", "--interval", "500ms", "--remote-write", "http://\(g.hubAddress):\(Self.prometheusPort)/api/v1/write",
                "--remote-write-interval", "1s", "--remote-write-queue", dir + "/queue-\(g.host)", "--probe", "192.0.2.99", "--series-lifetime", "2s",
            ]
        }
        let serveA = try a.serve(push(a) + ["--state", stateA, "--underlay", "tunA=\(a.device)"])
        defer { _ = serveA.stop() }
        // gw-c: no tunnel at all; its probe leaves by its uplink.
        let c = try Gateway(hub: hub, host: "gw-c", subnet: 2)
        let serveC = try c.serve(push(c))
        defer { _ = serveC.stop() }

        for instance in ["gw-a", "gw-c", "127.0.0.1:\(Self.scrapedPort)"] {
            _ = try waitFor("\(instance) in Prometheus") { () -> Bool? in
                for server in [serveA, serveC, scraped] { try server.requireRunning() }
                return try api.query(
                    #"ifmeter_route_egress_info{instance="\#(instance)"} or ifmeter_build_info{instance="\#(instance)",job="ifmeter"}"#
                )
                .isEmpty ? nil : true
            }
        }
        // Every pushed series has the identity a scrape gives; none lacks it.
        #expect(try api.query(#"count({__name__=~"ifmeter_.+|process_.+",job=""})"#).isEmpty, "a series without job")
        #expect(try api.query(#"count({__name__=~"ifmeter_.+|process_.+",instance=""})"#).isEmpty, "a series without instance")
        #expect(try api.instances(#"ifmeter_build_info{job="ifmeter"}"#) == ["gw-a", "gw-c", "127.0.0.1:\(Self.scrapedPort)"])
        #expect(try api.instances("process_resident_memory_bytes > 0").count == 3, "process metrics, scraped and pushed")
        // The process families as client libraries have them: promtool's lint passes.
        let text = try RawHTTP.request("/metrics", port: Self.scrapedPort, in: hub.name).text
        #expect(["process_cpu_seconds_total ", "process_open_fds ", "process_max_fds ", "process_start_time_seconds "].allSatisfy(text.contains))
        let lint = try run(["promtool", "check", "metrics"], input: text, allowFailure: true)
        #expect(lint.status == 0 && lint.out.isEmpty && lint.err.isEmpty, "promtool: \(lint.out)\(lint.err)")

        // The shipped alerts' expressions: none matches gw-c, and, while
        // gw-a's probe goes through its tunnel, none matches gw-a either.
        let alerts = PrometheusRulesTests.rules(try String(contentsOfFile: Self.rules, encoding: .utf8)).filter(\.isAlert)
        try #require(alerts.count >= 17)
        _ = try waitFor("the probe's route through the tunnel") {
            try api.instances(#"ifmeter_route_egress_info{kind="tunnel"}"#).contains("gw-a") ? true : nil
        }
        for alert in alerts {
            let matched = try api.instances(alert.expr)
            #expect(!matched.contains("gw-c") && !matched.contains("gw-a"), "\(alert.name) matches \(matched)")
        }

        // gw-a's route now leaves outside its tunnel: the route alert
        // matches gw-a, and gw-a alone.
        try a.ns.ip("route", "del", "192.0.2.99", "dev", "tunA")
        let route = try #require(alerts.first { $0.name == "IfmeterRouteOutsideTunnel" })
        let leaking = try waitFor("the route alert on gw-a") { () -> Set<String>? in
            let matched = try api.instances(route.expr)
            return matched.isEmpty ? nil : matched
        }
        #expect(leaking == ["gw-a"], "\(leaking)")
        for alert in alerts where alert.name != route.name {
            let matched = try api.instances(alert.expr)
            #expect(!matched.contains("gw-c") && !matched.contains("gw-a"), "\(alert.name) matches \(matched)")
        }

        // An interface that ends: its series disappears from instant
        // queries at the next push (the stale marker), while its samples
        // still hold every byte sent over its life.
        try a.ns.ip("link", "add", "vX", "type", "veth", "peer", "name", "vY")
        try a.ns.ip("link", "set", "vX", "up")
        try a.ns.ip("link", "set", "vY", "up")
        let selector = #"ifmeter_transmit_bytes_total{instance="gw-a",interface="vX"}"#
        let before = try waitFor("vX in Prometheus") { () -> Double? in
            try api.query(selector).first?["value"].flatMap { value -> Double? in
                guard case .array(let pair) = value, pair.count == 2 else { return nil }
                return pair[1].stringValue.flatMap(Double.init)
            }
        }
        try sendFrames(in: a.ns.name, interface: "vX", count: 10, size: 300)
        _ = try waitFor("vX's frames in Prometheus") { () -> Bool? in
            (try api.samples(selector, seconds: 300).last ?? 0) >= before + 3000 ? true : nil
        }
        try a.ns.ip("link", "del", "vX")
        _ = try waitFor("vX's series to end") { try api.query(selector).isEmpty ? true : nil }
        let life = try api.samples(selector, seconds: 300)
        #expect((life.last ?? 0) - (life.first ?? 0) == 3000, "increase over its life: \(life)")

        // Every panel of the dashboard, and every variable, returns data.
        try checkDashboard(api)
        print("fleet: \(alerts.count) alert expressions checked on gw-a and gw-c; route alert on \(leaking.sorted())")
    }

    /// Each target of `dist/grafana/ifmeter.json`, with its variables as
    /// the dashboard opens (job, instance and interface at all values,
    /// `$topk` 10, `lo` excluded), idle interfaces shown too (`$moved` at
    /// all: nothing here has errors or drops), `$__rate_interval` 1m and
    /// `$__range` the dashboard's 6 hours, runs without an error and returns
    /// something; so does each variable's query.
    func checkDashboard(_ api: API) throws {
        let dashboard = try GrafanaDashboard()
        var values = dashboard.defaults
        values["moved"] = "-1"
        values["__rate_interval"] = "1m"
        values["__range"] = "21600s"
        #expect(values["topk"] == "10" && values["exclude"] == "lo", "\(values)")
        var checked = 0
        for target in dashboard.targets {
            let expr = GrafanaDashboard.substitute(target.expr, values)
            let result = try api.query(expr)
            #expect(!result.isEmpty, "panel '\(target.panel)': \(expr) returns nothing")
            checked += 1
        }
        for panel in dashboard.panels {
            guard case .array(let targets)? = panel["targets"], !targets.isEmpty else {
                Issue.record("panel \(panel["title"]?.stringValue ?? "?") has no query")
                continue
            }
        }
        for variable in dashboard.variables where variable["type"]?.stringValue == "query" {
            let definition = GrafanaDashboard.substitute(variable["definition"]?.stringValue ?? "", values)
            let choices = try api.prometheus.labelValues(definition)
            #expect(!choices.isEmpty, "variable \(variable["name"]?.stringValue ?? "?"): nothing for \(definition)")
        }
        #expect(checked >= 20, "\(checked) queries")
    }
}
