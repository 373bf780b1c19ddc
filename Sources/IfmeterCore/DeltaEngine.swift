/// Turns samples and deletion events into per-interval deltas and totals.
///
/// Pure and deterministic: feed it the same records and it returns the same
/// results. Its rules are `trace-v1.md`'s as of v1.2, per series
/// (namespace, name): a reset is judged per counter, and a 32-bit gap that
/// could hide a whole wrap is a lower bound (see `difference`).
///
/// Built for the sampling loop: a series lives in a slot of an array, and
/// the slots of the last sample are kept in its order, so while a source
/// lists its interfaces in the same order each time (the kernel does) a
/// sample finds its series by position, with no hashing. What changed since
/// the last `takeChanges` is tracked, so publishing costs what changed.
public struct DeltaEngine: Sendable {
    public let configuration: EngineConfiguration
    private var series: [Series] = []
    private var slots: [SeriesKey: Int] = [:]
    private var freeSlots: [Int] = []
    /// The slots of the last sample's interfaces, in its order.
    private var order: [Int] = []
    private var nextOrder: [Int] = []
    /// Slots changed since the last `takeChanges`, each once.
    private var changed: [Int] = []
    private var changeRound: Int32 = 1
    /// Series forgotten since the last `takeChanges`.
    private var forgotten: [SeriesKey] = []
    /// Namespaces with an instance that came and went unread: their series'
    /// totals are lower bounds, those made later included.
    private var lostNamespaces: Set<String> = []
    /// Names forgotten while present: their next reading is a baseline.
    private var rebaseline: Set<SeriesKey> = []
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

    /// One reading of a sample, read where it lies (no copy of the whole).
    struct Reading {
        let all: [InterfaceSample]
        let position: Int

        init(_ all: [InterfaceSample], _ position: Int) {
            self.all = all
            self.position = position
        }

        @inline(__always) var pointee: InterfaceSample { all[position] }
    }

    private struct Series: Sendable {
        var state: InterfaceTotals
        /// The last sampled instance: its counters and when it was sampled
        /// (its index, width and speed are the state's).
        var hasPrev = false
        var prevCounters = Counters()
        var prevTime: Double = 0
        /// The last sampled instance (or the last one known only from an
        /// event) was ended by a deletion event, which counted its final
        /// counters; the next sample is a new instance. `endedIndex` is the
        /// ended instance's index (nil: unknown).
        var ended = false
        var endedIndex: Int?
        /// The instance that a recreation without an event replaced (rule
        /// 4): its index and last sampled counters, for its deletion event
        /// if one comes after all (the counters go once it came). Boxed:
        /// rare, and inline it took 90 bytes of every series.
        var replaced: ReplacedInstance?
        /// The instances deletion events ended, by index, with their four
        /// final counters (v1.3, rule 1): a later event for one of them,
        /// read after other deletions or after the next sample, is a
        /// repeat. The last `EndedInstance.remembered`, oldest first.
        var endedInstances: [EndedInstance] = []
        /// Restored across a reboot: the next sample counts in full.
        var restartPending = false
        /// The series' namespace was entered anew since its instance ended:
        /// a deletion with the ended instance's index is another instance,
        /// not a repeat.
        var renewed = false
        /// The number of the last sample that showed this series.
        var stamp: Int32 = 0
        /// The change round this series was last listed as changed in.
        var changedRound: Int32 = 0
        /// False for a slot whose series was forgotten.
        var inUse = true
        /// The source's number for the facts last absorbed (0: none).
        var factsVersion: UInt64 = 0

        init(state: InterfaceTotals) { self.state = state }

        func matches(_ sample: InterfaceSample) -> Bool {
            ExactText.equal(state.name, sample.name) && ExactText.equal(state.netns, sample.netns)
        }

        /// The last sampled instance as a reading (for saving).
        var prev: InterfaceSample? {
            guard hasPrev else { return nil }
            return InterfaceSample(
                name: state.name, netns: state.netns, index: state.index, classification: state.classification,
                width: state.width, speedBps: state.speedBps, counters: prevCounters)
        }

        mutating func remember(_ sample: Reading, at t: Double) {
            hasPrev = true
            prevCounters = sample.pointee.counters
            prevTime = t
        }

        /// Takes what a sample says of the interface; returns whether any
        /// of it differs from what was there. Facts the source says are
        /// unchanged (the same `factsVersion`) are not compared again.
        mutating func absorb(_ sample: Reading, classification: Classification, at t: Double) -> Bool {
            var differs = !state.present || state.deletedAt != nil
            let version = sample.pointee.factsVersion
            if version == 0 || version != factsVersion {
                factsVersion = version
                if absorbFacts(sample.pointee, classification: classification) { differs = true }
            }
            if sample.pointee.kernelStats != nil || state.lastKernelStats != nil, state.lastKernelStats != sample.pointee.kernelStats {
                state.lastKernelStats = sample.pointee.kernelStats
                differs = true
            }
            state.lastSeen = t
            state.present = true
            state.deletedAt = nil
            return differs
        }

        /// The interface's kind, index, width, speed and attributes.
        mutating func absorbFacts(_ sample: InterfaceSample, classification: Classification) -> Bool {
            var differs = false
            if state.classification != classification {
                state.classification = classification
                differs = true
            }
            if state.index != sample.index {
                state.index = sample.index
                differs = true
            }
            if state.width != sample.width {
                state.width = sample.width
                differs = true
            }
            if state.speedBps != sample.speedBps {
                state.speedBps = sample.speedBps
                differs = true
            }
            if state.attributes != sample.attributes {
                state.attributes = sample.attributes
                differs = true
            }
            return differs
        }
    }

    /// Applies one trace record.
    @discardableResult
    public mutating func apply(_ record: TraceRecord) -> [InterfaceDelta] {
        switch record {
        case .sample(let sample): return apply(sample)
        case .deleted(let event): return apply(event).map { [$0] } ?? []
        case .renamed(let event):
            apply(event)
            return []
        case .namespace(let event):
            apply(event)
            return []
        }
    }

    /// Applies a reading: its deletions first (their final counters), then
    /// its sample. Overruns make the intervals of interfaces that went away
    /// lower bounds.
    @discardableResult
    public mutating func apply(_ reading: SourceReading, idleDeltas: Bool = true) -> [InterfaceDelta] {
        var deltas: [InterfaceDelta] = []
        if !reading.events.renamed.isEmpty || !reading.events.deleted.isEmpty || !reading.events.namespaces.isEmpty {
            // In time order, as a trace of this reading lists them.
            for record in reading.events.records {
                switch record {
                case .renamed(let event): apply(event)
                case .namespace(let event): apply(event)
                case .deleted(let event): if let delta = apply(event) { deltas.append(delta) }
                case .sample: break
                }
            }
        }
        let sampled = apply(reading.sample, eventsLost: reading.events.overruns > 0, idleDeltas: idleDeltas)
        if deltas.isEmpty { return sampled }
        return deltas + sampled
    }

    /// Applies a sample: every interface seen at one instant.
    ///
    /// `eventsLost`: link notifications were lost (the queue overflowed), so
    /// an interface that went away since the last sample may have been
    /// deleted with traffic nobody saw: its totals become lower bounds.
    /// `idleDeltas`: false leaves out the deltas of idle intervals (steady,
    /// exact, nothing counted), for consumers that only add deltas up.
    @discardableResult
    public mutating func apply(_ sample: Sample, eventsLost: Bool = false, idleDeltas: Bool = true) -> [InterfaceDelta] {
        let t = sample.time
        let isFirst = lastSampleTime == nil
        let previousSampleTime = lastSampleTime
        if isFirst { firstTime = t }
        lastTime = t
        var deltas: [InterfaceDelta] = []
        if idleDeltas { deltas.reserveCapacity(sample.interfaces.count) }
        // Series this sample shows are stamped with it: no set of names to
        // hash, and a series twice in one sample is seen once.
        let stamp = Int32(truncatingIfNeeded: samplesSeen + 1)
        nextOrder.removeAll(keepingCapacity: true)
        nextOrder.reserveCapacity(sample.interfaces.count)
        // The first sample makes every series: room for them at once, not
        // by doubling (which held the old array beside one twice its size).
        if series.isEmpty {
            series.reserveCapacity(sample.interfaces.count)
            slots.reserveCapacity(sample.interfaces.count)
        }

        // Read in place, by position: an interface sample is big, copies cost.
        let readings = sample.interfaces
        do {
            for position in readings.indices {
                let current = Reading(readings, position)
                let classification =
                    current.pointee.classification
                    ?? NameRules.classify(current.pointee.name, platform: configuration.platform)
                var slot = -1
                if position < order.count {
                    let candidate = order[position]
                    if series[candidate].inUse, series[candidate].matches(current.pointee) { slot = candidate }
                }
                if slot < 0, let found = slots[current.pointee.key] { slot = found }
                if slot >= 0 {
                    nextOrder.append(slot)
                    let ceiling = self.ceiling(speed: current.pointee.speedBps)
                    // Updated in place: a series is big, copies cost.
                    let (delta, differs) = Self.update(
                        &series[slot], with: current, classification: classification, stamp: stamp, at: t,
                        isFirst: isFirst, previousSampleTime: previousSampleTime, ceiling: ceiling)
                    if differs { markChanged(slot) }
                    if let delta, idleDeltas || !delta.isIdle { deltas.append(delta) }
                    continue
                }
                let reading = current.pointee
                // A name forgotten while it was there (a filter changed, its
                // history removed) starts from a baseline, as at the first
                // sample: its counters hold traffic already counted.
                let baselined = isFirst || (!rebaseline.isEmpty && rebaseline.remove(reading.key) != nil)
                let counters = baselined ? Self.zero(like: reading.counters) : reading.counters
                let change: DeltaChange = baselined ? .baseline : .appeared
                var entry = Series(
                    state: InterfaceTotals(
                        name: reading.name, netns: reading.netns, classification: classification, index: reading.index,
                        width: reading.width, speedBps: reading.speedBps, attributes: reading.attributes,
                        totals: counters, quality: lostNamespaces.isEmpty || !lostNamespaces.contains(reading.netns) ? .exact : .lowerBound,
                        events: EventCounts(),
                        baseline: baselined ? reading.counters : Self.zero(like: reading.counters),
                        lastKernelStats: reading.kernelStats, firstSeen: t, lastSeen: t,
                        present: true, deletedAt: nil))
                entry.remember(current, at: t)
                entry.factsVersion = reading.factsVersion
                entry.stamp = stamp
                nextOrder.append(insert(entry, key: reading.key))
                let delta = InterfaceDelta(
                    name: reading.name, netns: reading.netns, classification: classification, index: reading.index,
                    change: change, counters: counters, seconds: isFirst ? nil : previousSampleTime.map { t - $0 },
                    quality: .exact, time: t)
                if idleDeltas || !delta.isIdle { deltas.append(delta) }
            }
        }
        // Rule 6: an interface missing from this sample pauses its series.
        // Only series of the last sample can be present.
        for slot in order where series[slot].inUse && series[slot].state.present && series[slot].stamp != stamp {
            series[slot].state.present = false
            if eventsLost, !series[slot].ended {
                series[slot].state.quality = .lowerBound
            }
            markChanged(slot)
        }
        swap(&order, &nextOrder)
        lastSampleTime = t
        samplesSeen += 1
        return deltas
    }

    /// Rules 3 to 5 (and the recreations of rule 4) for a series already
    /// known. Returns the delta (nil when the reading is to be skipped) and
    /// whether the series' published state changed.
    private static func update(
        _ s: inout Series, with reading: Reading, classification: Classification, stamp: Int32,
        at t: Double, isFirst: Bool, previousSampleTime: Double?, ceiling: Double
    ) -> (InterfaceDelta?, Bool) {
        // The same series twice in one sample: the first reading stands.
        if s.stamp == stamp { return (nil, false) }
        var counters: Counters
        var change: DeltaChange
        var quality = Quality.exact
        var seconds: Double?
        if s.restartPending {
            // Saved before a reboot: these counters began at boot.
            counters = reading.pointee.counters
            change = .restarted
            quality = .lowerBound
            s.state.events.resets += 1
        } else if s.ended {
            // The first sample after an instance was ended is a new
            // instance, whatever its index (indexes are reused): counted
            // in full, exact, one recreation (v1.1).
            counters = reading.pointee.counters
            change = .recreated
            s.state.events.recreations += 1
            seconds = previousSampleTime.map { t - $0 }
        } else if s.hasPrev {
            seconds = t - s.prevTime
            if let oldIndex = s.state.index, let newIndex = reading.pointee.index, oldIndex != newIndex {
                // Recreated without a deletion event: the old instance's
                // traffic after `prev` is lost (rule 4). Its deletion may
                // still come: remember what it was.
                counters = reading.pointee.counters
                change = .recreated
                quality = .lowerBound
                s.state.events.recreations += 1
                s.replaced = ReplacedInstance(index: oldIndex, counters: s.prevCounters)
            } else {
                (counters, change, quality) = difference(
                    from: s.prevCounters, to: reading.pointee.counters, width: reading.pointee.width, seconds: t - s.prevTime,
                    ceiling: ceiling)
                switch change {
                case .wrap: s.state.events.wraps += 1
                case .reset: s.state.events.resets += 1
                default: break
                }
            }
        } else if isFirst {
            // Named only by an event before the baseline: this is its baseline.
            counters = zero(like: reading.pointee.counters)
            change = .baseline
            s.state.baseline = reading.pointee.counters
        } else {
            // Named only by an event before the baseline: it appears now.
            counters = reading.pointee.counters
            change = .appeared
            seconds = previousSampleTime.map { t - $0 }
        }
        var differs = change != .steady
        if counters.anyNonZero {
            // A total stopped at 2^64-1 lost the rest: a lower bound (v1.1).
            if s.state.totals.addSaturating(counters) { quality = .lowerBound }
            differs = true
        }
        if quality > s.state.quality {
            s.state.quality = quality
            differs = true
        }
        if s.absorb(reading, classification: classification, at: t) { differs = true }
        s.remember(reading, at: t)
        // An instance sampled under a remembered index is another instance
        // now: a deletion of that index is no repeat of the one before
        // (v1.3, rule 1).
        if !s.endedInstances.isEmpty, let index = reading.pointee.index { s.endedInstances.removeAll { $0.index == index } }
        s.ended = false
        s.endedIndex = nil
        s.renewed = false
        s.restartPending = false
        s.stamp = stamp
        let delta = InterfaceDelta(
            name: reading.pointee.name, netns: reading.pointee.netns, classification: classification, index: reading.pointee.index,
            change: change, counters: counters, seconds: seconds, quality: quality, time: t)
        return (delta, differs)
    }

    /// Applies a deletion event with the interface's final counters, in any
    /// order relative to the samples (trace v1.1, "Deletion events in every
    /// order"):
    /// - before the first sample it is the baseline's and changes nothing;
    /// - for the live sampled instance (same index, or either unknown) it
    ///   ends it: final - prev per counter; a counter the event lists as
    ///   under-reported adds max(final - prev, 0), and any final below prev
    ///   was under-reported (adds 0, a lower bound, no reset): a deletion
    ///   never counts a final counter in full (one the last sample lacked
    ///   adds 0: nothing to compare with);
    /// - for the instance a recreation without an event replaced, it adds
    ///   final - that instance's last counters (floored at 0);
    /// - again for an instance already ended, it changes nothing: with a
    ///   known index, for any of the last 16 instances deletions ended
    ///   (not only the last), when its four final counters are the same;
    ///   with other counters it cannot be placed (v1.3, rule 1);
    /// - for another index after an instance was ended, or for a series
    ///   never sampled, it is an instance born and gone between samples:
    ///   counted in full;
    /// - anything else cannot be placed: one deletion, no counters, a
    ///   lower bound.
    /// Whenever it counts a deletion, the event's kind (when it has one)
    /// becomes the series' kind (v1.2, settled).
    @discardableResult
    public mutating func apply(_ event: DeletionEvent) -> InterfaceDelta? {
        let t = event.time
        let final = event.interface
        let key = final.key
        lastTime = t
        guard let lastSample = lastSampleTime else {
            // The baseline's: it changes nothing, but the name was seen.
            if slots[key] == nil { _ = insert(newSeries(final, at: t), key: key) }
            return nil
        }
        let listed = event.lowerBound
        func same(_ a: Int?, _ b: Int?) -> Bool { a == nil || b == nil || a == b }

        var counters: Counters
        var quality: Quality = listed.isEmpty ? .exact : .lowerBound
        var seconds: Double?
        var recreation = false
        guard let slot = slots[key] else {
            // Never sampled: an instance born and gone between samples.
            let slot = insert(newSeries(final, at: t), key: key)
            return end(
                slot, final, counters: final.counters, quality: quality, seconds: t - lastSample, recreation: false,
                endedIndex: final.index, at: t)
        }
        let s = series[slot]
        // The index of the instance the event ends: the event's, else (for
        // the sampled instance) its sample's. An instance born and gone
        // with no index in its event has an unknown one, whatever index the
        // series knew before.
        var endedIndex = final.index
        if !s.ended, s.hasPrev, same(s.state.index, final.index) {
            // Ends the sampled instance.
            endedIndex = final.index ?? s.state.index
            counters = Counters()
            for k in CounterKey.allCases where final.counters.has(k) {
                guard s.prevCounters.has(k) else {
                    // Nothing to compare with (as between two samples):
                    // never the final in full.
                    counters[k] = 0
                    continue
                }
                let new = final.counters.value(k), old = s.prevCounters.value(k)
                if new >= old {
                    counters[k] = new - old
                } else {
                    // Under-reported: a counter only falls on a reset, and
                    // the instance is gone.
                    counters[k] = 0
                    quality = .lowerBound
                }
            }
            seconds = t - s.prevTime
        } else if let index = final.index, s.replaced?.index == index {
            // The instance a recreation without an event replaced: its
            // traffic after its last sample, found after all (once; its
            // repeat changes nothing). The interval stays a lower bound
            // (the recreation made it one).
            guard let replaced = s.replaced?.counters else { return nil }
            counters = Counters()
            for k in CounterKey.allCases where final.counters.has(k) {
                guard replaced.has(k) else {
                    counters[k] = 0
                    continue
                }
                let old = replaced.value(k)
                counters[k] = final.counters.value(k) > old ? final.counters.value(k) - old : 0
            }
            series[slot].replaced = ReplacedInstance(index: index, counters: nil)
            // An instance a deletion event ended: its repeat, read after the
            // next recreation replaced `replaced`, is still one (v1.3, rule 1).
            series[slot].endedInstances.remember(EndedInstance(index: index, final: final.counters))
            return apply(counters, of: final, to: slot, quality: .lowerBound, seconds: t - s.prevTime, endsInstance: false, at: t)
        } else if let index = final.index, let ended = s.endedInstances.last(where: { $0.index == index }) {
            // An instance a deletion ended already, this one or one before
            // (v1.3, rule 1): with the same final counters, a repeat that
            // changes nothing; with others, it cannot be placed.
            if ended.sameFinal(final.counters) { return nil }
            return apply(
                Self.zero(like: final.counters), of: final, to: slot, quality: .lowerBound, seconds: nil, endsInstance: false, at: t)
        } else if s.ended, !s.renewed, same(s.endedIndex, final.index) {
            // The same deletion again (an index unknown on either side):
            // already counted.
            return nil
        } else if s.ended || !s.hasPrev {
            // Another instance, born and gone between samples (the first
            // one of a series named only by an event before the baseline).
            counters = final.counters
            seconds = t - lastSample
            recreation = s.ended
        } else {
            // An instance that cannot be placed: its traffic is unknown.
            return apply(
                Self.zero(like: final.counters), of: final, to: slot, quality: .lowerBound, seconds: nil,
                endsInstance: false, at: t)
        }
        return end(
            slot, final, counters: counters, quality: quality, seconds: seconds, recreation: recreation, endedIndex: endedIndex, at: t)
    }

    /// Applies a rename: the interface goes on under its new name, and so
    /// does its series (ifmeter's own event; contract readers skip it). When
    /// the new name already has a series (an earlier instance, gone), the
    /// renamed instance goes on there and the traffic counted under the old
    /// name stays there: every byte under one name or the other, once.
    /// Returns whether it applied.
    @discardableResult
    public mutating func apply(_ rename: RenameEvent) -> Bool {
        let old = SeriesKey(netns: rename.netns, name: rename.from), new = SeriesKey(netns: rename.netns, name: rename.to)
        guard old != new, let slot = slots[old], !series[slot].ended else { return false }
        if let known = series[slot].state.index, let index = rename.index, known != index { return false }
        lastTime = rename.time
        guard let other = slots[new] else {
            slots[old] = nil
            slots[new] = slot
            series[slot].state.name = rename.to
            forgotten.append(old)
            markChanged(slot)
            return true
        }
        // The earlier instance under the new name went away; if no event
        // said so, its traffic after its last sample is unknown.
        if !series[other].ended, series[other].hasPrev { series[other].state.quality = .lowerBound }
        series[other].hasPrev = series[slot].hasPrev
        series[other].prevCounters = series[slot].prevCounters
        series[other].prevTime = series[slot].prevTime
        series[other].state.index = series[slot].state.index
        series[other].state.width = series[slot].state.width
        series[other].state.speedBps = series[slot].state.speedBps
        series[other].ended = false
        series[other].endedIndex = nil
        series[other].factsVersion = 0
        series[other].stamp = series[slot].stamp
        // The old name's series keeps what it counted; its instance is gone
        // from it (as if ended, with nothing more to count). A series known
        // only from a deletion before the first sample had no instance to
        // end: a sample under its name is still the baseline (rule 1), or
        // an appearance.
        if series[slot].hasPrev {
            series[slot].ended = true
            series[slot].endedIndex = series[slot].state.index
        }
        series[slot].state.present = false
        series[slot].state.deletedAt = nil
        markChanged(slot)
        markChanged(other)
        return true
    }

    /// A namespace instance entered, or lost (`NamespaceEvent.Kind`).
    public mutating func apply(_ event: NamespaceEvent) {
        lastTime = event.time
        switch event.kind {
        case .entered:
            // Its interfaces are new instances: an ended series' next
            // deletion is no repeat, whatever its index, and no instance
            // it ended before is remembered (v1.3, rule 1).
            for slot in series.indices where series[slot].inUse && series[slot].state.netns == event.netns {
                series[slot].endedInstances.removeAll()
                if series[slot].ended { series[slot].renewed = true }
            }
        case .lost:
            lostNamespaces.insert(event.netns)
            for slot in series.indices where series[slot].inUse && series[slot].state.netns == event.netns {
                if series[slot].state.quality != .lowerBound {
                    series[slot].state.quality = .lowerBound
                    markChanged(slot)
                }
            }
        }
    }

    /// A series known only from an event so far: no counters, not present.
    private func newSeries(_ final: InterfaceSample, at t: Double) -> Series {
        var entry = Series(
            state: InterfaceTotals(
                name: final.name, netns: final.netns,
                classification: final.classification ?? NameRules.classify(final.name, platform: configuration.platform),
                index: final.index, width: final.width, speedBps: final.speedBps, attributes: final.attributes,
                totals: Self.zero(like: final.counters), quality: lostNamespaces.contains(final.netns) ? .lowerBound : .exact,
                events: EventCounts(),
                baseline: Self.zero(like: final.counters), lastKernelStats: nil, firstSeen: t,
                lastSeen: t, present: false, deletedAt: nil))
        entry.stamp = 0
        return entry
    }

    /// Counts a deletion that ends an instance.
    private mutating func end(
        _ slot: Int, _ final: InterfaceSample, counters: Counters, quality: Quality, seconds: Double?, recreation: Bool,
        endedIndex: Int?, at t: Double
    ) -> InterfaceDelta {
        if recreation { series[slot].state.events.recreations += 1 }
        if let endedIndex { series[slot].endedInstances.remember(EndedInstance(index: endedIndex, final: final.counters)) }
        series[slot].ended = true
        series[slot].renewed = false
        series[slot].endedIndex = endedIndex
        series[slot].state.present = false
        series[slot].state.deletedAt = t
        return apply(counters, of: final, to: slot, quality: quality, seconds: seconds, endsInstance: true, at: t)
    }

    /// Adds a deletion's counters to its series. A kind the event carries
    /// becomes the series' kind (v1.2, settled), whichever instance it was.
    private mutating func apply(
        _ counters: Counters, of final: InterfaceSample, to slot: Int, quality: Quality, seconds: Double?, endsInstance: Bool,
        at t: Double
    ) -> InterfaceDelta {
        var quality = quality
        if let classification = final.classification { series[slot].state.classification = classification }
        series[slot].state.events.deletions += 1
        if series[slot].state.totals.addSaturating(counters) { quality = .lowerBound }
        series[slot].state.quality = max(series[slot].state.quality, quality)
        series[slot].state.lastSeen = t
        markChanged(slot)
        return InterfaceDelta(
            name: final.name, netns: final.netns, classification: series[slot].state.classification, index: final.index,
            change: .deleted, counters: counters, seconds: seconds, quality: quality, time: t)
    }

    // MARK: - Reading the totals

    /// Every interface seen so far, sorted by (namespace, name). Costs a
    /// sort: for reports, not for every sample (see `takeChanges`).
    public var interfaces: [InterfaceTotals] {
        series.lazy.filter(\.inUse).map(\.state).sorted { $0.key < $1.key }
    }

    /// How many series the engine holds.
    public var count: Int { slots.count }

    /// Bytes a series takes in the engine's array (for the benchmark's
    /// account of memory).
    public static var bytesPerSeries: Int { MemoryLayout<Series>.stride }

    /// One interface's totals.
    public func totals(for key: SeriesKey) -> InterfaceTotals? {
        slots[key].map { series[$0].state }
    }

    /// One interface of the own namespace.
    public func totals(for name: String) -> InterfaceTotals? { totals(for: SeriesKey(name: name)) }

    /// The keys of the series whose totals, quality, events, presence or
    /// facts changed since the last call (new ones included; `totals(for:)`
    /// gives them), and of those forgotten (apply these first: a key can be
    /// forgotten and seen anew); then starts over. Costs what changed.
    /// The same as `takeChanges`, with the totals of the changed series
    /// (read by slot: no lookup by key).
    public mutating func takeChangedTotals() -> (changed: [InterfaceTotals], forgotten: [SeriesKey]) {
        let result = (changed.compactMap { series[$0].inUse ? series[$0].state : nil }, forgotten)
        changed.removeAll(keepingCapacity: true)
        forgotten.removeAll()
        changeRound &+= 1
        return result
    }

    public mutating func takeChanges() -> (changed: [SeriesKey], forgotten: [SeriesKey]) {
        let result = (changed.compactMap { series[$0].inUse ? series[$0].state.key : nil }, forgotten)
        changed.removeAll(keepingCapacity: true)
        forgotten.removeAll()
        changeRound &+= 1
        return result
    }

    /// Starts the totals again from zero, keeping the series' last counters so
    /// the next interval is measured as before. Quality and event counts start
    /// over with the totals, because they describe the totals.
    public mutating func zeroTotals() {
        // What a lost namespace instance carried is before the new start.
        lostNamespaces = []
        for slot in series.indices where series[slot].inUse {
            series[slot].state.totals = Self.zero(like: series[slot].state.totals)
            series[slot].state.quality = .exact
            series[slot].state.events = EventCounts()
            markChanged(slot)
        }
    }

    /// Starts one series' totals again from zero (its history went to
    /// another name, or was removed), keeping its last counters so that
    /// its next delta is exact; a series not present is forgotten instead.
    public mutating func restart(_ key: SeriesKey) {
        guard let slot = slots[key], series[slot].inUse else { return }
        guard series[slot].state.present else {
            vacate(slot)
            return
        }
        series[slot].state.totals = Self.zero(like: series[slot].state.totals)
        series[slot].state.quality = .exact
        series[slot].state.events = EventCounts()
        markChanged(slot)
    }

    /// Forgets interfaces not seen since `time` (neither sampled nor deleted),
    /// so that interface churn does not grow the engine's memory forever.
    public mutating func forget(notSeenSince time: Double) {
        for slot in series.indices where series[slot].inUse && !series[slot].state.present && series[slot].state.lastSeen < time {
            vacate(slot)
        }
    }

    /// Frees a series' slot; its key is reported forgotten.
    private mutating func vacate(_ slot: Int) {
        let key = series[slot].state.key
        slots[key] = nil
        series[slot].inUse = false
        series[slot].state = Self.vacant
        series[slot].hasPrev = false
        freeSlots.append(slot)
        forgotten.append(key)
    }

    /// Forgets every series `keep` says no to, present or not (a filter
    /// changed under a running ifmeter: what it now leaves out is gone as a
    /// forgotten interface is, not a vanished one whose traffic is unknown).
    /// One present when forgotten starts from a baseline when next read
    /// (its counters hold what was counted), not as a new interface.
    public mutating func forget(keeping keep: (SeriesKey, InterfaceKind) -> Bool) {
        for slot in series.indices where series[slot].inUse && !keep(series[slot].state.key, series[slot].state.classification.kind) {
            if series[slot].state.present || series[slot].hasPrev { rebaseline.insert(series[slot].state.key) }
            vacate(slot)
        }
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

    /// Every interface's state, to save, sorted by (namespace, name).
    public var saved: [SavedSeries] {
        series.lazy.filter(\.inUse)
            .map { SavedSeries(totals: $0.state, last: $0.ended ? nil : $0.prev, lastTime: $0.prevTime) }
            .sorted { $0.totals.key < $1.totals.key }
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
            var entry = Series(state: state)
            if let last = item.last {
                entry.hasPrev = true
                entry.prevCounters = last.counters
                entry.prevTime = item.lastTime
                entry.state.index = last.index
                entry.state.width = last.width
                entry.state.speedBps = last.speedBps
                if !sameBoot { entry.restartPending = true }
            } else {
                entry.prevTime = item.lastTime
                entry.ended = true
                entry.endedIndex = item.totals.index
            }
            let key = state.key
            if let slot = slots[key] {
                series[slot] = entry
                markChanged(slot)
            } else {
                _ = insert(entry, key: key)
            }
        }
        // The saved interfaces are known: the next sample is no baseline
        // for them; it stays one for interfaces never seen.
    }

    /// Makes a series' totals a lower bound: traffic may be missing that no
    /// counter can show (after an unclean stop, what was counted after the
    /// state file's last save).
    public mutating func markLowerBound(_ key: SeriesKey) {
        guard let slot = slots[key], series[slot].state.quality != .lowerBound else { return }
        series[slot].state.quality = .lowerBound
        markChanged(slot)
    }

    // MARK: - Rules

    /// R: the byte-rate ceiling (rule 5).
    private func ceiling(speed: UInt64?) -> Double {
        if let speed, speed > 0 { return Double(speed) / 8 }
        return configuration.defaultMaxBytesPerSecond
    }

    /// Rules 3 and 5 (with v1.2's changes): the difference between two
    /// readings of one instance, what happened, and how far it is known.
    ///
    /// - No counter went down: `cur - prev` per counter, `steady`.
    /// - Every counter that went down is a plausible 32-bit wrap: those are
    ///   wrap-corrected, the others subtract plainly; `wrap`.
    /// - Otherwise the instance was reset, judged per counter (v1.2): a
    ///   counter that went down restarted and counts `cur`; one that did not
    ///   may not have restarted at all (a driver that clears only its error
    ///   statistics) and subtracts plainly; `reset`, a lower bound.
    ///
    /// A counter the earlier reading lacked has nothing to compare with: 0.
    ///
    /// v1.2, a 32-bit gap that could hide a whole wrap: when `width` is 32
    /// bits and `R * dt * 1.25 >= 2^32`, whole wraps could have passed
    /// between the readings unseen. The delta is computed as above, and its
    /// quality is a lower bound. It is no event of its own: nothing was seen
    /// to happen, so `change` stays `steady` (or `wrap`) and no reset or wrap
    /// is counted for the gap; only the quality says what cannot be known.
    /// It applies to every comparison of two samples of one instance: rule
    /// 3, rule 5, a series back from an absence (rule 6), and one continued
    /// from saved state within the same boot. It does not apply to a 64-bit
    /// source, to counts in full (rules 2 and 4, a restart after a reboot),
    /// or to a deletion's final counters (v1.1's rules, 64-bit
    /// IFLA_STATS64).
    static func difference(
        from prev: Counters, to cur: Counters, width: CounterWidth, seconds: Double, ceiling: Double
    ) -> (Counters, DeltaChange, Quality) {
        // The common case: the same counters, none went down.
        if let steady = cur.minus(prev) {
            return (steady, .steady, width == .bits32 && mayHideWrap(seconds: seconds, ceiling: ceiling) ? .lowerBound : .exact)
        }
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
        let gap = width == .bits32 && mayHideWrap(seconds: seconds, ceiling: ceiling)
        if !anyDecreased { return (delta, .steady, gap ? .lowerBound : .exact) }
        let decreased = CounterKey.allCases.filter { cur.has($0) && prev.has($0) && cur.value($0) < prev.value($0) }
        let plausible =
            width == .bits32
            && decreased.allSatisfy { key in
                let old = prev.value(key), new = cur.value(key)
                // A counter at or above 2^32 in prev cannot wrap at 32 bits.
                guard old < 1 << 32, new < 1 << 32 else { return false }
                let wrapped = Double(new) + width.modulus - Double(old)
                let rate = key.countsBytes ? ceiling : ceiling / 40
                return wrapped <= rate * seconds * 1.25
            }
        if plausible {
            for key in decreased {
                delta[key] = cur.value(key) &+ (1 << 32) &- prev.value(key)
            }
            return (delta, .wrap, gap ? .lowerBound : .wrapCorrected)
        }
        // A reset, judged per counter (v1.2): what went down restarted.
        for key in decreased { delta[key] = cur.value(key) }
        return (delta, .reset, .lowerBound)
    }

    /// v1.2: over `seconds` at up to `ceiling` bytes a second (with rule
    /// 5's slack of 1.25), a 32-bit byte counter could have gone all the
    /// way round (2^32) unseen. One multiply-compare; callers ask only for
    /// 32-bit readings.
    @inline(__always)
    static func mayHideWrap(seconds: Double, ceiling: Double) -> Bool {
        ceiling * seconds * 1.25 >= 4_294_967_296
    }

    static func zero(like counters: Counters) -> Counters {
        var zero = Counters.zero
        for key in CounterKey.allCases where counters.has(key) { zero[key] = 0 }
        return zero
    }

    // MARK: - Slots

    private mutating func insert(_ entry: Series, key: SeriesKey) -> Int {
        var entry = entry
        entry.inUse = true
        let slot: Int
        if let reused = freeSlots.popLast() {
            // Listed as changed already this round (it was forgotten): once.
            entry.changedRound = series[reused].changedRound
            series[reused] = entry
            slot = reused
        } else {
            series.append(entry)
            slot = series.count - 1
        }
        slots[key] = slot
        markChanged(slot)
        return slot
    }

    private mutating func markChanged(_ slot: Int) {
        guard series[slot].changedRound != changeRound else { return }
        series[slot].changedRound = changeRound
        changed.append(slot)
    }

    /// What a forgotten slot holds until it is reused.
    private static let vacant = InterfaceTotals(
        name: "", classification: Classification(kind: .other, evidence: ""), index: nil, width: .bits64, speedBps: nil,
        attributes: nil, totals: Counters(), quality: .exact, events: EventCounts(), baseline: Counters(),
        lastKernelStats: nil, firstSeen: 0, lastSeen: 0, present: false, deletedAt: nil)
}

extension Counters {
    /// `self - other`, counter by counter, when both hold the same counters
    /// and none of `self` is below `other`'s; nil otherwise.
    @inline(__always)
    func minus(_ other: Counters) -> Counters? {
        guard present == other.present, v0 >= other.v0, v1 >= other.v1, v2 >= other.v2, v3 >= other.v3,
            v4 >= other.v4, v5 >= other.v5, v6 >= other.v6, v7 >= other.v7
        else { return nil }
        var result = Counters()
        result.v0 = v0 - other.v0
        result.v1 = v1 - other.v1
        result.v2 = v2 - other.v2
        result.v3 = v3 - other.v3
        result.v4 = v4 - other.v4
        result.v5 = v5 - other.v5
        result.v6 = v6 - other.v6
        result.v7 = v7 - other.v7
        result.present = present
        return result
    }

    /// Whether any present counter is non-zero.
    @inline(__always)
    public var anyNonZero: Bool {
        (v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7) != 0
    }
}

/// An instance a deletion event ended: its index and four final counters
/// (v1.3, rule 1).
struct EndedInstance: Sendable, Hashable {
    /// How many ended instances a series remembers (the contract asks for
    /// at least 16).
    static let remembered = 16

    let index: Int
    let rxBytes: UInt64, txBytes: UInt64, rxPackets: UInt64, txPackets: UInt64

    init(index: Int, final: Counters) {
        self.index = index
        rxBytes = final.value(.rxBytes)
        txBytes = final.value(.txBytes)
        rxPackets = final.value(.rxPackets)
        txPackets = final.value(.txPackets)
    }

    /// A deletion of this instance that says the same four final counters.
    func sameFinal(_ final: Counters) -> Bool {
        self == EndedInstance(index: index, final: final)
    }
}

extension [EndedInstance] {
    /// Remembers an ended instance: the newest for its index, the last
    /// `EndedInstance.remembered` kept.
    mutating func remember(_ instance: EndedInstance) {
        removeAll { $0.index == instance.index }
        append(instance)
        if count > EndedInstance.remembered { removeFirst(count - EndedInstance.remembered) }
    }
}

/// The instance a recreation without a deletion event replaced (rule 4).
/// `counters` is nil once its deletion came (its repeat changes nothing).
private final class ReplacedInstance: Sendable {
    let index: Int
    let counters: Counters?

    init(index: Int, counters: Counters?) {
        self.index = index
        self.counters = counters
    }
}
