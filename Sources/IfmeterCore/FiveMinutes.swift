/// Five-minute slots (vnStat's `-5` table): slots start on multiples of
/// 300 s of Unix time, which are local five-minute boundaries in every zone
/// whose offset is a whole number of minutes divisible by five (all of
/// today's). An interval's traffic is split across the slots it spans in
/// proportion to its time in each, as `HourSplit` does for hours (whole
/// bytes and packets; the remainder goes to the last slot).
public enum FiveMinuteSplit {
    public static let seconds: Int64 = 300
    /// How long five-minute rows are kept: 48 hours, as vnStat's
    /// `5MinuteHours 48`.
    public static let keptHours: Int64 = 48

    /// The start of the slot holding `t`.
    public static func slotStart(_ t: Int64) -> Int64 {
        let t = LocalZone.clamped(t)
        let r = ((t % seconds) + seconds) % seconds
        return t - r
    }

    /// The oldest slot start kept at `now`: older rows are pruned.
    public static func oldestKept(now: Int64, hours: Int64 = keptHours) -> Int64 {
        slotStart(now) - max(1, hours) * 3600 + seconds
    }

    /// One slot's share.
    public struct Share: Sendable, Hashable {
        public var start: Int64
        public var counters: Counters
    }

    /// Splits `counters` counted over wall time [start, end] across the
    /// slots it spans. A start that is not finite or not before the end, or
    /// an interval longer than two hours (callers split by hour first), puts
    /// everything in the slot of the end.
    public static func split(_ counters: Counters, from start: Double, to end: Double) -> [Share] {
        func second(_ ms: Int64) -> Int64 { ms >= 0 ? ms / 1000 : (ms - 999) / 1000 }
        let endMs = HourSplit.milliseconds(end)
        var startMs = HourSplit.milliseconds(start)
        if !(start.isFinite && end.isFinite) || startMs >= endMs || end - start > 7200 { startMs = endMs }
        let last = slotStart(endMs > startMs ? second(endMs - 1) : second(endMs))
        let slot = slotStart(second(startMs))
        return HourSplit.shares(of: counters, startMs: startMs, endMs: endMs, first: slot, last: last, next: { $0 + seconds })
            .map { Share(start: $0.start, counters: $0.counters) }
    }
}

extension PeriodCalendar {
    /// The five-minute slot holding `t`, labelled `2026-12-01 21:05+01:00`.
    public func fiveMinutes(containing t: Int64) -> UsagePeriod {
        let start = FiveMinuteSplit.slotStart(t)
        let c = zone.civil(start)
        let off = zone.offset(start)
        let p = LocalZone.pad
        let sign = off < 0 ? "-" : "+"
        return UsagePeriod(
            label:
                "\(p(c.year, 4))-\(p(c.month, 2))-\(p(c.day, 2)) \(p(c.hour, 2)):\(p(c.minute, 2))\(sign)\(p(abs(off) / 3600, 2)):\(p(abs(off) % 3600 / 60, 2))",
            start: start, end: start + FiveMinuteSplit.seconds)
    }
}

/// A usage limit per calendar period (vnStat's `--alert`): at most `bytes`
/// in each local hour, day, month or year, counted in `direction`.
public struct PeriodLimit: Sendable, Hashable {
    public enum Period: String, Sendable, CaseIterable, Comparable {
        case hour, day, month, year
        public var kind: UsagePeriodKind {
            switch self {
            case .hour: .hour
            case .day: .day
            case .month: .month
            case .year: .year
            }
        }
        var rank: Int { Self.allCases.firstIndex(of: self) ?? 0 }
        public static func < (a: Period, b: Period) -> Bool { a.rank < b.rank }
    }

    public var period: Period
    public var bytes: UInt64

    public init(period: Period, bytes: UInt64) {
        self.period = period
        self.bytes = bytes
    }

    /// `day=2GB`: a period and a size (`Units.parseSize`: no spaces around
    /// it, as no other number takes); nil otherwise.
    public static func parse(_ text: String) -> PeriodLimit? {
        guard let eq = text.firstIndex(of: "="), let period = Period(rawValue: String(text[..<eq])),
            let bytes = Units.parseSize(String(text[text.index(after: eq)...])), bytes > 0
        else { return nil }
        return PeriodLimit(period: period, bytes: bytes)
    }
}
