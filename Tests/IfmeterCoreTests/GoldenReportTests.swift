import Foundation
import IfmeterCore
import IfmeterOutput
import Testing

/// Every `Fixtures/traces/NAME.jsonl` replays to exactly `NAME.report.json`.
///
/// To re-record on purpose: `IFMETER_RECORD_GOLDEN=1 swift test --filter Golden`.
/// The re-recording run fails, so that a re-recorded golden file is always a
/// decision someone reviewed in the diff, never an accident.
@Suite struct GoldenReportTests {
    static let traces: [String] = {
        let dir = fixtures.appendingPathComponent("traces")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { $0.hasSuffix(".jsonl") }.sorted()
    }()

    @Test func thereAreGoldenTraces() {
        #expect(Self.traces.count >= 5)
    }

    @Test(arguments: traces)
    func replayMatchesGolden(trace: String) throws {
        let dir = fixtures.appendingPathComponent("traces")
        let text = try String(contentsOf: dir.appendingPathComponent(trace), encoding: .utf8)
        let (engine, header) = try replay(text)
        let rendered = JSONReportRenderer().render(Report(engine: engine, header: header))
        let golden = dir.appendingPathComponent(trace.replacingOccurrences(of: ".jsonl", with: ".report.json"))
        if ProcessInfo.processInfo.environment["IFMETER_RECORD_GOLDEN"] == "1" {
            try rendered.write(to: golden, atomically: true, encoding: .utf8)
            Issue.record("re-recorded \(golden.lastPathComponent); review the diff, then run again without IFMETER_RECORD_GOLDEN")
            return
        }
        let expected = try String(contentsOf: golden, encoding: .utf8)
        #expect(rendered == expected, "replay of \(trace) differs from \(golden.lastPathComponent)")
        // The contract's required shape, whatever the golden says.
        let value = try JSONParser.parse(rendered)
        #expect(value["estimate"] == .bool(true))
        #expect(value["window"]?["start"] != nil && value["window"]?["end"] != nil)
        guard case .array(let interfaces)? = value["interfaces"] else {
            Issue.record("no interfaces array")
            return
        }
        // Sorted by (netns, name), the own namespace ("" or absent) first
        // (v1.1), as code points.
        let keys = interfaces.compactMap { i in
            i["name"]?.stringValue.map { (Array((i["netns"]?.stringValue ?? "").unicodeScalars.map(\.value)), Array($0.unicodeScalars.map(\.value))) }
        }
        #expect(keys.count == interfaces.count)
        #expect(
            zip(keys, keys.dropFirst()).allSatisfy { a, b in a.0.lexicographicallyPrecedes(b.0) || a.0 == b.0 && a.1.lexicographicallyPrecedes(b.1) })
        for i in interfaces {
            #expect(i["kind"]?.stringValue.flatMap(InterfaceKind.init(rawValue:)) != nil)
            #expect(i["quality"]?.stringValue.flatMap(Quality.init(name:)) != nil)
            for key in CounterKey.required { #expect(i["totals"]?[key.jsonKey]?.uint64Value != nil) }
            for key in ["wraps", "resets", "recreations", "deletions"] { #expect(i["events"]?[key]?.uint64Value != nil) }
        }
    }
}
