@testable import IfmeterCore
@testable import IfmeterOutput
import IfmeterTestSupport
import Testing

/// The pure functions input reaches: parsers give a value only within
/// their range (or nil), and the calendar, hour splitting, chart scale and
/// formatting return an answer for every Int64 and Double, never a trap.
@Suite struct NumericRangeTests {
    /// The extremes every numeric input is driven with, as Doubles.
    static let doubles: [Double] = [
        0, -0.0, -1, 1, 0.5, Double(Int64.max), 9_223_372_036_854_775_808, Double(UInt64.max), 1e19, 1e300, -1e300,
        .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude, .infinity, -.infinity, .nan,
    ]
    static let integers: [Int64] = [0, -1, 1, .max, .min, .max - 1, .min + 1, 253_402_300_799, -62_135_596_800, 1_796_083_200]

    @Test func sizesAreExactUpTo2To63Minus1AndNothingPast() {
        #expect(Units.parseSize("0") == 0)
        #expect(Units.parseSize("1024") == 1024)
        #expect(Units.parseSize("10MB") == 10_000_000)
        #expect(Units.parseSize("512KiB") == 524_288)
        #expect(Units.parseSize("1.5GiB") == 1_610_612_736)
        #expect(Units.parseSize("1.25e9") == 1_250_000_000)
        #expect(Units.parseSize("1e3KB") == 1_000_000)
        #expect(Units.parseSize("9223372036854775807B") == 9_223_372_036_854_775_807, "exact: no Double on the way")
        #expect(Units.parseSize("8388608TiB") == nil, "2^63 exactly")
        #expect(Units.parseSize("8388607TiB") == 8_388_607 << 40)
        for bad in [
            "9223372036854775808", "18446744073709551615", "18446744073709551616B", "1e19B", "1e30TB", "17179869184GiB", "1e309",
            "9.3e18", "inf", "-inf", "nan", "NaN", "-1", "-1B", "+5", "0x10", "1e", "e5", "1.2.3", ".", "", "B", "5 B", "10Gbit", "٣",
        ] {
            #expect(Units.parseSize(bad) == nil, "\(bad)")
        }
        // Spaces around a size are refused, as around every other number
        // (issue 29, finding 10: plan --quota trimmed them).
        for spaced in [" 20GiB ", " 20GiB", "20GiB ", "\t20GiB"] { #expect(Units.parseSize(spaced) == nil, "\(spaced)") }
        #expect(PeriodLimit.parse("day= 20GiB") == nil && PeriodLimit.parse("day=20GiB ") == nil)
    }

    @Test func durationsAndRatesHaveRangesTheirOptionsCheck() {
        #expect(Units.durationRange.contains(Units.parseDuration("1ms")!))
        #expect(Units.durationRange.contains(Units.parseDuration("365d")!))
        #expect(!Units.durationRange.contains(Units.parseDuration("366d")!))
        #expect(!Units.durationRange.contains(Units.parseDuration("0.0009")!))
        #expect(!Units.durationRange.contains(Units.parseDuration("9223372036854775807")!))
        #expect(!Units.durationRange.contains(Units.parseDuration("2562047788015216h")!))
        #expect(Units.parseRate("1e308Tbit") == nil, "an infinite rate is none")
        #expect(Units.rateRange.contains(Units.parseRate("1bit")!) && Units.rateRange.contains(Units.parseRate("1000Tbit")!))
        #expect(!Units.rateRange.contains(Units.parseRate("1001Tbit")!))
        // Everything in range prints as a duration people read.
        #expect(Units.duration(Units.durationRange.upperBound) == "365 d 0 h")
        #expect(Units.duration(Units.durationRange.lowerBound) == "1 ms")
    }

    @Test func theCalendarAnswersForEveryInt64() {
        let calendar = PeriodCalendar(zone: PeriodTests.zone("America/New_York"))
        for t in Self.integers {
            let c = calendar.zone.civil(t)
            #expect((0...10_000).contains(c.year), "\(t): \(c)")
            #expect(calendar.zone.hourStart(t) <= LocalZone.clamped(t))
            #expect(calendar.zone.nextHour(t) > calendar.zone.hourStart(t) || t >= LocalZone.printable.upperBound)
            #expect(calendar.zone.rfc3339(t).count >= 25)
            for kind in UsagePeriodKind.allCases {
                for day in [1, 31] {
                    let p = calendar.period(kind, containing: t, cycleDay: day)
                    #expect(p.start < p.end, "\(kind) \(t)")
                }
            }
        }
        // Inside the range, clamping changes nothing.
        #expect(LocalZone.utc.rfc3339(253_402_300_799) == "9999-12-31T23:59:59+00:00")
        #expect(LocalZone.utc.rfc3339(-62_135_596_800) == "0001-01-01T00:00:00+00:00")
        #expect(LocalZone.utc.rfc3339(.max) == "9999-12-31T23:59:59+00:00")
        #expect(LocalZone.days(.max, 1, .min) == LocalZone.days(1_000_000, 1, -1000), "no overflow, whatever the date")
    }

    @Test func everyStoredStartsPeriodPrintsWithinTheCalendar() {
        let zones = [LocalZone.utc, LocalZone { _ in 14 * 3600 }, LocalZone { _ in -12 * 3600 }]
        for zone in zones {
            let calendar = PeriodCalendar(zone: zone)
            for t in [UsageSlice.startRange.lowerBound, UsageSlice.startRange.upperBound] {
                for kind in UsagePeriodKind.allCases {
                    let p = calendar.period(kind, containing: t, cycleDay: 31)
                    #expect(LocalZone.printable.contains(p.start) && LocalZone.printable.contains(p.end), "\(kind) \(t): \(p)")
                    #expect(p.start <= t && t < p.end, "\(kind) \(t): \(p)")
                }
            }
        }
    }

    @Test func doublesBecomeTimesOnlyWhenACalendarHoldsThem() {
        #expect(LocalZone.second(1_796_083_200.9) == 1_796_083_200)
        #expect(LocalZone.second(-0.5) == -1)
        for t in [1e19, 1e300, -1e300, .infinity, -.infinity, .nan, 253_402_300_800, -62_135_596_801] {
            #expect(LocalZone.second(t) == nil, "\(t)")
        }
        for t in Self.doubles {
            #expect(RFC3339.format(t).count == 24, "\(t): \(RFC3339.format(t))")
            #expect(LocalZone.utc.rfc3339(milliseconds: t).count == 29, "\(t)")
            _ = Units.duration(t)
            _ = Units.fixed(t, 3)
            _ = Units.bytes(t)
            _ = Units.rate(bytesPerSecond: t, bits: true)
            _ = Units.perSecond(t)
        }
        #expect(RFC3339.format(1e300) == "9999-12-31T23:59:59.000Z")
        #expect(RFC3339.format(.nan) == "1970-01-01T00:00:00.000Z")
    }

    /// Any pair of times: every byte lands in exactly one hour, within the
    /// calendar, and the work is bounded (ten years of hours at most).
    @Test func hourSplitTakesAnyTimes() {
        let counters = Counters(rxBytes: .max, txBytes: 12_345, rxPackets: 7, txPackets: 0)
        var random = SplitMix64(seed: 0x6966_6D74)
        var times = Self.doubles + [1_796_083_200, 1_796_083_200 + HourSplit.longestSplitSeconds + 1]
        for _ in 0..<8 { times.append(Double(Int64(bitPattern: random.next()) >> 20)) }
        for start in times {
            for end in times {
                let shares = HourSplit.split(counters, from: start, to: end, zone: .utc)
                #expect(!shares.isEmpty && shares.count <= 10 * 366 * 24 + 1, "\(start) to \(end): \(shares.count)")
                #expect(shares.reduce(UInt64(0)) { $0 &+ $1.counters.rxBytes } == .max, "\(start) to \(end)")
                #expect(shares.allSatisfy { LocalZone.printable.contains($0.hourStart) })
            }
        }
        // Longer than ten years: whole in the end's hour.
        let long = HourSplit.split(counters, from: 0, to: HourSplit.longestSplitSeconds + 5400, zone: .utc)
        #expect(long.count == 1 && long[0].hourStart == Int64(HourSplit.longestSplitSeconds) + 3600)
    }

    @Test func totalsSaturateAndTheChartScaleNeverOverflows() {
        #expect(UInt64.max.saturatingAdd(1) == .max)
        #expect((UInt64(1) << 63).saturatingAdd(UInt64(1) << 63) == .max)
        let huge = Counters(rxBytes: 1 << 63, txBytes: 1 << 63, rxPackets: 0, txPackets: 0)
        #expect(Plan.Direction.both.used(huge) == .max, "not 0, which is under any quota")
        let period = UsagePeriod(label: "2026-12-01", start: 1_796_083_200, end: 1_796_169_600)
        #expect(PeriodUsage(period: period, counters: huge, quality: .exact).totalBytes == .max)
        var random = SplitMix64(seed: 21)
        var peaks: [UInt64] = [0, 1, 5, 6, 1023, 1 << 62, (1 << 63) - 1, 1 << 63, .max - 1, .max]
        for _ in 0..<64 { peaks.append(random.next() >> (random.next() % 64)) }
        for peak in peaks {
            let (step, ticks) = UsageChart.scale(peak)
            let (top, overflow) = step.multipliedReportingOverflow(by: UInt64(ticks))
            #expect(!overflow && top >= peak && step > 0 && (1...5).contains(ticks), "\(peak): \(step) × \(ticks)")
        }
    }

    @Test func theChartDrawsTotalsNear2To64() {
        let slices = [(UInt64(1) << 63) - 1, UInt64(1) << 62, 5].map { bytes in
            UsageSlice(
                name: "eth0", kind: .ethernet, start: 1_796_083_200, seconds: 3600,
                counters: Counters(rxBytes: bytes, txBytes: (1 << 63) - 1, rxPackets: 1, txPackets: 1), quality: .lowerBound)
        }
        for granularity in UsagePeriodKind.allCases {
            let table = UsageTable(
                slices: slices, plans: [Plan(pattern: "eth0", cycleStartDay: 31, quotaBytes: .max, direction: .both)],
                granularity: granularity, top: 3, zone: .utc, now: 1_796_090_000)
            let svg = UsageChart(table: table).svg()
            #expect(svg.hasSuffix("</svg>\n") && svg.contains("16.0 EiB"), "\(granularity)")
            #expect(table.text(path: "p").contains("16.0 EiB"))
            #expect(table.csv().contains("18446744073709551615"))
        }
    }

    @Test func traceTimesPastTheLimitAreRefusedWithTheirValue() throws {
        func read(_ t: String) -> TraceError? {
            var reader = TraceReader()
            do {
                _ = try reader.read(line: Array(#"{"t": \#(t), "interfaces": []}"#.utf8))
                return nil
            } catch {
                return error
            }
        }
        #expect(read("1e12") == nil && read("-1e12") == nil && read("0") == nil)
        for t in ["1e19", "-1e19", "1000000000001", "1e309", "-1e309", "9223372036854775807", "18446744073709551615"] {
            let failure = try #require(read(t), "\(t)")
            #expect(failure.message.contains("from -1e12 to 1e12, got \(t)"), "\(failure.message)")
        }
    }
}
