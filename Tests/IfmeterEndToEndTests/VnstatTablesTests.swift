import Foundation
import IfmeterCore
import IfmeterImage
import IfmeterTestSupport
import Testing

/// vnStat's tables against known traffic: five-minute rows, --oneline,
/// limits per period checked by --check, and the summary picture, all from
/// a state file export fills with datagrams sent in test namespaces.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct VnstatTablesTests {
    func periods(_ json: String, _ name: String) throws -> [JSONValue] {
        let table = try JSONParser.parse(json)
        guard case .array(let list)? = table["interfaces"], let mine = list.first(where: { $0["name"]?.stringValue == name }),
            case .array(let periods)? = mine["periods"]
        else { return [] }
        return periods
    }

    func sum(_ periods: [JSONValue], _ key: String) -> UInt64 { periods.reduce(0) { $0 + ($1[key]?.uint64Value ?? 0) } }

    /// `data-KEY="..."` of the element with `marker` in the summary SVG.
    func attributes(_ svg: String, _ marker: String) -> [[String: String]] {
        svg.components(separatedBy: "<g ").dropFirst().filter { $0.hasPrefix(marker) }.map { element in
            var found: [String: String] = [:]
            let head = element.prefix { $0 != ">" }
            for part in head.components(separatedBy: "\" ") {
                let kv = part.components(separatedBy: "=\"")
                if kv.count == 2, kv[0].hasPrefix("data-") { found[String(kv[0].dropFirst(5))] = kv[1].replacingOccurrences(of: "\"", with: "") }
            }
            return found
        }
    }

    @Test func fiveMinutesOnelineLimitsAndSummaryHoldTheBytesSent() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-tables-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let exporter = try Background(
            [
                "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "export", "--interval", "100ms", "--json", dir + "/r.json",
                "--every", "200ms", "--state", state,
                // Saves at this pace: its last save is stale two intervals
                // after it (the check below moves the save's time back).
                "--save-every", "200ms",
            ], name: "export")
        try ExportReport.waitForFirst(dir + "/r.json")
        try pair.sendUDP(count: 30, payload: 900)
        try ExportReport.waitForTotal(dir + "/r.json", "vA", atLeast: 30 * VethPair.frameBytes(payload: 900))
        #expect(exporter.stop() == 0)
        let sent = 30 * VethPair.frameBytes(payload: 900)

        // Five-minute rows: every byte once, on five-minute boundaries, schema 4.
        let five = try ifmeter(["usage", "--state", state, "--fiveminutes", "--format", "json", "--include", "vA"])
        #expect(five.status == 0, "\(five.err)")
        let slots = try periods(five.out, "vA")
        #expect(sum(slots, "tx_bytes") == sent, "the five-minute rows hold every byte sent: \(five.out.prefix(600))")
        #expect(!slots.isEmpty && slots.count <= 2)
        for s in slots {
            #expect(s["start"]?.stringValue?.range(of: #"T\d\d:[0-5][05]:00[+-]"#, options: .regularExpression) != nil, "\(s)")
            #expect(s["quality"]?.stringValue == "exact")
        }
        #expect(try JSONParser.parse(five.out)["schema_version"]?.uint64Value == 6)
        #expect(try JSONParser.parse(five.out)["granularity"]?.stringValue == "five-minutes")
        try five.out.write(toFile: dir + "/five.json", atomically: true, encoding: .utf8)
        let schema = try checkJSONSchema([dir + "/five.json"], schema: "ifmeter-usage.v6.schema.json")
        #expect(schema.ok, "\(schema.output)")
        let fiveText = try ifmeter(["usage", "--state", state, "--fiveminutes", "--include", "vA"])
        #expect(fiveText.out.contains("5 MINUTES") && fiveText.out.contains("kept 48 hours"), "\(fiveText.out)")
        let fiveCSV = try ifmeter(["usage", "--state", state, "--fiveminutes", "--format", "csv", "--include", "vA"])
        #expect(fiveCSV.out.split(separator: "\n").dropFirst().allSatisfy { $0.contains(",five-minutes,") }, "\(fiveCSV.out)")
        // The daily JSON of v3 is unchanged.
        let daily = try ifmeter(["usage", "--state", state, "--format", "json", "--include", "vA"])
        #expect(try JSONParser.parse(daily.out)["schema_version"]?.uint64Value == 6)

        // --oneline: 18 fields, all time's tx is every byte sent, exact.
        let one = try ifmeter(["usage", "--state", state, "--oneline", "--include", "vA"])
        #expect(one.status == 0, "\(one.err)")
        let fields = one.out.trimmingCharacters(in: .newlines).components(separatedBy: ";")
        #expect(fields.count == 18 && fields[0] == "1" && fields[1] == "vA", "\(one.out)")
        if fields.count == 18 {
            #expect(UInt64(fields[15]) == sent && fields[17] == "exact", "\(one.out)")
            #expect(fields[3] == (try periods(daily.out, "vA").last?["period"]?.stringValue), "today")
            #expect(UInt64(fields[5]) == (try periods(daily.out, "vA").last?["tx_bytes"]?.uint64Value))
        }

        // Limits per period: over (3), then under as of a stale save (4).
        let set = try ifmeter(["plan", "set", "vA", "--state", state, "--limit", "day=\(sent - 1)B", "--limit", "hour=1GiB", "--direction", "tx"])
        #expect(set.status == 0 && set.out.contains("limits hour 1.00 GiB"), "\(set)")
        let list = try ifmeter(["plan", "list", "--state", state])
        #expect(list.out.contains("LIMITS") && list.out.contains("day "), "\(list.out)")
        var check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 3 && check.out.contains("OVER vA day limit"), "\(check)")
        _ = try ifmeter(["plan", "set", "vA", "--state", state, "--limit", "day=1GiB", "--limit", "hour=512MiB", "--direction", "tx"])
        // The save made stale by moving its time back 10 s (50 save
        // intervals), not by hoping enough time passed since the stop.
        try run(["sqlite3", state, "UPDATE meta SET value = CAST(value AS REAL) - 10 WHERE key IN ('saved', 'stopped')"])
        check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 4 && check.out.contains("UNKNOWN vA day limit"), "stale, so not provably under: \(check)")
        let bad = try ifmeter(["plan", "set", "vA", "--state", state, "--limit", "week=1GB"])
        #expect(bad.status == 64 && bad.err.hasPrefix("Error: "), "\(bad)")

        // The summary picture: its numbers are the JSON's.
        let svg = dir + "/summary.svg"
        let drawn = try ifmeter(["usage", "--state", state, "--svg", svg, "--summary", "--include", "vA"])
        #expect(drawn.status == 0, "\(drawn.err)")
        let text = try String(contentsOfFile: svg, encoding: .utf8)
        let figures = Dictionary(uniqueKeysWithValues: attributes(text, "class=\"figure\"").map { ($0["period"] ?? "?", $0) })
        let today = try periods(daily.out, "vA").last
        #expect(figures["today"]?["tx"] == today?["tx_bytes"]?.uint64Value.map(String.init), "\(figures)")
        #expect(figures["all"]?["tx"] == String(sent))
        let cycle = try periods(try ifmeter(["usage", "--state", state, "--cycle", "--format", "json", "--include", "vA"]).out, "vA").last
        #expect(figures["cycle"]?["tx"] == cycle?["tx_bytes"]?.uint64Value.map(String.init))
        let hours = attributes(text, "class=\"hour\"")
        #expect(hours.count == 24)
        let hourly = try periods(try ifmeter(["usage", "--state", state, "--hourly", "--format", "json", "--include", "vA"]).out, "vA")
        for h in hourly {
            let drawnHour = hours.first { $0["start"] == h["start"]?.stringValue }
            #expect(drawnHour?["tx"] == h["tx_bytes"]?.uint64Value.map(String.init), "hour \(h)")
        }
        #expect(hours.compactMap { UInt64($0["tx"] ?? "") }.reduce(0, +) == sent)
        #expect(try run(["xmllint", "--noout", svg], allowFailure: true).status == 0)
        // The plan's day and hour limits: the share used, and their lines.
        #expect(figures["today"]?["limit"] == "1073741824" && figures["today"]?["limit-kind"] == "day", "\(figures)")
        let percent = Double(sent) / 1_073_741_824 * 100
        #expect(figures["today"]?["percent"] == String(format: "%.1f", percent), "\(figures)")
        #expect(figures["cycle"]?["percent"] == nil, "no quota, no month limit: no share of one")
        let limits = attributes(text, "class=\"limit\"")
        #expect(limits.count == 1 && limits.first?["period"] == "hour" && limits.first?["limit"] == "536870912", "\(limits)")
        #expect(limits.first?["above-scale"] == "true", "512 MiB is said above the bars, not drawn flattening them")
        #expect(hours.compactMap { Double($0["percent"] ?? "") }.count == 24, "every hour's share of the hour limit")
        // As of the last save (moved back 10 s above), not of the drawing.
        let saved = try run(["sqlite3", state, "SELECT value FROM meta WHERE key = 'saved'"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        let savedAt = Int64(try #require(Double(saved)).rounded(.down))
        #expect(text.contains("data-as-of=\"\(LocalZone.system.rfc3339(savedAt))\""), "as of \(saved)")
        let height = try #require(text.firstMatch(of: /height="(\d+)"/).flatMap { Int($0.1) })
        #expect(height <= 58 + 260, "one interface's summary is compact: \(height) px")

        // The same pictures as PNG: the figures they carry are the JSON's.
        let png = dir + "/summary.png"
        let both = try ifmeter(["usage", "--state", state, "--png", png, "--svg", dir + "/again.svg", "--summary", "--include", "vA"])
        #expect(both.status == 0, "\(both.err)")
        let summaryFigures = try JSONParser.parse(
            try #require(try PNGChunks.text(UsagePNG.figuresKey, in: Array(try Data(contentsOf: URL(fileURLWithPath: png))))))
        #expect(try run(["file", png]).out.contains("PNG image data, 500 x 262"), "vnstati's size for one interface")
        guard case .array(let pictured)? = summaryFigures["interfaces"], let vA = pictured.first, case .array(let shown)? = vA["figures"],
            case .array(let shownHours)? = vA["hours"]
        else { throw TestFailure("no figures in \(png)") }
        let byPeriod = Dictionary(uniqueKeysWithValues: shown.map { ($0["period"]?.stringValue ?? "?", $0) })
        #expect(byPeriod["today"]?["tx_bytes"] == today?["tx_bytes"] && byPeriod["today"]?["rx_bytes"] == today?["rx_bytes"])
        #expect(byPeriod["today"]?["start"] == today?["start"] && byPeriod["today"]?["quality"] == today?["quality"])
        #expect(byPeriod["cycle"]?["tx_bytes"] == cycle?["tx_bytes"] && byPeriod["all"]?["tx_bytes"]?.uint64Value == sent)
        #expect(byPeriod["today"]?["percent_used"]?.doubleValue == (percent * 10).rounded() / 10)
        #expect(summaryFigures["as_of"]?.stringValue == LocalZone.system.rfc3339(savedAt))
        for h in hourly {
            let drawnHour = shownHours.first { $0["start"] == h["start"] }
            #expect(drawnHour?["tx_bytes"] == h["tx_bytes"] && drawnHour?["rx_bytes"] == h["rx_bytes"], "hour \(h)")
        }
        // Without libcairo.so.2 (hidden under /dev/null in a mount namespace
        // of its own), --png is one clear error and writes nothing: cairo is
        // loaded on the first picture, not linked, so usage itself ran.
        let hide = #"mount --bind /dev/null "$(ldconfig -p | sed -n 's/.*libcairo\.so\.2 (.*) => //p' | head -n 1)" && exec "$0" "$@""#
        let none = dir + "/none.png"
        let hidden = try run(
            ["unshare", "--mount", "sh", "-c", hide, try ifmeterBinary(), "usage", "--state", state, "--png", none, "--summary"],
            allowFailure: true)
        #expect(hidden.status == 1, "\(hidden.out)\(hidden.err)")
        #expect(hidden.err.hasPrefix("Error: cannot draw the PNG: libcairo.so.2 could not be loaded ("), "\(hidden.err)")
        #expect(hidden.err.hasSuffix("). Hint: apt-get install libcairo2\n"), "\(hidden.err)")
        #expect(!FileManager.default.fileExists(atPath: none))

        // Each period chart: its bars are the rows `--format json` prints
        // for the same options.
        for view in [["--hourly"], ["--fiveminutes"], [], ["--cycle"], ["--monthly"]] {
            let chart = dir + "/chart.png"
            let drawnChart = try ifmeter(["usage", "--state", state, "--png", chart, "--format", "json", "--include", "vA"] + view)
            #expect(drawnChart.status == 0, "\(view): \(drawnChart.err)")
            let rows = try periods(drawnChart.out, "vA")
            let carried = try JSONParser.parse(
                try #require(try PNGChunks.text(UsagePNG.figuresKey, in: Array(try Data(contentsOf: URL(fileURLWithPath: chart))))))
            guard case .array(let list)? = carried["interfaces"], case .array(let bars)? = list.first?["periods"] else {
                throw TestFailure("no bars for \(view)")
            }
            #expect(!bars.isEmpty && bars.count == rows.count, "\(view)")
            for (row, bar) in zip(rows, bars) {
                for key in ["period", "start", "rx_bytes", "tx_bytes", "quality"] { #expect(bar[key] == row[key], "\(view) \(key)") }
            }
        }
        let shot = try run(
            [
                "chromium", "--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir=\(dir)/chromium", "--screenshot=/tmp/ifmtab-summary.png",
                "--window-size=900,388", "file://" + svg,
            ], allowFailure: true)
        #expect(shot.status == 0, "chromium: \(shot.err)")
    }
}
