import IfmeterCore
import IfmeterOutput
import IfmeterStore
import IfmeterSystem

/// Reads the plans and their current cycles from the state file after each
/// save (and at the first update), for serve's families and live's quota
/// bars. What was counted since the last save is not in them yet.
public final class PlanFeed: PipelineEnricher {
    let path: String
    private let deliver: ([PlanGauge]) -> Void
    private var lastSaves = -1

    public init(path: String, deliver: @escaping ([PlanGauge]) -> Void) {
        self.path = path
        self.deliver = deliver
    }

    public func enrich(_ update: borrowing PipelineUpdate) {
        let saves = update.persistence?.saves ?? 0
        guard saves != lastSaves else { return }
        lastSaves = saves
        deliver(Self.gauges(path: path, now: wallClock()))
    }

    /// The planned interfaces' current cycles; none when the file cannot be
    /// read (serve and live go on without them).
    public static func gauges(path: String, now: Double) -> [PlanGauge] {
        // Only planned interfaces' last 32 days (a cycle is at most 31):
        // this runs after every save, on the pipeline's thread.
        let t = Int64(now.rounded(.down))
        guard let plans = try? StateStore.plans(path: path, verify: false), !plans.isEmpty,
            let slices = try? StateStore.slices(path: path, since: t - 32 * 86400, verify: false),
            let stored = try? StateStore.storedInterfaces(path: path, verify: false)
        else { return [] }
        let planned = slices.filter { Plan.find(for: $0.name, in: plans) != nil }
        // The stored kind of a planned interface idle this cycle (no usage),
        // so its gauges keep one label set.
        return UsageTable(
            slices: planned, plans: plans, granularity: .cycle, zone: .system, now: t, names: stored.names, kinds: stored.kinds
        ).planGauges()
    }
}
