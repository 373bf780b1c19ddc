import IfmeterCore

/// How the rows are ordered; `s` cycles through them.
public enum LiveSort: String, Sendable, CaseIterable {
    case rate, total, name

    var next: LiveSort {
        let all = LiveSort.allCases
        return all[(all.firstIndex(of: self)! + 1) % all.count]
    }
}

/// A key the live view understands, decoded from the terminal's bytes.
public enum LiveKey: Sendable, Hashable {
    case character(Character)
    case up, down, pageUp, pageDown, home, end
    case enter, escape, backspace
    case interrupt  // Ctrl-C
}

/// What the driver must do after a key.
public enum LiveAction: Sendable, Equatable {
    case none, redraw, quit, zeroTotals
}

/// Something that happened to an interface, for the detail pane.
public struct LiveEvent: Sendable, Hashable {
    /// Unix time.
    public var time: Double
    public var text: String
}

/// Recent rates, oldest first, in a ring: appending never moves the others.
public struct RateHistory: Sendable {
    public let capacity: Int
    private var storage: [Double] = []
    private var start = 0

    public init(capacity: Int) { self.capacity = capacity }

    public mutating func append(_ value: Double) {
        if storage.count < capacity {
            storage.append(value)
        } else {
            storage[start] = value
            start = (start + 1) % capacity
        }
    }

    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.isEmpty }

    /// Oldest first.
    public var values: [Double] { Array(storage[start...] + storage[..<start]) }

    /// The newest `n`, oldest first.
    public func suffix(_ n: Int) -> [Double] { Array(values.suffix(n)) }

    public var peak: Double { storage.max() ?? 0 }
    public var average: Double { storage.isEmpty ? 0 : storage.reduce(0, +) / Double(storage.count) }
}

/// One interface as the live view shows it.
public struct LiveInterface: Sendable {
    public var name: String
    public var netns: String
    public var classification: Classification
    public var index: Int?
    public var width: CounterWidth
    public var speedCeilingBps: UInt64?
    public var reportedSpeedBps: UInt64?
    public var operstate: String?
    /// Bytes per second over the last interval.
    public var rxRate: Double?
    public var txRate: Double?
    /// Quality of the last interval.
    public var rateQuality: Quality = .exact
    /// Recent rates, at most `LiveModel.historyLength`.
    public var rxHistory = RateHistory(capacity: LiveModel.historyLength)
    public var txHistory = RateHistory(capacity: LiveModel.historyLength)
    public var totals: Counters = .zero
    public var quality: Quality = .exact
    public var events = EventCounts()
    public var present = true
    /// Unix time it went away (deleted, or missing from samples).
    public var goneSince: Double?
    public var recentEvents: [LiveEvent] = []

    public var key: SeriesKey { SeriesKey(netns: netns, name: name) }
    public var kind: InterfaceKind { classification.kind }
    public var totalRate: Double { (rxRate ?? 0) + (txRate ?? 0) }
    public var peakRx: Double { rxHistory.peak }
    public var peakTx: Double { txHistory.peak }
    public var averageRx: Double { rxHistory.average }
    public var averageTx: Double { txHistory.average }

    mutating func note(_ text: String, at time: Double) {
        recentEvents.append(LiveEvent(time: time, text: text))
        if recentEvents.count > LiveModel.recentEventLimit { recentEvents.removeFirst() }
    }
}

/// Everything the screen shows; the renderer is a pure function of it and
/// the terminal's size. Keys change it through `handle`.
public struct LiveModel: Sendable {
    public static let historyLength = 120
    public static let recentEventLimit = 6

    public var host: String
    public var source: String
    public var interval: Double
    public var interfaces: [SeriesKey: LiveInterface] = [:]
    public var selected: SeriesKey?
    public var sort: LiveSort = .rate
    public var bits = false
    /// A glob or a plain part of names; empty shows all.
    public var filter = ""
    /// Typing a filter: keys go into `filterDraft`.
    public var editingFilter = false
    public var filterDraft = ""
    public var hiddenKinds: Set<InterfaceKind> = []
    public var paused = false
    public var detailOpen = false
    public var helpOpen = false
    /// Unix time of the data shown.
    public var now: Double = 0
    /// How long a gone interface stays, greyed out.
    public var lingerSeconds: Double = 10
    /// A short note for the status line, with the time it was set.
    public var note: (text: String, time: Double)?
    /// The first row shown (the list scrolls to keep the selection visible).
    public var scroll = 0
    /// Rows gone (deleted, or missing from samples), until they leave.
    private var gone: Set<SeriesKey> = []
    /// Changes that came while paused, applied when the view resumes.
    private var pendingChanged: [SeriesKey: InterfaceTotals] = [:]
    private var pendingForgotten: Set<SeriesKey> = []

    public init(host: String, source: String, interval: Double) {
        self.host = host
        self.source = source
        self.interval = interval
    }

    /// The row of an interface of the own namespace.
    public func row(_ name: String) -> LiveInterface? { interfaces[SeriesKey(name: name)] }

    // MARK: data

    /// Takes one update: its deltas (rates, history, events) and the totals
    /// that changed. `time` is Unix time. A paused view keeps what it shows
    /// and catches up when it resumes.
    public mutating func update(deltas: [InterfaceDelta], changed: [InterfaceTotals], forgotten: [SeriesKey], time: Double) {
        if paused {
            for key in forgotten {
                pendingChanged[key] = nil
                pendingForgotten.insert(key)
            }
            for t in changed { pendingChanged[t.key] = t }
            return
        }
        now = time
        for key in forgotten { remove(key) }
        var withDelta = Set<SeriesKey>()
        for delta in deltas {
            let key = delta.key
            withDelta.insert(key)
            var row = interfaces[key] ?? LiveInterface(
                name: delta.name, netns: delta.netns, classification: delta.classification, index: delta.index,
                width: .bits64)
            row.rxRate = delta.rate(.rxBytes)
            row.txRate = delta.rate(.txBytes)
            row.rateQuality = delta.quality
            if delta.change != .baseline, delta.change != .deleted {
                row.rxHistory.append(row.rxRate ?? 0)
                row.txHistory.append(row.txRate ?? 0)
            }
            if let text = delta.change.eventText { row.note(text, at: time) }
            // Shown in the status line as it happens.
            switch delta.change {
            case .deleted: note = ("\(key) deleted", time)
            case .recreated: note = ("\(key) recreated", time)
            case .appeared: note = ("\(key) appeared", time)
            default: break
            }
            interfaces[key] = row
        }
        for t in changed { absorb(t, time: time, hadDelta: withDelta.contains(t.key)) }
        // Gone rows: no rate any more, and they leave after the linger time.
        for key in gone {
            guard var row = interfaces[key] else {
                gone.remove(key)
                continue
            }
            if !withDelta.contains(key) {
                row.rxRate = nil
                row.txRate = nil
                interfaces[key] = row
            }
            if let since = row.goneSince, time - since > lingerSeconds { remove(key) }
        }
        keepSelectionValid()
    }

    /// Takes an interface's totals and facts.
    private mutating func absorb(_ t: InterfaceTotals, time: Double, hadDelta: Bool) {
        var row = interfaces[t.key] ?? LiveInterface(
            name: t.name, netns: t.netns, classification: t.classification, index: t.index, width: t.width)
        row.classification = t.classification
        row.index = t.index
        row.width = t.width
        row.speedCeilingBps = t.speedBps
        row.reportedSpeedBps = t.attributes?.reportedSpeedBps
        row.operstate = t.attributes?.operstate
        row.totals = t.totals
        row.quality = t.quality
        row.events = t.events
        if t.present {
            row.present = true
            row.goneSince = nil
            gone.remove(t.key)
        } else {
            if row.goneSince == nil {
                row.goneSince = time
                if t.deletedAt == nil, !hadDelta { row.note("gone", at: time) }
            }
            row.present = false
            gone.insert(t.key)
        }
        interfaces[t.key] = row
    }

    private mutating func remove(_ key: SeriesKey) {
        interfaces[key] = nil
        gone.remove(key)
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
        !hiddenKinds.contains(row.kind) && NamePattern(filter).matches(row.name)
    }

    /// The rows shown, filtered and sorted.
    public var visible: [LiveInterface] {
        let rows = interfaces.values.filter(isVisible)
        return rows.sorted { a, b in
            switch sort {
            case .rate:
                if a.totalRate != b.totalRate { return a.totalRate > b.totalRate }
            case .total:
                let ta = a.totals.rxBytes &+ a.totals.txBytes, tb = b.totals.rxBytes &+ b.totals.txBytes
                if ta != tb { return ta > tb }
            case .name: break
            }
            return a.key < b.key
        }
    }

    mutating func keepSelectionValid() {
        if let selected, let row = interfaces[selected], isVisible(row) { return }
        selected = visible.first?.key
    }

    // MARK: keys

    public mutating func handle(_ key: LiveKey) -> LiveAction {
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
        case .pageUp: moveSelection(-10)
        case .pageDown: moveSelection(10)
        case .home: moveSelection(-Int.max / 2)
        case .end: moveSelection(Int.max / 2)
        case .enter: detailOpen.toggle()
        case .escape: detailOpen = false
        case .character("b"): bits.toggle()
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
        case .character(let c) where !c.isNewline:
            filterDraft.append(c)
        default: return .none
        }
        return .redraw
    }

    mutating func moveSelection(_ step: Int) {
        let rows = visible
        guard !rows.isEmpty else { return }
        let current = rows.firstIndex { $0.key == selected } ?? 0
        let target = max(0, min(rows.count - 1, current.addingReportingOverflow(step).overflow ? (step < 0 ? 0 : rows.count - 1) : current + step))
        selected = rows[target].key
    }
}
