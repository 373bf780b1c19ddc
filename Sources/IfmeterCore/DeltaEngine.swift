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
public struct EventCounts: Sendable, Hashable {
    public var wraps = 0
    public var resets = 0
    public var recreations = 0
    public var deletions = 0

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

    /// Bytes or packets per second, when the interval has a length.
    public func rate(_ key: CounterKey) -> Double? {
        guard let seconds, seconds > 0 else { return nil }
        return Double(counters.value(key)) / seconds
    }
}

/// One interface's totals since the engine began.
public struct InterfaceTotals: Sendable, Hashable {
    public var name: String
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
    /// The last counters known: a sample's, or a deletion's final ones.
    public var lastCounters: Counters?
    /// The last sample's full kernel statistics, when the sampler kept them.
    public var lastKernelStats: KernelLinkStats?
    /// When the interface was first and last seen (sample or event).
    public var firstSeen: Double
    public var lastSeen: Double
    /// In the most recent sample.
    public var present: Bool
    /// Set when the instance last sampled was deleted and nothing came back.
    public var deletedAt: Double?
    /// The last interval's change.
    public var lastChange: DeltaChange

    public init(
        name: String, classification: Classification, index: Int?, width: CounterWidth, speedBps: UInt64?,
        attributes: LinkAttributes?, totals: Counters, quality: Quality, events: EventCounts, baseline: Counters,
        lastCounters: Counters?, lastKernelStats: KernelLinkStats?, firstSeen: Double, lastSeen: Double, present: Bool,
        deletedAt: Double?, lastChange: DeltaChange
    ) {
        self.name = name
        self.classification = classification
        self.index = index
        self.width = width
        self.speedBps = speedBps
        self.attributes = attributes
        self.totals = totals
        self.quality = quality
        self.events = events
        self.baseline = baseline
        self.lastCounters = lastCounters
        self.lastKernelStats = lastKernelStats
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.present = present
        self.deletedAt = deletedAt
        self.lastChange = lastChange
    }
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

/// Turns samples and deletion events into per-interval deltas and totals.
///
/// Pure and deterministic: feed it the same records and it returns the same
/// results. Its rules are `trace-v1.md`'s, per interface name.
public struct DeltaEngine: Sendable {
    public let configuration: EngineConfiguration
    private var series: [String: Series] = [:]
    /// The window: from the first sample (the baseline; events before it
    /// count nothing) to the latest record.
    public private(set) var firstTime: Double?
    public private(set) var lastTime: Double?
    /// The latest sample's time.
    public private(set) var lastSampleTime: Double?
    public private(set) var samplesSeen = 0

    public init(configuration: EngineConfiguration = EngineConfiguration()) {
        self.configuration = configuration
    }

    private struct Series: Sendable {
        var state: InterfaceTotals
        /// The last sampled instance, and when it was sampled.
        var prev: InterfaceSample?
        var prevTime: Double = 0
        /// The index of the instance whose deletion was last accounted for;
        /// set only while no later sample has shown the name again.
        var deletedIndex: Int??
        /// Restored across a reboot: the next sample counts in full.
        var restartPending = false
        /// The number of the last sample that showed this name.
        var stamp = 0

    mutating func absorb(_ sample: InterfaceSample, classification: Classification, at t: Double) {
        state.classification = classification
        state.index = sample.index
        state.width = sample.width
        state.speedBps = sample.speedBps
        state.attributes = sample.attributes
        state.lastCounters = sample.counters
        state.lastKernelStats = sample.kernelStats
        state.lastSeen = t
        state.present = true
        state.deletedAt = nil
    }
    }

    /// Applies one trace record.
    @discardableResult
    public mutating func apply(_ record: TraceRecord) -> [InterfaceDelta] {
        switch record {
        case .sample(let sample): return apply(sample)
        case .deleted(let event): return apply(event).map { [$0] } ?? []
        }
    }

    /// Applies a sample: every interface seen at one instant.
    ///
    /// `eventsLost`: link notifications were lost (the queue overflowed), so
    /// an interface that went away since the last sample may have been
    /// deleted with traffic nobody saw: its totals become lower bounds.
    @discardableResult
    public mutating func apply(_ sample: Sample, eventsLost: Bool = false) -> [InterfaceDelta] {
        let t = sample.time
        let isFirst = lastSampleTime == nil
        let previousSampleTime = lastSampleTime
        if isFirst { firstTime = t }
        noteTime(t)
        var deltas: [InterfaceDelta] = []
        deltas.reserveCapacity(sample.interfaces.count)
        // Series this sample shows are stamped with it: no set of names to
        // hash, and a name twice in one sample is seen once.
        let stamp = samplesSeen + 1

        for current in sample.interfaces {
            let classification = current.classification ?? NameRules.classify(current.name, platform: configuration.platform)
            let ceiling = self.ceiling(for: current)
            if let i = series.index(forKey: current.name) {
                // Updated in place: a series is big, copies cost.
                if let delta = Self.update(
                    &series.values[i], with: current, classification: classification, stamp: stamp, at: t, isFirst: isFirst,
                    previousSampleTime: previousSampleTime, ceiling: ceiling)
                {
                    deltas.append(delta)
                }
                continue
            }
            let counters = isFirst ? Self.zero(like: current.counters) : current.counters
            let change: DeltaChange = isFirst ? .baseline : .appeared
            let state = InterfaceTotals(
                name: current.name, classification: classification, index: current.index,
                width: current.width, speedBps: current.speedBps, attributes: current.attributes,
                totals: counters, quality: .exact, events: EventCounts(),
                baseline: isFirst ? current.counters : Self.zero(like: current.counters),
                lastCounters: current.counters, lastKernelStats: current.kernelStats, firstSeen: t, lastSeen: t,
                present: true, deletedAt: nil, lastChange: change)
            series[current.name] = Series(state: state, prev: current, prevTime: t, deletedIndex: nil, stamp: stamp)
            deltas.append(InterfaceDelta(
                name: current.name, classification: classification, index: current.index, change: change,
                counters: counters, seconds: isFirst ? nil : previousSampleTime.map { t - $0 },
                quality: .exact, time: t))
        }
        // Rule 6: an interface missing from this sample pauses its series.
        for i in series.indices where series.values[i].state.present && series.values[i].stamp != stamp {
            series.values[i].state.present = false
            if eventsLost, series.values[i].deletedIndex == nil {
                series.values[i].state.quality = .lowerBound
            }
        }
        lastSampleTime = t
        samplesSeen += 1
        return deltas
    }

    /// Rules 3 to 5 (and the recreations of rule 4) for a name already
    /// known; nil when the reading is to be skipped.
    private static func update(
        _ s: inout Series, with current: InterfaceSample, classification: Classification, stamp: Int, at t: Double,
        isFirst: Bool, previousSampleTime: Double?, ceiling: Double
    ) -> InterfaceDelta? {
        // The same name twice in one sample: the first reading stands.
        if s.stamp == stamp { return nil }
        if let deleted = s.deletedIndex, let deletedIndex = deleted, current.index == deletedIndex {
            // Read before its deletion (notifications and dumps race): the
            // deletion's final counters already count it.
            return nil
        }
        var counters: Counters
        var change: DeltaChange
        var quality = Quality.exact
        var seconds: Double?
        if s.restartPending {
            // Saved before a reboot: these counters began at boot.
            counters = current.counters
            change = .restarted
            quality = .lowerBound
            s.state.events.resets += 1
        } else if s.deletedIndex != nil {
            // The instance last sampled was deleted and its final counters
            // counted: whatever is here now is new (rule 4).
            counters = current.counters
            change = .recreated
            s.state.events.recreations += 1
            seconds = previousSampleTime.map { t - $0 }
        } else if let prev = s.prev {
            seconds = t - s.prevTime
            if let oldIndex = prev.index, let newIndex = current.index, oldIndex != newIndex {
                // Recreated without a deletion event: the old instance's
                // traffic after `prev` is lost (rule 4).
                counters = current.counters
                change = .recreated
                quality = .lowerBound
                s.state.events.recreations += 1
            } else {
                (counters, change) = difference(
                    from: prev.counters, to: current.counters, width: current.width, seconds: t - s.prevTime,
                    ceiling: ceiling)
                switch change {
                case .wrap:
                    quality = .wrapCorrected
                    s.state.events.wraps += 1
                case .reset:
                    quality = .lowerBound
                    s.state.events.resets += 1
                default: break
                }
            }
        } else if isFirst {
            // Known so far only from deletion events.
            counters = zero(like: current.counters)
            change = .baseline
            s.state.baseline = current.counters
        } else {
            counters = current.counters
            change = s.state.events.deletions > 0 ? .recreated : .appeared
            if change == .recreated { s.state.events.recreations += 1 }
            seconds = previousSampleTime.map { t - $0 }
        }
        s.state.totals.add(counters)
        s.state.quality = max(s.state.quality, quality)
        s.state.lastChange = change
        s.absorb(current, classification: classification, at: t)
        s.prev = current
        s.prevTime = t
        s.deletedIndex = nil
        s.restartPending = false
        s.stamp = stamp
        return InterfaceDelta(
            name: current.name, classification: classification, index: current.index, change: change,
            counters: counters, seconds: seconds, quality: quality, time: t)
    }

    /// Applies a deletion event with the interface's final counters.
    @discardableResult
    public mutating func apply(_ event: DeletionEvent) -> InterfaceDelta? {
        let t = event.time
        let final = event.interface
        let name = final.name
        noteTime(t)
        var s = series[name] ?? Series(
            state: InterfaceTotals(
                name: name,
                classification: final.classification ?? NameRules.classify(name, platform: configuration.platform),
                index: final.index, width: final.width, speedBps: final.speedBps, attributes: final.attributes,
                totals: Self.zero(like: final.counters), quality: .exact, events: EventCounts(),
                baseline: Self.zero(like: final.counters), lastCounters: nil, lastKernelStats: nil, firstSeen: t,
                lastSeen: t,
                present: false, deletedAt: nil, lastChange: .deleted))

        var counters: Counters
        var quality = Quality.exact
        var seconds: Double?
        if let deletedIndex = s.deletedIndex, let index = final.index, deletedIndex == index {
            // The same deletion reported twice: already counted.
            return nil
        } else if s.deletedIndex == nil, let prev = s.prev {
            if let oldIndex = prev.index, let index = final.index, oldIndex != index {
                // An instance created after `prev` and deleted before any
                // sample saw it: counted in full. The instance that `prev`
                // saw went away without a deletion event: lost traffic.
                counters = final.counters
                quality = .lowerBound
                s.state.events.recreations += 1
            } else {
                // The sampled instance's traffic after `prev` (rule 4).
                let width = prev.width
                var change: DeltaChange
                (counters, change) = Self.difference(
                    from: prev.counters, to: final.counters, width: width,
                    seconds: t - s.prevTime, ceiling: ceiling(for: prev))
                if change == .wrap {
                    quality = .wrapCorrected
                    s.state.events.wraps += 1
                } else if change == .reset {
                    quality = .lowerBound
                    s.state.events.resets += 1
                }
            }
            seconds = t - s.prevTime
        } else {
            // Never sampled since its creation: a whole instance. Before the
            // first sample it is outside the window and counts nothing.
            if lastSampleTime == nil {
                counters = Self.zero(like: final.counters)
            } else {
                counters = final.counters
                seconds = lastSampleTime.map { t - $0 }
            }
            if s.state.events.deletions > 0 || s.prev != nil { s.state.events.recreations += 1 }
        }
        s.state.events.deletions += 1
        s.state.totals.add(counters)
        s.state.quality = max(s.state.quality, quality)
        s.state.lastChange = .deleted
        s.state.lastCounters = final.counters
        s.state.lastSeen = t
        s.state.present = false
        s.state.deletedAt = t
        if let classification = final.classification { s.state.classification = classification }
        s.deletedIndex = .some(final.index)
        series[name] = s
        return InterfaceDelta(
            name: name, classification: s.state.classification, index: final.index, change: .deleted,
            counters: counters, seconds: seconds, quality: quality, time: t)
    }

    /// Every interface seen so far, sorted by name.
    public var interfaces: [InterfaceTotals] {
        series.values.map(\.state).sorted { $0.name < $1.name }
    }

    /// One interface's totals.
    public func totals(for name: String) -> InterfaceTotals? { series[name]?.state }

    /// Starts the totals again from zero, keeping the series' last counters so
    /// the next interval is measured as before. Quality and event counts start
    /// over with the totals, because they describe the totals.
    public mutating func zeroTotals() {
        for name in series.keys {
            series[name]!.state.totals = Self.zero(like: series[name]!.state.totals)
            series[name]!.state.quality = .exact
            series[name]!.state.events = EventCounts()
        }
    }

    /// Forgets interfaces not seen since `time` (neither sampled nor deleted),
    /// so that interface churn does not grow the engine's memory forever.
    public mutating func forget(notSeenSince time: Double) {
        series = series.filter { $0.value.state.present || $0.value.state.lastSeen >= time }
    }

    // MARK: - Saved state

    /// What ifmeter saves of one interface to continue after a restart.
    public struct SavedSeries: Sendable, Hashable {
        public var totals: InterfaceTotals
        /// The last sampled counters, their instance's index and width, and
        /// when (monotonic seconds, comparable within one boot only).
        public var last: InterfaceSample?
        public var lastTime: Double

        public init(totals: InterfaceTotals, last: InterfaceSample?, lastTime: Double) {
            self.totals = totals
            self.last = last
            self.lastTime = lastTime
        }
    }

    /// Every interface's state, to save.
    public var saved: [SavedSeries] {
        series.values.map { SavedSeries(totals: $0.state, last: $0.deletedIndex == nil ? $0.prev : nil, lastTime: $0.prevTime) }
            .sorted { $0.totals.name < $1.totals.name }
    }

    /// Continues from saved state; call before the first sample.
    ///
    /// `sameBoot`: the machine has not rebooted since the save, so the
    /// kernel counters went on while ifmeter was stopped. The next sample
    /// then applies the usual rules against the saved counters: the same
    /// index counts the downtime's traffic (exactly), another index is a
    /// recreation (a lower bound). After a reboot the next sample counts in
    /// full and the totals become lower bounds: what passed between the save
    /// and the reboot is unknown.
    public mutating func restore(_ saved: [SavedSeries], sameBoot: Bool, now: Double) {
        for item in saved {
            var state = item.totals
            state.present = false
            if !sameBoot {
                // Monotonic times of another boot mean nothing in this one.
                state.firstSeen = now
                state.lastSeen = now
            }
            var entry = Series(state: state, prev: item.last, prevTime: item.lastTime, deletedIndex: nil)
            if item.last == nil { entry.deletedIndex = .some(item.totals.index) }
            if !sameBoot, item.last != nil { entry.restartPending = true }
            series[item.totals.name] = entry
        }
        // The saved interfaces are known: the next sample is no baseline
        // for them; it stays one for interfaces never seen.
    }

    // MARK: - Rules

    private mutating func noteTime(_ t: Double) {
        lastTime = t
    }

    /// R: the byte-rate ceiling (rule 5).
    private func ceiling(for sample: InterfaceSample) -> Double {
        if let speed = sample.speedBps, speed > 0 { return Double(speed) / 8 }
        return configuration.defaultMaxBytesPerSecond
    }

    /// Rules 3 and 5: the difference between two readings of one instance.
    static func difference(
        from prev: Counters, to cur: Counters, width: CounterWidth, seconds: Double, ceiling: Double
    ) -> (Counters, DeltaChange) {
        var delta = Counters()
        var anyDecreased = false
        for key in CounterKey.allCases where cur.has(key) {
            guard prev.has(key) else {
                // A counter the earlier reading lacked: nothing to compare.
                delta[key] = 0
                continue
            }
            let old = prev.value(key), new = cur.value(key)
            if new >= old { delta[key] = new - old } else { anyDecreased = true }
        }
        if !anyDecreased { return (delta, .steady) }
        let decreased = CounterKey.allCases.filter { cur.has($0) && prev.has($0) && cur.value($0) < prev.value($0) }
        let plausible = width == .bits32 && decreased.allSatisfy { key in
            let old = prev.value(key), new = cur.value(key)
            guard old < 1 << 32, new < 1 << 32 else { return false }
            let wrapped = Double(new) + width.modulus - Double(old)
            let rate = key.countsBytes ? ceiling : ceiling / 40
            return wrapped <= rate * seconds * 1.25
        }
        if plausible {
            for key in decreased {
                delta[key] = cur.value(key) &+ (1 << 32) &- prev.value(key)
            }
            return (delta, .wrap)
        }
        return (cur, .reset)
    }

    private static func zero(like counters: Counters) -> Counters {
        var zero = Counters.zero
        for key in CounterKey.allCases where counters.has(key) { zero[key] = 0 }
        return zero
    }
}
