import IfmeterCore
import IfmeterOutput
import IfmeterServe
import IfmeterTestSupport
import Synchronization
import Testing

/// The dashboard's routes and the JSON API's checks, in process: the
/// page's policy, its assets, the usage query's validation, and what
/// reaches the CLI's usage provider.
@Suite struct DashboardRoutesTests {
    final class Asked: Sendable {
        let queries = Mutex<[UsageQuery]>([])
        func withLock<T>(_ body: (inout [UsageQuery]) -> T) -> T { queries.withLock { body(&$0) } }
    }
    let asked = Asked()

    func routes(usage: Bool = true) -> ServeRoutes {
        let board = LiveBoard(interval: 1, version: "9.8.7")
        let asked = self.asked
        let provider: @Sendable (UsageQuery) -> HTTPResponse = { query in
            asked.withLock { $0.append(query) }
            return HTTPResponse(status: 200, contentType: "application/json", text: "{}")
        }
        return ServeRoutes(
            cache: ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1), version: "9.8.7", board: board,
            usage: usage ? provider : nil)
    }

    func get(_ routes: ServeRoutes, _ path: String, _ query: [String: String] = [:]) -> HTTPResponse {
        routes.respond(to: HTTPRequest(method: "GET", path: path, headers: [:], query: query)).resolved()
    }

    func header(_ response: HTTPResponse, _ name: String) -> String? {
        response.headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    func text(_ response: HTTPResponse) -> String {
        guard case .bytes(let body) = response.payload else { return "" }
        return String(decoding: body.bytes, as: UTF8.self)
    }

    @Test func thePageAndItsAssetsComeWithAStrictPolicyAndNoInlineScriptOrStyle() {
        let routes = routes()
        for (path, type) in [("/", "text/html"), ("/dashboard.js", "text/javascript"), ("/dashboard.css", "text/css")] {
            let response = get(routes, path)
            #expect(response.status == 200, "\(path)")
            #expect(header(response, "Content-Type")?.hasPrefix(type) == true, "\(path)")
            let policy = header(response, "Content-Security-Policy") ?? ""
            #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'self'") && !policy.contains("unsafe"), "\(path)")
            #expect(header(response, "X-Content-Type-Options") == "nosniff")
        }
        let page = text(get(routes, "/"))
        // Scripts only from the file; no inline handler or style attribute.
        #expect(page.components(separatedBy: "<script").count == 2 && page.contains("<script src=\"/dashboard.js\" defer></script>"))
        for handler in ["onclick", "onload", "onerror", "onmouseover", "javascript:"] { #expect(!page.contains(handler)) }
        #expect(!page.contains("style=\""))
        #expect(!page.contains("http://") && !page.contains("https://"), "nothing from elsewhere")
        // Names go in as text: the script never sets innerHTML.
        let script = text(get(routes, "/dashboard.js"))
        #expect(!script.contains("innerHTML") && !script.contains("outerHTML") && !script.contains("insertAdjacentHTML") && !script.contains("eval("))
        #expect(text(get(routes, "/dashboard.css")).contains("prefers-color-scheme: dark"))
    }

    @Test func theUsageQueryIsCheckedBeforeTheStateFileIsRead() {
        let routes = routes()
        let bad: [([String: String], String)] = [
            (["granularity": "weekly"], "invalid granularity 'weekly'; use fiveminutes, hour, day, month, year, cycle"),
            (["limit": "0"], "invalid limit '0'; use a whole number from 1 to 100000"),
            (["limit": "ten"], "invalid limit 'ten'; use a whole number from 1 to 100000"),
            (["interface": ""], "invalid interface: give one interface's name (NS/NAME for another namespace's)"),
            (["begin": ""], "invalid begin '': expected a local date or time like 2026-11-01 or 2026-11-01T08:30"),
            (["colour": "red"], "unknown parameter 'colour'; use granularity, begin, end, interface or limit"),
            (["granularity": "\u{1b}[31m"], "invalid granularity '\\x1b[31m'; use fiveminutes, hour, day, month, year, cycle"),
        ]
        for (query, message) in bad {
            let response = get(routes, "/api/v1/usage", query)
            #expect(response.status == 400, "\(query)")
            #expect(text(response) == "400 Bad Request: \(message).\n", "\(query)")
        }
        #expect(asked.withLock { $0.isEmpty }, "no bad query reaches the state file")

        let good = get(routes, "/api/v1/usage", ["granularity": "hour", "interface": "ns1/wg0", "begin": "2026-11-01", "limit": "24"])
        #expect(good.status == 200)
        #expect(
            asked.withLock { $0 }
                == [UsageQuery(granularity: "hour", begin: "2026-11-01", end: nil, interface: "ns1/wg0", limit: 24)])
        _ = get(routes, "/api/v1/usage")
        #expect(asked.withLock { $0.last?.granularity } == "day", "a day table by default, as usage gives")
    }

    @Test func withoutAStateFileUsageSaysHowToHaveOne() {
        let response = get(routes(usage: false), "/api/v1/usage")
        #expect(response.status == 404)
        #expect(text(response) == "404 Not Found: this serve keeps no state file, so it has no usage tables; start it with --state FILE.\n")
    }

    @Test func theRouteVerdictIsJSON() throws {
        let cache = ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1)
        let routes = ServeRoutes(cache: cache, version: "9.8.7")
        let none = try JSONParser.parse(text(get(routes, "/api/v1/routes")))
        #expect(none["schema"]?.stringValue == "ifmeter.routes" && none["probes"] == .array([]) && none["estimate"] == .bool(true))
        var tunnel = ProbeRoute(probe: "192.0.2.99")
        tunnel.interface = "wg0"
        tunnel.classification = Classification(kind: .tunnel, evidence: "link-kind:wireguard")
        var outside = ProbeRoute(probe: "198.51.100.7")
        outside.interface = "eth0"
        outside.classification = Classification(kind: .ethernet, evidence: "arphrd:ether(1)")
        outside.gateway = "10.0.0.1"
        cache.setRoutes(RouteExposition(egress: [tunnel, outside], outside: []))
        let doc = try JSONParser.parse(text(get(routes, "/api/v1/routes")))
        guard case .array(let probes)? = doc["probes"], probes.count == 2 else { throw TestFailure("two probes") }
        #expect(probes[0]["interface"]?.stringValue == "wg0" && probes[0]["via_tunnel"] == .bool(true) && probes[0]["leaves_outside"] == .bool(false))
        #expect(probes[1]["gateway"]?.stringValue == "10.0.0.1" && probes[1]["leaves_outside"] == .bool(true))
    }

    @Test func theInterfacesAndTheirEventsAreJSONAndAStream() throws {
        let routes = routes()
        let now = get(routes, "/api/v1/interfaces")
        #expect(now.status == 200)
        #expect(header(now, "Content-Type") == "application/json")
        let document = try JSONParser.parse(text(now))
        #expect(document["schema"]?.stringValue == "ifmeter.interfaces")
        #expect(document["estimate"] == .bool(true))
        #expect(get(routes, "/api/v1/interfaces", ["colour": "red"]).status == 400)
        let events = get(routes, "/api/v1/events")
        #expect(events.status == 200)
        #expect(header(events, "Content-Type") == "text/event-stream; charset=utf-8")
        guard case .events = events.payload else {
            Issue.record("the events route streams")
            return
        }
    }
}
