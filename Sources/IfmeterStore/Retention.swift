import IfmeterCore
import IfmeterSystem

/// How long a state file keeps each granularity of usage (issue 31, after
/// vnStat's HourlyDays and DailyDays): at a save, the hour rows of whole
/// local days older than `hours` are summed into day rows, and the day
/// rows of whole local months older than `days` into month rows. nil keeps
/// that granularity forever. Month rows are always kept: the file has no
/// coarser row to sum them into, and a year of them per interface is 12
/// small rows.
package struct Retention: Sendable, Hashable {
    /// Seconds of hour rows kept; nil: all.
    package var hours: Double?
    /// Seconds of day rows kept; nil: all.
    package var days: Double?

    package init(hours: Double?, days: Double?) {
        self.hours = hours
        self.days = days
    }

    /// Everything kept (what a store does unless told otherwise).
    package static let keepAll = Retention(hours: nil, days: nil)

    /// The writers' defaults: a quarter of hours (`usage --hourly` and
    /// `--begin`/`--end` with times over the last 92 days), ten years of
    /// days (`--daily` and `--top` over a decade), months forever.
    package static let defaultHours: Double = 92 * 86400
    package static let defaultDays: Double = 3650 * 86400
    package static let defaults = Retention(hours: defaultHours, days: defaultDays)

    /// The least each may be. Hours: two days, the five-minute table's 48
    /// hours, the summary picture's last 24 hours and a plan's hour limit
    /// (every other reader, billing cycles included, reads day rows as
    /// well). Days: 32 days, so that no month row ever overlaps the
    /// current billing cycle (at most 31 days long), which the plan gauges
    /// and `usage --check` read from its first local midnight.
    package static let leastHours: Double = 2 * 86400
    package static let leastDays: Double = 32 * 86400
    /// The most a finite one may be: 100 years (give none to keep all).
    package static let mostSeconds: Double = 36500 * 86400
}

extension StateStore {
    /// Adds to a day or month row of the usage table, each value stopping
    /// at 2^63-1; a sum that stopped there makes the row a lower bound
    /// (every SET expression reads the row's old values).
    static let rollSQL: String = {
        let counts = ["rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]
        let overflow = counts.map { "\($0) > 9223372036854775807 - excluded.\($0)" }.joined(separator: " OR ")
        return """
            INSERT INTO usage (name, granularity, period, kind, rx_bytes, tx_bytes, rx_packets, tx_packets, quality)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (name, granularity, period) DO UPDATE SET
                kind = excluded.kind,
                \(counts.map { "\($0) = \(saturatingSum($0))" }.joined(separator: ", ")),
                quality = CASE WHEN \(overflow) THEN \(Quality.lowerBound.rawValue) ELSE max(quality, excluded.quality) END
            """
    }()

    /// One period's rows being summed, each value stopping at 2^63-1.
    struct RollSum {
        var kind: String
        var counts: [Int64] = [0, 0, 0, 0]
        var quality = Quality.exact

        mutating func add(_ values: [UInt64], kind: String, quality: Quality) {
            self.kind = kind
            self.quality = max(self.quality, quality)
            for i in 0..<4 {
                let (sum, overflow) = counts[i].addingReportingOverflow(Int64(clamping: values[i]))
                counts[i] = overflow ? .max : sum
                if overflow { self.quality = .lowerBound }
            }
        }

        func write(_ statement: Statement, name: String, granularity: String, period: String) throws(StoreError) {
            try statement.run(
                [.text(name), .text(granularity), .text(period), .text(kind)] + counts.map { .integer($0) }
                    + [.integer(Int64(quality.rawValue))])
        }
    }

    /// `YYYY-MM-DD` and `YYYY-MM`, as the usage table keeps periods.
    static func dayLabel(_ y: Int, _ m: Int, _ d: Int) -> String { LocalZone.pad(y, 4) + "-" + LocalZone.pad(m) + "-" + LocalZone.pad(d) }
    static func monthLabel(_ y: Int, _ m: Int) -> String { LocalZone.pad(y, 4) + "-" + LocalZone.pad(m) }

    /// A month as the usage table keeps it, `YYYY-MM` (the year 1 to 9999);
    /// nil for anything else.
    static func month(_ text: String) -> (Int, Int)? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.count <= 4 && $0.allSatisfy { $0 >= "0" && $0 <= "9" } }),
            let y = Int(parts[0]), let m = Int(parts[1]), (1...9999).contains(y), (1...12).contains(m)
        else { return nil }
        return (y, m)
    }

    /// Schema 1 kept a month row beside its day rows, the same traffic
    /// twice; readers before schema 4 read only the days. Schema 4 reads
    /// month rows as usage (what `--keep-days` rolled), so a file brought
    /// to it loses those copies first (its day rows hold the traffic).
    static func dropCopiedMonths(_ db: Database) throws(StoreError) {
        var version = 0
        try db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").query { row throws(StoreError) in
            version = Int(row.text(0) ?? "") ?? 0
        }
        guard version < 4, try hasTable(db, "usage") else { return }
        try db.transaction { () throws(StoreError) in
            try db.execute("DELETE FROM usage WHERE granularity = 'month'")
        }
    }

    /// The month rows are usage from schema 4 on (before, copies of the
    /// day rows): whether this file's are.
    static func monthRowsAreUsage(_ db: Database) throws(StoreError) -> Bool {
        var version = 0
        try db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").query { row throws(StoreError) in
            version = Int(row.text(0) ?? "") ?? 0
        }
        return version >= 4
    }

    /// The boundaries `retention` rolls before at `wallTime`: the local
    /// midnight before which hour rows go into days, and the first local
    /// day of the month before which day rows go into months.
    func rollBoundaries(wallTime: Double) -> (hours: Int64?, months: (year: Int, month: Int)?) {
        guard let now = LocalZone.second(wallTime) else { return (nil, nil) }
        let hours = retention.hours.map { keep -> Int64 in
            let c = zone.civil(now - Int64(keep.rounded(.down)))
            return zone.unix(c.year, c.month, c.day)
        }
        let months = retention.days.map { keep -> (year: Int, month: Int) in
            let c = zone.civil(now - Int64(keep.rounded(.down)))
            return (c.year, c.month)
        }
        return (hours, months)
    }

    /// Rolls what `retention` no longer keeps (inside the save's
    /// transaction): hour rows of whole local days before the hours'
    /// boundary into day rows, then day rows of whole local months before
    /// the days' boundary into month rows; each summed row added to the
    /// row of its period, the rows summed deleted. One interface and one
    /// period at a time: a first roll of years of hours holds one day's
    /// sum in memory. Returns the boundaries it rolled before.
    func roll(wallTime: Double) throws(StoreError) -> RollMark {
        let (hourBoundary, monthBoundary) = rollBoundaries(wallTime: wallTime)
        let mark = RollMark(hours: hourBoundary, month: monthBoundary.map { Self.monthLabel($0.year, $0.month) })
        // Once per boundary: it moves once a local day.
        guard mark != rolled else { return mark }
        let add = try database.prepare(Self.rollSQL)
        if let hourBoundary, try Self.hasTable(database, "usage_hours") {
            try rollHours(before: hourBoundary, into: add)
        }
        if let monthBoundary, try Self.monthRowsAreUsage(database) {
            try rollDays(before: monthBoundary, into: add)
        }
        return mark
    }

    /// What the last roll that was saved rolled before.
    struct RollMark: Hashable {
        var hours: Int64?
        var month: String?
    }

    private func rollHours(before boundary: Int64, into add: Statement) throws(StoreError) {
        var names: [String] = []
        try database.prepare("SELECT DISTINCT name FROM usage_hours WHERE start < ? ORDER BY name").query([.integer(boundary)]) {
            row throws(StoreError) in
            if let name = row.text(0) { names.append(name) }
        }
        let read = try database.prepare(
            "SELECT kind, start, rx_bytes, tx_bytes, rx_packets, tx_packets, quality FROM usage_hours WHERE name = ? AND start < ? ORDER BY start")
        let delete = try database.prepare("DELETE FROM usage_hours WHERE name = ? AND start < ?")
        for name in names {
            var day: (label: String, sum: RollSum)?
            try read.query([.text(name), .integer(boundary)]) { row throws(StoreError) in
                let start = try RowCheck(row: row, path: path, what: "usage_hours row of \(RowCheck.quoted(name))")
                    .integer(1, "start", in: UsageSlice.startRange, expected: UsageSlice.startRangeText)
                let check = RowCheck(row: row, path: path, what: "usage_hours row of \(RowCheck.quoted(name)) starting \(start)")
                let values = [
                    try check.count(2, "rx_bytes"), try check.count(3, "tx_bytes"), try check.count(4, "rx_packets"),
                    try check.count(5, "tx_packets"),
                ]
                let c = zone.civil(start)
                let label = Self.dayLabel(c.year, c.month, c.day)
                if let open = day, open.label != label {
                    try open.sum.write(add, name: name, granularity: "day", period: open.label)
                    day = nil
                }
                var sum = day?.sum ?? RollSum(kind: row.text(0) ?? "other")
                sum.add(values, kind: row.text(0) ?? "other", quality: check.quality(6))
                day = (label, sum)
            }
            if let open = day { try open.sum.write(add, name: name, granularity: "day", period: open.label) }
            try delete.run([.text(name), .integer(boundary)])
        }
    }

    private func rollDays(before boundary: (year: Int, month: Int), into add: Statement) throws(StoreError) {
        var names: [String] = []
        try database.prepare("SELECT DISTINCT name FROM usage WHERE granularity = 'day' ORDER BY name").query { row throws(StoreError) in
            if let name = row.text(0) { names.append(name) }
        }
        let read = try database.prepare(
            "SELECT kind, period, rx_bytes, tx_bytes, rx_packets, tx_packets, quality FROM usage WHERE name = ? AND granularity = 'day' ORDER BY period"
        )
        let delete = try database.prepare("DELETE FROM usage WHERE name = ? AND granularity = 'day' AND period = ?")
        for name in names {
            // By month: a year's text sorts by its digits only when written
            // with four, which a crafted file need not do.
            var months: [String: RollSum] = [:]
            var rolled: [String] = []
            try read.query([.text(name)]) { row throws(StoreError) in
                let text = row.text(1) ?? ""
                guard let (y, m, _) = Self.day(text) else {
                    throw RowCheck(row: row, path: path, what: "usage row of \(RowCheck.quoted(name))")
                        .refuse("period", 1, expected: "a day YYYY-MM-DD from 0002-01-01 to 9998-12-31")
                }
                guard (y, m) < boundary else { return }
                let check = RowCheck(row: row, path: path, what: "usage row of \(RowCheck.quoted(name)) for \(RowCheck.quoted(text))")
                let values = [
                    try check.count(2, "rx_bytes"), try check.count(3, "tx_bytes"), try check.count(4, "rx_packets"),
                    try check.count(5, "tx_packets"),
                ]
                let label = Self.monthLabel(y, m)
                var sum = months[label] ?? RollSum(kind: row.text(0) ?? "other")
                sum.add(values, kind: row.text(0) ?? "other", quality: check.quality(6))
                months[label] = sum
                rolled.append(text)
            }
            for (label, sum) in months.sorted(by: { $0.key < $1.key }) {
                try sum.write(add, name: name, granularity: "month", period: label)
            }
            for period in rolled { try delete.run([.text(name), .text(period)]) }
        }
    }
}
