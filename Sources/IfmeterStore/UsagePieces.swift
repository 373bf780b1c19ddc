import IfmeterCore
import IfmeterSystem

/// A state file's hours read a piece at a time, each piece an open of its
/// own (`reading`): in serve, under the writer's connection only while the
/// piece is read, so a slow client of `/api/v1/usage` never holds it, and
/// no second descriptor of the file is opened; elsewhere, `session` keeps
/// one open for every piece. The pieces are found through the (name,
/// start) key: one interface's rows only, from where the last piece ended.
package final class UsagePieces: @unchecked Sendable {
    // Used by one reader at a time (the usage document being written).
    package let path: String
    private var open: Database?
    private var written = false

    private init(path: String, open: Database?) {
        self.path = path
        self.open = open
    }

    /// Pieces that each open the file (serve's: its writer's connection,
    /// borrowed for the piece).
    package static func eachOpen(path: String) -> UsagePieces { UsagePieces(path: path, open: nil) }

    /// Pieces read through one open of the file, for the time `body` runs
    /// (the `usage` command: one view of the file for the whole table).
    package static func session<T, E: Error>(path: String, _ body: (UsagePieces) throws(E) -> T) throws(StoreError) -> Result<T, E> {
        try StateStore.reading(path, verify: true) { db, written throws(StoreError) -> Result<T, E> in
            let pieces = UsagePieces(path: path, open: db)
            pieces.written = written
            defer { pieces.open = nil }
            do throws(E) {
                return .success(try body(pieces))
            } catch {
                return .failure(error)
            }
        }
    }

    private func read<T>(_ body: (Database) throws(StoreError) -> T) throws(StoreError) -> T {
        // A table's failure says the file is not a state file; the open's
        // (missing, unreadable, in use) is said as it is.
        if let open { return try Self.checked(open, path: path, body) }
        return try StateStore.reading(path, verify: false) { db throws(StoreError) -> T in try Self.checked(db, path: path, body) }
    }

    private static func checked<T>(_ db: Database, path: String, _ body: (Database) throws(StoreError) -> T) throws(StoreError) -> T {
        do throws(StoreError) {
            return try body(db)
        } catch {
            throw StoreError.tableFailure(error, path: path)
        }
    }

    /// Everything of the file but its slices (`StateStore.hourStreamHead`),
    /// every page and hour row checked first.
    package func head() throws(StoreError) -> UsageSnapshot {
        guard let open else { return try StateStore.hourStreamHead(path: path) }
        return try StateStore.hourStreamHead(open, path: path, written: written)
    }

    static let columns = "name, kind, start, seconds, rx_bytes, tx_bytes, rx_packets, tx_packets, quality"

    /// Where one interface's rows start: its day and month rows (schema 1's,
    /// or rolled by retention) in [`from`, `to`), which come before its
    /// hours; its kind (its latest hour's in the range, else its last day
    /// row's); and the first hour to read. With `limit`, only the latest
    /// `limit` rows: the hours from the `limit`-th latest, and the days
    /// only when there are fewer hours. Nil: the interface has no row there.
    package struct Start: Sendable {
        package var days: [UsageSlice]
        package var kind: InterfaceKind
        package var hoursFrom: Int64
    }

    package func start(name: String, from: Int64?, to: Int64?, limit: Int?) throws(StoreError) -> Start? {
        try read { db throws(StoreError) -> Start? in
            let hasHours = try StateStore.hasTable(db, "usage_hours")
            var days = try StateStore.slices(db, path: path, zone: .system, since: from, hours: false, name: name).filter {
                $0.start < (to ?? .max)
            }
            let range = "name = ? AND start >= ? AND start < ?"
            let values: [Statement.Value] = [.text(name), .integer(from ?? .min), .integer(to ?? .max)]
            var kind = days.last?.kind
            var hoursFrom = from ?? .min
            if hasHours {
                try db.prepare("SELECT \(Self.columns) FROM usage_hours WHERE \(range) ORDER BY start DESC LIMIT 1").query(values) {
                    row throws(StoreError) in kind = try StateStore.hourSlice(row, path: db.path).kind
                }
                if let limit {
                    var hours: Int64 = 0
                    try db.prepare("SELECT COUNT(*) FROM usage_hours WHERE \(range)").query(values) { row throws(StoreError) in
                        hours = row.int(0)
                    }
                    if hours >= limit {
                        days = []
                        try db.prepare("SELECT start FROM usage_hours WHERE \(range) ORDER BY start DESC LIMIT 1 OFFSET ?").query(
                            values + [.integer(Int64(limit - 1))]
                        ) { row throws(StoreError) in hoursFrom = row.int(0) }
                    } else {
                        days = Array(days.suffix(limit - Int(hours)))
                    }
                }
            } else if let limit {
                days = Array(days.suffix(limit))
            }
            guard let kind else { return nil }
            return Start(days: days, kind: kind, hoursFrom: hoursFrom)
        }
    }

    /// Up to `count` of `name`'s hour rows starting in [`from`, `to`), in
    /// order, each checked.
    package func hours(name: String, from: Int64, to: Int64?, count: Int) throws(StoreError) -> [UsageSlice] {
        try read { db throws(StoreError) -> [UsageSlice] in
            guard try StateStore.hasTable(db, "usage_hours") else { return [] }
            var slices: [UsageSlice] = []
            try db.prepare("SELECT \(Self.columns) FROM usage_hours WHERE name = ? AND start >= ? AND start < ? ORDER BY start LIMIT ?").query(
                [.text(name), .integer(from), .integer(to ?? .max), .integer(Int64(count))]
            ) { row throws(StoreError) in slices.append(try StateStore.hourSlice(row, path: db.path)) }
            return slices
        }
    }
}
