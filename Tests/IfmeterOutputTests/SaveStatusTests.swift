import IfmeterCore
import IfmeterOutput
import Testing

/// How `usage` judges a state file's last save: stale past two of the
/// writer's save intervals, whatever the writer's state; and no time read
/// from a file makes it trap.
@Suite struct SaveStatusTests {
    let zone = LocalZone.utc
    let saved = 1_796_040_000.0

    @Test func staleOnlyPastTwoSaveIntervals() {
        let status = SaveStatus(savedAt: saved, saveEvery: 300, writer: .running)
        #expect(!status.isStale(now: saved + 600))
        #expect(status.isStale(now: saved + 600.5))
        #expect(status.warning(now: saved + 600, zone: zone) == nil)
        #expect(status.warning(now: saved + 601, zone: zone)?.hasPrefix("WARNING: these figures are as of 2026-11-30T12:00:00+00:00") == true)
        // A file from before the interval was recorded: 10 s is assumed.
        #expect(SaveStatus(savedAt: saved, saveEvery: nil, writer: .running).isStale(now: saved + 21))
        #expect(!SaveStatus(savedAt: nil, saveEvery: 1, writer: .none).isStale(now: saved + 1e9))
    }

    @Test(arguments: [
        (SaveStatus.Writer.running, "by the ifmeter writing it now", "it may be hung"),
        (.stopped, "when ifmeter stopped cleanly", "ifmeter stopped"),
        (.stoppedUncleanly, "without a clean stop", "without a clean stop"),
    ])
    func eachWriterStateIsSaidInWords(writer: SaveStatus.Writer, fresh: String, stale: String) {
        let status = SaveStatus(savedAt: saved, saveEvery: 10, writer: writer)
        #expect(status.sentence(now: saved + 1, zone: zone).contains(fresh))
        #expect(status.warning(now: saved + 3600, zone: zone)?.contains(stale) == true)
        let json = status.json(now: saved + 3600, zone: zone, path: "/s.db")
        #expect(json["writer"]?.stringValue == writer.rawValue && json["stale"] == .bool(true))
        #expect(json["saved_at"]?.stringValue == "2026-11-30T12:00:00+00:00")
    }

    /// Issue 29, finding 9: a writer whose clock ran a day ahead, then was
    /// killed, left a save "in the future": usage said "(0 ms ago)" and
    /// --check said under. A save later than now (past a few seconds) is
    /// not current: the warning says the writer's clock was ahead or this
    /// one stepped back, and under cannot be proven.
    @Test(arguments: [SaveStatus.Writer.stoppedUncleanly, .running, .stopped])
    func aSaveInTheFutureIsNotCurrent(writer: SaveStatus.Writer) throws {
        let status = SaveStatus(savedAt: saved + 86400, saveEvery: 300, writer: writer)
        #expect(status.isStale(now: saved))
        let warning = try #require(status.warning(now: saved, zone: zone))
        #expect(warning.hasPrefix("WARNING: these figures are as of 2026-12-01T12:00:00+00:00, 1 d 0 h in the future"), "\(warning)")
        #expect(warning.contains("clock") && warning.contains("ahead") && warning.contains("stepped back"), "\(warning)")
        #expect(!warning.contains("ago") && !status.sentence(now: saved, zone: zone).contains("ago"))
        let json = status.json(now: saved, zone: zone, path: "/s.db")
        #expect(json["stale"] == .bool(true) && json["note"]?.stringValue == warning)
        var table = UsageTable(slices: [], plans: [], granularity: .cycle, zone: zone, now: Int64(saved))
        table.saves = status
        table.wallTime = saved
        #expect(table.check(plans: []).lines.first == warning, "--check says it first")
        // A few seconds ahead is the same clock read twice, not a step.
        let soon = SaveStatus(savedAt: saved + SaveStatus.futureTolerance, saveEvery: 300, writer: writer)
        #expect(!soon.isStale(now: saved) && soon.warning(now: saved, zone: zone) == nil)
        #expect(soon.sentence(now: saved, zone: zone).contains("(just now)"), "\(soon.sentence(now: saved, zone: zone))")
    }

    /// Issue 29, finding 9: `saved=nan` printed "an unknown time (0 ms
    /// ago)" and was never stale. A save time that is no time (NaN,
    /// infinite, past the years 0001-9999) is said as unknown, with no age,
    /// and the file is not current.
    @Test(arguments: [Double.nan, .infinity, -.infinity, 1e300, -1e13])
    func aSaveTimeThatIsNoTimeIsUnknown(savedAt: Double) throws {
        for writer in [SaveStatus.Writer.running, .stopped, .stoppedUncleanly, .none] {
            let status = SaveStatus(savedAt: savedAt, saveEvery: 300, writer: writer)
            #expect(status.isStale(now: saved), "\(savedAt) \(writer)")
            let warning = try #require(status.warning(now: saved, zone: zone))
            let sentence = status.sentence(now: saved, zone: zone)
            for text in [warning, sentence] {
                #expect(!text.contains("ago") && !text.contains(" ms"), "no age for no time: \(text)")
                #expect(text.contains("cannot be read"), "\(text)")
            }
            let json = status.json(now: saved, zone: zone, path: "/s.db")
            #expect(json["stale"] == .bool(true) && json["saved_at"] == .null)
        }
    }

    /// A save interval no ifmeter writes (NaN, 0, negative, past 365 days)
    /// is no interval: the default one judges staleness, so a file is
    /// never current for ever.
    @Test func aSaveIntervalThatIsNoneFallsBackToTheDefault() {
        for every in [Double.nan, 0, -5, .infinity, 1e308] {
            let status = SaveStatus(savedAt: saved, saveEvery: every, writer: .stoppedUncleanly)
            #expect(status.interval == 10 && status.isStale(now: saved + 21), "\(every)")
        }
    }

    /// A crafted file's times: far future, far past, not finite.
    @Test func noTimeTraps() {
        for savedAt in [-1e300, 1e300, 9.3e18, -9.3e18, Double.infinity, -Double.infinity] {
            let status = SaveStatus(savedAt: savedAt, saveEvery: 1e308, writer: .stoppedUncleanly)
            _ = status.sentence(now: saved, zone: zone)
            _ = status.warning(now: saved, zone: zone)
            _ = status.json(now: saved, zone: zone, path: "p")
        }
        #expect(Units.duration(.nan) == "an unknown time")
        #expect(Units.duration(1e300) == "over 10^15 s")
    }
}
