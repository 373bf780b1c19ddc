/// Sums an export period's deltas per interface.
public struct PeriodAccumulator: Sendable {
    public struct Entry: Sendable, Hashable {
        public var classification: Classification
        public var counters = Counters.zero
        public var quality = Quality.exact
        /// Discontinuities seen in the period (wrap, reset, recreated, ...).
        public var changes: [DeltaChange] = []

        mutating func add(_ d: InterfaceDelta) {
            classification = d.classification
            counters.add(d.counters)
            quality = max(quality, d.quality)
            if d.change != .steady, !changes.contains(d.change) { changes.append(d.change) }
        }
    }

    public private(set) var entries: [SeriesKey: Entry] = [:]

    public init() {}

    /// Adds a sample's deltas. An idle interval (steady, exact, nothing
    /// counted) adds nothing, so it costs nothing: an interface without an
    /// entry had no traffic in the period.
    public mutating func add(_ deltas: [InterfaceDelta]) {
        for d in deltas where d.change != .baseline {
            if d.isIdle { continue }
            entries[d.key, default: Entry(classification: d.classification)].add(d)
        }
    }

    /// Makes an interface's entry a lower bound (adding an empty one when it
    /// has none): some of its traffic is known to be missing.
    public mutating func markLowerBound(_ key: SeriesKey, classification: Classification) {
        entries[key, default: Entry(classification: classification)].quality = .lowerBound
    }

    /// Puts back entries taken but not used (a failed save), adding them to
    /// whatever came since.
    public mutating func putBack(_ taken: [SeriesKey: Entry]) {
        for (name, old) in taken {
            var e = entries[name] ?? Entry(classification: old.classification)
            e.counters.add(old.counters)
            e.quality = max(e.quality, old.quality)
            e.changes = old.changes + e.changes.filter { !old.changes.contains($0) }
            entries[name] = e
        }
    }

    /// Returns the entries and starts a new period.
    public mutating func take() -> [SeriesKey: Entry] {
        defer { entries = [:] }
        return entries
    }
}

/// RFC 3339 timestamps in UTC, with milliseconds, without Foundation.
public enum RFC3339 {
    /// Any `Double`: a time outside `LocalZone.printable` (years 0001 to
    /// 9999), or not finite, is clamped to its nearest end (NaN to the
    /// epoch), never a trap. Callers that read a time from a file check it
    /// first (`LocalZone.second`) and say what it is.
    public static func format(_ unix: Double) -> String {
        let limits = Double(LocalZone.printable.lowerBound)...Double(LocalZone.printable.upperBound)
        let unix = unix.isNaN ? 0 : min(max(unix, limits.lowerBound), limits.upperBound)
        let millis = Int64((unix * 1000).rounded(.down))
        var seconds = millis / 1000
        let ms = Int(millis - seconds * 1000)
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        seconds -= days * 86400
        let (y, m, d) = civil(fromDays: days)
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return
            "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(Int(seconds / 3600), 2)):\(pad(Int(seconds % 3600 / 60), 2)):\(pad(Int(seconds % 60), 2)).\(pad(ms, 3))Z"
    }

    /// Howard Hinnant's days-to-civil.
    static func civil(fromDays z0: Int64) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(m <= 2 ? y + 1 : y), Int(m), Int(d))
    }
}

extension UInt64 {
    /// A byte sum kept as a `Double`, as a whole number: NaN and negatives
    /// are 0, and past 2^64-1 it stops there (never a trap).
    public init(clampingBytes value: Double) {
        if !(value > 0) {
            self = 0
        } else if value >= 18_446_744_073_709_551_616.0 {
            self = .max
        } else {
            self = UInt64(value)
        }
    }
}
