import Foundation
@testable import IfmeterCLI
import IfmeterCore
import IfmeterPipeline
import IfmeterStore
import IfmeterTestSupport
import Testing

/// A planned interface that was seen but idle has a row in the state file's
/// interfaces table (with its kind) and no usage: its kind is known, and
/// every output says it (not "not known", not a missing label that appears
/// with the first byte).
@Suite(.blocking) struct StoredKindTests {
    @Test func anIdlePlannedInterfaceKeepsTheKindTheFileHolds() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-kind-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let now = Date().timeIntervalSince1970
        do {
            let store = try StateStore(path: state, host: "h", bootID: "b", now: now)
            let classification = Classification(kind: .cellular, evidence: "sysfs:DEVTYPE=wwan")
            let totals = InterfaceTotals(
                name: "wwan1", netns: "", classification: classification, index: 4, width: .bits64, speedBps: nil,
                attributes: nil, totals: .zero, quality: .exact, events: EventCounts(), baseline: .zero,
                lastKernelStats: nil, firstSeen: 1, lastSeen: 2, present: true, deletedAt: nil)
            let last = InterfaceSample(name: "wwan1", index: 4, classification: classification, counters: .zero)
            // Seen, idle: saved with its totals, no usage.
            try store.save([DeltaEngine.SavedSeries(totals: totals, last: last, lastTime: 2)], usage: [:], wallTime: now)
            try store.setPlan(Plan(pattern: "wwan*", cycleStartDay: 1, quotaBytes: 1_000_000, direction: .both))
        }

        let json = try ifmeter(["usage", "--state", state, "--cycle", "--format", "json"])
        #expect(json.status == 0, "\(json.err)")
        let table = try JSONParser.parse(json.out)
        guard case .array(let list)? = table["interfaces"] else { throw TestFailure("no interfaces: \(json.out)") }
        #expect(list.first { $0["name"]?.stringValue == "wwan1" }?["kind"] == .string("cellular"), "\(json.out)")

        let text = try ifmeter(["usage", "--state", state, "--cycle"])
        #expect(text.out.contains("wwan1 (cellular)"), "\(text.out)")
        let csv = try ifmeter(["usage", "--state", state, "--cycle", "--format", "csv"])
        #expect(csv.out.contains("\nwwan1,,cellular,cycle,"), "\(csv.out)")
        // --kind can pick it now that its kind is known.
        let cellular = try ifmeter(["usage", "--state", state, "--cycle", "--kind", "cellular"])
        #expect(cellular.status == 0 && cellular.out.contains("wwan1 (cellular)"), "\(cellular)")
        let wifi = try ifmeter(["usage", "--state", state, "--cycle", "--kind", "wifi"])
        // No row of it; only the note that the filter matched nothing.
        #expect(!wifi.out.split(separator: "\n").contains { $0.hasPrefix("wwan1") }, "\(wifi)")
        #expect(wifi.out.contains("matched none of the interfaces recorded"), "\(wifi)")

        // serve's and live's plan gauges: the kind label from the start.
        let gauges = PlanFeed.gauges(path: state, now: now)
        #expect(gauges.count == 1 && gauges.first?.name == "wwan1" && gauges.first?.kind == .cellular, "\(gauges)")
    }
}
