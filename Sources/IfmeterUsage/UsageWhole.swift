import IfmeterCore
import IfmeterImage
import IfmeterOutput
import IfmeterStore
import IfmeterSystem

/// A request's whole table at once, for what needs every row together:
/// the pictures (`usage --svg`/`--png` and `/usage.png`), `usage --check`
/// and `usage --oneline`. The tables alone are written a piece at a time
/// instead (`UsageDocument`).
package struct UsageWhole: Sendable {
    /// What was read: the admitted slices (hours, with day rows standing
    /// for the hours before `hoursFrom`), plans, kinds, aliases, saves.
    package var snapshot: UsageSnapshot
    /// The stored names the filter admits.
    package var names: [String]
    /// The names and kinds the file holds, before any filter.
    package var known: (names: [String], kinds: [String: InterfaceKind])
    package var table: UsageTable

    /// `check`: the current cycles and limits (a year's days at most),
    /// `summary` the summary picture's periods, `oneline` today and this
    /// month; else `request`'s table.
    package init(
        _ request: UsageRequest, path: String, filter: InterfaceFilter = InterfaceFilter(), top: Int? = nil, wall: Double, check: Bool = false,
        summary: Bool = false, oneline: Bool = false
    ) throws(UsageQueryError) {
        let now = Int64(wall.rounded(.down))
        do {
            // --check judges the current cycles (31 days at most) and
            // limits: it reads those days (a year's for a year limit), not
            // years of hours.
            var since: Int64?
            if check {
                let yearly = try StateStore.plans(path: path, verify: false).contains { $0.limits.contains { $0.period == .year } }
                since = now - (yearly ? 367 : 32) * 86400
            }
            snapshot = try StateStore.snapshot(
                path: path, since: since, hoursFrom: request.hoursFrom(now: now, check: check, summary: summary, oneline: oneline),
                only: request.interface)
        } catch {
            throw UsageQueryError(error)
        }
        var kinds = snapshot.kinds
        for slice in snapshot.slices { kinds[slice.name] = slice.kind }
        known = (Set(snapshot.names + snapshot.slices.map(\.name)).sorted(), kinds)
        // Names without usage: their kind from the interfaces table; one
        // not known there is kept only without --kind.
        let snapshot = snapshot
        let interface = request.interface
        let asked = { (name: String) in interface.map { ExactText.equal($0, name) } ?? true }
        names = snapshot.names.filter { name in
            guard asked(name) else { return false }
            guard filter.kinds != nil else { return filter.admits(StateStore.key(name)) }
            return snapshot.kinds[name].map { filter.admits(StateStore.key(name), kind: $0) } ?? false
        }
        // Filtered in place: a five-year file's slices are held once.
        let admitted = { (s: UsageSlice) in asked(s.name) && filter.admits(StateStore.key(s.name), kind: s.kind) }
        self.snapshot.slices.removeAll { !admitted($0) }
        self.snapshot.fiveMinutes.removeAll { !admitted($0) }
        let slices = request.granularity == .fiveMinutes ? self.snapshot.fiveMinutes : self.snapshot.slices
        table = UsageTable(
            slices: slices, plans: snapshot.plans, granularity: check ? .cycle : request.granularity, top: top, zone: .system, now: now,
            names: names, kinds: snapshot.kinds, begin: request.begin, end: request.end, limit: request.limit)
        for n in table.interfaces.indices { table.interfaces[n].alias = snapshot.aliases[table.interfaces[n].stored] }
        table.saves = snapshot.saves
        table.path = path
        table.wallTime = wall
    }

    /// The summary picture's figures, as of the file's last save.
    package func summary() -> UsageSummary {
        UsageSummary(
            slices: snapshot.slices, plans: snapshot.plans, names: names, kinds: snapshot.kinds, zone: .system, now: table.now,
            savedAt: snapshot.saves.savedAt)
    }

    /// The picture as a PNG: the summary, or the table's chart.
    package func png(summary: Bool) throws(CairoError) -> [UInt8] {
        summary ? try UsagePNG.summary(self.summary()) : try UsagePNG.chart(table)
    }
}
