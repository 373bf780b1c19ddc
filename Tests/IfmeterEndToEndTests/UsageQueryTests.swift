import Foundation
import IfmeterCore
import IfmeterStore
import IfmeterSystem
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Usage as a typed query (issue 46), against the real serve binary:
/// `/api/v1/usage` pages its rows (`rows`, `next`) so that following `next`
/// gives every row of `usage --format json --hourly` exactly once; one
/// interface is that interface's rows alone; the status follows from the
/// error's case (a parameter 400 naming it, no state file 503); the
/// picture still answers.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct UsageQueryTests {
    /// Three interfaces (one in another namespace; `more` others besides)
    /// with `hours` hours each, ending now, saved as serve on this host
    /// would save them.
    static func state(_ folder: ScenarioFolder, now: Int64, more: Int = 0, hours count: Int64 = 1000) throws -> String {
        let path = folder["state.db"]
        let zone = LocalZone.system
        let store = try StateStore(path: path, host: hostName(), bootID: "an-earlier-boot", now: Double(now - 3600))
        var usage: [SeriesKey: UsageEntry] = [:]
        let keys =
            [SeriesKey(name: "eth0"), SeriesKey(netns: "ns1", name: "wg0"), SeriesKey(name: "wlan0")] + (0..<more).map { SeriesKey(name: "if\($0)") }
        for (n, key) in keys.enumerated() {
            var hours: [HourUsage] = []
            var start = zone.hourStart(now - (count - 1) * 3600)
            var i: UInt64 = 0
            while start <= now {
                hours.append(
                    HourUsage(
                        start: start, counters: Counters(rxBytes: i * 7919 + UInt64(n), txBytes: i * 104_729, rxPackets: i, txPackets: 1),
                        quality: .exact))
                start = zone.nextHour(start)
                i += 1
            }
            usage[key] = UsageEntry(kind: n == 1 ? .tunnel : .ethernet, counters: .zero, quality: .exact, hours: hours)
        }
        try store.save([], usage: usage, wallTime: Double(now - 3600))
        return path
    }

    static func document(_ path: String, port: UInt16, _ ns: TestNamespace) throws -> (JSONValue, HTTPResult) {
        let answer = try RawHTTP.request(path, port: port, in: ns.name, timeout: 60)
        guard answer.status == 200 else { throw TestFailure("\(path): \(answer.status) \(answer.text)") }
        return (try JSONParser.parse(answer.text), answer)
    }

    /// Each interface's periods, by NS/NAME, in the order given.
    static func periods(_ document: JSONValue) -> [(String, [JSONValue])] {
        guard case .array(let interfaces)? = document["interfaces"] else { return [] }
        return interfaces.map { i in
            let name = (i["netns"]?.stringValue).map { $0 + "/" } ?? ""
            guard case .array(let rows)? = i["periods"] else { return (name + (i["name"]?.stringValue ?? ""), []) }
            return (name + (i["name"]?.stringValue ?? ""), rows)
        }
    }

    @Test func followingNextGivesEveryRowOnceAndOneInterfaceIsItAlone() throws {
        try Netns.requireRoot()
        let folder = try ScenarioFolder("usage-query")
        let now = Int64(Date().timeIntervalSince1970)
        let state = try Self.state(folder, now: now)
        let ns = try TestNamespace()
        defer { ns.remove() }
        let port: UInt16 = 19441
        // One instant for serve's tables and the command's. lo left out:
        // the pages read are traffic on lo, which serve's tables add to the
        // file's rows (current within a sample: CurrentFiguresTests) and
        // the command, reading the file alone, does not.
        let at = String(now + 60)
        let server = try startServe(
            in: ns, port: port, environment: ["IFMETER_USAGE_NOW": at], ["--listen", "127.0.0.1:\(port)", "--state", state, "--exclude", "lo"])
        defer { server.stop() }

        // Pages of 500: each full page says where the next starts (schema
        // version 7), the last says nothing more (version 6).
        var walked: [(String, [JSONValue])] = []
        var next: String? = "/api/v1/usage?granularity=hour&rows=500"
        var pages: [String] = []
        while let path = next {
            let (page, answer) = try Self.document(path, port: port, ns)
            #expect(answer.headers["content-type"] == "application/json")
            let rows = Self.periods(page).reduce(0) { $0 + $1.1.count }
            next = page["next"]?.stringValue
            #expect(rows <= 500, "\(path): \(rows) rows")
            if next != nil {
                #expect(rows == 500 && page["schema_version"]?.uint64Value == 7, "\(path): a page cut short is full and says so")
                #expect(next?.hasPrefix("/api/v1/usage?") == true && next?.contains("granularity=hour") == true)
            } else {
                #expect(page["schema_version"]?.uint64Value == 6)
            }
            let file = folder["page-\(pages.count).json"]
            try answer.text.write(toFile: file, atomically: true, encoding: .utf8)
            pages.append(file)
            for (name, rows) in Self.periods(page) {
                if let last = walked.last, last.0 == name { walked[walked.count - 1].1 += rows } else { walked.append((name, rows)) }
            }
            #expect(pages.count < 50, "the pages end")
            if pages.count >= 50 { break }
        }
        #expect(pages.count >= 6, "3,000 rows and more in pages of 500: \(pages.count)")
        let cut = try checkJSONSchema(Array(pages.dropLast()), schema: "ifmeter-usage.v7.schema.json")
        #expect(cut.ok, "\(cut.output)")
        let whole = try checkJSONSchema([pages[pages.count - 1]], schema: "ifmeter-usage.v6.schema.json")
        #expect(whole.ok, "\(whole.output)")

        // The union is the command's table, row for row, each row once.
        let cli = try run(["env", "IFMETER_USAGE_NOW=\(at)", try ifmeterBinary(), "usage", "--state", state, "--format", "json", "--hourly"])
        let command = Self.periods(try JSONParser.parse(cli.out))
        #expect(walked.map(\.0) == command.map(\.0))
        for ((name, rows), (_, expected)) in zip(walked, command) {
            #expect(rows.count == expected.count, "\(name): \(rows.count) rows walked, \(expected.count) in usage")
            #expect(rows == expected, "\(name): the rows walked are usage's")
        }
        #expect(command.first { $0.0 == "ns1/wg0" }?.1.count ?? 0 >= 1000)

        // One interface: its rows, and no other's, at hour and day.
        for granularity in ["hour", "day"] {
            let (one, _) = try Self.document("/api/v1/usage?granularity=\(granularity)&interface=ns1/wg0", port: port, ns)
            let shown = Self.periods(one)
            #expect(shown.map(\.0) == ["ns1/wg0"], "\(granularity): \(shown.map(\.0))")
            if granularity == "hour" { #expect(shown.first?.1 == command.first { $0.0 == "ns1/wg0" }?.1) }
            let (all, _) = try Self.document("/api/v1/usage?granularity=\(granularity)", port: port, ns)
            #expect(shown.first?.1 == Self.periods(all).first { $0.0 == "ns1/wg0" }?.1, "\(granularity): the same rows as in the whole table")
        }
        let (none, _) = try Self.document("/api/v1/usage?granularity=hour&interface=wg0", port: port, ns)
        #expect(Self.periods(none).isEmpty, "matched exactly: wg0 is ns1's")

        // The picture still answers.
        for query in ["granularity=day&interface=eth0", "granularity=summary"] {
            let picture = try RawHTTP.request("/usage.png?" + query, port: port, in: ns.name, timeout: 60)
            #expect(picture.status == 200 && picture.headers["content-type"] == "image/png", "\(query): \(picture.status)")
            #expect(Array(picture.body.prefix(4)) == [0x89, 0x50, 0x4E, 0x47])
        }
    }

    /// A page of 50,000 hours (about 16 MB of JSON) goes out as its rows
    /// are read: serve's peak RSS rises by at most the issue's 16 MiB
    /// (before, the document was built whole, then copied: 201 MiB for a
    /// year of 20 interfaces).
    @Test func theTablesGoOutInMemoryThatDoesNotGrowWithTheHistory() throws {
        try Netns.requireRoot()
        let folder = try ScenarioFolder("usage-query-memory")
        let now = Int64(Date().timeIntervalSince1970)
        let state = try Self.state(folder, now: now, more: 17, hours: 5000)
        let ns = try TestNamespace()
        defer { ns.remove() }
        let port: UInt16 = 19443
        // (Every hour kept: 100,000 rows.)
        let server = try startServe(in: ns, port: port, ["--listen", "127.0.0.1:\(port)", "--state", state, "--keep-hours", "forever"])
        defer { server.stop() }
        _ = try Self.document("/api/v1/usage?granularity=hour&interface=eth0&limit=2", port: port, ns)
        let pid = server.process.processIdentifier
        func status(_ key: String) throws -> Int {
            let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }),
                let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
            else { throw TestFailure("no \(key) in /proc/\(pid)/status") }
            return kib
        }
        // The peak from here on: 5 resets VmHWM to VmRSS.
        try "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
        let before = try status("VmRSS")
        let out = folder["page.json"]
        let curl = try ns.exec(
            ["curl", "-s", "-o", out, "-w", "%{http_code}", "--max-time", "600", "http://127.0.0.1:\(port)/api/v1/usage?granularity=hour&rows=50000"])
        #expect(curl.out == "200", "\(curl.out) \(curl.err)")
        let rise = try status("VmHWM") - before
        let page = try JSONParser.parse(try String(contentsOfFile: out, encoding: .utf8))
        let rows = Self.periods(page).reduce(0) { $0 + $1.1.count }
        #expect(rows == 50000 && page["next"] != nil, "\(rows) rows, next \(page["next"]?.stringValue ?? "none")")
        let size = (try FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0
        #expect(size > 12_000_000, "\(size) bytes")
        #expect(rise <= 16 * 1024, "serve's peak RSS rose \(rise) KiB for a page of \(size) bytes")
    }

    @Test func theStatusIsTheErrorsCaseNamingTheParameter() throws {
        try Netns.requireRoot()
        let folder = try ScenarioFolder("usage-query-status")
        let ns = try TestNamespace()
        defer { ns.remove() }
        let port: UInt16 = 19442
        let state = folder["state.db"]
        let server = try startServe(in: ns, port: port, ["--listen", "127.0.0.1:\(port)", "--state", state])
        defer { server.stop() }
        for (query, line) in [
            ("rows=0", "400 Bad Request: invalid rows '0'; use a whole number from 1 to 50000.\n"),
            ("rows=50001", "400 Bad Request: invalid rows '50001'; use a whole number from 1 to 50000.\n"),
            ("after=nothing", "400 Bad Request: invalid after 'nothing'; use the next URL a usage document gives, as it is.\n"),
            ("granularity=hour&limit=0", "400 Bad Request: invalid limit '0'; use a whole number from 1 to 100000.\n"),
        ] {
            let answer = try RawHTTP.request("/api/v1/usage?" + query, port: port, in: ns.name)
            #expect(answer.status == 400 && answer.text == line, "\(query): \(answer.status) \(answer.text)")
        }
        #expect(try RawHTTP.request("/api/v1/usage", port: port, in: ns.name).status == 200)

        // No state file (moved away: serve makes one anew at its next
        // save): 503, with when to come back, for the tables and the picture.
        try FileManager.default.moveItem(atPath: state, toPath: state + ".away")
        for path in ["/api/v1/usage?granularity=hour", "/api/v1/usage", "/usage.png"] {
            let answer = try RawHTTP.request(path, port: port, in: ns.name)
            #expect(answer.status == 503 && answer.headers["retry-after"] != nil, "\(path): \(answer.status) \(answer.text)")
        }
        let logged = try waitFor("the 503 in serve's log") { server.log.contains("answered /api/v1/usage with 503") ? true : nil }
        #expect(logged)
    }
}
