import Foundation
import IfmeterCore
import IfmeterOutput
import IfmeterTestSupport
import Testing

/// Every JSON document ifmeter writes carries one envelope: its schema and
/// version, `estimate: true` and the caveats (issue 22: seven documents
/// set `estimate` by hand, and three of them named a schema).
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct JSONEnvelopeTests {
    @Test func everyJSONDocumentIsStampedAlike() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try ScenarioFolder("envelope")
        #expect(try ifmeter(["record", "--count", "1", "--interval", "100ms", "-o", dir["t.jsonl"]], in: ns).status == 0)
        #expect(try ifmeter(["plan", "set", "lo", "--state", dir["s.db"], "--cycle-start", "1"]).status == 0)
        let exporter = try Scenario.start(ns, "export", ["--every", "200ms", "--json", dir["r.json"], "--state", dir["s.db"]])
        _ = try waitFor("a report") { FileManager.default.fileExists(atPath: dir["r.json"]) ? true : nil }
        #expect(exporter.stop() == 0)
        let documents: [(JSONEnvelope, String)] = [
            (.list, try ifmeter(["list", "--format", "json"], in: ns).out),
            (.sample, try ifmeter(["sample", "--format", "json"], in: ns).out),
            (
                .interval,
                String(
                    try ifmeter(["sample", "--count", "1", "--interval", "100ms", "--format", "json"], in: ns).out
                        .split(separator: "\n").last ?? "")
            ),
            (.replay, try ifmeter(["replay", dir["t.jsonl"]]).out),
            (.export, try String(contentsOfFile: dir["r.json"], encoding: .utf8)),
            (.usage, try ifmeter(["usage", "--state", dir["s.db"], "--format", "json"]).out),
            (.plans, try ifmeter(["plan", "list", "--state", dir["s.db"], "--format", "json"]).out),
            (.route, try ifmeter(["route", "--format", "json"], in: ns).out),
        ]
        for (envelope, text) in documents {
            let document = try JSONParser.parse(text)
            #expect(document["schema"]?.stringValue == envelope.schema, "\(envelope.schema): \(text.prefix(300))")
            #expect(document["schema_version"]?.uint64Value == UInt64(envelope.version), "\(envelope.schema)")
            #expect(document["estimate"] == .bool(true), "\(envelope.schema)")
            guard case .array(let caveats)? = document["caveats"] else {
                Issue.record("\(envelope.schema): no caveats")
                continue
            }
            #expect(caveats.first?.stringValue == Caveat.estimate, "\(envelope.schema): \(caveats)")
        }
    }
}
