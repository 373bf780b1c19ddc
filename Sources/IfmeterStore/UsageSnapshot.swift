import IfmeterCore
import IfmeterSystem

/// Everything `usage` reads of a state file, from one open of it: the
/// usage slices, the plans, the stored interfaces and their kinds, and
/// what the file says of its writer (when it last saved, how often it
/// saves, whether one writes it now).
package struct UsageSnapshot: Sendable {
    package var slices: [UsageSlice]
    /// The five-minute rows (schema 3; the last 48 hours a writer kept).
    package var fiveMinutes: [UsageSlice] = []
    package var plans: [Plan]
    /// Names with totals or usage, sorted.
    package var names: [String]
    /// The kind each name of the interfaces table was last classified as.
    package var kinds: [String: InterfaceKind]
    package var saves: SaveStatus
    /// Aliases by stored name (`state alias`).
    package var aliases: [String: String] = [:]
}

extension StateStore {
    /// The tables `usage` reads from day rows (schema 4), whose pages it
    /// checks (not the hour rows').
    static let dayTables = ["meta", "aliases", "interfaces", "usage", "usage_days", "plans", "plan_limits", "usage_five_minutes", "state_requests"]

    /// Reads a state file for `usage`, in one open, writing nothing.
    /// `since`: only the slices starting then or later are read (`--check`
    /// needs the current cycles, at most 31 days).
    ///
    /// `hoursFrom`: the day rows (schema 4, when current and summed in
    /// `zone`) stand for the hours before this time, one slice per local
    /// day: the day, month, year, cycle and top tables need no more, and a
    /// five-year file is read in 36,500 rows instead of 876,000. Only their
    /// pages are checked. Without current day rows (a file some other
    /// program changed, or summed in another zone), or with `hoursFrom` nil,
    /// every hour is read and every row checked (in SQL for those before
    /// `since`, as a writer checks them), so a file `usage` calls corrupt
    /// is called so whatever is read of it. `only`: the slices of this
    /// stored name alone are read (the other names are still listed).
    package static func snapshot(
        path: String, zone: LocalZone = .system, since: Int64? = nil, hoursFrom: Int64? = nil, only: String? = nil
    ) throws(StoreError) -> UsageSnapshot {
        try reading(path, verify: false) { db, written throws(StoreError) in
            try check(db, path: path, host: nil, tables: ["meta"])
            var slices: [UsageSlice]?
            var names: [String]?
            if let hoursFrom, let through = try daysThrough(db) {
                try check(db, path: path, host: nil, tables: dayTables)
                do throws(StoreError) {
                    let split = min(hoursFrom, through)
                    if let days = try daySlices(db, zone: zone, from: since, before: split, name: only) {
                        let stored = try Self.names(db)
                        slices =
                            try Self.slices(db, path: path, zone: zone, since: since, hours: false, name: only) + days
                            + hourSlices(db, names: only.map { [$0] } ?? stored, from: max(split, since ?? .min))
                        names = stored
                    }
                } catch {
                    throw StoreError.tableFailure(error, path: path)
                }
            }
            if slices == nil {
                try check(db, path: path, host: nil)
                if since != nil { try checkRows(db) }
                slices = try Self.slices(db, path: path, zone: zone, since: since, name: only)
            }
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
                let stored: [String]
                if let names { stored = names } else { stored = try Self.names(db) }
                var snapshot = UsageSnapshot(
                    slices: slices ?? [], plans: plans, names: stored, kinds: kinds,
                    saves: saveStatus(meta, written: written))
                snapshot.fiveMinutes = try fiveMinuteSlices(db)
                snapshot.aliases = try readAliases(db)
                return snapshot
            } catch {
                throw StoreError.tableFailure(error, path: path)
            }
        }
    }

    /// What the meta table says of the writer. `written`: an ifmeter holds
    /// the file's lock now.
    static func saveStatus(_ meta: [String: String], written: Bool) -> SaveStatus {
        let writer: SaveStatus.Writer
        if meta["running"] == "1" {
            // Marked running: by the one that holds the lock, or by one
            // that died (its lock went with it).
            writer = written ? .running : .stoppedUncleanly
        } else if meta["running"] == "0" {
            writer = .stopped
        } else {
            writer = .none
        }
        // A save time that is there but no number is no time (NaN), not
        // "never saved".
        return SaveStatus(
            savedAt: meta["saved"].map { Double($0) ?? .nan }, saveEvery: meta["save_every"].flatMap(Double.init), writer: writer,
            stoppedAt: meta["stopped"].flatMap(Double.init))
    }
}
