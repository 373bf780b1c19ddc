import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// The state and plan workflows of docs/state-and-usage.md, in every
/// order a user can take them, checked against the bytes sent: a plan set
/// before the first sample or after it, then export, serve and live on one
/// state file in turn.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct PlanAndStateScenarios {
    static let payload = 700
    static var frame: UInt64 { VethPair.frameBytes(payload: payload) }

    enum Order: String, CaseIterable, Sendable {
        case planFirst, samplingFirst
    }

    /// Export runs while datagrams go out of vA; it stops with SIGTERM.
    func exportTraffic(_ pair: VethPair, _ dir: ScenarioFolder, count: Int) throws -> String {
        let exporter = try Scenario.start(
            pair.a, "export",
            [
                "--interval", "100ms", "--every", "200ms", "--json", dir["r.json"], "--state", dir["state.db"],
                "--boot-id-file", try dir.bootFile(),
            ])
        _ = try waitFor("the first report") { FileManager.default.fileExists(atPath: dir["r.json"]) ? true : nil }
        if count > 0 {
            try pair.sendUDP(count: count, payload: Self.payload)
            // Counted before the stop.
            try ExportReport.waitForTotal(dir["r.json"], "va0", atLeast: UInt64(count) * Self.frame)
        }
        #expect(exporter.stop() == 0, "\(exporter.log)")
        return try String(contentsOfFile: dir["r.json"], encoding: .utf8)
    }

    /// Finding 1 of the honest-workflows issue: a plan set on a new state
    /// file made every total a lower bound (`≥ 0 B` for idle lo) and
    /// `--check` UNKNOWN (4), and the report said "Restored". The plan must
    /// change nothing about the quality of what is counted later.
    @Test(arguments: Order.allCases)
    func aPlanSetFirstOrLaterLeavesEveryTotalExact(order: Order) throws {
        try Netns.requireRoot()
        let pair = try VethPair(nameA: "va0", nameB: "vb0")
        let dir = try ScenarioFolder("plan-\(order.rawValue)")
        let plan = ["plan", "set", "va0", "--state", dir["state.db"], "--cycle-start", "1", "--quota", "1GB"]
        var sent: UInt64 = 0
        if order == .planFirst {
            let set = try ifmeter(plan)
            #expect(set.status == 0, "\(set.err)")
        } else {
            _ = try exportTraffic(pair, dir, count: 0)
            #expect(try ifmeter(plan).status == 0)
        }
        let report = try exportTraffic(pair, dir, count: 40)
        sent += 40 * Self.frame

        let totals = try Scenario.reportTotals(report)
        #expect(totals["va0"]?.tx == sent, "\(totals)")
        for (name, t) in totals { #expect(t.quality == "exact", "\(name): \(t)") }
        let state = try JSONParser.parse(report)["state"]
        let note = state?["note"]?.stringValue ?? ""
        #expect(!note.contains("Restored") || order == .samplingFirst, "a plan alone restores nothing: \(note)")

        let usage = try Scenario.usage(dir["state.db"])
        #expect(usage["va0"]?.tx == sent, "\(usage)")
        for (name, f) in usage { #expect(f.quality == "exact", "\(name): \(f)") }
        let check = try ifmeter(["usage", "--state", dir["state.db"], "--check"])
        #expect(check.status == 0 && check.out.contains("under va0"), "\(check)")
    }

    /// The same with serve: `ifmeter_interface_quality{quality="exact"} 1`
    /// on every interface, the plan's use equal to the bytes sent.
    @Test(arguments: Order.allCases)
    func servePlanFirstOrLaterServesExactQuality(order: Order) throws {
        try Netns.requireRoot()
        let pair = try VethPair(nameA: "va0", nameB: "vb0")
        let dir = try ScenarioFolder("serve-plan-\(order.rawValue)")
        let plan = ["plan", "set", "va0", "--state", dir["state.db"], "--cycle-start", "1", "--quota", "1GB"]
        let serveArguments = ["--state", dir["state.db"], "--boot-id-file", try dir.bootFile(), "--save-every", "300ms"]
        if order == .planFirst {
            #expect(try ifmeter(plan).status == 0)
        } else {
            let first = try startServe(in: pair.a, serveArguments)
            #expect(first.stop() == 0)
            #expect(try ifmeter(plan).status == 0)
        }
        let server = try startServe(in: pair.a, serveArguments)
        // Its first sample has va0: the traffic comes after it.
        try KillAndRestartScenarios().waitForSeen("serve", pair.a, dir, server, "va0")
        try pair.sendUDP(count: 30, payload: Self.payload)
        let sent = 30 * Self.frame
        let text = try waitFor("the plan's use to reach the bytes sent") { () -> String? in
            let text = try Scenario.scrape(pair.a)
            let used = Scenario.metric(text, "ifmeter_plan_used_bytes").values.first ?? 0
            return used >= Double(sent) ? text : nil
        }
        let quality = Scenario.metric(text, "ifmeter_interface_quality")
        let lowerBound = quality.filter { $0.key.contains("quality=\"lower-bound\"") && $0.value == 1 }
        #expect(lowerBound.isEmpty, "lower-bound: \(lowerBound.keys.sorted())")
        #expect(quality.filter { $0.key.contains("quality=\"exact\"") && $0.value == 1 }.count >= 2, "\(quality)")
        #expect(Scenario.metric(text, "ifmeter_plan_used_bytes").values.first == Double(sent))
        let tx = Scenario.metric(text, "ifmeter_transmit_bytes_total").first { $0.key.contains("interface=\"va0\"") }?.value
        #expect(tx.map { $0 >= Double(sent) } == true)
        #expect(server.stop() == 0)
        let check = try ifmeter(["usage", "--state", dir["state.db"], "--check"])
        #expect(check.status == 0, "\(check)")
    }
}
