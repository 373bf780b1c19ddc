import IfmeterCore
import Testing

/// ifmeter's own namespace events in traces and in the engine: an instance
/// entered (its interfaces' indexes start over, so a deletion with an
/// ended instance's index is no repeat), and one that came and went unread
/// (its namespace's totals are lower bounds from then on).
@Suite struct NamespaceEventTests {
    func i(_ netns: String, _ name: String, _ index: Int, tx: UInt64) -> String {
        #"{"netns":"\#(netns)","name":"\#(name)","index":\#(index),"rx_bytes":0,"tx_bytes":\#(tx),"rx_packets":0,"tx_packets":0}"#
    }

    func totals(_ engine: DeltaEngine, _ netns: String, _ name: String) -> (tx: UInt64, quality: Quality, deletions: Int)? {
        engine.totals(for: SeriesKey(netns: netns, name: name)).map { ($0.totals.txBytes, $0.quality, $0.events.deletions) }
    }

    /// Two instances of namespace `n`, each with its `sc0` at index 2, both
    /// born and gone between the same two samples: without the second
    /// instance's `namespace-entered`, its deletion reads as a repeat of the
    /// first (v1.1) and its bytes are lost; with it, both count, exact.
    @Test func anEnteredNamespacesDeletionWithAReusedIndexIsANewInstance() throws {
        let lines = [
            #"{"t":0,"interfaces":[]}"#,
            #"{"t":0.1,"event":"namespace-entered","netns":"n"}"#,
            #"{"t":0.3,"event":"deleted","interface":\#(i("n", "sc0", 2, tx: 1000))}"#,
            #"{"t":0.4,"event":"namespace-entered","netns":"n"}"#,
            #"{"t":0.6,"event":"deleted","interface":\#(i("n", "sc0", 2, tx: 700))}"#,
            #"{"t":0.7,"event":"deleted","interface":\#(i("n", "sc0", 2, tx: 700))}"#,
            #"{"t":1,"interfaces":[]}"#,
        ]
        let (engine, _) = try replay(lines.joined(separator: "\n"))
        let sc0 = try #require(totals(engine, "n", "sc0"))
        #expect(sc0.tx == 1700 && sc0.quality == .exact && sc0.deletions == 2, "the repeat at 0.7 still counts once: \(sc0)")
        // The same trace read by a v1.1 reader, which skips the events.
        let plain = lines.filter { !$0.contains("namespace-entered") }
        let (older, _) = try replay(plain.joined(separator: "\n"))
        #expect(totals(older, "n", "sc0")?.tx == 1000, "without the events, the contract takes the second for a repeat")
    }

    /// An instance lost: every series of its namespace is a lower bound,
    /// one made after it too; other namespaces are untouched.
    @Test func aLostNamespaceMakesItsSeriesLowerBounds() throws {
        let text = [
            #"{"t":0,"interfaces":[\#(i("n", "sc0", 2, tx: 0)),\#(i("m", "sc0", 2, tx: 0))]}"#,
            #"{"t":1,"interfaces":[\#(i("n", "sc0", 2, tx: 500)),\#(i("m", "sc0", 2, tx: 500))]}"#,
            #"{"t":1.5,"event":"namespace-lost","netns":"n"}"#,
            #"{"t":2,"interfaces":[\#(i("n", "sc0", 2, tx: 600)),\#(i("n", "sc1", 3, tx: 50)),\#(i("m", "sc0", 2, tx: 600))]}"#,
        ].joined(separator: "\n")
        let (engine, _) = try replay(text)
        #expect(totals(engine, "n", "sc0")?.quality == .lowerBound && totals(engine, "n", "sc0")?.tx == 600)
        #expect(totals(engine, "n", "sc1")?.quality == .lowerBound, "made after the loss: still short of what the lost instance had")
        #expect(totals(engine, "m", "sc0")?.quality == .exact)
        // Zeroed totals start after the loss: exact again.
        var zeroed = engine
        zeroed.zeroTotals()
        zeroed.apply(
            .sample(
                Sample(
                    time: 3,
                    interfaces: [
                        InterfaceSample(
                            name: "sc2", netns: "n", index: 4, counters: Counters(rxBytes: 0, txBytes: 9, rxPackets: 0, txPackets: 0))
                    ])))
        #expect(zeroed.totals(for: SeriesKey(netns: "n", name: "sc2"))?.quality == .exact)
    }

    @Test func theEventsRoundTripThroughATrace() throws {
        for kind in [NamespaceEvent.Kind.entered, .lost] {
            let record = TraceRecord.namespace(NamespaceEvent(time: 2.5, netns: "ctr-1", kind: kind))
            let line = TraceWriter.line(record)
            #expect(line.contains(#""event":"namespace-\#(kind.rawValue)""#))
            let (_, records) = try readTrace(line)
            #expect(records == [record])
        }
        var reader = TraceReader()
        #expect(throws: TraceError.self) { try reader.read(line: Array(#"{"t":1,"event":"namespace-lost"}"#.utf8)) }
    }

    /// Events of one reading in time order, a namespace entered before the
    /// deletions in it at a tie.
    @Test func aReadingListsEventsInTimeOrder() {
        let gone = DeletionEvent(
            time: 1,
            interface: InterfaceSample(
                name: "sc0", netns: "n", index: 2, counters: Counters(rxBytes: 0, txBytes: 1, rxPackets: 0, txPackets: 0)))
        var events = LinkEvents(
            deleted: [gone], renamed: [RenameEvent(time: 2, index: 3, from: "a", to: "b")],
            namespaces: [NamespaceEvent(time: 1, netns: "n", kind: .entered)])
        events.sortByTime()
        #expect(events.records.map(\.time) == [1, 1, 2])
        if case .namespace = events.records[0] {} else { Issue.record("the namespace first at a tie: \(events.records)") }
    }
}
