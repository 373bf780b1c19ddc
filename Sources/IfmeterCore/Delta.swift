/// How much a total can be trusted, best first. The worst interval decides an
/// interface's quality over the window.
public enum Quality: Int, Sendable, Hashable, Comparable, CaseIterable {
    /// Every byte the counters saw is in the total.
    case exact
    /// A 32-bit wrap was inferred and corrected.
    case wrapCorrected
    /// Some traffic could not be seen: the true value is at least the total.
    case lowerBound

    public var name: String {
        switch self {
        case .exact: "exact"
        case .wrapCorrected: "wrap-corrected"
        case .lowerBound: "lower-bound"
        }
    }

    public init?(name: String) {
        guard let quality = Quality.allCases.first(where: { $0.name == name }) else { return nil }
        self = quality
    }

    public static func < (lhs: Quality, rhs: Quality) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What happened to an interface in one interval (trace v1, delta rules).
public enum DeltaChange: String, Sendable, Hashable {
    /// Present in the first sample: counts nothing (rule 1).
    case baseline
    /// First seen in a later sample: created since, counted in full (rule 2).
    case appeared
    /// Counters grew (rule 3).
    case steady
    /// A 32-bit counter wrapped and was corrected (rule 5).
    case wrap
    /// Counters went down for a reason other than a wrap (rule 5).
    case reset
    /// A new instance under the same name (rule 4).
    case recreated
    /// A deletion event with final counters.
    case deleted
    /// Restored from saved state, but the machine rebooted while ifmeter was
    /// stopped: the counters started over, so they count in full and what
    /// passed between the last save and the reboot is unknown.
    case restarted
}

/// How many times each kind of discontinuity happened to an interface.
///
/// Kept in 32 bits each (a count stops at 4,294,967,295): every series,
/// row and total holds one, and 64-bit counts took 16 bytes more in each.
public struct EventCounts: Sendable, Hashable {
    private struct Stored: Sendable, Hashable {
        var wraps: UInt32 = 0, resets: UInt32 = 0, recreations: UInt32 = 0, deletions: UInt32 = 0
    }

    private var stored = Stored()

    /// One count as an Int; set, it stops at 0 and at UInt32.max.
    private subscript(_ count: WritableKeyPath<Stored, UInt32>) -> Int {
        get { Int(stored[keyPath: count]) }
        set { stored[keyPath: count] = UInt32(clamping: newValue) }
    }

    public var wraps: Int {
        get { self[\.wraps] }
        set { self[\.wraps] = newValue }
    }
    public var resets: Int {
        get { self[\.resets] }
        set { self[\.resets] = newValue }
    }
    public var recreations: Int {
        get { self[\.recreations] }
        set { self[\.recreations] = newValue }
    }
    public var deletions: Int {
        get { self[\.deletions] }
        set { self[\.deletions] = newValue }
    }

    public init(wraps: Int = 0, resets: Int = 0, recreations: Int = 0, deletions: Int = 0) {
        self.wraps = wraps
        self.resets = resets
        self.recreations = recreations
        self.deletions = deletions
    }
}

/// One interface's traffic over one interval.
public struct InterfaceDelta: Sendable, Hashable {
    public var name: String
    /// The namespace; empty for the sampler's own.
    public var netns: String
    public var classification: Classification
    public var index: Int?
    public var change: DeltaChange
    /// The traffic counted for this interval.
    public var counters: Counters
    /// Seconds the delta covers; nil for a baseline.
    public var seconds: Double?
    public var quality: Quality
    /// When the interval ended (the sample's or event's time).
    public var time: Double

    public init(
        name: String, netns: String = "", classification: Classification, index: Int?, change: DeltaChange,
        counters: Counters, seconds: Double?, quality: Quality, time: Double
    ) {
        self.name = name
        self.netns = netns
        self.classification = classification
        self.index = index
        self.change = change
        self.counters = counters
        self.seconds = seconds
        self.quality = quality
        self.time = time
    }

    public var key: SeriesKey { SeriesKey(netns: netns, name: name) }

    /// Nothing to add up: a steady (or baseline), exact interval that
    /// counted nothing.
    public var isIdle: Bool {
        (change == .steady || change == .baseline) && quality == .exact && !counters.anyNonZero
    }

    /// Bytes or packets per second, when the interval has a length.
    public func rate(_ key: CounterKey) -> Double? {
        guard let seconds, seconds > 0 else { return nil }
        return Double(counters.value(key)) / seconds
    }
}

/// One interface's totals since the engine began.
public struct InterfaceTotals: Sendable, Hashable, SeriesKeyed {
    public var name: String
    /// The namespace; empty for the sampler's own.
    public var netns: String
    public var classification: Classification
    public var index: Int?
    public var width: CounterWidth
    public var speedBps: UInt64?
    public var attributes: LinkAttributes?
    /// Traffic counted since the engine began (or since the last `zeroTotals`).
    public var totals: Counters
    public var quality: Quality
    public var events: EventCounts
    /// The kernel counters when the interface was first seen in the baseline
    /// sample; zero for an interface that appeared later (counted in full).
    /// `baseline + totals` continues the kernel's counter without ever going
    /// down, which is what a Prometheus counter needs.
    public var baseline: Counters
    /// The last sample's full kernel statistics, when the sampler kept them.
    public var lastKernelStats: KernelLinkStats?
    /// When the interface was first and last seen (sample or event). In
    /// what the engine publishes, `lastSeen` is as of the series' last change.
    public var firstSeen: Double
    public var lastSeen: Double
    /// In the most recent sample.
    public var present: Bool
    /// Set when the instance last sampled was deleted and nothing came back.
    public var deletedAt: Double?

    public init(
        name: String, netns: String = "", classification: Classification, index: Int?, width: CounterWidth,
        speedBps: UInt64?, attributes: LinkAttributes?, totals: Counters, quality: Quality, events: EventCounts,
        baseline: Counters, lastKernelStats: KernelLinkStats?, firstSeen: Double,
        lastSeen: Double, present: Bool, deletedAt: Double?
    ) {
        self.name = name
        self.netns = netns
        self.classification = classification
        self.index = index
        self.width = width
        self.speedBps = speedBps
        self.attributes = attributes
        self.totals = totals
        self.quality = quality
        self.events = events
        self.baseline = baseline
        self.lastKernelStats = lastKernelStats
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.present = present
        self.deletedAt = deletedAt
    }

    public var key: SeriesKey { SeriesKey(netns: netns, name: name) }
}

/// Engine settings. The wrap slack (1.25) and the packet ceiling (R / 40)
/// are fixed by the contract.
public struct EngineConfiguration: Sendable, Hashable {
    /// The byte-rate ceiling when a link's speed is unknown: 1.25e9 bytes/s
    /// (10 Gbit/s).
    public var defaultMaxBytesPerSecond: Double
    /// Name rules for interfaces whose sample carries no kind.
    public var platform: Platform

    public init(defaultMaxBytesPerSecond: Double = 1.25e9, platform: Platform = .linux) {
        self.defaultMaxBytesPerSecond = defaultMaxBytesPerSecond
        self.platform = platform
    }
}
