#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock times in the local time zone (TZ), as people read them.
public enum LocalTime {
    /// `2026-11-30 23:31:02 CET`: what `sample` prints above an interval.
    public static func format(_ unix: Double) -> String {
        var t = time_t(unix.rounded(.down))
        var parts = tm()
        localtime_r(&t, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let n = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S %Z", &parts)
        return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// RFC 3339 with milliseconds and the local offset:
    /// `2026-11-30T23:31:02.125+01:00`.
    public static func rfc3339(_ unix: Double) -> String {
        let whole = unix.rounded(.down)
        var t = time_t(whole)
        var parts = tm()
        localtime_r(&t, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let n = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let base = String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let millis = min(999, Int((unix - whole) * 1000))
        let offset = parts.tm_gmtoff
        let sign = offset < 0 ? "-" : "+"
        let minutes = abs(offset) / 60
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return base + "." + ms + sign + two(minutes / 60) + ":" + two(minutes % 60)
    }
}
