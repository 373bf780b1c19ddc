#if canImport(Darwin)
import Darwin

// Compiled only on Apple platforms, and never compiled yet: no Apple
// toolchain builds this package (docs/library.md says what that leaves).

/// This boot's identity on Apple platforms: `kern.bootsessionuuid`, a UUID
/// the kernel makes at every boot. Nil when it cannot be read.
///
/// Not `kern.boottime`: XNU moves the boot time whenever the wall clock is
/// set (`clock_set_calendar_microtime` "also adjusts the boottime"), so a
/// clock change would read as a reboot, and a restore after a reboot
/// counts the counters in full, which would count the same traffic twice.
public func readBootSessionUUID() -> String? {
    var buffer = [UInt8](repeating: 0, count: 64)
    var size = buffer.count
    guard sysctlbyname("kern.bootsessionuuid", &buffer, &size, nil, 0) == 0, size > 0, size <= buffer.count else {
        return nil
    }
    let text = String(decoding: buffer[..<size].prefix { $0 != 0 }, as: UTF8.self)
    return text.isEmpty ? nil : text
}
#endif
