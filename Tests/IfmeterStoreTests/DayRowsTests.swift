import Foundation
import IfmeterCore
import IfmeterStore
import IfmeterTestSupport
import Testing

/// Schema 4's day rows (issue 31: `usage` in bounded memory and time): a
/// summary of the hour rows the writer keeps, read instead of them only
/// while current and summed in the reader's zone. Each test reads the same
/// file both ways and expects the same periods to the byte.
@Suite(.blocking) struct DayRowsTests {
    let dir: String
    /// A zone with a daylight-saving change inside the saved hours: +01:00
    /// until 2026-03-29T01:00Z, +02:00 after (Europe's spring change), so
    /// that day has 23 hours.
    static let change: Int64 = 1_774_746_000
    static let summer = LocalZone { $0 < change ? 3600 : 7200 }
    /// 2026-03-27T00:00+01:00 to four days later, every hour.
    static let first: Int64 = 1_774_566_000

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-days-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    var path: String { dir + "/state.db" }

    func open(zone: LocalZone = summer) throws -> StateStore {
        let store = try StateStore(path: path, host: "h", bootID: "b", now: Double(Self.first))
        store.zone = zone
        return store
    }

    /// Four days of hours (95: the third has 23) for eth0 and wg0 (wg0's
    /// last day a lower bound); two hours of eth0 of 2^62 each on the
    /// second day, which sum past what a signed row holds, and two more,
    /// which sum past 2^64-1 (a lower bound).
    func hours(_ name: String) -> UsageEntry {
        var hours: [HourUsage] = []
        var start = Self.first
        var n: UInt64 = 1
        while start < Self.first + 95 * 3600 {
            let huge = name == "eth0" && (30...33).contains(n)
            let bytes: UInt64 = huge ? 1 << 62 : n * 1000
            hours.append(
                HourUsage(
                    start: start, counters: Counters(rxBytes: bytes, txBytes: n, rxPackets: n, txPackets: 1),
                    quality: name == "wg0" && n > 72 ? .lowerBound : .exact))
            start = Self.summer.nextHour(start)
            n += 1
        }
        return UsageEntry(kind: name == "wg0" ? .tunnel : .ethernet, counters: .zero, quality: .exact, hours: hours)
    }

    func save(_ store: StateStore) throws {
        try store.save(
            [], usage: [SeriesKey(name: "eth0"): hours("eth0"), SeriesKey(name: "wg0"): hours("wg0")],
            wallTime: Double(Self.first + 4 * 86400))
    }

    /// The periods of every interface, from day rows or from hours.
    func periods(_ kind: UsagePeriodKind, zone: LocalZone = summer, days: Bool) throws -> [String: [PeriodUsage]] {
        let snapshot = try StateStore.snapshot(path: path, zone: zone, hoursFrom: days ? .max : nil)
        let calendar = PeriodCalendar(zone: zone)
        return Dictionary(grouping: snapshot.slices, by: \.name).mapValues { calendar.group($0, by: kind, cycleDay: 28) }
    }

    func dayRowsRead(zone: LocalZone = summer) throws -> Bool {
        try StateStore.snapshot(path: path, zone: zone, hoursFrom: .max).slices.contains { $0.seconds > 3600 }
    }

    @Test func dayRowsSumTheHoursAcrossADaylightSavingChange() throws {
        do { try save(try open()) }
        #expect(try dayRowsRead(), "the day rows are current and read")
        for kind in [UsagePeriodKind.day, .month, .year, .cycle, .top] {
            let fromDays = try periods(kind, days: true), fromHours = try periods(kind, days: false)
            #expect(fromDays == fromHours, "\(kind): day rows and hours disagree")
        }
        let days = try periods(.day, days: true)
        #expect(days["eth0"]?.map(\.period.label) == ["2026-03-27", "2026-03-28", "2026-03-29", "2026-03-30"])
        #expect(days["eth0"]?[2].period.end == (days["eth0"]?[2].period.start ?? 0) + 23 * 3600, "the spring day has 23 hours")
        // Hours 30 to 33 (2^62 each) are in the second day: summed past
        // 2^64-1, a lower bound there and in every longer period.
        #expect(days["eth0"]?.map(\.quality) == [.exact, .lowerBound, .exact, .exact])
        #expect(days["wg0"]?.map(\.quality) == [.exact, .exact, .exact, .lowerBound])
        let firstDay: UInt64 = (1...24).reduce(0) { $0 + UInt64($1) * 1000 }
        #expect(days["wg0"]?.first?.counters.rxBytes == firstDay)
    }

    @Test func anEditOfAnHourMakesThemStaleUntilTheNextSave() throws {
        let store = try open()
        try save(store)
        try run(["sqlite3", path, "UPDATE usage_hours SET rx_bytes = rx_bytes + 5 WHERE name = 'wg0' AND start = \(Self.first)"])
        #expect(try !dayRowsRead(), "an hour changed by sqlite3: the day rows are not read")
        let day = try periods(.day, days: true)["wg0"]?.first?.counters.rxBytes
        let firstDay: UInt64 = (1...24).reduce(0) { $0 + UInt64($1) * 1000 }
        #expect(day == firstDay + 5, "the hours are read instead")
        // The next save sums every day again.
        try store.save([], usage: [:], wallTime: Double(Self.first + 4 * 86400))
        try store.save(
            [],
            usage: [
                SeriesKey(name: "lo"): UsageEntry(
                    kind: .loopback, counters: .zero, quality: .exact,
                    hours: [
                        HourUsage(start: Self.first, counters: Counters(rxBytes: 1, txBytes: 1, rxPackets: 1, txPackets: 1), quality: .exact)
                    ])
            ], wallTime: Double(Self.first + 4 * 86400))
        #expect(try dayRowsRead())
        #expect(try periods(.month, days: true) == periods(.month, days: false))
        #expect(try periods(.day, days: true)["wg0"]?.first?.counters.rxBytes == day)
    }

    @Test func aReaderInAnotherZoneReadsTheHours() throws {
        do { try save(try open()) }
        #expect(try !dayRowsRead(zone: .utc), "days summed at +01:00 are not UTC days")
        #expect(try periods(.day, zone: .utc, days: true) == periods(.day, zone: .utc, days: false))
        #expect(try periods(.day, zone: .utc, days: true)["eth0"]?.count == 5, "UTC days of the same hours")
    }

    @Test func aRenameKeepsThemCurrent() throws {
        let store = try open()
        try save(store)
        #expect(try store.request(.rename(from: "wg0", to: "eth0")) == nil, "applied at once: this store holds the lock")
        #expect(try dayRowsRead())
        let fromDays = try periods(.day, days: true), fromHours = try periods(.day, days: false)
        #expect(fromDays == fromHours && fromDays["wg0"] == nil && fromDays.count == 1)
        #expect(try store.request(.remove("eth0")) == nil)
        let left = try periods(.day, days: true)
        #expect(left.isEmpty)
    }
}
