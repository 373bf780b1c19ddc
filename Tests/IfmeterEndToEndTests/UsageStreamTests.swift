import Foundation
import IfmeterCore
import IfmeterStore
import IfmeterTestSupport
import Testing

/// Issue 31: `usage` in bounded memory. Its tables are now written one
/// interface at a time (`--hourly` a chunk of 1,024 hours at a time) and,
/// with current day rows, from those rather than the hours. Each case here
/// prints the same table three ways and expects the same bytes: streamed
/// from day rows, drawn with `--svg` (which builds the whole table at once,
/// as every table was built before), and streamed from a copy whose day
/// rows sqlite3 made stale (read from its hours).
@Suite(.blocking) struct UsageStreamTests {
    /// Three interfaces (one in another namespace) with 3,000 hours each,
    /// ending now, saved by a store in the system's zone (as a writer
    /// saves); some hours lower bounds, one interface planned.
    func state(_ folder: ScenarioFolder) throws -> String {
        let path = folder["state.db"]
        let now = Int64(Date().timeIntervalSince1970)
        let zone = LocalZone.system
        do {
            let store = try StateStore(path: path, host: "h", bootID: "b", now: Double(now))
            var usage: [SeriesKey: UsageEntry] = [:]
            for (n, key) in [SeriesKey(name: "eth0"), SeriesKey(netns: "ns1", name: "wg0"), SeriesKey(name: "wlan0")].enumerated() {
                var hours: [HourUsage] = []
                var start = zone.hourStart(now - 2999 * 3600)
                var i: UInt64 = 0
                while start <= now {
                    hours.append(
                        HourUsage(
                            start: start,
                            counters: Counters(rxBytes: i * 7919 % 100_000_000, txBytes: i * 104_729 % 5_000_000, rxPackets: i, txPackets: 1),
                            quality: i % 701 == UInt64(n) ? .lowerBound : .exact))
                    start = zone.nextHour(start)
                    i += 1
                }
                usage[key] = UsageEntry(kind: n == 2 ? .wifi : n == 1 ? .tunnel : .ethernet, counters: .zero, quality: .exact, hours: hours)
            }
            try store.save([], usage: usage, wallTime: Double(now))
            try store.setPlan(Plan(pattern: "eth0", cycleStartDay: 5, quotaBytes: 1_000_000_000, direction: .both))
        }
        return path
    }

    @Test func everyTableIsTheSameStreamedDrawnAndFromHours() throws {
        let folder = try ScenarioFolder("usage-stream")
        let path = try state(folder)
        let stale = folder["stale.db"]
        try FileManager.default.copyItem(atPath: path, toPath: stale)
        try run(["sqlite3", stale, "UPDATE usage_hours SET rx_bytes = rx_bytes WHERE rowid = 1"])
        let midnight = String(PeriodCalendar(zone: .system).period(.day, containing: Int64(Date().timeIntervalSince1970)).start)
        #expect(try run(["sqlite3", stale, "SELECT value FROM meta WHERE key = 'days_through'"]).out == "", "an hour changed: not current")
        #expect(
            try run(["sqlite3", path, "SELECT value FROM meta WHERE key = 'days_through'"]).out == midnight + "\n", "the days before today summed")
        let cases: [[String]] = [
            [], ["--monthly"], ["--yearly"], ["--cycle"], ["--top", "5"], ["--hourly"], ["--limit", "3"], ["--hourly", "--limit", "30"],
            ["--begin", "2026-11-01T05:00", "--end", "2026-11-20"], ["--hourly", "--begin", "2026-11-01T05:00"], ["--kind", "wifi"],
            ["--netns", "ns1", "--hourly"], ["--include", "nothing"], ["--end", "2001-01-01"], ["--fiveminutes"],
        ]
        // One instant for every table (tables of the current period change
        // with each second).
        let at = ["env", "IFMETER_USAGE_NOW=\(Date().timeIntervalSince1970)", try ifmeterBinary()]
        for arguments in cases {
            for format in ["text", "json", "csv"] {
                let base = at + ["usage", "--state", path, "--format", format] + arguments
                let streamed = try run(base, allowFailure: true)
                let drawn = try run(base + ["--svg", folder["chart.svg"]], allowFailure: true)
                let fromHours = try run(at + ["usage", "--state", stale, "--format", format] + arguments, allowFailure: true)
                let what = "\(arguments.joined(separator: " ")) \(format)"
                #expect(streamed.status == 0 && drawn.status == 0 && fromHours.status == 0, "\(what): \(streamed.err)\(fromHours.err)")
                // More than 1,024 hours of an interface are streamed in parts,
                // their columns as wide as any figure can be.
                func spaced(_ text: String) -> String {
                    arguments.contains("--hourly") && format == "text"
                        ? text.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") : text
                }
                #expect(spaced(streamed.out) == spaced(drawn.out), "\(what): streamed and drawn differ")
                // The same figures; only the file's name differs.
                func figures(_ text: String, _ file: String) -> [String] {
                    text.replacingOccurrences(of: file, with: "FILE").split(separator: "\n").map(String.init)
                        .filter { !$0.contains("Last saved") }
                }
                #expect(figures(streamed.out, path) == figures(fromHours.out, stale), "\(what): day rows and hours differ")
                #expect(streamed.out.count > 100, "\(what): \(streamed.out)")
            }
        }
    }

    @Test func aCorruptHourIsRefusedBeforeALineIsWritten() throws {
        let folder = try ScenarioFolder("usage-stream-corrupt")
        let path = try state(folder)
        try run(["sqlite3", path, "UPDATE usage_hours SET tx_bytes = -1 WHERE rowid = 2500"])
        for arguments in [["--hourly"], [], ["--hourly", "--format", "json"]] {
            let result = try ifmeter(["usage", "--state", path] + arguments)
            #expect(result.status == 65 && result.out.isEmpty, "\(arguments): \(result.out.prefix(200))")
            #expect(result.err.contains("tx_bytes is -1"), "\(result.err)")
        }
    }
}
