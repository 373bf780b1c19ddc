/// A time zone as the period code needs it: its offset from UTC at any
/// instant. Everything else (local hours, days, months, cycles) is computed
/// from that, so the period code is a pure function of (wall time, zone)
/// and tests inject any zone (Foundation's tzdata) without touching `TZ`.
/// The process's own zone is `LocalZone.system` (IfmeterStore: this module
/// stays platform-neutral).
public struct LocalZone: Sendable {
    /// Seconds east of UTC at a Unix time.
    public let offset: @Sendable (Int64) -> Int

    public init(offset: @escaping @Sendable (Int64) -> Int) { self.offset = offset }

    /// UTC, for tests and machines without a zone.
    public static let utc = LocalZone { _ in 0 }

    /// The instants the period code prints and computes with:
    /// 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z, the four-digit years
    /// of RFC 3339. What reads a time from a file refuses one outside it
    /// (a state file's usage row); the functions here clamp any other
    /// `Int64` into it first, so that none can make their arithmetic
    /// overflow (a label of such a time is its end's, never a trap).
    public static let printable: ClosedRange<Int64> = -62_135_596_800...253_402_300_799
    /// `printable` as messages say it.
    public static let printableText = "a time from 0001-01-01 to 9999-12-31 (Unix time -62135596800 to 253402300799)"

    /// `t` moved into `printable`.
    public static func clamped(_ t: Int64) -> Int64 { min(max(t, printable.lowerBound), printable.upperBound) }

    /// The whole second holding a Unix time given as a `Double` (a wall
    /// clock's, a file's), when it is finite and in `printable`; nil
    /// otherwise (NaN, infinities, 1e300 cannot become an `Int64`).
    public static func second(_ time: Double) -> Int64? {
        guard time.isFinite, time >= Double(printable.lowerBound), time < Double(printable.upperBound) + 1 else { return nil }
        return Int64(time.rounded(.down))
    }

    /// A local date and time.
    public struct Civil: Sendable, Hashable, Comparable {
        public var year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int

        public static func < (a: Civil, b: Civil) -> Bool {
            (a.year, a.month, a.day, a.hour, a.minute, a.second) < (b.year, b.month, b.day, b.hour, b.minute, b.second)
        }
    }

    /// The local date and time of a Unix time.
    public func civil(_ t: Int64) -> Civil {
        let t = Self.clamped(t)
        let local = t + Int64(offset(t))
        let days = local >= 0 ? local / 86400 : (local - 86399) / 86400
        let seconds = Int(local - days * 86400)
        let (y, m, d) = RFC3339.civil(fromDays: days)
        return Civil(year: y, month: m, day: d, hour: seconds / 3600, minute: seconds % 3600 / 60, second: seconds % 60)
    }

    /// The Unix time of a local date and time. A time that does not exist
    /// (skipped by a daylight-saving change) maps to the instant after the
    /// gap; one that exists twice, to the first.
    public func unix(_ year: Int, _ month: Int, _ day: Int, hour: Int = 0) -> Int64 {
        let local = Self.days(year, month, day) * 86400 + Int64(min(max(hour, -1000), 1000)) * 3600
        // Try the offsets around the instant; keep the earliest that maps back.
        let candidates = Set([offset(local - 86400), offset(local), offset(local + 86400)])
            .map { local - Int64($0) }.sorted()
        for t in candidates where t + Int64(offset(t)) == local { return t }
        // In a gap: the first instant whose local time is later.
        let t = local - Int64(offset(local - 86400))
        return t
    }

    /// Days since 1970-01-01 of a civil date (Howard Hinnant's days-from-civil).
    /// Years beyond ±1,000,000 and days beyond ±1,000 are clamped there
    /// (no calendar date is near them): no argument makes it overflow.
    public static func days(_ year: Int, _ month: Int, _ day: Int) -> Int64 {
        let year = min(max(year, -1_000_000), 1_000_000), month = min(max(month, 1), 12), day = min(max(day, -1000), 1000)
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public static func daysInMonth(_ year: Int, _ month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// What `unix(localDateOrTime:end:)` reads, as messages say it.
    public static let localTimeForm = "a local date or time like 2026-11-01 or 2026-11-01T08:30"

    /// A local date (`2026-11-01`: its midnight, or the next one for an
    /// end, which takes the whole day) or date and time (`2026-11-01T08:30`,
    /// `2026-11-01 08:30:15`) as a Unix time in this zone; nil when the
    /// text is none (`usage --begin`/`--end`, serve's `begin`/`end`).
    public func unix(localDateOrTime text: String, end: Bool) -> Int64? {
        let parts = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "T" || $0 == " " })
        guard (1...2).contains(parts.count) else { return nil }
        func numbers(_ part: Substring, _ separator: Character, count: ClosedRange<Int>) -> [Int]? {
            let fields = part.split(separator: separator, omittingEmptySubsequences: false)
            guard count.contains(fields.count), fields.allSatisfy({ !$0.isEmpty && $0.count <= 4 && $0.allSatisfy(\.isASCII) }) else { return nil }
            let values = fields.compactMap { Int($0) }
            return values.count == fields.count && values.allSatisfy({ $0 >= 0 }) ? values : nil
        }
        guard let date = numbers(parts[0], "-", count: 3...3), (1...9999).contains(date[0]), (1...12).contains(date[1]),
            (1...Self.daysInMonth(date[0], date[1])).contains(date[2])
        else { return nil }
        guard parts.count == 2 else {
            let midnight = unix(date[0], date[1], date[2])
            return end ? unix(date[0], date[1], date[2] + 1) : midnight
        }
        guard let time = numbers(parts[1], ":", count: 2...3), time[0] < 24, time[1] < 60, time.count == 2 || time[2] < 60 else { return nil }
        return unix(date[0], date[1], date[2], hour: time[0]) + Int64(time[1] * 60 + (time.count == 3 ? time[2] : 0))
    }

    /// The start of the local hour holding `t`.
    public func hourStart(_ t: Int64) -> Int64 {
        let t = Self.clamped(t)
        let local = t + Int64(offset(t))
        let into = ((local % 3600) + 3600) % 3600
        return t - into
    }

    /// The start of the local hour after the one starting at `start`.
    public func nextHour(_ start: Int64) -> Int64 {
        let start = Self.clamped(start)
        let candidate = start + 3600
        let aligned = hourStart(candidate)
        // An offset change of less than an hour moves the boundary.
        return aligned > start ? aligned : candidate
    }

    /// RFC 3339 with the local offset, to the second: 2026-03-29T03:00:00+02:00.
    public func rfc3339(_ t: Int64) -> String { rfc3339(t, fraction: "") }

    /// The same with milliseconds: 2026-11-30T23:31:02.125+01:00. A time
    /// outside `printable` (or not finite) is clamped to its nearest end
    /// (NaN to the epoch).
    public func rfc3339(milliseconds time: Double) -> String {
        let limits = Double(Self.printable.lowerBound)...Double(Self.printable.upperBound)
        let time = time.isNaN ? 0 : min(max(time, limits.lowerBound), limits.upperBound)
        let whole = time.rounded(.down)
        return rfc3339(Int64(whole), fraction: "." + Self.pad(min(999, Int((time - whole) * 1000)), 3))
    }

    private func rfc3339(_ t: Int64, fraction: String) -> String {
        let t = Self.clamped(t)
        let c = civil(t)
        let off = offset(t)
        let sign = off < 0 ? "-" : "+"
        let a = abs(off)
        return "\(Self.pad(c.year, 4))-\(Self.pad(c.month))-\(Self.pad(c.day))T\(Self.pad(c.hour)):\(Self.pad(c.minute)):\(Self.pad(c.second))"
            + fraction + "\(sign)\(Self.pad(a / 3600)):\(Self.pad(a % 3600 / 60))"
    }

    public static func pad(_ n: Int, _ width: Int = 2) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }
}

/// How usage is split into hours when it is saved. The rule: an interval's
/// traffic is spread over the local hours it spans in proportion to the time
/// it spent in each (whole bytes and packets; the remainder goes to the last
/// hour), so every byte lands in exactly one hour and no period takes
/// another's bytes beyond one sampling interval's proportional share.
public enum HourSplit {
    /// One hour's share.
    public struct Share: Sendable, Hashable {
        public var hourStart: Int64
        public var counters: Counters
    }

    /// The longest interval split across hours: ten years. A longer one
    /// (only times read from a crafted state file make one) goes whole to
    /// the hour of its end, as one whose start is not known does.
    public static let longestSplitSeconds: Double = 10 * 366 * 86400

    /// Splits `counters` (rx/tx bytes and packets) counted over wall time
    /// [start, end] across the local hours it spans. Any times at all: an
    /// end outside `LocalZone.printable` is clamped into it; a start that
    /// is not finite, not before the end, or more than
    /// `longestSplitSeconds` before it puts everything in the end's hour.
    public static func split(_ counters: Counters, from start: Double, to end: Double, zone: LocalZone) -> [Share] {
        let endMs = milliseconds(end)
        var startMs = milliseconds(start)
        if !(start.isFinite && end.isFinite) || startMs >= endMs || end - start > longestSplitSeconds { startMs = endMs }
        // The last instant of the interval belongs to the hour before `end`
        // when `end` is exactly on a boundary.
        let lastHour = zone.hourStart(endMs > startMs ? (endMs - 1) / 1000 : endMs / 1000)
        let hour = zone.hourStart(startMs >= 0 ? startMs / 1000 : (startMs - 999) / 1000)
        return shares(of: counters, startMs: startMs, endMs: endMs, first: hour, last: lastHour, next: zone.nextHour)
            .map { Share(hourStart: $0.start, counters: $0.counters) }
    }

    /// A wall time in milliseconds, clamped into `LocalZone.printable`
    /// (NaN as 0).
    static func milliseconds(_ t: Double) -> Int64 {
        let limits = Double(LocalZone.printable.lowerBound) * 1000...Double(LocalZone.printable.upperBound) * 1000
        return t.isNaN ? 0 : Int64(min(max(t * 1000, limits.lowerBound), limits.upperBound).rounded(.down))
    }

    /// `counters` over [startMs, endMs] in milliseconds, split across the
    /// periods from `first` to `last` (period starts, seconds; `next` gives
    /// the one after) in proportion to the time in each: whole bytes and
    /// packets, the remainder in the last. All of it goes to `last` when
    /// the interval is empty or within one period. The hours' split and
    /// the five-minute slots' (FiveMinuteSplit) both end here.
    static func shares(
        of counters: Counters, startMs: Int64, endMs: Int64, first: Int64, last: Int64, next: (Int64) -> Int64
    ) -> [(start: Int64, counters: Counters)] {
        if startMs == endMs || first >= last { return [(last, counters.required)] }
        var edges: [(start: Int64, untilMs: Int64)] = []
        var period = first
        while period < last {
            let following = next(period)
            edges.append((period, following * 1000))
            period = following
        }
        edges.append((last, endMs))
        let total = UInt64(endMs - startMs)
        let keys: [CounterKey] = [.rxBytes, .txBytes, .rxPackets, .txPackets]
        var previous = [UInt64](repeating: 0, count: keys.count)
        var shares: [(start: Int64, counters: Counters)] = []
        for (n, edge) in edges.enumerated() {
            let elapsed = UInt64(min(edge.untilMs, endMs) - startMs)
            var c = Counters.zero
            for (k, key) in keys.enumerated() {
                let value = counters[key] ?? 0
                let upTo = n == edges.count - 1 ? value : proportion(value, elapsed, total)
                c[key] = upTo - previous[k]
                previous[k] = upTo
            }
            shares.append((edge.start, c))
        }
        return shares
    }

    /// value * part / whole without overflow, rounded down.
    static func proportion(_ value: UInt64, _ part: UInt64, _ whole: UInt64) -> UInt64 {
        let product = value.multipliedFullWidth(by: part)
        return whole.dividingFullWidth(product).quotient
    }
}

extension Counters {
    /// The four required counters (missing ones as 0).
    public var required: Counters {
        Counters(rxBytes: rxBytes, txBytes: txBytes, rxPackets: rxPackets, txPackets: txPackets)
    }
}

/// The periods usage is shown by.
public enum UsagePeriodKind: String, Sendable, CaseIterable {
    case hour, day, month, year, cycle, top
    case fiveMinutes = "five-minutes"
}

/// A period: its label, start and end (Unix times).
public struct UsagePeriod: Sendable, Hashable, Comparable {
    public var label: String
    public var start: Int64
    public var end: Int64

    public init(label: String, start: Int64, end: Int64) {
        self.label = label
        self.start = start
        self.end = end
    }

    public static func < (a: UsagePeriod, b: UsagePeriod) -> Bool { (a.start, a.end) < (b.start, b.end) }
}

extension PeriodCalendar {
    /// The local date of the last second before `end`, YYYY-MM-DD.
    public static func dayLabel(_ zone: LocalZone, _ end: Int64) -> String {
        let c = zone.civil(end - 1)
        return "\(LocalZone.pad(c.year, 4))-\(LocalZone.pad(c.month))-\(LocalZone.pad(c.day))"
    }
}

/// Which period an instant belongs to, in a zone: pure functions.
public struct PeriodCalendar: Sendable {
    public var zone: LocalZone

    public init(zone: LocalZone) { self.zone = zone }

    /// The local hour, day, month or year holding `t`; a cycle by its
    /// start day (1-31, clamped to short months).
    public func period(_ kind: UsagePeriodKind, containing t: Int64, cycleDay: Int = 1) -> UsagePeriod {
        let c = zone.civil(t)
        let p = LocalZone.pad
        switch kind {
        case .fiveMinutes:
            return fiveMinutes(containing: t)
        case .hour:
            let start = zone.hourStart(t)
            let off = zone.offset(start)
            let sign = off < 0 ? "-" : "+"
            return UsagePeriod(
                label:
                    "\(p(c.year, 4))-\(p(c.month, 2))-\(p(c.day, 2)) \(p(c.hour, 2)):00\(sign)\(p(abs(off) / 3600, 2)):\(p(abs(off) % 3600 / 60, 2))",
                start: start, end: zone.nextHour(start))
        case .day, .top:
            let start = zone.unix(c.year, c.month, c.day)
            let (ny, nm, nd) = Self.nextDay(c.year, c.month, c.day)
            return UsagePeriod(label: "\(p(c.year, 4))-\(p(c.month, 2))-\(p(c.day, 2))", start: start, end: zone.unix(ny, nm, nd))
        case .month:
            let (ny, nm) = c.month == 12 ? (c.year + 1, 1) : (c.year, c.month + 1)
            return UsagePeriod(label: "\(p(c.year, 4))-\(p(c.month, 2))", start: zone.unix(c.year, c.month, 1), end: zone.unix(ny, nm, 1))
        case .year:
            return UsagePeriod(label: p(c.year, 4), start: zone.unix(c.year, 1, 1), end: zone.unix(c.year + 1, 1, 1))
        case .cycle:
            let (sy, sm, sd) = cycleStart(c.year, c.month, c.day, cycleDay: cycleDay)
            let (ny, nm) = sm == 12 ? (sy + 1, 1) : (sy, sm + 1)
            let nd = min(cycleDay, LocalZone.daysInMonth(ny, nm))
            return UsagePeriod(
                label: "\(p(sy, 4))-\(p(sm, 2))-\(p(sd, 2))", start: zone.unix(sy, sm, sd), end: zone.unix(ny, nm, nd))
        }
    }

    /// The start date of the cycle holding a local date.
    public func cycleStart(_ year: Int, _ month: Int, _ day: Int, cycleDay: Int) -> (Int, Int, Int) {
        let here = min(cycleDay, LocalZone.daysInMonth(year, month))
        if day >= here { return (year, month, here) }
        let (py, pm) = month == 1 ? (year - 1, 12) : (year, month - 1)
        return (py, pm, min(cycleDay, LocalZone.daysInMonth(py, pm)))
    }

    public static func nextDay(_ y: Int, _ m: Int, _ d: Int) -> (Int, Int, Int) {
        if d < LocalZone.daysInMonth(y, m) { return (y, m, d + 1) }
        return m == 12 ? (y + 1, 1, 1) : (y, m + 1, 1)
    }
}

/// One stored slice of usage: an hour (or a longer span kept from before
/// hours were stored), with its counters and quality.
public struct UsageSlice: Sendable, Hashable {
    /// The starts a stored slice may have: 0002-01-01T00:00:00Z to
    /// 9998-12-31T23:59:59Z. Every period holding one (an hour to a year,
    /// a billing cycle, in any zone) starts and ends within
    /// `LocalZone.printable`, so each prints as it is; a state file's row
    /// outside it is refused (no clock of a running ifmeter is there).
    public static let startRange: ClosedRange<Int64> = -62_104_060_800...253_370_764_799
    /// `startRange` as messages say it.
    public static let startRangeText = "a Unix time from -62104060800 to 253370764799 (0002-01-01 to 9998-12-31)"
    /// The longest a slice may last: 366 days (an hour, or a day kept from
    /// schema 1).
    public static let longestSeconds: Int64 = 366 * 86400

    public var name: String
    public var kind: InterfaceKind
    public var start: Int64
    public var seconds: Int64
    public var counters: Counters
    public var quality: Quality

    public init(name: String, kind: InterfaceKind, start: Int64, seconds: Int64, counters: Counters, quality: Quality) {
        self.name = name
        self.kind = kind
        self.start = start
        self.seconds = seconds
        self.counters = counters
        self.quality = quality
    }
}

/// A period's usage for one interface.
public struct PeriodUsage: Sendable, Hashable {
    public var period: UsagePeriod
    public var counters: Counters
    public var quality: Quality

    public init(period: UsagePeriod, counters: Counters, quality: Quality) {
        self.period = period
        self.counters = counters
        self.quality = quality
    }

    /// rx + tx, stopping at 2^64-1 (never a small sum that wrapped).
    public var totalBytes: UInt64 { counters.rxBytes.saturatingAdd(counters.txBytes) }

    /// Adds a stored slice: its four counters and its quality. A sum that
    /// stopped at 2^64-1 (a counter, or rx + tx) lost what did not fit, so
    /// the period is a lower bound: a crafted state file's rows of 2^63-1
    /// summed to 18446744073709551615 labelled exact.
    public mutating func add(_ slice: UsageSlice) {
        let saturated = counters.addSaturating(slice.counters.required)
        quality = max(quality, slice.quality)
        if saturated || counters.rxBytes.addingReportingOverflow(counters.txBytes).overflow { quality = .lowerBound }
    }
}

extension UInt64 {
    /// `self + other`, stopping at 2^64-1: a sum of totals read from a file
    /// (or near the top already) is at least that, never a small number
    /// that wrapped, and never a trap.
    public func saturatingAdd(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}

/// Periods already worked out, by kind, cycle day and local date: a day
/// (or a month, a year, a cycle) is the same whatever instant of that local
/// date asks, so twenty interfaces' five years of days work out 1,826 days,
/// not 36,500 (each a few `localtime_r`). Hours are not kept (a local hour
/// repeated by a daylight-saving change is two periods). For one use (a
/// table), not shared between threads.
public final class PeriodCache {
    struct Key: Hashable {
        var kind: UsagePeriodKind
        var cycleDay: Int
        var localDay: Int64
    }
    var periods: [Key: UsagePeriod] = [:]

    public init() {}
}

extension PeriodCalendar {
    /// Sums slices (of one interface) into periods, oldest first. A slice
    /// belongs to the period holding its start.
    public func group(_ slices: [UsageSlice], by kind: UsagePeriodKind, cycleDay: Int = 1, cache: PeriodCache? = nil) -> [PeriodUsage] {
        var byStart: [Int64: PeriodUsage] = [:]
        let cached = cache != nil && ![.hour, .fiveMinutes].contains(kind)
        for s in slices {
            let period: UsagePeriod
            if cached, let cache {
                let t = LocalZone.clamped(s.start)
                let local = t + Int64(zone.offset(t))
                let key = PeriodCache.Key(kind: kind, cycleDay: cycleDay, localDay: local >= 0 ? local / 86400 : (local - 86399) / 86400)
                if let known = cache.periods[key] {
                    period = known
                } else {
                    period = self.period(kind, containing: s.start, cycleDay: cycleDay)
                    cache.periods[key] = period
                }
            } else {
                period = self.period(kind, containing: s.start, cycleDay: cycleDay)
            }
            var u = byStart[period.start] ?? PeriodUsage(period: period, counters: .zero, quality: .exact)
            u.add(s)
            byStart[period.start] = u
        }
        return byStart.values.sorted { $0.period < $1.period }
    }
}
