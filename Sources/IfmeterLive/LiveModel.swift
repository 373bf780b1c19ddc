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

/// One interface as the live view shows it.
public struct LiveInterface: Sendable {
    public var name: String
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
    /// Recent rates, oldest first, at most `LiveModel.historyLength`.
    public var rxHistory: [Double] = []
    public var txHistory: [Double] = []
    public var totals: Counters = .zero
    public var quality: Quality = .exact
    public var events = EventCounts()
    public var present = true
    /// Unix time it went away (deleted, or missing from samples).
    public var goneSince: Double?
    public var recentEvents: [LiveEvent] = []

    public var kind: InterfaceKind { classification.kind }
    public var totalRate: Double { (rxRate ?? 0) + (txRate ?? 0) }
    public var peakRx: Double { rxHistory.max() ?? 0 }
    public var peakTx: Double { txHistory.max() ?? 0 }
    public var averageRx: Double { rxHistory.isEmpty ? 0 : rxHistory.reduce(0, +) / Double(rxHistory.count) }
    public var averageTx: Double { txHistory.isEmpty ? 0 : txHistory.reduce(0, +) / Double(txHistory.count) }
}

/// Everything the screen shows; the renderer is a pure function of it and
/// the terminal's size. Keys change it through `handle`.
public struct LiveModel: Sendable {
    public static let historyLength = 120
    public static let recentEventLimit = 6

    public var host: String
    public var source: String
    public var interval: Double
    public var interfaces: [String: LiveInterface] = [:]
    public var selected: String?
    public var sort: LiveSort = .rate
    public var bits = false
    /// A glob or a plain substring of names; empty shows all.
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

    public init(host: String, source: String, interval: Double) {
        self.host = host
        self.source = source
        self.interval = interval
    }

    // MARK: data

    /// Takes one interval's deltas and the engine's totals. `time` is Unix
    /// time. A paused view keeps what it shows.
    public mutating func update(deltas: [InterfaceDelta], totals: [InterfaceTotals], time: Double) {
        if paused { return }
        now = time
        var byName: [String: InterfaceDelta] = [:]
        for delta in deltas { byName[delta.name] = delta }
        var seen = Set<String>()
        for t in totals {
            seen.insert(t.name)
            var row = interfaces[t.name] ?? LiveInterface(
                name: t.name, classification: t.classification, index: t.index, width: t.width)
            row.classification = t.classification
            row.index = t.index
            row.width = t.width
            row.speedCeilingBps = t.speedBps
            row.reportedSpeedBps = t.attributes?.reportedSpeedBps
            row.operstate = t.attributes?.operstate
            row.totals = t.totals
            row.quality = t.quality
            row.events = t.events
            if let delta = byName[t.name] {
                row.rxRate = delta.rate(.rxBytes)
                row.txRate = delta.rate(.txBytes)
                row.rateQuality = delta.quality
                if delta.change != .baseline, delta.change != .deleted {
                    row.rxHistory.append(row.rxRate ?? 0)
                    row.txHistory.append(row.txRate ?? 0)
                    if row.rxHistory.count > Self.historyLength { row.rxHistory.removeFirst(row.rxHistory.count - Self.historyLength) }
                    if row.txHistory.count > Self.historyLength { row.txHistory.removeFirst(row.txHistory.count - Self.historyLength) }
                }
                if let text = Self.describe(delta.change) {
                    row.recentEvents.append(LiveEvent(time: time, text: text))
                    if row.recentEvents.count > Self.recentEventLimit { row.recentEvents.removeFirst() }
                }
                // Shown in the status line as it happens.
                switch delta.change {
                case .deleted: note = ("\(t.name) deleted", time)
                case .recreated: note = ("\(t.name) recreated", time)
                case .appeared: note = ("\(t.name) appeared", time)
                default: break
                }
            } else if row.present || t.deletedAt != nil {
                row.rxRate = nil
                row.txRate = nil
            }
            if t.present {
                row.present = true
                row.goneSince = nil
            } else {
                if row.goneSince == nil {
                    row.goneSince = time
                    if t.deletedAt == nil, byName[t.name] == nil {
                        row.recentEvents.append(LiveEvent(time: time, text: "gone"))
                        if row.recentEvents.count > Self.recentEventLimit { row.recentEvents.removeFirst() }
                    }
                }
                row.present = false
            }
            interfaces[t.name] = row
        }
        // Gone for longer than the linger time, or forgotten by the engine.
        for (name, row) in interfaces where !seen.contains(name) || (row.goneSince.map { time - $0 > lingerSeconds } ?? false) {
            interfaces[name] = nil
        }
        keepSelectionValid()
    }

    static func describe(_ change: DeltaChange) -> String? {
        switch change {
        case .wrap: "32-bit counter wrapped (corrected)"
        case .reset: "counters reset (lower bound)"
        case .recreated: "recreated"
        case .deleted: "deleted"
        case .appeared: "appeared"
        case .restarted: "counters restarted (reboot while stopped)"
        case .baseline, .steady: nil
        }
    }

    // MARK: what is shown

    /// The rows shown, filtered and sorted.
    public var visible: [LiveInterface] {
        let rows = interfaces.values.filter { row in
            !hiddenKinds.contains(row.kind) && Self.matches(filter: filter, name: row.name)
        }
        return rows.sorted { a, b in
            switch sort {
            case .rate:
                if a.totalRate != b.totalRate { return a.totalRate > b.totalRate }
            case .total:
                let ta = a.totals.rxBytes &+ a.totals.txBytes, tb = b.totals.rxBytes &+ b.totals.txBytes
                if ta != tb { return ta > tb }
            case .name: break
            }
            return a.name < b.name
        }
    }

    static func matches(filter: String, name: String) -> Bool {
        if filter.isEmpty { return true }
        if filter.contains(where: { "*?[".contains($0) }) { return Glob.matches(filter, name) }
        return name.contains(filter)
    }

    mutating func keepSelectionValid() {
        let rows = visible
        if let selected, rows.contains(where: { $0.name == selected }) { return }
        selected = rows.first?.name
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
        let current = rows.firstIndex { $0.name == selected } ?? 0
        let target = max(0, min(rows.count - 1, current.addingReportingOverflow(step).overflow ? (step < 0 ? 0 : rows.count - 1) : current + step))
        selected = rows[target].name
    }
}
