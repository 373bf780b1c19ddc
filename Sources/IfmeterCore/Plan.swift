/// A data plan: a billing cycle that starts on a day of the month, and
/// optionally a quota over received, sent or both.
public struct Plan: Sendable, Hashable {
    public enum Direction: String, Sendable, CaseIterable {
        case rx, tx, both

        public func used(_ c: Counters) -> UInt64 {
            switch self {
            case .rx: c.rxBytes
            case .tx: c.txBytes
            case .both: c.rxBytes.saturatingAdd(c.txBytes)
            }
        }
    }

    /// An interface name or glob (`NS/NAME` for another namespace's).
    public var pattern: String
    /// 1-31; clamped to the last day of shorter months.
    public var cycleStartDay: Int
    public var quotaBytes: UInt64?
    public var direction: Direction
    /// Limits per local hour, day, month or year (besides the cycle's
    /// quota), counted in `direction`; at most one per period.
    public var limits: [PeriodLimit] = []

    public init(pattern: String, cycleStartDay: Int, quotaBytes: UInt64?, direction: Direction) {
        self.pattern = pattern
        self.cycleStartDay = cycleStartDay
        self.quotaBytes = quotaBytes
        self.direction = direction
    }

    /// Whether the plan applies to a stored name (`NAME` or `NS/NAME`).
    public func matches(_ stored: String) -> Bool {
        if pattern == stored || Glob.matches(pattern, stored) { return true }
        // A pattern without a namespace matches the bare name in any.
        guard !pattern.contains("/"), let slash = stored.firstIndex(of: "/") else { return false }
        return Glob.matches(pattern, String(stored[stored.index(after: slash)...]))
    }

    /// The plan for a stored interface name: an exact name first, else the
    /// first matching pattern in sorted order.
    public static func find(for stored: String, in plans: [Plan]) -> Plan? {
        if let exact = plans.first(where: { $0.pattern == stored }) { return exact }
        return plans.sorted { $0.pattern < $1.pattern }.first { $0.matches(stored) }
    }
}
