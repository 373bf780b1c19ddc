import IfmeterCore
import IfmeterOutput
import Testing

/// The changes of trace contract v1.2, and the behaviour it settled, each
/// worked out by hand.
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
        return
            #"{"name": "\#(name)", \#(indexPart)"width": \#(width), \#(speedPart)"rx_bytes": \#(rx), "tx_bytes": \#(tx), "rx_packets": \#(rxp), "tx_packets": \#(txp)\#(extra)}"#
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

    // MARK: 2. A 32-bit gap that could hide a whole wrap is a lower bound

    /// A 32-bit `eth1` sampled at 0 and at `dt`, its counters rising by
    /// 4000 bytes and 4 packets; the last delta.
    func gap(_ dt: Double, width: Int = 32, speed: UInt64? = nil, configuration: EngineConfiguration = EngineConfiguration()) throws -> InterfaceDelta
    {
        let (_, deltas) = try run(
            [
                s(0, i("eth1", 2, width: width, speed: speed, rx: 1000, tx: 1000, rxp: 1, txp: 1)),
                s(dt, i("eth1", 2, width: width, speed: speed, rx: 5000, tx: 1000, rxp: 5, txp: 1)),
            ], configuration: configuration)
        return try #require(deltas.first)
    }

    @Test func a32BitInterfaceRead60SecondsApartIsALowerBound() throws {
        // 1.25e9 B/s * 60 s * 1.25 = 9.4e10 >= 2^32: any number of whole
        // wraps could have passed. Nothing went down, so the delta is the
        // plain rise, steady, and no event is counted.
        let (engine, deltas) = try run([
            s(0, i("eth1", 2, width: 32, rx: 1000, tx: 1000, rxp: 1, txp: 1)),
            s(60, i("eth1", 2, width: 32, rx: 5000, tx: 1000, rxp: 5, txp: 1)),
        ])
        let delta = try #require(deltas.first)
        #expect(values(delta.counters) == [4000, 0, 4, 0])
        #expect(delta.change == .steady && delta.quality == .lowerBound)
        #expect(totals(engine, "eth1") == [4000, 0, 4, 0] && engine.totals(for: "eth1")?.quality == .lowerBound)
        #expect(engine.totals(for: "eth1")?.events == EventCounts(), "no wrap, no reset: nothing was seen to happen")
    }

    @Test func theDefaultCeilingsLimitIsJustUnder2Point75Seconds() throws {
        // 2^32 / (1.25e9 * 1.25) = 2.7488 s.
        #expect(try gap(2.7).quality == .exact)
        #expect(try gap(2.748).quality == .exact)
        #expect(try gap(2.749).quality == .lowerBound)
        #expect(try gap(2.8).quality == .lowerBound)
        #expect(try gap(2.8).change == .steady)
        // A configured ceiling moves it: 1e6 B/s gives 3436 s.
        let slow = EngineConfiguration(defaultMaxBytesPerSecond: 1e6)
        #expect(try gap(3435, configuration: slow).quality == .exact)
        #expect(try gap(3437, configuration: slow).quality == .lowerBound)
    }

    @Test func aKnownLinkSpeedRaisesTheLimit() throws {
        // 100 Mbit/s: R = 12.5e6 B/s, 2^32 / (12.5e6 * 1.25) = 274.88 s.
        let speed: UInt64 = 100_000_000
        #expect(try gap(60, speed: speed).quality == .exact)
        #expect(try gap(274, speed: speed).quality == .exact)
        #expect(try gap(275, speed: speed).quality == .lowerBound)
    }

    @Test func a64BitSourceWithALongGapStaysExact() throws {
        #expect(try gap(3600, width: 64).quality == .exact)
        #expect(try gap(86_400 * 30, width: 64).quality == .exact)
    }

    @Test func aWrapAcrossALongGapIsCorrectedAndALowerBound() throws {
        // 1000 bytes across the top in 10 s: a plausible wrap, corrected
        // and counted as one; but 10 s could also hide whole wraps.
        let (engine, deltas) = try run([
            s(0, i("eth1", 2, width: 32, rx: 4_294_967_000, tx: 5)),
            s(10, i("eth1", 2, width: 32, rx: 704, tx: 5)),
        ])
        let delta = try #require(deltas.first)
        #expect(delta.change == .wrap && delta.quality == .lowerBound)
        #expect(values(delta.counters) == [1000, 0, 0, 0])
        #expect(engine.totals(for: "eth1")?.events == EventCounts(wraps: 1))
    }

    @Test func anAbsenceMakesTheGapLong() throws {
        // Rule 6: back after an absence, compared with its last sample, 3 s
        // before, though samples came every second.
        let (engine, deltas) = try run([
            s(0, i("eth1", 2, width: 32, rx: 1000), i("lo", 1, rx: 0)),
            s(1, i("eth1", 2, width: 32, rx: 2000), i("lo", 1, rx: 0)),
            s(2, i("lo", 1, rx: 0)),
            s(3, i("lo", 1, rx: 0)),
            s(4, i("eth1", 2, width: 32, rx: 9000), i("lo", 1, rx: 0)),
        ])
        #expect(deltas.first { $0.name == "eth1" }?.quality == .lowerBound)
        #expect(totals(engine, "eth1") == [8000, 0, 0, 0])
    }

    @Test func aSeriesContinuedFromSavedStateWithinOneBootIsJudgedTheSameWay() throws {
        let last = InterfaceSample(name: "en0", index: 4, width: .bits32, counters: Counters(rxBytes: 100, txBytes: 100, rxPackets: 1, txPackets: 1))
        let saved = DeltaEngine.SavedSeries(
            totals: InterfaceTotals(
                name: "en0", classification: Classification(kind: .wifi, evidence: "test"), index: 4, width: .bits32, speedBps: nil,
                attributes: nil, totals: Counters(rxBytes: 50, txBytes: 0, rxPackets: 0, txPackets: 0), quality: .exact,
                events: EventCounts(), baseline: .zero, lastKernelStats: nil, firstSeen: 0, lastSeen: 100, present: false, deletedAt: nil),
            last: last, lastTime: 100)
        func resumed(at t: Double) -> (InterfaceDelta?, InterfaceTotals?) {
            var engine = DeltaEngine()
            engine.restore([saved], sameBoot: true, now: t)
            var next = last
            next.counters = Counters(rxBytes: 700, txBytes: 100, rxPackets: 2, txPackets: 1)
            let deltas = engine.apply(Sample(time: t, interfaces: [next]))
            return (deltas.first, engine.totals(for: "en0"))
        }
        let soon = resumed(at: 101)
        #expect(soon.0?.change == .steady && soon.0?.quality == .exact && soon.1?.totals.rxBytes == 650)
        // Stopped for an hour: the kernel counted on, but could have wrapped unseen.
        let later = resumed(at: 3700)
        #expect(later.0?.change == .steady && later.0?.quality == .lowerBound)
        #expect(later.1?.totals.rxBytes == 650 && later.1?.quality == .lowerBound && later.1?.events == EventCounts())
    }

    @Test func aDeletionsFinalIsNoComparisonOfTwoSamples() throws {
        // Rule 2 of v1.2 speaks of the gap between two samples; a deletion
        // event's final counters (IFLA_STATS64) are judged by v1.1's rules.
        let (engine, _) = try run([
            s(0, i("tun0", 7, width: 32, rx: 1000)),
            e(60, i("tun0", 7, rx: 3000)),
        ])
        #expect(totals(engine, "tun0") == [2000, 0, 0, 0] && engine.totals(for: "tun0")?.quality == .exact)
    }

    @Test func rule4And2CountInFullWhateverTheGap() throws {
        // A new instance counts in full: its quality is rule 4's (a lower
        // bound without an event), never made worse or better by the gap.
        let (engine, deltas) = try run([
            s(0, i("tun0", 7, width: 32, rx: 1000)),
            e(1, i("tun0", 7, rx: 1500)),
            s(60, i("tun0", 9, width: 32, rx: 300), i("tun1", 3, width: 32, rx: 40)),
        ])
        #expect(deltas.map(\.quality) == [.exact, .exact])
        #expect(totals(engine, "tun0") == [800, 0, 0, 0] && totals(engine, "tun1") == [40, 0, 0, 0])
    }

    // MARK: Settled as ifmeter already behaves

    @Test func aNameSeenOnlyInADeletionBeforeTheFirstSampleIsReportedWithZeroTotals() throws {
        let (engine, _) = try run([
            e(-1, i("tap9", 20, rx: 500, tx: 500, rxp: 5, txp: 5)),
            s(0, i("eth0", 2, rx: 100)),
            s(1, i("eth0", 2, rx: 300)),
        ])
        let report = JSONReportRenderer().value(Report(engine: engine))
        guard case .array(let list) = report["interfaces"] else { throw TestFailure("no interfaces") }
        #expect(list.compactMap { $0["name"]?.stringValue } == ["eth0", "tap9"])
        let tap9 = try #require(list.first { $0["name"]?.stringValue == "tap9" })
        #expect(CounterKey.required.map { tap9["totals"]?[$0.jsonKey]?.uint64Value } == [0, 0, 0, 0])
        #expect(tap9["quality"]?.stringValue == "exact" && tap9["kind"]?.stringValue == "tunnel")
        #expect(engine.totals(for: "tap9")?.events == EventCounts())
    }

    @Test func aDeletionsKindBecomesTheSeriesKind() throws {
        func kind(_ lines: [String], _ name: String = "x0") throws -> InterfaceKind? {
            try run(lines).0.totals(for: name)?.classification.kind
        }
        let wifi = #", "kind": "wifi""#
        // Before the first sample: the series it names has the event's kind.
        #expect(try kind([e(-1, i("x0", 1, rx: 5, extra: wifi)), s(0, i("lo", 1, rx: 0))]) == .wifi)
        // Ending the sampled instance.
        #expect(try kind([s(0, i("x0", 1, rx: 5)), e(1, i("x0", 1, rx: 9, extra: wifi))]) == .wifi)
        // Born and gone between samples.
        #expect(try kind([s(0, i("lo", 1, rx: 0)), e(1, i("x0", 1, rx: 9, extra: wifi))]) == .wifi)
        // Another instance after the sampled one was ended.
        #expect(try kind([s(0, i("x0", 1, rx: 5)), e(1, i("x0", 1, rx: 9)), e(2, i("x0", 2, rx: 9, extra: wifi))]) == .wifi)
        // The instance a rule-4 recreation replaced.
        #expect(try kind([s(0, i("x0", 1, rx: 5)), s(1, i("x0", 2, rx: 1)), e(2, i("x0", 1, rx: 9, extra: wifi))]) == .wifi)
        // An event that cannot be placed.
        #expect(try kind([s(0, i("x0", 1, rx: 5)), e(1, i("x0", 7, rx: 9, extra: wifi))]) == .wifi)
        // No kind in the event: the series keeps its own.
        #expect(try kind([s(0, i("x0", 1, rx: 5, extra: wifi)), e(1, i("x0", 1, rx: 9))]) == .wifi)
        // A later sample says what the interface is now.
        #expect(try kind([s(0, i("x0", 1, rx: 5)), e(1, i("x0", 1, rx: 9, extra: wifi)), s(2, i("x0", 2, rx: 1))]) == .other)
    }

    @Test func theReplacedInstancesEventWinsOverAnotherIndexAfterAnEnd() throws {
        // tun0 index 1 is replaced by index 2 with no event (rule 4); index
        // 2's deletion ends the series' instance; then index 1's deletion
        // comes. It is the replaced instance's (50 after its last 100), not
        // one more instance born and gone (150 in full, a recreation).
        let lines = [
            s(0, i("tun0", 1, rx: 100)),
            s(1, i("tun0", 2, rx: 20)),
            e(1.5, i("tun0", 2, rx: 50)),
            e(1.6, i("tun0", 1, rx: 150)),
        ]
        let (engine, deltas) = try run(lines)
        #expect(deltas.first.map { values($0.counters) } == [50, 0, 0, 0])
        let tun0 = try #require(engine.totals(for: "tun0"))
        #expect(tun0.totals.rxBytes == 20 + 30 + 50)
        #expect(tun0.quality == .lowerBound && tun0.events == EventCounts(recreations: 1, deletions: 2))
        // Its repeat is not counted again.
        let (again, _) = try run(lines + [e(1.7, i("tun0", 1, rx: 150))])
        #expect(again.totals(for: "tun0") == tun0)
    }

    @Test func aRenamedEventMovesTheSeriesAndLinesStayInTimeOrderAcrossNamespaces() throws {
        let renamed = #"{"t": 0.5, "event": "renamed", "from": "eth0", "interface": {"name": "wan0", "index": 2}}"#
        let (engine, _) = try run([s(0, i("eth0", 2, rx: 100)), renamed, s(1, i("wan0", 2, rx: 300))])
        #expect(totals(engine, "wan0") == [200, 0, 0, 0] && engine.totals(for: "wan0")?.quality == .exact)
        #expect(engine.totals(for: "wan0")?.events == EventCounts())
        // A line earlier than the one before is an error, whatever the
        // namespaces of the two.
        let ctr = #"{"t": 0.4, "interfaces": [{"name": "eth0", "netns": "ctr-1", "rx_bytes": 1, "tx_bytes": 1, "rx_packets": 1, "tx_packets": 1}]}"#
        #expect(throws: TraceError.self) { try readTrace([s(0, i("eth0", 2, rx: 100)), renamed, ctr].joined(separator: "\n")) }
    }
}
