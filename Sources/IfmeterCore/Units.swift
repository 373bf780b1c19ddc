/// Number formatting for people: IEC sizes, SI bit rates, fixed decimals.
/// Written here so the core needs no Foundation.
public enum Units {
    /// `x` with exactly `decimals` digits after the point, rounded half away
    /// from zero.
    public static func fixed(_ x: Double, _ decimals: Int) -> String {
        guard x.isFinite else { return x.isNaN ? "nan" : (x < 0 ? "-inf" : "inf") }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let negative = x < 0
        let scaled = (abs(x) * scale).rounded(.toNearestOrAwayFromZero)
        // Too large for UInt64: the shortest text that reads back the same.
        guard scaled < 9.2e18 else { return (negative ? "-" : "") + abs(x).description }
        let n = UInt64(scaled)
        let whole = n / UInt64(scale)
        var text = String(whole)
        if decimals > 0 {
            let frac = String(n % UInt64(scale))
            text += "." + String(repeating: "0", count: decimals - frac.count) + frac
        }
        return (negative && n != 0 ? "-" : "") + text
    }

    /// Three significant figures at most, trailing zeros kept:
    /// 1.23, 12.3, 123, 1023.
    static func significant(_ x: Double) -> String {
        if x < 9.995 { return fixed(x, 2) }
        if x < 99.95 { return fixed(x, 1) }
        return fixed(x, 0)
    }

    private static let iec = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    private static let si = ["", "k", "M", "G", "T", "P", "E"]

    /// A size in IEC units: `512 B`, `1.50 KiB`, `12.3 GiB`.
    public static func bytes(_ value: Double) -> String {
        var v = value
        var unit = 0
        while v >= 1024, unit < iec.count - 1 {
            v /= 1024
            unit += 1
        }
        if unit == 0 { return fixed(v, 0) + " B" }
        return significant(v) + " " + iec[unit]
    }

    public static func bytes(_ value: UInt64) -> String { bytes(Double(value)) }

    /// A byte rate: IEC bytes per second, or SI bits per second.
    public static func rate(bytesPerSecond: Double, bits: Bool) -> String {
        if !bits { return bytes(bytesPerSecond) + "/s" }
        var v = bytesPerSecond * 8
        var unit = 0
        while v >= 1000, unit < si.count - 1 {
            v /= 1000
            unit += 1
        }
        if unit == 0 { return fixed(v, 0) + " bit/s" }
        return significant(v) + " " + si[unit] + "bit/s"
    }

    /// A count with thin grouping: 1234567 → `1,234,567`.
    public static func grouped(_ value: UInt64) -> String {
        let digits = Array(String(value))
        var out = ""
        for (n, d) in digits.enumerated() {
            if n > 0, (digits.count - n) % 3 == 0 { out.append(",") }
            out.append(d)
        }
        return out
    }

    /// A rate of packets (or anything) per second, compact: `12.3k/s`.
    public static func perSecond(_ value: Double) -> String {
        var v = value
        var unit = 0
        while v >= 1000, unit < si.count - 1 {
            v /= 1000
            unit += 1
        }
        return (unit == 0 ? fixed(v, v < 10 ? 1 : 0) : significant(v) + si[unit]) + "/s"
    }

    /// A duration for people: `750 ms`, `1.5 s`, `2 m 5 s`, `3 h 2 m`.
    public static func duration(_ seconds: Double) -> String {
        // A time read from a file may be anything: never trap on it.
        guard seconds.isFinite, seconds < 1e15 else { return seconds.isNaN ? "an unknown time" : "over 10^15 s" }
        if seconds < 0.9995 { return fixed(seconds * 1000, 0) + " ms" }
        if seconds < 59.95 {
            var text = significant(seconds)
            if text.contains(".") {
                while text.hasSuffix("0") { text.removeLast() }
                if text.hasSuffix(".") { text.removeLast() }
            }
            return text + " s"
        }
        let total = Int(seconds.rounded())
        if total < 3600 { return "\(total / 60) m \(total % 60) s" }
        if total < 86400 { return "\(total / 3600) h \(total % 3600 / 60) m" }
        return "\(total / 86400) d \(total % 86400 / 3600) h"
    }

    // MARK: what input may say

    /// The durations options take (`--interval`, `--every`, `--save-every`,
    /// `--series-lifetime`, `--duration`, `--over`): 1 ms to 365 days. A
    /// shorter pace is none a sampler keeps, a longer one none anybody
    /// waits for; within it every deadline, count of intervals and printed
    /// duration built from one stays far inside `Int` and exact in `Double`.
    public static let durationRange: ClosedRange<Double> = 0.001...31_536_000
    /// `durationRange` as messages say it.
    public static let durationRangeText = "1ms to 365d"

    /// The byte rates `--max-rate` takes: 1 bit/s to 1000 Tbit/s (0.125 to
    /// 1.25e14 bytes a second), from a modem to far past any link.
    public static let rateRange: ClosedRange<Double> = 0.125...1.25e14
    /// `rateRange` as messages say it.
    public static let rateRangeText = "1bit to 1000Tbit"

    /// The largest size input may give, in bytes: 2^63-1, what SQLite's
    /// integers, file offsets and `Int` hold.
    public static let maxSize = UInt64(Int64.max)

    /// Parses a duration: `500ms`, `0.5s`, `2m`, `1h`, `1d`, or plain seconds.
    /// Returns nil for anything else, for negatives, and for non-finite
    /// values; the range an option allows (`durationRange`) is its caller's
    /// to check.
    public static func parseDuration(_ text: String) -> Double? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        var number = Substring(text)
        var factor = 1.0
        for (suffix, f) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            factor = f
            break
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            let value = Double(number), value.isFinite
        else { return nil }
        return value * factor
    }

    /// Parses a size in bytes: a number (digits, at most one `.`, and an
    /// optional exponent: `1.5e9`) with an optional unit: `B`, decimal
    /// `kB`/`KB`, `MB`, `GB`, `TB`, or binary `KiB`, `MiB`, `GiB`, `TiB`.
    /// Whole numbers are exact up to 2^63-1 (`9223372036854775807B`);
    /// fractions round to the nearest byte. Returns nil for anything else,
    /// and for a size over `maxSize` (`1e19B`, `17179869184GiB`): never a
    /// value that wrapped or trapped on the way.
    public static func parseSize(_ text: String) -> UInt64? {
        let units: [(String, UInt64)] = [
            ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
            ("kB", 1_000), ("KB", 1_000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000), ("B", 1),
        ]
        var number = Substring(text)
        var factor: UInt64 = 1
        for (suffix, f) in units where text.hasSuffix(suffix) {
            number = number.dropLast(suffix.count)
            factor = f
            break
        }
        guard isDecimal(number) else { return nil }
        if number.allSatisfy({ $0 >= "0" && $0 <= "9" }) {
            // Exact: digits times the unit, with every overflow caught.
            guard let whole = UInt64(number) else { return nil }
            let (bytes, overflow) = whole.multipliedReportingOverflow(by: factor)
            return overflow || bytes > maxSize ? nil : bytes
        }
        guard let value = Double(number), value.isFinite else { return nil }
        let bytes = (value * Double(factor)).rounded()
        // 2^63 is the first Double past the range (maxSize itself is none).
        guard bytes >= 0, bytes < 9_223_372_036_854_775_808.0 else { return nil }
        return UInt64(bytes)
    }

    /// ASCII digits with at most one `.` and an optional exponent
    /// (`e`/`E`, an optional sign, digits): what `parseSize` reads as a
    /// number (not `inf`, `nan`, hex floats or signs in front).
    static func isDecimal(_ text: Substring) -> Bool {
        var mantissa = text, exponent: Substring?
        if let e = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
            mantissa = text[..<e]
            var rest = text[text.index(after: e)...]
            if rest.first == "+" || rest.first == "-" { rest = rest.dropFirst() }
            exponent = rest
        }
        let digits = mantissa.filter { $0 != "." }
        guard !digits.isEmpty, mantissa.count - digits.count <= 1, digits.allSatisfy({ $0 >= "0" && $0 <= "9" }) else { return false }
        if let exponent {
            return !exponent.isEmpty && exponent.allSatisfy { $0 >= "0" && $0 <= "9" }
        }
        return true
    }

    /// Parses a rate: `10Gbit`, `100Mbit`, `1.25e9` (bytes/s), `500MB` or
    /// `500MiB` (per second). Returns bytes per second: positive and finite
    /// (`1e308Tbit` is none); the range `--max-rate` allows (`rateRange`) is
    /// its caller's to check.
    public static func parseRate(_ text: String) -> Double? {
        var t = Substring(text)
        if t.hasSuffix("/s") { t = t.dropLast(2) }
        if t.hasSuffix("ps") { t = t.dropLast(2) + "it" } // 10Gbps → 10Gbit
        let suffixes: [(String, Double)] = [
            ("Tbit", 1e12 / 8), ("Gbit", 1e9 / 8), ("Mbit", 1e6 / 8), ("kbit", 1e3 / 8), ("Kbit", 1e3 / 8), ("bit", 1.0 / 8),
            ("TiB", 1_099_511_627_776), ("GiB", 1_073_741_824), ("MiB", 1_048_576), ("KiB", 1024),
            ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("KB", 1e3), ("B", 1),
        ]
        var factor = 1.0
        for (suffix, f) in suffixes where t.hasSuffix(suffix) {
            t = t.dropLast(suffix.count)
            factor = f
            break
        }
        guard !t.isEmpty, let value = Double(String(t)), value.isFinite, value > 0 else { return nil }
        let rate = value * factor
        return rate.isFinite ? rate : nil
    }
}
