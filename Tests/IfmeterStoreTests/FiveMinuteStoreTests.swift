import Foundation
import IfmeterCore
import IfmeterStore
import IfmeterTestSupport
import Testing

/// Schema 3: five-minute rows pruned after 48 hours, plan limits, and a
/// schema 2 file brought forward without loss.
@Suite(.blocking) struct FiveMinuteStoreTests {
    let dir: String
    let noon = 1_796_040_000.0 // 2026-11-30 12:00 UTC

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-five-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func open(_ now: Double) throws -> StateStore { try StateStore(path: dir + "/state.db", host: "h", bootID: "b", now: now) }

    func entry(_ slots: [(Int64, UInt64)]) -> UsageEntry {
        let hours = Dictionary(grouping: slots) { LocalZone.utc.hourStart($0.0) }.map { start, mine in
            HourUsage(
                start: start, counters: Counters(rxBytes: mine.map(\.1).reduce(0, +), txBytes: 0, rxPackets: 1, txPackets: 0),
                quality: .exact,
                fiveMinutes: mine.map {
                    FiveMinuteUsage(start: $0.0, counters: Counters(rxBytes: $0.1, txBytes: 0, rxPackets: 1, txPackets: 0), quality: .exact)
                })
        }
        return UsageEntry(kind: .ethernet, counters: .zero, quality: .exact, hours: hours)
    }

    @Test func rowsOlderThan48HoursArePrunedWhenSaving() throws {
        let now = Int64(noon)
        let kept = FiveMinuteSplit.oldestKept(now: now)
        #expect(kept == now - 48 * 3600 + 300, "48 hours of slots, the current one included")
        do {
            let store = try open(noon - 49 * 3600)
            // Saved 49 hours ago: a slot then, kept for now.
            try store.save([], usage: [SeriesKey(name: "eth0"): entry([(now - 49 * 3600, 7)])], wallTime: noon - 49 * 3600)
        }
        var snapshot = try StateStore.snapshot(path: dir + "/state.db", zone: .utc)
        #expect(snapshot.fiveMinutes.map(\.counters.rxBytes) == [7])
        do {
            let store = try open(noon)
            try store.save([], usage: [SeriesKey(name: "eth0"): entry([(now - 300, 5), (now, 3)])], wallTime: noon)
        }
        snapshot = try StateStore.snapshot(path: dir + "/state.db", zone: .utc)
        #expect(snapshot.fiveMinutes.map(\.start) == [now - 300, now], "the 49-hour-old row is gone")
        #expect(snapshot.fiveMinutes.map(\.counters.rxBytes) == [5, 3] && snapshot.fiveMinutes.allSatisfy { $0.seconds == 300 })
        // The hours keep everything.
        #expect(snapshot.slices.map(\.counters.rxBytes).reduce(0, +) == 15)
        // A second save in the same slot adds to its row.
        do {
            let store = try open(noon + 10)
            try store.save([], usage: [SeriesKey(name: "eth0"): entry([(now, 4)])], wallTime: noon + 10)
        }
        #expect(try StateStore.snapshot(path: dir + "/state.db", zone: .utc).fiveMinutes.map(\.counters.rxBytes) == [5, 7])
    }

    @Test func aSchema2FileIsMigratedWithItsRowsAndPlans() throws {
        do { _ = try open(noon) }
        try run([
            "sqlite3", dir + "/state.db",
            """
            DROP TABLE usage_five_minutes; DROP TABLE plan_limits; UPDATE meta SET value = '2' WHERE key = 'schema_version';
            INSERT INTO usage_hours VALUES ('eth0', 1796036400, 3600, 'ethernet', 100, 10, 2, 1, 0);
            INSERT INTO plans VALUES ('eth0', 12, 5000, 'tx');
            """,
        ])
        // Read-only before migrating: no five-minute rows, no limits, all else there.
        var snapshot = try StateStore.snapshot(path: dir + "/state.db", zone: .utc)
        #expect(snapshot.fiveMinutes.isEmpty && snapshot.slices.count == 1 && snapshot.plans.first?.limits == [])
        do {
            let store = try open(noon)
            var plan = Plan(pattern: "eth0", cycleStartDay: 12, quotaBytes: 5000, direction: .tx)
            plan.limits = [PeriodLimit(period: .day, bytes: 2_000_000_000), PeriodLimit(period: .month, bytes: 50_000_000_000)]
            try store.setPlan(plan)
        }
        let version = try run(["sqlite3", dir + "/state.db", "SELECT value FROM meta WHERE key = 'schema_version'"])
        #expect(version.out.trimmingCharacters(in: .whitespacesAndNewlines) == String(StateStore.schemaVersion))
        snapshot = try StateStore.snapshot(path: dir + "/state.db", zone: .utc)
        #expect(snapshot.slices.map(\.counters.rxBytes) == [100], "the hours are kept")
        #expect(snapshot.plans.first?.limits.map(\.period) == [.day, .month])
        #expect(snapshot.plans.first?.limits.map(\.bytes) == [2_000_000_000, 50_000_000_000])
        do {
            let store = try open(noon)
            #expect(try store.removePlan("eth0"))
        }
        let left = try run(["sqlite3", dir + "/state.db", "SELECT count(*) FROM plan_limits"])
        #expect(left.out.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "a removed plan's limits go with it")
    }
}
