import IfmeterCore
import IfmeterSystem

/// One five-minute slot's usage of an interface, to add to the state file.
package struct FiveMinuteUsage: Sendable, Hashable {
    /// Unix time the slot starts (a multiple of 300).
    package var start: Int64
    package var counters: Counters
    package var quality: Quality

    package init(start: Int64, counters: Counters, quality: Quality) {
        self.start = start
        self.counters = counters
        self.quality = quality
    }
}

extension StateStore {
    /// Tables schema 3 adds: usage per five minutes (kept 48 hours, as
    /// vnStat's `5MinuteHours 48`), and plan limits per hour, day, month or
    /// year. Rows without rowid: a five-minute row is one small b-tree
    /// entry, written once per interface per slot and deleted once.
    static let schemaV3 = """
        -- Usage per five minutes (start a multiple of 300 s), pruned after 48 hours;
        -- quality 0 exact, 1 wrap-corrected, 2 lower bound.
        CREATE TABLE IF NOT EXISTS usage_five_minutes (
            name TEXT NOT NULL, start INTEGER NOT NULL, kind TEXT NOT NULL,
            rx_bytes INTEGER NOT NULL, tx_bytes INTEGER NOT NULL, rx_packets INTEGER NOT NULL,
            tx_packets INTEGER NOT NULL, quality INTEGER NOT NULL, PRIMARY KEY (name, start)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS plan_limits (
            pattern TEXT NOT NULL, period TEXT NOT NULL CHECK (period IN ('hour', 'day', 'month', 'year')),
            limit_bytes INTEGER NOT NULL, PRIMARY KEY (pattern, period)) WITHOUT ROWID;
        """

    static let fiveMinuteSQL = """
        INSERT INTO usage_five_minutes (name, start, kind, rx_bytes, tx_bytes, rx_packets, tx_packets, quality)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (name, start) DO UPDATE SET
            kind = excluded.kind,
            rx_bytes = \(saturatingSum("rx_bytes")), tx_bytes = \(saturatingSum("tx_bytes")),
            rx_packets = \(saturatingSum("rx_packets")), tx_packets = \(saturatingSum("tx_packets")),
            quality = max(quality, excluded.quality)
        """

    /// Adds five-minute slots (inside the save's transaction), then prunes
    /// the rows older than `keptHours` before `wallTime`. Only the current
    /// slot's row is written: older rows are never rewritten.
    func addFiveMinutes(
        _ slots: [(key: SeriesKey, kind: InterfaceKind, slot: FiveMinuteUsage)], wallTime: Double,
        keptHours: Int64 = FiveMinuteSplit.keptHours
    ) throws(StoreError) {
        guard try Self.hasTable(database, "usage_five_minutes") else { return }
        let oldest = FiveMinuteSplit.oldestKept(now: LocalZone.second(wallTime) ?? 0, hours: keptHours)
        if !slots.isEmpty {
            let add = try database.prepare(Self.fiveMinuteSQL)
            for (key, kind, s) in slots where s.start >= oldest {
                let c = s.counters
                try add.run([
                    .text(key.description), .integer(s.start), .text(kind.rawValue),
                    .integer(Int64(clamping: c.rxBytes)), .integer(Int64(clamping: c.txBytes)),
                    .integer(Int64(clamping: c.rxPackets)), .integer(Int64(clamping: c.txPackets)),
                    .integer(Int64(s.quality.rawValue)),
                ])
            }
        }
        try Self.pruneFiveMinutes(database, before: oldest)
    }

    /// Deletes five-minute rows starting before `oldest`.
    static func pruneFiveMinutes(_ db: Database, before oldest: Int64) throws(StoreError) {
        try db.prepare("DELETE FROM usage_five_minutes WHERE start < ?").run([.integer(oldest)])
    }

    /// The five-minute rows of an open state file, as slices of 300 s
    /// (none for a file from before schema 3). Refuses a row whose start is
    /// outside `UsageSlice.startRange` or not a multiple of 300, or whose
    /// counts are not 0 to 2^63-1.
    static func fiveMinuteSlices(_ db: Database) throws(StoreError) -> [UsageSlice] {
        guard try hasTable(db, "usage_five_minutes") else { return [] }
        var slices: [UsageSlice] = []
        try db.prepare(
            "SELECT name, kind, start, rx_bytes, tx_bytes, rx_packets, tx_packets, quality FROM usage_five_minutes ORDER BY name, start"
        ).query { row throws(StoreError) in
            let name = RowCheck.quoted(row.text(0))
            let start = try RowCheck(row: row, path: db.path, what: "usage_five_minutes row of \(name)")
                .integer(2, "start", in: UsageSlice.startRange, expected: UsageSlice.startRangeText)
            let check = RowCheck(row: row, path: db.path, what: "usage_five_minutes row of \(name) starting \(start)")
            if start % FiveMinuteSplit.seconds != 0 {
                throw check.refuse("start", 2, expected: "a multiple of 300 (a five-minute boundary)")
            }
            slices.append(
                UsageSlice(
                    name: row.text(0) ?? "?", kind: InterfaceKind(rawValue: row.text(1) ?? "") ?? .other, start: start,
                    seconds: FiveMinuteSplit.seconds,
                    counters: Counters(
                        rxBytes: try check.count(3, "rx_bytes"), txBytes: try check.count(4, "tx_bytes"),
                        rxPackets: try check.count(5, "rx_packets"), txPackets: try check.count(6, "tx_packets")),
                    quality: check.quality(7)))
        }
        return slices
    }

    /// The limits of every plan, by pattern (none before schema 3). Refuses
    /// a limit that is not 1 to 2^63-1 bytes; a period this version does
    /// not know is skipped.
    static func readLimits(_ db: Database) throws(StoreError) -> [String: [PeriodLimit]] {
        guard try hasTable(db, "plan_limits") else { return [:] }
        var limits: [String: [PeriodLimit]] = [:]
        try db.prepare("SELECT pattern, period, limit_bytes FROM plan_limits ORDER BY pattern").query { row throws(StoreError) in
            let check = RowCheck(row: row, path: db.path, what: "plan_limits row \(RowCheck.quoted(row.text(0)))")
            let bytes = try check.count(2, "limit_bytes")
            guard let period = PeriodLimit.Period(rawValue: row.text(1) ?? "") else { return }
            limits[row.text(0) ?? "", default: []].append(PeriodLimit(period: period, bytes: bytes))
        }
        return limits.mapValues { $0.sorted { $0.period < $1.period } }
    }

    /// Replaces the limits of a plan (inside `setPlan`'s transaction).
    func writeLimits(_ plan: Plan) throws(StoreError) {
        try database.prepare("DELETE FROM plan_limits WHERE pattern = ?").run([.text(plan.pattern)])
        let add = try database.prepare("INSERT INTO plan_limits (pattern, period, limit_bytes) VALUES (?, ?, ?)")
        for limit in plan.limits {
            try add.run([.text(plan.pattern), .text(limit.period.rawValue), .integer(Int64(clamping: limit.bytes))])
        }
    }
}
