import IfmeterCore
import IfmeterSystem

/// One local hour's usage of an interface, to add to the state file.
package struct HourUsage: Sendable, Hashable {
    /// Unix time the local hour starts.
    package var start: Int64
    package var counters: Counters
    package var quality: Quality
    /// The same traffic by five-minute slot within the hour (schema 3);
    /// empty for an hour older than the five-minute table keeps.
    package var fiveMinutes: [FiveMinuteUsage]

    package init(start: Int64, counters: Counters, quality: Quality, fiveMinutes: [FiveMinuteUsage] = []) {
        self.start = start
        self.counters = counters
        self.quality = quality
        self.fiveMinutes = fiveMinutes
    }
}

extension StateStore {
    /// Tables schema 2 adds: usage per local hour, and plans.
    static let schemaV2 = """
        -- Usage per local hour (start as a Unix time; seconds is 3600, or longer for
        -- a span kept from schema 1's days); quality 0 exact, 1 wrap-corrected, 2 lower bound.
        CREATE TABLE IF NOT EXISTS usage_hours (
            name TEXT NOT NULL, start INTEGER NOT NULL, seconds INTEGER NOT NULL, kind TEXT NOT NULL,
            rx_bytes INTEGER NOT NULL, tx_bytes INTEGER NOT NULL, rx_packets INTEGER NOT NULL,
            tx_packets INTEGER NOT NULL, quality INTEGER NOT NULL, PRIMARY KEY (name, start));
        CREATE TABLE IF NOT EXISTS plans (
            pattern TEXT PRIMARY KEY, cycle_start_day INTEGER NOT NULL CHECK (cycle_start_day BETWEEN 1 AND 31),
            quota_bytes INTEGER, direction TEXT NOT NULL CHECK (direction IN ('rx', 'tx', 'both')));
        """

    /// Brings an older file to the current schema: adds the tables each
    /// later schema added (schema 1's day and month rows stay and are read
    /// as day-long spans; a schema 4 file gets the outside totals' table,
    /// empty, so its outside counters start where it is first saved).
    static func migrate(_ db: Database) throws(StoreError) {
        var version = 0
        try db.prepare("SELECT value FROM meta WHERE key = 'schema_version'").query { row throws(StoreError) in
            version = Int(row.text(0) ?? "") ?? 0
        }
        guard version < schemaVersion else { return }
        try db.transaction { () throws(StoreError) in
            try db.execute(schemaV2 + schemaV3 + schemaV4 + schemaV5)
            try db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)").run([.text(String(schemaVersion))])
        }
    }

    static let hourSQL = """
        INSERT INTO usage_hours (name, start, seconds, kind, rx_bytes, tx_bytes, rx_packets, tx_packets, quality)
        VALUES (?, ?, 3600, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (name, start) DO UPDATE SET
            kind = excluded.kind,
            rx_bytes = \(saturatingSum("rx_bytes")), tx_bytes = \(saturatingSum("tx_bytes")),
            rx_packets = \(saturatingSum("rx_packets")), tx_packets = \(saturatingSum("tx_packets")),
            quality = max(quality, excluded.quality)
        """

    /// `column + excluded.column`, stopping at 2^63-1: SQLite would make an
    /// integer overflow a real, which readers refuse. (Both are at least 0:
    /// what is added is clamped, what is there was read back as a count.)
    static func saturatingSum(_ column: String) -> String {
        "CASE WHEN \(column) > 9223372036854775807 - excluded.\(column) THEN 9223372036854775807 ELSE \(column) + excluded.\(column) END"
    }

    /// Adds usage to its hours (inside the save's transaction), and sums
    /// the local days that ended since the last save into their day rows
    /// (every day, when those were not current).
    func addHours(_ usage: [SeriesKey: UsageEntry], wallTime: Double, zone: LocalZone = .system) throws(StoreError) {
        let add = try database.prepare(Self.hourSQL)
        var slots: [(key: SeriesKey, kind: InterfaceKind, slot: FiveMinuteUsage)] = []
        for (key, entry) in usage.sorted(by: { $0.key < $1.key }) {
            let hours =
                entry.hours.isEmpty
                ? [HourUsage(start: zone.hourStart(Int64(wallTime.rounded(.down))), counters: entry.counters, quality: entry.quality)]
                : entry.hours
            for h in hours.sorted(by: { $0.start < $1.start }) {
                // An exact zero adds nothing: an idle interface writes no
                // row (a churned veth peer would leave one per hour).
                let c = h.counters
                if h.quality == .exact, c.rxBytes == 0, c.txBytes == 0, c.rxPackets == 0, c.txPackets == 0 { continue }
                slots += h.fiveMinutes.sorted { $0.start < $1.start }.map { (key, entry.kind, $0) }
                try add.run([
                    .text(key.description), .integer(h.start), .text(entry.kind.rawValue),
                    .integer(Int64(clamping: c.rxBytes)), .integer(Int64(clamping: c.txBytes)),
                    .integer(Int64(clamping: c.rxPackets)), .integer(Int64(clamping: c.txPackets)),
                    .integer(Int64(h.quality.rawValue)),
                ])
            }
        }
        try addFiveMinutes(slots, wallTime: wallTime)
        try summarizeDays(wallTime: wallTime, zone: zone)
    }

    static func hasTable(_ db: Database, _ name: String) throws(StoreError) -> Bool {
        var found = false
        try db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").query([.text(name)]) { _ throws(StoreError) in
            found = true
        }
        return found
    }

    /// Opens a state file read-only (it may be in use), or says why not.

    /// Every stored slice of usage (or those starting at `since` or later):
    /// the hours, the days (schema 1's, and hours rolled by `retention`) as
    /// day-long spans from their local midnight in `zone`, and the months
    /// (days rolled, schema 4) as month-long spans. Read-only.
    /// `verify`: check the pages and schema first (`usage`); a reader that
    /// comes back every save (serve's plan gauges) skips that.
    package static func slices(path: String, zone: LocalZone = .system, since: Int64? = nil, verify: Bool = true) throws(StoreError) -> [UsageSlice] {
        try reading(path, verify: verify) { db throws(StoreError) in try slices(db, path: path, zone: zone, since: since) }
    }

    /// Refuses (as bad data naming the row) a slice whose start is outside
    /// `UsageSlice.startRange`, whose length is not 1 s to 366 days, or
    /// whose byte or packet count is not a whole number from 0 to 2^63-1;
    /// a quality this version does not know reads as a lower bound.
    ///
    /// `suspectsOnly`: of the hours, read only the rows SQLite finds outside
    /// those bounds (they then fail the same check): how a writer checks a
    /// file at start without reading years of rows into memory.
    /// `hours`: false reads only the day and month rows (the caller reads
    /// the hours its own way); `only`: those of this stored name.
    static func slices(
        _ db: Database, path: String, zone: LocalZone, since: Int64?, suspectsOnly: Bool = false, hours: Bool = true,
        name only: String? = nil
    ) throws(StoreError) -> [UsageSlice] {
        var slices: [UsageSlice] = []
        func counters(_ check: RowCheck, _ from: Int32) throws(StoreError) -> Counters {
            Counters(
                rxBytes: try check.count(from, "rx_bytes"), txBytes: try check.count(from + 1, "tx_bytes"),
                rxPackets: try check.count(from + 2, "rx_packets"), txPackets: try check.count(from + 3, "tx_packets"))
        }
        do throws(StoreError) {
            // Month rows are usage from schema 4 on (days `--keep-days`
            // rolled); before, schema 1's copies of its days.
            let months = try monthRowsAreUsage(db)
            try db.prepare(
                "SELECT name, kind, period, rx_bytes, tx_bytes, rx_packets, tx_packets, quality, granularity FROM usage WHERE (granularity = 'day'"
                    + (months ? " OR granularity = 'month'" : "") + ")" + (only == nil ? "" : " AND name = ?") + " ORDER BY name, granularity, period"
            ).query(only.map { [.text($0)] } ?? []) { row throws(StoreError) in
                let start: Int64, end: Int64
                if row.text(8) == "month" {
                    guard let (y, m) = Self.month(row.text(2) ?? ""), UsageSlice.startRange.contains(LocalZone.days(y, m, 1) * 86400) else {
                        throw RowCheck(row: row, path: db.path, what: "usage row of \(RowCheck.quoted(row.text(0)))")
                            .refuse("period", 2, expected: "a month YYYY-MM from 0002-01 to 9998-12")
                    }
                    start = zone.unix(y, m, 1)
                    end = m == 12 ? zone.unix(y + 1, 1, 1) : zone.unix(y, m + 1, 1)
                } else {
                    guard let (y, m, d) = Self.day(row.text(2) ?? ""),
                        UsageSlice.startRange.contains(LocalZone.days(y, m, d) * 86400)
                    else {
                        throw RowCheck(row: row, path: db.path, what: "usage row of \(RowCheck.quoted(row.text(0)))")
                            .refuse("period", 2, expected: "a day YYYY-MM-DD from 0002-01-01 to 9998-12-31")
                    }
                    start = zone.unix(y, m, d)
                    let (ny, nm, nd) = PeriodCalendar.nextDay(y, m, d)
                    end = zone.unix(ny, nm, nd)
                }
                let check = RowCheck(
                    row: row, path: db.path, what: "usage row of \(RowCheck.quoted(row.text(0))) for \(RowCheck.quoted(row.text(2)))")
                if let since, start < since { return }
                slices.append(
                    UsageSlice(
                        name: row.text(0) ?? "?", kind: InterfaceKind(rawValue: row.text(1) ?? "") ?? .other, start: start,
                        seconds: end - start, counters: try counters(check, 3), quality: check.quality(7)))
            }
            if hours, try hasTable(db, "usage_hours") {
                try db.prepare(
                    "SELECT name, kind, start, seconds, rx_bytes, tx_bytes, rx_packets, tx_packets, quality FROM usage_hours WHERE start >= ?"
                        + (suspectsOnly ? " AND NOT (\(Self.plausibleHour))" : "") + (only == nil ? "" : " AND name = ?") + " ORDER BY name, start"
                ).query([.integer(since ?? Int64.min)] + (only.map { [.text($0)] } ?? [])) { row throws(StoreError) in
                    let name = RowCheck.quoted(row.text(0))
                    let start = try RowCheck(row: row, path: db.path, what: "usage_hours row of \(name)")
                        .integer(2, "start", in: UsageSlice.startRange, expected: UsageSlice.startRangeText)
                    let check = RowCheck(row: row, path: db.path, what: "usage_hours row of \(name) starting \(start)")
                    let seconds = try check.integer(
                        3, "seconds", in: 1...UsageSlice.longestSeconds, expected: "a length in seconds from 1 to 31622400 (366 days)")
                    slices.append(
                        UsageSlice(
                            name: row.text(0) ?? "?", kind: InterfaceKind(rawValue: row.text(1) ?? "") ?? .other, start: start,
                            seconds: seconds, counters: try counters(check, 4), quality: check.quality(8)))
                }
            }
        } catch {
            throw StoreError.tableFailure(error, path: path)
        }
        return slices
    }

    /// An hour row every check of `slices` passes, in SQL.
    static var plausibleHour: String {
        let counts = ["rx_bytes", "tx_bytes", "rx_packets", "tx_packets"].map { "typeof(\($0)) = 'integer' AND \($0) >= 0" }
        return
            ([
                "typeof(start) = 'integer' AND start BETWEEN \(UsageSlice.startRange.lowerBound) AND \(UsageSlice.startRange.upperBound)",
                "typeof(seconds) = 'integer' AND seconds BETWEEN 1 AND \(UsageSlice.longestSeconds)",
            ] + counts).joined(separator: " AND ")
    }

    /// Checks every row a reader checks (plans and their limits, the
    /// five-minute, hour and day rows), keeping none: a writer refuses a
    /// file `usage` would call corrupt, with the same message, before it
    /// writes a byte (issue 29's finding 6).
    static func checkRows(_ db: Database) throws(StoreError) {
        // Checked when its writer opened it (`Database.isBorrowed`).
        if db.isBorrowed { return }
        do throws(StoreError) {
            if try hasTable(db, "plans") { _ = try readPlans(db) }
            _ = try fiveMinuteSlices(db)
            _ = try slices(db, path: db.path, zone: .utc, since: nil, suspectsOnly: true)
        } catch {
            throw StoreError.tableFailure(error, path: db.path)
        }
    }

    /// A calendar date as schema 1 stored it, `YYYY-MM-DD` (the year 1 to
    /// 9999, a day its month has); nil for anything else.
    static func day(_ text: String) -> (Int, Int, Int)? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty && $0.count <= 4 && $0.allSatisfy { $0 >= "0" && $0 <= "9" } }),
            let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]),
            (1...9999).contains(y), (1...12).contains(m), (1...LocalZone.daysInMonth(y, m)).contains(d)
        else { return nil }
        return (y, m, d)
    }

    /// The plans of a state file, sorted by pattern. Read-only.
    package static func plans(path: String, verify: Bool = true) throws(StoreError) -> [Plan] {
        try reading(path, verify: verify) { db throws(StoreError) in
            do throws(StoreError) {
                guard try hasTable(db, "plans") else { return [] }
                // A file `usage` calls corrupt is called so here too.
                if verify { try checkRows(db) }
                return try readPlans(db)
            } catch {
                throw StoreError.tableFailure(error, path: path)
            }
        }
    }

    /// Refuses (as bad data naming the plan) a cycle start day that is not
    /// 1 to 31 and a quota that is not NULL or 0 to 2^63-1 bytes (the
    /// table's CHECK says so too, but a file may have been made without
    /// it); a direction this version does not know reads as both.
    static func readPlans(_ db: Database) throws(StoreError) -> [Plan] {
        let limits = try readLimits(db)
        var plans: [Plan] = []
        try db.prepare("SELECT pattern, cycle_start_day, quota_bytes, direction FROM plans ORDER BY pattern").query { row throws(StoreError) in
            let check = RowCheck(row: row, path: db.path, what: "plans row \(RowCheck.quoted(row.text(0)))")
            let day = try check.integer(1, "cycle_start_day", in: 1...31, expected: "a day of the month from 1 to 31")
            plans.append(
                Plan(
                    pattern: row.text(0) ?? "", cycleStartDay: Int(day),
                    quotaBytes: row.isNull(2) ? nil : try check.count(2, "quota_bytes"),
                    direction: Plan.Direction(rawValue: row.text(3) ?? "") ?? .both))
            plans[plans.count - 1].limits = limits[row.text(0) ?? ""] ?? []
        }
        return plans
    }

    /// The stored interface names of a state file (with totals or usage),
    /// and the kind each one of the interfaces table was last classified
    /// as: one seen but idle is there without usage, its kind known all the
    /// same (a kind this version does not know is not guessed). Read-only.
    package static func storedInterfaces(path: String, verify: Bool = true) throws(StoreError)
        -> (names: [String], kinds: [String: InterfaceKind])
    {
        try reading(path, verify: verify) { db throws(StoreError) in
            do throws(StoreError) {
                var kinds: [String: InterfaceKind] = [:]
                if try hasTable(db, "interfaces") {
                    try db.prepare("SELECT name, kind FROM interfaces").query { row throws(StoreError) in
                        if let name = row.text(0), let kind = row.text(1).flatMap(InterfaceKind.init(rawValue:)) { kinds[name] = kind }
                    }
                }
                return (try names(db), kinds)
            } catch {
                throw StoreError.tableFailure(error, path: path)
            }
        }
    }

    static func names(_ db: Database) throws(StoreError) -> [String] {
        var names = Set<String>()
        for (table, sql) in [
            ("interfaces", "SELECT name FROM interfaces"), ("usage", "SELECT DISTINCT name FROM usage"),
        ] where try hasTable(db, table) {
            try db.prepare(sql).query { row throws(StoreError) in
                if let name = row.text(0) { names.insert(name) }
            }
        }
        names.formUnion(try hourNames(db))
        return names.sorted()
    }

    /// The plans of this (open) state file.
    package func plans() throws(StoreError) -> [Plan] { try Self.readPlans(database) }

    /// The slices starting at `since` or later, read through this store's
    /// own connection: a writer must not open and close other descriptors
    /// of its file (closing one drops every POSIX lock the process holds on
    /// it, SQLite's included, and another process's `plan set` would then
    /// take itself for the last connection and delete the WAL).
    /// The hours are found through the (name, start) key, one interface at
    /// a time: the plan gauges read a month of them after every save, which
    /// must not scan five years of rows.
    package func slices(since: Int64, zone: LocalZone = .system) throws(StoreError) -> [UsageSlice] {
        let names = try Self.hourNames(database)
        return try Self.slices(database, path: path, zone: zone, since: since, hours: false)
            + Self.hourSlices(database, names: names, from: since)
    }

    /// The stored names and kinds, through this store's connection.
    package func storedInterfaces() throws(StoreError) -> (names: [String], kinds: [String: InterfaceKind]) {
        var kinds: [String: InterfaceKind] = [:]
        try database.prepare("SELECT name, kind FROM interfaces").query { row throws(StoreError) in
            if let name = row.text(0), let kind = row.text(1).flatMap(InterfaceKind.init(rawValue:)) { kinds[name] = kind }
        }
        return (try Self.names(database), kinds)
    }

    /// The stored interface names (those with totals or usage).
    package func interfaceNames() throws(StoreError) -> [String] { try Self.names(database) }

    /// Adds or replaces a plan.
    package func setPlan(_ plan: Plan) throws(StoreError) {
        try database.transaction { () throws(StoreError) in
            try database.prepare(
                "INSERT OR REPLACE INTO plans (pattern, cycle_start_day, quota_bytes, direction) VALUES (?, ?, ?, ?)"
            ).run([
                .text(plan.pattern), .integer(Int64(plan.cycleStartDay)),
                plan.quotaBytes.map { .integer(Int64(clamping: $0)) } ?? .null, .text(plan.direction.rawValue),
            ])
            try writeLimits(plan)
        }
    }

    /// Removes a plan; returns whether there was one.
    package func removePlan(_ pattern: String) throws(StoreError) -> Bool {
        let existed = try plans().contains { $0.pattern == pattern }
        guard existed else { return false }
        try database.transaction { () throws(StoreError) in
            try database.prepare("DELETE FROM plans WHERE pattern = ?").run([.text(pattern)])
            try database.prepare("DELETE FROM plan_limits WHERE pattern = ?").run([.text(pattern)])
        }
        return true
    }
}
