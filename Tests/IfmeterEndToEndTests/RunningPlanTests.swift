import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 31: plans changed under a running serve, figures current within a
/// sample whatever the save interval, and a warning before the quota is
/// gone (`usage --check`'s exit 5).
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct RunningPlanTests {
    /// The day of the month two days ago, local time: a cycle starting then
    /// is past its first day (when a projection is first made) and young.
    static var dayTwoDaysAgo: Int { Calendar.current.component(.day, from: Date().addingTimeInterval(-2 * 86400)) }

    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-plans-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o700)
        return path
    }

    /// The value of a sample of `family` whose labels hold each of `labels`.
    func value(_ exposition: String, _ family: String, _ labels: [String] = []) -> Double? {
        Scenario.metric(exposition, family).first { sample in labels.allSatisfy { sample.key.contains($0) } }?.value
    }

    func scrape(_ ns: TestNamespace, _ port: UInt16) throws -> String { try Scenario.scrape(ns, port: port) }

    func serve(_ ns: TestNamespace, port: UInt16, state: String, _ extra: [String] = []) throws -> Background {
        try startServe(in: ns, port: port, interval: "200ms", name: "serve-plans", ["--listen", "127.0.0.1:\(port)", "--state", state] + extra)
    }

    /// A plan set while serve runs at the default save pace (5 minutes)
    /// shows on /metrics before any save after the first, and so does the
    /// traffic that crosses its quota: the gauges follow the samples.
    @Test func aPlanSetUnderServeAndTheTrafficOverItShowBeforeAnySave() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let port: UInt16 = 19331
        let process = try serve(pair.a, port: port, state: state)
        let first = try waitFor("the first save") { () throws -> Double? in value(try scrape(pair.a, port), "ifmeter_state_saves_total") }
        let set = try ifmeter([
            "plan", "set", "vA", "--state", state, "--cycle-start", "\(Self.dayTwoDaysAgo)", "--quota", "100KB", "--direction", "tx",
        ])
        #expect(set.status == 0, "\(set.err)")
        _ = try waitFor("the plan on /metrics") { () throws -> Bool? in
            value(try scrape(pair.a, port), "ifmeter_plan_quota_bytes", ["interface=\"vA\""]) == 100_000 ? true : nil
        }
        let frame = VethPair.frameBytes(payload: 1000)
        try pair.sendUDP(count: 150, payload: 1000)
        let used = try waitFor("the quota crossed on /metrics") { () throws -> Double? in
            let v = value(try scrape(pair.a, port), "ifmeter_plan_used_bytes", ["interface=\"vA\""]) ?? 0
            return v >= Double(150 * frame) ? v : nil
        }
        #expect(used == Double(150 * frame), "every byte sent, once: \(used)")
        let exposition = try scrape(pair.a, port)
        #expect(value(exposition, "ifmeter_state_saves_total") == first, "no save came in between: the gauges follow the samples")
        #expect((value(exposition, "ifmeter_plan_projected_bytes", ["interface=\"vA\""]) ?? 0) >= used)
        #expect(process.stop() == 0, "\(process.log)")
    }

    /// 200 plan changes while serve saves every 200 ms under traffic:
    /// every change lands, and every byte is counted once.
    @Test func twoHundredPlanChangesUnderSavesLoseNothing() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let port: UInt16 = 19332
        let process = try serve(pair.a, port: port, state: state, ["--save-every", "200ms"])
        _ = try waitFor("the first save") { () throws -> Double? in value(try scrape(pair.a, port), "ifmeter_state_saves_total") }
        let frame = VethPair.frameBytes(payload: 500)
        var sent: UInt64 = 0
        for n in 1...200 {
            let set = try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "1", "--quota", "\(n)MB", "--direction", "tx"])
            #expect(set.status == 0, "change \(n): \(set.err)")
            if n % 10 == 0 {
                try pair.sendUDP(count: 10, payload: 500)
                sent += 10 * frame
            }
        }
        _ = try waitFor("the last change on /metrics") { () throws -> Bool? in
            value(try scrape(pair.a, port), "ifmeter_plan_quota_bytes", ["interface=\"vA\""]) == 200_000_000 ? true : nil
        }
        let total = try waitFor("the traffic counted") { () throws -> Double? in
            let v = value(try scrape(pair.a, port), "ifmeter_transmit_bytes_total", ["interface=\"vA\""]) ?? 0
            return v >= Double(sent) ? v : nil
        }
        #expect(total == Double(sent))
        #expect(process.stop() == 0, "\(process.log)")
        let usage = try ifmeter(["usage", "--state", state, "--cycle", "--format", "json", "--include", "vA"])
        #expect(usage.status == 0, "\(usage.err)")
        guard case .array(let interfaces)? = try JSONParser.parse(usage.out)["interfaces"],
            case .array(let periods)? = interfaces.first?["periods"]
        else { throw TestFailure("no vA: \(usage.out)") }
        #expect(periods.reduce(0) { $0 + ($1["tx_bytes"]?.uint64Value ?? 0) } == sent, "saved once each: \(usage.out)")
        #expect(periods.last?["plan"]?["quota_bytes"]?.uint64Value == 200_000_000)
    }

    /// `ifmeter state rename` and `remove` while serve writes the file at
    /// the default save pace: applied within a sample, said in serve's log,
    /// and every byte sent is in the file once, under its new name.
    @Test func historyIsRenamedAndRemovedUnderServe() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let port: UInt16 = 19333
        let process = try serve(pair.a, port: port, state: state)
        _ = try waitFor("the first save") { () throws -> Double? in value(try scrape(pair.a, port), "ifmeter_state_saves_total") }
        let frame = VethPair.frameBytes(payload: 1000)
        try pair.sendUDP(count: 30, payload: 1000)
        _ = try waitFor("the traffic counted") { () throws -> Bool? in
            (value(try scrape(pair.a, port), "ifmeter_transmit_bytes_total", ["interface=\"vA\""]) ?? 0) >= Double(30 * frame) ? true : nil
        }
        let rename = try ifmeter(["state", "rename", "vA", "uplink", "--state", state])
        #expect(
            rename.status == 0 && rename.out == "Merged the history of 'vA' into 'uplink' (applied by the ifmeter writing the file).\n", "\(rename)")
        // serve says so on its log once it has applied it; the command's
        // answer can come first, so the line is waited for.
        _ = try waitFor("serve's line about the rename") { process.log.contains("applied 'ifmeter state rename vA uplink'") ? true : nil }
        // vA is still there: its totals start again; what it sends now is
        // its own.
        let restarted = value(try scrape(pair.a, port), "ifmeter_transmit_bytes_total", ["interface=\"vA\""]) ?? 0
        try pair.sendUDP(count: 10, payload: 1000)
        _ = try waitFor("vA counting again") { () throws -> Bool? in
            (value(try scrape(pair.a, port), "ifmeter_transmit_bytes_total", ["interface=\"vA\""]) ?? 0) >= restarted + Double(10 * frame)
                ? true : nil
        }
        #expect(process.stop() == 0, "\(process.log)")
        func tx(_ name: String) throws -> UInt64 {
            let usage = try ifmeter(["usage", "--state", state, "--format", "json", "--include", name])
            guard case .array(let interfaces)? = try JSONParser.parse(usage.out)["interfaces"],
                case .array(let periods)? = interfaces.first?["periods"]
            else { return 0 }
            return periods.reduce(0) { $0 + ($1["tx_bytes"]?.uint64Value ?? 0) }
        }
        let uplink = try tx("uplink"), vA = try tx("vA")
        #expect(uplink >= 30 * frame && vA >= 10 * frame && uplink + vA <= 40 * frame + 2000, "once each: uplink \(uplink), vA \(vA)")
        // Without a writer: at once.
        let remove = try ifmeter(["state", "remove", "uplink", "--state", state])
        #expect(remove.status == 0 && remove.out == "Removed the history of 'uplink'.\n", "\(remove)")
        #expect(try tx("uplink") == 0)
        let missing = try ifmeter(["state", "remove", "uplink", "--state", state])
        #expect(missing.status == 64 && missing.err.contains("no history of 'uplink'"), "\(missing.err)")
    }

    /// Issue 31's test: a plan changed, an interface renamed and an alias
    /// set with `ifmeter` while `serve --state` runs under known traffic at
    /// the default save pace. Each shows on /metrics before any save after
    /// the first (the gauges and labels follow the samples), `usage` shows
    /// them, and the totals equal the bytes sent.
    @Test func aPlanARenameAndAnAliasUnderServe() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let port: UInt16 = 19334
        let process = try serve(pair.a, port: port, state: state)
        let first = try waitFor("the first save") { () throws -> Double? in value(try scrape(pair.a, port), "ifmeter_state_saves_total") }
        let frame = VethPair.frameBytes(payload: 1000)
        try pair.sendUDP(count: 20, payload: 1000)
        _ = try waitFor("the traffic counted") { () throws -> Bool? in
            (value(try scrape(pair.a, port), "ifmeter_transmit_bytes_total", ["interface=\"vA\""]) ?? 0) >= Double(20 * frame) ? true : nil
        }
        // Saved by the rename (which saves first): vA's history, 20 frames.
        let rename = try ifmeter(["state", "rename", "vA", "wan", "--state", state])
        #expect(rename.status == 0, "\(rename)")
        // The command returns once the request is gone from the file; the
        // sample that applied it is published just after.
        let saved = try waitFor("the rename's save on /metrics") { () throws -> Double? in
            let v = value(try scrape(pair.a, port), "ifmeter_state_saves_total") ?? 0
            return v > first ? v : nil
        }

        let alias = try ifmeter(["state", "alias", "vA", "uplink", "--state", state])
        #expect(alias.status == 0 && alias.out == "'vA' is shown as 'uplink'.\n", "\(alias)")
        _ = try waitFor("the alias on /metrics") { () throws -> Bool? in
            Scenario.metric(try scrape(pair.a, port), "ifmeter_interface_info").contains {
                $0.key.contains("interface=\"vA\"") && $0.key.contains("alias=\"uplink\"")
            } ? true : nil
        }
        let plan = try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "1", "--quota", "1MB", "--direction", "tx"])
        #expect(plan.status == 0, "\(plan.err)")
        try pair.sendUDP(count: 30, payload: 1000)
        let used = try waitFor("the plan and the new traffic on /metrics") { () throws -> Double? in
            let v = value(try scrape(pair.a, port), "ifmeter_plan_used_bytes", ["interface=\"vA\""]) ?? 0
            return v >= Double(30 * frame) ? v : nil
        }
        let exposition = try scrape(pair.a, port)
        #expect(used == Double(30 * frame), "vA's cycle after the rename: the 30 frames sent since, once")
        #expect(value(exposition, "ifmeter_state_saves_total") == saved, "no save came in between")

        // usage, while serve runs (vA's traffic since the rename is not
        // saved yet): its plan's cycle with the alias beside its name, the
        // renamed history under its new name.
        let text = try ifmeter(["usage", "--state", state, "--cycle", "--include", "vA,wan"])
        #expect(text.status == 0 && text.out.contains("vA [uplink] (") && text.out.contains("plan 'vA'"), "\(text.out)")
        #expect(text.out.contains("wan (virtual)"), "\(text.out)")
        #expect(process.stop() == 0, "\(process.log)")
        func tx(_ name: String) throws -> (UInt64, String?) {
            let usage = try ifmeter(["usage", "--state", state, "--format", "json", "--include", name])
            guard case .array(let interfaces)? = try JSONParser.parse(usage.out)["interfaces"], let first = interfaces.first,
                case .array(let periods)? = first["periods"]
            else { return (0, nil) }
            return (periods.reduce(0) { $0 + ($1["tx_bytes"]?.uint64Value ?? 0) }, first["alias"]?.stringValue)
        }
        let (wan, _) = try tx("wan"), (vA, vAAlias) = try tx("vA")
        #expect(wan + vA == 50 * frame && wan >= 20 * frame, "every byte once: wan \(wan), vA \(vA)")
        #expect(vAAlias == "uplink")
        #expect(try ifmeter(["state", "unalias", "vA", "--state", state]).out == "'vA' has no alias.\n")
        #expect(try tx("vA").1 == nil)
        let bad = try ifmeter(["state", "alias", "vA", "a\u{1b}[2Jb", "--state", state])
        #expect(bad.status == 64 && bad.err.contains("invalid alias 'a\\x1b[2Jb'"), "\(bad.err)")
    }

    /// Under the quota now, but over it by the cycle's end at the rate so
    /// far: `usage --check` exits 5 and says so.
    @Test func aCycleProjectedOverItsQuotaExitsFive() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let exporter = try Background(
            [
                "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "export", "--interval", "100ms", "--json", dir + "/r.json",
                "--every", "200ms", "--state", state,
            ], name: "export-projection")
        _ = try ExportReport.waitForFirst(dir + "/r.json")
        try pair.sendUDP(count: 100, payload: 1000)
        _ = try ExportReport.waitForTotal(dir + "/r.json", "vA", atLeast: 100 * VethPair.frameBytes(payload: 1000))
        // Stopped (its last save holds everything); at the default save
        // pace the file is current for 10 minutes, so the checks below
        // judge the use, not a stale file.
        #expect(exporter.stop() == 0)
        // The cycle started two days ago (a projection waits a day): the
        // use so far is a small share of its length.
        let today = Self.dayTwoDaysAgo
        #expect(try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "\(today)", "--direction", "tx"]).status == 0)
        let cycle = try ifmeter(["usage", "--state", state, "--cycle", "--format", "json", "--include", "vA"])
        guard case .array(let interfaces)? = try JSONParser.parse(cycle.out)["interfaces"],
            case .array(let periods)? = interfaces.first?["periods"], let plan = periods.last?["plan"],
            let used = plan["used_bytes"]?.uint64Value, let projected = plan["projection"]?["bytes"]?.uint64Value
        else { throw TestFailure("no projection: \(cycle.out)") }
        #expect(projected > used * 5, "\(used) used, \(projected) projected")
        // A quota between the two: under now, projected over.
        let quota = (used + projected) / 2
        #expect(
            try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "\(today)", "--quota", "\(quota)B", "--direction", "tx"]).status == 0
        )
        let check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 5, "\(check)")
        #expect(check.out.contains("PROJECTED OVER vA: ") && check.out.contains("(an estimate)"), "\(check.out)")
        // Over now: 3, whatever the projection.
        #expect(
            try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "\(today)", "--quota", "\(used - 1)B", "--direction", "tx"]).status
                == 0)
        #expect(try ifmeter(["usage", "--state", state, "--check"]).status == 3)
        // Under with room: 0.
        #expect(
            try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "\(today)", "--quota", "\(projected * 2)B", "--direction", "tx"])
                .status == 0)
        #expect(try ifmeter(["usage", "--state", state, "--check"]).status == 0)
    }
}
