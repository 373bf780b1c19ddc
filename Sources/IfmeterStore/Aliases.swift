import IfmeterCore
import IfmeterSystem

/// Aliases (vnStat's `--setalias`): a name a person gives a stored
/// interface (`uplink` for enp3s0), shown beside its name by `usage`, the
/// live view and `/metrics` (`ifmeter_interface_info{alias}`). A table of
/// its own, which no sampler writes: `state alias` sets one directly also
/// while serve, live or export write the file (SQLite's locking keeps the
/// two transactions apart), and the running writer reads it within a
/// sample (`PlanFeed`).
extension StateStore {
    static let aliasesSchema = """
        CREATE TABLE IF NOT EXISTS aliases (name TEXT PRIMARY KEY, alias TEXT NOT NULL) WITHOUT ROWID;
        """

    /// The longest alias, in characters.
    package static let longestAlias = 64

    /// Whether `alias` may be stored: 1 to 64 characters, none of them a
    /// control character, and not only spaces.
    package static func isValidAlias(_ alias: String) -> Bool {
        !alias.isEmpty && alias.count <= longestAlias && !alias.unicodeScalars.contains { $0.properties.generalCategory == .control }
            && alias.contains { $0 != " " }
    }

    /// Sets (or with nil removes) the alias of a stored name, in one
    /// transaction.
    package func setAlias(_ name: String, _ alias: String?) throws(StoreError) {
        try database.transaction { () throws(StoreError) in
            try database.execute(Self.aliasesSchema)
            if let alias {
                try database.prepare("INSERT INTO aliases (name, alias) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET alias = excluded.alias")
                    .run([.text(name), .text(alias)])
            } else {
                try database.prepare("DELETE FROM aliases WHERE name = ?").run([.text(name)])
            }
        }
    }

    /// The aliases of an open file by stored name; one that is not valid
    /// (a file edited with sqlite3) is refused as bad data.
    static func readAliases(_ db: Database) throws(StoreError) -> [String: String] {
        guard try hasTable(db, "aliases") else { return [:] }
        var aliases: [String: String] = [:]
        try db.prepare("SELECT name, alias FROM aliases").query { row throws(StoreError) in
            guard let alias = row.text(1), isValidAlias(alias), let name = row.text(0) else {
                throw RowCheck(row: row, path: db.path, what: "aliases row of \(RowCheck.quoted(row.text(0)))")
                    .refuse("alias", 1, expected: "1 to \(longestAlias) characters, no control characters")
            }
            aliases[name] = alias
        }
        return aliases
    }

    /// The aliases, through this store's connection.
    package func aliases() throws(StoreError) -> [String: String] { try Self.readAliases(database) }
}
