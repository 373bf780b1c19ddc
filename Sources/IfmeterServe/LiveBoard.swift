import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import Synchronization

/// What serve's dashboard shows and `/api/v1/interfaces` answers: every
/// interface's row of the read model (its totals are the exposition's
/// counters: the same numbers a scrape gives; its rates, over the last
/// interval, worked out once by the model), and the last minutes of those
/// rates. The board keeps no rows: only each interface's history, the
/// rows' rendered JSON until they change, and the documents. The document
/// is rendered once per sample, when first asked for (a page open or
/// not), and pushed to the dashboards' event streams as it is.
package final class LiveBoard: Sendable {
    /// How many samples of rates each interface keeps for the rolling graph.
    package static let historyLength = 60

    struct State: Sendable {
        /// Rates of the last samples by interface, oldest first (rx, tx).
        var history: [SeriesKey: [(Float, Float)]] = [:]
        /// Each row's JSON (without history), kept until the row moves: a
        /// sample re-renders only the interfaces it moved.
        var fragments: [SeriesKey: [UInt8]] = [:]
        /// The sample (the pipeline update) the board is as of.
        var generation = 0
        /// The document of `rendered.generation` (with and without history).
        var rendered: [Bool: (generation: Int, body: HTTPBody)] = [:]
        /// Rows the model made anew or moved, and rows gone, since the last
        /// sample's event.
        var moved = Set<SeriesKey>()
        var gone: [SeriesKey] = []
        /// Kept up to date only once somebody asked (a page, the API):
        /// until then serve keeps no history.
        var active: Bool
    }

    private let state: Mutex<State>
    /// The rows: the scrape cache's model, or the board's own.
    private let model: ReadModel
    /// Whether the board applies the updates to the model itself (no
    /// scrape cache applies them).
    private let appliesUpdates: Bool
    private let interval: Double
    private let version: String
    /// The dashboards' event streams: each sample's document, as one event.
    package let events = EventChannel()

    /// With `cache`, the board renders the cache's read model (the scrape
    /// feed applies the updates, before the board's feed) and sleeps until
    /// first asked: then it keeps every interface's history from the next
    /// sample on. Without, it follows every update from the first, into a
    /// model of its own.
    package init(interval: Double, version: String, cache: ScrapeCache? = nil) {
        self.interval = interval
        self.version = version
        model = cache?.model ?? ReadModel()
        appliesUpdates = cache == nil
        state = Mutex(State(active: cache == nil))
    }

    /// Wakes the board (a page or a script asked): from now on it keeps
    /// every interface's history.
    package func wake() {
        guard !state.withLock({ $0.active }) else { return }
        let generation = model.generation
        state.withLock { state in
            guard !state.active else { return }
            state.active = true
            state.generation = generation
        }
    }

    /// Takes an update (once the model has it): what moved, for the next
    /// event, and at a sample each interface's rate into its history.
    package func apply(_ update: borrowing PipelineUpdate) {
        if appliesUpdates { model.apply(ModelUpdate(update)) }
        let sequence = update.sequence
        let applied = update.outcome == .sampled
        let (interval, version) = (self.interval, self.version)
        guard state.withLock({ $0.active }) else { return }
        let snapshot = model.snapshot()
        var event: [UInt8]?
        state.withLock { state in
            guard state.active else { return }
            for key in snapshot.forgotten {
                state.history[key] = nil
                state.fragments[key] = nil
                state.moved.remove(key)
                state.gone.append(key)
            }
            for key in snapshot.moved {
                state.fragments[key] = nil
                state.moved.insert(key)
            }
            guard applied else { return }
            for row in snapshot.rows { Self.record((Float(row.rxRate), Float(row.txRate)), in: &state.history[row.key, default: []]) }
            let since = state.generation
            state.generation = sequence
            // The event: what moved since the last one, over `since` (a
            // page whose figures are of another sample reads them whole).
            if events.listeners > 0 {
                let keys = state.moved.sorted()
                let gone = state.gone.sorted()
                event = Self.render(
                    snapshot, &state, keys: keys, history: false, partial: (since, gone), interval: interval, version: version)
            }
            state.moved = []
            state.gone = []
        }
        if let event { events.publish(HTTPBody(event)) }
    }

    /// Adds a sample's rates to an interface's history, in place, keeping
    /// the last `historyLength`.
    static func record(_ point: (Float, Float), in history: inout [(Float, Float)]) {
        if history.count >= LiveBoard.historyLength { history.removeFirst(history.count - LiveBoard.historyLength + 1) }
        history.append(point)
    }

    /// The generation (the pipeline update) the board is as of.
    package var generation: Int { state.withLock { $0.generation } }

    /// `/api/v1/interfaces` (`schemas/ifmeter-interfaces.v2.schema.json`):
    /// one compact line of JSON, rendered once per sample, the way the
    /// events are (`render`).
    package func document(history: Bool) -> HTTPBody {
        wake()
        let (generation, cached) = state.withLock { ($0.generation, $0.rendered[history]) }
        if let cached, cached.generation == generation { return cached.body }
        let (interval, version) = (self.interval, self.version)
        let snapshot = model.snapshot()
        if !history {
            // From the rows' kept fragments (those a sample moved made anew),
            // under the lock: what a page follows each sample costs what
            // changed, not every interface.
            return state.withLock { state in
                // A snapshot of another update than the board's (one came
                // between them): rendered, but its rows not kept as the
                // board's, nor the document as its generation's.
                guard snapshot.generation == state.generation else {
                    var copy = state
                    return HTTPBody(Self.render(snapshot, &copy, keys: nil, history: false, interval: interval, version: version))
                }
                let body = HTTPBody(
                    Self.render(snapshot, &state, keys: nil, history: false, interval: interval, version: version))
                state.rendered[false] = (state.generation, body)
                return body
            }
        }
        // With every row's history (nothing kept to reuse): from a copy,
        // outside the lock, which the pipeline's updates wait for.
        var copy = state.withLock { $0 }
        let body = HTTPBody(Self.render(snapshot, &copy, keys: nil, history: true, interval: interval, version: version))
        state.withLock { state in
            if state.generation == copy.generation { state.rendered[true] = (copy.generation, body) }
        }
        return body
    }

    /// The document, keys in JSONWriter's (sorted) order, of the model's
    /// rows of `keys` (nil: every row) (`rowObject`'s; without history,
    /// each row's bytes are kept until it moves); with `partial`, an event
    /// of what moved since sample `since` and the keys gone.
    static func render(
        _ snapshot: ModelSnapshot, _ state: inout State, keys: [SeriesKey]?, history: Bool, partial: (since: Int, gone: [SeriesKey])? = nil,
        interval: Double, version: String
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + (keys?.count ?? snapshot.rows.count) * (history ? 320 + LiveBoard.historyLength * 16 : 320))
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
        func write(_ row: InterfaceRow) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            if history {
                append(JSONWriter().string(rowObject(row, history: state.history[row.key] ?? [])))
            } else if let fragment = state.fragments[row.key] {
                out.append(contentsOf: fragment)
            } else {
                let fragment = Array(JSONWriter().string(rowObject(row, history: nil)).utf8)
                state.fragments[row.key] = fragment
                out.append(contentsOf: fragment)
            }
        }
        if let keys {
            for key in keys { if let row = snapshot[key] { write(row) } }
        } else {
            for row in snapshot.rows { write(row) }
        }
        append("],\"interval_seconds\":\(rate(interval)),")
        if partial != nil { append("\"partial\":true,") }
        append("\"schema\":" + quoted(JSONEnvelope.interfaces.schema))
        append(",\"schema_version\":\(JSONEnvelope.interfaces.version),\"seconds\":\(rate(snapshot.seconds ?? 0)),")
        if let partial { append("\"since\":\(partial.since),") }
        append("\"time\":" + (snapshot.wallTime > 0 ? format3(snapshot.wallTime) : "0") + ",\"version\":" + quoted(version) + "}")
        return out
    }

    /// One interface's row: the one place its keys are written.
    static func rowObject(_ row: InterfaceRow, history: [(Float, Float)]?) -> JSONValue {
        var o: [String: JSONValue] = [
            "name": .string(row.name),
            "netns": .string(row.netns),
            "kind": .string(row.kind.rawValue),
            "evidence": .string(row.evidence),
            "present": .bool(row.present),
            "quality": .string(row.quality.name),
            "rx_bytes": .number(String(row.counters.value(.rxBytes))),
            "tx_bytes": .number(String(row.counters.value(.txBytes))),
            "rx_bytes_per_second": .number(rate(row.rxRate)),
            "tx_bytes_per_second": .number(rate(row.txRate)),
            "events": .object([
                "wraps": .number(String(row.events.wraps)),
                "resets": .number(String(row.events.resets)),
                "recreations": .number(String(row.events.recreations)),
                "deletions": .number(String(row.events.deletions)),
            ]),
        ]
        // Since when its totals run (a Unix time, as the document's own
        // `time`), and its alias (`ifmeter state alias`) when it has one.
        if let since = row.since { o["since"] = .number(format3(since)) }
        if let alias = row.alias { o["alias"] = .string(alias) }
        if let history {
            o["history"] = .array(history.map { .array([.number(rate(Double($0.0))), .number(rate(Double($0.1)))]) })
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
package final class LiveBoardFeed: PipelineSink {
    let board: LiveBoard

    package init(board: LiveBoard) { self.board = board }

    package func receive(_ update: borrowing PipelineUpdate) { board.apply(update) }
}
