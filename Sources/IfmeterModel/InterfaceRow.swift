import IfmeterCore

/// One interface as every surface shows it: the one row the read model
/// keeps per interface, and the one the exposition, remote write, the
/// dashboard and the plan gauges read (the exposition calls it
/// `ExpositionRow`). Less than its totals: at 4000 interfaces every byte
/// counts.
package struct InterfaceRow: Sendable, Hashable, SeriesKeyed {
    package var name: String
    package var netns: String
    package var kind: InterfaceKind
    package var evidence: String
    package var index: Int?
    package var width: CounterWidth
    package var attributes: LinkAttributes?
    /// The kernel counter when ifmeter first saw the interface plus every
    /// delta since (saturating); a counter is present when either was.
    package var counters: Counters
    package var quality: Quality
    package var events: EventCounts
    package var present: Bool
    package var kernelStats: KernelLinkStats?
    /// Bytes per second received and sent over the last sample's interval
    /// (0 when nothing moved or the interval had no length): worked out
    /// once per update by the read model, from the update's deltas.
    package var rxRate: Double = 0
    package var txRate: Double = 0
    /// Unix time the totals run from: when this process first saw the
    /// interface (nil where no update said, as in a row made from totals
    /// alone).
    package var since: Double?
    /// The interface's alias (`ifmeter state alias`), nil without one.
    package var alias: String?

    package init(_ t: InterfaceTotals) {
        name = t.name
        netns = t.netns
        kind = t.classification.kind
        evidence = t.classification.evidence
        index = t.index
        width = t.width
        attributes = t.attributes
        var sum = t.baseline
        sum.add(t.totals)
        counters = sum
        quality = t.quality
        events = t.events
        present = t.present
        kernelStats = t.lastKernelStats
    }

    /// A row of new totals that keeps what the last row of the series
    /// knew beside them: its rates, since and alias.
    package init(_ t: InterfaceTotals, keeping last: InterfaceRow?) {
        self.init(t)
        guard let last else { return }
        rxRate = last.rxRate
        txRate = last.txRate
        since = last.since
        alias = last.alias
    }

    package var key: SeriesKey { SeriesKey(netns: netns, name: name) }
}
