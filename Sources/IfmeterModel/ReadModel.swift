import IfmeterCore
import Synchronization

/// serve's typed facts beside the interfaces: what its endpoint, remote
/// write, its process and the state file say, each as of the last time
/// its feed set it.
package struct ServeFacts: Sendable, Hashable {
    /// What the HTTP endpoint closed to protect itself.
    package var httpClosed: HTTPConnectionCounts?
    /// serve's 5xx answers by path and status: the ones it can give start
    /// at 0 (`expectServerErrors`), so that a rate sees the first.
    package var serverErrors: [HTTPServerErrorKey: UInt64] = [:]
    /// serve --remote-write: each receiver's status.
    package var remoteWrite: [RemoteWriteStatus] = []
    /// serve's own process figures.
    package var process: ProcessMetrics?
    /// `serve --probe`: where the probes leave (nil: no probe).
    package var routes: RouteExposition?
    /// Planned interfaces' current cycles, with their use as of the last
    /// sample (the state file plus what was counted since its last save).
    package var plans: [PlanGauge] = []
    /// The aliases (`ifmeter state alias`), by interface.
    package var aliases: [SeriesKey: String] = [:]
    /// The commit the binary was built from.
    package var revision: String

    package init(revision: String = "unknown") { self.revision = revision }

    /// The 5xx counts, as the exposition lists them.
    package var serverErrorCounts: [HTTPServerErrorCount] {
        serverErrors.map { HTTPServerErrorCount(path: $0.key.path, status: $0.key.status, count: $0.value) }
    }
}

/// What the read model takes from one pipeline update: a copy of the
/// parts it keeps (an update itself cannot be kept).
package struct ModelUpdate: Sendable {
    /// The update's sequence: the snapshot's generation.
    package var sequence: Int
    /// A sample was read and applied (rates are worked out only then).
    package var sampled: Bool
    /// The sample's monotonic time and the wall clock then.
    package var time: Double
    package var wallTime: Double
    /// The interval since the sample before.
    package var seconds: Double?
    package var changed: [InterfaceTotals]
    package var forgotten: [SeriesKey]
    package var deltas: [InterfaceDelta]
    package var health: PipelineHealth

    package init(
        sequence: Int, sampled: Bool, time: Double, wallTime: Double, seconds: Double?, changed: [InterfaceTotals],
        forgotten: [SeriesKey], deltas: [InterfaceDelta], health: PipelineHealth
    ) {
        self.sequence = sequence
        self.sampled = sampled
        self.time = time
        self.wallTime = wallTime
        self.seconds = seconds
        self.changed = changed
        self.forgotten = forgotten
        self.deltas = deltas
        self.health = health
    }
}

/// Every surface's figures as of one update: one row per interface
/// (sorted by namespace and name) and serve's facts. A value: a reader's
/// copy never changes under it.
package struct ModelSnapshot: Sendable {
    /// The pipeline update the rows are as of (0: none yet).
    package fileprivate(set) var generation = 0
    /// Changes of the plans or the aliases, which are not the pipeline's:
    /// a render keyed on the generation alone would miss them.
    package fileprivate(set) var planChanges = 0
    fileprivate var view = TotalsView<InterfaceRow>(InterfaceRow.init)
    /// The keys whose rows have a rate other than 0.
    fileprivate var rated: [SeriesKey: (rx: Double, tx: Double)] = [:]
    /// The pipeline's health as of the update (nil: none yet).
    package fileprivate(set) var health: PipelineHealth?
    /// The update's wall clock, and the interval its rates are over.
    package fileprivate(set) var wallTime: Double = 0
    package fileprivate(set) var seconds: Double?
    package fileprivate(set) var facts: ServeFacts
    /// The keys of the rows the last update made anew or moved (totals,
    /// facts or rates), and those it forgot: what changed since the
    /// generation before.
    package fileprivate(set) var moved: [SeriesKey] = []
    package fileprivate(set) var forgotten: [SeriesKey] = []
    /// Rows whose alias changed since the last update: moved at the next
    /// one, so that what keeps a row's rendering (the dashboard's
    /// fragments, its events) shows the new alias on an idle interface.
    fileprivate var aliased: [SeriesKey] = []

    /// Every interface's row, sorted by (namespace, name).
    package var rows: [InterfaceRow] { view.rows }

    /// One interface's row.
    package subscript(key: SeriesKey) -> InterfaceRow? { view[key] }
}

/// The read model: applies each pipeline update once, and publishes the
/// result as a snapshot under one lock. Every surface (the exposition,
/// remote write, the dashboard, the plan gauges) renders from it and
/// keeps no rows of its own.
package final class ReadModel: Sendable {
    private let published: Mutex<ModelSnapshot>

    package init(revision: String = "unknown") {
        published = Mutex(ModelSnapshot(facts: ServeFacts(revision: revision)))
    }

    /// The latest snapshot: a copy that never changes (the next update
    /// copies the rows it changes, if this copy is still held).
    package func snapshot() -> ModelSnapshot { published.withLock { $0 } }

    /// Reads the latest snapshot in place, under the lock (an update waits
    /// for `body`): for a render that should not copy every row.
    package func read<R>(_ body: (borrowing ModelSnapshot) -> R) -> R {
        published.withLock { body($0) }
    }

    package var generation: Int { published.withLock { $0.generation } }

    /// Takes an update: its totals (each row keeping its since and alias),
    /// its health, and, for a sample, every row's rates from its deltas.
    /// Costs what changed.
    package func apply(_ update: ModelUpdate) {
        published.withLock { s in
            // The wall clock of the update's monotonic time: a new row's
            // since is its first sight on the wall clock.
            let offset = update.wallTime - update.time
            let aliases = s.facts.aliases
            var moved = update.changed.map(\.key) + s.aliased
            s.aliased = []
            s.view.apply(changed: update.changed, forgotten: update.forgotten) { t, last in
                var row = InterfaceRow(t, keeping: last)
                if last == nil {
                    row.since = t.firstSeen + offset
                    row.alias = aliases[t.key]
                }
                return row
            }
            for key in update.forgotten { s.rated[key] = nil }
            if update.sampled {
                var rates: [SeriesKey: (rx: Double, tx: Double)] = [:]
                for d in update.deltas {
                    guard let covered = d.seconds, covered > 0 else { continue }
                    let previous = rates[d.key] ?? (0, 0)
                    rates[d.key] = (
                        previous.rx + Double(d.counters.value(.rxBytes)) / covered, previous.tx + Double(d.counters.value(.txBytes)) / covered
                    )
                }
                for key in Set(s.rated.keys).union(rates.keys) {
                    let rate = rates[key] ?? (0, 0)
                    s.view.modify(key) { row in
                        if row.rxRate != rate.rx || row.txRate != rate.tx { moved.append(key) }
                        row.rxRate = rate.rx
                        row.txRate = rate.tx
                    }
                }
                s.rated = rates.filter { $0.value.rx != 0 || $0.value.tx != 0 }
                s.wallTime = update.wallTime
                s.seconds = update.seconds
            }
            s.health = update.health
            s.generation = update.sequence
            s.moved = moved
            s.forgotten = update.forgotten
        }
    }

    // MARK: serve's facts

    /// The 5xx answers serve can give, each at 0 until it does.
    package func expectServerErrors(_ keys: [(path: String, status: Int)]) {
        published.withLock { s in
            for key in keys { s.facts.serverErrors[HTTPServerErrorKey(path: key.path, status: key.status), default: 0] += 0 }
        }
    }

    /// One more 5xx answer.
    package func countServerError(path: String, status: Int) {
        published.withLock { $0.facts.serverErrors[HTTPServerErrorKey(path: path, status: status), default: 0] += 1 }
    }

    /// The endpoint's closed-connection counts.
    package func setHTTPClosed(_ counts: HTTPConnectionCounts) { published.withLock { $0.facts.httpClosed = counts } }

    /// serve's own `process_*` figures.
    package func setProcess(_ metrics: ProcessMetrics?) { published.withLock { $0.facts.process = metrics } }

    /// What remote write says of its receivers.
    package func setRemoteWrite(_ statuses: [RemoteWriteStatus]) { published.withLock { $0.facts.remoteWrite = statuses } }

    /// What `serve --probe` shows (nil: no probe).
    package func setRoutes(_ routes: RouteExposition?) { published.withLock { $0.facts.routes = routes } }

    /// The plans' gauges; a change is a plan change.
    package func setPlans(_ gauges: [PlanGauge]) {
        published.withLock { s in
            guard s.facts.plans != gauges else { return }
            s.facts.plans = gauges
            s.planChanges += 1
        }
    }

    /// The aliases; a change is a plan change, and each row takes its own.
    package func setAliases(_ aliases: [SeriesKey: String]) {
        published.withLock { s in
            guard s.facts.aliases != aliases else { return }
            s.facts.aliases = aliases
            s.planChanges += 1
            var changed: [SeriesKey] = []
            s.view.modifyAll { row in
                let alias = aliases[row.key]
                if row.alias != alias {
                    row.alias = alias
                    changed.append(row.key)
                }
            }
            s.aliased += changed
        }
    }
}
