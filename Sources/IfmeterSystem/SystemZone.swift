#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

extension LocalZone {
    /// The process's zone (`TZ`, else /etc/localtime), through localtime_r.
    public static let system = LocalZone { t in
        var time = time_t(t)
        var parts = tm()
        localtime_r(&time, &parts)
        return Int(parts.tm_gmtoff)
    }
}
