import IfmeterCore
import IfmeterPipeline
import IfmeterStore
import Testing

/// What the pipeline keeps for the usage tables between saves: deltas put
/// in the local hours their wall-clock intervals span.
@Suite struct HourlyUsageTests {
    let midnight = 1_796_083_200.0 // 2026-12-01 00:00 UTC

    func delta(_ rx: UInt64, seconds: Double?, at time: Double, change: DeltaChange = .steady, quality: Quality = .exact) -> InterfaceDelta {
        InterfaceDelta(
            name: "eth0", classification: Classification(kind: .ethernet, evidence: "test"), index: 2, change: change,
            counters: Counters(rxBytes: rx, txBytes: 0, rxPackets: rx / 100, txPackets: 0), seconds: seconds, quality: quality, time: time)
    }

    @Test func anIntervalAcrossMidnightIsSplitByWallTime() {
        var usage = HourlyUsage(zone: .utc)
        // Monotonic 500 is wall midnight + 4: the interval [midnight-6, midnight+4].
        usage.add([delta(1000, seconds: 10, at: 500)], sampleTime: 500, wallTime: midnight + 4)
        // A deletion final read 2 s before the sample: [midnight+1, midnight+2].
        usage.add([delta(300, seconds: 1, at: 600 - 2, quality: .lowerBound)], sampleTime: 600, wallTime: midnight + 4)
        // Baselines count nothing.
        usage.add([delta(999, seconds: nil, at: 700, change: .baseline)], sampleTime: 700, wallTime: midnight + 5)
        let taken = usage.take()[SeriesKey(name: "eth0")] ?? []
        #expect(taken.map(\.start) == [Int64(midnight) - 3600, Int64(midnight)])
        #expect(taken.map(\.counters.rxBytes) == [600, 400 + 300])
        #expect(taken.map(\.quality) == [.exact, .lowerBound])
        #expect(usage.take().isEmpty, "take starts afresh")
    }

    @Test func aFailedSaveGivesItsHoursBack() {
        var usage = HourlyUsage(zone: .utc)
        usage.add([delta(100, seconds: 1, at: 10)], sampleTime: 10, wallTime: midnight + 10)
        let taken = usage.take()
        usage.add([delta(50, seconds: 1, at: 11)], sampleTime: 11, wallTime: midnight + 11)
        usage.putBack(taken)
        #expect(usage.take()[SeriesKey(name: "eth0")]?.map(\.counters.rxBytes) == [150])
    }
}
