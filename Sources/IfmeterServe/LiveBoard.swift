import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import Synchronization

/// What serve's dashboard shows and `/api/v1/interfaces` answers: every
/// interface's totals (the exposition's counters: the same numbers a
/// scrape gives), its rates over the last interval, and the last minutes
/// of those rates. Kept from the pipeline's updates; the document is
/// rendered once per sample, when first asked for (a page open or not),
/// and pushed to the dashboards' event streams as it is.
public final class LiveBoard: Sendable {
    /// How many samples of rates each interface keeps for the rolling graph.
    public static let historyLength = 60

    struct Row: Sendable {
        var name: String
        var netns: String
        var kind: InterfaceKind
        var evidence: String
        var present: Bool
        var quality: Quality
        var events: EventCounts
        var rxBytes: UInt64
        var txBytes: UInt64
        var rxRate: Double = 0
        var txRate: Double = 0
        /// Rates of the last samples, oldest first (rx, tx).
        var history: [(Float, Float)] = []
        /// The row's JSON (without history), kept until the row changes:
        /// a sample re-renders only the interfaces it moved.
        var fragment: [UInt8]?

        /// Whether the rates moved (the row's fragment is made anew).
        mutating func rate(rx: Double, tx: Double) -> Bool {
            let moved = rx != rxRate || tx != txRate
            if moved { fragment = nil }
            rxRate = rx
            txRate = tx
            if history.count >= LiveBoard.historyLength { history.removeFirst(history.count - LiveBoard.historyLength + 1) }
            history.append((Float(rx), Float(tx)))
            return moved
        }

        /// A row as the scrape shows it (no rate yet): the totals are the
        /// exposition's, summed in one place (`ExpositionRow`), whether
        /// the board woke from the scrape cache's rows or takes an update.
        init(_ e: ExpositionRow) {
            name = e.name
            netns = e.netns
            kind = e.kind
            evidence = e.evidence
            present = e.present
            quality = e.quality
            events = e.events
            rxBytes = e.counters.value(.rxBytes)
            txBytes = e.counters.value(.txBytes)
        }

        mutating func take(_ t: InterfaceTotals) {
            let rates = (rxRate, txRate, history)
            self = Row(ExpositionRow(t))
            (rxRate, txRate, history) = rates
        }
    }

    struct State: Sendable {
        var rows: [SeriesKey: Row] = [:]
        var generation = 0
        var wallTime: Double = 0
        var seconds: Double?
        /// The document of `rendered.generation` (with and without history).
        var rendered: [Bool: (generation: Int, body: HTTPBody)] = [:]
        /// The rows' keys in order; nil after one came or went.
        var order: [SeriesKey]?
        /// Rows made anew and rows gone since the last sample's event.
        var moved = Set<SeriesKey>()
        var gone: [SeriesKey] = []
        /// Kept up to date only once somebody asked (a page, the API):
        /// until then serve holds no second copy of its interfaces.
        var active: Bool
    }

    private let state: Mutex<State>
    /// Where a sleeping board takes every interface's totals from when it wakes.
    private let cache: ScrapeCache?
    private let interval: Double
    private let version: String
    /// The dashboards' event streams: each sample's document, as one event.
    public let events = EventChannel()

    /// With `cache`, the board sleeps until first asked: then it takes
    /// every interface's totals from the scrape's, and rates from the next
    /// sample on. Without, it follows every update from the first.
    public init(interval: Double, version: String, cache: ScrapeCache? = nil) {
        self.interval = interval
        self.version = version
        self.cache = cache
        state = Mutex(State(active: cache == nil))
    }

    /// Wakes the board (a page or a script asked): from now on it keeps
    /// every interface's rates and the last minute of them.
    public func wake() {
        guard let cache, !state.withLock({ $0.active }) else { return }
        let (rows, generation) = cache.exposedRows()
        state.withLock { state in
            guard !state.active else { return }
            state.active = true
            for row in rows { state.rows[row.key] = Row(row) }
            state.generation = generation
            state.order = nil
        }
    }

    /// Takes an update: totals of what changed, rates from its deltas.
    public func apply(_ update: borrowing PipelineUpdate) {
        let changed = update.changed, forgotten = update.forgotten, deltas = update.deltas
        let sequence = update.sequence, wall = update.wallTime, seconds = update.seconds
        let applied = update.outcome == .sampled
        let (interval, version) = (self.interval, self.version)
        var event: [UInt8]?
        state.withLock { state in
            guard state.active else { return }
            for key in forgotten where state.rows.removeValue(forKey: key) != nil {
                state.order = nil
                state.moved.remove(key)
                state.gone.append(key)
            }
            for t in changed {
                if state.rows[t.key] == nil {
                    state.rows[t.key] = Row(ExpositionRow(t))
                    state.order = nil
                } else {
                    state.rows[t.key]!.take(t)
                }
                state.moved.insert(t.key)
            }
            guard applied else { return }
            var moved: [SeriesKey: (Double, Double)] = [:]
            for d in deltas {
                guard let covered = d.seconds, covered > 0 else { continue }
                let previous = moved[d.key] ?? (0, 0)
                moved[d.key] = (
                    previous.0 + Double(d.counters.value(.rxBytes)) / covered, previous.1 + Double(d.counters.value(.txBytes)) / covered
                )
            }
            for index in state.rows.indices {
                let key = state.rows.keys[index]
                let rates = moved[key] ?? (0, 0)
                if state.rows.values[index].rate(rx: rates.0, tx: rates.1) { state.moved.insert(key) }
            }
            let since = state.generation
            state.generation = sequence
            state.wallTime = wall
            state.seconds = seconds
            // The event: what moved since the last one, over `since` (a
            // page whose figures are of another sample reads them whole).
            if events.listeners > 0 {
                let keys = state.moved.sorted()
                let gone = state.gone.sorted()
                event = Self.render(&state, keys: keys, history: false, partial: (since, gone), interval: interval, version: version)
            }
            state.moved = []
            state.gone = []
        }
        if let event { events.publish(HTTPBody(event)) }
    }

    /// The generation (the pipeline update) the board is as of.
    public var generation: Int { state.withLock { $0.generation } }

    /// `/api/v1/interfaces` (`schemas/ifmeter-interfaces.v1.schema.json`):
    /// one compact line of JSON, rendered once per sample, the way the
    /// events are (`render`).
    public func document(history: Bool) -> HTTPBody {
        wake()
        let (generation, cached) = state.withLock { ($0.generation, $0.rendered[history]) }
        if let cached, cached.generation == generation { return cached.body }
        let (interval, version) = (self.interval, self.version)
        if !history {
            // From the rows' kept fragments (those a sample moved made anew),
            // under the lock: what a page follows each sample costs what
            // changed, not every interface.
            return state.withLock { state in
                if state.order == nil { state.order = state.rows.keys.sorted() }
                let body = HTTPBody(Self.render(&state, keys: state.order!, history: false, interval: interval, version: version))
                state.rendered[false] = (state.generation, body)
                return body
            }
        }
        // With every row's history (nothing kept to reuse): from a copy,
        // outside the lock, which the pipeline's updates wait for.
        var snapshot = state.withLock { state in
            if state.order == nil { state.order = state.rows.keys.sorted() }
            return state
        }
        let body = HTTPBody(Self.render(&snapshot, keys: snapshot.order!, history: true, interval: interval, version: version))
        state.withLock { state in
            if state.generation == snapshot.generation { state.rendered[true] = (snapshot.generation, body) }
        }
        return body
    }

    /// The document, keys in JSONWriter's (sorted) order, of the rows of
    /// `keys` (`rowObject`'s; without history, each row's bytes are kept
    /// until it changes); with `partial`, an event of what moved since
    /// sample `since` and the keys gone.
    static func render(
        _ state: inout State, keys: [SeriesKey], history: Bool, partial: (since: Int, gone: [SeriesKey])? = nil, interval: Double,
        version: String
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + state.rows.count * (history ? 320 + LiveBoard.historyLength * 16 : 320))
        func append(_ text: String) { out.append(contentsOf: text.utf8) }
        func quoted(_ text: String) -> String {
            var q = ""
            JSONWriter.quote(text, into: &q)
            return q
        }
        append("{\"caveats\":[" + Caveat.all.map(quoted).joined(separator: ",") + "],\"estimate\":true,")
        if let partial {
            append(
                "\"forgotten\":[" + partial.gone.map { "{\"name\":\(quoted($0.name)),\"netns\":\(quoted($0.netns))}" }.joined(separator: ",") + "],")
        }
        append("\"generation\":\(state.generation),\"interfaces\":[")
        var first = true
        for key in keys {
            guard let index = state.rows.index(forKey: key) else { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            if history {
                append(JSONWriter().string(rowObject(state.rows.values[index], history: true)))
            } else if let fragment = state.rows.values[index].fragment {
                out.append(contentsOf: fragment)
            } else {
                let fragment = Array(JSONWriter().string(rowObject(state.rows.values[index], history: false)).utf8)
                state.rows.values[index].fragment = fragment
                out.append(contentsOf: fragment)
            }
        }
        append("],\"interval_seconds\":\(rate(interval)),")
        if partial != nil { append("\"partial\":true,") }
        append("\"schema\":" + quoted(JSONEnvelope.interfaces.schema))
        append(",\"schema_version\":\(JSONEnvelope.interfaces.version),\"seconds\":\(rate(state.seconds ?? 0)),")
        if let partial { append("\"since\":\(partial.since),") }
        append("\"time\":" + (state.wallTime > 0 ? format3(state.wallTime) : "0") + ",\"version\":" + quoted(version) + "}")
        return out
    }

    /// One interface's row: the one place its keys are written.
    static func rowObject(_ row: Row, history: Bool) -> JSONValue {
        var o: [String: JSONValue] = [
            "name": .string(row.name),
            "netns": .string(row.netns),
            "kind": .string(row.kind.rawValue),
            "evidence": .string(row.evidence),
            "present": .bool(row.present),
            "quality": .string(row.quality.name),
            "rx_bytes": .number(String(row.rxBytes)),
            "tx_bytes": .number(String(row.txBytes)),
            "rx_bytes_per_second": .number(rate(row.rxRate)),
            "tx_bytes_per_second": .number(rate(row.txRate)),
            "events": .object([
                "wraps": .number(String(row.events.wraps)),
                "resets": .number(String(row.events.resets)),
                "recreations": .number(String(row.events.recreations)),
                "deletions": .number(String(row.events.deletions)),
            ]),
        ]
        if history {
            o["history"] = .array(row.history.map { .array([.number(rate(Double($0.0))), .number(rate(Double($0.1)))]) })
        }
        return .object(o)
    }

    /// A rate as JSON: bytes per second, to a thousandth.
    static func rate(_ value: Double) -> String {
        guard value.isFinite, value > 0 else { return "0" }
        return format3(value)
    }

    static func format3(_ value: Double) -> String {
        let scaled = (value * 1000).rounded()
        guard scaled < 9e15 else { return String(Int64(value.rounded())) }
        let whole = Int64(scaled) / 1000, fraction = Int64(scaled) % 1000
        if fraction == 0 { return String(whole) }
        var text = String(fraction)
        text = String(repeating: "0", count: 3 - text.count) + text
        while text.hasSuffix("0") { text.removeLast() }
        return "\(whole).\(text)"
    }
}

/// Feeds the live board from the pipeline (a sink: after the enrichers).
public final class LiveBoardFeed: PipelineSink {
    let board: LiveBoard

    public init(board: LiveBoard) { self.board = board }

    public func receive(_ update: borrowing PipelineUpdate) { board.apply(update) }
}
