import IfmeterCore

/// `usage --oneline`: one line per interface for scripts and status bars,
/// fields separated by `;` (after vnStat's `--oneline`), every figure a
/// whole number of bytes and each group followed by its quality word, so
/// a lower bound is never read as exact:
///
///     1;NAME;KIND;DAY;RX;TX;TOTAL;QUALITY;MONTH;RX;TX;TOTAL;QUALITY;SINCE;RX;TX;TOTAL;QUALITY
///
/// 1 is this format's version; DAY is today (local YYYY-MM-DD), MONTH this
/// month (YYYY-MM), SINCE the first local day with usage (all time's
/// figures count from it; empty with none). QUALITY is exact,
/// wrap-corrected or lower-bound (the true figure is at least the one
/// given). A `;` or control character in a name is written as `\xHH`.
package struct UsageOneLine: Sendable {
    package static let version = 1
    package static let fields = [
        "version", "interface", "kind", "day", "day_rx_bytes", "day_tx_bytes", "day_total_bytes", "day_quality", "month",
        "month_rx_bytes", "month_tx_bytes", "month_total_bytes", "month_quality", "since", "all_rx_bytes", "all_tx_bytes",
        "all_total_bytes", "all_quality",
    ]

    package var lines: [String]

    /// `names`: stored names to show even without usage (zeros); `kinds`
    /// their kinds.
    package init(slices: [UsageSlice], names: [String], kinds: [String: InterfaceKind], zone: LocalZone, now: Int64) {
        let calendar = PeriodCalendar(zone: zone)
        let today = calendar.period(.day, containing: now)
        let month = calendar.period(.month, containing: now)
        var byName = Dictionary(grouping: slices, by: \.name)
        for name in names where byName[name] == nil { byName[name] = [] }
        lines = byName.keys.sorted { StoreKey.key($0) < StoreKey.key($1) }.map { name in
            let mine = byName[name] ?? []
            func group(_ period: UsagePeriod?) -> [String] {
                var sum = PeriodUsage(period: period ?? UsagePeriod(label: "all", start: 0, end: 0), counters: .zero, quality: .exact)
                for s in mine where period.map({ $0.start <= s.start && s.start < $0.end }) ?? true { sum.add(s) }
                return [String(sum.counters.rxBytes), String(sum.counters.txBytes), String(sum.totalBytes), sum.quality.name]
            }
            let first = mine.map(\.start).min().map { calendar.period(.day, containing: $0).label } ?? ""
            let kind = mine.last?.kind ?? kinds[name]
            return
                ([String(Self.version), Self.field(name), kind?.rawValue ?? "unknown", today.label] + group(today) + [month.label]
                + group(month) + [first] + group(nil)).joined(separator: ";")
        }
    }

    static func field(_ text: String) -> String {
        var out = ""
        for u in text.unicodeScalars {
            if u == ";" || u.value < 0x20 || u.value == 0x7F || u == "\\" {
                let hex = String(u.value, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return out
    }

    package var text: String { lines.map { $0 + "\n" }.joined() }
}

/// Stored names (`NAME`, `NS/NAME`) in the order tables list them.
enum StoreKey {
    static func key(_ stored: String) -> SeriesKey {
        guard let slash = stored.firstIndex(of: "/") else { return SeriesKey(name: stored) }
        return SeriesKey(netns: String(stored[..<slash]), name: String(stored[stored.index(after: slash)...]))
    }
}
