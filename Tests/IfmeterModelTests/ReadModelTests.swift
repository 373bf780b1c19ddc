import IfmeterCore
import IfmeterModel
import Testing

/// The read model: one row per interface applied once per update, rates
/// worked out once from the update's deltas, each row's since and alias,
/// serve's facts beside them, published as a snapshot that never changes
/// under its reader.
@Suite struct ReadModelTests {
    static let ethernet = Classification(kind: .ethernet, evidence: "test")

    static func totals(_ name: String, netns: String = "", rx: UInt64, tx: UInt64, firstSeen: Double = 100) -> InterfaceTotals {
        InterfaceTotals(
            name: name, netns: netns, classification: ethernet, index: 1, width: .bits64, speedBps: nil, attributes: nil,
            totals: Counters(rxBytes: rx, txBytes: tx, rxPackets: 0, txPackets: 0), quality: .exact, events: EventCounts(),
            baseline: Counters(rxBytes: 1000, txBytes: 2000, rxPackets: 0, txPackets: 0), lastKernelStats: nil, firstSeen: firstSeen,
            lastSeen: firstSeen, present: true, deletedAt: nil)
    }

    static func delta(_ name: String, rx: UInt64, tx: UInt64, seconds: Double?) -> InterfaceDelta {
        InterfaceDelta(
            name: name, classification: ethernet, index: 1, change: .steady, counters: Counters(rxBytes: rx, txBytes: tx, rxPackets: 0, txPackets: 0),
            seconds: seconds, quality: .exact, time: 0)
    }

    static func update(
        _ sequence: Int, sampled: Bool = true, time: Double, wall: Double, changed: [InterfaceTotals], forgotten: [SeriesKey] = [],
        deltas: [InterfaceDelta] = []
    ) -> ModelUpdate {
        ModelUpdate(
            sequence: sequence, sampled: sampled, time: time, wallTime: wall, seconds: 2, changed: changed, forgotten: forgotten, deltas: deltas,
            health: PipelineHealth(source: "test", startTime: 1_796_040_000))
    }

    @Test func rowsAreSortedAndCarryTotalsSinceAndGeneration() {
        let model = ReadModel()
        #expect(model.snapshot().generation == 0)
        #expect(model.snapshot().rows.isEmpty)
        // Monotonic 100 is wall 1_796_040_000: since is the first sight on
        // the wall clock.
        model.apply(
            Self.update(
                1, time: 100, wall: 1_796_040_000,
                changed: [
                    Self.totals("eth1", rx: 5, tx: 6), Self.totals("eth0", rx: 1, tx: 2, firstSeen: 90), Self.totals("a", netns: "ns", rx: 0, tx: 0),
                ]))
        let s = model.snapshot()
        #expect(s.generation == 1)
        #expect(s.rows.map(\.key.description) == ["eth0", "eth1", "ns/a"])
        #expect(s.rows[0].counters.value(.rxBytes) == 1001)
        #expect(s.rows[0].counters.value(.txBytes) == 2002)
        #expect(s.rows[0].since == 1_796_039_990)
        #expect(s.rows[1].since == 1_796_040_000)
        #expect(s.health?.source == "test")
        // The wall clock steps later: a row's since stays its first sight.
        model.apply(Self.update(2, time: 102, wall: 1_796_050_000, changed: [Self.totals("eth0", rx: 9, tx: 9, firstSeen: 90)]))
        #expect(model.snapshot()[SeriesKey(name: "eth0")]?.since == 1_796_039_990)
        #expect(model.snapshot()[SeriesKey(name: "eth0")]?.counters.value(.rxBytes) == 1009)
    }

    @Test func ratesAreWorkedOutOnceFromTheDeltasAndFallToZero() {
        let model = ReadModel()
        model.apply(Self.update(1, time: 100, wall: 1000, changed: [Self.totals("eth0", rx: 0, tx: 0), Self.totals("eth1", rx: 0, tx: 0)]))
        // Two deltas of one interface in one update (a deletion and the
        // new instance) add up; a delta without seconds has no rate.
        model.apply(
            Self.update(
                2, time: 102, wall: 1002, changed: [Self.totals("eth0", rx: 300, tx: 30)],
                deltas: [
                    Self.delta("eth0", rx: 200, tx: 20, seconds: 2), Self.delta("eth0", rx: 100, tx: 10, seconds: 1),
                    Self.delta("eth1", rx: 50, tx: 50, seconds: nil),
                ]))
        var s = model.snapshot()
        #expect(s[SeriesKey(name: "eth0")]?.rxRate == 200)
        #expect(s[SeriesKey(name: "eth0")]?.txRate == 20)
        #expect(s[SeriesKey(name: "eth1")]?.rxRate == 0)
        #expect(Set(s.moved) == [SeriesKey(name: "eth0")])
        // A failed sample keeps the rates; a new totals row keeps them too.
        model.apply(Self.update(3, sampled: false, time: 104, wall: 1004, changed: [Self.totals("eth0", rx: 300, tx: 30)]))
        #expect(model.snapshot()[SeriesKey(name: "eth0")]?.rxRate == 200)
        // The next sample without traffic: the rate is 0 again.
        model.apply(Self.update(4, time: 106, wall: 1006, changed: []))
        s = model.snapshot()
        #expect(s[SeriesKey(name: "eth0")]?.rxRate == 0)
        #expect(s[SeriesKey(name: "eth0")]?.txRate == 0)
        #expect(s.moved == [SeriesKey(name: "eth0")])
    }

    @Test func aSnapshotNeverChangesUnderItsReader() {
        let model = ReadModel()
        model.apply(Self.update(1, time: 100, wall: 1000, changed: [Self.totals("eth0", rx: 1, tx: 1)]))
        let held = model.snapshot()
        model.apply(
            Self.update(
                2, time: 101, wall: 1001, changed: [Self.totals("eth0", rx: 7, tx: 7), Self.totals("eth1", rx: 0, tx: 0)],
                deltas: [Self.delta("eth0", rx: 6, tx: 6, seconds: 1)]))
        model.setRemoteWrite([RemoteWriteStatus(url: "http://r")])
        #expect(held.generation == 1)
        #expect(held.rows.count == 1)
        #expect(held.rows[0].counters.value(.rxBytes) == 1001)
        #expect(held.rows[0].rxRate == 0)
        #expect(held.facts.remoteWrite.isEmpty)
        let now = model.snapshot()
        #expect(now.generation == 2)
        #expect(now.rows.count == 2)
        #expect(now.rows[0].rxRate == 6)
        #expect(now.facts.remoteWrite.map(\.url) == ["http://r"])
    }

    @Test func forgottenRowsGoAndAliasesReachEveryRow() {
        let model = ReadModel()
        model.setAliases([SeriesKey(name: "eth0"): "uplink"])
        #expect(model.snapshot().planChanges == 1)
        model.apply(Self.update(1, time: 100, wall: 1000, changed: [Self.totals("eth0", rx: 0, tx: 0), Self.totals("eth1", rx: 0, tx: 0)]))
        #expect(model.snapshot().rows.map(\.alias) == ["uplink", nil])
        model.setAliases([SeriesKey(name: "eth1"): "backup"])
        #expect(model.snapshot().rows.map(\.alias) == [nil, "backup"])
        #expect(model.snapshot().planChanges == 2)
        // The same aliases again change nothing.
        model.setAliases([SeriesKey(name: "eth1"): "backup"])
        #expect(model.snapshot().planChanges == 2)
        model.apply(Self.update(2, time: 101, wall: 1001, changed: [], forgotten: [SeriesKey(name: "eth1")]))
        #expect(model.snapshot().rows.map(\.name) == ["eth0"])
        #expect(model.snapshot().forgotten == [SeriesKey(name: "eth1")])
    }

    /// An alias given to an idle interface moves its row at the next
    /// update, so that what keeps rows' renderings (the dashboard's
    /// fragments and events) shows it without traffic.
    @Test func anAliasMovesAnIdleRowAtTheNextUpdate() {
        let model = ReadModel()
        model.apply(Self.update(1, time: 100, wall: 1000, changed: [Self.totals("eth0", rx: 0, tx: 0), Self.totals("eth1", rx: 0, tx: 0)]))
        model.apply(Self.update(2, time: 101, wall: 1001, changed: []))
        #expect(model.snapshot().moved.isEmpty, "nothing moved")
        model.setAliases([SeriesKey(name: "eth1"): "backup"])
        model.apply(Self.update(3, time: 102, wall: 1002, changed: []))
        #expect(model.snapshot().moved == [SeriesKey(name: "eth1")])
        model.apply(Self.update(4, time: 103, wall: 1003, changed: []))
        #expect(model.snapshot().moved.isEmpty, "once")
    }

    @Test func serveFactsAreKeptBesideTheRows() {
        let model = ReadModel(revision: "abc")
        model.expectServerErrors([(path: "/usage", status: 500)])
        model.countServerError(path: "/usage.png", status: 503)
        model.countServerError(path: "/usage.png", status: 503)
        model.setHTTPClosed(HTTPConnectionCounts(deadline: 1, idle: 2, evicted: 3, budget: 4))
        model.setProcess(ProcessMetrics(cpuSeconds: 1, residentBytes: 2, virtualBytes: 3, openFDs: 4, maxFDs: 5, startTime: 6))
        let facts = model.snapshot().facts
        #expect(facts.revision == "abc")
        #expect(
            Set(facts.serverErrorCounts) == [
                HTTPServerErrorCount(path: "/usage", status: 500, count: 0), HTTPServerErrorCount(path: "/usage.png", status: 503, count: 2),
            ])
        #expect(facts.httpClosed == HTTPConnectionCounts(deadline: 1, idle: 2, evicted: 3, budget: 4))
        #expect(facts.process?.openFDs == 4)
        // Facts are not the pipeline's: they make no generation.
        #expect(model.snapshot().generation == 0)
    }

    @Test func planGaugesOfTheCurrentCycle() {
        let plan = Plan(pattern: "eth0", cycleStartDay: 1, quotaBytes: 1000, direction: .both)
        // UTC: 2026-12-08 is in the cycle of December.
        let now: Int64 = 1_796_688_000
        let zone = LocalZone.utc
        let december = PeriodCalendar(zone: zone).period(.cycle, containing: now, cycleDay: 1)
        let slices = [
            UsageSlice(
                name: "eth0", kind: .ethernet, start: december.start, seconds: 3600,
                counters: Counters(rxBytes: 100, txBytes: 50, rxPackets: 0, txPackets: 0), quality: .exact),
            // Last month's: not this cycle's use.
            UsageSlice(
                name: "eth0", kind: .ethernet, start: december.start - 3600, seconds: 3600,
                counters: Counters(rxBytes: 7, txBytes: 7, rxPackets: 0, txPackets: 0), quality: .lowerBound),
            UsageSlice(
                name: "eth1", kind: .ethernet, start: december.start, seconds: 3600,
                counters: Counters(rxBytes: 9, txBytes: 9, rxPackets: 0, txPackets: 0), quality: .exact),
        ]
        let key: (String) -> SeriesKey = { SeriesKey(name: $0) }
        let gauges = PlanGauge.current(plans: [plan], slices: slices, names: ["eth0", "eth1"], kinds: [:], zone: zone, now: now, key: key)
        #expect(gauges.count == 1)
        #expect(gauges.first?.usedBytes == 150)
        #expect(gauges.first?.lowerBound == false)
        #expect(gauges.first?.cycleStart == december.start)
        #expect(gauges.first?.cycleEnd == december.end)
        #expect(gauges.first?.lastDay == "2026-12-31")
        // A planned interface nothing was used on this cycle has a gauge of 0.
        let idle = PlanGauge.current(
            plans: [plan], slices: [], names: ["eth0"], kinds: ["eth0": .ethernet], zone: zone, now: now, key: key)
        #expect(idle.map(\.usedBytes) == [0])
        #expect(idle.first?.kind == .ethernet)
    }
}
