import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 29, finding 8: every deletion forced a save (2 veth pairs a second
/// wrote 171 MiB an hour) and every deleted interface stayed in the state
/// file for ever. Deletion saves are now coalesced (one a minute after the
/// first), a deleted interface's row goes at the save that holds its final
/// traffic, and an idle one writes no usage row. This runs the churn for
/// `IFMETER_CHURN_SECONDS` (30 by default; docs/hardening.md has the
/// 10-minute figures) and checks the write rate, the rows, and that every
/// churned peer is exact.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ChurnWriteBudgetTests {
    /// Bytes the process passed to write(2) (its state file, WAL and log).
    func written(_ pid: Int32) throws -> Int {
        let io = try String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)
        for line in io.split(separator: "\n") where line.hasPrefix("wchar:") {
            return Int(line.split(separator: " ").last ?? "") ?? 0
        }
        throw TestFailure("no wchar in /proc/\(pid)/io")
    }

    @Test func twoVethPairsASecondStayWithinTheWriteBudget() throws {
        try Netns.requireRoot()
        let seconds = Double(ProcessInfo.processInfo.environment["IFMETER_CHURN_SECONDS"] ?? "") ?? 30
        let ns = try TestNamespace()
        // Idle peers: no IPv6 autoconfiguration traffic on them.
        try run(["ip", "netns", "exec", ns.name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-churn-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let port: UInt16 = 19321
        // Directly, not through ip netns exec: /proc/PID/io is ifmeter's.
        let serve = try Background(
            ["nsenter", "--net=/run/netns/\(ns.name)", try ifmeterBinary(), "serve", "--listen", "127.0.0.1:\(port)", "--state", state],
            name: "serve-churn")
        _ = try waitFor("serve") { serve.log.contains("listening") ? true : nil }
        let pid = serve.process.processIdentifier
        let before = try written(pid)
        let start = Date()
        var pairs = 0
        // Two pairs a second for `seconds`, counted in pairs, not in time:
        // on a busy machine the churn takes longer, its writes are scaled
        // by the time it took, and no pace is guessed.
        let target = Int(seconds * 2)
        while pairs < target {
            let a = "c\(pairs)", b = "d\(pairs)"
            try ns.ip("link", "add", a, "type", "veth", "peer", "name", b)
            // One end up, the other idle and never announced again (the
            // end whose peer the kernel never names: it was lower-bound).
            try ns.ip("link", "set", a, "up")
            Thread.sleep(forTimeInterval: 0.2)
            try ns.ip("link", "del", a)
            pairs += 1
            let next = start.addingTimeInterval(Double(pairs) * 0.5)
            let wait = next.timeIntervalSinceNow
            if wait > 0 { Thread.sleep(forTimeInterval: wait) }
        }
        let elapsed = Date().timeIntervalSince(start)
        let bytes = try written(pid) - before
        let perHour = Double(bytes) * 3600 / elapsed
        // The scrape before the stop: every churned interface still known
        // (within --series-lifetime) is exact.
        let exposition = try RawHTTP.request("/metrics", port: port, in: ns.name).text
        var churned = 0, inexact: [String] = []
        for line in exposition.split(separator: "\n") where line.hasPrefix("ifmeter_interface_quality{") && line.hasSuffix(" 1") {
            guard let name = line.split(separator: "interface=\"").dropFirst().first?.split(separator: "\"").first,
                name.hasPrefix("c") || name.hasPrefix("d")
            else { continue }
            churned += 1
            if !line.contains("quality=\"exact\"") { inexact.append(String(line)) }
        }
        #expect(serve.stop() == 0, "\(serve.log)")
        let rows = try run([
            "sqlite3", state,
            "SELECT (SELECT count(*) FROM interfaces) + (SELECT count(*) FROM usage_hours) + (SELECT count(*) FROM usage_five_minutes);",
        ]).out
        let rowCount = Int(rows.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        print(
            "churn: \(pairs) veth pairs in \(Int(elapsed)) s: \(bytes) B written (\(String(format: "%.2f", perHour / 1_048_576)) MiB/h), \(rowCount) rows, \(churned) churned interfaces seen, \(inexact.count) not exact"
        )
        #expect(perHour <= 5 * 1_048_576, "at most 5 MiB an hour: \(bytes) B in \(elapsed) s")
        #expect((0...300).contains(rowCount), "a few hundred rows at most: \(rowCount)")
        #expect(churned >= pairs, "the scrape knows the churned interfaces: \(churned) of \(2 * pairs)")
        #expect(inexact.isEmpty, "every idle churned peer is exact: \(inexact.prefix(5))")
    }
}
