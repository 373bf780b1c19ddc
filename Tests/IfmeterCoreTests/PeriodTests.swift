import Foundation
import IfmeterCore
import IfmeterOutput
import IfmeterTestSupport
import Testing

/// Period splitting with a forged clock: a pure function of (wall time,
/// zone), the zone from tzdata through Foundation (no TZ, no root).
@Suite struct PeriodTests {
    static func zone(_ identifier: String) -> LocalZone {
        let tz = TimeZone(identifier: identifier)!
        return LocalZone { tz.secondsFromGMT(for: Date(timeIntervalSince1970: Double($0))) }
    }

    let berlin = PeriodTests.zone("Europe/Berlin")

    /// Unix time of a Berlin wall-clock time, from Foundation (independent
    /// of the code under test).
    func at(_ y: Int, _ m: Int, _ d: Int, _ h: Int = 0, _ min: Int = 0, _ s: Int = 0) -> Double {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "Europe/Berlin")!
        let date = calendar.date(from: DateComponents(year: y, month: m, day: d, hour: h, minute: min, second: s))!
        return date.timeIntervalSince1970
    }

    /// A forged sampler: intervals of uneven length (0.3 s to 17 min) from
    /// `start` to `end`, each with a pseudo-random byte count.
    func traffic(from start: Double, to end: Double, seed: UInt64) -> [(Double, Double, Counters)] {
        var state = seed
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        var t = start
        var out: [(Double, Double, Counters)] = []
        while t < end {
            let length = min(end - t, 0.3 + Double(next() % 1_020_000) / 1000)
            let c = Counters(rxBytes: next() % 5_000_000, txBytes: next() % 700_000, rxPackets: next() % 4000, txPackets: next() % 900)
            out.append((t, t + length, c))
            t += length
        }
        return out
    }

    /// Splits the forged traffic and checks that every byte lands in exactly
    /// one hour and one period of each kind, and that each hour's share is
    /// its time's share.
    func checkEveryByteLandsOnce(from start: Double, to end: Double, cycleDay: Int, seed: UInt64) throws -> [UsageSlice] {
        var sent = Counters.zero
        var slices: [UsageSlice] = []
        for (a, b, c) in traffic(from: start, to: end, seed: seed) {
            sent.add(c)
            let shares = HourSplit.split(c, from: a, to: b, zone: berlin)
            var sum = Counters.zero
            for s in shares {
                sum.add(s.counters)
                // The share's hour overlaps the interval.
                #expect(Double(s.hourStart) < b && Double(berlin.nextHour(s.hourStart)) > a - 1)
                slices.append(UsageSlice(name: "eth0", kind: .ethernet, start: s.hourStart, seconds: 3600, counters: s.counters, quality: .exact))
            }
            #expect(sum == c.required, "an interval's shares add up to it")
            if shares.count == 2 {
                // Proportional by time (within a byte of rounding).
                let boundary = Double(shares[1].hourStart)
                let expected = Double(c.rxBytes) * (boundary - a) / (b - a)
                #expect(abs(Double(shares[0].counters.rxBytes) - expected) <= 1 + Double(c.rxBytes) * 0.001 / (b - a))
            }
        }
        let calendar = PeriodCalendar(zone: berlin)
        for kind in [UsagePeriodKind.hour, .day, .month, .year, .cycle] {
            let periods = calendar.group(slices, by: kind, cycleDay: cycleDay)
            var total = Counters.zero
            for p in periods { total.add(p.counters) }
            #expect(total == sent, "\(kind): every byte is in exactly one period")
            // Periods do not overlap and each slice's hour is inside its period.
            for (x, y) in zip(periods, periods.dropFirst()) { #expect(x.period.end <= y.period.start, "\(kind) periods overlap") }
            for s in slices {
                let p = calendar.period(kind, containing: s.start, cycleDay: cycleDay)
                #expect(p.start <= s.start && s.start < p.end && berlin.nextHour(s.start) <= p.end, "\(kind): an hour crosses its period's end")
            }
        }
        return slices
    }

    @Test func midnightIsSplitByTime() {
        let midnight = at(2026, 5, 12)
        let shares = HourSplit.split(
            Counters(rxBytes: 1000, txBytes: 10, rxPackets: 4, txPackets: 1), from: midnight - 5, to: midnight + 5, zone: berlin)
        #expect(shares.map(\.hourStart) == [Int64(midnight) - 3600, Int64(midnight)])
        #expect(shares.map(\.counters.rxBytes) == [500, 500])
        #expect(shares.map(\.counters.txBytes) == [5, 5])
        // An interval ending exactly on the hour stays in the hour before.
        let exact = HourSplit.split(Counters(rxBytes: 7, txBytes: 0, rxPackets: 1, txPackets: 0), from: midnight - 60, to: midnight, zone: berlin)
        #expect(exact.map(\.hourStart) == [Int64(midnight) - 3600])
        let calendar = PeriodCalendar(zone: berlin)
        #expect(calendar.period(.day, containing: Int64(midnight) - 1).label == "2026-05-11")
        #expect(calendar.period(.day, containing: Int64(midnight)).label == "2026-05-12")
    }

    @Test func crossesMidnightAndAMonthEnd() throws {
        let slices = try checkEveryByteLandsOnce(from: at(2026, 1, 31, 22, 17), to: at(2026, 2, 1, 2, 3), cycleDay: 1, seed: 1)
        let months = PeriodCalendar(zone: berlin).group(slices, by: .month)
        #expect(months.map(\.period.label) == ["2026-01", "2026-02"])
        #expect(months.first?.period.end == Int64(at(2026, 2, 1)))
    }

    @Test func cycleDay31InFebruaryIsClampedAndCyclesTile() throws {
        let calendar = PeriodCalendar(zone: berlin)
        let mid = calendar.period(.cycle, containing: Int64(at(2026, 2, 15)), cycleDay: 31)
        #expect(mid.label == "2026-01-31")
        #expect(mid.start == Int64(at(2026, 1, 31)) && mid.end == Int64(at(2026, 2, 28)))
        let next = calendar.period(.cycle, containing: Int64(at(2026, 2, 28, 0, 0, 1)), cycleDay: 31)
        #expect(next.label == "2026-02-28" && next.end == Int64(at(2026, 3, 31)))
        // Leap year: 29 February.
        #expect(calendar.period(.cycle, containing: Int64(at(2028, 2, 29, 12)), cycleDay: 30).label == "2028-02-29")
        // Consecutive cycles over two years meet with no gap.
        var t = Int64(at(2026, 1, 1))
        var previous = calendar.period(.cycle, containing: t, cycleDay: 31)
        while t < Int64(at(2028, 1, 1)) {
            t = previous.end
            let p = calendar.period(.cycle, containing: t, cycleDay: 31)
            #expect(p.start == previous.end)
            previous = p
        }
        // Traffic over the February 28th boundary with day 31.
        _ = try checkEveryByteLandsOnce(from: at(2026, 2, 27, 21), to: at(2026, 3, 1, 1), cycleDay: 31, seed: 2)
    }

    @Test func daylightSavingDaysHave23And25Hours() throws {
        let calendar = PeriodCalendar(zone: berlin)
        let spring = calendar.period(.day, containing: Int64(at(2026, 3, 29, 12)))
        #expect(spring.label == "2026-03-29" && spring.end - spring.start == 23 * 3600)
        let autumn = calendar.period(.day, containing: Int64(at(2026, 10, 25, 12)))
        #expect(autumn.label == "2026-10-25" && autumn.end - autumn.start == 25 * 3600)

        let springSlices = try checkEveryByteLandsOnce(from: at(2026, 3, 28, 22, 30), to: at(2026, 3, 30, 1), cycleDay: 29, seed: 3)
        let springHours = calendar.group(springSlices.filter { $0.start >= spring.start && $0.start < spring.end }, by: .hour)
        #expect(springHours.count == 23)
        #expect(!springHours.contains { $0.period.label.hasPrefix("2026-03-29 02:") }, "02:00 does not exist that day")

        let autumnSlices = try checkEveryByteLandsOnce(from: at(2026, 10, 24, 23), to: at(2026, 10, 26, 0, 40), cycleDay: 25, seed: 4)
        let autumnHours = calendar.group(autumnSlices.filter { $0.start >= autumn.start && $0.start < autumn.end }, by: .hour)
        #expect(autumnHours.count == 25)
        #expect(
            autumnHours.filter { $0.period.label.hasPrefix("2026-10-25 02:00") }.map(\.period.label)
                == ["2026-10-25 02:00+02:00", "2026-10-25 02:00+01:00"], "02:00 happens twice, told apart by its offset")
        #expect(berlin.rfc3339(autumn.start) == "2026-10-25T00:00:00+02:00")
        #expect(berlin.rfc3339(autumn.end) == "2026-10-26T00:00:00+01:00")
    }

    @Test func zonesWithHalfHourOffsets() throws {
        let india = PeriodTests.zone("Asia/Kolkata")
        let t: Int64 = 1_780_000_000
        let start = india.hourStart(t)
        #expect(india.civil(start).minute == 0 && start <= t && t - start < 3600)
        #expect(india.nextHour(start) == start + 3600)
    }

    /// What sample's JSON carries as `time`: milliseconds and the offset.
    @Test func rfc3339WithMilliseconds() {
        let cet = LocalZone { _ in 3600 }
        #expect(cet.rfc3339(milliseconds: 1_796_083_200.125) == "2026-12-01T01:00:00.125+01:00")
        #expect(LocalZone.utc.rfc3339(milliseconds: 1_796_083_199.9996) == "2026-11-30T23:59:59.999+00:00")
        #expect(cet.rfc3339(1_796_083_200) == "2026-12-01T01:00:00+01:00")
    }
}

/// A planned interface nothing was saved for yet has no kind to show: not
/// "other" (which is a kind), but "not known" in every output.
@Suite(.blocking) struct UnknownKindTests {
    @Test func aPlannedInterfaceWithNothingSavedHasNoKind() throws {
        let noon: Int64 = 1_700_000_000
        let plans = [Plan(pattern: "wwan*", cycleStartDay: 1, quotaBytes: 1_000_000, direction: .both)]
        let seen = UsageSlice(
            name: "wwan0", kind: .cellular, start: noon - 60, seconds: 60,
            counters: Counters(rxBytes: 10, txBytes: 20, rxPackets: 1, txPackets: 1), quality: .exact)
        let table = UsageTable(slices: [seen], plans: plans, granularity: .cycle, zone: .utc, now: noon, names: ["wwan0", "wwan1"])
        let byName = Dictionary(uniqueKeysWithValues: table.interfaces.map { ($0.stored, $0) })
        #expect(byName["wwan0"]?.kind == .cellular)
        #expect(byName["wwan1"] != nil && byName["wwan1"]?.kind == nil, "planned, nothing saved: \(table.interfaces.map(\.stored))")

        // JSON: null, and the schema says so.
        guard case .array(let list)? = table.json()["interfaces"] else { throw TestFailure("no interfaces") }
        let kinds = Dictionary(uniqueKeysWithValues: list.compactMap { i in i["name"]?.stringValue.map { ($0, i["kind"]) } })
        #expect(kinds["wwan1"] == .some(.null) && kinds["wwan0"] == .some(.string("cellular")))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-usage-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        try JSONWriter().string(table.json()).write(toFile: file, atomically: true, encoding: .utf8)
        let check = try checkJSONSchema([file], schema: "ifmeter-usage.v6.schema.json")
        #expect(check.ok, "\(check.output)")

        // CSV: an empty field; text: said in words.
        let csv = table.csv().split(separator: "\n").filter { $0.hasPrefix("wwan1,") }
        #expect(!csv.isEmpty && csv.allSatisfy { $0.hasPrefix("wwan1,,,cycle,") }, "\(csv)")
        let text = table.text(path: "state.db")
        #expect(text.contains("wwan1 (kind not known yet)") && text.contains("wwan0 (cellular)") && !text.contains("(other)"), "\(text)")

        // serve's plan gauges: no kind label rather than a wrong one.
        let gauges = table.planGauges()
        #expect(gauges.first { $0.name == "wwan1" }?.kind == nil)
        var input = ExpositionInput(interfaces: [], health: ExporterHealth(version: "9.9", source: "netlink", startTime: 0, intervalSeconds: 1))
        input.plans = gauges
        let exposition = String(decoding: PrometheusTextRenderer().render(input), as: UTF8.self)
        #expect(exposition.contains(#"ifmeter_plan_used_bytes{direction="both",interface="wwan1"} 0"#), "\(exposition)")
        #expect(exposition.contains(#"ifmeter_plan_used_bytes{direction="both",interface="wwan0",kind="cellular"} 30"#), "\(exposition)")
    }
}

/// Issue 29, finding 9: rows of 2^63-1 bytes (what a state file's integers
/// hold) summed to 18446744073709551615 labelled exact. A sum that stops at
/// 2^64-1 lost what did not fit: it is a lower bound, in every output that
/// sums stored usage (a period, a row's rx + tx total, usage --oneline, the
/// summary chart's figures, a plan's use).
@Suite struct SaturatedSumTests {
    let noon: Int64 = 1_796_040_000 // 2026-11-30 12:00 UTC
    static let most = UInt64(Int64.max)

    func slice(_ start: Int64, rx: UInt64, tx: UInt64) -> UsageSlice {
        UsageSlice(
            name: "wan0", kind: .ethernet, start: start, seconds: 3600,
            counters: Counters(rxBytes: rx, txBytes: tx, rxPackets: 1, txPackets: 1), quality: .exact)
    }

    /// Three hours of the day, 2^63-1 bytes received in each.
    var overflowing: [UsageSlice] { (0..<3).map { slice(noon - 3600 * Int64($0), rx: Self.most, tx: 0) } }
    /// One hour: rx 2^63-1 twice over in two rows, so rx fits (2^64-2) but
    /// rx + tx does not.
    var overflowingTotal: [UsageSlice] { [slice(noon, rx: Self.most, tx: 2), slice(noon - 3600, rx: Self.most, tx: 0)] }

    @Test func aSumPastTwoToThe64IsALowerBound() {
        let calendar = PeriodCalendar(zone: .utc)
        let day = calendar.group(overflowing, by: .day)
        #expect(day.count == 1 && day[0].counters.rxBytes == .max)
        #expect(day[0].quality == .lowerBound, "it stopped at 2^64-1: at least that")
        let total = calendar.group(overflowingTotal, by: .day)
        #expect(total[0].counters.rxBytes == .max - 1 && total[0].totalBytes == .max)
        #expect(total[0].quality == .lowerBound, "rx + tx stopped at 2^64-1")
        // Two rows that fit stay exact.
        let fits = calendar.group([slice(noon, rx: Self.most, tx: 0), slice(noon - 3600, rx: Self.most, tx: 0)], by: .day)
        #expect(fits[0].counters.rxBytes == .max - 1 && fits[0].quality == .exact)
    }

    @Test func everyOutputMarksTheSaturatedSumAsALowerBound() throws {
        for slices in [overflowing, overflowingTotal] {
            let table = UsageTable(slices: slices, plans: [], granularity: .day, zone: .utc, now: noon)
            let row = try #require(table.interfaces.first?.rows.first)
            #expect(row.quality == .lowerBound)
            #expect(table.text(path: "s.db").contains("≥ 16.0 EiB"), "\(table.text(path: "s.db"))")
            guard case .array(let list)? = table.json()["interfaces"], case .array(let periods)? = list.first?["periods"] else {
                throw TestFailure("no periods")
            }
            #expect(periods.first?["quality"]?.stringValue == "lower-bound")
            #expect(table.csv().contains(",lower-bound,"))

            let line = try #require(UsageOneLine(slices: slices, names: [], kinds: [:], zone: .utc, now: noon).lines.first)
            let fields = line.split(separator: ";", omittingEmptySubsequences: false)
            #expect(fields[7] == "lower-bound" && fields[12] == "lower-bound" && fields[17] == "lower-bound", "\(line)")

            let svg = UsageSummaryChart(slices: slices, plans: [], zone: .utc, now: noon).svg()
            for key in ["today", "cycle", "all"] {
                #expect(svg.contains("data-period=\"\(key)\"") && svg.contains("data-total=\"18446744073709551615\" data-quality=\"lower-bound\""))
            }
            #expect(!svg.contains("data-total=\"18446744073709551615\" data-quality=\"exact\""), "\(svg)")
        }
        // A plan's use of such a cycle: over its quota, and a lower bound.
        let plan = Plan(pattern: "wan0", cycleStartDay: 1, quotaBytes: 1_000_000, direction: .both)
        let table = UsageTable(slices: overflowingTotal, plans: [plan], granularity: .cycle, zone: .utc, now: noon)
        let row = try #require(table.interfaces.first?.rows.first { $0.current })
        #expect(row.plan?.usedBytes == .max && row.quality == .lowerBound)
        let check = table.check(plans: [plan])
        #expect(check.verdict == .over && check.lines.first?.contains("OVER wan0: at least") == true, "\(check.lines)")
    }
}
