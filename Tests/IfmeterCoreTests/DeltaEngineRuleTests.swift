import Foundation
import IfmeterCore
import Testing

/// Each rule of trace-v1.md, checked against figures worked out by hand.
@Suite struct DeltaEngineRuleTests {
    func fixture(_ name: String) throws -> String {
        try String(contentsOf: fixtures.appendingPathComponent("traces/\(name)"), encoding: .utf8)
    }

    @Test func baselineGrowthAbsenceAndAppearance() throws {
        let (engine, _) = try replay(fixture("basic.jsonl"))
        // Rule 1 and 3: the first sample counts nothing, then cur - prev.
        #expect(totals(engine, "eth0") == [3000, 700, 30, 7])
        // Rule 6: absent at t=2, back at t=3 against its t=1 counters.
        #expect(totals(engine, "wlan0") == [400, 150, 4, 2])
        // Rule 2: first seen at t=1, counted in full.
        #expect(totals(engine, "usb0") == [900, 450, 9, 5])
        for name in ["eth0", "wlan0", "usb0"] {
            #expect(engine.totals(for: name)?.quality == .exact)
            #expect(engine.totals(for: name)?.events == EventCounts())
        }
        #expect(engine.totals(for: "eth0")?.classification == Classification(kind: .ethernet, evidence: "name:eth*"))
        #expect(engine.totals(for: "wlan0")?.classification.kind == .wifi)
        #expect(engine.totals(for: "usb0")?.classification == Classification(kind: .other, evidence: "name:no-rule"))
        #expect(engine.firstTime == 0 && engine.lastTime == 3)
    }

    @Test func recreationWithAndWithoutDeletionEvent() throws {
        let (engine, _) = try replay(fixture("recreation.jsonl"))
        // Rule 4 with the event: old instance's final - prev, plus the new one in full.
        #expect(totals(engine, "tun0") == [2100, 1100, 21, 11])
        #expect(engine.totals(for: "tun0")?.quality == .exact)
        #expect(engine.totals(for: "tun0")?.events == EventCounts(recreations: 1, deletions: 1))
        // Without the event: a lower bound.
        #expect(totals(engine, "wg0") == [600, 250, 6, 3])
        #expect(engine.totals(for: "wg0")?.quality == .lowerBound)
        #expect(engine.totals(for: "wg0")?.events == EventCounts(recreations: 1))
        // Rule 6: deleted and never back still adds final - prev.
        #expect(totals(engine, "veth1") == [150, 250, 2, 3])
        #expect(engine.totals(for: "veth1")?.quality == .exact)
        #expect(engine.totals(for: "veth1")?.events == EventCounts(deletions: 1))
        #expect(engine.totals(for: "veth1")?.deletedAt == 2.5)
        #expect(engine.totals(for: "veth1")?.present == false)
    }

    @Test func wrapVersusReset() throws {
        let (engine, _) = try replay(fixture("wrap.jsonl"))
        // 1000 bytes in 1 s under the 1.25e9 B/s default: a wrap.
        #expect(totals(engine, "eth1") == [2000, 100, 2, 1])
        #expect(engine.totals(for: "eth1")?.quality == .wrapCorrected)
        #expect(engine.totals(for: "eth1")?.events == EventCounts(wraps: 1))
        // 2296 bytes in 1 s on an 8000 bit/s link (ceiling 1250): a reset,
        // judged per counter (v1.2): rx went down and counts cur, the
        // others rose and count their rise (v1 counted [2000, 600, 6, 6]).
        #expect(totals(engine, "eth2") == [2000, 100, 1, 1])
        #expect(engine.totals(for: "eth2")?.quality == .lowerBound)
        #expect(engine.totals(for: "eth2")?.events == EventCounts(resets: 1))
        // A 64-bit counter never wraps: rx and rx_packets restarted, tx and
        // tx_packets rose by 10 and 1 (v1.2; v1 counted [100, 20, 1, 2]).
        #expect(totals(engine, "eth3") == [100, 10, 1, 1])
        #expect(engine.totals(for: "eth3")?.quality == .lowerBound)
        // Bytes could have wrapped, packets could not (R/40 ceiling): a reset.
        #expect(totals(engine, "eth4") == [704, 0, 50, 0])
        #expect(engine.totals(for: "eth4")?.events == EventCounts(resets: 1))
    }

    @Test func maxRateChangesTheVerdict() throws {
        // At 8000 bit/s of default ceiling, eth1's 1000 bytes/s wrap is implausible.
        let (engine, _) = try replay(fixture("wrap.jsonl"), configuration: EngineConfiguration(defaultMaxBytesPerSecond: 1000))
        #expect(engine.totals(for: "eth1")?.quality == .wrapCorrected) // 1000 <= 1000 * 1 * 1.25
        let (strict, _) = try replay(fixture("wrap.jsonl"), configuration: EngineConfiguration(defaultMaxBytesPerSecond: 700))
        #expect(strict.totals(for: "eth1")?.quality == .lowerBound) // 1000 > 875
        // A reset: rx (which went down) counts cur, 704, the others their
        // rise (v1.2; v1 counted every counter in full); then +1000 rx.
        #expect(totals(strict, "eth1") == [1704, 100, 2, 1])
    }

    @Test func eventEdgeCases() throws {
        let (engine, _) = try replay(fixture("events.jsonl"))
        // Deleted before the first sample: the baseline's, it changes
        // nothing (v1.1), but the name was seen.
        #expect(totals(engine, "tap9") == [0, 0, 0, 0])
        #expect(engine.totals(for: "tap9")?.events == EventCounts())
        // Created and deleted between samples: counted in full.
        #expect(totals(engine, "tap7") == [100, 200, 1, 2])
        #expect(engine.totals(for: "tap7")?.quality == .exact)
        // Appeared, then deleted (reported twice: counted once).
        #expect(totals(engine, "tun5") == [140, 60, 2, 1])
        #expect(engine.totals(for: "tun5")?.events == EventCounts(deletions: 1))
        #expect(engine.totals(for: "tun5")?.quality == .exact)
        // Extras follow the same rules; a 64-bit decrease is a reset.
        let eth0 = try #require(engine.totals(for: "eth0"))
        #expect(totals(engine, "eth0") == [250, 60, 3, 2])
        #expect(eth0.totals[.rxErrors] == 1 && eth0.totals[.rxDropped] == 2)
        #expect(eth0.totals[.txErrors] == nil)
        #expect(eth0.quality == .lowerBound)
    }

    @Test func darwinNameRules() throws {
        let (engine, header) = try replay(fixture("darwin.jsonl"))
        #expect(header.platform == .darwin)
        let kinds = Dictionary(uniqueKeysWithValues: engine.interfaces.map { ($0.name, $0.classification.kind) })
        #expect(
            kinds == [
                "lo0": .loopback, "en0": .wifi, "en5": .ethernet, "pdp_ip0": .cellular, "utun3": .tunnel,
                "awdl0": .virtual, "gif0": .other,
            ])
        #expect(totals(engine, "en0") == [2000, 1000, 2, 1])
    }

    @Test func intervalDeltasCarryRatesAndChanges() throws {
        var engine = DeltaEngine()
        let a = InterfaceSample(name: "eth0", index: 2, counters: Counters(rxBytes: 100, txBytes: 0, rxPackets: 1, txPackets: 0))
        let first = engine.apply(Sample(time: 10, interfaces: [a]))
        #expect(first.map(\.change) == [.baseline])
        #expect(first[0].seconds == nil && first[0].rate(.rxBytes) == nil)
        var b = a
        b.counters = Counters(rxBytes: 2100, txBytes: 500, rxPackets: 3, txPackets: 1)
        let second = engine.apply(Sample(time: 12, interfaces: [b]))
        #expect(second[0].change == .steady)
        #expect(second[0].seconds == 2)
        #expect(second[0].rate(.rxBytes) == 1000)
        #expect(second[0].rate(.txBytes) == 250)
    }

    @Test func zeroDurationDecreaseIsAReset() {
        var engine = DeltaEngine()
        func s(_ rx: UInt64) -> InterfaceSample {
            InterfaceSample(name: "e", index: 1, width: .bits32, counters: Counters(rxBytes: rx, txBytes: 0, rxPackets: 0, txPackets: 0))
        }
        engine.apply(Sample(time: 1, interfaces: [s(4_294_967_290)]))
        let d = engine.apply(Sample(time: 1, interfaces: [s(5)]))
        #expect(d[0].change == .reset) // dt = 0: no wrap is plausible
    }

    @Test func prometheusStyleCounterNeverGoesDown() throws {
        // baseline + totals continues the kernel counter across a recreation.
        let (engine, _) = try replay(fixture("recreation.jsonl"))
        let tun0 = try #require(engine.totals(for: "tun0"))
        #expect(tun0.baseline.rxBytes == 1000)
        #expect(tun0.baseline.rxBytes + tun0.totals.rxBytes == 3100)
    }

    @Test func zeroTotalsKeepsMeasuringFromTheLastCounters() throws {
        var (engine, _) = try replay(fixture("wrap.jsonl"))
        engine.zeroTotals()
        #expect(totals(engine, "eth1") == [0, 0, 0, 0])
        #expect(engine.totals(for: "eth2")?.quality == .exact)
        let next = InterfaceSample(
            name: "eth1", index: 2, width: .bits32, counters: Counters(rxBytes: 1804, txBytes: 200, rxPackets: 12, txPackets: 11))
        engine.apply(Sample(time: 13, interfaces: [next]))
        #expect(totals(engine, "eth1") == [100, 0, 0, 0])
    }

    @Test func forgetDropsLongGoneInterfaces() throws {
        var (engine, _) = try replay(fixture("recreation.jsonl"))
        engine.forget(notSeenSince: 2.8)
        #expect(engine.totals(for: "veth1") == nil)
        #expect(engine.totals(for: "tun0") != nil)
    }
}
