import IfmeterCore
import IfmeterSystem

/// A change to a state file's history (`ifmeter state`): what vnStat's
/// `--remove` and `--rename` do to its database.
package enum StateChange: Sendable, Hashable {
    /// Forget an interface: its usage rows and its totals.
    case remove(String)
    /// Merge what one stored name recorded into another (eth0 became
    /// enp3s0 after an upgrade): usage rows summed hour by hour, the old
    /// name's totals forgotten.
    case rename(from: String, to: String)

    /// The stored name whose history goes.
    package var source: String {
        switch self {
        case .remove(let name): name
        case .rename(let from, _): from
        }
    }
}

extension StateStore {
    static let requestsSchema = """
        CREATE TABLE IF NOT EXISTS state_requests (
            id INTEGER PRIMARY KEY, action TEXT NOT NULL CHECK (action IN ('remove', 'rename')), name TEXT NOT NULL, target TEXT)
        """

    /// Whether this store holds the file's lock (no sampler writes it).
    var holdsLock: Bool { database.lockDescriptor.map(FileLock.holdsExclusive) ?? false }

    /// Makes `change`: at once when no sampler writes the file (returns
    /// nil), else as a request the sampler applies within a sample (its
    /// totals and unsaved traffic are in its memory): returns its id.
    package func request(_ change: StateChange) throws(StoreError) -> Int64? {
        if holdsLock {
            try database.transaction { () throws(StoreError) in try Self.apply(change, database, zone: zone) }
            return nil
        }
        var id: Int64 = 0
        try database.transaction { () throws(StoreError) in
            try database.execute(Self.requestsSchema)
            let values: [Statement.Value]
            switch change {
            case .remove(let name): values = [.text("remove"), .text(name), .null]
            case .rename(let from, let to): values = [.text("rename"), .text(from), .text(to)]
            }
            try database.prepare("INSERT INTO state_requests (action, name, target) VALUES (?, ?, ?)").run(values)
            try database.prepare("SELECT last_insert_rowid()").query { row throws(StoreError) in id = row.int(0) }
        }
        return id
    }

    /// Whether request `id` is still waiting (read as `usage` reads).
    package static func requestWaiting(path: String, id: Int64) throws(StoreError) -> Bool {
        try reading(path, verify: false) { db throws(StoreError) in
            guard try hasTable(db, "state_requests") else { return false }
            var waiting = false
            try db.prepare("SELECT 1 FROM state_requests WHERE id = ?").query([.integer(id)]) { _ throws(StoreError) in waiting = true }
            return waiting
        }
    }

    /// The requests waiting, oldest first; cheap when nothing changed
    /// since the last look (SQLite's data_version says another connection
    /// committed).
    package func pendingChanges() throws(StoreError) -> [(id: Int64, change: StateChange)] {
        let version = try dataVersion()
        guard version != lastDataVersion else { return [] }
        lastDataVersion = version
        guard try Self.hasTable(database, "state_requests") else { return [] }
        var out: [(Int64, StateChange)] = []
        try database.prepare("SELECT id, action, name, target FROM state_requests ORDER BY id").query { row throws(StoreError) in
            guard let name = row.text(2) else { return }
            switch row.text(1) {
            case "remove": out.append((row.int(0), .remove(name)))
            case "rename": if let target = row.text(3) { out.append((row.int(0), .rename(from: name, to: target))) }
            default: break
            }
        }
        // Seen again at the next look, until applied.
        if !out.isEmpty { lastDataVersion = -1 }
        return out
    }

    /// SQLite's data_version on this store's connection: it changes when
    /// another connection (`plan set`, `state alias`) has committed, and
    /// only once that commit is visible to this connection's next read.
    /// The WAL file's size and time change earlier, when the commit's
    /// frames are written and before they are synced and published: a
    /// read in between sees the file as it was.
    package func dataVersion() throws(StoreError) -> Int64 {
        var version: Int64 = 0
        try database.prepare("PRAGMA data_version").query { row throws(StoreError) in version = row.int(0) }
        return version
    }

    /// Applies a waiting request and removes it, in one transaction.
    package func apply(_ change: StateChange, id: Int64) throws(StoreError) {
        try database.transaction { () throws(StoreError) in
            try Self.apply(change, database, zone: zone)
            try database.prepare("DELETE FROM state_requests WHERE id = ?").run([.integer(id)])
        }
        written[change.source] = nil
    }

    /// The change's rows, inside the caller's transaction.
    static func apply(_ change: StateChange, _ db: Database, zone: LocalZone) throws(StoreError) {
        // Day rows that were current stay so: those of the names changed
        // are summed again from their hours.
        let through = try daysThrough(db)
        let counts = ["rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]
        if case .rename(let from, let to) = change {
            let sums = counts.map { "\($0) = \(saturatingSum($0))" }.joined(separator: ", ")
            let columns = "kind, " + counts.joined(separator: ", ") + ", quality"
            let merges = [
                ("usage_hours", "start, seconds", "name, start"), ("usage", "granularity, period", "name, granularity, period"),
                ("usage_five_minutes", "start", "name, start"),
            ]
            for (table, keys, conflict) in merges where try hasTable(db, table) {
                try db.prepare(
                    """
                    INSERT INTO \(table) (name, \(keys), \(columns)) SELECT ?, \(keys), \(columns) FROM \(table) WHERE name = ?
                    ON CONFLICT (\(conflict)) DO UPDATE SET \(sums), quality = max(quality, excluded.quality)
                    """
                ).run([.text(to), .text(from)])
            }
        }
        if try hasTable(db, "aliases"), case .rename(let from, let to) = change {
            // The alias goes with the history, unless the new name has one.
            try db.prepare("INSERT OR IGNORE INTO aliases (name, alias) SELECT ?, alias FROM aliases WHERE name = ?").run([.text(to), .text(from)])
        }
        for table in ["usage_hours", "usage", "usage_five_minutes", "interfaces", "aliases"] where try hasTable(db, table) {
            try db.prepare("DELETE FROM \(table) WHERE name = ?").run([.text(change.source)])
        }
        if let through {
            var names = [change.source]
            if case .rename(_, let to) = change { names.append(to) }
            try summarizeDays(db, .names(names), through: through, zone: zone)
        }
    }
}
