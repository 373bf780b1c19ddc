import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterSystem

/// How the rows are ordered; `s` cycles through them.
package enum LiveSort: String, Sendable, CaseIterable {
    case rate, total, name

    var next: LiveSort {
        let all = LiveSort.allCases
        return all[(all.firstIndex(of: self)! + 1) % all.count]
    }
}

/// A key the live view understands, decoded from the terminal's bytes.
package enum LiveKey: Sendable, Hashable {
    case character(Character)
    case up, down, pageUp, pageDown, home, end
    case enter, escape, backspace
    case interrupt // Ctrl-C
}

/// What the driver must do after a key.
package enum LiveAction: Sendable, Equatable {
    case none, redraw, quit, zeroTotals
}

/// Something that happened to an interface, for the detail pane.
package struct LiveEvent: Sendable, Hashable {
    /// Unix time.
    package var time: Double
    package var text: String
}

/// Recent rates, oldest first, in a ring: appending never moves the others.
package struct RateHistory: Sendable {
    package let capacity: Int
    private var storage: [Double] = []
    private var start = 0

    package init(capacity: Int) { self.capacity = capacity }

    package mutating func append(_ value: Double) {
        if storage.count < capacity {
            storage.append(value)
        } else {
            storage[start] = value
            start = (start + 1) % capacity
        }
    }

    package var count: Int { storage.count }
    package var isEmpty: Bool { storage.isEmpty }

    /// Oldest first.
    package var values: [Double] { Array(storage[start...] + storage[..<start]) }

    /// The newest `n`, oldest first, read from the ring directly.
    package func suffix(_ n: Int) -> [Double] {
        let k = Swift.min(n, storage.count)
        let first = storage.count < capacity ? storage.count - k : (start + capacity - k) % capacity
        return (0..<k).map { storage[(first + $0) % storage.count] }
    }

    /// The newest `n` sums of two histories of the same length.
    package static func sums(_ a: RateHistory, _ b: RateHistory, last n: Int) -> [Double] {
        zip(a.suffix(n), b.suffix(n)).map { $0 + $1 }
    }

    package var peak: Double { storage.max() ?? 0 }

    /// The highest of the newest `n`, read in place (no copy).
    package func peak(last n: Int) -> Double {
        let k = Swift.min(n, storage.count)
        guard k > 0 else { return 0 }
        let first = storage.count < capacity ? storage.count - k : (start + capacity - k) % capacity
        var top = 0.0
        for j in 0..<k { top = Swift.max(top, storage[(first + j) % storage.count]) }
        return top
    }
    package var average: Double { storage.isEmpty ? 0 : storage.reduce(0, +) / Double(storage.count) }
}

/// One interface as the live view shows it.
package struct LiveInterface: Sendable {
    package var name: String
    package var netns: String
    package var classification: Classification
    package var index: Int?
    package var width: CounterWidth
    package var speedCeilingBps: UInt64?
    package var reportedSpeedBps: UInt64?
    package var operstate: String?
    package var mtu: UInt32?
    /// Bytes per second over the last interval.
    package var rxRate: Double?
    package var txRate: Double?
    /// Quality of the last interval.
    package var rateQuality: Quality = .exact
    /// Recent rates, at most `LiveModel.historyLength`.
    package var rxHistory = RateHistory(capacity: LiveModel.historyLength)
    package var txHistory = RateHistory(capacity: LiveModel.historyLength)
    /// Average rates over the last hour and the last day, in coarser steps.
    package var hourHistory = BucketHistory(bucketSeconds: BucketHistory.hourBucket, capacity: BucketHistory.hourCapacity)
    package var dayHistory = BucketHistory(bucketSeconds: BucketHistory.dayBucket, capacity: BucketHistory.dayCapacity)
    /// The last interval's counters (packets, errors, drops) and its length.
    package var lastCounters = Counters()
    package var lastSeconds: Double?
    package var totals: Counters = .zero
    package var quality: Quality = .exact
    package var events = EventCounts()
    package var present = true
    /// Unix time it went away (deleted, or missing from samples).
    package var goneSince: Double?
    package var recentEvents: [LiveEvent] = []
    /// The row's place in (namespace, name) order, and its namespace's
    /// place among the namespaces, for sorting by numbers.
    var nameRank = 0
    var netnsRank = 0
    /// A slot no interface holds any more.
    var vacant = true
    /// The update that last brought a delta for it.
    var lastDelta = 0

    package var key: SeriesKey { SeriesKey(netns: netns, name: name) }
    package var kind: InterfaceKind { classification.kind }
    package var totalRate: Double { (rxRate ?? 0) + (txRate ?? 0) }
    package var totalPacketRate: Double { (intervalRate(.rxPackets) ?? 0) + (intervalRate(.txPackets) ?? 0) }
    package var peakRx: Double { rxHistory.peak }
    package var peakTx: Double { txHistory.peak }
    package var averageRx: Double { rxHistory.average }
    package var averageTx: Double { txHistory.average }

    /// The last interval's rate of a counter (packets, errors, drops), when
    /// the source counts it.
    package func intervalRate(_ key: CounterKey) -> Double? {
        guard let lastSeconds, lastSeconds > 0, lastCounters.has(key) else { return nil }
        return Double(lastCounters.value(key)) / lastSeconds
    }

    /// The recent history of the span: rx or tx, the newest `n`, oldest first.
    package func history(_ span: LiveSpan, tx: Bool, last n: Int) -> [Double] {
        switch span {
        case .recent: (tx ? txHistory : rxHistory).suffix(n)
        case .hour: hourHistory.suffix(n, tx: tx)
        case .day: dayHistory.suffix(n, tx: tx)
        }
    }

    /// Takes one interval's rates and what happened.
    mutating func took(
        rx: Double?, tx: Double?, counters: Counters, seconds: Double?, quality: Quality, change: DeltaChange, stamp: Int,
        at time: Double
    ) {
        rxRate = rx
        txRate = tx
        rateQuality = quality
        lastDelta = stamp
        lastCounters = counters
        lastSeconds = seconds
        if change != .baseline, change != .deleted {
            rxHistory.append(rx ?? 0)
            txHistory.append(tx ?? 0)
            if let seconds {
                hourHistory.add(rx: rx ?? 0, tx: tx ?? 0, seconds: seconds, at: time)
                dayHistory.add(rx: rx ?? 0, tx: tx ?? 0, seconds: seconds, at: time)
            }
        }
        if let text = change.eventText { note(text, at: time) }
    }

    mutating func note(_ text: String, at time: Double) {
        recentEvents.append(LiveEvent(time: time, text: text))
        if recentEvents.count > LiveModel.recentEventLimit { recentEvents.removeFirst() }
    }
}

/// Everything the screen shows; the renderer is a pure function of it and
/// the terminal's size. Keys change it through `handle`.
package struct LiveModel: Sendable {
    package static let historyLength = 120
    package static let recentEventLimit = 6

    package var host: String
    package var source: String
    package var interval: Double
    /// The selected interface: the top row while the selection follows
    /// the top, else the one the user moved to.
    package var selected: SeriesKey? {
        get { selectionFollowsTop ? visibleSlots().first.map { rows[$0].key } : pick }
        set {
            pick = newValue
            selectionFollowsTop = false
        }
    }
    /// The selection is the top row, whichever interface that is, until
    /// the user moves it elsewhere: so the busiest stays in view at start,
    /// when the first sample (all rates zero) ranks rows by name only.
    /// Followed, it costs nothing per update: the top is found when drawn.
    package var selectionFollowsTop = true
    private var pick: SeriesKey?
    package var sort: LiveSort = .rate
    package var unit: LiveRateUnit = .bytes
    /// Byte rates are shown in bits per second.
    package var bits: Bool { unit == .bits }
    /// The list's rate columns are in packets per second.
    package var packets: Bool { unit == .packets }
    /// A glob or a plain part of names; empty shows all.
    package var filter = ""
    /// Typing a filter: keys go into `filterDraft`.
    package var editingFilter = false
    package var filterDraft = ""
    package var hiddenKinds: Set<InterfaceKind> = []
    package var paused = false
    package var detailOpen = false
    package var helpOpen = false
    /// Unix time of the data shown.
    package var now: Double = 0
    /// How long a gone interface stays, greyed out.
    package var lingerSeconds: Double = 10
    /// A short note for the status line, with the time it was set.
    package var note: (text: String, time: Double)?
    /// The first row shown (the list scrolls to keep the selection visible).
    package var scroll = 0
    /// Rows the list shows at once (the driver sets it from the renderer's
    /// layout): PgDn and PgUp move by it.
    package var pageSize = 10
    /// The row sparklines' scale: one for all rows, or each row its own.
    package var scale: LiveScale = .shared
    /// How far back the detail graphs look.
    package var span: LiveSpan = .recent
    /// The selected interface's addresses, when the driver read them.
    package var addresses: LiveAddresses?
    /// The rows, in slots; `slotOf` finds a key's slot, and the slots of
    /// the last update's deltas are kept in their order, so while the
    /// deltas come in the same order (they follow the source's) a row is
    /// found by position, with no hashing.
    private var rows: [LiveInterface] = []
    private var slotOf: [SeriesKey: Int] = [:]
    private var freeSlots: [Int] = []
    private var deltaOrder: [Int] = []
    private var nextDeltaOrder: [Int] = []
    /// Used slots in (namespace, name) order.
    private var byName: [Int] = []
    /// Rows gone (deleted, or missing from samples), until they leave.
    private var gone: Set<Int> = []
    /// Changes that came while paused, applied when the view resumes.
    private var pendingChanged: [SeriesKey: InterfaceTotals] = [:]
    private var pendingForgotten: Set<SeriesKey> = []
    /// Counts updates, to stamp rows that got a delta.
    private var updates = 0
    /// Rows came or went: the name order is to be computed again.
    private var membershipChanged = false
    /// The longest name, in columns (for the name column's width).
    package private(set) var longestName = 0
    /// Planned interfaces' current cycles, from the state file (live with
    /// --state); drawn as quota bars.
    package var plans: [PlanGauge] = []
    /// Aliases (`ifmeter state alias`), shown beside the names.
    package var aliases: [SeriesKey: String] = [:]

    /// A row's name as the screen shows it: with its alias, if any.
    package func shownName(_ key: SeriesKey) -> String {
        guard let alias = aliases[key] else { return key.display }
        return key.display + " [" + TerminalText.escaped(alias) + "]"
    }
    /// Physical and tunnel rates of the last sample.
    package private(set) var summary = TrafficSummary()
    /// Where ordinary traffic leaves, and the outside-the-tunnel rate, when
    /// the view follows routes (one namespace).
    package var route: RouteSummary?

    package init(host: String, source: String, interval: Double) {
        self.host = host
        self.source = source
        self.interval = interval
    }

    /// How many interfaces the view holds.
    package var count: Int { slotOf.count }
    package var isEmpty: Bool { slotOf.isEmpty }

    /// The row of an interface.
    package func row(for key: SeriesKey) -> LiveInterface? { slotOf[key].map { rows[$0] } }

    /// The row of an interface of the own namespace.
    package func row(_ name: String) -> LiveInterface? { row(for: SeriesKey(name: name)) }

    // MARK: data

    /// Takes one update: its deltas (rates, history, events) and the totals
    /// that changed. `time` is Unix time. A paused view keeps what it shows
    /// and catches up when it resumes. Costs what the update holds: rows are
    /// changed in place, found by position or by one hash.
    package mutating func update(deltas: [InterfaceDelta], changed: [InterfaceTotals], forgotten: [SeriesKey], time: Double) {
        if paused {
            for key in forgotten {
                pendingChanged[key] = nil
                pendingForgotten.insert(key)
            }
            for t in changed { pendingChanged[t.key] = t }
            return
        }
        now = time
        updates += 1
        let stamp = updates
        for key in forgotten { remove(key) }
        var sampled = TrafficSummary()
        nextDeltaOrder.removeAll(keepingCapacity: true)
        // By position: a delta is big, copies cost.
        for n in deltas.indices {
            let change = deltas[n].change
            let rx = deltas[n].rate(.rxBytes), tx = deltas[n].rate(.txBytes)
            if change != .deleted { sampled.add(deltas[n].classification.kind, rx: rx ?? 0, tx: tx ?? 0) }
            var slot = -1
            if n < deltaOrder.count {
                let candidate = deltaOrder[n]
                if !rows[candidate].vacant, ExactText.equal(rows[candidate].name, deltas[n].name),
                    ExactText.equal(rows[candidate].netns, deltas[n].netns)
                {
                    slot = candidate
                }
            }
            if slot < 0 {
                slot = self.slot(
                    for: deltas[n].key,
                    or: LiveInterface(
                        name: deltas[n].name, netns: deltas[n].netns, classification: deltas[n].classification,
                        index: deltas[n].index, width: .bits64))
            }
            nextDeltaOrder.append(slot)
            rows[slot].took(
                rx: rx, tx: tx, counters: deltas[n].counters, seconds: deltas[n].seconds, quality: deltas[n].quality, change: change,
                stamp: stamp, at: time)
            // Shown in the status line as it happens.
            switch change {
            case .deleted: note = ("\(deltas[n].key.display) deleted", time)
            case .recreated: note = ("\(deltas[n].key.display) recreated", time)
            case .appeared: note = ("\(deltas[n].key.display) appeared", time)
            default: break
            }
        }
        if !deltas.isEmpty {
            summary = sampled
            swap(&deltaOrder, &nextDeltaOrder)
        }
        for t in changed { absorb(t, time: time, stamp: stamp) }
        // Gone rows: no rate any more, and they leave after the linger time.
        for slot in gone {
            if rows[slot].lastDelta != stamp {
                rows[slot].rxRate = nil
                rows[slot].txRate = nil
            }
            if let since = rows[slot].goneSince, time - since > lingerSeconds { remove(rows[slot].key) }
        }
        if membershipChanged { rank() }
        keepSelectionValid()
    }

    /// The slot of `key`, made from `make` when it has none.
    private mutating func slot(for key: SeriesKey, or make: @autoclosure () -> LiveInterface) -> Int {
        if let slot = slotOf[key] { return slot }
        var row = make()
        row.vacant = false
        let slot: Int
        if let reused = freeSlots.popLast() {
            rows[reused] = row
            slot = reused
        } else {
            rows.append(row)
            slot = rows.count - 1
        }
        slotOf[key] = slot
        membershipChanged = true
        return slot
    }

    /// Takes an interface's totals and facts.
    private mutating func absorb(_ t: InterfaceTotals, time: Double, stamp: Int) {
        let slot = self.slot(
            for: t.key, or: LiveInterface(name: t.name, netns: t.netns, classification: t.classification, index: t.index, width: t.width))
        rows[slot].classification = t.classification
        rows[slot].index = t.index
        rows[slot].width = t.width
        rows[slot].speedCeilingBps = t.speedBps
        rows[slot].reportedSpeedBps = t.attributes?.reportedSpeedBps
        rows[slot].operstate = t.attributes?.operstate
        rows[slot].mtu = t.attributes?.mtu
        rows[slot].totals = t.totals
        rows[slot].quality = t.quality
        rows[slot].events = t.events
        if t.present {
            rows[slot].present = true
            rows[slot].goneSince = nil
            gone.remove(slot)
        } else {
            if rows[slot].goneSince == nil {
                rows[slot].goneSince = time
                if t.deletedAt == nil, rows[slot].lastDelta != stamp { rows[slot].note("gone", at: time) }
            }
            rows[slot].present = false
            gone.insert(slot)
        }
    }

    private mutating func remove(_ key: SeriesKey) {
        guard let slot = slotOf.removeValue(forKey: key) else { return }
        rows[slot] = LiveInterface(name: "", netns: "", classification: rows[slot].classification, index: nil, width: .bits64)
        rows[slot].vacant = true
        freeSlots.append(slot)
        gone.remove(slot)
        membershipChanged = true
    }

    /// Puts the rows in (namespace, name) natural order (`va2` before
    /// `va19`), once per change of the rows: sorting the view then compares
    /// numbers, not names.
    private mutating func rank() {
        byName = slotOf.sorted { NaturalOrder.less($0.key, $1.key) }.map(\.value)
        longestName = 0
        var netns: String?
        var netnsRank = -1
        for (n, slot) in byName.enumerated() {
            rows[slot].nameRank = n
            if netns == nil || !ExactText.equal(netns!, rows[slot].netns) {
                netns = rows[slot].netns
                netnsRank += 1
            }
            rows[slot].netnsRank = netnsRank
            longestName = max(longestName, rows[slot].key.display.unicodeScalars.count)
        }
        membershipChanged = false
    }

    /// Applies what came while the view was paused.
    mutating func catchUp() {
        let changed = Array(pendingChanged.values), forgotten = Array(pendingForgotten)
        pendingChanged = [:]
        pendingForgotten = []
        update(deltas: [], changed: changed, forgotten: forgotten, time: now)
    }

    // MARK: what is shown

    /// Whether a row passes the filter and the kinds shown.
    func isVisible(_ row: LiveInterface) -> Bool {
        let pattern = NamePattern(filter)
        return !hiddenKinds.contains(row.kind) && (pattern.matches(row.name) || pattern.matches(row.key.description))
    }

    /// The slots of the rows shown, filtered and sorted: by numbers (rate,
    /// total, then the name order), never by copying rows or comparing names.
    func visibleSlots() -> [Int] {
        let pattern = NamePattern(filter)
        let shown = { (slot: Int) -> Bool in
            !self.hiddenKinds.contains(self.rows[slot].kind)
                && (self.filter.isEmpty || pattern.matches(self.rows[slot].name) || pattern.matches(self.rows[slot].key.description))
        }
        if sort == .name { return byName.filter(shown) }
        var entries: [(primary: Double, rank: Int, slot: Int)] = []
        entries.reserveCapacity(byName.count)
        for slot in byName where shown(slot) {
            // By rate: what the rate columns show (packets in packets mode).
            let primary =
                sort == .rate
                ? -(packets ? rows[slot].totalPacketRate : rows[slot].totalRate)
                : -Double(rows[slot].totals.rxBytes &+ rows[slot].totals.txBytes)
            entries.append((primary, rows[slot].nameRank, slot))
        }
        // Grouped by namespace (the own one first), then by the sort.
        entries.sort {
            let a = rows[$0.slot].netnsRank, b = rows[$1.slot].netnsRank
            if a != b { return a < b }
            return $0.primary != $1.primary ? $0.primary < $1.primary : $0.rank < $1.rank
        }
        return entries.map(\.slot)
    }

    /// The keys of the rows shown, in order.
    package var visibleKeys: [SeriesKey] { visibleSlots().map { rows[$0].key } }

    /// The rows shown, in order.
    package var visible: [LiveInterface] { visibleSlots().map { rows[$0] } }

    /// The row in a slot, and the slot of a key (for the renderer).
    func row(at slot: Int) -> LiveInterface { rows[slot] }
    func slot(of key: SeriesKey) -> Int? { slotOf[key] }

    mutating func keepSelectionValid() {
        if selectionFollowsTop {
            scroll = 0
            return
        }
        if let pick, let row = row(for: pick), isVisible(row) { return }
        // The picked interface went away or is hidden: the top again.
        selectionFollowsTop = true
        scroll = 0
    }

    // MARK: keys

    package mutating func handle(_ key: LiveKey) -> LiveAction {
        if editingFilter { return handleFilterKey(key) }
        if helpOpen {
            helpOpen = false
            if key == .character("q") || key == .interrupt { return .quit }
            return .redraw
        }
        switch key {
        case .character("q"), .interrupt: return .quit
        case .up, .character("k"): moveSelection(-1)
        case .down, .character("j"): moveSelection(1)
        case .pageUp: moveSelection(-max(1, pageSize), page: true)
        case .pageDown: moveSelection(max(1, pageSize), page: true)
        case .home, .character("g"): moveSelection(-Int.max / 2)
        case .end, .character("G"): moveSelection(Int.max / 2)
        case .character("a"): scale = scale.next
        case .character("t"), .character("\t"): span = span.next
        case .enter: detailOpen.toggle()
        case .escape: detailOpen = false
        case .character("b"): unit = unit.next
        case .character("s"):
            sort = sort.next
            keepSelectionValid()
        case .character("f"), .character("/"):
            editingFilter = true
            filterDraft = filter
        case .character("p"):
            paused.toggle()
            if !paused { catchUp() }
            note = (paused ? "paused: the figures stay still (sampling goes on)" : "resumed", now)
        case .character("r"):
            note = ("totals zeroed; their quality starts over with them", now)
            return .zeroTotals
        case .character("?"), .character("h"): helpOpen = true
        case .character(let c) where ("1"..."7").contains(c):
            let kind = InterfaceKind.allCases[Int(String(c))! - 1]
            if hiddenKinds.contains(kind) { hiddenKinds.remove(kind) } else { hiddenKinds.insert(kind) }
            keepSelectionValid()
        default: return .none
        }
        return .redraw
    }

    mutating func handleFilterKey(_ key: LiveKey) -> LiveAction {
        switch key {
        case .enter:
            filter = filterDraft
            editingFilter = false
            keepSelectionValid()
        case .escape:
            editingFilter = false
        case .interrupt:
            return .quit
        case .backspace:
            if !filterDraft.isEmpty { filterDraft.removeLast() }
        case .character("\u{15}"):
            // Ctrl-U, as in a shell: the draft is cleared.
            filterDraft = ""
        case .character(let c)
        where !c.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }):
            filterDraft.append(c)
        default: return .none
        }
        return .redraw
    }

    /// Moves the selection by `step` rows; a page moves the list with it,
    /// so the selection keeps its place on the screen.
    mutating func moveSelection(_ step: Int, page: Bool = false) {
        let rows = visibleKeys
        guard !rows.isEmpty else { return }
        let current = rows.firstIndex { $0 == selected } ?? 0
        let target = max(0, min(rows.count - 1, current.addingReportingOverflow(step).overflow ? (step < 0 ? 0 : rows.count - 1) : current + step))
        pick = rows[target]
        // Back on the top row, it follows the top again.
        selectionFollowsTop = target == 0
        let room = max(1, pageSize)
        if page { scroll += step }
        scroll = max(0, min(scroll, rows.count - room))
        if target < scroll { scroll = target }
        if target >= scroll + room { scroll = target - room + 1 }
    }
}
