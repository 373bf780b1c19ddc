import Foundation
import IfmeterCore
import IfmeterStore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 31: retention per granularity. At a save, hour rows of whole local
/// days older than `--keep-hours` are summed into day rows, day rows of
/// whole local months older than `--keep-days` into month rows; nothing is
/// counted twice or lost.
@Suite(.blocking) struct RetentionTests {
    let dir: String
    static let berlinZone = TimeZone(identifier: "Europe/Berlin")!
    let berlin = LocalZone { RetentionTests.berlinZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double($0))) }

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-retention-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    var path: String { dir + "/state.db" }

    /// Unix time of a Berlin wall-clock time, from Foundation (not the code
    /// under test).
    func at(_ y: Int, _ m: Int, _ d: Int, _ h: Int = 0) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = Self.berlinZone
        return Int64(calendar.date(from: DateComponents(year: y, month: m, day: d, hour: h))!.timeIntervalSince1970)
    }

    /// The Berlin date of a Unix time, from Foundation.
    func berlinDay(_ t: Int64) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = Self.berlinZone
        let c = calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: Double(t)))
        return String(format: "%04d-%02d-%02d", c.year!, c.month!, c.day!)
    }

    func open(_ retention: Retention = .keepAll, now: Int64) throws -> StateStore {
        let store = try StateStore(path: path, host: "h", bootID: "b", now: Double(now))
        store.zone = berlin
        store.retention = retention
        return store
    }

    /// Every hour from `from` to `to` (exclusive) for two interfaces, each
    /// with its own pseudo-random counts; every 50th a lower bound.
    func hours(from: Int64, to: Int64) -> [SeriesKey: UsageEntry] {
        var rng = SplitMix64(seed: 31)
        var out: [SeriesKey: UsageEntry] = [:]
        for name in ["eth0", "ns1/wg0"] {
            var list: [HourUsage] = []
            var t = from
            var n = 0
            while t < to {
                let c = Counters(
                    rxBytes: rng.next() % 1_000_000_000, txBytes: rng.next() % 100_000_000, rxPackets: rng.next() % 1_000_000,
                    txPackets: rng.next() % 100_000)
                list.append(HourUsage(start: t, counters: c, quality: n % 50 == 7 ? .lowerBound : .exact))
                t = berlin.nextHour(t)
                n += 1
            }
            out[StateStore.key(name)] = UsageEntry(kind: .ethernet, counters: .zero, quality: .exact, hours: list)
        }
        return out
    }

    /// rx, tx, rx packets, tx packets of every slice of each interface, and
    /// the worst quality.
    func totals(_ slices: [UsageSlice]) -> [String: [UInt64]] {
        var out: [String: [UInt64]] = [:]
        for s in slices {
            var t = out[s.name] ?? [0, 0, 0, 0]
            t[0] += s.counters.rxBytes
            t[1] += s.counters.txBytes
            t[2] += s.counters.rxPackets
            t[3] += s.counters.txPackets
            out[s.name] = t
        }
        return out
    }

    func sqlite(_ sql: String) throws -> String {
        try run(["sqlite3", path, sql]).out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Hours across both of 2026's daylight-saving changes (a 23-hour and a
    /// 25-hour local day), rolled with `--keep-hours 2d`: every hour of a
    /// whole Berlin day older than the cutoff is in its day's row (summed,
    /// the worst quality), the cutoff's day and later stay hours, and the
    /// totals are the same.
    @Test func hoursOfWholeLocalDaysRollIntoDays() throws {
        let from = at(2026, 3, 27), to = at(2026, 11, 3)
        let usage = hours(from: from, to: to)
        // Noon on 3 November: the cutoff is noon on 1 November; the hours
        // before its local midnight go.
        let now = at(2026, 11, 3, 12)
        do {
            let store = try open(now: now)
            try store.save([], usage: usage, wallTime: Double(now))
        }
        let before = try StateStore.slices(path: path, zone: berlin)
        do {
            let store = try open(Retention(hours: 2 * 86400, days: nil), now: now)
            try store.save([], usage: [:], wallTime: Double(now))
        }
        let after = try StateStore.slices(path: path, zone: berlin)
        #expect(totals(after) == totals(before) && !totals(before).isEmpty, "nothing lost, nothing counted twice")
        let boundary = at(2026, 11, 1)
        let hourRows = after.filter { $0.seconds == 3600 }
        #expect(hourRows.allSatisfy { $0.start >= boundary }, "no hour of a whole day before the cutoff's is left")
        #expect(hourRows.count == 2 * 2 * 24, "1 and 2 November stay by the hour, for each interface")
        // Each day row is its Berlin day's hours, summed (Foundation's
        // days, not the code's).
        for name in ["eth0", "ns1/wg0"] {
            let mine = usage[StateStore.key(name)]!.hours.filter { $0.start < boundary }
            let expected = Dictionary(grouping: mine) { berlinDay($0.start) }
            let days = after.filter { $0.name == name && $0.seconds != 3600 }
            #expect(days.count == expected.count, "\(name): \(days.count) day rows for \(expected.count) days")
            for day in days {
                let label = berlinDay(day.start)
                let hours = expected[label] ?? []
                #expect(day.counters.rxBytes == hours.reduce(0) { $0 + $1.counters.rxBytes }, "\(name) \(label)")
                #expect(day.counters.txPackets == hours.reduce(0) { $0 + $1.counters.txPackets }, "\(name) \(label)")
                #expect(day.quality == hours.map(\.quality).max(), "\(name) \(label): the worst quality of its hours")
                #expect(day.seconds == Int64(hours.count) * 3600, "\(name) \(label): a day-long slice (\(hours.count) hours)")
            }
            #expect(days.contains { berlinDay($0.start) == "2026-03-29" && $0.seconds == 23 * 3600 })
            #expect(days.contains { berlinDay($0.start) == "2026-10-25" && $0.seconds == 25 * 3600 })
        }
    }

    /// Days of whole months older than `--keep-days` go into month rows,
    /// read back as month-long slices (March 2026 in Berlin: 31 days less
    /// an hour); the current month's and the cutoff's month's days stay.
    @Test func daysOfWholeLocalMonthsRollIntoMonths() throws {
        let from = at(2026, 1, 1), to = at(2026, 7, 20)
        let usage = hours(from: from, to: to)
        let now = at(2026, 7, 20, 12)
        do {
            let store = try open(now: now)
            try store.save([], usage: usage, wallTime: Double(now))
        }
        let before = try StateStore.slices(path: path, zone: berlin)
        do {
            let store = try open(Retention(hours: 2 * 86400, days: 32 * 86400), now: now)
            try store.save([], usage: [:], wallTime: Double(now))
        }
        let after = try StateStore.slices(path: path, zone: berlin)
        #expect(totals(after) == totals(before))
        // The cutoff is 18 June: January to May are months, June and July days.
        #expect(
            try sqlite("SELECT group_concat(period) FROM (SELECT DISTINCT period FROM usage WHERE granularity = 'month' ORDER BY period)")
                == "2026-01,2026-02,2026-03,2026-04,2026-05")
        #expect(try sqlite("SELECT min(period) FROM usage WHERE granularity = 'day'") == "2026-06-01")
        let march = after.first { $0.name == "eth0" && $0.start == at(2026, 3, 1) }
        let marchSeconds: Int64 = 31 * 86400 - 3600
        #expect(march?.seconds == marchSeconds, "March in Berlin lost an hour: \(String(describing: march))")
        let expected = usage[StateStore.key("eth0")]!.hours.filter { $0.start >= at(2026, 3, 1) && $0.start < at(2026, 4, 1) }
        #expect(march?.counters.rxBytes == expected.reduce(0) { $0 + $1.counters.rxBytes })
        #expect(march?.quality == .lowerBound, "a lower-bound hour in March makes March one")
        // The usage tables read the same by month and by year.
        let monthsBefore = PeriodCalendar(zone: berlin).group(before.filter { $0.name == "eth0" }, by: .month)
        let monthsAfter = PeriodCalendar(zone: berlin).group(after.filter { $0.name == "eth0" }, by: .month)
        #expect(monthsBefore == monthsAfter)
    }

    /// The current billing cycle (and year) reads the same after the
    /// shortest keeps: the cycle from its days and hours, the year from
    /// months, days and hours.
    @Test func theCurrentCycleAndYearReadTheSameAfterARoll() throws {
        let now = at(2026, 7, 11, 15)
        let usage = hours(from: at(2026, 1, 1), to: now)
        do {
            let store = try open(now: now)
            try store.save([], usage: usage, wallTime: Double(now))
        }
        let calendar = PeriodCalendar(zone: berlin)
        func current(_ kind: UsagePeriodKind, cycleDay: Int) throws -> [PeriodUsage] {
            // As the plan gauges read: 32 days back.
            let slices = try StateStore.slices(path: path, zone: berlin, since: now - 32 * 86400).filter { $0.name == "eth0" }
            return calendar.group(slices, by: kind, cycleDay: cycleDay).filter { $0.period.start <= now && now < $0.period.end }
        }
        let cycles = try (1...31).map { try current(.cycle, cycleDay: $0) }
        let year = calendar.group(try StateStore.slices(path: path, zone: berlin).filter { $0.name == "eth0" }, by: .year)
        do {
            let store = try open(Retention(hours: Retention.leastHours, days: Retention.leastDays), now: now)
            try store.save([], usage: [:], wallTime: Double(now))
        }
        #expect(try sqlite("SELECT count(*) FROM usage WHERE granularity = 'month'") != "0")
        #expect(try (1...31).map { try current(.cycle, cycleDay: $0) } == cycles, "every cycle start day")
        #expect(calendar.group(try StateStore.slices(path: path, zone: berlin).filter { $0.name == "eth0" }, by: .year) == year)
    }

    /// A second save rolls nothing more, and so does another writer's
    /// first save at the same time (a store that did not roll before).
    @Test func aRollIsDoneOnce() throws {
        let now = at(2026, 7, 20, 12)
        do {
            let store = try open(now: now)
            try store.save([], usage: hours(from: at(2026, 4, 1), to: now), wallTime: Double(now))
        }
        let dump = "SELECT * FROM usage ORDER BY name, granularity, period; SELECT * FROM usage_hours ORDER BY name, start;"
        let retention = Retention(hours: 2 * 86400, days: 32 * 86400)
        do {
            let store = try open(retention, now: now)
            try store.save([], usage: [:], wallTime: Double(now))
            let once = try sqlite(dump)
            try store.save([], usage: [:], wallTime: Double(now + 60))
            #expect(try sqlite(dump) == once)
            try store.markStopped(wallTime: Double(now + 60))
        }
        let once = try sqlite(dump)
        let store = try open(retention, now: now + 120)
        try store.save([], usage: [:], wallTime: Double(now + 120))
        #expect(try sqlite(dump) == once, "a fresh writer finds nothing more to roll")
    }

    /// Rows older than the cutoff are rolled; those of the cutoff's own day
    /// (or month) and later are not, to the hour.
    @Test func theCutoffIsRespected() throws {
        let now = at(2026, 7, 20, 0) + 30 // 30 s after midnight
        do {
            let store = try open(now: now)
            try store.save([], usage: hours(from: at(2026, 7, 15), to: at(2026, 7, 20)), wallTime: Double(now))
        }
        do {
            // 3 days: the cutoff is 17 July 00:00:30, so 15 and 16 July go.
            let store = try open(Retention(hours: 3 * 86400, days: nil), now: now)
            try store.save([], usage: [:], wallTime: Double(now))
        }
        #expect(try sqlite("SELECT group_concat(period) FROM usage WHERE name = 'eth0'") == "2026-07-15,2026-07-16")
        #expect(try sqlite("SELECT min(start) FROM usage_hours") == String(at(2026, 7, 17)))
        do {
            // 29 seconds later nothing moved: the cutoff is still on 17 July.
            let store = try open(Retention(hours: 3 * 86400 + 29, days: nil), now: now)
            try store.save([], usage: [:], wallTime: Double(now))
        }
        #expect(try sqlite("SELECT min(start) FROM usage_hours") == String(at(2026, 7, 17)))
        do {
            // 31 seconds more: the cutoff is 16 July 23:59:59; 16 July is not whole.
            let store = try open(Retention(hours: 3 * 86400 + 31, days: nil), now: now)
            try store.save([], usage: [:], wallTime: Double(now))
        }
        #expect(try sqlite("SELECT count(*) FROM usage_hours WHERE start < \(at(2026, 7, 17))") == "0")
    }

    /// Sums stop at 2^63-1 per stored value and make the row a lower bound,
    /// in Swift (hours of one day) and in SQL (added to a row there).
    @Test func sumsStopAtTheTopAndAreLowerBounds() throws {
        let now = at(2026, 7, 20, 12)
        let top = UInt64(Int64.max)
        let day = at(2026, 7, 1)
        do {
            let store = try open(now: now)
            let hours = [
                HourUsage(start: day, counters: Counters(rxBytes: top, txBytes: 1, rxPackets: 1, txPackets: 1), quality: .exact),
                HourUsage(start: day + 3600, counters: Counters(rxBytes: 5, txBytes: 1, rxPackets: 1, txPackets: 1), quality: .exact),
                HourUsage(start: day + 86400, counters: Counters(rxBytes: 5, txBytes: 1, rxPackets: 1, txPackets: 1), quality: .wrapCorrected),
            ]
            try store.save(
                [], usage: [SeriesKey(name: "eth0"): UsageEntry(kind: .ethernet, counters: .zero, quality: .exact, hours: hours)],
                wallTime: Double(now))
        }
        // A day row already there for 2 July, near the top.
        _ = try sqlite("INSERT INTO usage VALUES ('eth0', 'day', '2026-07-02', 'ethernet', 1, \(Int64.max), 0, 0, 0)")
        do {
            let store = try open(Retention(hours: 2 * 86400, days: nil), now: now)
            try store.save([], usage: [:], wallTime: Double(now))
        }
        let rows = try sqlite("SELECT period, rx_bytes, tx_bytes, rx_packets, quality FROM usage ORDER BY period")
        #expect(rows == "2026-07-01|\(Int64.max)|2|2|2\n2026-07-02|6|\(Int64.max)|1|2", "\(rows)")
    }

    /// A month row that is not a month is refused by readers and writers
    /// alike, naming the row; one of a file before schema 4 (schema 1's
    /// copy of its days) is not read.
    @Test func aBadMonthRowIsRefused() throws {
        let now = at(2026, 7, 20, 12)
        do { _ = try open(now: now) }
        _ = try sqlite("INSERT INTO usage VALUES ('eth0', 'month', '2026-13', 'ethernet', 1, 1, 1, 1, 0)")
        for attempt in 0..<2 {
            do {
                if attempt == 0 { _ = try StateStore.slices(path: path, zone: berlin) } else { _ = try open(now: now) }
                Issue.record("a month 2026-13 was read")
            } catch let error as StoreError {
                guard case .corrupt(_, let detail) = error else {
                    Issue.record("\(error)")
                    continue
                }
                #expect(detail.contains("usage row of 'eth0'") && detail.contains("a month YYYY-MM from 0002-01 to 9998-12"), "\(detail)")
            }
        }
        _ = try sqlite("UPDATE usage SET period = '2026-05'; UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        #expect(try StateStore.slices(path: path, zone: berlin).isEmpty, "schema 3's month rows were copies")
    }

    /// A first roll of five years of hours of 20 interfaces (876,000 rows)
    /// holds a day at a time: the process grows by far less than the rows
    /// would take in memory, and the totals are the same.
    @Test func aFirstRollOfFiveYearsIsDoneInBoundedMemory() throws {
        let now = at(2026, 1, 1, 12)
        let first = at(2021, 1, 1)
        do { _ = try open(now: now) }
        // 20 interfaces x 43,800 hours, made by SQLite itself.
        _ = try sqlite(
            """
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 43799),
                 k(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM k WHERE j < 19)
            INSERT INTO usage_hours SELECT 'eth' || j, \(first) + i * 3600, 3600, 'ethernet', i * 7 + j, i + j, i % 100, j, 0 FROM n, k;
            """)
        let sums =
            "SELECT sum(rx_bytes), sum(tx_bytes), sum(rx_packets), sum(tx_packets) FROM (SELECT * FROM usage_hours UNION ALL SELECT name, 0, 0, kind, rx_bytes, tx_bytes, rx_packets, tx_packets, quality FROM usage)"
        let before = try sqlite(sums)
        #expect(try sqlite("SELECT count(*) FROM usage_hours") == "876000")
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let peakBefore = usage.ru_maxrss
        do {
            let store = try open(Retention(hours: Retention.defaultHours, days: 32 * 86400), now: now)
            try store.save([], usage: [:], wallTime: Double(now))
        }
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let grown = (usage.ru_maxrss - peakBefore) * 1024
        #expect(try sqlite(sums) == before, "the same totals")
        let last = first + 43_799 * 3600
        #expect(try sqlite("SELECT count(*) FROM usage_hours") == String(20 * ((last - at(2025, 10, 1)) / 3600 + 1)), "92 days by the hour")
        // 876,000 slices would take over 100 MB; a day at a time, SQLite's cache.
        #expect(grown < 40 << 20, "grew \(grown) bytes")
    }
}
