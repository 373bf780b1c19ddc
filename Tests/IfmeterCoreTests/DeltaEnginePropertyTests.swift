import IfmeterCore
import IfmeterTestSupport
import Testing

/// Randomized traffic with wraps, resets, recreations, absences and deletions,
/// against the truth the simulation knows:
/// totals never decrease; exact and wrap-corrected totals equal the simulated
/// traffic; a lower bound is never above it; the quality is the one the
/// contract (v1.2) gives.
@Suite struct DeltaEnginePropertyTests {
    static let ceiling = 1.25e9 // the engine's default R, bytes per second

    /// One simulated interface: the kernel's counters and the truth.
    struct SimInterface {
        var name: String
        var index: Int
        var width: CounterWidth
        var kernel: [UInt64] // rx_bytes, tx_bytes, rx_packets, tx_packets as the kernel shows them
        var truth: [UInt64] = [0, 0, 0, 0] // traffic since the window began
        var lastSampled: [UInt64]?
        /// The index the engine last saw in a sample. What happens to an
        /// instance no sample ever showed is invisible to anyone: the
        /// simulation resets, or recreates without an event, only an
        /// instance the engine has sampled.
        var sampledIndex: Int?
        var lastSampledTime: Double = 0
        var alive = true
        /// Left out of the coming sample (never twice in a row, so that a
        /// 32-bit counter cannot wrap twice unseen; a gap of more than
        /// 2.75 s still makes it a lower bound, v1.2).
        var skipNext = false
        /// Traffic the engine cannot see was lost (a detectable reset, a
        /// recreation without an event): its quality must be a lower bound.
        var lossy = false
        /// A 32-bit counter wrapped: the quality must say wrap-corrected
        /// (unless something was lost too).
        var wrapped = false

        /// A deletion event ends the sampled instance; a final counter below
        /// its last sampled value was under-reported (v1.1: a deletion never
        /// infers a wrap): the totals become a lower bound.
        mutating func deleted() {
            if sampledIndex == index, let prev = lastSampled, zip(kernel, prev).contains(where: { $0 < $1 }) { lossy = true }
        }

        /// The quality the contract gives this interface's totals.
        var expectedQuality: Quality { lossy ? .lowerBound : (wrapped ? .wrapCorrected : .exact) }

        var counters: Counters {
            Counters(rxBytes: kernel[0], txBytes: kernel[1], rxPackets: kernel[2], txPackets: kernel[3])
        }

        mutating func push(_ traffic: [UInt64], counted: Bool) {
            for k in 0..<4 {
                let before = kernel[k]
                kernel[k] = width == .bits32 ? (kernel[k] &+ traffic[k]) & 0xFFFF_FFFF : kernel[k] &+ traffic[k]
                if kernel[k] < before { wrapped = true }
                if counted { truth[k] += traffic[k] }
            }
        }

        /// v1.2: read again after a gap over which the ceiling reaches 2^32,
        /// a 32-bit counter could have wrapped whole times unseen, so the
        /// contract calls the interval a lower bound (when the engine
        /// compares two samples of this instance, not when it counts a new
        /// one in full).
        func hidesAWrap(at t: Double) -> Bool {
            guard width == .bits32, lastSampled != nil, sampledIndex == index else { return false }
            return DeltaEnginePropertyTests.ceiling * (t - lastSampledTime) * 1.25 >= 4_294_967_296
        }

        /// The contract says a decrease is a reset unless every decreased
        /// counter is a plausible wrap; a simulated reset is used only when
        /// it is detectable at all.
        func resetIsDetectable(newKernel: [UInt64], at t: Double) -> Bool {
            guard let prev = lastSampled else { return false }
            let decreased = (0..<4).filter { newKernel[$0] < prev[$0] }
            if decreased.isEmpty { return false }
            if width == .bits64 { return true }
            let dt = t - lastSampledTime
            return !decreased.allSatisfy { k in
                let wrapped = Double(newKernel[k]) + 4_294_967_296 - Double(prev[k])
                let rate = k < 2 ? DeltaEnginePropertyTests.ceiling : DeltaEnginePropertyTests.ceiling / 40
                return wrapped <= rate * dt * 1.25
            }
        }
    }

    static func traffic(_ rng: inout SplitMix64, dt: Double) -> [UInt64] {
        let maxBytes = UInt64(min(1e9, ceiling * dt * 0.99))
        return [
            UInt64.random(in: 0...maxBytes, using: &rng), UInt64.random(in: 0...maxBytes, using: &rng),
            UInt64.random(in: 0...1_000_000, using: &rng), UInt64.random(in: 0...1_000_000, using: &rng),
        ]
    }

    @Test(arguments: Array(UInt64(1)...UInt64(60)))
    func simulatedTraffic(seed: UInt64) {
        _ = Self.simulate(seed: seed)
    }

    /// Runs one seed's simulation, checking as it goes; returns the
    /// qualities the engine gave at the end.
    static func simulate(seed: UInt64) -> Set<Quality> {
        var rng = SplitMix64(seed: seed)
        var engine = DeltaEngine()
        var nextIndex = 100
        var sims: [SimInterface] = (0..<6).map { n in
            let width: CounterWidth = n % 2 == 0 ? .bits32 : .bits64
            let start: [UInt64] = (0..<4).map { _ in
                width == .bits32
                    ? UInt64.random(in: 3_000_000_000...4_294_967_295, using: &rng)
                    : UInt64.random(in: 0...1 << 40, using: &rng)
            }
            return SimInterface(name: "if\(n)", index: n + 1, width: width, kernel: start)
        }
        var t = 0.0
        var previousTotals: [String: [UInt64]] = [:]

        func check(present: Set<String>, final: Bool) {
            for interface in engine.interfaces {
                let got = CounterKey.required.map { interface.totals.value($0) }
                if let before = previousTotals[interface.name] {
                    #expect(zip(got, before).allSatisfy { $0 >= $1 }, "seed \(seed): \(interface.name) totals went down")
                }
                previousTotals[interface.name] = got
                guard let sim = sims.first(where: { $0.name == interface.name }) else { continue }
                let settled = present.contains(sim.name) || !sim.alive
                if interface.quality == .lowerBound || !settled {
                    #expect(zip(got, sim.truth).allSatisfy { $0 <= $1 }, "seed \(seed) t \(t): \(sim.name) \(got) above truth \(sim.truth)")
                } else {
                    #expect(got == sim.truth, "seed \(seed) t \(t): \(sim.name) \(interface.quality.name) \(got) != truth \(sim.truth)")
                }
                if final {
                    if sim.alive { #expect(settled) }
                    #expect(
                        interface.quality == sim.expectedQuality,
                        "seed \(seed): \(sim.name) is \(interface.quality.name), the simulation says \(sim.expectedQuality.name)")
                }
            }
        }

        func takeSample(everyone: Bool) {
            var interfaces: [InterfaceSample] = []
            var present = Set<String>()
            for i in sims.indices where sims[i].alive {
                if !everyone, sims[i].skipNext { continue }
                interfaces.append(InterfaceSample(name: sims[i].name, index: sims[i].index, width: sims[i].width, counters: sims[i].counters))
                if sims[i].hidesAWrap(at: t) { sims[i].lossy = true }
                sims[i].lastSampled = sims[i].kernel
                sims[i].sampledIndex = sims[i].index
                sims[i].lastSampledTime = t
                present.insert(sims[i].name)
            }
            engine.apply(Sample(time: t, interfaces: interfaces))
            check(present: present, final: everyone)
        }

        takeSample(everyone: true)
        var wraps = 0, resets = 0, recreations = 0
        for _ in 0..<60 {
            let previousSampleTime = t
            let dt = Double.random(in: 0.5...2.0, using: &rng)
            let eventTime = t + dt / 2
            t += dt
            for i in sims.indices where sims[i].alive {
                let before = sims[i].kernel
                let wasPresent = sims[i].lastSampled != nil && sims[i].lastSampledTime == previousSampleTime
                sims[i].skipNext = wasPresent && UInt64.random(in: 0..<10, using: &rng) == 0
                let roll = UInt64.random(in: 0..<100, using: &rng)
                let first = Self.traffic(&rng, dt: dt / 2), second = Self.traffic(&rng, dt: dt / 2)
                if roll < 5 || (roll < 8 && sims[i].lastSampled == nil) {
                    // Recreated with a deletion event carrying the final counters.
                    sims[i].push(first, counted: true)
                    sims[i].deleted()
                    engine.apply(
                        DeletionEvent(
                            time: eventTime,
                            interface: InterfaceSample(
                                name: sims[i].name, index: sims[i].index, width: sims[i].width, counters: sims[i].counters)))
                    sims[i].index = nextIndex
                    nextIndex += 1
                    sims[i].kernel = [0, 0, 0, 0]
                    sims[i].push(second, counted: true)
                    recreations += 1
                } else if roll < 8, sims[i].sampledIndex == sims[i].index {
                    // Recreated with no event: the engine can only give a lower bound.
                    sims[i].push(first, counted: true)
                    sims[i].index = nextIndex
                    nextIndex += 1
                    sims[i].kernel = [0, 0, 0, 0]
                    sims[i].push(second, counted: true)
                    sims[i].lossy = true
                    recreations += 1
                } else if roll < 12, sims[i].sampledIndex == sims[i].index {
                    // Counters reset to zero in place, when the contract can tell.
                    var copy = sims[i]
                    copy.push(first, counted: true)
                    copy.kernel = [0, 0, 0, 0]
                    copy.push(second, counted: true)
                    if !sims[i].skipNext, sims[i].resetIsDetectable(newKernel: copy.kernel, at: t) {
                        sims[i] = copy
                        sims[i].lossy = true
                        resets += 1
                    } else {
                        sims[i].push(first, counted: true)
                        sims[i].push(second, counted: true)
                    }
                } else if roll < 14 {
                    // Deleted for good, with its final counters.
                    sims[i].push(first, counted: true)
                    sims[i].deleted()
                    engine.apply(
                        DeletionEvent(
                            time: eventTime,
                            interface: InterfaceSample(
                                name: sims[i].name, index: sims[i].index, width: sims[i].width, counters: sims[i].counters)))
                    sims[i].alive = false
                } else {
                    sims[i].push(first, counted: true)
                    sims[i].push(second, counted: true)
                }
                if sims[i].alive, sims[i].width == .bits32, zip(sims[i].kernel, before).contains(where: { $0 < $1 }) { wraps += 1 }

            }
            if UInt64.random(in: 0..<10, using: &rng) == 0 {
                // A new interface created after the previous sample: counted in full.
                var fresh = SimInterface(name: "new\(nextIndex)", index: nextIndex, width: .bits64, kernel: [0, 0, 0, 0])
                nextIndex += 1
                fresh.push(Self.traffic(&rng, dt: dt / 2), counted: true)
                sims.append(fresh)
            }
            takeSample(everyone: false)
        }
        t += 1
        takeSample(everyone: true)
        // The simulation must actually exercise what it claims to.
        #expect(wraps > 0 && resets + recreations > 0, "seed \(seed): wraps \(wraps), resets \(resets), recreations \(recreations)")
        return Set(engine.interfaces.map(\.quality))
    }

    @Test func allSeedsTogetherCoverEveryQuality() {
        // The expectations above hold for every quality only if every
        // quality occurs: the seeds together must give all three.
        var seen = Set<Quality>()
        for seed in UInt64(1)...UInt64(60) { seen.formUnion(Self.simulate(seed: seed)) }
        #expect(seen == Set(Quality.allCases), "the seeds gave only \(seen.map(\.name).sorted())")
    }
}
