import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Record in several namespaces at once, then replay what was recorded:
/// the trace must be one the replay takes, and its figures the bytes sent.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct RecordReplayScenarios {
    /// Finding 2 of the honest-workflows issue: links deleted in two
    /// namespaces a few milliseconds apart were written grouped by
    /// namespace, not in time order, and `replay` refused the trace
    /// ("t ... is earlier than the previous line's"). The namespace that
    /// sorts last loses its link first, so grouping by namespace puts the
    /// later event first.
    @Test func deletionsInTwoNamespacesAreWrittenInTimeOrderAndReplayExactly() throws {
        try Netns.requireRoot()
        let x = try TestNamespace(), y = try TestNamespace()
        let (first, last) = x.name < y.name ? (x, y) : (y, x)
        let dir = try ScenarioFolder("record-multi")
        let trace = dir["multi.jsonl"]
        let recorder = try Background(
            [try ifmeterBinary(), "record", "--netns", "\(x.name),\(y.name)", "--interval", "1s", "-o", trace], name: "record")
        _ = try waitFor("the first sample") {
            ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").contains(#""interfaces""#) ? true : nil
        }
        /// The trace's whole lines so far.
        func lines() -> [JSONValue] {
            let text = (try? String(contentsOfFile: trace, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        }
        func deletions(_ lines: [JSONValue]) -> Int { lines.filter { $0["event"]?.stringValue == "deleted" }.count }
        var sent: [String: UInt64] = [:]
        for round in 0..<3 {
            var fds: [(TestNamespace, Int32)] = []
            for ns in [first, last] {
                let fd = try ns.openTun("tunR")
                try ns.ip("link", "set", "tunR", "up")
                let packet = ipv4Packet(payload: 200 + round)
                for _ in 0..<10 { _ = write(fd, packet, packet.count) }
                sent[ns.name, default: 0] += UInt64(10 * packet.count)
                fds.append((ns, fd))
            }
            // The later namespace's link goes first, the earlier's 20 ms
            // after (a designed gap, well within one interval).
            close(fds[1].1)
            Thread.sleep(forTimeInterval: 0.02)
            close(fds[0].1)
            // The round's two deletions are in the trace before the next.
            _ = try waitFor("round \(round)'s deletions in the trace") { deletions(lines()) >= 2 * (round + 1) ? true : nil }
        }
        // A sample after the last deletion, as a recording goes on.
        _ = try waitFor("a sample after the deletions") { () -> Bool? in
            let all = lines()
            guard let deletion = all.lastIndex(where: { $0["event"]?.stringValue == "deleted" }),
                let sample = all.lastIndex(where: { $0["interfaces"] != nil })
            else { return nil }
            return sample > deletion ? true : nil
        }
        #expect(recorder.stop() == 0, "\(recorder.log)")
        let text = try String(contentsOfFile: trace, encoding: .utf8)
        var previous = -Double.infinity
        var deletions = 0
        for (n, line) in text.split(separator: "\n").enumerated() {
            let value = try JSONParser.parse(String(line))
            if value["event"]?.stringValue == "deleted" { deletions += 1 }
            guard let t = value["t"]?.doubleValue else { continue }
            #expect(t >= previous, "line \(n + 1): t \(t) after \(previous)")
            previous = t
        }
        #expect(deletions == 6, "\(text)")
        let replay = try ifmeter(["replay", trace])
        try #require(replay.status == 0, "\(replay.err)")
        let totals = try Scenario.reportTotals(replay.out)
        for ns in [x, y] {
            let tun = totals[ns.name + "/tunR"]
            #expect(tun?.rx == sent[ns.name] && tun?.quality == "exact", "\(ns.name): \(String(describing: tun)) for \(sent[ns.name] ?? 0)")
        }
    }
}
