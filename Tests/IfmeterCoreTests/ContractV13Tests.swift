import Foundation
import IfmeterCore
import Testing

/// The changes of trace contract v1.3, each worked out by hand from the
/// contract's text on the golden traces `Fixtures/traces/v13-*.jsonl` (the
/// golden reports hold the same figures; these say why they are right).
@Suite struct ContractV13Tests {
    func trace(_ name: String) throws -> String {
        try String(contentsOf: fixtures.appendingPathComponent("traces/\(name).jsonl"), encoding: .utf8)
    }

    func series(_ engine: DeltaEngine, _ name: String, netns: String = "") throws -> InterfaceTotals {
        try #require(engine.totals(for: SeriesKey(netns: netns, name: name)), "no series \(netns)/\(name)")
    }

    func four(_ t: InterfaceTotals) -> [UInt64] { CounterKey.required.map { t.totals.value($0) } }

    // MARK: 1. A repeat is judged against the instances the series ended

    @Test func aLateRepeatOfAnEarlierDeletionIsNotCountedAgain() throws {
        let (engine, _) = try replay(try trace("v13-repeats"))
        // tun0: index 1 ended (+500), index 2 born and gone (+300, one
        // recreation), then index 1's deletion again with its own finals:
        // a repeat. v1.2 compared it with index 2 only and counted 1500 in
        // full, calling 2300 exact where the truth is 800.
        let tun0 = try series(engine, "tun0")
        #expect(four(tun0) == [800, 80, 8, 2])
        #expect(tun0.quality == .exact)
        #expect(tun0.events == EventCounts(recreations: 1, deletions: 2))
    }

    @Test func aRepeatReadAfterTheNextSampleIsStillARepeat() throws {
        let (engine, _) = try replay(try trace("v13-repeats"))
        // tun1: index 4 ended (+200); the next sample shows index 5 (a new
        // instance, in full: +100); index 4's deletion read again after
        // that sample is a repeat, not an event that cannot be placed
        // (v1.2: one more deletion and a lower bound).
        let tun1 = try series(engine, "tun1")
        #expect(four(tun1) == [300, 30, 3, 2])
        #expect(tun1.quality == .exact)
        #expect(tun1.events == EventCounts(recreations: 1, deletions: 1))
    }

    @Test func aRepeatWithOtherFinalsCannotBePlaced() throws {
        let (engine, _) = try replay(try trace("v13-repeats"))
        // tun2: index 6 ended (+100), index 7 born and gone (+50), then
        // index 6 again with rx_bytes 1900 instead of 1100: no counters,
        // one deletion, a lower bound.
        let tun2 = try series(engine, "tun2")
        #expect(four(tun2) == [150, 15, 2, 2])
        #expect(tun2.quality == .lowerBound)
        #expect(tun2.events == EventCounts(recreations: 1, deletions: 3))
    }

    @Test func sixteenEndedInstancesAreRemembered() throws {
        // One sampled instance ended, then 15 more born and gone between
        // samples (indexes 2 to 16), then the first one's deletion again:
        // the 16th instance back, still remembered, a repeat. Each
        // instance adds 10 bytes.
        var lines = [
            #"{"t": 0, "interfaces": [{"name": "tun9", "index": 1, "rx_bytes": 0, "tx_bytes": 0, "rx_packets": 0, "tx_packets": 0}]}"#
        ]
        func deletion(_ t: Double, _ index: Int) -> String {
            #"{"t": \#(t), "event": "deleted", "interface": {"name": "tun9", "index": \#(index), "rx_bytes": 10, "tx_bytes": 0, "rx_packets": 1, "tx_packets": 0}}"#
        }
        lines.append(deletion(0.1, 1))
        for index in 2...16 { lines.append(deletion(0.1 + Double(index) / 100, index)) }
        lines.append(deletion(0.5, 1))
        let (engine, _) = try replay(lines.joined(separator: "\n"))
        let tun9 = try series(engine, "tun9")
        #expect(four(tun9) == [160, 0, 16, 0], "16 instances of 10 bytes, the repeat not counted")
        #expect(tun9.quality == .exact && tun9.events == EventCounts(recreations: 15, deletions: 16))
    }

    @Test func aNamespaceEnteredAnewForgetsTheEndedInstances() throws {
        let (engine, _) = try replay(try trace("v13-namespace-events"))
        // ctr/eth0: index 2 ended (+500), index 3 born and gone (+200);
        // ctr entered anew: index 2's deletion is now another instance,
        // born and gone, in full (+1500), not a repeat of the first.
        let eth0 = try series(engine, "eth0", netns: "ctr")
        #expect(four(eth0) == [2200, 220, 22, 4])
        #expect(eth0.quality == .exact)
        #expect(eth0.events == EventCounts(recreations: 2, deletions: 3))
    }

    // MARK: 2. lower_bound speaks of the report's counters

    @Test func aLowerBoundNamingNoCounterOfTheReportChangesNothing() throws {
        let (engine, _) = try replay(try trace("v13-lower-bound-names"))
        let veth0 = try series(engine, "veth0")
        #expect(four(veth0) == [400, 40, 4, 1])
        #expect(veth0.quality == .exact, "rx_multicast and rx_compressed are not the report's counters")
        let veth1 = try series(engine, "veth1")
        #expect(four(veth1) == [400, 40, 4, 1] && veth1.totals[.rxErrors] == 0)
        #expect(veth1.quality == .lowerBound, "rx_errors is one of the report's counters")
    }

    // MARK: 3. Namespace events

    @Test func aLostNamespaceMakesItsSeriesLowerBoundsAndLeavesLiveOnesAlone() throws {
        let (engine, _) = try replay(try trace("v13-namespace-events"))
        // ctr/eth1 was live when ctr was entered anew: unchanged.
        let eth1 = try series(engine, "eth1", netns: "ctr")
        #expect(four(eth1) == [500, 50, 5, 0] && eth1.quality == .exact && eth1.events == EventCounts())
        // web was lost between two samples: its series is a lower bound,
        // and so is one first seen after the line (counted in full).
        let web = try series(engine, "eth0", netns: "web")
        #expect(four(web) == [250, 25, 2, 0] && web.quality == .lowerBound)
        let late = try series(engine, "eth9", netns: "web")
        #expect(four(late) == [10, 1, 1, 1] && late.quality == .lowerBound)
    }

    @Test func aNamespaceEventWithoutANamespaceIsABadLine() throws {
        for line in [
            #"{"t": 1, "event": "namespace-entered"}"#, #"{"t": 1, "event": "namespace-lost", "netns": ""}"#,
            #"{"t": 1, "event": "namespace-entered", "netns": 3}"#,
        ] {
            #expect(throws: TraceError.self, "\(line)") { try readTrace(line) }
        }
    }

    // MARK: 4. A header is only a header

    @Test func aHeaderThatAlsoCarriesASampleOrAnEventIsABadLine() throws {
        let sample = #""interfaces": [{"name": "eth0", "rx_bytes": 1, "tx_bytes": 1, "rx_packets": 1, "tx_packets": 1}]"#
        for (line, key) in [
            (#"{"trace": "ifmeter/1", "t": 0, \#(sample)}"#, "t"), (#"{"trace": "ifmeter/1", \#(sample)}"#, "interfaces"),
            (#"{"trace": "ifmeter/1", "event": "deleted"}"#, "event"),
        ] {
            do {
                _ = try readTrace(line)
                Issue.record("read without an error: \(line)")
            } catch let error as TraceError {
                #expect(error.line == 1 && error.message.contains("also carries \"\(key)\""), "\(error)")
            }
        }
        // After a blank line the first line with content is the header.
        let (header, records) = try readTrace("\n" + #"{"trace": "ifmeter/1", "platform": "darwin"}"# + "\n" + #"{"t": 0, \#(sample)}"#)
        #expect(header.platform == .darwin && records.count == 1)
    }

    @Test func aTraceKeyOnALaterLineIsABadLine() throws {
        let text = [
            #"{"trace": "ifmeter/1"}"#, #"{"t": 0, "interfaces": []}"#, #"{"trace": "ifmeter/1", "platform": "linux"}"#,
        ].joined(separator: "\n")
        do {
            _ = try readTrace(text)
            Issue.record("two traces joined were read")
        } catch let error as TraceError {
            #expect(error.line == 3, "\(error)")
        }
    }
}
