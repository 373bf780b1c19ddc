import Foundation
import IfmeterCore
import IfmeterImage
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// serve's JSON API end to end (issue 33): `/api/v1/usage` gives what
/// `ifmeter usage --format json` gives for the same state file, at the same
/// instant; both API documents validate against their schemas; a bad
/// query gets one line.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct ServeAPITests {
    @Test func usageOverHTTPIsTheUsageCommandsAndEveryDocumentValidates() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-api-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        // One instant for both (usage's tables and its "saved ... ago").
        let now = String(Int(Date().timeIntervalSince1970) + 60)
        let port: UInt16 = 49723
        // lo left out: the pages read below are traffic on lo, which the
        // API adds to the file's rows (its figures are current within a
        // sample: CurrentFiguresTests) and the command does not, the file
        // holding it only from the next save.
        let server = try startServe(
            in: pair.a, port: port, environment: ["IFMETER_USAGE_NOW": now],
            ["--listen", "127.0.0.1:\(port)", "--state", state, "--exclude", "lo"])
        defer { server.stop() }
        try pair.sendUDP(count: 300, payload: 700)
        let sent = 300 * VethPair.frameBytes(payload: 700)
        // SIGHUP saves the state; the API reads the file, so it shows the
        // traffic once saved.
        func daily() throws -> JSONValue? {
            let response = try RawHTTP.request("/api/v1/usage?granularity=day&interface=vA", port: port, in: pair.a.name)
            guard response.status == 200 else { throw TestFailure("\(response.status): \(response.text)") }
            return try JSONParser.parse(response.text)
        }
        _ = try waitFor("the traffic in the state file") { () throws -> Bool? in
            kill(server.process.processIdentifier, SIGHUP)
            guard case .array(let rows)? = try daily()?["interfaces"], case .array(let periods)? = rows.first?["periods"] else { return nil }
            return periods.reduce(0) { $0 + ($1["tx_bytes"]?.uint64Value ?? 0) } >= sent ? true : nil
        }

        // One save more, waited for, and then none (every 5 minutes): the
        // API and the command read the same file, and nothing moves after.
        func saves() throws -> UInt64 {
            let text = try RawHTTP.request("/metrics", port: port, in: pair.a.name).text
            return text.split(separator: "\n").first { $0.hasPrefix("ifmeter_state_saves_total ") }?.split(separator: " ").last
                .flatMap { UInt64($0) } ?? 0
        }
        let before = try saves()
        kill(server.process.processIdentifier, SIGHUP)
        _ = try waitFor("a save after the last SIGHUP") { try saves() > before ? true : nil }

        var files: [String] = []
        for (query, arguments) in [
            ("granularity=day", ["--daily"]), ("granularity=hour&limit=3", ["--hourly", "--limit", "3"]),
            ("granularity=fiveminutes", ["--fiveminutes"]), ("granularity=month", ["--monthly"]), ("granularity=cycle", ["--cycle"]),
        ] {
            let api = try RawHTTP.request("/api/v1/usage?" + query, port: port, in: pair.a.name)
            #expect(api.status == 200, "\(query): \(api.text)")
            let cli = try run(["env", "IFMETER_USAGE_NOW=\(now)", try ifmeterBinary(), "usage", "--state", state, "--format", "json"] + arguments)
            #expect(try JSONParser.parse(api.text) == JSONParser.parse(cli.out), "\(query): the API gives what usage gives")
            let file = dir + "/usage-\(files.count).json"
            try api.text.write(toFile: file, atomically: true, encoding: .utf8)
            files.append(file)
        }
        let usageCheck = try checkJSONSchema(files, schema: "ifmeter-usage.v6.schema.json")
        #expect(usageCheck.ok, "\(usageCheck.output)")

        // One interface, matched exactly: usage's rows for it and no other.
        let one = try #require(try daily())
        guard case .array(let rows)? = one["interfaces"] else { throw TestFailure("no interfaces") }
        #expect(rows.count == 1 && rows.first?["name"]?.stringValue == "vA")

        var interfaceFiles: [String] = []
        for query in ["", "?history=1"] {
            let now = try RawHTTP.request("/api/v1/interfaces" + query, port: port, in: pair.a.name)
            #expect(now.status == 200)
            let document = try JSONParser.parse(now.text)
            guard case .array(let list)? = document["interfaces"], let vA = list.first(where: { $0["name"]?.stringValue == "vA" }) else {
                throw TestFailure("vA not in \(now.text.prefix(300))")
            }
            #expect((vA["tx_bytes"]?.uint64Value ?? 0) >= sent)
            let file = dir + "/interfaces-\(interfaceFiles.count).json"
            try now.text.write(toFile: file, atomically: true, encoding: .utf8)
            interfaceFiles.append(file)
        }
        let interfacesCheck = try checkJSONSchema(interfaceFiles, schema: "ifmeter-interfaces.v2.schema.json")
        #expect(interfacesCheck.ok, "\(interfacesCheck.output)")

        // /usage.png: usage --png's picture, its figures those of usage --png.
        for (query, arguments) in [("granularity=day&interface=vA", ["--daily", "--include", "vA"]), ("granularity=summary", ["--summary"])] {
            let picture = try RawHTTP.request("/usage.png?" + query, port: port, in: pair.a.name)
            #expect(picture.status == 200 && picture.headers["content-type"] == "image/png", "\(query): \(picture.status)")
            #expect(Array(picture.body.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
            let file = dir + "/cli-\(files.count).png"
            files.append(file)
            _ = try run(["env", "IFMETER_USAGE_NOW=\(now)", try ifmeterBinary(), "usage", "--state", state, "--png", file] + arguments)
            let served = try PNGChunks.text(UsagePNG.figuresKey, in: picture.body)
            let drawn = try PNGChunks.text(UsagePNG.figuresKey, in: Array(try Data(contentsOf: URL(fileURLWithPath: file))))
            #expect(served != nil && served == drawn, "\(query): the served picture's figures are usage --png's")
        }
        let refused = try RawHTTP.request("/usage.png?interface=v*", port: port, in: pair.a.name)
        #expect(refused.status == 400)

        for (query, line) in [
            ("granularity=weekly", "400 Bad Request: invalid granularity 'weekly'; use fiveminutes, hour, day, month, year, cycle.\n"),
            (
                "begin=2026-13-01",
                "400 Bad Request: invalid value '2026-13-01' for 'begin': expected a local date or time like 2026-11-01 or 2026-11-01T08:30.\n"
            ),
        ] {
            let bad = try RawHTTP.request("/api/v1/usage?" + query, port: port, in: pair.a.name)
            #expect(bad.status == 400 && bad.text == line, "\(query): \(bad.text)")
        }
    }
}
