import Foundation
import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import IfmeterStore
import IfmeterTestSupport
import Testing

/// Issue 29, finding 2: a save that fails is counted, said once per cause,
/// retried at its pace, and leaves the final status failing; a state file
/// deleted or replaced under its writer is written anew at its path.
@Suite struct StateSaveTests {
    func script(samples: Int) -> [ScriptedSource.Step] {
        (0..<samples).map { n in .sample(Double(n), [("eth0", 2, UInt64(n) * 1000, UInt64(n) * 10)]) }
    }

    @Test func aFailingSaveIsCountedSaidOnceAndRetriedAtItsPace() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try StateStore(path: dir + "/state.db", host: "h", bootID: "boot-1", now: 1_796_040_000)
        // Fails at 0, 5 and 10 s; works from 15 s.
        let flaky = FlakyStore(store, failures: 3)
        let persistence = StatePersistence(store: flaky, every: 1)
        persistence.retryEvery = 5
        let (p, c) = pipeline(script(samples: 20), persistence: persistence, limit: 20)
        let said = CapturedLog()
        p.add(sink: StateSaveLog(zone: .utc, log: said.log))
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        let lines = said.lines
        // Not every sample: the failing save is tried every 5 s; then every
        // second (its pace) from 15 s to 19 s, and once at the end.
        #expect(flaky.attempts == 3 + 5 + 1, "\(flaky.attempts) attempts")
        let failing = c.updates.compactMap(\.persistence).filter { $0.lastError != nil }
        #expect(failing.count == 15, "failing from the first sample to the save at 15 s")
        #expect(c.updates[14].health.state?.failures == 3 && c.updates[14].health.state?.failing == true)
        #expect(c.updates[14].health.state?.lastSaveTime == nil, "no save has worked yet")
        let last = try #require(c.updates.last?.health.state)
        #expect(last.failures == 3 && !last.failing && last.saves == 5 && last.lastSaveTime == 1_796_040_000)
        #expect(lines.count == 2, "one line for the cause, one when it works again: \(lines)")
        #expect(lines.first?.contains("database or disk is full") == true && lines.first?.contains("Everything counted since") == true)
        #expect(lines.first?.contains("retrying every 5 s") == true, "\(lines)")
        #expect(lines.last == "saving state to \(dir)/state.db works again, after 3 failed saves")
        #expect(StateSaveLog.finalFailure(try #require(p.persistence?.status)) == nil)
        // Nothing was lost: every byte reached the file once.
        #expect(try StateStore.usage(path: dir + "/state.db", granularity: .day).map(\.counters.rxBytes) == [19_000])
    }

    @Test func aLastSaveThatFailsIsTheFinalWord() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try StateStore(path: dir + "/state.db", host: "h", bootID: "boot-1", now: 1_796_040_000)
        let flaky = FlakyStore(store, failures: 0)
        let persistence = StatePersistence(store: flaky, every: 1)
        final class FailLate: PipelineSink {
            let flaky: FlakyStore
            init(_ flaky: FlakyStore) { self.flaky = flaky }
            func receive(_ update: borrowing PipelineUpdate) { if update.sequence == 5 { flaky.failures = 1000 } }
        }
        let (p, _) = pipeline(script(samples: 8), persistence: persistence, limit: 8)
        p.add(sink: FailLate(flaky))
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        let status = try #require(p.persistence?.status)
        let line = try #require(StateSaveLog.finalFailure(status, zone: .utc))
        #expect(line.contains("the last save of the state file \(dir)/state.db failed (database or disk is full)"), "\(line)")
        #expect(line.contains("what was counted since the last good save at 2026-11-30T12:00:00Z is not in it"), "\(line)")
    }

    @Test func aStateFileDeletedOrReplacedUnderItsWriterIsWrittenAnew() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: 1_796_040_000)
        let persistence = StatePersistence(store: store, every: 1)
        final class Meddler: PipelineSink {
            let path: String
            init(_ path: String) { self.path = path }
            func receive(_ update: borrowing PipelineUpdate) {
                if update.sequence == 3 { unlink(path) }
                if update.sequence == 6 {
                    unlink(path)
                    _ = FileManager.default.createFile(atPath: path, contents: Data("not ifmeter's".utf8))
                }
            }
        }
        let (p, c) = pipeline(script(samples: 10), persistence: persistence, limit: 10)
        p.add(sink: Meddler(path))
        let said = CapturedLog()
        p.add(sink: StateSaveLog(zone: .utc, log: said.log))
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        let lines = said.lines
        #expect(c.updates.allSatisfy { $0.persistence?.lastError == nil })
        #expect(c.updates.last?.health.state?.recreations == 2)
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.contains("was deleted under this ifmeter") == true)
        let aside = try #require(try FileManager.default.contentsOfDirectory(atPath: dir).first { $0.hasPrefix("state.db.replaced-") })
        #expect(
            lines.last
                == "state file \(path) was replaced by another file under this ifmeter: that file was moved to \(dir)/\(aside), and this ifmeter's written anew at \(path)"
        )
        #expect(try String(contentsOfFile: dir + "/" + aside, encoding: .utf8) == "not ifmeter's", "what was put there is kept")
        // Everything counted is in the file at the path, once.
        #expect(try StateStore.usage(path: path, granularity: .day).map(\.counters.rxBytes) == [9_000])
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix(".state.db.tmp-") }
        #expect(files.isEmpty, "no temporary file is left: \(files)")
    }
}

/// Issue 31: plan gauges (serve's families, live's quota bars) follow the
/// samples, not the saves.
@Suite struct PlanFeedTests {
    final class Seen {
        var gauges: [[PlanGauge]] = []
    }

    @Test func planGaugesFollowTheSamplesBetweenSaves() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: 1_796_040_000)
        try store.setPlan(Plan(pattern: "eth0", cycleStartDay: 1, quotaBytes: 5_000, direction: .rx))
        // Saved at the first sample only.
        let persistence = StatePersistence(store: store, every: 1000)
        let steps: [ScriptedSource.Step] = (0..<10).map { n in .sample(Double(n), [("eth0", 2, UInt64(n) * 1000, 0)]) }
        let (p, c) = pipeline(steps, persistence: persistence, limit: 10)
        let seen = Seen()
        p.add(enricher: PlanFeed(persistence: persistence) { seen.gauges.append($0) })
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        #expect(c.updates.compactMap(\.persistence?.saves).max() == 1, "one save, at the first sample")
        #expect(seen.gauges.map { $0.first?.usedBytes ?? 0 } == (0..<10).map { UInt64($0) * 1000 }, "each sample's bytes at once")
        // Over the quota at 6,000 bytes, as soon as it is.
        #expect(seen.gauges[6].first.map { $0.usedBytes > $0.quotaBytes ?? 0 } == true)
        // The projection follows too (the cycle began on the 1st; now is the 30th at noon).
        let last = try #require(seen.gauges.last?.first)
        #expect(last.projectedBytes == PlanGauge.projection(used: 9_000, start: last.cycleStart, end: last.cycleEnd, now: 1_796_040_000))
    }

    /// A plan and an alias another ifmeter commits while the writer runs
    /// are on the next sample's gauges: the feed asks the writer's own
    /// connection whether another committed (SQLite's data_version), not
    /// the WAL's size and time, which change before the commit is visible
    /// (one loaded run of RunningPlanTests read the file in that window and
    /// showed no plan until the next save; the window itself, inside
    /// SQLite's commit, cannot be held open from here).
    @Test func aPlanCommittedByAnotherIfmeterIsOnTheNextSample() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: 1_796_040_000)
        let persistence = StatePersistence(store: store, every: 1000)
        let steps: [ScriptedSource.Step] = (0..<8).map { n in .sample(Double(n), [("eth0", 2, UInt64(n) * 1000, 0)]) }
        let (p, _) = pipeline(steps, persistence: persistence, limit: 8)
        /// Commits through a connection of its own, as `ifmeter plan set`
        /// and `state alias` do, after the enrichers of sample `at` ran.
        final class Rival: PipelineSink {
            let path: String
            var samples = 0
            init(_ path: String) { self.path = path }
            func finished() {}
            func receive(_ update: borrowing PipelineUpdate) {
                samples += 1
                guard samples == 3 || samples == 5 else { return }
                do {
                    let editor = try StateStore(path: path, host: "h", bootID: "boot-1", now: 1_796_040_000, role: .editor)
                    if samples == 3 {
                        try editor.setPlan(Plan(pattern: "eth0", cycleStartDay: 1, quotaBytes: 5_000, direction: .rx))
                    } else {
                        try editor.setAlias("eth0", "uplink")
                    }
                } catch {
                    Issue.record("the rival's commit: \(error)")
                }
            }
        }
        let seen = Seen()
        final class Aliases { var seen: [[SeriesKey: String]] = [] }
        let aliases = Aliases()
        p.add(enricher: PlanFeed(persistence: persistence, deliver: { seen.gauges.append($0) }, aliases: { aliases.seen.append($0) }))
        p.add(sink: Rival(path))
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        // Delivered when they change: none for samples 1-3, then each
        // sample's bytes from the 4th (the first save, at sample 1, holds
        // 0; the rest is counted since).
        #expect(seen.gauges.map { $0.first?.usedBytes ?? 0 } == [0, 3000, 4000, 5000, 6000, 7000], "\(seen.gauges)")
        #expect(aliases.seen.last == [SeriesKey(name: "eth0"): "uplink"], "the alias at the 6th sample: \(aliases.seen)")
        #expect(aliases.seen.count == 2, "none, then the alias: \(aliases.seen)")
    }
}

/// Issue 31: vnStat's remaining table features, `--begin/--end`, `--limit`
/// and an average rate per row.
@Suite struct UsageRangeTests {
    /// 1 MB an hour on 2026-11-29 and 2026-11-30 (UTC) until noon, now.
    func table(begin: Int64? = nil, end: Int64? = nil, limit: Int? = nil) -> UsageTable {
        let day29: Int64 = 1_795_910_400 // 2026-11-29T00:00:00Z
        let slices = (0..<36).map { h in
            UsageSlice(
                name: "eth0", kind: .ethernet, start: day29 + Int64(h) * 3600, seconds: 3600,
                counters: Counters(rxBytes: 1_000_000, txBytes: 0, rxPackets: 1000, txPackets: 0), quality: .exact)
        }
        return UsageTable(
            slices: slices, plans: [], granularity: .day, zone: .utc, now: 1_796_040_000, begin: begin, end: end, limit: limit)
    }

    @Test func everyRowHasItsSecondsAndAverageRate() throws {
        let rows = try #require(table().interfaces.first?.rows)
        #expect(rows.map(\.period.label) == ["2026-11-29", "2026-11-30"])
        #expect(rows.map(\.seconds) == [86400, 43200], "a past day whole, today until now")
        #expect(rows[0].averageBitsPerSecond == 24_000_000 * 8 / 86400.0)
        #expect(rows[1].averageBitsPerSecond == 12_000_000 * 8 / 43200.0)
        let csv = table().csv().split(separator: "\n")
        #expect(csv[0].hasSuffix(",estimate,seconds,average_bits_per_second"))
        #expect(csv[2].hasSuffix(",true,43200,2222.222"), "\(csv[2])")
        let json = table().json()
        guard case .array(let interfaces)? = json["interfaces"], case .array(let periods)? = interfaces.first?["periods"] else {
            throw TestFailure("no periods")
        }
        #expect(periods.first?["seconds"] == .number(86400) && periods.first?["average_bits_per_second"]?.doubleValue == 24_000_000 * 8 / 86400.0)
        #expect(json["schema_version"] == .number(6))
        #expect(table().text(path: "s.db").contains("AVG RATE"))
    }

    @Test func beginAndEndSumOnlyWhatIsBetween() throws {
        // From 2026-11-29T18:00 to 2026-11-30T06:00: 6 hours of each day.
        let rows = try #require(table(begin: 1_795_975_200, end: 1_796_018_400).interfaces.first?.rows)
        #expect(rows.map(\.counters.rxBytes) == [6_000_000, 6_000_000])
        #expect(rows.map(\.seconds) == [21600, 21600], "the seconds covered, not the days'")
        // A begin after the usage: nothing.
        #expect(table(begin: 1_796_100_000).interfaces.first?.rows.isEmpty ?? true)
    }

    @Test func limitKeepsTheLatestRows() throws {
        #expect(table(limit: 1).interfaces.first?.rows.map(\.period.label) == ["2026-11-30"])
        #expect(table(limit: 5).interfaces.first?.rows.count == 2)
    }
}

/// The review of issue 29's rewrite: a file another ifmeter writes at the
/// path is never moved aside, nor its WAL removed.
@Suite struct AnotherWriterAtThePathTests {
    @Test func aFileAnotherWriterHoldsIsLeftAlone() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/state.db"
        let store = try StateStore(path: path, host: "h", bootID: "boot-1", now: 1_796_040_000)
        let persistence = StatePersistence(store: store, every: 1)
        final class Rival: PipelineSink {
            let path: String
            var rival: StateStore?
            init(_ path: String) { self.path = path }
            func receive(_ update: borrowing PipelineUpdate) {
                guard update.sequence == 3 else { return }
                for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
                // Another ifmeter starts on the path: its file, its lock.
                rival = try? StateStore(path: path, host: "h", bootID: "boot-1", now: 1_796_040_100)
            }
        }
        let rival = Rival(path)
        let (p, c) = pipeline(
            (0..<6).map { n in .sample(Double(n), [("eth0", 2, UInt64(n) * 1000, 0)]) }, persistence: persistence, limit: 6)
        p.add(sink: rival)
        let said = CapturedLog()
        p.add(sink: StateSaveLog(zone: .utc, log: said.log))
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        let lines = said.lines
        #expect(rival.rival != nil)
        #expect(c.updates.last?.persistence?.lastError != nil, "the save fails while the other holds the path")
        #expect(lines.contains { $0.contains("another ifmeter now writes the file at this path") }, "\(lines)")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(!names.contains { $0.contains(".replaced-") }, "nothing moved aside: \(names)")
        #expect(c.updates.last?.health.state?.recreations == 0)
    }
}

/// A save at local midnight: a cycle that ends then has what it held on
/// disk as it ends, and plan gauges read the new cycle from the file.
@Suite struct MidnightSaveTests {
    final class Wall: @unchecked Sendable {
        var time: Double
        init(_ time: Double) { self.time = time }
    }

    final class Tick: PipelineSink {
        let wall: Wall
        init(_ wall: Wall) { self.wall = wall }
        func receive(_ update: borrowing PipelineUpdate) { wall.time += 1 }
    }

    @Test func aSaveComesAtLocalMidnightWhateverThePace() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try StateStore(path: dir + "/state.db", host: "h", bootID: "boot-1", now: 1_796_083_000)
        // Saves an hour apart; the wall clock reads 23:59:58 UTC at the first sample.
        let persistence = StatePersistence(store: store, every: 3600, zone: .utc)
        let wall = Wall(1_796_083_198)
        let p = Pipeline(
            source: ScriptedSource((0..<5).map { n in .sample(Double(n), [("eth0", 2, UInt64(n) * 1000, 0)]) }),
            configuration: PipelineConfiguration(interval: 1, sampleLimit: 5), persistence: persistence,
            clock: PipelineClock(monotonic: { 0 }, wall: { wall.time }))
        let c = Collector()
        p.add(sink: c)
        p.add(sink: Tick(wall))
        var waiter = CountingWaiter(waits: 100)
        p.run(&waiter)
        #expect(c.updates.compactMap(\.persistence?.saves) == [1, 1, 2, 2, 2], "the first sample's save, then midnight's")
    }
}
