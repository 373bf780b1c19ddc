#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
#endif

extension SystemError {
    /// A write to a pipe or socket whose reader went away (EPIPE; SIGPIPE
    /// is ignored, see `ProcessStart`).
    public var isBrokenPipe: Bool { errno == EPIPE }

    /// From errno as the call left it.
    public static func system(_ call: String) -> SystemError {
        system(call, code: currentErrno())
    }

    public static func system(_ call: String, code: Int32) -> SystemError {
        SystemError(call: call, errno: code, message: String(cString: strerror(code)))
    }
}

/// errno, read through a function so that `SystemError.errno` does not
/// shadow it.
public func currentErrno() -> Int32 { errno }

/// Seconds on the monotonic clock, the time base of samples and traces.
public func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// CPU seconds the calling thread has used.
public func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Reads a small text file whole (sysfs, procfs). Nil when it cannot be read.
public func readSmallFile(_ path: String, limit: Int = 4096) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: limit)
    var used = 0
    while used < limit {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + used, limit - used) }
        if n < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if n == 0 { break }
        used += n
    }
    return String(decoding: buffer[..<used], as: UTF8.self)
}

/// Whether something exists at `path`, without following a final symlink.
public func pathExists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
}

/// The target of a symlink, or nil.
public func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink(path, &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    return buffer.withUnsafeBufferPointer { String(decoding: UnsafeRawBufferPointer($0).prefix(n), as: UTF8.self) }
}

/// Entry names of a folder, without `.` and `..`.
public func listDirectory(_ path: String) -> [String] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafePointer(to: entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// Seconds since the Unix epoch.
public func wallClock() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Hands the pages of memory freed since the last call back to the system
/// (malloc_trim): glibc keeps freed pages between live blocks resident,
/// and a sample and a scrape free about 0.7 MB of them at 4000 interfaces.
public func releaseFreeMemory() {
    #if os(Linux) && !IFMETER_PORTABLE_CHECK
    cifm_release_free_memory()
    #endif
}

/// Sleeps for `seconds` (returns early on a signal).
public func sleepSeconds(_ seconds: Double) {
    guard seconds > 0 else { return }
    var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
    _ = nanosleep(&ts, nil)
}

/// errno values that callers above the system layer decide by, named.
public enum Errno {
    public static let noSuchFile = ENOENT
    public static let isADirectory = EISDIR
    public static let notADirectory = ENOTDIR
    public static let permissionDenied = EACCES
    public static let notPermitted = EPERM
    public static let tooManyLinks = ELOOP
    public static let invalid = EINVAL
    public static let exists = EEXIST
    public static let again = EAGAIN
    public static let interrupted = EINTR
    public static let noBuffers = ENOBUFS
    public static let addressInUse = EADDRINUSE
    public static let noAddress = EADDRNOTAVAIL
}

/// libm, for what Swift's standard library lacks (the live view's log scale).
public enum Math {
    public static func log1p(_ x: Double) -> Double {
        #if canImport(Glibc)
        Glibc.log1p(x)
        #else
        Darwin.log1p(x)
        #endif
    }
}

/// glibc's malloc: a fixed mmap threshold, so the big per-sample buffers go
/// back to the system, and two arenas (called first thing in main).
public func tuneMemoryAllocator() {
    #if os(Linux) && !IFMETER_PORTABLE_CHECK
    cifm_tune_malloc()
    #endif
}
