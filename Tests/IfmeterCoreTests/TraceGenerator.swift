import IfmeterCore
import IfmeterTestSupport

/// Traces for the differential check, from a seed (SplitMix64, so a seed
/// gives the same trace every time): a small world of interfaces in one to
/// three namespaces, 32- and 64-bit, with and without a link speed, an
/// index, a kind or extra counters, whose traffic, resets, recreations,
/// deletions and renames it plays out in time. It writes the records a
/// recorder would see, in the orders a recorder can see them: deletion
/// events before the first sample, late, repeated, or never; samples that
/// leave interfaces out, or their index, or an extra counter.
///
/// It keeps the truth: per series, the traffic that really went through it
/// up to the last record that showed it (what comes after that no reader
/// can know). It claims that truth only where the contract can know it:
/// a series is marked unknown from the moment the generator did something
/// no reader of the trace could tell from something else (a reset that
/// reads as a wrap or as growth, a recreation with no index to show it, a
/// 32-bit counter counted in full after it wrapped, a deletion that cannot
/// be told from another instance's, ...).
struct TraceGenerator {
    typealias Key = ReferenceMeter.Key

    /// What a trace holds, to check that the traces cover what they must.
    enum Feature: String, CaseIterable, Sendable {
        case width32, width64, wrap32, gapThatCouldHideAWrap, reset, resetOfAnExtraAlone
        case recreationWithEvent, recreationWithoutEvent, indexReused
        case eventBeforeFirstSample, eventRepeated, eventForAnInstanceNeverSampled, eventForTheReplacedInstance
        case eventThatCannotBePlaced, eventAfterTheNextSample, finalListedLowerBound, finalBelowPrev
        case absence, namespaces, rename, renameOntoAnExistingName, speed, missingIndex, nearTheTopOf64Bits
        case darwin, omittedExtra, widthSwitch, zeroGap, reordered, codePointNames
    }

    struct Truth {
        var counters = [UInt64](repeating: 0, count: 8)
        /// The generator can vouch for the figures.
        var known = true
        /// ... and for the extra counters (false once a reading left one out).
        var extrasKnown = true

        mutating func add(_ traffic: [UInt64]) {
            for n in counters.indices {
                let (sum, overflow) = counters[n].addingReportingOverflow(traffic[n])
                counters[n] = overflow ? UInt64.max : sum
            }
        }
    }

    struct Trace {
        var platform: Platform
        var configuration: EngineConfiguration
        var records: [TraceRecord]
        var truth: [Key: Truth]
        var features: Set<Feature>
    }

    enum IndexMode { case always, never, sometimes }
    enum Policy { case prompt, late, never }

    /// One instance of an interface (a kernel object, with its index).
    struct Instance {
        var id: Int
        var netns: String
        var name: String
        var index: Int
        var indexMode: IndexMode
        var width: CounterWidth
        var speed: UInt64?
        var kind: InterfaceKind?
        var keys: [CounterKey]
        /// What the counters show (at the width), and the true traffic:
        /// since the last record that showed the instance, since it was
        /// created, and since its last sample.
        var kernel = [UInt64](repeating: 0, count: 8)
        var pending = [UInt64](repeating: 0, count: 8)
        var cumulative = [UInt64](repeating: 0, count: 8)
        var sinceSample = [UInt64](repeating: 0, count: 8)
        /// Counters restarted since the last sample.
        var resetKeys = Set<CounterKey>()
        var lastSample: [CounterKey: UInt64]?
        var lastSampleTime = 0.0
        var alive = true
        /// A record showed it.
        var observed = false
        var skipNext = false, hideIndexNext = false, resetLate = false
        var omitNext: CounterKey?

        var key: Key { Key(netns: netns, name: name) }
    }

    /// What the records said of a series so far, as far as the truth needs.
    struct KeyState {
        var lastSampled: Int?
        var lastReadingIndex: Int?
        var ended = false
        var endedIndex: Int?
        var replaced: Int?
        var replacedIndex: Int?
        var replacedDone = false
    }

    struct PendingEvent {
        var instance: Int
        var interface: InterfaceSample
        var listed: CounterKeySet
        /// Counters written below their true final value.
        var modified: Set<CounterKey>
    }

    var rng: SplitMix64
    let platform: Platform
    let configuration: EngineConfiguration
    let namespaces: [String]
    let names: [String]
    var records: [TraceRecord] = []
    var truth: [Key: Truth] = [:]
    var keys: [Key: KeyState] = [:]
    var features = Set<Feature>()
    var instances: [Instance] = []
    var events: [PendingEvent] = []
    var prompt: [Int] = []
    var scheduled: [(due: Int, event: Int, isRepeat: Bool)] = []
    var nextIndex: [String: Int] = [:]
    var started = false
    var lastSampleTime = 0.0
    var interval = 0

    init(seed: UInt64) {
        var r = SplitMix64(seed: seed)
        platform = Double.random(in: 0..<1, using: &r) < 0.1 ? .darwin : .linux
        let ceilings = [1.25e9, 1.25e9, 1.25e9, 1.25e9, 1.25e9, 1.25e9, 1e8, 1e6]
        configuration = EngineConfiguration(defaultMaxBytesPerSecond: ceilings[Int.random(in: 0..<ceilings.count, using: &r)], platform: platform)
        let spaces = Int.random(in: 0..<10, using: &r)
        namespaces = spaces < 6 ? [""] : spaces < 9 ? ["", "ctr-1"] : ["", "ctr-1", "ctr-2"]
        names =
            platform == .darwin
            ? ["en0", "en5", "lo0", "utun3", "utun4", "pdp_ip0", "awdl0", "gif0", "bridge0"]
            : [
                "eth0", "eth1", "enp3s0", "wlan0", "wlp2s0", "tun0", "tun1", "wg0", "veth1", "wwan0", "lo", "docker0",
                "br-lan", "usb0", "tun\u{e9}", "tune\u{301}",
            ]
        rng = r
    }

    // MARK: - Chance

    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func u64(_ range: ClosedRange<UInt64>) -> UInt64 { UInt64.random(in: range, using: &rng) }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...items.count - 1)] }

    // MARK: - The world

    func rate(_ x: Instance) -> Double {
        if let speed = x.speed, speed > 0 { return Double(speed) / 8 }
        return configuration.defaultMaxBytesPerSecond
    }

    var alive: [Int] { instances.indices.filter { instances[$0].alive } }

    /// A name no live instance holds in `netns`: a known series' (its
    /// instance gone) when `known`, else one never used if there is one.
    mutating func freeName(in netns: String, known: Bool) -> String? {
        let space = Array(netns.utf8)
        let live = Set(instances.lazy.filter { $0.alive && $0.netns == netns }.map { Array($0.name.utf8) })
        if known {
            let gone = keys.keys.filter { $0.netns == space && !live.contains($0.name) }.sorted()
            if !gone.isEmpty { return String(decoding: pick(gone).name, as: UTF8.self) }
        }
        let free = names.filter { !live.contains(Array($0.utf8)) }
        let unused = free.filter { keys[Key(netns: netns, name: $0)] == nil }
        if !unused.isEmpty { return pick(unused) }
        return free.isEmpty ? nil : pick(free)
    }

    enum Start { case initial, fresh }

    @discardableResult
    mutating func newInstance(netns: String, name: String, start: Start, index reused: Int? = nil) -> Int {
        let width: CounterWidth = chance(platform == .darwin ? 0.9 : 0.35) ? .bits32 : .bits64
        features.insert(width == .bits32 ? .width32 : .width64)
        var speed: UInt64?
        if chance(0.35) {
            speed = pick([1_000_000_000, 100_000_000, 10_000_000, 8000, 0])
            features.insert(.speed)
        }
        let kind: InterfaceKind? = chance(0.25) ? pick(InterfaceKind.allCases) : nil
        var keys = CounterKey.required
        if chance(0.5) { keys += CounterKey.extras.filter { _ in chance(0.4) } }
        let mode: IndexMode = chance(0.88) ? .always : chance(0.4) ? .never : .sometimes
        let index: Int
        if let reused {
            index = reused
        } else {
            index = nextIndex[netns] ?? int(1...40)
            nextIndex[netns] = index + int(1...3)
        }
        var x = Instance(
            id: instances.count, netns: netns, name: name, index: index, indexMode: mode, width: width, speed: speed,
            kind: kind, keys: keys)
        for key in keys {
            let n = key.rawValue
            switch start {
            case .initial:
                if key.countsBytes || CounterKey.required.contains(key) {
                    if width == .bits32 {
                        x.kernel[n] =
                            chance(0.5) ? UInt64(UInt32.max) - u64(0...(key.countsBytes ? 3_000_000_000 : 2_000_000)) : u64(0...UInt64(UInt32.max))
                    } else {
                        x.kernel[n] = chance(0.06) ? UInt64.max - u64(0...5_000_000_000) : u64(0...(1 << 40))
                    }
                } else {
                    x.kernel[n] = u64(0...1000)
                }
            case .fresh:
                if width == .bits64, key.countsBytes || CounterKey.required.contains(key), chance(0.04) {
                    // Born with traffic near the top: totals will stop at 2^64-1.
                    x.kernel[n] = UInt64.max - u64(0...5_000_000_000)
                    features.insert(.nearTheTopOf64Bits)
                }
            }
        }
        if start == .fresh {
            x.cumulative = x.kernel
            x.pending = x.kernel
        }
        instances.append(x)
        return x.id
    }

    mutating func amount(_ cap: Double, level: Int) -> UInt64 {
        let top = min(cap, 1e15)
        guard top >= 1, level > 0 else { return 0 }
        return level < 4 ? u64(0...UInt64(min(top, 5000))) : u64(0...UInt64(top))
    }

    /// Traffic at up to the ceiling the contract assumes (so a real wrap
    /// is always a plausible one).
    mutating func traffic(_ id: Int, seconds: Double) {
        guard seconds > 0 else { return }
        let x = instances[id]
        let r = rate(x)
        let level = int(0...9)
        var v = [UInt64](repeating: 0, count: 8)
        v[0] = amount(r * seconds, level: level)
        v[1] = amount(r * seconds, level: level)
        v[2] = amount(r / 40 * seconds, level: level)
        v[3] = amount(r / 40 * seconds, level: level)
        for key in x.keys where !CounterKey.required.contains(key) { v[key.rawValue] = amount(min(r / 40 * seconds, 200), level: level) }
        push(id, v)
    }

    mutating func push(_ id: Int, _ v: [UInt64]) {
        func saturating(_ a: UInt64, _ b: UInt64) -> UInt64 {
            let (sum, overflow) = a.addingReportingOverflow(b)
            return overflow ? .max : sum
        }
        for key in instances[id].keys {
            let n = key.rawValue
            let before = instances[id].kernel[n]
            if instances[id].width == .bits32 {
                let sum = before + v[n]
                if sum > UInt64(UInt32.max) { features.insert(.wrap32) }
                instances[id].kernel[n] = sum & 0xFFFF_FFFF
            } else {
                instances[id].kernel[n] = before &+ v[n]
            }
            instances[id].pending[n] = saturating(instances[id].pending[n], v[n])
            instances[id].cumulative[n] = saturating(instances[id].cumulative[n], v[n])
            instances[id].sinceSample[n] = saturating(instances[id].sinceSample[n], v[n])
        }
    }

    mutating func unknown(_ key: Key) { truth[key, default: Truth()].known = false }

    /// A counter restarts now, or just before the coming sample.
    mutating func resetSoon(_ id: Int) {
        if chance(0.5) { instances[id].resetLate = true } else { reset(id) }
    }

    /// A counter restarts (a driver reset, or one that clears its error
    /// statistics only).
    mutating func reset(_ id: Int) {
        let x = instances[id]
        var chosen: [CounterKey]
        if x.keys.contains(.rxErrors), chance(0.4) {
            chosen = [.rxErrors]
            features.insert(.resetOfAnExtraAlone)
        } else if chance(0.5) {
            chosen = x.keys
        } else {
            chosen = x.keys.filter { _ in chance(0.5) }
            if chosen.isEmpty { chosen = [.rxBytes] }
        }
        for key in chosen { instances[id].kernel[key.rawValue] = 0 }
        instances[id].resetKeys.formUnion(chosen)
        features.insert(.reset)
    }

    /// The source changes from 64 to 32 bits (what no counter can say).
    mutating func switchWidth(_ id: Int) {
        guard instances[id].width == .bits64 else { return }
        instances[id].width = .bits32
        for n in instances[id].kernel.indices { instances[id].kernel[n] &= 0xFFFF_FFFF }
        unknown(instances[id].key)
        features.insert(.widthSwitch)
    }

    mutating func policy() -> Policy {
        let roll = int(0...99)
        return roll < 55 ? .prompt : roll < 80 ? .late : .never
    }

    func readingIndex(_ x: Instance, hidden: Bool) -> Int? {
        switch x.indexMode {
        case .always: x.index
        case .never: nil
        case .sometimes: hidden ? nil : x.index
        }
    }

    /// The instance is deleted; its event (final counters) comes as `policy` says.
    mutating func kill(_ id: Int, policy: Policy) {
        instances[id].alive = false
        let x = instances[id]
        var values = x.kernel
        var listed = CounterKeySet(), modified = Set<CounterKey>()
        if chance(0.12) {
            // The kernel under-reports these (a veth's receive counters).
            for key in chance(0.5) ? [CounterKey.rxBytes, .rxPackets] : [.rxBytes] {
                listed.insert(key)
                let low = u64(0...values[key.rawValue])
                if low != values[key.rawValue] { modified.insert(key) }
                values[key.rawValue] = low
            }
            features.insert(.finalListedLowerBound)
        } else if let last = x.lastSample, chance(0.08),
            let key = x.keys.filter({ (last[$0] ?? 0) > 0 }).first
        {
            values[key.rawValue] = u64(0...(last[key]! - 1))
            modified.insert(key)
            features.insert(.finalBelowPrev)
        }
        var counters = Counters()
        for key in x.keys { counters[key] = values[key.rawValue] }
        let index = readingIndex(x, hidden: x.indexMode == .sometimes && chance(0.3))
        let interface = InterfaceSample(
            name: x.name, netns: x.netns, index: index, classification: x.kind.map { Classification(kind: $0, evidence: "trace:kind") },
            width: x.width, speedBps: x.speed, counters: counters)
        events.append(PendingEvent(instance: id, interface: interface, listed: listed, modified: modified))
        switch policy {
        case .prompt: prompt.append(events.count - 1)
        case .late: scheduled.append((due: interval + int(0...1), event: events.count - 1, isRepeat: false))
        case .never: break
        }
    }

    /// Deleted and created again under the same name (a tun reopened).
    mutating func recreate(_ id: Int) {
        let x = instances[id]
        let p = policy()
        kill(id, policy: p)
        if p == .prompt { features.insert(.recreationWithEvent) }
        if chance(0.25) {
            // One more instance born and gone before the next one.
            let z = newInstance(netns: x.netns, name: x.name, start: .fresh)
            traffic(z, seconds: 1)
            kill(z, policy: chance(0.5) ? .prompt : .late)
        }
        let reuse = p == .prompt && chance(0.15)
        if reuse { features.insert(.indexReused) }
        newInstance(netns: x.netns, name: x.name, start: .fresh, index: reuse ? x.index : nil)
    }

    mutating func bornAndGone() {
        let netns = pick(namespaces)
        guard let name = freeName(in: netns, known: chance(0.5)) else { return }
        let z = newInstance(netns: netns, name: name, start: .fresh)
        traffic(z, seconds: Double(int(1...40)) / 8)
        kill(z, policy: chance(0.7) ? .prompt : .late)
    }

    mutating func appear() {
        let netns = pick(namespaces)
        guard let name = freeName(in: netns, known: chance(0.4)) else { return }
        newInstance(netns: netns, name: name, start: .fresh)
    }

    /// Renamed while it was in the last sample and before any traffic since
    /// (so no byte is in doubt between the two names), to a name no live
    /// instance holds.
    mutating func rename(_ id: Int, at time: Double) {
        let x = instances[id]
        let from = x.key
        guard started, x.lastSample != nil, x.lastSampleTime == lastSampleTime, x.pending.allSatisfy({ $0 == 0 }),
            let state = keys[from], state.lastSampled == id, !state.ended, truth[from]?.known != false,
            let target = freeName(in: x.netns, known: chance(0.5)), target != x.name
        else { return }
        let to = Key(netns: x.netns, name: target)
        records.append(
            .renamed(
                RenameEvent(
                    time: time, netns: x.netns, index: readingIndex(x, hidden: chance(0.5)), from: x.name, to: target)))
        features.insert(.rename)
        if var other = keys[to] {
            // An earlier series under the new name goes on with this instance.
            features.insert(.renameOntoAnExistingName)
            other.lastSampled = id
            other.lastReadingIndex = state.lastReadingIndex
            other.ended = false
            other.endedIndex = nil
            keys[to] = other
            var old = state
            old.ended = true
            old.endedIndex = state.lastReadingIndex
            keys[from] = old
            if truth[from]?.extrasKnown == false { truth[to, default: Truth()].extrasKnown = false }
        } else {
            keys[to] = state
            keys[from] = nil
            truth[to] = truth[from] ?? Truth()
            truth[from] = nil
        }
        instances[id].name = target
    }

    // MARK: - Records, and what they let the contract know

    func fullCountIsTrue(_ x: Instance, listed: CounterKeySet = []) -> Bool {
        if x.observed { return false }
        if !listed.isEmpty { return true } // a lower bound: never above the truth
        return x.keys.allSatisfy { x.kernel[$0.rawValue] == x.cumulative[$0.rawValue] }
    }

    /// Rule 5 as the contract reads it: some counter went down, and not
    /// every one that did is a plausible wrap.
    func contractSeesReset(_ x: Instance, _ cur: [CounterKey: UInt64], at now: Double) -> Bool {
        guard let prev = x.lastSample else { return true }
        let down = CounterKey.allCases.filter { key in
            guard let new = cur[key], let old = prev[key] else { return false }
            return new < old
        }
        if down.isEmpty { return false }
        if x.width == .bits64 { return true }
        let r = rate(x), dt = now - x.lastSampleTime
        return down.contains { key in
            let old = prev[key]!, new = cur[key]!
            if old > UInt64(UInt32.max) { return true }
            return Double(new + (1 << 32) - old) > (key.countsBytes ? r : r / 40) * dt * 1.25
        }
    }

    mutating func commit(_ id: Int, to key: Key) {
        if started { truth[key, default: Truth()].add(instances[id].pending) }
        instances[id].pending = [UInt64](repeating: 0, count: 8)
        instances[id].observed = true
    }

    mutating func emitSample(at t: Double) {
        var list: [(id: Int, reading: InterfaceSample)] = []
        for id in alive {
            if started, instances[id].skipNext {
                features.insert(.absence)
                continue
            }
            let x = instances[id]
            let index = readingIndex(x, hidden: x.hideIndexNext)
            if index == nil { features.insert(.missingIndex) }
            var counters = Counters()
            for key in x.keys where key != x.omitNext { counters[key] = x.kernel[key.rawValue] }
            if x.omitNext != nil { features.insert(.omittedExtra) }
            list.append(
                (
                    id,
                    InterfaceSample(
                        name: x.name, netns: x.netns, index: index, classification: x.kind.map { Classification(kind: $0, evidence: "trace:kind") },
                        width: x.width, speedBps: x.speed, counters: counters)
                ))
        }
        if list.count > 1, chance(0.2) {
            list.shuffle(using: &rng)
            features.insert(.reordered)
        }
        records.append(.sample(Sample(time: t, interfaces: list.map(\.reading))))
        for (id, reading) in list { observe(sampleOf: id, reading: reading, at: t) }
        lastSampleTime = t
        started = true
        for id in alive {
            instances[id].skipNext = chance(0.1)
            instances[id].hideIndexNext = instances[id].indexMode == .sometimes && chance(0.4)
            let extras = instances[id].keys.filter { !CounterKey.required.contains($0) }
            instances[id].omitNext = !extras.isEmpty && chance(0.05) ? pick(extras) : nil
        }
    }

    mutating func observe(sampleOf id: Int, reading: InterfaceSample, at now: Double) {
        let x = instances[id]
        let key = x.key
        let cur = ReferenceMeter.counters(reading.counters)
        if truth[key] == nil { truth[key] = Truth() }
        var state = keys[key] ?? KeyState()
        if !started {
            // The baseline: nothing before it counts.
        } else if state.lastSampled == nil || state.ended {
            // In full: new, or after an instance seen to end.
            if !fullCountIsTrue(x) { unknown(key) }
        } else if state.lastSampled == id {
            if !x.resetKeys.isEmpty, !contractSeesReset(x, cur, at: now) { unknown(key) }
            if x.width == .bits32, rate(x) * (now - x.lastSampleTime) * 1.25 >= 4_294_967_296 { features.insert(.gapThatCouldHideAWrap) }
        } else if let was = state.lastReadingIndex, let index = reading.index, was != index {
            // Rule 4: another index, no event; a lower bound.
            if !fullCountIsTrue(x) { unknown(key) }
            state.replaced = state.lastSampled
            state.replacedIndex = was
            state.replacedDone = false
            features.insert(.recreationWithoutEvent)
        } else {
            unknown(key) // another instance, and nothing to tell it by
        }
        if cur.count != x.keys.count { truth[key, default: Truth()].extrasKnown = false }
        commit(id, to: key)
        state.lastSampled = id
        state.lastReadingIndex = reading.index
        state.ended = false
        state.endedIndex = nil
        keys[key] = state
        instances[id].lastSample = cur
        instances[id].lastSampleTime = now
        instances[id].sinceSample = [UInt64](repeating: 0, count: 8)
        instances[id].resetKeys = []
    }

    mutating func emit(event n: Int, at t: Double, isRepeat: Bool) {
        let e = events[n]
        records.append(.deleted(DeletionEvent(time: t, interface: e.interface, lowerBound: e.listed)))
        observe(event: n, isRepeat: isRepeat)
        if !isRepeat, chance(0.12) {
            if chance(0.5) {
                records.append(.deleted(DeletionEvent(time: t, interface: e.interface, lowerBound: e.listed)))
                observe(event: n, isRepeat: true)
            } else {
                scheduled.append((due: interval, event: n, isRepeat: true))
            }
        }
    }

    /// A deletion's final counters, ending the sampled instance: whether
    /// final - prev is the traffic since (or a lower bound).
    func endIsTrue(_ e: PendingEvent, _ x: Instance) -> Bool {
        guard x.resetKeys.isEmpty, let prev = x.lastSample else { return false }
        for key in x.keys where !e.listed.contains(key) && !e.modified.contains(key) {
            guard let old = prev[key] else { continue } // extras already unknown
            let final = x.kernel[key.rawValue]
            if final >= old, final - old != x.sinceSample[key.rawValue] { return false }
        }
        return true
    }

    /// A deletion event, in the contract's order of cases (v1.1, "in every
    /// order"): what it adds, and whether that is the truth.
    mutating func observe(event n: Int, isRepeat: Bool) {
        let e = events[n]
        let x = instances[e.instance]
        let key = Key(netns: e.interface.netns, name: e.interface.name)
        let index = e.interface.index
        if truth[key] == nil { truth[key] = Truth() }
        guard started else {
            if keys[key] == nil { keys[key] = KeyState() }
            features.insert(.eventBeforeFirstSample)
            return
        }
        if isRepeat { features.insert(.eventRepeated) }
        func same(_ a: Int?, _ b: Int?) -> Bool { a == nil || b == nil || a == b }
        var state = keys[key] ?? KeyState()
        let never = keys[key] == nil
        if never {
            // Never named: born and gone, in full.
            features.insert(.eventForAnInstanceNeverSampled)
            if isRepeat || !fullCountIsTrue(x, listed: e.listed) { unknown(key) }
            state.ended = true
            state.endedIndex = index
        } else if state.lastSampled != nil, !state.ended, same(state.lastReadingIndex, index) {
            // Ends the sampled instance: right only if it is this one.
            if state.lastSampled != e.instance || isRepeat || !endIsTrue(e, x) { unknown(key) }
            state.ended = true
            state.endedIndex = index ?? state.lastReadingIndex
        } else if let index, state.replacedIndex == index {
            // The instance a rule-4 recreation replaced (a lower bound).
            if !state.replacedDone {
                if state.replaced == e.instance {
                    if !isRepeat { features.insert(.eventForTheReplacedInstance) }
                } else {
                    unknown(key)
                }
                state.replacedDone = true
            }
        } else if state.ended, same(state.endedIndex, index) {
            // A repeat to the contract: adds nothing.
            if !isRepeat { unknown(key) }
        } else if state.ended || state.lastSampled == nil {
            // Another instance born and gone: in full.
            if state.lastSampled == nil { features.insert(.eventForAnInstanceNeverSampled) }
            if isRepeat || !fullCountIsTrue(x, listed: e.listed) { unknown(key) }
            state.ended = true
            state.endedIndex = index
        } else {
            // Cannot be placed: nothing added, a lower bound.
            features.insert(.eventThatCannotBePlaced)
        }
        keys[key] = state
        if !isRepeat { commit(e.instance, to: key) }
    }

    mutating func emitPrompt(at t: Double) {
        var queue = prompt
        prompt = []
        queue.shuffle(using: &rng)
        for n in queue { emit(event: n, at: t, isRepeat: false) }
    }

    mutating func emitDue(at t: Double, through due: Int) {
        let now = scheduled.filter { $0.due <= due }
        scheduled.removeAll { $0.due <= due }
        for item in now {
            if !item.isRepeat { features.insert(.eventAfterTheNextSample) }
            emit(event: item.event, at: t, isRepeat: item.isRepeat)
        }
    }

    mutating func gapTicks() -> Int {
        switch int(0...99) {
        case 0..<3: 0
        case 3..<48: int(1...16) // up to 2 s
        case 48..<60: int(20...24) // 2.5 to 3 s: about the 2.75 s of the default ceiling
        case 60..<80: int(24...480)
        case 80..<92: int(480...3200) // 60 to 400 s: about 100 Mbit/s's 275 s
        default: int(3200...40_000)
        }
    }

    // MARK: - A trace

    mutating func generate() -> Trace {
        var tick = int(0...800) // eighths of a second: exact in JSON
        if platform == .darwin { features.insert(.darwin) }
        if chance(0.2) {
            // Instances deleted before the first sample.
            for _ in 0..<int(1...2) {
                let netns = pick(namespaces)
                let id = newInstance(netns: netns, name: pick(names), start: .initial)
                kill(id, policy: .prompt)
            }
            emitPrompt(at: Double(tick) / 8)
            tick += int(0...8)
        }
        for _ in 0..<int(1...5) {
            let netns = pick(namespaces)
            guard let name = freeName(in: netns, known: false) else { continue }
            newInstance(netns: netns, name: name, start: .initial)
        }
        emitSample(at: Double(tick) / 8)
        for k in 0..<int(2...10) {
            interval = k
            let dt = gapTicks()
            if dt == 0 { features.insert(.zeroGap) }
            let t0 = Double(tick) / 8, tEvent = Double(tick + dt / 2) / 8, t1 = Double(tick + dt) / 8
            for id in alive where chance(0.05) { rename(id, at: tEvent) }
            for id in alive { traffic(id, seconds: tEvent - t0) }
            for id in alive {
                switch int(0...99) {
                case 0..<4: resetSoon(id)
                case 4..<10: recreate(id)
                case 10..<13: kill(id, policy: policy())
                case 13 where chance(0.3): switchWidth(id)
                default: break
                }
            }
            if chance(0.08) { bornAndGone() }
            if chance(0.15) { appear() }
            for id in alive { traffic(id, seconds: t1 - tEvent) }
            for id in alive where instances[id].resetLate {
                instances[id].resetLate = false
                reset(id)
                traffic(id, seconds: min(t1 - tEvent, 1.0 / 8))
            }
            emitPrompt(at: tEvent)
            emitSample(at: t1)
            emitDue(at: t1, through: k)
            tick += dt
        }
        // Late events due after the end: read with the last line, or never.
        let last = Double(tick) / 8
        for item in scheduled where chance(0.5) { emit(event: item.event, at: last, isRepeat: item.isRepeat) }
        scheduled = []
        if Set(truth.keys.map(\.netns)).count > 1 { features.insert(.namespaces) }
        let composed = Array("tun\u{e9}".utf8), decomposed = Array("tune\u{301}".utf8)
        if truth.keys.contains(where: { $0.name == composed }), truth.keys.contains(where: { $0.name == decomposed }) {
            features.insert(.codePointNames)
        }
        return Trace(platform: platform, configuration: configuration, records: records, truth: truth, features: features)
    }
}
