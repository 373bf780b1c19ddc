import IfmeterCore
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
