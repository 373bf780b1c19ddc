import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--all-netns` while namespaces come and go under known traffic: each
/// one is read one last time however short its life, or its figures are
/// lower bounds; never exact while short.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ShortLivedNamespaceScenarios {
    static let payload = 1000
    static var frame: UInt64 { VethPair.frameBytes(payload: payload) }

    /// A short-lived namespace joined to `host` by a veth (`sc0` inside,
    /// `peer` in the host's), quiet (static neighbours), that sends 50
    /// datagrams of 1,000 bytes to the host and is removed `life` seconds
    /// after its traffic.
    static func live(_ ns: TestNamespace, host: TestNamespace, peer: String, subnet: Int, life: Double) throws {
        let inside = "10.91.\(subnet).1", outside = "10.91.\(subnet).2"
        try ns.ip(
            "link", "add", "sc0", "address", "02:00:00:91:\(String(format: "%02x", subnet)):01", "type", "veth",
            "peer", "name", peer, "address", "02:00:00:91:\(String(format: "%02x", subnet)):02", "netns", host.name)
        try ns.ip("addr", "add", inside + "/30", "dev", "sc0")
        try host.ip("addr", "add", outside + "/30", "dev", peer)
        try ns.ip("neigh", "add", outside, "lladdr", "02:00:00:91:\(String(format: "%02x", subnet)):02", "dev", "sc0", "nud", "permanent")
        try host.ip("neigh", "add", inside, "lladdr", "02:00:00:91:\(String(format: "%02x", subnet)):01", "dev", peer, "nud", "permanent")
        try ns.ip("link", "set", "sc0", "up")
        try host.ip("link", "set", peer, "up")
        _ = try waitFor("the carrier") { try ns.ip("-o", "link", "show", "dev", "sc0").contains("LOWER_UP") ? true : nil }
        try sendUDP(from: ns, to: outside, in: host, port: 9400, count: 50, payload: payload)
        Thread.sleep(forTimeInterval: life)
        ns.remove()
    }

    /// The deletions of NAME/sc0 in a trace written so far.
    static func deletions(of name: String, in trace: String) -> Int {
        let text = (try? String(contentsOfFile: trace, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { line in
            guard let event = try? JSONParser.parse(String(line)), event["event"]?.stringValue == "deleted" else { return false }
            return event["interface"]?["name"]?.stringValue == "sc0" && event["interface"]?["netns"]?.stringValue == name
        }.count
    }

    /// Finding 6 of the honest-workflows issue: with namespaces deleted
    /// about 0.3 s after their traffic, --all-netns counted 468,900 B of
    /// 521,000 sent and said exact; churned series were short by 17-48%,
    /// all exact. And finding 7: the veth ends left in the host namespace,
    /// whose peers went with their namespace, were lower bounds, though the
    /// docs/namespaces-and-events.md says both ends of a watched pair stay exact.
    @Test(arguments: [0.3, 1.0, 3.0])
    func namespacesThatLiveBrieflyAreCountedExactly(life: Double) throws {
        try Netns.requireRoot()
        let host = try TestNamespace()
        let dir = try ScenarioFolder("short-netns")
        let count = life < 1 ? 10 : life < 3 ? 4 : 2
        let exporter = try Scenario.start(
            host, "export", ["--all-netns", "--every", "500ms", "--json", dir["r.json"], "--include", "sc0,st*"])
        _ = try waitFor("export's first report") { FileManager.default.fileExists(atPath: dir["r.json"]) ? true : nil }
        var names: [String] = []
        for n in 0..<count {
            let ns = try TestNamespace()
            names.append(ns.name)
            try Self.live(ns, host: host, peer: "st\(n)", subnet: n, life: life)
        }
        // Every namespace's last reading in a report (the figures are
        // judged below, whether this came or not).
        let sent = 50 * Self.frame
        _ = try? waitFor("every namespace's bytes in the report") { () -> Bool? in
            let totals = try Scenario.reportTotals(try String(contentsOfFile: dir["r.json"], encoding: .utf8))
            return names.indices.allSatisfy { n in
                (totals[names[n] + "/sc0"]?.tx ?? 0) >= sent && (totals["st\(n)"]?.rx ?? 0) >= sent
            } ? true : nil
        }
        #expect(exporter.stop() == 0, "\(exporter.log)")
        let totals = try Scenario.reportTotals(try String(contentsOfFile: dir["r.json"], encoding: .utf8))
        for (n, name) in names.enumerated() {
            let inside = totals[name + "/sc0"], outside = totals["st\(n)"]
            #expect(inside?.tx == sent && inside?.quality == "exact", "\(name)/sc0, life \(life) s: \(String(describing: inside))")
            #expect(outside?.rx == sent && outside?.quality == "exact", "st\(n), life \(life) s: \(String(describing: outside))")
        }
        // ifmeter runs in `host` (ip netns exec), which /run/netns names too:
        // sampled once, as the own namespace, not twice.
        #expect(!totals.keys.contains { $0.hasPrefix(host.name + "/") }, "\(totals.keys.sorted())")
        let all = names.compactMap { totals[$0 + "/sc0"]?.tx }.reduce(0, +)
        #expect(all == UInt64(count) * sent, "\(all) of \(UInt64(count) * sent)")
    }

    /// One name made and removed 8 times, each instance living about half
    /// a second with 52,100 B sent: record --all-netns missed it entirely
    /// (0 of 416,800 B). Every instance is in the trace, and its replay
    /// counts all of them, exact.
    @Test func oneNameRecreatedEightTimesIsRecordedEachTime() throws {
        try Netns.requireRoot()
        let host = try TestNamespace()
        let dir = try ScenarioFolder("netns-recreated")
        let trace = dir["all.jsonl"]
        let recorder = try Scenario.start(host, "record", ["--all-netns", "-o", trace, "--include", "sc0,st*"])
        _ = try waitFor("the first sample") {
            ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").contains(#""interfaces""#) ? true : nil
        }
        let name = TestNamespace.uniqueName()
        for n in 0..<8 {
            let ns = try TestNamespace(named: name)
            try Self.live(ns, host: host, peer: "st\(n)", subnet: 20 + n, life: 0.4)
            Thread.sleep(forTimeInterval: 0.1)
        }
        // The eighth instance's deletion in the trace (the count is judged
        // below, in the replay, whether it came or not).
        _ = try? waitFor("8 deletions of \(name)/sc0 in the trace") {
            Self.deletions(of: name, in: trace) >= 8 ? true : nil
        }
        #expect(recorder.stop() == 0, "\(recorder.log)")
        let replay = try ifmeter(["replay", trace])
        try #require(replay.status == 0, "\(replay.err)")
        let totals = try Scenario.reportTotals(replay.out)
        let mine = totals[name + "/sc0"]
        #expect(mine?.tx == 8 * 50 * Self.frame && mine?.quality == "exact", "\(String(describing: mine))")
        let report = try JSONParser.parse(replay.out)
        guard case .array(let list)? = report["interfaces"],
            let entry = list.first(where: { $0["netns"]?.stringValue == name && $0["name"]?.stringValue == "sc0" })
        else {
            throw TestFailure("no \(name)/sc0 in the replay")
        }
        let events = (try String(contentsOfFile: trace, encoding: .utf8)).split(separator: "\n").filter { $0.contains("\"event\"") }
        #expect(entry["events"]?["deletions"]?.uint64Value == 8, "\(entry)\n\(events.joined(separator: "\n"))")
    }

    /// An instance that came and went before it could be entered (here a
    /// namespace file that was never mounted, as `ip netns add` leaves one
    /// for a moment): what it carried is unknown, so the series of its
    /// name become lower bounds, in the trace and in its replay.
    @Test func anInstanceThatCouldNotBeEnteredMakesItsNamespaceALowerBound() throws {
        try Netns.requireRoot()
        let host = try TestNamespace()
        let dir = try ScenarioFolder("netns-lost")
        let trace = dir["lost.jsonl"]
        let recorder = try Scenario.start(host, "record", ["--all-netns", "--interval", "300ms", "-o", trace, "--include", "sc0,st*"])
        _ = try waitFor("the first sample") {
            ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").contains(#""interfaces""#) ? true : nil
        }
        let name = TestNamespace.uniqueName()
        try Self.live(try TestNamespace(named: name), host: host, peer: "st0", subnet: 40, life: 0.4)
        // The instance's deletion recorded before the name comes back.
        _ = try waitFor("the deletion of \(name)/sc0 in the trace") { Self.deletions(of: name, in: trace) >= 1 ? true : nil }
        let fake = "/run/netns/" + name
        #expect(FileManager.default.createFile(atPath: fake, contents: nil))
        Thread.sleep(forTimeInterval: 0.05)
        try FileManager.default.removeItem(atPath: fake)
        // The loss in the trace (judged below, whether it came or not).
        let lost = #""event":"namespace-lost","netns":"\#(name)""#
        _ = try? waitFor("the namespace-lost event of \(name)") {
            ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").contains(lost) ? true : nil
        }
        #expect(recorder.stop() == 0, "\(recorder.log)")
        let text = try String(contentsOfFile: trace, encoding: .utf8)
        #expect(text.contains(lost), "\(text.suffix(1500))")
        let totals = try Scenario.reportTotals(try ifmeter(["replay", trace]).out)
        let sc0 = totals[name + "/sc0"]
        #expect(sc0?.tx == 50 * Self.frame && sc0?.quality == "lower-bound", "\(String(describing: sc0))")
        #expect(totals["st0"]?.quality == "exact", "the own namespace's end is not touched: \(totals)")
    }
}
