import IfmeterCore
import IfmeterTestSupport
import Testing

/// The delta engine against a second, deliberately plain implementation of
/// the trace contract, over thousands of generated traces: totals, quality
/// and event counts must agree for every interface. A disagreement fails
/// with the smallest trace that still shows it, as JSON Lines. Both are
/// also held to the traffic the generator really made, where the contract
/// can know it: an exact (or wrap-corrected) total equals it, a lower bound
/// is never above it.
@Suite struct DifferentialTests {
    /// Traces per run (seeds 1 to this); about 10 s in a debug build.
    static let traceCount = 3000
    /// One trace in this many goes through JSON Lines and back, as
    /// `ifmeter replay` reads it (the round trip costs more than both
    /// implementations together); the rest are fed as generated.
    static let roundTripEvery = 8

    @Test func theEngineAgreesWithThePlainReferenceAndNeitherOverstatesTheTruth() throws {
        var disagreements: [String] = []
        var untruths: [String] = []
        var features: [TraceGenerator.Feature: Int] = [:]
        var qualities: [Quality: Int] = [:]
        var events = EventCounts()
        var saturated = 0, truthChecked = 0, truthUnknown = 0
        for seed in UInt64(1)...UInt64(Self.traceCount) {
            var generator = TraceGenerator(seed: seed)
            let trace = generator.generate()
            for feature in trace.features { features[feature, default: 0] += 1 }
            var records = trace.records
            if seed % UInt64(Self.roundTripEvery) == 0 {
                // Through the trace format, as `ifmeter replay` reads it.
                let (header, read) = try readTrace(Self.jsonLines(trace.records, platform: trace.platform))
                #expect(header.platform == trace.platform && read == trace.records, "seed \(seed): the trace does not read back as written")
                records = read
            }
            let configuration = trace.configuration
            let engine = Self.engineOutcomes(records, configuration)
            let reference = Self.referenceOutcomes(records, configuration)
            if let difference = Self.difference(engine: engine, reference: reference) {
                if disagreements.count < 3 {
                    let small = Self.shrink(records, configuration)
                    // What is printed replays to the same disagreement.
                    let text = Self.jsonLines(small, platform: trace.platform)
                    let replayed = try readTrace(text).1
                    let why = Self.difference(
                        engine: Self.engineOutcomes(replayed, configuration), reference: Self.referenceOutcomes(replayed, configuration))
                    disagreements.append(
                        """
                        seed \(seed) (\(records.count) records, shrunk to \(small.count)), default ceiling \(configuration.defaultMaxBytesPerSecond) B/s:
                        \(why ?? "(the printed trace does not replay to it) \(difference)")
                        \(text)
                        """)
                } else {
                    disagreements.append("seed \(seed): \(difference)")
                }
                continue
            }
            for (key, outcome) in engine {
                qualities[outcome.quality, default: 0] += 1
                events.wraps += outcome.events[0]
                events.resets += outcome.events[1]
                events.recreations += outcome.events[2]
                events.deletions += outcome.events[3]
                if outcome.totals.contains(UInt64.max) { saturated += 1 }
                guard let truth = trace.truth[key] else {
                    untruths.append("seed \(seed): \(key) is reported, but the generator never named it")
                    continue
                }
                guard truth.known else {
                    truthUnknown += 1
                    continue
                }
                truthChecked += 1
                let checked = truth.extrasKnown ? CounterKey.allCases : CounterKey.required
                for counter in checked {
                    let got = outcome.totals[counter.rawValue], real = truth.counters[counter.rawValue]
                    let wrong = outcome.quality == .lowerBound ? got > real : got != real
                    if wrong {
                        let what = "seed \(seed): \(key) \(counter.jsonKey) is \(got), \(outcome.quality.name); the traffic was \(real)"
                        untruths.append(untruths.count < 3 ? what + "\n" + Self.jsonLines(records, platform: trace.platform) : what)
                        break
                    }
                }
            }
            for key in trace.truth.keys where engine[key] == nil {
                untruths.append("seed \(seed): the generator named \(key), the report lacks it")
            }
        }
        #expect(
            disagreements.count == 0,
            "\(disagreements.count) of \(Self.traceCount) traces: the engine and the reference disagree\n\(disagreements.prefix(3).joined(separator: "\n\n"))"
        )
        #expect(untruths.count == 0, "\(untruths.count) figures against the truth\n\(untruths.prefix(3).joined(separator: "\n\n"))")
        // The traces must cover what they are meant to.
        for feature in TraceGenerator.Feature.allCases {
            #expect(features[feature, default: 0] > 0, "no trace has \(feature)")
        }
        #expect(Set(qualities.keys) == Set(Quality.allCases) && events.wraps > 0 && events.resets > 0)
        #expect(events.recreations > 0 && events.deletions > 0 && saturated > 0)
        #expect(truthChecked > 5 * truthUnknown, "the truth is known for \(truthChecked) series, unknown for \(truthUnknown)")
    }

    /// ifmeter's namespace events among the generated traces: each trace
    /// with namespaces gets `namespace-entered` and `namespace-lost` events
    /// at random places, and the engine must still agree with the
    /// reference (the truth is not claimed: an instance entered anew is
    /// what the event says, not what the generator made).
    @Test func namespaceEventsAgreeWithTheReference() throws {
        var disagreements: [String] = []
        var inserted = 0
        for seed in UInt64(1)...UInt64(Self.traceCount / 3) {
            var generator = TraceGenerator(seed: seed)
            let trace = generator.generate()
            let namespaces = Set(Self.keys(in: trace.records).map { String(decoding: $0.netns, as: UTF8.self) }).filter { !$0.isEmpty }.sorted()
            guard !namespaces.isEmpty, !trace.records.isEmpty else { continue }
            var rng = SplitMix64(seed: seed &* 7919)
            var records = trace.records
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let at = Int.random(in: 0...records.count, using: &rng)
                let time = at < records.count ? records[at].time : records[records.count - 1].time
                let kind: NamespaceEvent.Kind = Int.random(in: 0..<4, using: &rng) == 0 ? .lost : .entered
                records.insert(.namespace(NamespaceEvent(time: time, netns: namespaces.randomElement(using: &rng)!, kind: kind)), at: at)
                inserted += 1
            }
            let configuration = trace.configuration
            if let difference = Self.difference(
                engine: Self.engineOutcomes(records, configuration), reference: Self.referenceOutcomes(records, configuration))
            {
                let small = Self.shrink(records, configuration)
                disagreements.append("seed \(seed): \(difference)\n\(Self.jsonLines(small, platform: trace.platform))")
            }
        }
        #expect(inserted > 500, "\(inserted) namespace events")
        #expect(disagreements.isEmpty, "\(disagreements.count) traces disagree\n\(disagreements.prefix(2).joined(separator: "\n\n"))")
    }

    // MARK: - Running both

    /// One interface's figures: the eight totals (0 when absent), quality,
    /// events (wraps, resets, recreations, deletions) and kind.
    struct Outcome: Equatable, CustomStringConvertible {
        var totals: [UInt64]
        var quality: Quality
        var events: [Int]
        var kind: InterfaceKind

        var description: String {
            "totals \(totals) \(quality.name) events \(events) \(kind.rawValue)"
        }
    }

    typealias Key = ReferenceMeter.Key

    static func engineOutcomes(_ records: [TraceRecord], _ configuration: EngineConfiguration) -> [Key: Outcome] {
        var engine = DeltaEngine(configuration: configuration)
        for record in records { engine.apply(record) }
        var result: [Key: Outcome] = [:]
        for i in engine.interfaces {
            result[Key(netns: i.netns, name: i.name)] = Outcome(
                totals: CounterKey.allCases.map { i.totals.value($0) }, quality: i.quality,
                events: [i.events.wraps, i.events.resets, i.events.recreations, i.events.deletions], kind: i.classification.kind)
        }
        return result
    }

    static func referenceOutcomes(_ records: [TraceRecord], _ configuration: EngineConfiguration) -> [Key: Outcome] {
        var meter = ReferenceMeter(configuration: configuration)
        for record in records { meter.apply(record) }
        return meter.series.mapValues { s in
            Outcome(
                totals: CounterKey.allCases.map { s.totals[$0] ?? 0 }, quality: s.quality,
                events: [s.wraps, s.resets, s.recreations, s.deletions], kind: s.kind)
        }
    }

    /// What differs, interface by interface; nil when nothing does.
    static func difference(engine: [Key: Outcome], reference: [Key: Outcome]) -> String? {
        var lines: [String] = []
        for key in Set(engine.keys).union(reference.keys).sorted() where engine[key] != reference[key] {
            lines.append(
                "\(key): engine \(engine[key].map(String.init(describing:)) ?? "absent"), reference \(reference[key].map(String.init(describing:)) ?? "absent")"
            )
        }
        return lines.isEmpty ? nil : lines.joined(separator: "\n")
    }

    static func jsonLines(_ records: [TraceRecord], platform: Platform) -> String {
        ([TraceWriter.headerLine(TraceHeader(platform: platform, source: "differential"))] + records.map(TraceWriter.line))
            .joined(separator: "\n")
    }

    // MARK: - Shrinking

    /// The smallest trace found that still disagrees: records dropped one at
    /// a time, interfaces dropped everywhere, readings dropped from samples,
    /// while a disagreement persists.
    static func shrink(_ records: [TraceRecord], _ configuration: EngineConfiguration) -> [TraceRecord] {
        func disagrees(_ candidate: [TraceRecord]) -> Bool {
            difference(engine: engineOutcomes(candidate, configuration), reference: referenceOutcomes(candidate, configuration)) != nil
        }
        var current = records
        var shrunk = true
        while shrunk {
            shrunk = false
            var n = 0
            while n < current.count {
                var candidate = current
                candidate.remove(at: n)
                if disagrees(candidate) {
                    current = candidate
                    shrunk = true
                } else {
                    n += 1
                }
            }
            for key in keys(in: current) {
                let candidate = dropping(key, from: current)
                if candidate != current, disagrees(candidate) {
                    current = candidate
                    shrunk = true
                }
            }
            for n in current.indices {
                guard case .sample(let sample) = current[n] else { continue }
                var kept = sample
                var j = 0
                while j < kept.interfaces.count {
                    var fewer = kept
                    fewer.interfaces.remove(at: j)
                    var candidate = current
                    candidate[n] = .sample(fewer)
                    if disagrees(candidate) {
                        current = candidate
                        kept = fewer
                        shrunk = true
                    } else {
                        j += 1
                    }
                }
            }
        }
        return current
    }

    static func keys(in records: [TraceRecord]) -> [Key] {
        var keys = Set<Key>()
        for record in records {
            switch record {
            case .sample(let sample): for i in sample.interfaces { keys.insert(Key(netns: i.netns, name: i.name)) }
            case .deleted(let event): keys.insert(Key(netns: event.interface.netns, name: event.interface.name))
            case .renamed(let event):
                keys.insert(Key(netns: event.netns, name: event.from))
                keys.insert(Key(netns: event.netns, name: event.to))
            case .namespace: break
            }
        }
        return keys.sorted()
    }

    static func dropping(_ key: Key, from records: [TraceRecord]) -> [TraceRecord] {
        records.compactMap { record in
            switch record {
            case .sample(var sample):
                sample.interfaces.removeAll { Key(netns: $0.netns, name: $0.name) == key }
                return .sample(sample)
            case .deleted(let event):
                return Key(netns: event.interface.netns, name: event.interface.name) == key ? nil : record
            case .renamed(let event):
                return Key(netns: event.netns, name: event.from) == key || Key(netns: event.netns, name: event.to) == key ? nil : record
            case .namespace:
                return record
            }
        }
    }
}

// MARK: - The reference

/// trace-v1.md (v1, v1.1, v1.2, v1.3) and ifmeter's `renamed` event, written a
/// second time to be read rather than to be fast: a dictionary of series by
/// (netns, name) as code points, dictionaries of counters, plain loops, the
/// contract's rules in the contract's order.
struct ReferenceMeter {
    /// A series' key: the namespace and the name as code points (UTF-8
    /// bytes), compared and sorted as such.
    struct Key: Hashable, Comparable, CustomStringConvertible {
        var netns: [UInt8]
        var name: [UInt8]

        init(netns: String, name: String) {
            self.netns = Array(netns.utf8)
            self.name = Array(name.utf8)
        }

        static func < (a: Key, b: Key) -> Bool {
            a.netns != b.netns ? a.netns.lexicographicallyPrecedes(b.netns) : a.name.lexicographicallyPrecedes(b.name)
        }

        var description: String {
            let name = String(decoding: self.name, as: UTF8.self).unicodeScalars.map {
                $0.isASCII ? String($0) : "\\u{\(String($0.value, radix: 16))}"
            }.joined()
            return netns.isEmpty ? name : String(decoding: netns, as: UTF8.self) + "/" + name
        }
    }

    struct Series {
        var kind: InterfaceKind
        var totals: [CounterKey: UInt64] = [:]
        var quality = Quality.exact
        var wraps = 0, resets = 0, recreations = 0, deletions = 0
        /// The index of the series' instance, as far as known (from its
        /// last sample, or the event that named it).
        var index: Int?
        /// The last sampled instance's counters and time; nil until a
        /// sample shows the series.
        var last: [CounterKey: UInt64]?
        var lastTime = 0.0
        /// The last instance known was ended by a deletion event, whose
        /// index (nil: unknown) this is.
        var ended = false
        var endedIndex: Int?
        /// The instance a recreation without an event replaced (rule 4): its
        /// index, and its last counters until its deletion came.
        var replacedIndex: Int?
        var replacedCounters: [CounterKey: UInt64]?
        /// Its namespace was entered anew after its instance ended.
        var renewed = false
        /// v1.3: each instance a deletion ended, by index, with its four
        /// final counters; the newest 16.
        var endedFinals: [(index: Int, finals: [UInt64])] = []

        mutating func rememberEnded(_ index: Int?, _ fin: [CounterKey: UInt64]) {
            guard let index else { return }
            endedFinals = endedFinals.filter { $0.index != index } + [(index, CounterKey.required.map { fin[$0] ?? 0 })]
            if endedFinals.count > 16 { endedFinals = Array(endedFinals.suffix(16)) }
        }
    }

    let configuration: EngineConfiguration
    var series: [Key: Series] = [:]
    var sawSample = false

    init(configuration: EngineConfiguration) { self.configuration = configuration }

    mutating func apply(_ record: TraceRecord) {
        switch record {
        case .sample(let sample): apply(sample)
        case .deleted(let event): apply(event)
        case .renamed(let event): apply(event)
        case .namespace(let event): apply(event)
        }
    }

    // MARK: Namespace events (ifmeter's own)

    /// Namespaces with an instance lost: their series are lower bounds, and
    /// so is any made later.
    var lost: Set<[UInt8]> = []

    /// Entered: an ended series of the namespace takes its next deletion
    /// as a new instance, whatever the index. Lost: every series of the
    /// namespace is a lower bound, now and when made.
    mutating func apply(_ event: NamespaceEvent) {
        let netns = Array(event.netns.utf8)
        for (key, var s) in series where key.netns == netns {
            switch event.kind {
            case .entered:
                if s.ended { s.renewed = true }
                s.endedFinals = []
            case .lost: s.quality = .lowerBound
            }
            series[key] = s
        }
        if event.kind == .lost { lost.insert(netns) }
    }

    /// A new series: a lower bound from the start in a lost namespace.
    func made(_ key: Key, kind: InterfaceKind, index: Int? = nil) -> Series {
        var s = Series(kind: kind, index: index)
        if lost.contains(key.netns) { s.quality = .lowerBound }
        return s
    }

    static func counters(_ c: Counters) -> [CounterKey: UInt64] {
        var result: [CounterKey: UInt64] = [:]
        for key in CounterKey.allCases { if let v = c[key] { result[key] = v } }
        return result
    }

    func kind(_ i: InterfaceSample) -> InterfaceKind {
        i.classification?.kind ?? NameRules.classify(i.name, platform: configuration.platform).kind
    }

    static func add(_ delta: [CounterKey: UInt64], to s: inout Series, quality: Quality) {
        var quality = quality
        for (key, value) in delta {
            let (sum, overflow) = s.totals[key, default: 0].addingReportingOverflow(value)
            if overflow {
                // Stops at 2^64-1, a lower bound (v1.1).
                s.totals[key] = UInt64.max
                quality = .lowerBound
            } else {
                s.totals[key] = sum
            }
        }
        if quality > s.quality { s.quality = quality }
    }

    // MARK: Samples: rules 1 to 6, v1.2

    mutating func apply(_ sample: Sample) {
        let isFirst = !sawSample
        sawSample = true
        for reading in sample.interfaces {
            let key = Key(netns: reading.netns, name: reading.name)
            let cur = Self.counters(reading.counters)
            var s = series[key] ?? made(key, kind: kind(reading))
            var delta: [CounterKey: UInt64]
            var quality = Quality.exact
            if isFirst {
                // Rule 1: the baseline counts nothing.
                delta = cur.mapValues { _ in 0 }
            } else if s.ended {
                // The first sample after an instance was ended: a new one,
                // in full, exact, one recreation (v1.1).
                delta = cur
                s.recreations += 1
            } else if let last = s.last {
                if let old = s.index, let new = reading.index, old != new {
                    // Rule 4 without an event: the new instance in full, the
                    // old one's last traffic unknown.
                    delta = cur
                    quality = .lowerBound
                    s.recreations += 1
                    s.replacedIndex = old
                    s.replacedCounters = last
                } else {
                    // Rules 3 and 5 (and 6: against the last sample, however old).
                    (delta, quality) = compare(last, cur, s: &s, reading: reading, seconds: sample.time - s.lastTime)
                }
            } else {
                // Rule 2: first seen after the baseline (or named only by an
                // event so far): created since, in full.
                delta = cur
            }
            Self.add(delta, to: &s, quality: quality)
            s.kind = kind(reading)
            s.index = reading.index
            if let index = reading.index { s.endedFinals = s.endedFinals.filter { $0.index != index } }
            s.last = cur
            s.lastTime = sample.time
            s.ended = false
            s.endedIndex = nil
            s.renewed = false
            series[key] = s
        }
    }

    /// Rules 3 and 5 with v1.2.
    func compare(
        _ prev: [CounterKey: UInt64], _ cur: [CounterKey: UInt64], s: inout Series, reading: InterfaceSample, seconds dt: Double
    ) -> ([CounterKey: UInt64], Quality) {
        let top: UInt64 = 1 << 32
        var r = configuration.defaultMaxBytesPerSecond
        if let speed = reading.speedBps, speed > 0 { r = Double(speed) / 8 }
        var delta: [CounterKey: UInt64] = [:]
        var wentDown: [CounterKey] = []
        for key in CounterKey.allCases {
            guard let new = cur[key] else { continue }
            guard let old = prev[key] else {
                delta[key] = 0 // nothing to compare with
                continue
            }
            if new < old { wentDown.append(key) } else { delta[key] = new - old }
        }
        var quality = Quality.exact
        if !wentDown.isEmpty {
            var allWrap = reading.width == .bits32 // a 64-bit counter never wraps
            for key in wentDown {
                let old = prev[key]!, new = cur[key]!
                if old >= top || new >= top {
                    allWrap = false // cannot wrap at 32 bits
                    continue
                }
                let wrapped = new + top - old
                let rate = key == .rxBytes || key == .txBytes ? r : r / 40
                if Double(wrapped) > rate * dt * 1.25 { allWrap = false }
            }
            if allWrap {
                for key in wentDown { delta[key] = cur[key]! + top - prev[key]! }
                s.wraps += 1
                quality = .wrapCorrected
            } else {
                // v1.2: what went down restarted and counts cur; the rest
                // subtracted plainly above.
                for key in wentDown { delta[key] = cur[key]! }
                s.resets += 1
                quality = .lowerBound
            }
        }
        // v1.2: a 32-bit gap that could hide a whole wrap.
        if reading.width == .bits32, r * dt * 1.25 >= 4_294_967_296 { quality = .lowerBound }
        return (delta, quality)
    }

    // MARK: Deletion events: v1.1 "in every order"

    mutating func apply(_ event: DeletionEvent) {
        let final = event.interface
        let key = Key(netns: final.netns, name: final.name)
        let fin = Self.counters(final.counters)
        guard sawSample else {
            // Before the first sample: the baseline's; the name is seen.
            if series[key] == nil { series[key] = made(key, kind: kind(final), index: final.index) }
            return
        }
        let listedQuality: Quality = event.lowerBound.isEmpty ? .exact : .lowerBound
        func same(_ a: Int?, _ b: Int?) -> Bool { a == nil || b == nil || a == b }
        func counted(_ s: inout Series) {
            s.deletions += 1
            if let k = final.classification?.kind { s.kind = k }
        }

        guard var s = series[key] else {
            // Never sampled: born and gone between samples, in full.
            var s = made(key, kind: kind(final), index: final.index)
            counted(&s)
            Self.add(fin, to: &s, quality: listedQuality)
            s.ended = true
            s.endedIndex = final.index
            s.rememberEnded(final.index, fin)
            series[key] = s
            return
        }
        if !s.ended, let last = s.last, same(s.index, final.index) {
            // Ends the last sampled instance: final - prev; a final below
            // prev (or listed and below) adds 0 and is a lower bound; a
            // final counter with no prev to compare adds 0 (never in full).
            var delta: [CounterKey: UInt64] = [:]
            var quality = listedQuality
            for (k, v) in fin {
                guard let old = last[k] else {
                    delta[k] = 0
                    continue
                }
                if v >= old {
                    delta[k] = v - old
                } else {
                    delta[k] = 0
                    quality = .lowerBound
                }
            }
            counted(&s)
            Self.add(delta, to: &s, quality: quality)
            s.ended = true
            s.endedIndex = final.index ?? s.index
            s.rememberEnded(s.endedIndex, fin)
            s.renewed = false
        } else if let index = final.index, s.replacedIndex == index {
            // The instance a rule-4 recreation replaced; once.
            guard let old = s.replacedCounters else { return }
            var delta: [CounterKey: UInt64] = [:]
            for (k, v) in fin { delta[k] = v > (old[k] ?? v) ? v - old[k]! : 0 }
            counted(&s)
            Self.add(delta, to: &s, quality: .lowerBound)
            s.replacedCounters = nil
            s.rememberEnded(index, fin)
        } else if let index = final.index, let remembered = s.endedFinals.last(where: { $0.index == index }) {
            // v1.3: an instance ended before; the same finals are a repeat,
            // others cannot be placed.
            if remembered.finals == CounterKey.required.map({ fin[$0] ?? 0 }) { return }
            counted(&s)
            Self.add([:], to: &s, quality: .lowerBound)
        } else if s.ended, !s.renewed, same(s.endedIndex, final.index) {
            return // a repeat
        } else if s.ended || s.last == nil {
            // Another instance born and gone between samples, in full.
            if s.ended { s.recreations += 1 }
            counted(&s)
            Self.add(fin, to: &s, quality: listedQuality)
            s.ended = true
            s.endedIndex = final.index
            s.rememberEnded(final.index, fin)
            s.renewed = false
        } else {
            // Cannot be placed: no counters, a lower bound.
            counted(&s)
            Self.add([:], to: &s, quality: .lowerBound)
        }
        series[key] = s
    }

    // MARK: Renames (ifmeter's own event)

    /// The interface goes on under its new name, and so does its series.
    /// When the new name has a series already (an earlier instance, gone),
    /// that one goes on with the renamed instance's last counters, keeps
    /// what it counted, and is a lower bound if its own instance was not
    /// seen to end; the old name's series keeps what it counted and is
    /// ended.
    mutating func apply(_ rename: RenameEvent) {
        let from = Key(netns: rename.netns, name: rename.from), to = Key(netns: rename.netns, name: rename.to)
        guard from != to, var s = series[from], !s.ended else { return }
        if let known = s.index, let index = rename.index, known != index { return }
        guard var other = series[to] else {
            series[from] = nil
            series[to] = s
            return
        }
        if !other.ended, other.last != nil { other.quality = .lowerBound }
        other.last = s.last
        other.lastTime = s.lastTime
        other.index = s.index
        other.ended = false
        other.endedIndex = nil
        if s.last != nil {
            // Named only by a deletion before the first sample, it had no
            // instance to end.
            s.ended = true
            s.endedIndex = s.index
        }
        series[from] = s
        series[to] = other
    }
}
