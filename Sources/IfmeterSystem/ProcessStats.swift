#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
#endif

/// This process's `process_*` figures, read as client_golang's procfs
/// collector reads them: `/proc/self/stat` (CPU ticks, start time since
/// boot, virtual size, resident pages), `/proc/stat` (boot time),
/// `/proc/self/fd` and RLIMIT_NOFILE. Nil where /proc is not there.
public enum ProcessStats {
    public static func current() -> ProcessMetrics? {
        #if os(Linux) && !IFMETER_PORTABLE_CHECK
        guard let stat = readSmallFile("/proc/self/stat", limit: 4096),
            // The command's name is in parentheses and may hold spaces.
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state); field n is fields[n - 3].
        func field(_ n: Int) -> Double? { n - 3 < fields.count ? Double(fields[n - 3]) : nil }
        guard let utime = field(14), let stime = field(15), let start = field(22), let vsize = field(23), let rss = field(24),
            let boot = bootTime
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        var limit = rlimit()
        _ = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        let open = UInt64(max(0, listDirectory("/proc/self/fd").count - 1)) // less the descriptor that lists it
        return ProcessMetrics(
            cpuSeconds: (utime + stime) / ticks, residentBytes: UInt64(rss * page), virtualBytes: UInt64(vsize), openFDs: open,
            maxFDs: UInt64(limit.rlim_cur), startTime: boot + start / ticks)
        #else
        return nil
        #endif
    }

    /// `btime` of /proc/stat: Unix time the system booted (read once).
    static let bootTime: Double? = {
        guard let text = readSmallFile("/proc/stat", limit: 1 << 16) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6))
        }
        return nil
    }()
}

/// The commit this binary was built from (`git rev-parse --short=12`,
/// `-dirty` when the tree had changes; `unknown` when it was built outside
/// a git tree or without `make`).
public let buildRevision: String = {
    #if os(Linux) && !IFMETER_PORTABLE_CHECK
    String(cString: cifm_revision())
    #else
    "unknown"
    #endif
}()
