import Foundation
import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import IfmeterStore
import IfmeterTestSupport
import Testing

/// Keeps every update the pipeline publishes (explicitly: `kept()`).
final class Collector: PipelineSink {
    var updates: [KeptUpdate] = []
    var finishes = 0
    func receive(_ update: borrowing PipelineUpdate) { updates.append(update.kept()) }
    func finished() { finishes += 1 }
}

/// Keeps a view of the totals from the updates alone, as the scrape cache
/// does, and what the changed series were as each update told them.
final class ViewKeeper: PipelineSink {
    var view = TotalsView<InterfaceTotals> { $0 }
    var changedPresence: [[Bool]] = []
    func receive(_ update: borrowing PipelineUpdate) {
        view.apply(update)
        changedPresence.append(update.changed.map(\.present))
    }
}

/// Lets the loop go on `waits` times, without sleeping.
struct CountingWaiter: PipelineWaiter {
    var waits: Int
    mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool {
        waits -= 1
        return waits >= 0
    }
}

/// A clock that never sleeps: monotonic time advances a little per read,
/// and the wall clock is fixed (noon, 2026-11-30 UTC).
let forgedClock = PipelineClock(monotonic: { 0 }, wall: { 1_796_040_000 })

func pipeline(
    _ steps: [ScriptedSource.Step], filter: InterfaceFilter = InterfaceFilter(), persistence: StatePersistence? = nil,
    limit: Int? = nil, stopOnFailure: Bool = false
) -> (Pipeline, Collector) {
    let pipeline = Pipeline(
        source: ScriptedSource(steps),
        configuration: PipelineConfiguration(interval: 1, filter: filter, sampleLimit: limit, stopOnFailure: stopOnFailure),
        persistence: persistence, clock: forgedClock)
    let collector = Collector()
    pipeline.add(sink: collector)
    return (pipeline, collector)
}

func temporaryFolder() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-pipeline-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

@Suite(.blocking) struct PipelineTests {
    @Test func aFailedSamplePublishesNoDeltasAndSamplingGoesOn() throws {
        let (p, c) = pipeline(
            [
                .sample(0, [("eth0", 2, 1000, 500)]),
                .sample(1, [("eth0", 2, 1600, 700)]),
                .failed("netlink went away"),
                .failed(),
                .sample(4, [("eth0", 2, 2000, 900)]),
            ], limit: 3)
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        #expect(c.updates.count == 5)
        #expect(c.updates.map(\.sequence) == [1, 2, 3, 4, 5])
        #expect(c.updates[0].isBaseline && c.updates[0].deltas.map(\.change) == [.baseline])
        for failed in c.updates[2...3] {
            guard case .failed(let error) = failed.outcome else {
                Issue.record("expected a failure")
                continue
            }
            #expect(error.call == "scripted read")
            #expect(failed.deltas.isEmpty && failed.changed.isEmpty && failed.reading == nil, "a failure adds nothing")
        }
        #expect(c.updates[2].health.sampleErrors == 1 && c.updates[3].health.sampleErrors == 2)
        #expect(c.updates[4].health.lastError == nil && c.updates[4].health.samples == 3)
        // The interval after the failures spans them: 1000 bytes in 3 s.
        let last = try #require(c.updates[4].deltas.first)
        #expect(last.counters.rxBytes == 400 && last.seconds == 3)
        #expect(p.totals(for: SeriesKey(name: "eth0"))?.totals.rxBytes == 1000)
        #expect(c.finishes == 1)
    }

    @Test func stopOnFailureEndsTheLoop() {
        let (p, c) = pipeline([.sample(0, [("eth0", 2, 1, 1)]), .failed(), .sample(2, [("eth0", 2, 2, 2)])], stopOnFailure: true)
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        #expect(c.updates.count == 2)
        #expect(p.health.sampleErrors == 1)
    }

    @Test func deletionsApplyBeforeTheirSample() throws {
        // tun0 deleted with its final counters, recreated before the sample.
        let (p, c) = pipeline(
            [
                .sample(0, [("tun0", 7, 100, 100)]),
                .sample(1, [("tun0", 9, 30, 10)], deleted: [scriptedDeletion(0.5, "tun0", 7, 150, 120)]),
            ], limit: 2)
        var waiter = CountingWaiter(waits: 10)
        p.run(&waiter)
        let update = c.updates[1]
        #expect(update.deltas.map(\.change) == [.deleted, .recreated])
        #expect(update.reading?.events.deleted.count == 1)
        let totals = try #require(p.totals(for: SeriesKey(name: "tun0")))
        #expect(totals.totals.rxBytes == 50 + 30 && totals.totals.txBytes == 20 + 10)
        #expect(totals.quality == .exact && totals.events.deletions == 1 && totals.events.recreations == 1)
    }

    @Test func anOverrunMakesWhatWentAwayALowerBound() throws {
        let (p, _) = pipeline(
            [
                .sample(0, [("eth0", 2, 100, 100), ("veth1", 5, 100, 100)]),
                // veth1 went away while notifications were lost.
                .sample(1, [("eth0", 2, 200, 200)], overruns: 1),
            ], limit: 2)
        var waiter = CountingWaiter(waits: 10)
        p.run(&waiter)
        #expect(p.health.overruns == 1)
        #expect(p.totals(for: SeriesKey(name: "veth1"))?.quality == .lowerBound)
        #expect(p.totals(for: SeriesKey(name: "eth0"))?.quality == .exact, "an interface still there lost nothing")
    }

    @Test func publishingCostsWhatChanged() {
        let idle = (0..<50).map { ("v\($0)", $0 + 10, UInt64(1000), UInt64(1000)) }
        let busy = [("eth0", 2, UInt64(5000), UInt64(5000))]
        let (p, c) = pipeline(
            [
                .sample(0, idle + busy),
                .sample(1, idle + busy),
                .sample(2, idle + [("eth0", 2, 6000, 5000)]),
                .sample(3, Array(idle.dropLast()) + [("eth0", 2, 6000, 5000)]),
            ], limit: 4)
        let keeper = ViewKeeper()
        p.add(sink: keeper)
        var waiter = CountingWaiter(waits: 10)
        p.run(&waiter)
        #expect(c.updates[0].changed.count == 51, "the baseline brings every interface")
        #expect(c.updates[1].changed.isEmpty, "nothing moved, nothing published")
        #expect(c.updates[1].deltas.count == 51, "every interface still has its interval")
        #expect(c.updates[2].changed.map(\.name) == ["eth0"])
        #expect(c.updates[3].changed.map(\.name) == ["v49"] && keeper.changedPresence[3] == [false])
        // A view kept from the changes alone equals the engine's totals
        // (but for `lastSeen`, which is as of each series' last change).
        func unseen(_ list: [InterfaceTotals]) -> [InterfaceTotals] {
            list.map {
                var copy = $0
                copy.lastSeen = 0
                return copy
            }
        }
        let same = unseen(keeper.view.sorted()) == unseen(p.totals)
        #expect(same, "the view kept from changes differs from the engine's totals")
    }

    @Test func withoutIdleDeltasOnlyWhatHappenedIsPublished() {
        let idle = (0..<50).map { ("v\($0)", $0 + 10, UInt64(1000), UInt64(1000)) }
        let source = ScriptedSource([
            .sample(0, idle + [("eth0", 2, 5000, 5000)]),
            .sample(1, idle + [("eth0", 2, 5000, 5000)]),
            .sample(2, idle + [("eth0", 2, 6000, 5000)]),
        ])
        var configuration = PipelineConfiguration(sampleLimit: 3)
        configuration.idleDeltas = false
        let p = Pipeline(source: source, configuration: configuration, clock: forgedClock)
        let c = Collector()
        p.add(sink: c)
        var waiter = CountingWaiter(waits: 10)
        p.run(&waiter)
        #expect(c.updates[0].deltas.isEmpty, "a baseline counts nothing to add up")
        #expect(c.updates[1].deltas.isEmpty)
        #expect(c.updates[2].deltas.map(\.name) == ["eth0"] && c.updates[2].deltas.first?.counters.rxBytes == 1000)
    }

    @Test func seriesLifetimeForgetsAndSaysSo() {
        let source = ScriptedSource([
            .sample(0, [("eth0", 2, 1, 1), ("veth1", 5, 1, 1)]),
            .sample(1, [("eth0", 2, 2, 2)]),
            .sample(5, [("eth0", 2, 3, 3)]),
        ])
        let p = Pipeline(
            source: source, configuration: PipelineConfiguration(seriesLifetime: 2, sampleLimit: 3), clock: forgedClock)
        let c = Collector()
        p.add(sink: c)
        let keeper = ViewKeeper()
        p.add(sink: keeper)
        var waiter = CountingWaiter(waits: 10)
        p.run(&waiter)
        #expect(c.updates[2].forgotten == [SeriesKey(name: "veth1")])
        #expect(keeper.view.sorted().map(\.name) == ["eth0"])
    }

    @Test func theFilterIsAppliedOnceToSamplesAndEvents() throws {
        // kinds from kernel facts, not names: "wlan9" is ethernet here.
        let wifi = InterfaceSample(
            name: "eth9", index: 4, classification: Classification(kind: .wifi, evidence: "sysfs:phy80211"),
            counters: Counters(rxBytes: 1, txBytes: 1, rxPackets: 1, txPackets: 1))
        let named = scriptedInterface("wlan9", 5, 1, 1, kind: .ethernet)
        let gone = DeletionEvent(time: 0.5, interface: scriptedInterface("wlp1", 6, 9, 9, kind: .ethernet))
        let (p, c) = pipeline(
            [
                .reading(SourceReading(sample: Sample(time: 0, interfaces: [wifi, named]))),
                .reading(SourceReading(events: LinkEvents(deleted: [gone]), sample: Sample(time: 1, interfaces: [wifi, named]))),
            ], filter: InterfaceFilter(kinds: [.wifi]), limit: 2)
        var waiter = CountingWaiter(waits: 10)
        p.run(&waiter)
        #expect(c.updates.allSatisfy { $0.reading?.sample.interfaces.map(\.name) == ["eth9"] })
        #expect(c.updates[1].reading?.events.deleted.isEmpty == true, "the ethernet deletion is filtered out too")
        #expect(p.totals.map(\.name) == ["eth9"])
    }

    @Test func zeroingTotalsPublishesTheChange() throws {
        let (p, c) = pipeline([.sample(0, [("eth0", 2, 1, 1)]), .sample(1, [("eth0", 2, 500, 1)])], limit: 2)
        var waiter = CountingWaiter(waits: 10)
        p.run(&waiter)
        p.zeroTotals()
        let zeroed = try #require(c.updates.last)
        #expect(zeroed.outcome == .zeroed)
        #expect(zeroed.changed.map(\.key) == [SeriesKey(name: "eth0")] && zeroed.deltas.isEmpty)
        #expect(p.totals(for: SeriesKey(name: "eth0"))?.totals.rxBytes == 0)
    }
}

/// A state store that fails its first `failures` saves, then saves to a
/// real state file.
final class FlakyStore: StateSaving {
    let store: StateStore
    var failures: Int
    var attempts = 0

    init(_ store: StateStore, failures: Int) {
        self.store = store
        self.failures = failures
    }

    var restored: [DeltaEngine.SavedSeries] { store.restored }
    var sameBoot: Bool { store.sameBoot }
    var info: PeriodReport.State { store.info }

    func save(_ saved: [DeltaEngine.SavedSeries], usage: [SeriesKey: UsageEntry], wallTime: Double, full: Bool) throws(StoreError) {
        attempts += 1
        if failures > 0 {
            failures -= 1
            throw StoreError.sqlite(path: store.path, call: "sqlite3_step", message: "database or disk is full")
        }
        try store.save(saved, usage: usage, wallTime: wallTime, full: full)
    }
}

@Suite(.blocking) struct PersistenceThroughThePipelineTests {
    /// eth0 counts 1000 bytes in, 10 out, per second; samples fail now and then.
    func script(samples: Int, failEvery: Int) -> [ScriptedSource.Step] {
        var steps: [ScriptedSource.Step] = []
        for n in 0..<samples {
            if n > 0, n % failEvery == 0 { steps.append(.failed()) }
            steps.append(.sample(Double(n), [("eth0", 2, UInt64(n) * 1000, UInt64(n) * 10)]))
        }
        return steps
    }

    @Test func aStateFileThatFailsToSaveLosesNothing() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: 1_796_040_000)
        let flaky = FlakyStore(store, failures: 3)
        let persistence = StatePersistence(store: flaky, every: 2)
        let (p, c) = pipeline(script(samples: 12, failEvery: 4), persistence: persistence, limit: 12)
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        #expect(flaky.attempts > 3, "saves were tried again")
        #expect(c.updates.contains { $0.persistence?.lastError != nil }, "the failure is reported")
        #expect(c.updates.last?.persistence?.lastError == nil, "and cleared once a save works")
        let rows = try StateStore.usage(path: path, granularity: .day)
        #expect(rows.map(\.counters.rxBytes) == [11_000], "every byte reached the usage table once")
        #expect(rows.first?.quality == .exact)
    }

    @Test func exportPeriodsAddUpToTheStateFileAfterFailedSamples() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: 1_796_040_000)
        let (p, c) = pipeline(
            script(samples: 20, failEvery: 3), persistence: StatePersistence(store: store, every: 5), limit: 20)
        // What export does with each update: its period entries.
        final class Periods: PipelineSink {
            var accumulator = PeriodAccumulator()
            func receive(_ update: borrowing PipelineUpdate) { accumulator.add(update.deltas) }
        }
        let periods = Periods()
        p.add(sink: periods)
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        #expect(c.updates.filter { if case .failed = $0.outcome { true } else { false } }.count == 6)
        let exported = periods.accumulator.take()[SeriesKey(name: "eth0")]?.counters
        let saved = try StateStore.usage(path: path, granularity: .day).first?.counters
        #expect(exported?.rxBytes == 19_000 && exported?.txBytes == 190)
        #expect(saved?.rxBytes == exported?.rxBytes && saved?.txBytes == exported?.txBytes, "export and the state file agree")
        #expect(p.totals.first?.totals.rxBytes == 19_000)
    }
}

/// What a kill -9 leaves: the pipeline is dropped without `finish`.
@Suite(.blocking) struct KilledPipelineTests {
    let noon = 1_796_040_000.0

    /// Runs `steps` (one sample each) on the state at `path`; `finish` is
    /// a clean stop, its absence a kill -9. Returns the engine's totals.
    @discardableResult
    func run(_ path: String, _ steps: [ScriptedSource.Step], finish: Bool) throws -> [SeriesKey: InterfaceTotals] {
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: noon)
        let (p, _) = pipeline(steps, persistence: StatePersistence(store: store, every: 3600))
        for _ in steps { p.step() }
        if finish { p.finish() }
        return Dictionary(uniqueKeysWithValues: p.totals.map { ($0.key, $0) })
    }

    @Test func theBaselineIsSavedAtTheFirstSample() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        // Killed after two samples, long before the first save was due.
        try run(path, [.sample(0, [("eth0", 2, 1000, 10)]), .sample(1, [("eth0", 2, 3000, 20)])], finish: false)
        let totals = try run(path, [.sample(5, [("eth0", 2, 9000, 50)])], finish: true)
        let eth0 = try #require(totals[SeriesKey(name: "eth0")])
        #expect(eth0.totals.rxBytes == 8000 && eth0.totals.txBytes == 40, "every byte since the first sample")
        #expect(eth0.quality == .exact)
        let rows = try StateStore.usage(path: path, granularity: .day)
        #expect(rows.map(\.counters.rxBytes) == [8000] && rows.first?.quality == .exact)
    }

    @Test func afterAKillWhatTheCountersCannotShowIsALowerBound() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        // eth1 goes away while ifmeter is dead: its traffic after the last
        // save is unknown. eth0 goes on: its counters show everything.
        try run(
            path, [.sample(0, [("eth0", 2, 1000, 10), ("eth1", 3, 500, 5)]), .sample(1, [("eth0", 2, 2000, 10), ("eth1", 3, 900, 5)])],
            finish: false)
        var totals = try run(path, [.sample(5, [("eth0", 2, 4000, 10)])], finish: true)
        #expect(totals[SeriesKey(name: "eth0")]?.quality == .exact && totals[SeriesKey(name: "eth0")]?.totals.rxBytes == 3000)
        #expect(totals[SeriesKey(name: "eth1")]?.quality == .lowerBound, "eth1's last traffic may be missing")
        let rows = try StateStore.usage(path: path, granularity: .day)
        #expect(rows.first { $0.name == "eth1" }?.quality == .lowerBound, "and its usage says so")
        #expect(rows.first { $0.name == "eth0" }?.quality == .exact)

        // After a clean stop nothing is lost: eth0 stays exact.
        totals = try run(path, [.sample(9, [("eth0", 2, 5000, 10)])], finish: true)
        #expect(totals[SeriesKey(name: "eth0")]?.quality == .exact && totals[SeriesKey(name: "eth0")]?.totals.rxBytes == 4000)
    }
}

@Suite(.blocking) struct TotalsViewTests {
    /// Interfaces come, go and are forgotten at random; after every update
    /// the view kept from the changes equals the engine's totals, in order.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5])
    func aViewKeptFromChangesFollowsTheEngine(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var steps: [ScriptedSource.Step] = []
        var counters: [String: UInt64] = [:]
        for t in 0..<40 {
            var interfaces: [(String, Int, UInt64, UInt64)] = []
            for n in 0..<60 where UInt64.random(in: 0..<4, using: &rng) != 0 || t == 0 {
                let name = "if\(n * 7919 % 97)"
                counters[name, default: 0] += UInt64.random(in: 0..<3, using: &rng) * 100
                interfaces.append((name, n + 1, counters[name]!, 0))
            }
            steps.append(.sample(Double(t), interfaces))
        }
        let p = Pipeline(
            source: ScriptedSource(steps), configuration: PipelineConfiguration(seriesLifetime: 2, sampleLimit: 40),
            clock: forgedClock)
        final class Keeper: PipelineSink {
            var view = TotalsView<InterfaceTotals> { $0 }
            func receive(_ update: borrowing PipelineUpdate) { view.apply(update) }
        }
        let keeper = Keeper()
        p.add(sink: keeper)
        // After each update, the view kept from its changes alone is the
        // engine's every total.
        var mismatches = 0
        for _ in 0..<40 {
            p.step()
            let engine = p.totals
            if keeper.view.sorted().map(\.key) != engine.map(\.key)
                || zip(keeper.view.sorted(), engine).contains(where: { $0.totals != $1.totals || $0.present != $1.present })
            {
                mismatches += 1
            }
        }
        #expect(mismatches == 0, "seed \(seed)")
        #expect(keeper.view.count == p.totals.count && keeper.view.count > 10)
    }

    /// A key listed twice among an update's changes (the engine lists each
    /// once, but nothing else says so) is still one row, whether new keys
    /// are inserted one by one (up to 8) or merged in.
    @Test(arguments: [3, 20])
    func aKeyListedTwiceIsOneRow(interfaces: Int) {
        let step = ScriptedSource.Step.sample(0, (0..<interfaces).map { ("if\($0)", $0 + 1, UInt64(100 * $0), 0) })
        let p = Pipeline(source: ScriptedSource([step]), configuration: PipelineConfiguration(sampleLimit: 1), clock: forgedClock)
        final class Doubler: PipelineSink {
            var view = TotalsView<InterfaceTotals> { $0 }
            func receive(_ update: borrowing PipelineUpdate) {
                view.apply(changed: update.changed + update.changed.reversed(), forgotten: update.forgotten)
            }
        }
        let doubler = Doubler()
        p.add(sink: doubler)
        var waiter = CountingWaiter(waits: 10)
        p.run(&waiter)
        #expect(doubler.view.keys == p.totals.map(\.key), "\(doubler.view.keys.map(\.name))")
    }
}
