import IfmeterCore
import IfmeterSystem

/// Everything `usage` reads of a state file, from one open of it: the
/// usage slices, the plans, the stored interfaces and their kinds, and
/// what the file says of its writer (when it last saved, how often it
/// saves, whether one writes it now).
public struct UsageSnapshot: Sendable {
    public var slices: [UsageSlice]
    /// The five-minute rows (schema 3; the last 48 hours a writer kept).
    public var fiveMinutes: [UsageSlice] = []
    public var plans: [Plan]
    /// Names with totals or usage, sorted.
    public var names: [String]
    /// The kind each name of the interfaces table was last classified as.
    public var kinds: [String: InterfaceKind]
    public var saves: SaveStatus
}

extension StateStore {
    /// Reads a state file for `usage`, in one open, writing nothing.
    /// `since`: only the slices starting then or later are read (`--check`
    /// needs the current cycles, at most 31 days); every other row is still
    /// checked (in SQL, as a writer checks them), so a file `usage` calls
    /// corrupt is called so whatever is read of it.
    public static func snapshot(path: String, zone: LocalZone = .system, since: Int64? = nil) throws(StoreError) -> UsageSnapshot {
        try reading(path) { db, written throws(StoreError) in
            if since != nil { try checkRows(db) }
            let slices = try slices(db, path: path, zone: zone, since: since)
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
                var snapshot = UsageSnapshot(
                    slices: slices, plans: plans, names: try names(db), kinds: kinds, saves: saveStatus(meta, written: written))
                snapshot.fiveMinutes = try fiveMinuteSlices(db)
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
