import IfmeterCore

/// How far a figure can be trusted, best first.
///
/// Whatever the quality, a figure is an estimate of traffic: interface
/// counters include protocol overhead and are not per-app accounting.
public enum Quality: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// Every byte the counters saw is in the figure.
    case exact
    /// A 32-bit counter wrapped (went past 4 GiB and started again from 0)
    /// and the figure was corrected for it.
    case wrapCorrected
    /// Some traffic could not be seen: the true value is at least the
    /// figure. A counter reset, an interface recreated without a deletion
    /// event, a restart after a reboot, or 32-bit counters read so far apart
    /// that a whole wrap could have passed unseen.
    case lowerBound

    init(_ quality: IfmeterCore.Quality) {
        switch quality {
        case .exact: self = .exact
        case .wrapCorrected: self = .wrapCorrected
        case .lowerBound: self = .lowerBound
        }
    }

    var core: IfmeterCore.Quality {
        switch self {
        case .exact: .exact
        case .wrapCorrected: .wrapCorrected
        case .lowerBound: .lowerBound
        }
    }

    /// `exact`, `wrap-corrected` or `lower-bound`.
    public var name: String { core.name }

    /// The mark to show before a figure: none for an exact one, `~` for a
    /// wrap-corrected one, `≥` for a lower bound.
    public var mark: String { core.mark }

    /// `figure` with this quality's mark before it (`≥ 12 MB`), or as it
    /// is when exact.
    public func marked(_ figure: String) -> String { core.marked(figure) }

    /// Orders by trust: `exact` first, `lowerBound` last.
    public static func < (lhs: Quality, rhs: Quality) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What kind of link an interface is.
///
/// On Apple platforms the kind comes from the interface's name, as Apple
/// names them: `en0` Wi-Fi, other `en*` Ethernet, `pdp_ip*` cellular,
/// `utun*` and `ipsec*` tunnels. On Linux it comes from what the kernel
/// says (the netlink link kind, the hardware type, sysfs), and names only
/// when nothing else is known.
public enum InterfaceKind: String, Sendable, Hashable, CaseIterable {
    /// Wi-Fi.
    case wifi
    /// A cellular data link.
    case cellular
    /// A tunnel (a VPN): its traffic rides inside a physical link's, so
    /// adding the two counts it twice.
    case tunnel
    /// Wired Ethernet.
    case ethernet
    /// The loopback interface: traffic that never leaves the device.
    case loopback
    /// A virtual link (a bridge, a veth, Apple's `awdl*` and `llw*`).
    case virtual
    /// Anything else.
    case other

    init(_ kind: IfmeterCore.InterfaceKind) {
        self = InterfaceKind(rawValue: kind.rawValue) ?? .other
    }

    /// The kind's name: `wifi`, `cellular`, `tunnel`, ...
    public var name: String { rawValue }

    /// Wi-Fi, cellular and Ethernet: links whose traffic leaves the device.
    public var isPhysical: Bool { IfmeterCore.InterfaceKind(rawValue: rawValue)?.isPhysical ?? false }
}

/// What happened to an interface's counters between two samples.
public enum CounterChange: String, Sendable, Hashable, CaseIterable {
    /// The meter's first sample of the interface: nothing to subtract from,
    /// so the interval counts nothing.
    case baseline
    /// The interface appeared after the first sample: created since, so its
    /// counters count in full.
    case appeared
    /// The counters grew.
    case steady
    /// A 32-bit counter wrapped and the interval was corrected for it.
    case wrapped
    /// The counters went down for another reason than a wrap: they were
    /// reset. Each counter that went down counts from zero; a lower bound.
    case reset
    /// The interface was deleted and created again under the same name (a
    /// VPN reconnecting makes a new `utun`): the new instance's counters
    /// started from zero and count in full. Without a deletion event (there
    /// is none with getifaddrs) what the old one carried after the last
    /// sample is lost: a lower bound.
    case recreated
    /// The interface was deleted; its final counters were counted (netlink
    /// only, which sees deletions).
    case deleted
    /// The first sample after restoring state saved before a reboot: the
    /// counters started over at boot and count in full; what passed between
    /// the save and the reboot is unknown, so the totals are lower bounds.
    case restartedAfterReboot
    /// The interface is not in this sample (it went away, or is down and
    /// gone from the list); its totals wait for it to come back.
    case absent

    init(_ change: DeltaChange) {
        switch change {
        case .baseline: self = .baseline
        case .appeared: self = .appeared
        case .steady: self = .steady
        case .wrap: self = .wrapped
        case .reset: self = .reset
        case .recreated: self = .recreated
        case .deleted: self = .deleted
        case .restarted: self = .restartedAfterReboot
        }
    }

    /// A few words for a UI (`recreated`, `counter reset`, ...); empty when
    /// the counters simply grew or the interface is absent.
    public var note: String {
        switch self {
        case .baseline: DeltaChange.baseline.note
        case .appeared: DeltaChange.appeared.note
        case .steady: DeltaChange.steady.note
        case .wrapped: DeltaChange.wrap.note
        case .reset: DeltaChange.reset.note
        case .recreated: DeltaChange.recreated.note
        case .deleted: DeltaChange.deleted.note
        case .restartedAfterReboot: DeltaChange.restarted.note
        case .absent: ""
        }
    }
}

/// How many times each discontinuity happened to an interface since the
/// meter started (restored state included).
public struct CounterEvents: Sendable, Hashable {
    /// 32-bit wraps corrected.
    public let wraps: Int
    /// Resets, restarts after a reboot included.
    public let resets: Int
    /// Times the interface was recreated under the same name.
    public let recreations: Int
    /// Deletions seen (netlink only).
    public let deletions: Int

    init(_ events: EventCounts) {
        wraps = events.wraps
        resets = events.resets
        recreations = events.recreations
        deletions = events.deletions
    }

    /// `1 wrap, 2 recreations`, or `-` when nothing happened.
    public var summary: String {
        EventCounts(wraps: wraps, resets: resets, recreations: recreations, deletions: deletions).summary
    }
}

/// Bytes and packets over a span of time, and how far they can be trusted.
///
/// Estimates from interface counters: they include protocol overhead
/// (headers, retransmissions) and are not per-app accounting.
public struct TrafficFigures: Sendable, Hashable {
    /// Bytes received.
    public let receivedBytes: UInt64
    /// Bytes sent.
    public let sentBytes: UInt64
    /// Packets received.
    public let receivedPackets: UInt64
    /// Packets sent.
    public let sentPackets: UInt64
    /// How far the four figures can be trusted.
    public let quality: Quality

    init(_ counters: Counters, quality: IfmeterCore.Quality) {
        receivedBytes = counters.rxBytes
        sentBytes = counters.txBytes
        receivedPackets = counters.rxPackets
        sentPackets = counters.txPackets
        self.quality = Quality(quality)
    }
}

/// One interface in a reading: its traffic since the last sample and since
/// the meter started.
public struct InterfaceTraffic: Sendable, Hashable {
    /// The interface's name (`en0`, `pdp_ip0`, `utun3`).
    public let name: String
    /// What kind of link it is.
    public let kind: InterfaceKind
    /// What the kind was decided from: `name:en0` (Apple's names),
    /// `link-kind:tun`, `sysfs:phy80211` (Linux's kernel facts).
    public let kindEvidence: String
    /// The width of the counters read: 32 for getifaddrs (they wrap at
    /// 4 GiB), 64 for netlink.
    public let counterBits: Int
    /// The interface is in this sample.
    public let isPresent: Bool
    /// What happened to its counters since the last sample.
    public let change: CounterChange
    /// Traffic since the last sample (zero for a baseline, or while absent).
    public let sinceLastSample: TrafficFigures
    /// Seconds since the interface's previous reading; nil for a baseline
    /// and while absent.
    public let seconds: Double?
    /// This interval's 32-bit counters were read so long after the reading
    /// before that a whole wrap (4 GiB) could have passed unseen, so the
    /// interval is a lower bound though nothing was seen to happen. At the
    /// default ceiling of 10 Gbit/s that is any gap of 2.75 s or more: an
    /// app that samples when it is opened, hours apart, gets lower bounds.
    public let mayHaveMissedWrap: Bool
    /// Traffic since the meter started (continued from restored state).
    public let sinceStart: TrafficFigures
    /// Wraps, resets, recreations and deletions since the meter started.
    public let events: CounterEvents

    init(totals: InterfaceTotals, interval: Interval?) {
        name = totals.name
        kind = InterfaceKind(totals.classification.kind)
        kindEvidence = totals.classification.evidence
        counterBits = totals.width.rawValue
        isPresent = totals.present
        sinceStart = TrafficFigures(totals.totals, quality: totals.quality)
        events = CounterEvents(totals.events)
        if let interval {
            change = CounterChange(interval.change)
            sinceLastSample = TrafficFigures(interval.counters, quality: interval.quality)
            seconds = interval.seconds
            mayHaveMissedWrap = interval.mayHaveMissedWrap
        } else {
            change = .absent
            sinceLastSample = TrafficFigures(.zero, quality: .exact)
            seconds = nil
            mayHaveMissedWrap = false
        }
    }

    /// One interface's deltas of one reading, added up: a deletion (netlink)
    /// and the sample after it can both be about one interval.
    struct Interval {
        var change: DeltaChange
        var counters = Counters.zero
        var quality = IfmeterCore.Quality.exact
        var seconds: Double?
        var mayHaveMissedWrap = false

        init(_ delta: InterfaceDelta) {
            change = delta.change
            add(delta)
        }

        mutating func add(_ delta: InterfaceDelta) {
            // The sample's change tells what the interval was; a deletion
            // alone says deleted.
            if delta.change != .deleted || change == .deleted { change = delta.change }
            counters.add(delta.counters)
            quality = max(quality, delta.quality)
            if let s = delta.seconds { seconds = max(seconds ?? 0, s) }
            // Steady or wrapped, yet a lower bound: only the v1.2 gap rule
            // (or a total stopped at 2^64-1) makes that.
            if delta.quality == .lowerBound, delta.change == .steady || delta.change == .wrap { mayHaveMissedWrap = true }
        }
    }
}

/// Every interface the meter knows, at one sample.
public struct TrafficReading: Sendable, Hashable {
    /// When the sample was taken: seconds on the monotonic clock (since
    /// boot, or another fixed point), for differences only.
    public let time: Double
    /// Seconds since the meter's previous sample; nil for its first.
    public let secondsSinceLastSample: Double?
    /// Every interface seen since the meter started (restored ones
    /// included), by name; those gone have `isPresent` false.
    public let interfaces: [InterfaceTraffic]
    /// The caveat lines a UI shows under these figures: the estimate
    /// caveat always, and what the marks mean for the marks shown.
    public let caveats: [String]

    init(time: Double, secondsSinceLastSample: Double?, interfaces: [InterfaceTraffic]) {
        self.time = time
        self.secondsSinceLastSample = secondsSinceLastSample
        self.interfaces = interfaces
        let shown = Set(interfaces.flatMap { [$0.sinceLastSample.quality.core, $0.sinceStart.quality.core] })
        var lines = Caveat.legend(shown: shown)
        // With 32-bit counters a lower bound may come from the gap rule,
        // which the lower-bound line does not name: said after it.
        if interfaces.contains(where: { $0.counterBits == 32 }), let at = lines.firstIndex(of: Caveat.lowerBound) {
            lines.insert(Caveat.longGap, at: at + 1)
        }
        caveats = lines
    }

    /// The interface named `name`, if the meter has seen it.
    public subscript(name: String) -> InterfaceTraffic? {
        interfaces.first { $0.name == name }
    }
}
