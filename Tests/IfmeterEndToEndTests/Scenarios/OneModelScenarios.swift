import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// One model behind serve (issue 46), as a person sees it: under known
/// traffic, with the default 5-minute save interval (no save comes during
/// the scenario), /metrics, /api/v1/interfaces, the dashboard in Chromium
/// and /api/v1/usage show the same totals, and today's use is what was
/// counted since serve first saw the interface, before any save; the
/// `usage` command shows the file as of its last save and says when; serve's
/// surfaces show the alias given while it runs, and say since when their
/// totals run.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct OneModelScenarios {
    func tx(_ exposition: String, _ interface: String) -> UInt64? {
        Scenario.metric(exposition, "ifmeter_transmit_bytes_total").first { $0.key.contains("interface=\"\(interface)\"") }
            .map { UInt64($0.value) }
    }

    @Test func everySurfaceShowsTheSameFiguresWithTheirAliasAndSinceWhen() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let folder = try ScenarioFolder("one-model")
        let state = folder["state.db"]
        let port: UInt16 = 19457
        let server = try startLoopbackServe(in: pair.a, port: port, ["--state", state, "--exclude", "lo"])
        defer { server.stop() }
        // The kernel's count when serve first saw vA: its total's start
        // (IPv6 is off in the tests' namespaces: nothing moves until sent).
        let first = try #require(tx(try Scenario.scrape(pair.a, port: port), "vA"))
        #expect(try ifmeter(["state", "alias", "vA", "uplink", "--state", state]).status == 0)
        try pair.sendUDP(count: 120, payload: 800)
        let sent = 120 * VethPair.frameBytes(payload: 800)

        // Two samples after the traffic shows: the figures have settled.
        let settled = try waitFor("the traffic and two samples after it") { () throws -> String? in
            let text = try Scenario.scrape(pair.a, port: port)
            guard let total = tx(text, "vA"), total >= first + sent else { return nil }
            return text
        }
        let samples = Scenario.metric(settled, "ifmeter_samples_total")[""] ?? 0
        let exposition = try waitFor("two more samples") { () throws -> String? in
            let text = try Scenario.scrape(pair.a, port: port)
            return (Scenario.metric(text, "ifmeter_samples_total")[""] ?? 0) >= samples + 2 ? text : nil
        }
        let metrics = try #require(tx(exposition, "vA"))
        #expect(exposition.contains("alias=\"uplink\""), "/metrics carries the alias")

        // /api/v1/interfaces: the same total, its alias, since when.
        let interfaces = try JSONParser.parse(try RawHTTP.request("/api/v1/interfaces", port: port, in: pair.a.name).text)
        guard case .array(let rows)? = interfaces["interfaces"], let row = rows.first(where: { $0["name"]?.stringValue == "vA" }) else {
            Issue.record("no vA in /api/v1/interfaces: \(interfaces)")
            return
        }
        #expect(row["tx_bytes"]?.uint64Value == metrics, "the API's total is /metrics'")
        #expect(row["alias"]?.stringValue == "uplink")
        #expect(row["since"]?.doubleValue != nil)

        // /api/v1/usage: today's use is what was counted since first sight,
        // before any save.
        func today() throws -> UInt64 {
            let doc = try JSONParser.parse(try RawHTTP.request("/api/v1/usage?granularity=day&interface=vA", port: port, in: pair.a.name).text)
            guard case .array(let list)? = doc["interfaces"], case .array(let periods)? = list.first?["periods"] else { return 0 }
            #expect(list.first?["alias"]?.stringValue == "uplink", "the usage rows carry the alias")
            return periods.reduce(0) { $0 + ($1["tx_bytes"]?.uint64Value ?? 0) }
        }
        #expect(try today() == metrics - first, "today's use: the bytes counted since serve first saw vA")

        // The page: the same total, the alias, since when; its day rows
        // are the API's.
        let browser = try Browser(in: pair.a)
        try browser.setViewport(width: 1280, height: 800)
        try browser.load("http://127.0.0.1:\(port)/")
        let cell = "document.querySelector('#interfaces tbody tr[data-key=\"vA\"] td.tx-total')"
        try browser.waitUntil("\(cell) !== null && \(cell).dataset.bytes === '\(metrics)'")
        #expect(try browser.evaluate("\(cell).title", as: String.self).hasPrefix("the kernel's count when serve first saw it (20"))
        #expect(
            try browser.evaluate("document.querySelector('#interfaces tbody tr[data-key=\"vA\"] a').textContent", as: String.self) == "uplink (vA)")
        try browser.load("http://127.0.0.1:\(port)/#i=vA")
        let days = "[...document.querySelectorAll('section[data-granularity=\"day\"] tbody tr')]"
        try browser.waitUntil("\(days).length > 0")
        let pageToday: UInt64 = try browser.evaluate("\(days).reduce((s, r) => s + Number(r.dataset.tx), 0)")
        #expect(pageToday == metrics - first, "the page's day rows are the API's current figures")
        try browser.expectNoProblems()
        _ = try browser.screenshot("one-model-interface")

        // No save came: the command reads the file as of its last save and
        // says when that was; it carries the alias too.
        #expect(Scenario.metric(try Scenario.scrape(pair.a, port: port), "ifmeter_state_saves_total")[""] ?? 0 <= 1)
        let cli = try ifmeter(["usage", "--state", state, "--format", "json", "--daily", "--include", "vA"])
        #expect(cli.status == 0, "\(cli.err)")
        let document = try JSONParser.parse(cli.out)
        #expect(document["state"]?["saved_at"].map { $0 != .null } == true, "usage says as of when: \(cli.out)")
        let text = try ifmeter(["usage", "--state", state, "--daily", "--include", "vA"])
        #expect(text.out.hasPrefix("Last saved "), "usage says as of when: \(text.out)")
    }
}
