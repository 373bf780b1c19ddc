import IfmeterCore
import Testing

/// Five-minute slots and limits: pure functions of time and zone.
@Suite struct FiveMinuteSplitTests {
    @Test func slotsSplitByTimeAndSumToTheWhole() {
        // 12:03:00 to 12:13:00 UTC: 2 min, 5 min, 3 min.
        let start = 1_796_040_180.0
        let shares = FiveMinuteSplit.split(Counters(rxBytes: 1000, txBytes: 10, rxPackets: 10, txPackets: 1), from: start, to: start + 600)
        #expect(shares.map(\.start) == [1_796_040_000, 1_796_040_300, 1_796_040_600])
        #expect(shares.map(\.counters.rxBytes) == [200, 500, 300])
        #expect(shares.map(\.counters.txBytes).reduce(0, +) == 10 && shares.map(\.counters.txPackets).reduce(0, +) == 1)
        // An end exactly on a boundary belongs to the slot before it.
        #expect(
            FiveMinuteSplit.split(Counters(rxBytes: 1, txBytes: 0, rxPackets: 1, txPackets: 0), from: 1_796_040_000, to: 1_796_040_300).map(\.start)
                == [1_796_040_000])
        // Bad times: everything in the end's slot.
        #expect(
            FiveMinuteSplit.split(Counters(rxBytes: 9, txBytes: 0, rxPackets: 1, txPackets: 0), from: .nan, to: 1_796_040_299).map(\.start) == [
                1_796_040_000
            ])
        #expect(FiveMinuteSplit.slotStart(-1) == -300)
    }

    @Test func labelsAreLocalWithTheOffset() {
        let kathmandu = LocalZone { _ in 5 * 3600 + 45 * 60 }
        let p = PeriodCalendar(zone: kathmandu).period(.fiveMinutes, containing: 1_796_040_299)
        #expect(p.label == "2026-11-30 17:45+05:45" && p.end - p.start == 300)
    }

    @Test func limitsParse() {
        #expect(PeriodLimit.parse("day=2GB") == PeriodLimit(period: .day, bytes: 2_000_000_000))
        #expect(PeriodLimit.parse("hour=1KiB") == PeriodLimit(period: .hour, bytes: 1024))
        for bad in ["week=1GB", "day=", "day=0", "=1GB", "day", "day=x"] { #expect(PeriodLimit.parse(bad) == nil, "\(bad)") }
    }
}
