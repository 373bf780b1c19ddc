import IfmeterCore
import Testing

/// The changes of trace contract v1.2, each worked out by hand.
@Suite struct ContractV12Tests {
    /// A sample line: `t` and its interfaces.
    func s(_ t: Double, _ interfaces: String...) -> String {
        #"{"t": \#(t), "interfaces": [\#(interfaces.joined(separator: ", "))]}"#
    }

    /// One interface: the four counters, and optionally index, width, speed
    /// and more keys (`extra` starts with a comma).
    func i(
        _ name: String, _ index: Int?, width: Int = 64, speed: UInt64? = nil,
        rx: UInt64, tx: UInt64 = 0, rxp: UInt64 = 0, txp: UInt64 = 0, extra: String = ""
    ) -> String {
        let indexPart = index.map { #""index": \#($0), "# } ?? ""
        let speedPart = speed.map { #""speed_bps": \#($0), "# } ?? ""
        return #"{"name": "\#(name)", \#(indexPart)"width": \#(width), \#(speedPart)"rx_bytes": \#(rx), "tx_bytes": \#(tx), "rx_packets": \#(rxp), "tx_packets": \#(txp)\#(extra)}"#
    }

    func e(_ t: Double, _ interface: String) -> String {
        #"{"t": \#(t), "event": "deleted", "interface": \#(interface)}"#
    }

    /// Replays the lines; returns the engine and the deltas of the last line.
    func run(_ lines: [String], configuration: EngineConfiguration = EngineConfiguration()) throws -> (DeltaEngine, [InterfaceDelta]) {
        let (_, records) = try readTrace(lines.joined(separator: "\n"))
        var engine = DeltaEngine(configuration: configuration)
        var last: [InterfaceDelta] = []
        for record in records { last = engine.apply(record) }
        return (engine, last)
    }

    func values(_ counters: Counters, _ keys: [CounterKey] = CounterKey.required) -> [UInt64?] {
        keys.map { counters[$0] }
    }

    // MARK: 1. A reset is judged per counter

    @Test func rxErrorsAloneGoingDownIsAResetThatKeepsTheBytes() throws {
        // A driver cleared its error statistics: rx_errors 5 -> 4 while
        // rx_bytes went on from 10^12. The bytes did not restart.
        let (engine, deltas) = try run([
            s(0, i("eth0", 2, rx: 1_000_000_000_000, tx: 400_000_000, rxp: 900_000_000, txp: 300_000, extra: #", "rx_errors": 5"#)),
            s(1, i("eth0", 2, rx: 1_000_000_001_500, tx: 400_000_600, rxp: 900_000_002, txp: 300_001, extra: #", "rx_errors": 4"#)),
        ])
        let delta = try #require(deltas.first)
        #expect(delta.change == .reset && delta.quality == .lowerBound)
        #expect(values(delta.counters) == [1500, 600, 2, 1], "the counters that did not go down subtract plainly, not 10^12 in full")
        #expect(delta.counters[.rxErrors] == 4, "the counter that went down restarted: it counts cur")
        let eth0 = try #require(engine.totals(for: "eth0"))
        #expect(values(eth0.totals) == [1500, 600, 2, 1] && eth0.totals[.rxErrors] == 4)
        #expect(eth0.quality == .lowerBound && eth0.events == EventCounts(resets: 1), "one reset, a lower bound")
    }

    @Test func aResetCountsTheCountersThatWentDownAsCurAndTheOthersAsTheirRise() throws {
        // wrap.jsonl's eth2: an 8000 bit/s link (R = 1000 B/s) whose rx went
        // from 4,294,967,000 to 2000 in 1 s: no wrap (2296 > 1250). tx and
        // the packets rose by 100, 1 and 1.
        let (engine, deltas) = try run([
            s(10, i("eth2", 3, width: 32, speed: 8000, rx: 4_294_967_000, tx: 500, rxp: 5, txp: 5)),
            s(11, i("eth2", 3, width: 32, speed: 8000, rx: 2000, tx: 600, rxp: 6, txp: 6)),
        ])
        #expect(deltas.first?.change == .reset)
        #expect(deltas.first.map { values($0.counters) } == [2000, 100, 1, 1], "v1 said [2000, 600, 6, 6]")
        #expect(engine.totals(for: "eth2")?.events == EventCounts(resets: 1))
        // 64-bit, rx and rx_packets down, tx and tx_packets up (wrap.jsonl's eth3).
        let (wide, _) = try run([
            s(10, i("eth3", 4, rx: 5000, tx: 10, rxp: 50, txp: 1)),
            s(11, i("eth3", 4, rx: 100, tx: 20, rxp: 1, txp: 2)),
        ])
        #expect(totals(wide, "eth3") == [100, 10, 1, 1], "v1 said [100, 20, 1, 2]")
        #expect(wide.totals(for: "eth3")?.quality == .lowerBound)
    }

    @Test func aResetOfEveryCounterCountsEachInFull() throws {
        // events.jsonl's eth0 at t=5: every counter went down; as in v1.
        let (engine, deltas) = try run([
            s(3, i("eth0", 2, rx: 300, tx: 150, rxp: 3, txp: 2, extra: #", "rx_errors": 1, "rx_dropped": 5"#)),
            s(5, i("eth0", 2, rx: 50, tx: 10, rxp: 1, txp: 1, extra: #", "rx_errors": 0, "rx_dropped": 0"#)),
        ])
        let delta = try #require(deltas.first)
        #expect(values(delta.counters, CounterKey.allCases) == [50, 10, 1, 1, 0, nil, 0, nil])
        #expect(engine.totals(for: "eth0")?.events == EventCounts(resets: 1))
    }

    @Test func aCounterTheEarlierReadingLackedAddsNothingInAReset() throws {
        // rx_dropped is new at t=1: nothing to compare it with, reset or not.
        let (_, deltas) = try run([
            s(0, i("eth0", 2, rx: 9000, tx: 100, rxp: 90, txp: 1)),
            s(1, i("eth0", 2, rx: 30, tx: 180, rxp: 1, txp: 2, extra: #", "rx_dropped": 7"#)),
        ])
        let delta = try #require(deltas.first)
        #expect(delta.change == .reset)
        #expect(values(delta.counters, CounterKey.allCases) == [30, 80, 1, 1, nil, nil, 0, nil])
    }

    @Test func aCounterAbove32BitsInPrevIsAResetOfThatCounterOnly() throws {
        // The source changed from 64 to 32 bits: 5,000,000,000 cannot wrap
        // at 32 bits, so rx restarted; tx went on from 70 to 90.
        let (engine, deltas) = try run([
            s(0, i("a", 1, rx: 5_000_000_000, tx: 70)),
            s(1, i("a", 1, width: 32, rx: 100, tx: 90)),
        ])
        #expect(deltas.first?.change == .reset)
        #expect(totals(engine, "a") == [100, 20, 0, 0])
        #expect(engine.totals(for: "a")?.events == EventCounts(resets: 1) && engine.totals(for: "a")?.quality == .lowerBound)
    }

    @Test func aWrapIsStillAWrap() throws {
        // Every decreased counter a plausible wrap: corrected, no reset.
        let (engine, deltas) = try run([
            s(10, i("eth1", 2, width: 32, rx: 4_294_967_000, tx: 100, rxp: 10, txp: 10)),
            s(11, i("eth1", 2, width: 32, rx: 704, tx: 200, rxp: 11, txp: 11)),
        ])
        #expect(deltas.first?.change == .wrap && deltas.first?.quality == .wrapCorrected)
        #expect(totals(engine, "eth1") == [1000, 100, 1, 1])
    }
}
