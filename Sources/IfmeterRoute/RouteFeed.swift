#if os(Linux)
import IfmeterCore
import IfmeterPipeline
import IfmeterSampling
import IfmeterSystem

/// `serve --probe` (and the live view and export): keeps the probes'
/// routes and each tunnel's outside estimate from the pipeline's updates.
/// Routes are asked again only when a route or rule notification came, or
/// the interfaces changed; the outside estimate adds each interval's,
/// floored at 0, so the totals never go down. With a state file
/// (`persistence`) they continue from what it kept, and are kept there
/// each sample for the next save: they never go down across restarts
/// either.
package final class RouteFeed: PipelineEnricher {
    package let router: Router
    package let options: RouteSettings
    package private(set) var exposition = RouteExposition()
    private var tunnels: [TunnelUnderlay] = []
    private var totals: [OutsideTotal.Key: OutsideTotal] = [:]
    private var interfaceNames: [String] = []
    /// Called with what changed, before the update reaches later subscribers.
    private let publish: (RouteExposition) -> Void
    /// The state file's persistence, which saves the outside totals.
    private let persistence: StatePersistence?
    /// Called after `publish`, for a subscriber that reads `summary`.
    package var onPublish: (() -> Void)?
    package private(set) var lastError: SystemError?
    /// The last interval's outside bytes over every tunnel with an
    /// underlay, its length, and whether that interval's figure is
    /// uncertain; nil while no tunnel has an underlay.
    private(set) var lastOutside: (rx: UInt64, tx: UInt64, seconds: Double, uncertain: Bool)?

    package init(
        options: RouteSettings, persistence: StatePersistence? = nil, publish: @escaping (RouteExposition) -> Void
    ) throws(SystemError) {
        self.options = options
        router = try options.router(watch: true)
        self.publish = publish
        self.persistence = persistence
        for total in persistence?.outside ?? [] { totals[total.key] = total }
    }

    package func enrich(_ update: borrowing PipelineUpdate) {
        guard case .sampled = update.outcome, let sample = update.reading?.sample else { return }
        let names = sample.interfaces.map(\.name)
        // Routing changed (a notification), or the links did: ask again.
        if router.changed() || names != interfaceNames {
            interfaceNames = names
            let analysis = RouteAnalysis(router: router, interfaces: sample.interfaces, options: options)
            do {
                exposition.egress = try analysis.probes()
                tunnels = try analysis.tunnels()
                lastError = nil
            } catch {
                lastError = error
            }
        }
        if !update.isBaseline {
            var interval: (rx: UInt64, tx: UInt64) = (0, 0)
            var measured = false, uncertain = false
            let byName = Dictionary(update.deltas.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            for t in tunnels {
                guard let underlay = t.underlay else { continue }
                measured = true
                let key = OutsideTotal.Key(tunnel: t.tunnel, underlay: underlay)
                var total = totals[key] ?? OutsideTotal(tunnel: t.tunnel, underlay: underlay)
                // serve publishes only intervals where something happened:
                // an interface missing here moved nothing.
                if let u = byName[underlay] {
                    let tunnelCounters = byName[t.tunnel]?.counters ?? Counters(rxBytes: 0, txBytes: 0, rxPackets: 0, txPackets: 0)
                    let rx = OutsideEstimate.outside(
                        underlay: u.counters.rxBytes, tunnel: tunnelCounters.rxBytes, packets: tunnelCounters.rxPackets, overhead: t.overheadBytes)
                    let tx = OutsideEstimate.outside(
                        underlay: u.counters.txBytes, tunnel: tunnelCounters.txBytes, packets: tunnelCounters.txPackets, overhead: t.overheadBytes)
                    total.rxBytes &+= rx
                    total.txBytes &+= tx
                    interval.rx &+= rx
                    interval.tx &+= tx
                    let lost = u.quality == .lowerBound || byName[t.tunnel]?.quality == .lowerBound
                    total.uncertain = total.uncertain || lost
                    uncertain = uncertain || lost
                }
                total.uncertain = total.uncertain || t.sharedUnderlay
                uncertain = uncertain || t.sharedUnderlay
                totals[key] = total
            }
            // The rate is this interval's: with no underlay known now (the
            // route moved off the one there was), there is none, rather than
            // the last one standing still.
            if !measured {
                lastOutside = nil
            } else if let seconds = update.seconds, seconds > 0 {
                lastOutside = (interval.rx, interval.tx, seconds, uncertain)
            }
        }
        exposition.outside = totals.values.sorted { ($0.tunnel, $0.underlay) < ($1.tunnel, $1.underlay) }
        persistence?.outside = exposition.outside
        publish(exposition)
        onPublish?()
    }

    /// The live view's summary of the same.
    package var summary: RouteSummary? {
        guard let first = exposition.egress.first(where: { $0.interface != nil }) ?? exposition.egress.first else { return nil }
        return RouteSummary(
            probe: first.probe, interface: first.interface, viaTunnel: first.viaTunnel,
            outsideRx: lastOutside.map { Double($0.rx) / $0.seconds }, outsideTx: lastOutside.map { Double($0.tx) / $0.seconds },
            uncertain: lastOutside?.uncertain ?? false, tunnels: !tunnels.isEmpty,
            underlayUnknown: !tunnels.isEmpty && !tunnels.contains { $0.underlay != nil })
    }
}
#endif
