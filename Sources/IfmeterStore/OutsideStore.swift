import IfmeterCore

extension StateStore {
    /// The table schema 5 adds: each tunnel's outside estimate over its
    /// underlay (`serve --probe`'s `ifmeter_tunnel_outside_bytes_total`),
    /// summed since the state began, so that the counter goes on across
    /// restarts as the interface totals do. One small row per tunnel and
    /// underlay, rewritten only when its figures changed.
    static let schemaV5 = """
        -- Each tunnel's outside estimate (bytes over its underlay beside the tunnel),
        -- summed since the state began; bytes are unsigned 64-bit values stored as
        -- their signed bit pattern, uncertain 0 or 1.
        CREATE TABLE IF NOT EXISTS tunnel_outside (
            tunnel TEXT NOT NULL, underlay TEXT NOT NULL, rx_bytes INTEGER NOT NULL, tx_bytes INTEGER NOT NULL,
            uncertain INTEGER NOT NULL, PRIMARY KEY (tunnel, underlay)) WITHOUT ROWID;
        """

    static let outsideSQL = """
        INSERT INTO tunnel_outside (tunnel, underlay, rx_bytes, tx_bytes, uncertain) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (tunnel, underlay) DO UPDATE SET
            rx_bytes = excluded.rx_bytes, tx_bytes = excluded.tx_bytes, uncertain = excluded.uncertain
        """

    /// Every tunnel's saved outside total (none in a file without the
    /// table: one a reader opens before a writer brought it to schema 5).
    /// Refuses, as bad data naming the row, a byte count that is not an
    /// integer.
    static func loadOutside(_ db: Database) throws(StoreError) -> [OutsideTotal] {
        guard try hasTable(db, "tunnel_outside") else { return [] }
        var totals: [OutsideTotal] = []
        try db.prepare("SELECT tunnel, underlay, rx_bytes, tx_bytes, uncertain FROM tunnel_outside ORDER BY tunnel, underlay").query {
            row throws(StoreError) in
            guard let tunnel = row.text(0), let underlay = row.text(1) else { return }
            let check = RowCheck(row: row, path: db.path, what: "tunnel_outside row of \(RowCheck.quoted(tunnel)) over \(RowCheck.quoted(underlay))")
            var total = OutsideTotal(tunnel: tunnel, underlay: underlay)
            total.rxBytes = try check.unsigned(2, "rx_bytes")
            total.txBytes = try check.unsigned(3, "tx_bytes")
            // Anything but 0 says uncertain: the one claim safe whatever the figure.
            total.uncertain = !(row.isInteger(4) && row.int(4) == 0)
            totals.append(total)
        }
        return totals
    }

    /// Writes the outside totals whose figures changed since they were
    /// last written (inside the save's transaction). A total the caller no
    /// longer has keeps its row: the counter of a tunnel gone for now
    /// goes on from it when the tunnel comes back.
    func saveOutside(_ totals: [OutsideTotal]) throws(StoreError) {
        for total in totals where writtenOutside[total.key] != total {
            try upsertOutside.run([
                .text(total.tunnel), .text(total.underlay), .integer(Int64(bitPattern: total.rxBytes)),
                .integer(Int64(bitPattern: total.txBytes)), .integer(total.uncertain ? 1 : 0),
            ])
        }
    }
}
