import Foundation
import IfmeterCore
import IfmeterPipeline
import IfmeterStore
import IfmeterTestSupport
import Testing

/// After a kill -9, what the counters cannot vouch for is a lower bound,
/// whatever the command publishes and in the hour the bytes were lost.
/// (Found by an independent review: serve and export publish no idle
/// deltas, so a new interface's baseline never reached the check; and the
/// mark went on the restart's hour only.)
@Suite(.blocking) struct UncleanStopLabelTests {
    let noon = 1_796_040_000.0

    func run(_ path: String, _ steps: [ScriptedSource.Step], finish: Bool, idle: Bool) throws -> [SeriesKey: InterfaceTotals] {
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: noon)
        var configuration = PipelineConfiguration(interval: 1)
        configuration.idleDeltas = idle
        let pipeline = Pipeline(
            source: ScriptedSource(steps), configuration: configuration,
            persistence: StatePersistence(store: store, every: 3600, zone: .utc), clock: forgedClock)
        for _ in steps { pipeline.step() }
        if finish { pipeline.finish() }
        return Dictionary(uniqueKeysWithValues: pipeline.totals.map { ($0.key, $0) })
    }

    /// serve and export (no idle deltas) as well as live.
    @Test(arguments: [true, false]) func anInterfaceNewAfterAKillIsALowerBound(idle: Bool) throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        _ = try run(path, [.sample(0, [("eth0", 2, 1000, 10)]), .sample(1, [("eth0", 2, 2000, 10)])], finish: false, idle: idle)
        // eth2 is new to the file: the dead process may have counted some of it.
        let totals = try run(
            path, [.sample(5, [("eth0", 2, 4000, 10), ("eth2", 7, 500, 5)]), .sample(6, [("eth0", 2, 4000, 10), ("eth2", 7, 600, 5)])],
            finish: true, idle: idle)
        #expect(totals[SeriesKey(name: "eth2")]?.quality == .lowerBound, "idle deltas \(idle)")
        #expect(totals[SeriesKey(name: "eth0")]?.quality == .exact, "its counters vouch for it")
        let rows = try StateStore.usage(path: path, granularity: .day, zone: .utc)
        #expect(rows.first { $0.name == "eth2" }?.quality == .lowerBound, "idle deltas \(idle): \(rows)")
    }

    func run(_ path: String, wall: Double, _ steps: [ScriptedSource.Step], finish: Bool) throws {
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: wall)
        let pipeline = Pipeline(
            source: ScriptedSource(steps), configuration: PipelineConfiguration(interval: 1),
            persistence: StatePersistence(store: store, every: 3600, zone: .utc),
            clock: PipelineClock(monotonic: { 0 }, wall: { wall }))
        for _ in steps { pipeline.step() }
        if finish { pipeline.finish() }
    }

    @Test func theDayTheBytesWereLostInIsTheLowerBound() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let midnight = 1_796_083_200.0 // 2026-12-01 00:00 UTC
        try run(path, wall: midnight - 120, [.sample(0, [("eth1", 3, 500, 5)]), .sample(1, [("eth1", 3, 900, 5)])], finish: true)
        // Saved at 23:59, then 700 more bytes on eth1, then kill -9.
        try run(path, wall: midnight - 60, [.sample(2, [("eth1", 3, 1300, 5)]), .sample(3, [("eth1", 3, 2000, 5)])], finish: false)
        // The restart, after midnight: eth1 is gone.
        try run(path, wall: midnight + 600, [.sample(5, [("eth0", 2, 4000, 10)])], finish: true)
        let rows = try StateStore.usage(path: path, granularity: .day, zone: .utc)
        #expect(rows.first { $0.name == "eth1" && $0.period == "2026-11-30" }?.quality == .lowerBound, "\(rows)")
    }
}
