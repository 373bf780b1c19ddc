import IfmeterCore

/// Every interface as the updates tell them, in a form of the subscriber's
/// choosing (`make` turns totals into it), kept sorted by (namespace, name)
/// in one plain array: no dictionary, no sort when read, and a reader's
/// copy is free (copy on write). The changes are applied one by one, so
/// keeping it costs what changed: a changed series is found where it was
/// found last time, else by binary search; many new ones are merged in.
package struct TotalsView<Row: Sendable & SeriesKeyed>: Sendable {
    package private(set) var rows: [Row] = []
    /// The rows' keys, in order (each row names its own: no array of keys
    /// is kept beside them, 130 KB at 4000 interfaces).
    package var keys: [SeriesKey] { rows.map(\.key) }
    /// Makes a row of totals, given the row the series had (nil: new), so
    /// that what a row keeps beside its totals (its rates, its since) stays.
    private let make: @Sendable (InterfaceTotals, Row?) -> Row
    /// Where the last update's changed series were, in its order.
    private var hints: [Int] = []

    package init(_ make: @escaping @Sendable (InterfaceTotals) -> Row) { self.make = { t, _ in make(t) } }

    /// A view whose rows are made from the totals and the row they replace.
    package init(updating make: @escaping @Sendable (InterfaceTotals, Row?) -> Row) { self.make = make }

    /// Takes changes: the totals of series that changed, and the keys of
    /// those forgotten (applied first: a key can be forgotten and seen anew).
    package mutating func apply(changed: [InterfaceTotals], forgotten: [SeriesKey]) {
        apply(changed: changed, forgotten: forgotten, using: make)
    }

    /// The same, with rows made by `make` for this once (what it knows of
    /// the update: its time, the aliases) instead of the view's own.
    package mutating func apply(
        changed: [InterfaceTotals], forgotten: [SeriesKey], using make: (InterfaceTotals, Row?) -> Row
    ) {
        for key in forgotten {
            if case .found(let at) = position(of: key) {
                rows.remove(at: at)
                hints = []
            }
        }
        // New series are kept as positions in `changed` only until their
        // place is known, and their rows made as they are merged in: a list
        // of (key, row) pairs beside the merged arrays cost 1 MB more at
        // 4000 interfaces.
        var added: [Int] = []
        var found: [Int] = []
        found.reserveCapacity(changed.count)
        for (n, totals) in changed.enumerated() {
            let key = totals.key
            if n < hints.count, hints[n] < rows.count, rows[hints[n]].key == key {
                rows[hints[n]] = make(totals, rows[hints[n]])
                found.append(hints[n])
                continue
            }
            switch position(of: key) {
            case .found(let at):
                rows[at] = make(totals, rows[at])
                found.append(at)
            case .insert:
                added.append(n)
            }
        }
        hints = added.isEmpty ? found : []
        guard !added.isEmpty else { return }
        added.sort { changed[$0].key < changed[$1].key }
        if added.count <= 8 {
            for n in added {
                guard case .insert(let at) = position(of: changed[n].key) else { continue }
                rows.insert(make(changed[n], nil), at: at)
            }
            return
        }
        // Many new ones (the first sample): one merge of two sorted runs.
        var merged: [Row] = []
        merged.reserveCapacity(rows.count + added.count)
        var i = 0, j = 0
        while i < rows.count || j < added.count {
            if j == added.count || (i < rows.count && rows[i].key < changed[added[j]].key) {
                merged.append(rows[i])
                i += 1
            } else {
                // A key listed twice is merged in once (the list is sorted).
                if merged.last?.key != changed[added[j]].key { merged.append(make(changed[added[j]], nil)) }
                j += 1
            }
        }
        rows = merged
    }

    private enum Position {
        case found(Int)
        case insert(Int)
    }

    private func position(of key: SeriesKey) -> Position {
        var low = 0, high = rows.count
        while low < high {
            let mid = (low + high) / 2
            let here = rows[mid].key
            if here == key { return .found(mid) }
            if here < key { low = mid + 1 } else { high = mid }
        }
        return .insert(low)
    }

    package subscript(key: SeriesKey) -> Row? {
        if case .found(let at) = position(of: key) { return rows[at] }
        return nil
    }

    /// Changes the row of `key` in place, if there is one.
    package mutating func modify(_ key: SeriesKey, _ body: (inout Row) -> Void) {
        if case .found(let at) = position(of: key) { body(&rows[at]) }
    }

    /// Changes every row in place.
    package mutating func modifyAll(_ body: (inout Row) -> Void) {
        for at in rows.indices { body(&rows[at]) }
    }

    package var count: Int { rows.count }

    /// Sorted by (namespace, name); free: the rows are kept in that order.
    package func sorted() -> [Row] { rows }
}
