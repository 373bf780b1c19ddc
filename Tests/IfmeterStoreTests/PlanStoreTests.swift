import Foundation
import IfmeterCore
import IfmeterStore
import IfmeterTestSupport
import Testing

/// Schema 2: hours, plans, and a schema 1 file brought forward with its
/// day rows kept.
@Suite(.blocking) struct PlanStoreTests {
    let dir: String
    let noon = 1_796_040_000.0 // 2026-11-30 12:00 UTC

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-plans-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func open() throws -> StateStore { try StateStore(path: dir + "/state.db", host: "h", bootID: "b", now: noon) }

    func sqlite(_ sql: String) throws {
        try run(["sqlite3", dir + "/state.db", sql])
    }

    @Test func hoursArePerEntryAndPlansRoundTrip() throws {
        let hour = LocalZone.utc.hourStart(Int64(noon))
        do {
            let store = try open()
            let entry = UsageEntry(
                kind: .ethernet, counters: Counters(rxBytes: 30, txBytes: 3, rxPackets: 3, txPackets: 1), quality: .exact,
                hours: [
                    HourUsage(start: hour - 3600, counters: Counters(rxBytes: 10, txBytes: 1, rxPackets: 1, txPackets: 0), quality: .exact),
                    HourUsage(start: hour, counters: Counters(rxBytes: 20, txBytes: 2, rxPackets: 2, txPackets: 1), quality: .lowerBound),
                ])
            try store.save([], usage: [SeriesKey(name: "eth0"): entry], wallTime: noon)
            try store.setPlan(Plan(pattern: "eth*", cycleStartDay: 31, quotaBytes: 20_000_000_000, direction: .rx))
            try store.setPlan(Plan(pattern: "wg0", cycleStartDay: 1, quotaBytes: nil, direction: .both))
            #expect(try store.removePlan("wg0"))
            #expect(try !store.removePlan("wg0"))
        }
        let slices = try StateStore.slices(path: dir + "/state.db", zone: .utc)
        #expect(slices.map(\.start) == [hour - 3600, hour])
        #expect(slices.map(\.counters.rxBytes) == [10, 20] && slices.map(\.quality) == [.exact, .lowerBound])
        #expect(
            try StateStore.plans(path: dir + "/state.db")
                == [Plan(pattern: "eth*", cycleStartDay: 31, quotaBytes: 20_000_000_000, direction: .rx)])
        #expect(Plan.find(for: "eth0", in: try StateStore.plans(path: dir + "/state.db"))?.quotaBytes == 20_000_000_000)
        #expect(Plan.find(for: "ns1/eth0", in: try StateStore.plans(path: dir + "/state.db")) != nil, "a bare glob matches in any namespace")
    }

    @Test func aSchema1FileIsMigratedAndItsDaysKept() throws {
        do { _ = try open() }
        // Made schema 1 again: no hours, no plans, day and month rows.
        try sqlite(
            """
            DROP TABLE usage_hours; DROP TABLE plans; UPDATE meta SET value = '1' WHERE key = 'schema_version';
            INSERT INTO usage VALUES ('eth0', 'day', '2026-03-01', 'ethernet', 100, 10, 2, 1, 0);
            INSERT INTO usage VALUES ('eth0', 'month', '2026-03', 'ethernet', 100, 10, 2, 1, 0);
            """)
        // Read-only, before any migration: the day is a day-long span.
        var slices = try StateStore.slices(path: dir + "/state.db", zone: .utc)
        #expect(slices.count == 1 && slices.first?.seconds == 86400 && slices.first?.counters.rxBytes == 100)
        #expect(try StateStore.plans(path: dir + "/state.db").isEmpty)
        do {
            let store = try open() // migrates
            try store.setPlan(Plan(pattern: "eth0", cycleStartDay: 1, quotaBytes: 1000, direction: .both))
            try store.save(
                [],
                usage: [
                    SeriesKey(name: "eth0"): UsageEntry(
                        kind: .ethernet, counters: Counters(rxBytes: 5, txBytes: 0, rxPackets: 1, txPackets: 0), quality: .exact)
                ],
                wallTime: noon)
        }
        slices = try StateStore.slices(path: dir + "/state.db", zone: .utc)
        #expect(slices.map(\.counters.rxBytes).sorted() == [5, 100], "the old day and the new hour, each once")
        let months = try StateStore.usage(path: dir + "/state.db", granularity: .month, zone: .utc)
        #expect(months.map(\.period) == ["2026-03", "2026-11"] && months.map(\.counters.rxBytes) == [100, 5])
    }
}
