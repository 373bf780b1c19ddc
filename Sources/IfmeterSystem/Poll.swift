#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `poll` said of one descriptor.
public struct PollResult: Sendable, Hashable {
    public var readable = false
    public var hungUp = false
    public var failed = false
    /// Not an open descriptor (POLLNVAL).
    public var invalid = false

    public var any: Bool { readable || hungUp || failed || invalid }
}

/// Waits up to `timeout` seconds for any of `descriptors` to be readable
/// (a negative descriptor is skipped). Returns each one's result, in
/// order; nil when the wait itself failed (not an interrupt).
public func waitForInput(_ descriptors: [Int32], timeout: Double) -> [PollResult]? {
    var fds = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    let milliseconds = Int32(max(0, min(timeout * 1000 + 1, 60_000)))
    let rc = poll(&fds, nfds_t(fds.count), milliseconds)
    if rc < 0 { return errno == EINTR ? descriptors.map { _ in PollResult() } : nil }
    return fds.map { fd in
        PollResult(
            readable: fd.revents & Int16(POLLIN) != 0, hungUp: fd.revents & Int16(POLLHUP) != 0,
            failed: fd.revents & Int16(POLLERR) != 0, invalid: fd.revents & Int16(POLLNVAL) != 0)
    }
}

/// What a read of a descriptor gave.
public enum ReadResult: Sendable {
    case bytes([UInt8])
    /// End of file (or a terminal that hung up).
    case end
    /// Nothing now (EINTR, EAGAIN): try again later.
    case nothing
    case failed(Int32)
}

/// Reads up to `limit` bytes from `fd` once.
public func readOnce(_ fd: Int32, limit: Int = 256) -> ReadResult {
    var buffer = [UInt8](repeating: 0, count: limit)
    let n = read(fd, &buffer, buffer.count)
    if n > 0 { return .bytes(Array(buffer[..<n])) }
    if n == 0 { return .end }
    return errno == EINTR || errno == EAGAIN ? .nothing : .failed(errno)
}
