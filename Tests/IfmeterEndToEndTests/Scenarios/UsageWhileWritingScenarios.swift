import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `usage` while the writer runs, after it stopped, and after it was
/// killed: every figure equals the bytes sent up to the last save, and the
/// report says when that save was and whether it is stale.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct UsageWhileWritingScenarios {
    static let payload = 600
    static var frame: UInt64 { VethPair.frameBytes(payload: payload) }

    func usageJSON(_ state: String, _ extra: [String] = []) throws -> (json: JSONValue, err: String) {
        let result = try ifmeter(["usage", "--state", state, "--format", "json"] + extra)
        guard result.status == 0 else { throw TestFailure("usage: \(result.err)") }
        return (try JSONParser.parse(result.out), result.err)
    }

    /// Finding 5 of the honest-workflows issue: usage read a file whose
    /// writer died as if it were current. Now text, JSON (`state.saved_at`,
    /// `writer`, `stale`) and `--check` say how current the figures are.
    @Test(arguments: ["serve", "export"])
    func usageSaysHowCurrentTheFiguresAre(writer: String) throws {
        try Netns.requireRoot()
        let pair = try VethPair(nameA: "va0", nameB: "vb0")
        let dir = try ScenarioFolder("usage-writer-\(writer)")
        let state = dir["state.db"]
        #expect(try ifmeter(["plan", "set", "va0", "--state", state, "--cycle-start", "1", "--quota", "1GB"]).status == 0)
        // Before any sampler: never saved, and said so.
        var (json, _) = try usageJSON(state)
        #expect(json["state"]?["writer"]?.stringValue == "none" && json["state"]?["saved_at"] == JSONValue.null, "\(json)")

        func start() throws -> Background {
            let common = ["--state", state, "--boot-id-file", try dir.bootFile(), "--save-every", "300ms"]
            if writer == "serve" { return try startServe(in: pair.a, common) }
            try? FileManager.default.removeItem(atPath: dir["r.json"])
            let exporter = try Scenario.start(pair.a, "export", common + ["--interval", "100ms", "--every", "300ms", "--json", dir["r.json"]])
            // Sampling has begun (the baseline) once the first report is there.
            _ = try waitFor("the first report") { FileManager.default.fileExists(atPath: dir["r.json"]) ? true : nil }
            return exporter
        }
        var process = try start()
        try pair.sendUDP(count: 20, payload: Self.payload)
        var sent = 20 * Self.frame
        // Running: figures reach the bytes sent within a save or two, the
        // writer is running, the save is fresh.
        /// Makes the last save stale by moving its time (and the stop's) back
        /// 10 s, 33 save intervals, rather than hoping two intervals passed.
        func ageTheLastSave() throws {
            try run(["sqlite3", state, "UPDATE meta SET value = CAST(value AS REAL) - 10 WHERE key IN ('saved', 'stopped')"])
        }
        json = try waitFor("usage to show the bytes sent (\(sent))") { () -> JSONValue? in
            let (json, _) = try usageJSON(state)
            let usage = try Scenario.usage(state)
            guard usage["va0"]?.tx == sent else { throw TestFailure("usage: \(usage)") }
            return json
        }
        #expect(json["state"]?["writer"]?.stringValue == "running", "\(String(describing: json["state"]))")
        #expect(json["state"]?["stale"] == .bool(false))
        #expect(json["state"]?["save_every_seconds"]?.doubleValue == 0.3)
        var text = try ifmeter(["usage", "--state", state])
        #expect(text.out.hasPrefix("Last saved ") && text.out.contains("by the ifmeter writing it now"), "\(text.out)")
        var check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 0, "\(check)")

        // Killed with -9: the figures are those of the last save, and
        // after two save intervals the file says it is stale.
        process.process.signal(SIGKILL)
        process.process.waitUntilExit()
        try ageTheLastSave()
        (json, _) = try usageJSON(state)
        #expect(json["state"]?["writer"]?.stringValue == "stopped-uncleanly", "\(String(describing: json["state"]))")
        #expect(json["state"]?["stale"] == .bool(true))
        #expect(try Scenario.usage(state)["va0"]?.tx == sent)
        let stderr = try usageJSON(state).err
        #expect(stderr.hasPrefix("WARNING: these figures are as of "), "JSON keeps its format; the warning goes to stderr: \(stderr)")
        text = try ifmeter(["usage", "--state", state])
        #expect(text.out.hasPrefix("WARNING: these figures are as of ") && text.out.contains("without a clean stop"), "\(text.out)")
        check = try ifmeter(["usage", "--state", state, "--check"])
        #expect(check.status == 4 && check.out.hasPrefix("WARNING") && check.out.contains("UNKNOWN va0"), "stale: under cannot be proven: \(check)")

        // A restart in the same boot counts what the kill missed; a clean
        // stop then says so, and goes stale once two intervals pass.
        process = try start()
        try pair.sendUDP(count: 10, payload: Self.payload)
        sent += 10 * Self.frame
        _ = try waitFor("the bytes sent after the restart") { try Scenario.usage(state)["va0"]?.tx == sent ? true : nil }
        #expect(process.stop() == 0)
        (json, _) = try usageJSON(state)
        #expect(json["state"]?["writer"]?.stringValue == "stopped")
        for (name, figures) in try Scenario.usage(state) { #expect(figures.quality == "exact", "\(name): \(figures)") }
        try ageTheLastSave()
        text = try ifmeter(["usage", "--state", state])
        #expect(text.out.hasPrefix("WARNING") && text.out.contains("ifmeter stopped"), "\(text.out)")
        let schemaFile = dir["usage.json"]
        try JSONWriter(indent: 2).string(try usageJSON(state).json).write(toFile: schemaFile, atomically: true, encoding: .utf8)
        let schema = try checkJSONSchema([schemaFile], schema: "ifmeter-usage.v6.schema.json")
        #expect(schema.ok, "\(schema.output)")
    }
}
