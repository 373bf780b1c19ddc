import IfmeterCore
import IfmeterOutput
import IfmeterStore
import IfmeterSystem

/// The usage tables a request asks for, written a piece at a time: the one
/// answer of `usage`'s tables (text, JSON, CSV) and of `/api/v1/usage`.
/// Each `piece()` reads what it writes: the hours (years of them) a chunk
/// at a time through `UsagePieces`, by the (name, start) key, so memory
/// holds one chunk whatever the file's size, and only the interface asked
/// for is read; the other tables from the file's day rows.
///
/// With `request.rows`, at most that many rows are written; when more
/// remain, `next` says where the next page starts (and the JSON document
/// says it as `next`, through `link`).
package final class UsageDocument {
    package let request: UsageRequest
    package let format: String
    /// Everything of the file but its rows: plans, kinds, aliases, saves.
    package let head: UsageSnapshot
    /// The names and kinds the file holds, before any filter (what
    /// `usage` says when its filter keeps none).
    package let known: (names: [String], kinds: [String: InterfaceKind])
    /// What the text says instead of "No usage recorded yet" (set before
    /// the first piece).
    package var emptyNote: String?
    /// The `next` URL of a JSON page, from where it ends.
    package var link: ((UsageCursor) -> String)?
    /// Where the next page starts, once a page is cut short.
    package private(set) var next: UsageCursor?

    let pieces: UsagePieces
    let filter: InterfaceFilter
    let wall: Double
    let now: Int64
    let top: Int?
    let chunk: Int
    /// The interfaces to write, in order.
    let names: [String]
    var index = 0
    var stream: UsageStream?
    var finished = false
    /// The hours of the interface being read.
    var hours: Hours?
    struct Hours {
        var name: String
        var kind: InterfaceKind
        var pending: [UsageSlice]
        var from: Int64
        var parted = false
    }
    /// The other tables' slices, by name.
    var byName: [String: [UsageSlice]] = [:]
    /// Hours counted since the file's last save (serve's current
    /// figures), by name and start, not yet added to a row written.
    var unsavedHours: [String: [Int64: UsageSlice]] = [:]
    let cache = PeriodCache()
    /// Rows this page may still hold; whether one more was found.
    var left: Int?
    var last: UsageCursor?

    /// Reads what the tables need before their rows (everything but the
    /// hours' rows, or the day rows the other tables are made of), and
    /// refuses a file it cannot read before anything is written.
    /// `filter`: `usage`'s `--include`/`--exclude`/`--kind`/`--netns`.
    /// `unsaved`: what a writer counted since the file's last save (hour
    /// slices, or five-minute ones for that table), added to the file's
    /// rows: serve's figures, current within one sample. The `usage`
    /// command gives none: it shows the file as of its last save.
    package init(
        _ request: UsageRequest, pieces: UsagePieces, format: String = "json", filter: InterfaceFilter = InterfaceFilter(), top: Int? = nil,
        wall: Double, chunk: Int = 1024, unsaved: [UsageSlice] = []
    ) throws(UsageQueryError) {
        self.request = request
        self.format = format
        self.pieces = pieces
        self.filter = filter
        self.wall = wall
        now = Int64(wall.rounded(.down))
        self.top = top
        // Text sets one interface's widths by its rows when they come in
        // one piece: `--limit`'s rows come in one, as they always have.
        self.chunk = format == "text" ? max(chunk, request.limit ?? 0) : chunk
        left = request.rows
        let interface = request.interface
        // A page after the first starts at its cursor's interface.
        let from = request.after.map { StateStore.key($0.interface) }
        let asked = { (name: String) in
            interface.map { ExactText.equal($0, name) } ?? true && from.map { StateStore.key(name) >= $0 } ?? true
        }
        if request.granularity == .hour {
            do {
                head = try pieces.head()
            } catch {
                throw UsageQueryError(error)
            }
            var known = (names: head.names, kinds: head.kinds)
            for slice in unsaved where asked(slice.name) && filter.admits(StateStore.key(slice.name), kind: slice.kind) {
                guard request.begin.map({ slice.start >= $0 }) ?? true, request.end.map({ slice.start < $0 }) ?? true else { continue }
                unsavedHours[slice.name, default: [:]][slice.start] = slice
                if known.kinds[slice.name] == nil {
                    known.names.append(slice.name)
                    known.kinds[slice.name] = slice.kind
                }
            }
            self.known = known
            names = known.names.filter { asked($0) && filter.admits(StateStore.key($0)) }.sorted { StateStore.key($0) < StateStore.key($1) }
        } else {
            var snapshot: UsageSnapshot
            do {
                snapshot = try StateStore.snapshot(
                    path: pieces.path, hoursFrom: request.hoursFrom(now: now), only: interface)
            } catch {
                throw UsageQueryError(error)
            }
            var kinds = snapshot.kinds
            for slice in snapshot.slices { kinds[slice.name] = slice.kind }
            known = (Set(snapshot.names + snapshot.slices.map(\.name)).sorted(), kinds)
            let stored = snapshot.names.filter { name in
                guard asked(name) else { return false }
                guard filter.kinds != nil else { return filter.admits(StateStore.key(name)) }
                return snapshot.kinds[name].map { filter.admits(StateStore.key(name), kind: $0) } ?? false
            }
            let admitted = { (s: UsageSlice) in asked(s.name) && filter.admits(StateStore.key(s.name), kind: s.kind) }
            let rows = (request.granularity == .fiveMinutes ? snapshot.fiveMinutes : snapshot.slices) + unsaved
            snapshot.slices = []
            snapshot.fiveMinutes = []
            byName = Dictionary(grouping: rows.filter(admitted), by: \.name)
            var shown = Set(byName.keys)
            if request.granularity == .cycle {
                // Planned interfaces known to the file, even without usage.
                for name in stored where Plan.find(for: name, in: snapshot.plans) != nil { shown.insert(name) }
            }
            head = snapshot
            names = shown.sorted { StateStore.key($0) < StateStore.key($1) }
        }
    }

    /// The next piece of the document, nil after the last.
    package func piece() throws(UsageQueryError) -> String? {
        guard !finished else { return nil }
        guard var stream else {
            var template = UsageTable(slices: [], plans: head.plans, granularity: request.granularity, top: top, zone: .system, now: now)
            template.saves = head.saves
            template.path = pieces.path
            template.wallTime = wall
            template.emptyNote = emptyNote
            var stream = UsageStream(table: template, format: format)
            let text = stream.textHead(path: pieces.path) + stream.start()
            self.stream = stream
            return text
        }
        defer { self.stream = stream }
        while index < names.count {
            let name = names[index]
            if request.granularity == .hour {
                if let text = try hourPiece(name, &stream) { return text }
            } else {
                index += 1
                let table = UsageTable(
                    slices: byName.removeValue(forKey: name) ?? [], plans: head.plans, granularity: request.granularity, top: top,
                    zone: .system, now: now, names: [name], kinds: head.kinds, begin: request.begin, end: request.end, limit: request.limit,
                    cache: cache)
                var out = ""
                for var interface in table.interfaces {
                    interface.alias = head.aliases[interface.stored]
                    out += write(&interface, whole: true, &stream)
                }
                if !out.isEmpty { return out }
            }
            if next != nil { break }
        }
        finished = true
        return stream.finish(path: pieces.path, next: next.flatMap { cursor in link.map { $0(cursor) } })
    }

    /// The next piece of one interface's hours, nil when it has no more.
    func hourPiece(_ name: String, _ stream: inout UsageStream) throws(UsageQueryError) -> String? {
        do throws(StoreError) {
            if hours == nil {
                var from = request.begin
                if let after = request.after, after.interface == name { from = max(from ?? .min, after.start + 1) }
                guard let start = try pieces.start(name: name, from: from, to: request.end, limit: request.limit) else {
                    // Nothing saved yet: what was counted since, alone.
                    index += 1
                    let counted = (unsavedHours.removeValue(forKey: name) ?? [:]).values.filter { $0.start >= from ?? .min }
                    return hourTable(name, kind: counted.first?.kind ?? .other, counted.sorted { $0.start < $1.start }, whole: true, &stream)
                }
                hours = Hours(name: name, kind: start.kind, pending: start.days, from: start.hoursFrom)
            }
            guard var current = hours else { return nil }
            // (At least one: days as many as a chunk go with the first hour.)
            let wanted = max(1, chunk - current.pending.count)
            var read = wanted > 0 ? try pieces.hours(name: name, from: current.from, to: request.end, count: wanted) : []
            if let last = read.last { current.from = last.start + 1 }
            let done = read.count < wanted
            // The hours counted since the last save: added to the saved
            // hour they share, the rest after the file's last one.
            if var counted = unsavedHours[name] {
                for n in read.indices {
                    guard let more = counted.removeValue(forKey: read[n].start) else { continue }
                    read[n].counters.add(more.counters)
                    read[n].quality = max(read[n].quality, more.quality)
                }
                if done {
                    read += counted.values.filter { $0.start >= (request.after?.interface == name ? request.after!.start + 1 : .min) }
                        .sorted { $0.start < $1.start }
                    counted = [:]
                }
                unsavedHours[name] = counted.isEmpty ? nil : counted
            }
            current.pending += read
            if current.pending.count < chunk && !done {
                hours = current
                return ""
            }
            hours = done ? nil : current
            if done { index += 1 }
            guard !current.pending.isEmpty else { return nil }
            let whole = done && !current.parted
            let slices = current.pending
            current.pending.removeAll(keepingCapacity: true)
            current.parted = true
            if !done { hours = current }
            return hourTable(name, kind: current.kind, slices, whole: whole, &stream)
        } catch {
            throw UsageQueryError(error)
        }
    }

    /// Some of an interface's hours as its rows.
    func hourTable(_ name: String, kind: InterfaceKind, _ slices: [UsageSlice], whole: Bool, _ stream: inout UsageStream) -> String? {
        let admitted = slices.filter { filter.admits(StateStore.key($0.name), kind: $0.kind) }
        let table = UsageTable(
            slices: admitted, plans: head.plans, granularity: .hour, zone: .system, now: now, begin: request.begin, end: request.end)
        guard var interface = table.interfaces.first else { return admitted.isEmpty ? nil : "" }
        interface.kind = kind
        interface.alias = head.aliases[name]
        return write(&interface, whole: whole, &stream)
    }

    /// An interface's rows as the stream writes them, after the page's
    /// cursor and within its rows left; a row past them ends the page.
    func write(_ interface: inout UsageTable.Interface, whole: Bool, _ stream: inout UsageStream) -> String {
        if let after = request.after {
            let key = StateStore.key(after.interface)
            if interface.key < key { return "" }
            if interface.key == key { interface.rows.removeAll { $0.period.start <= after.start } }
        }
        if let rows = left {
            if interface.rows.count > rows {
                interface.rows.removeLast(interface.rows.count - rows)
                next = last
                if let row = interface.rows.last { next = UsageCursor(interface: interface.stored, start: row.period.start) }
                index = names.count
            }
            left = rows - interface.rows.count
        }
        guard !interface.rows.isEmpty else { return "" }
        if let row = interface.rows.last { last = UsageCursor(interface: interface.stored, start: row.period.start) }
        return stream.add(interface, whole: whole)
    }
}

extension UsageRequest {
    /// From when a table needs hours: before it, a state file's day rows
    /// stand for them (one row per interface per day). The day to month
    /// tables need none; `--check` today's (a limit per hour), `--summary`
    /// the last 24 hours', `--begin`/`--end` with a time of day those from
    /// that day on; hours every hour (nil).
    package func hoursFrom(now: Int64, check: Bool = false, summary: Bool = false, oneline: Bool = false, zone: LocalZone = .system) -> Int64? {
        if granularity == .hour, !check, !summary, !oneline { return nil }
        let calendar = PeriodCalendar(zone: zone)
        var from = Int64.max
        if check { from = calendar.period(.day, containing: now).start }
        if summary { from = calendar.period(.day, containing: calendar.period(.day, containing: now).start - 1).start }
        for bound in [begin, end].compactMap({ $0 }) {
            let day = calendar.period(.day, containing: bound)
            if day.start != bound { from = min(from, day.start) }
        }
        return from
    }
}
