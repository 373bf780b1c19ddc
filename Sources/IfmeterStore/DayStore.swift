import IfmeterCore
import IfmeterSystem

/// Usage per local day (schema 4): the hour rows summed by the writer, so
/// that `usage`'s day, month, year, cycle and top tables read one row per
/// interface per day instead of 24 (a five-year file: 36,500 rows instead
/// of 876,000), and `--check` a month of them.
///
/// The day rows are a summary of the hour rows before meta `days_through`
/// (a local midnight) and never more: a writer sums each local day once,
/// at its first save after that day ended, so a save writes no day row
/// (the write budget of a save stays a few pages). Triggers on
/// `usage_hours` remove `days_through` at any change of an hour row before
/// it, by ifmeter or by anyone with sqlite3; the next save sums every day
/// again. A reader uses the day rows only when `days_through` is there and
/// each row is a local day in its own zone (a writer in another zone summed
/// other days), and reads the hours from `days_through` on; otherwise it
/// reads every hour, as before.
extension StateStore {
    static let schemaV4 = """
        -- Usage per local day (start its local midnight, seconds its length), summed
        -- from the usage_hours before meta days_through by the writer (current only
        -- while that key is there). Counts are unsigned 64-bit values stored as their
        -- signed bit pattern.
        CREATE TABLE IF NOT EXISTS usage_days (
            name TEXT NOT NULL, start INTEGER NOT NULL, seconds INTEGER NOT NULL, kind TEXT NOT NULL,
            rx_bytes INTEGER NOT NULL, tx_bytes INTEGER NOT NULL, rx_packets INTEGER NOT NULL,
            tx_packets INTEGER NOT NULL, quality INTEGER NOT NULL, PRIMARY KEY (name, start)) WITHOUT ROWID;
        CREATE TRIGGER IF NOT EXISTS usage_hours_inserted AFTER INSERT ON usage_hours
            WHEN NEW.start < (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'days_through')
            BEGIN DELETE FROM meta WHERE key = 'days_through'; END;
        CREATE TRIGGER IF NOT EXISTS usage_hours_updated AFTER UPDATE ON usage_hours
            WHEN min(OLD.start, NEW.start) < (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'days_through')
            BEGIN DELETE FROM meta WHERE key = 'days_through'; END;
        CREATE TRIGGER IF NOT EXISTS usage_hours_deleted AFTER DELETE ON usage_hours
            WHEN OLD.start < (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'days_through')
            BEGIN DELETE FROM meta WHERE key = 'days_through'; END;
        """

    /// The local midnight before which the day rows sum every hour row; nil
    /// when they do not (never summed, or an hour before it changed since).
    static func daysThrough(_ db: Database) throws(StoreError) -> Int64? {
        guard try hasTable(db, "usage_days") else { return nil }
        var through: Int64?
        try db.prepare("SELECT value FROM meta WHERE key = 'days_through'").query { row throws(StoreError) in
            through = row.text(0).flatMap { Int64($0) }
        }
        return through
    }

    /// Whether the day rows are current.
    static func daysCurrent(_ db: Database) throws(StoreError) -> Bool { try daysThrough(db) != nil }

    /// At a save (in its transaction): the days that ended since the last
    /// one summed, or every day when the day rows are not current; then
    /// `days_through` is this local midnight.
    func summarizeDays(wallTime: Double, zone: LocalZone) throws(StoreError) {
        guard try Self.hasTable(database, "usage_days"), let now = LocalZone.second(wallTime) else { return }
        let midnight = PeriodCalendar(zone: zone).period(.day, containing: now).start
        if let through = try Self.daysThrough(database) {
            guard through < midnight else { return }
            try Self.summarizeDays(database, .range(through, midnight), through: midnight, zone: zone)
        } else {
            try Self.summarizeDays(database, .all, through: midnight, zone: zone)
        }
    }

    /// What `summarizeDays` sums again.
    enum DayScope {
        case all
        /// The days starting in [from, to), of every interface.
        case range(Int64, Int64)
        /// Every day of these interfaces (one renamed into another).
        case names([String])
    }

    /// Sums the hour rows before `through` into day rows, for `scope`
    /// (whose day rows are replaced), by stored name and local midnight;
    /// then `days_through` is `through`. Sums are unsigned and stop at
    /// 2^64-1, the day then a lower bound (as the hours sum in a reader).
    static func summarizeDays(_ db: Database, _ scope: DayScope, through: Int64, zone: LocalZone) throws(StoreError) {
        guard try hasTable(db, "usage_days") else { return }
        let calendar = PeriodCalendar(zone: zone)
        let insert = try db.prepare(
            "INSERT OR REPLACE INTO usage_days (name, start, seconds, kind, rx_bytes, tx_bytes, rx_packets, tx_packets, quality) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        var day: (name: String, period: UsagePeriod, kind: String, usage: PeriodUsage)?
        func flush() throws(StoreError) {
            guard let d = day else { return }
            let c = d.usage.counters
            // Unsigned, as their bit pattern (a day of hours of up to
            // 2^63-1 each sums past what a signed row holds).
            try insert.run([
                .text(d.name), .integer(d.period.start), .integer(d.period.end - d.period.start), .text(d.kind),
                .integer(Int64(bitPattern: c.rxBytes)), .integer(Int64(bitPattern: c.txBytes)),
                .integer(Int64(bitPattern: c.rxPackets)), .integer(Int64(bitPattern: c.txPackets)),
                .integer(Int64(d.usage.quality.rawValue)),
            ])
            day = nil
        }
        /// Folds hour rows (ordered by name, start) into days.
        func fold(_ statement: Statement, _ values: [Statement.Value]) throws(StoreError) {
            try statement.query(values) { row throws(StoreError) in
                let name = row.text(0) ?? ""
                let start = row.int(1)
                if let d = day, d.name != name || start >= d.period.end || start < d.period.start { try flush() }
                if day == nil {
                    let period = calendar.period(.day, containing: start)
                    day = (name, period, "", PeriodUsage(period: period, counters: .zero, quality: .exact))
                }
                let counts = (2...5).map { UInt64(clamping: max(0, row.isInteger(Int32($0)) ? row.int(Int32($0)) : 0)) }
                day?.kind = row.text(6) ?? "other"
                day?.usage.add(
                    UsageSlice(
                        name: name, kind: .other, start: start, seconds: 3600,
                        counters: Counters(rxBytes: counts[0], txBytes: counts[1], rxPackets: counts[2], txPackets: counts[3]),
                        quality: row.isInteger(7) ? Quality(rawValue: Int(row.int(7))) ?? .lowerBound : .lowerBound))
            }
            try flush()
        }
        let columns = "name, start, rx_bytes, tx_bytes, rx_packets, tx_packets, kind, quality"
        switch scope {
        case .range(let from, let to):
            try db.prepare("DELETE FROM usage_days WHERE start >= ? AND start < ?").run([.integer(from), .integer(to)])
            let hours = try db.prepare("SELECT \(columns) FROM usage_hours WHERE name = ? AND start >= ? AND start < ? ORDER BY start")
            for name in try hourNames(db) { try fold(hours, [.text(name), .integer(from), .integer(min(to, through))]) }
        case .names(let names):
            let delete = try db.prepare("DELETE FROM usage_days WHERE name = ?")
            let hours = try db.prepare("SELECT \(columns) FROM usage_hours WHERE name = ? AND start < ? ORDER BY start")
            for name in names {
                try delete.run([.text(name)])
                try fold(hours, [.text(name), .integer(through)])
            }
        case .all:
            try db.execute("DELETE FROM usage_days")
            try fold(try db.prepare("SELECT \(columns) FROM usage_hours WHERE start < ? ORDER BY name, start"), [.integer(through)])
        }
        try db.prepare(Self.setMetaSQL).run([.text("days_through"), .text(String(through))])
    }

    /// The distinct names of the hour rows, one seek of the (name, start)
    /// key each: not a scan of every row.
    static func hourNames(_ db: Database) throws(StoreError) -> [String] {
        guard try hasTable(db, "usage_hours") else { return [] }
        var names: [String] = []
        let next = try db.prepare("SELECT name FROM usage_hours WHERE name > ? ORDER BY name LIMIT 1")
        var last = ""
        while true {
            var found: String?
            try next.query([.text(last)]) { row throws(StoreError) in found = row.text(0) }
            guard let name = found else { return names }
            names.append(name)
            last = name
        }
    }

    /// The day rows as day-long slices (those starting in [`from`, `before`)),
    /// each checked as an hour row is; nil when they are not current, or
    /// one is not a local day in `zone` (summed in another zone): the
    /// caller reads the hours then. `name`: that stored name's alone.
    static func daySlices(
        _ db: Database, zone: LocalZone, from: Int64? = nil, before: Int64?, name: String? = nil
    ) throws(StoreError) -> [UsageSlice]? {
        guard try daysCurrent(db) else { return nil }
        var slices: [UsageSlice] = []
        var foreign = false
        try db.prepare(
            "SELECT name, kind, start, seconds, rx_bytes, tx_bytes, rx_packets, tx_packets, quality FROM usage_days WHERE start >= ? AND start < ?"
                + (name == nil ? "" : " AND name = ?") + " ORDER BY name, start"
        ).query([.integer(from ?? Int64.min), .integer(before ?? Int64.max)] + (name.map { [.text($0)] } ?? [])) { row throws(StoreError) in
            guard !foreign else { return }
            let start = try RowCheck(row: row, path: db.path, what: "usage_days row of \(RowCheck.quoted(row.text(0)))")
                .integer(2, "start", in: UsageSlice.startRange, expected: UsageSlice.startRangeText)
            let check = RowCheck(row: row, path: db.path, what: "usage_days row of \(RowCheck.quoted(row.text(0))) starting \(start)")
            let seconds = try check.integer(3, "seconds", in: 1...(26 * 3600), expected: "a day's length in seconds from 1 to 93600")
            guard isLocalDay(zone, start: start, seconds: seconds) else {
                foreign = true
                return
            }
            slices.append(
                UsageSlice(
                    name: row.text(0) ?? "?", kind: InterfaceKind(rawValue: row.text(1) ?? "") ?? .other, start: start, seconds: seconds,
                    counters: Counters(
                        rxBytes: try check.unsigned(4, "rx_bytes"), txBytes: try check.unsigned(5, "tx_bytes"),
                        rxPackets: try check.unsigned(6, "rx_packets"), txPackets: try check.unsigned(7, "tx_packets")),
                    quality: check.quality(8)))
        }
        return foreign ? nil : slices
    }

    /// Whether `start` is a local midnight in `zone` and the next one is
    /// `seconds` later: two offsets for the usual day, the calendar's own
    /// answer for one a daylight-saving change moved.
    static func isLocalDay(_ zone: LocalZone, start: Int64, seconds: Int64) -> Bool {
        let end = start + seconds
        let local = start + Int64(zone.offset(start)), localEnd = end + Int64(zone.offset(end))
        if local % 86400 == 0, localEnd - local == 86400 { return true }
        let day = PeriodCalendar(zone: zone).period(.day, containing: start)
        return day.start == start && day.end == end
    }

    /// The hour rows of each of `names` from `from` on, found through the
    /// (name, start) key rather than by reading every row; each checked.
    static func hourSlices(_ db: Database, names: [String], from: Int64) throws(StoreError) -> [UsageSlice] {
        guard try hasTable(db, "usage_hours") else { return [] }
        var slices: [UsageSlice] = []
        let statement = try db.prepare(
            "SELECT name, kind, start, seconds, rx_bytes, tx_bytes, rx_packets, tx_packets, quality FROM usage_hours WHERE name = ? AND start >= ? ORDER BY start"
        )
        for name in names {
            try statement.query([.text(name), .integer(from)]) { row throws(StoreError) in
                slices.append(try hourSlice(row, path: db.path))
            }
        }
        return slices
    }

    /// One `usage_hours` row (name, kind, start, seconds, the four counts,
    /// quality) as a slice, each value checked.
    static func hourSlice(_ row: Row, path: String) throws(StoreError) -> UsageSlice {
        let start = try RowCheck(row: row, path: path, what: "usage_hours row of \(RowCheck.quoted(row.text(0)))")
            .integer(2, "start", in: UsageSlice.startRange, expected: UsageSlice.startRangeText)
        let check = RowCheck(row: row, path: path, what: "usage_hours row of \(RowCheck.quoted(row.text(0))) starting \(start)")
        let seconds = try check.integer(
            3, "seconds", in: 1...UsageSlice.longestSeconds, expected: "a length in seconds from 1 to 31622400 (366 days)")
        return UsageSlice(
            name: row.text(0) ?? "?", kind: InterfaceKind(rawValue: row.text(1) ?? "") ?? .other, start: start, seconds: seconds,
            counters: Counters(
                rxBytes: try check.count(4, "rx_bytes"), txBytes: try check.count(5, "tx_bytes"), rxPackets: try check.count(6, "rx_packets"),
                txPackets: try check.count(7, "tx_packets")),
            quality: check.quality(8))
    }
}

extension StateStore {
    /// What `usage --hourly` needs before its rows: everything of
    /// `snapshot` but the slices, with every page and every hour row
    /// checked first (in SQL, keeping none), so that a corrupt file is
    /// refused before a line is written.
    package static func hourStreamHead(path: String) throws(StoreError) -> UsageSnapshot {
        try reading(path, verify: true) { db, written throws(StoreError) in try hourStreamHead(db, path: path, written: written) }
    }

    /// The same, of an open file.
    static func hourStreamHead(_ db: Database, path: String, written: Bool) throws(StoreError) -> UsageSnapshot {
        try checkRows(db)
        var snapshot = try snapshotWithoutSlices(db, path: path, written: written)
        snapshot.names = try names(db)
        // An interface's kind is its latest hour's, as the tables say it.
        if try hasTable(db, "usage_hours") {
            let latest = try db.prepare("SELECT kind FROM usage_hours WHERE name = ? ORDER BY start DESC LIMIT 1")
            for name in snapshot.names {
                try latest.query([.text(name)]) { row throws(StoreError) in
                    if let kind = row.text(0).flatMap(InterfaceKind.init(rawValue:)) { snapshot.kinds[name] = kind }
                }
            }
        }
        return snapshot
    }

    /// The plans, kinds, save status and five-minute rows of an open file.
    static func snapshotWithoutSlices(_ db: Database, path: String, written: Bool) throws(StoreError) -> UsageSnapshot {
        do throws(StoreError) {
            let plans = try hasTable(db, "plans") ? readPlans(db) : []
            var kinds: [String: InterfaceKind] = [:]
            if try hasTable(db, "interfaces") {
                try db.prepare("SELECT name, kind FROM interfaces").query { row throws(StoreError) in
                    if let name = row.text(0), let kind = row.text(1).flatMap(InterfaceKind.init(rawValue:)) { kinds[name] = kind }
                }
            }
            var meta: [String: String] = [:]
            try db.prepare("SELECT key, value FROM meta").query { row throws(StoreError) in
                if let key = row.text(0), let value = row.text(1) { meta[key] = value }
            }
            var snapshot = UsageSnapshot(slices: [], plans: plans, names: [], kinds: kinds, saves: saveStatus(meta, written: written))
            snapshot.fiveMinutes = try fiveMinuteSlices(db)
            snapshot.aliases = try readAliases(db)
            return snapshot
        } catch {
            throw StoreError.tableFailure(error, path: path)
        }
    }

    /// Hands each of `names`' slices (schema 1's days, then its hours) to
    /// `body` in order, `chunk` at a time, starting in [`from`, `to`); only
    /// the latest `limit` when given. `body` is told the interface's kind
    /// (its latest slice's) before its first chunk, and returns false to
    /// stop. Memory holds one chunk, whatever the file's size.
    package static func streamHours(
        path: String, names: [String], from: Int64?, to: Int64?, limit: Int?, chunk: Int = 1024,
        _ body: (_ name: String, _ kind: InterfaceKind, _ slices: [UsageSlice], _ whole: Bool) -> Bool
    ) throws(StoreError) {
        try reading(path, verify: false) { db throws(StoreError) in
            do throws(StoreError) {
                let hasHours = try hasTable(db, "usage_hours")
                let columns = "name, kind, start, seconds, rx_bytes, tx_bytes, rx_packets, tx_packets, quality"
                let range = "name = ? AND start >= ? AND start < ?"
                let latest = hasHours ? try db.prepare("SELECT \(columns) FROM usage_hours WHERE \(range) ORDER BY start DESC LIMIT 1") : nil
                let ascending = hasHours ? try db.prepare("SELECT \(columns) FROM usage_hours WHERE \(range) ORDER BY start") : nil
                let last = hasHours ? try db.prepare("SELECT \(columns) FROM usage_hours WHERE \(range) ORDER BY start DESC LIMIT ?") : nil
                for name in names {
                    // Its day and month rows (schema 1's, or rolled by
                    // retention): before its hours, one interface's at a time.
                    let days = try slices(db, path: path, zone: .system, since: from, hours: false, name: name).filter { $0.start < (to ?? .max) }
                    let values: [Statement.Value] = [.text(name), .integer(from ?? .min), .integer(to ?? .max)]
                    var kind = days.last?.kind
                    try latest?.query(values) { row throws(StoreError) in kind = try hourSlice(row, path: db.path).kind }
                    guard let kind else { continue }
                    var pending = days
                    if let limit, let last {
                        var newest: [UsageSlice] = []
                        try last.query(values + [.integer(Int64(limit))]) { row throws(StoreError) in
                            newest.append(try hourSlice(row, path: db.path))
                        }
                        pending = Array((pending + newest.reversed()).suffix(limit))
                        guard body(name, kind, pending, true) else { return }
                        continue
                    }
                    var stop = false, parted = false
                    try ascending?.query(values) { row throws(StoreError) in
                        guard !stop else { return }
                        pending.append(try hourSlice(row, path: db.path))
                        if pending.count >= chunk {
                            stop = !body(name, kind, pending, false)
                            parted = true
                            pending.removeAll(keepingCapacity: true)
                        }
                    }
                    if stop || !pending.isEmpty && !body(name, kind, pending, !parted) { return }
                }
            } catch {
                throw StoreError.tableFailure(error, path: path)
            }
        }
    }
}
