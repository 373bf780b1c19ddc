import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// Usage periods, plans, quota checks and charts from a state file that
/// export fills with traffic sent in test namespaces.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct UsagePlanTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-usage-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func export(_ ns: TestNamespace, _ arguments: [String]) throws -> Background {
        try Background(["ip", "netns", "exec", ns.name, try ifmeterBinary(), "export", "--interval", "100ms"] + arguments, name: "export")
    }

    /// The periods of `name` in a usage JSON table.
    func periods(_ json: String, _ name: String) throws -> [JSONValue] {
        let table = try JSONParser.parse(json)
        guard case .array(let list)? = table["interfaces"],
            let mine = list.first(where: { $0["name"]?.stringValue == name }),
            case .array(let periods)? = mine["periods"]
        else { return [] }
        return periods
    }

    func sum(_ periods: [JSONValue], _ key: String) -> UInt64 {
        periods.reduce(0) { $0 + ($1[key]?.uint64Value ?? 0) }
    }

    @Test func trafficLandsByteExactInHoursDaysAndCyclesAndChecksSayOverUnderUnknown() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let bootFile = dir + "/boot_id"
        try "boot-one\n".write(toFile: bootFile, atomically: true, encoding: .utf8)
        // Saved every 200 ms (export's pace is no longer its period's): the
        // staleness below is two save intervals.
        let arguments = ["--json", dir + "/r.json", "--every", "200ms", "--state", state, "--boot-id-file", bootFile, "--save-every", "200ms"]
        let frame = VethPair.frameBytes(payload: 700)

        var exporter = try export(pair.a, arguments)
        // Sent once the baseline is taken, and counted before anything is read.
        try ExportReport.waitForFirst(dir + "/r.json")
        try pair.sendUDP(count: 40, payload: 700)
        try ExportReport.waitForTotal(dir + "/r.json", "vA", atLeast: 40 * frame)
        // A state file in use by export: the plan is set beside its saves
        // (issue 31), and nothing export counted is lost (below).
        let busy = try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "1"])
        #expect(busy.status == 0 && busy.err.isEmpty, "\(busy)")
        let listed = try ifmeter(["plan", "list", "--state", state])
        #expect(listed.status == 0 && listed.out.contains("vA"), "\(listed)")
        #expect(exporter.stop() == 0)
        let sent = 40 * frame

        let hourly = try ifmeter(["usage", "--state", state, "--hourly", "--format", "json", "--include", "vA"])
        #expect(hourly.status == 0, "\(hourly.err)")
        let hours = try periods(hourly.out, "vA")
        #expect(sum(hours, "tx_bytes") == sent, "the hours hold every byte sent, once")
        #expect(hours.count >= 1 && hours.count <= 2)
        for h in hours {
            #expect(h["start"]?.stringValue?.range(of: #"^\d{4}-\d\d-\d\dT\d\d:00:00[+-]\d\d:\d\d$"#, options: .regularExpression) != nil)
            #expect(h["quality"]?.stringValue == "exact")
        }
        let daily = try ifmeter(["usage", "--state", state, "--format", "json", "--include", "vA"])
        #expect(sum(try periods(daily.out, "vA"), "tx_bytes") == sent)
        let csv = try ifmeter(["usage", "--state", state, "--daily", "--format", "csv", "--include", "vA"])
        let csvLines = csv.out.split(separator: "\n")
        #expect(csvLines.first?.hasPrefix("interface,netns,kind,granularity,period,start,end,rx_bytes,tx_bytes") == true)
        #expect(csvLines.dropFirst().map { UInt64($0.split(separator: ",", omittingEmptySubsequences: false)[8]) ?? 0 }.reduce(0, +) == sent)

        // A plan whose quota the traffic is over, then under.
        let over = try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "31", "--quota", "\(sent - 1)B", "--direction", "tx"])
        #expect(over.status == 0, "\(over.err)")
        var check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 3 && check.out.contains("OVER vA"), "\(check)")
        let cycle = try ifmeter(["usage", "--state", state, "--cycle", "--format", "json", "--include", "vA"])
        let current = try periods(cycle.out, "vA").last
        #expect(current?["plan"]?["used_bytes"]?.uint64Value == sent)
        #expect(current?["plan"]?["cycle_start_day"]?.uint64Value == 31)
        #expect(current?["plan"]?["over"] == .bool(true))
        #expect(current?["plan"]?["projection"]?["estimate"] == .bool(true))
        #expect(current?["tx_bytes"]?.uint64Value == sent)
        try cycle.out.write(toFile: dir + "/cycle.json", atomically: true, encoding: .utf8)
        let schema = try checkJSONSchema([dir + "/cycle.json"], schema: "ifmeter-usage.v6.schema.json")
        #expect(schema.ok, "\(schema.output)")

        _ = try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "31", "--quota", "1GiB", "--direction", "tx"])
        // Under the quota as of the last save; but once export stopped more
        // than two save intervals (200 ms) ago, nothing says it is under now.
        // The file's clock is moved, not the test's: its last save and stop
        // are put 10 s back.
        try run(["sqlite3", state, "UPDATE meta SET value = CAST(value AS REAL) - 10 WHERE key IN ('saved', 'stopped')"])
        check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 4 && check.out.contains("UNKNOWN vA") && check.out.contains("as of the last save"), "\(check)")

        // Across a reboot the totals and the new traffic are lower bounds:
        // under the quota cannot be proven (4); over it is certain (3).
        try "boot-two\n".write(toFile: bootFile, atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: dir + "/r.json")
        exporter = try export(pair.a, arguments)
        try ExportReport.waitForFirst(dir + "/r.json")
        try pair.sendUDP(count: 10, payload: 700)
        // The restored totals (sent, a lower bound now) and the new frames.
        try ExportReport.waitForTotal(dir + "/r.json", "vA", atLeast: sent + 10 * frame)
        #expect(exporter.stop() == 0)
        check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 4 && check.out.contains("UNKNOWN vA"), "\(check)")
        _ = try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "31", "--quota", "\(sent)B", "--direction", "tx"])
        check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 3, "a lower bound over the quota is over for certain: \(check)")
        let after = try periods(try ifmeter(["usage", "--state", state, "--cycle", "--format", "json", "--include", "vA"]).out, "vA")
        // (The boot is forged and the counters went on, so the engine, which
        // takes a new boot's counters as counted since that boot, counts more.)
        #expect((after.last?["plan"]?["used_bytes"]?.uint64Value ?? 0) >= sent + 10 * frame)
        #expect(after.last?["quality"]?.stringValue == "lower-bound")

        // The chart: well-formed, and drawn by a real browser.
        let svg = dir + "/usage.svg"
        let drawn = try ifmeter(["usage", "--state", state, "--cycle", "--svg", svg, "--include", "vA"])
        #expect(drawn.status == 0, "\(drawn.err)")
        let text = try String(contentsOfFile: svg, encoding: .utf8)
        #expect(text.contains("estimates") && text.contains("quota") && text.contains("≥"))
        let lint = try run(["xmllint", "--noout", svg], allowFailure: true)
        #expect(lint.status == 0, "xmllint: \(lint.err)")
        try expectRendered(svg, in: dir)
    }

    /// Renders an SVG with headless Chromium and checks the screenshot is a
    /// 900x500 PNG that is not blank: many colours, the rx blue among them.
    func expectRendered(_ svg: String, in dir: String) throws {
        let png = dir + "/shot.png"
        let shot = try run(
            [
                "chromium", "--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir=\(dir)/chromium", "--screenshot=\(png)",
                "--window-size=900,500", "file://" + svg,
            ], allowFailure: true)
        #expect(shot.status == 0, "chromium: \(shot.err)")
        let stats = try run(["python3", "-c", Self.pngStats, png], allowFailure: true)
        #expect(stats.status == 0, "\(stats.err)")
        let f = stats.out.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(f.count == 5, "\(stats.out)")
        guard f.count == 5 else { return }
        #expect(f[0] == 900 && f[1] == 500, "the screenshot's size")
        #expect(f[2] > 20, "not blank: \(f[2]) colours")
        #expect(f[3] >= 100, "the legend's rx blue: \(f[3]) pixels")
        #expect(f[4] > 2000, "the tx bars (vA only sends): \(f[4]) orange pixels")
    }

    /// Prints width, height, distinct colours, rx-blue and tx-orange pixel
    /// counts of an 8-bit RGB(A) PNG (plain Python: zlib and the filters).
    static let pngStats = #"""
        import sys, zlib, struct
        data = open(sys.argv[1], 'rb').read()
        assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
        pos, idat = 8, b''
        while pos < len(data):
            n, = struct.unpack('>I', data[pos:pos + 4]); kind = data[pos + 4:pos + 8]; body = data[pos + 8:pos + 8 + n]; pos += 12 + n
            if kind == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
            elif kind == b'IDAT': idat += body
        assert depth == 8 and ctype in (2, 6), (depth, ctype)
        raw = zlib.decompress(idat); bpp = 3 if ctype == 2 else 4; stride = w * bpp
        prev = bytearray(stride); i = 0; colours = set(); blue = orange = 0
        for y in range(h):
            f = raw[i]; i += 1; line = bytearray(raw[i:i + stride]); i += stride
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0; b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
                if f == 1: line[x] = (line[x] + a) & 255
                elif f == 2: line[x] = (line[x] + b) & 255
                elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
                elif f == 4:
                    p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            for x in range(0, stride, bpp):
                px = bytes(line[x:x + 3]); colours.add(px)
                if abs(px[0] - 0x3b) < 8 and abs(px[1] - 0x7d) < 8 and abs(px[2] - 0xd8) < 8: blue += 1
                if abs(px[0] - 0xf2) < 8 and abs(px[1] - 0x8e) < 8 and abs(px[2] - 0x2b) < 8: orange += 1
            prev = line
        print(w, h, len(colours), blue, orange)
        """#

    /// `count` datagrams out of vA, saved by export into `dir`/state.db;
    /// returns the bytes vA sent.
    func saveTraffic(_ pair: VethPair, in dir: String, count: Int, payload: Int) throws -> UInt64 {
        try? FileManager.default.removeItem(atPath: dir + "/r.json")
        let exporter = try export(pair.a, ["--json", dir + "/r.json", "--every", "200ms", "--state", dir + "/state.db"])
        try ExportReport.waitForFirst(dir + "/r.json")
        let before = ExportReport.read(dir + "/r.json").map { ExportReport.total($0, "vA", "tx_bytes") } ?? 0
        try pair.sendUDP(count: count, payload: payload)
        let sent = UInt64(count) * VethPair.frameBytes(payload: payload)
        try ExportReport.waitForTotal(dir + "/r.json", "vA", atLeast: before + sent)
        #expect(exporter.stop() == 0)
        return sent
    }

    @Test func serveExposesEachPlansQuotaUseAndCycle() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let sent = try saveTraffic(pair, in: dir, count: 25, payload: 300)
        #expect(try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "7", "--quota", "5GB", "--direction", "tx"]).status == 0)

        let server = try Background(
            ["ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "serve", "--interval", "200ms", "--state", state], name: "serve")
        defer { server.stop() }
        let text = try waitFor("serve to show the plan") { () -> String? in
            try server.requireRunning()
            guard let r = try? RawHTTP.request("/metrics", port: 9874, in: pair.a.name), r.text.contains("ifmeter_plan_used_bytes{") else {
                return nil
            }
            return r.text
        }
        let labels = #"{direction="tx",interface="vA",kind="virtual"}"#
        #expect(text.contains("ifmeter_plan_quota_bytes\(labels) 5000000000"))
        #expect(text.contains("ifmeter_plan_used_bytes\(labels) \(sent)"), "the cycle's use, byte-exact")
        #expect(text.contains("ifmeter_plan_used_lower_bound\(labels) 0"))
        let start = text.split(separator: "\n").first { $0.hasPrefix("ifmeter_plan_cycle_start_timestamp_seconds\(labels) ") }
        let startValue = start.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        #expect(startValue > 0 && startValue <= Date().timeIntervalSince1970 && Date().timeIntervalSince1970 - startValue < 32 * 86400)
        let promtool = try run(["promtool", "check", "metrics"], input: text, allowFailure: true)
        #expect(promtool.status == 0, "promtool: \(promtool.out)\(promtool.err)")
        let om = try RawHTTP.request("/metrics", port: 9874, in: pair.a.name, headers: ["Accept": "application/openmetrics-text;version=1.0.0"])
        let parser = """
            import sys
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
            names = [f.name for f in text_string_to_metric_families(sys.stdin.read())]
            print(" ".join(n for n in names if n.startswith("ifmeter_plan")))
            """
        let parsed = try run(["/usr/bin/python3", "-c", parser], input: om.text, allowFailure: true)
        #expect(parsed.status == 0, "OpenMetrics parser: \(parsed.err)")
        #expect(parsed.out.contains("ifmeter_plan_quota_bytes") && parsed.out.contains("ifmeter_plan_cycle_start_timestamp_seconds"))
        #expect(server.stop() == 0)
    }

    /// The live view's quota bar in a real terminal (tmux): a plan whose
    /// quota the saved traffic went over.
    @Test func liveDrawsTheQuotaBarInATerminal() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let sent = try saveTraffic(pair, in: dir, count: 100, payload: 1000)
        #expect(try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "1", "--quota", "50KB", "--direction", "tx"]).status == 0)

        let tmux = try LiveTerminalTests.Tmux(width: 120, height: 30)
        try tmux.keys("ip netns exec \(pair.a.name) \(try ifmeterBinary()) live --state \(state) --interval 300ms; echo EXITED $?", "Enter")
        let screen = try tmux.waitFor("quota vA")
        let line = screen.split(separator: "\n").first { $0.hasPrefix("quota vA") }.map(String.init) ?? ""
        let percent = Units.fixed(Double(sent) / 50_000 * 100, 1)
        #expect(line.contains("] \(percent)% of \(Units.bytes(UInt64(50_000))) tx OVER"), "the saved use against the quota: \(line)")
        #expect(line.contains("█") && !line.contains("░"), "a full bar: \(line)")
        #expect(line.contains("cycle ends "), "\(line)")
        try tmux.keys("q")
        _ = try tmux.waitFor("EXITED 0")
    }

    /// Issue 31 in a real terminal (tmux), while live writes the state file
    /// at its default save pace: an alias set shows beside the name, and a
    /// small quota set and then crossed by traffic shows on the quota bar
    /// before any save (the bar follows the samples, not the file).
    @Test func liveFollowsAnAliasAndAQuotaCrossedUnderTraffic() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        _ = try saveTraffic(pair, in: dir, count: 10, payload: 1000)
        let tmux = try LiveTerminalTests.Tmux(width: 120, height: 30)
        try tmux.keys("ip netns exec \(pair.a.name) \(try ifmeterBinary()) live --state \(state) --interval 300ms; echo EXITED $?", "Enter")
        _ = try tmux.waitFor("vA")
        let alias = try ifmeter(["state", "alias", "vA", "uplink", "--state", state])
        #expect(alias.status == 0, "\(alias)")
        var screen = try tmux.waitFor("vA [uplink]")
        #expect(screen.split(separator: "\n").filter { $0.contains("[uplink]") }.count == 1, "only vA's row: \(screen)")
        // This cycle's use so far (the saved traffic) plus 20 KB more.
        let used = try waitFor("vA's cycle use") { () throws -> UInt64? in
            let usage = try ifmeter(["usage", "--state", state, "--cycle", "--format", "json", "--include", "vA"])
            guard case .array(let interfaces)? = try JSONParser.parse(usage.out)["interfaces"],
                case .array(let periods)? = interfaces.first?["periods"]
            else { return nil }
            return periods.last?["tx_bytes"]?.uint64Value
        }
        let quota = used + 20_000
        let plan = try ifmeter(["plan", "set", "vA", "--state", state, "--cycle-start", "1", "--quota", "\(quota)B", "--direction", "tx"])
        #expect(plan.status == 0, "\(plan.err)")
        screen = try tmux.waitFor("quota vA")
        #expect(!(screen.split(separator: "\n").first { $0.hasPrefix("quota vA") } ?? "").contains("OVER"), "\(screen)")
        let saved = { try run(["sqlite3", state, "SELECT value FROM meta WHERE key = 'saved'"]).out }
        let before = try saved()
        try pair.sendUDP(count: 30, payload: 1000)
        screen = try tmux.waitFor("OVER")
        let line = screen.split(separator: "\n").first { $0.hasPrefix("quota vA") }.map(String.init) ?? ""
        #expect(line.contains("tx OVER"), "\(line)")
        #expect(try saved() == before, "crossed on the bar before any save")
        try tmux.keys("q")
        _ = try tmux.waitFor("EXITED 0")
    }

    @Test func badPlansAreRefusedWithNothingChanged() throws {
        try Netns.requireRoot()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let first = try ifmeter(["plan", "set", "eth*", "--state", state, "--cycle-start", "15", "--quota", "20GB"])
        #expect(first.status == 0, "\(first.err)")
        #expect(first.err.contains("warning") && first.err.contains("matches no interface"), "a warning for a glob that matches nothing")
        let before = try ifmeter(["plan", "list", "--state", state, "--format", "json"]).out
        #expect(before.contains("20000000000") && before.contains("\"cycle_start_day\": 15"))
        for bad in [
            ["--cycle-start", "32"], ["--cycle-start", "0"], ["--cycle-start", "x"], ["--cycle-start", "3", "--quota", "20XB"],
            ["--cycle-start", "3", "--quota", "-5GB"], ["--cycle-start", "3", "--direction", "up"], ["--quota", "1GB"],
        ] {
            let r = try ifmeter(["plan", "set", "eth*", "--state", state] + bad)
            #expect(r.status == 64, "\(bad): \(r)")
            #expect(r.err.hasPrefix("Error: ") && r.err.split(separator: "\n").count == 1, "\(bad): \(r.err)")
        }
        #expect(try ifmeter(["plan", "list", "--state", state, "--format", "json"]).out == before, "nothing changed")
        #expect(try ifmeter(["plan", "remove", "nope", "--state", state]).status == 64)
        #expect(try ifmeter(["plan", "remove", "eth*", "--state", state]).status == 0)
        #expect(try ifmeter(["plan", "list", "--state", state]).out.contains("No plans"))
        // GiB is binary.
        _ = try ifmeter(["plan", "set", "wlan0", "--state", state, "--cycle-start", "1", "--quota", "20GiB"])
        #expect(try ifmeter(["plan", "list", "--state", state, "--format", "json"]).out.contains("21474836480"))
    }
}

/// Usage and plan options checked before any file is opened, and the
/// default state file (no root needed).
@Suite(.blocking) struct UsageOptionTests {
    @Test func usageRejectsBitsAndConflictingPeriods() throws {
        for bad in [["--bits"], ["--hourly", "--daily"], ["--top", "0"], ["--check", "--hourly"], ["--format", "xml"]] {
            let r = try ifmeter(["usage", "--state", "/nonexistent/state.db"] + bad)
            #expect(r.status == 64 && r.err.hasPrefix("Error: "), "\(bad): \(r)")
        }
        #expect(try ifmeter(["usage", "--state", "/nonexistent/state.db", "--bits"]).err.contains("byte totals"))
    }

    /// The process's own zone (localtime_r with TZ) gives 23- and 25-hour
    /// days: hours written straight into a state file, read under TZ.
    @Test func daylightSavingDaysUnderTZ() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-tz-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        #expect(try ifmeter(["plan", "set", "eth0", "--state", state, "--cycle-start", "25"]).status == 0)
        // Every UTC hour from 2026-10-24 22:00 to 2026-10-26 00:00 (Berlin
        // 2026-10-25 00:00+02:00 to 2026-10-26 01:00+01:00), 1000 B each.
        let first = 1_792_879_200 // 2026-10-24T22:00:00Z
        var sql = "BEGIN;"
        for h in 0..<26 { sql += "INSERT INTO usage_hours VALUES ('eth0', \(first + h * 3600), 3600, 'ethernet', 1000, 0, 1, 0, 0);" }
        sql += "COMMIT;"
        let insert = try run(["sqlite3", state, sql], allowFailure: true)
        #expect(insert.status == 0, "\(insert.err)")
        let binary = try ifmeterBinary()
        let daily = try run(["env", "TZ=Europe/Berlin", binary, "usage", "--state", state, "--format", "json"], allowFailure: true)
        let days = try periods(daily.out, "eth0")
        let day = days.first { $0["period"]?.stringValue == "2026-10-25" }
        #expect(day?["start"]?.stringValue == "2026-10-25T00:00:00+02:00")
        #expect(day?["end"]?.stringValue == "2026-10-26T00:00:00+01:00")
        #expect(day?["rx_bytes"]?.uint64Value == 25_000, "a 25-hour day")
        #expect(days.reduce(0) { $0 + ($1["rx_bytes"]?.uint64Value ?? 0) } == 26_000)
        let hourly = try run(["env", "TZ=Europe/Berlin", binary, "usage", "--state", state, "--hourly", "--format", "json"], allowFailure: true)
        let labels = try periods(hourly.out, "eth0").compactMap { $0["period"]?.stringValue }
        #expect(labels.filter { $0.hasPrefix("2026-10-25 02:00") } == ["2026-10-25 02:00+02:00", "2026-10-25 02:00+01:00"])
        // In UTC the same hours make a 24-hour day.
        let utc = try run(["env", "TZ=UTC", binary, "usage", "--state", state, "--format", "json"], allowFailure: true)
        #expect(try periods(utc.out, "eth0").first { $0["period"]?.stringValue == "2026-10-25" }?["rx_bytes"]?.uint64Value == 24_000)
    }

    func periods(_ json: String, _ name: String) throws -> [JSONValue] {
        let table = try JSONParser.parse(json)
        guard case .array(let list)? = table["interfaces"],
            let mine = list.first(where: { $0["name"]?.stringValue == name }),
            case .array(let periods)? = mine["periods"]
        else { return [] }
        return periods
    }

    @Test func withoutStateTheDefaultIsUsedAndSaid() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-default-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let binary = try ifmeterBinary()
        let viaEnv = try run(["env", "IFMETER_STATE=\(dir)/env.db", binary, "usage"], allowFailure: true)
        #expect(viaEnv.err.contains("using the state file \(dir)/env.db (from $IFMETER_STATE"), "\(viaEnv.err)")
        #expect(viaEnv.status == 64, "a missing state file is a usage error")
        // Without $IFMETER_STATE: root's default, or XDG's for anyone else.
        let plain = try run(["env", "-u", "IFMETER_STATE", "XDG_STATE_HOME=\(dir)/xdg", binary, "usage"], allowFailure: true)
        let expected = geteuid() == 0 ? "/var/lib/ifmeter/state.db" : "\(dir)/xdg/ifmeter/state.db"
        #expect(plain.err.contains("using the state file \(expected)"), "\(plain.err)")
        // --state says nothing.
        let given = try run([binary, "usage", "--state", dir + "/none.db"], allowFailure: true)
        #expect(!given.err.contains("using the state file"))
    }
}
