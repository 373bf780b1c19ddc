import IfmeterCore
import IfmeterModel
import IfmeterStore
import IfmeterSystem

/// The plans and their current cycles, for serve's families and live's
/// quota bars, current within one sample: what the state file holds (read
/// after each save, after a plan changed under the running writer, and
/// when a cycle ends) plus what was counted since the last save that
/// worked. The save interval decides only what a power cut can lose.
package final class PlanFeed: PipelineEnricher {
    /// The writer's persistence: the file is read through its store's
    /// connection, never through a descriptor of its own.
    let persistence: StatePersistence
    private let deliver: ([PlanGauge]) -> Void
    private var lastSaves = -1
    /// The gauges as the file holds them.
    private var stored: [PlanGauge] = []
    /// Traffic counted since the last save that worked, per interface: not
    /// in the file yet.
    private var pending: [SeriesKey: (counters: Counters, lowerBound: Bool)] = [:]
    /// Whether another ifmeter committed (`plan set`, `state alias`) since
    /// the file was last read: the writer's connection's data_version,
    /// which changes once the commit is visible to it. (The WAL's size and
    /// time change earlier, when the commit's frames are written: a read
    /// then sees the file as it was.)
    private var seenVersion: Int64?
    /// The store `seenVersion` is of: a file written anew (deleted or
    /// replaced under the writer) comes with a store and a connection of
    /// its own, whose data_version says nothing about the last one's.
    private var seenStore: ObjectIdentifier?
    private var delivered: [PlanGauge]?
    /// The aliases (`state alias`), read with the plans: shown beside the
    /// names from the sample after one is set.
    private let deliverAliases: (([SeriesKey: String]) -> Void)?
    private var aliases: [SeriesKey: String] = [:]
    private var deliveredAliases: [SeriesKey: String]?

    package init(
        persistence: StatePersistence, deliver: @escaping ([PlanGauge]) -> Void, aliases: (([SeriesKey: String]) -> Void)? = nil
    ) {
        self.persistence = persistence
        self.deliver = deliver
        deliverAliases = aliases
    }

    package func enrich(_ update: borrowing PipelineUpdate) {
        let saves = update.persistence?.saves ?? 0
        let now = update.wallTime
        var heldByFile = false
        if saves != lastSaves {
            // A save worked since the last update: the file holds what was
            // counted up to it; this update's traffic too when the save was
            // this sample's (not SIGHUP's, between samples).
            lastSaves = saves
            pending.removeAll()
            heldByFile = update.persistence?.savedThrough == update.time
            reread(now: now)
        }
        if !heldByFile {
            for delta in update.deltas where delta.counters.rxBytes != 0 || delta.counters.txBytes != 0 || delta.quality == .lowerBound {
                var entry = pending[delta.key] ?? (Counters.zero, false)
                entry.counters.add(delta.counters)
                entry.lowerBound = entry.lowerBound || delta.quality == .lowerBound
                pending[delta.key] = entry
            }
            if othersCommitted() || stored.contains(where: { Double($0.cycleEnd) <= now }) { reread(now: now) }
        }
        if let deliverAliases, aliases != deliveredAliases {
            deliveredAliases = aliases
            deliverAliases(aliases)
        }
        let gauges = stored.map { current($0, now: now) }
        guard gauges != delivered else { return }
        delivered = gauges
        deliver(gauges)
    }

    /// Only a state file has plans (a store in tests may be another kind).
    private var store: StateStore? { persistence.store as? StateStore }

    private func othersCommitted() -> Bool {
        guard let store else { return false }
        return ObjectIdentifier(store) != seenStore || (try? store.dataVersion()) != seenVersion
    }

    private func reread(now: Double) {
        guard let store else { return }
        // Taken before the read: a commit after it is read at the next
        // sample.
        seenVersion = try? store.dataVersion()
        seenStore = ObjectIdentifier(store)
        stored = Self.gauges(store, now: now)
        if deliverAliases != nil, let read = try? store.aliases() { aliases = Self.keyed(read) }
    }

    /// The planned interfaces' current cycles, read through a writer's
    /// own store.
    package static func gauges(_ store: StateStore, now: Double) -> [PlanGauge] {
        let t = Int64(now.rounded(.down))
        guard let plans = try? store.plans(), !plans.isEmpty, let slices = try? store.slices(since: t - 32 * 86400),
            let stored = try? store.storedInterfaces()
        else { return [] }
        return gauges(plans: plans, slices: slices, stored: stored, now: t)
    }

    static func gauges(
        plans: [Plan], slices: [UsageSlice], stored: (names: [String], kinds: [String: InterfaceKind]), now t: Int64
    ) -> [PlanGauge] {
        PlanGauge.current(
            plans: plans, slices: slices, names: stored.names, kinds: stored.kinds, zone: .system, now: t, key: StateStore.key)
    }

    static func keyed(_ aliases: [String: String]) -> [SeriesKey: String] {
        Dictionary(aliases.map { (StateStore.key($0.key), $0.value) }, uniquingKeysWith: { a, _ in a })
    }

    /// A gauge with the traffic not saved yet added.
    func current(_ gauge: PlanGauge, now: Double) -> PlanGauge {
        guard let extra = pending[SeriesKey(netns: gauge.netns, name: gauge.name)] else { return gauge }
        var g = gauge
        g.usedBytes = g.usedBytes.saturatingAdd(g.direction.used(extra.counters))
        g.lowerBound = g.lowerBound || extra.lowerBound
        g.projectedBytes = PlanGauge.projection(used: g.usedBytes, start: g.cycleStart, end: g.cycleEnd, now: Int64(now.rounded(.down)))
        return g
    }

    /// The same, read from the file at `path` by a process that does not
    /// write it; none when the file cannot be read.
    package static func gauges(path: String, now: Double) -> [PlanGauge] {
        // Only planned interfaces' last 32 days (a cycle is at most 31).
        let t = Int64(now.rounded(.down))
        guard let plans = try? StateStore.plans(path: path, verify: false), !plans.isEmpty,
            let slices = try? StateStore.slices(path: path, since: t - 32 * 86400, verify: false),
            let stored = try? StateStore.storedInterfaces(path: path, verify: false)
        else { return [] }
        return gauges(plans: plans, slices: slices, stored: stored, now: t)
    }
}
