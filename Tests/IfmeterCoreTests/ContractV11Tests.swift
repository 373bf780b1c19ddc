import IfmeterCore
import IfmeterOutput
import Testing

/// The additions of trace contract v1.1, each worked out by hand, and the
/// cases the differential campaign found, each with the figure that is true.
@Suite struct ContractV11Tests {
    /// A trace from lines written compactly: `S t name index rx tx`
    /// (packets are a hundredth), `E t name index rx tx`.
    func engine(_ lines: [String]) throws -> DeltaEngine {
        try replay(lines.joined(separator: "\n")).0
    }

    func s(_ t: Double, _ interfaces: String...) -> String {
        #"{"t": \#(t), "interfaces": [\#(interfaces.joined(separator: ", "))]}"#
    }

    func i(_ name: String, _ index: Int?, rx: UInt64, tx: UInt64 = 0, extra: String = "") -> String {
        let indexPart = index.map { #""index": \#($0), "# } ?? ""
        return
            #"{"name": "\#(name)", \#(indexPart)"rx_bytes": \#(rx), "tx_bytes": \#(tx), "rx_packets": \#(rx / 100), "tx_packets": \#(tx / 100)\#(extra)}"#
    }

    func e(_ t: Double, _ interface: String) -> String {
        #"{"t": \#(t), "event": "deleted", "interface": \#(interface)}"#
    }

    func rx(_ engine: DeltaEngine, _ name: String, netns: String = "") -> UInt64? {
        engine.totals(for: SeriesKey(netns: netns, name: name))?.totals.rxBytes
    }

    // MARK: lower_bound

    @Test func listedCountersAddNoMoreThanTheirRiseAndMakeALowerBound() throws {
        // A veth: 1,042,000 bytes received after the last sample, then
        // deleted; the kernel's final rx is 0 (its peer was detached first).
        let engine = try engine([
            s(0, i("va", 3, rx: 5000, tx: 7000)),
            e(0.5, i("va", 3, rx: 0, tx: 9000, extra: #", "lower_bound": ["rx_bytes", "rx_packets"]"#)),
        ])
        let va = try #require(engine.totals(for: "va"))
        #expect(va.totals.rxBytes == 0 && va.totals.txBytes == 2000, "tx is complete; rx adds max(0 - 5000, 0)")
        #expect(va.quality == .lowerBound, "the 1,042,000 bytes are missing, so it says so")
        #expect(va.events == EventCounts(deletions: 1))
        // A listed counter that did rise still adds its rise, as a lower bound.
        let risen = try self.engine([
            s(0, i("vb", 4, rx: 5000)),
            e(0.5, i("vb", 4, rx: 5600, extra: #", "lower_bound": ["rx_bytes"]"#)),
        ])
        #expect(rx(risen, "vb") == 600 && risen.totals(for: "vb")?.quality == .lowerBound)
    }

    @Test func aFinalBelowItsLastSampleWasUnderReportedNotReset() throws {
        // The recorded trace: wwan0 (a veth), last sample tx 593,610, the
        // deletion's final tx 613,482 and rx 0.
        let engine = try engine([
            s(0, i("wwan0", 9, rx: 30_000, tx: 400_000)),
            s(1, i("wwan0", 9, rx: 31_000, tx: 593_610)),
            e(1.5, i("wwan0", 9, rx: 0, tx: 613_482)),
        ])
        let wwan0 = try #require(engine.totals(for: "wwan0"))
        #expect(wwan0.totals.txBytes == 193_610 + 19_872, "tx: only the final rise is added, never the final in full")
        #expect(wwan0.totals.rxBytes == 1000, "rx: the final 0 adds nothing")
        #expect(wwan0.quality == .lowerBound && wwan0.events == EventCounts(deletions: 1), "a lower bound, and no reset")
    }

    @Test func aFinalCounterTheLastSampleLackedAddsNothing() throws {
        // Found by the differential check (seed 18, shrunk): gif0's last
        // sample had no rx_errors; its deletion's final has 102. They may
        // be all the errors since it was created: nothing to compare with,
        // so 0, as between two samples; never the final in full.
        let engine = try engine([
            s(0, i("gif0", 67, rx: 1000)),
            s(1, i("gif0", 67, rx: 1500)),
            e(1.5, i("gif0", 67, rx: 1600, extra: #", "rx_errors": 102"#)),
        ])
        let gif0 = try #require(engine.totals(for: "gif0"))
        #expect(gif0.totals.rxBytes == 600 && gif0.totals.value(.rxErrors) == 0)
        #expect(gif0.events == EventCounts(deletions: 1))
        // The same for the instance a rule-4 recreation replaced.
        let replaced = try self.engine([
            s(0, i("tun0", 1, rx: 100)), s(1, i("tun0", 2, rx: 20)),
            e(1.5, i("tun0", 1, rx: 150, extra: #", "rx_errors": 7"#)),
        ])
        #expect(rx(replaced, "tun0") == 70 && replaced.totals(for: "tun0")?.totals.value(.rxErrors) == 0)
    }

    @Test func anIndexlessInstanceBornAndGoneHasAnUnknownIndex() throws {
        // Found while writing the differential check's reference: tun0 was
        // named by a deletion (index 5) before the first sample; after it,
        // a deletion with no index is an instance born and gone (100 in
        // full), whose index is unknown. The next deletion, index 9,
        // matches it ("either unknown"): a repeat, not one more instance.
        let engine = try engine([
            e(0, i("tun0", 5, rx: 100)),
            s(1, i("eth0", 1, rx: 100)),
            e(2, i("tun0", nil, rx: 100)),
            e(3, i("tun0", 9, rx: 100)),
        ])
        let tun0 = try #require(engine.totals(for: "tun0"))
        #expect(tun0.totals.rxBytes == 100 && tun0.events == EventCounts(deletions: 1), "the 5 of an instance before the baseline is not this one's")
    }

    @Test func aRenameBeforeTheFirstSampleLeavesTheBaselineABaseline() throws {
        // Found the same way: a and b named by deletions before the first
        // sample, a renamed onto b, then the first sample shows a. Rule 1:
        // it counts nothing (a had no instance the rename could end).
        let engine = try engine([
            e(0, i("a", 5, rx: 1)),
            e(0, i("b", 6, rx: 1)),
            #"{"t": 0, "event": "renamed", "from": "a", "interface": {"name": "b"}}"#,
            s(1, i("a", 1, rx: 7000)),
            s(2, i("a", 1, rx: 7300)),
        ])
        let a = try #require(engine.totals(for: "a"))
        #expect(a.totals.rxBytes == 300 && a.events == EventCounts() && a.quality == .exact)
    }

    // MARK: netns

    @Test func namespacesKeySeriesAndEventsApplyWithinTheirOwn() throws {
        let engine = try engine([
            s(
                0, i("eth0", 2, rx: 100),
                #"{"name": "eth0", "netns": "ctr-1", "index": 2, "rx_bytes": 1000, "tx_bytes": 0, "rx_packets": 10, "tx_packets": 0}"#),
            s(
                1, i("eth0", 2, rx: 150),
                #"{"name": "eth0", "netns": "ctr-1", "index": 2, "rx_bytes": 1300, "tx_bytes": 0, "rx_packets": 13, "tx_packets": 0}"#),
            e(1.5, #"{"name": "eth0", "netns": "ctr-1", "index": 2, "rx_bytes": 1400, "tx_bytes": 0, "rx_packets": 14, "tx_packets": 0}"#),
            s(2, i("eth0", 2, rx: 170)),
        ])
        #expect(rx(engine, "eth0") == 70 && engine.totals(for: "eth0")?.events.deletions == 0)
        #expect(rx(engine, "eth0", netns: "ctr-1") == 400)
        #expect(engine.totals(for: SeriesKey(netns: "ctr-1", name: "eth0"))?.events.deletions == 1)
        // The report: the own namespace first, a named one says which.
        let report = JSONReportRenderer().value(Report(engine: engine))
        guard case .array(let list) = report["interfaces"] else { throw TestFailure("no interfaces") }
        #expect(list.map { $0["netns"]?.stringValue } == [nil, "ctr-1"])
    }

    // MARK: deletion events in every order

    @Test func aSampleReusingADeletedInstancesIndexIsANewInstance() throws {
        let engine = try engine([
            s(0, i("tun0", 1, rx: 100)), e(0.5, i("tun0", 1, rx: 150)), s(1, i("tun0", 1, rx: 500)), s(2, i("tun0", 1, rx: 1000)),
        ])
        let tun0 = try #require(engine.totals(for: "tun0"))
        #expect(tun0.totals.rxBytes == 1050 && tun0.quality == .exact && tun0.present)
        #expect(tun0.events == EventCounts(recreations: 1, deletions: 1))
    }

    @Test func aDeletionReadAfterTheNextInstancesSampleAddsOnlyItsOwnRise() throws {
        let engine = try engine([
            s(0, i("tun0", 1, rx: 100)), s(1, i("tun0", 2, rx: 20)), e(1.5, i("tun0", 1, rx: 150)),
        ])
        let tun0 = try #require(engine.totals(for: "tun0"))
        #expect(tun0.totals.rxBytes == 70, "20 for the new instance, 50 for the old one's last traffic")
        #expect(tun0.quality == .lowerBound && tun0.events == EventCounts(recreations: 1, deletions: 1))
        // Its repeat changes nothing.
        let again = try self.engine([
            s(0, i("tun0", 1, rx: 100)), s(1, i("tun0", 2, rx: 20)), e(1.5, i("tun0", 1, rx: 150)), e(1.6, i("tun0", 1, rx: 150)),
        ])
        #expect(rx(again, "tun0") == 70 && again.totals(for: "tun0")?.events.deletions == 1)
    }

    @Test func theSameIndexlessDeletionTwiceCountsOnce() throws {
        let engine = try engine([
            s(0, i("tun0", nil, rx: 100)), s(1, i("tun0", nil, rx: 110)), e(1.5, i("tun0", nil, rx: 160)), e(1.6, i("tun0", nil, rx: 160)),
        ])
        let tun0 = try #require(engine.totals(for: "tun0"))
        #expect(tun0.totals.rxBytes == 60 && tun0.quality == .exact && tun0.events == EventCounts(deletions: 1))
    }

    @Test func aDeletionBeforeTheFirstSampleChangesNothing() throws {
        let engine = try engine([e(-1, i("tun0", 1, rx: 50)), s(0, i("tun0", 1, rx: 100)), s(1, i("tun0", 1, rx: 110))])
        let tun0 = try #require(engine.totals(for: "tun0"))
        #expect(tun0.totals.rxBytes == 10 && tun0.quality == .exact && tun0.events == EventCounts())
    }

    @Test func instancesBornAndGoneBetweenSamplesCountInFull() throws {
        let engine = try engine([
            s(0, i("tun0", 1, rx: 100)), e(0.5, i("tun0", 1, rx: 150)), e(0.7, i("tun0", 2, rx: 30)),
            s(1, i("eth0", 5, rx: 1)), e(1.5, i("tap3", 9, rx: 40)),
        ])
        #expect(rx(engine, "tun0") == 80 && engine.totals(for: "tun0")?.quality == .exact)
        #expect(engine.totals(for: "tun0")?.events == EventCounts(recreations: 1, deletions: 2))
        #expect(rx(engine, "tap3") == 40 && engine.totals(for: "tap3")?.events == EventCounts(deletions: 1))
    }

    @Test func anEventThatCannotBePlacedAddsNothingAndSaysSo() throws {
        let engine = try engine([s(0, i("tun0", 1, rx: 100)), s(1, i("tun0", 1, rx: 120)), e(1.5, i("tun0", 7, rx: 999))])
        let tun0 = try #require(engine.totals(for: "tun0"))
        #expect(tun0.totals.rxBytes == 20 && tun0.quality == .lowerBound && tun0.events == EventCounts(deletions: 1))
        #expect(tun0.present, "the sampled instance is still there")
    }

    // MARK: other rules made explicit

    @Test func totalsStopAtTheTopAsALowerBound() throws {
        let engine = try engine([
            s(0, i("a", 1, rx: 0)), s(1, i("a", 1, rx: UInt64.max)), e(1.5, i("a", 1, rx: UInt64.max)), e(1.6, i("a", 9, rx: 10)),
        ])
        let a = try #require(engine.totals(for: "a"))
        #expect(a.totals.rxBytes == UInt64.max && a.quality == .lowerBound)
    }

    @Test func namesAreCodePointsNotCanonicalEquivalents() throws {
        let composed = "tun\u{e9}", decomposed = "tune\u{301}"
        #expect(composed == decomposed, "Swift's == would merge them")
        let engine = try engine([
            s(0, i(composed, 1, rx: 10), i(decomposed, 2, rx: 20)), s(1, i(composed, 1, rx: 15), i(decomposed, 2, rx: 40)),
        ])
        #expect(engine.count == 2)
        #expect(rx(engine, composed) == 5 && rx(engine, decomposed) == 20)
        #expect(engine.interfaces.map(\.name.unicodeScalars.count) == [5, 4], "sorted by code points: U+0065 before U+00E9")
    }

    @Test func aSampleWithoutIndexMakesTheIndexUnknown() throws {
        let engine = try engine([s(0, i("a", 1, rx: 100)), s(1, i("a", nil, rx: 150)), s(2, i("a", 2, rx: 170))])
        let a = try #require(engine.totals(for: "a"))
        #expect(a.totals.rxBytes == 70 && a.quality == .exact && a.events == EventCounts(), "compared as index unknown")
    }

    @Test func aCounterTooBigForItsWidthCannotWrap() throws {
        let engine = try engine([
            s(0, #"{"name": "a", "index": 1, "rx_bytes": 5000000000, "tx_bytes": 0, "rx_packets": 0, "tx_packets": 0}"#),
            s(1, #"{"name": "a", "index": 1, "width": 32, "rx_bytes": 100, "tx_bytes": 0, "rx_packets": 0, "tx_packets": 0}"#),
        ])
        #expect(engine.totals(for: "a")?.events == EventCounts(resets: 1))
        #expect(engine.totals(for: "a")?.quality == .lowerBound)
    }

    @Test func unknownEventTypesAreSkipped() throws {
        let engine = try engine([
            s(0, i("a", 1, rx: 100)), #"{"t": 0.5, "event": "renamed-to-mars", "interface": {"name": "a"}}"#, s(1, i("a", 1, rx: 110)),
        ])
        #expect(rx(engine, "a") == 10)
    }

    @Test func eventsAreNeverTimedAfterTheirSample() {
        var events = LinkEvents(
            deleted: [
                DeletionEvent(
                    time: 5.2, interface: InterfaceSample(name: "tun0", counters: Counters(rxBytes: 1, txBytes: 1, rxPackets: 1, txPackets: 1)))
            ],
            renamed: [RenameEvent(time: 4.0, index: 3, from: "a", to: "b")])
        events.clamp(to: 5.0)
        #expect(events.deleted[0].time == 5.0 && events.renamed[0].time == 4.0)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
