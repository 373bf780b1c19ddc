// The raw loops `make bench` compares ifmeter against, and the remote write
// benchmark's HTTP ends: bare system calls on buffers allocated once, with
// netlink's macros and the /proc/net/dev parse in C (CIfmeterBench). No
// Foundation: these are the baselines, and must cost no more than C's.
import CIfmeterBench
import Glibc
import IfmeterCore
import IfmeterSystem
import Synchronization

/// A bound NETLINK_ROUTE socket in the calling thread's namespace, and the
/// 64 KiB buffer its reads go to.
final class RawNetlink {
    let fd: Int32
    private let buffer: UnsafeMutableRawPointer
    private let request: UnsafeMutableRawPointer
    private static let bufferSize = 1 << 16
    private var seq: UInt32 = 1
    /// The rx_bytes summed by the last dump.
    private(set) var sum: UInt64 = 0

    /// For dumps; `linkEvents`: non-blocking and subscribed to link
    /// notifications (RTNLGRP_LINK) instead. A receive buffer of
    /// `receiveBuffer` bytes (an event socket's past rmem_max, as root may).
    init(receiveBuffer: Int32, linkEvents: Bool = false) throws(SystemError) {
        let flags = Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (linkEvents ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        let fd = socket(AF_NETLINK, flags, NETLINK_ROUTE)
        guard fd >= 0 else { throw .system("socket(AF_NETLINK)") }
        var bound = false
        defer { if !bound { close(fd) } }
        var size = receiveBuffer
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        if linkEvents { setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = linkEvents ? UInt32(RTMGRP_LINK) : 0
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
        }
        guard rc == 0 else { throw .system("bind(AF_NETLINK)") }
        bound = true
        self.fd = fd
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 8)
        request = .allocate(byteCount: Int(CIFM_RAW_REQUEST_SIZE), alignment: 8)
    }

    deinit {
        close(fd)
        buffer.deallocate()
        request.deallocate()
    }

    /// One full dump, parsed the minimal way: RTM_GETSTATS
    /// (IFLA_STATS_LINK_64) when `stats`, RTM_GETLINK (IFLA_STATS64)
    /// otherwise. Returns the number of interfaces; their rx_bytes summed
    /// are in `sum`.
    func dump(stats: Bool) throws(SystemError) -> Int {
        let name = stats ? "RTM_GETSTATS" : "RTM_GETLINK"
        seq &+= 1
        let length = cifm_raw_dump_request(request, seq, stats ? 1 : 0)
        guard send(fd, request, length, 0) >= 0 else { throw .system("send(\(name))") }
        var count = 0, total: UInt64 = 0, done: Int32 = 0, error: Int32 = 0
        while done == 0 {
            let n = recv(fd, buffer, Self.bufferSize, 0)
            if n < 0 {
                if errno == EINTR { continue }
                throw .system("recv(\(name))")
            }
            count += cifm_raw_parse_dump(buffer, n, seq, stats ? 1 : 0, &total, &done, &error)
        }
        if error != 0 { throw .system(name, code: error) }
        sum = total
        return count
    }

    /// Reads what is queued on a link-event socket: the link messages read,
    /// and the overruns (ENOBUFS) met.
    func drainLinkEvents() throws(SystemError) -> (events: Int, overruns: Int) {
        var events = 0, overruns = 0
        while true {
            let n = recv(fd, buffer, Self.bufferSize, 0)
            if n > 0 {
                events += cifm_raw_count_link_events(buffer, n)
            } else if n == 0 || errno == EAGAIN || errno == EWOULDBLOCK {
                return (events, overruns)
            } else if errno == ENOBUFS {
                overruns += 1
            } else if errno != EINTR {
                throw .system("recv(link events)")
            }
        }
    }
}

/// /proc/net/dev of the calling thread's namespace, read whole into a
/// buffer allocated once and parsed: the number of interfaces, and the sum
/// of their receive bytes in `sum`.
final class RawProcNetDev {
    private static let path = "/proc/thread-self/net/dev"
    private let capacity = 8 << 20
    private let buffer: UnsafeMutablePointer<CChar>
    private(set) var sum: UInt64 = 0

    init() { buffer = .allocate(capacity: capacity) }
    deinit { buffer.deallocate() }

    func read() throws(SystemError) -> Int {
        let fd = open(Self.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .system("open(\(Self.path))") }
        defer { close(fd) }
        var used = 0
        while true {
            let n = Glibc.read(fd, buffer + used, capacity - 1 - used)
            if n < 0 {
                if errno == EINTR { continue }
                throw .system("read(\(Self.path))")
            }
            if n == 0 { break }
            used += n
            if used == capacity - 1 {
                throw SystemError(call: "read(\(Self.path))", message: "more than \(capacity - 1) bytes, this benchmark's buffer")
            }
        }
        return cifm_raw_parse_proc_net_dev(buffer, used, &sum)
    }
}

/// The remote write benchmark's receiver: a minimal HTTP/1.1 server on a
/// thread of its own that reads each request on a listening socket
/// (keep-alive: requests one after another on a connection, each its
/// headers and a Content-Length body), answers 204 and counts what it read.
final class HTTPSink: Sendable {
    private let bytes = Atomic<Int>(0)
    private let bodyBytes = Atomic<Int>(0)
    private let requests = Atomic<Int>(0)

    /// Serves `listening` (a listening TCP socket) until the process ends.
    init(listening: Int32) throws(SystemError) {
        try startThread { [self] in acceptLoop(listening) }
    }

    /// Bytes read (headers and bodies), body bytes, and requests, so far.
    var counts: (bytes: Int, bodies: Int, requests: Int) {
        (bytes.load(ordering: .relaxed), bodyBytes.load(ordering: .relaxed), requests.load(ordering: .relaxed))
    }

    private func acceptLoop(_ listening: Int32) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
        let skip = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
        while true {
            // accept4 is one of glibc's GNU extensions Swift does not see.
            let fd = accept(listening, nil, nil)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                fail("\(SystemError.system("accept(remote write receiver)"))")
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            defer { close(fd) }
            serve(fd, buffer, skip)
        }
    }

    private static let answer = Array("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n".utf8)

    /// One connection, until it ends or sends what this does not read.
    private func serve(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, _ skip: UnsafeMutableRawBufferPointer) {
        var have = 0
        while true {
            // The headers.
            var searched = 0
            var end = Self.headerEnd(buffer, from: 0, to: have)
            while end == nil {
                if have == buffer.count { return }
                let n = read(fd, buffer.baseAddress! + have, buffer.count - have)
                if n <= 0 { return }
                bytes.add(n, ordering: .relaxed)
                searched = max(have - 3, 0)
                have += n
                end = Self.headerEnd(buffer, from: searched, to: have)
            }
            let headers = end!
            let headerLength = headers + 4
            let length = Self.contentLength(UnsafeRawBufferPointer(rebasing: buffer[..<headers]))
            // The body: what is buffered, then the rest.
            let buffered = have - headerLength
            var left = length - min(buffered, length)
            let extra = max(buffered - length, 0)
            if extra > 0 { buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + have - extra, byteCount: extra) }
            have = extra
            while left > 0 {
                let n = read(fd, skip.baseAddress!, min(left, skip.count))
                if n <= 0 { return }
                bytes.add(n, ordering: .relaxed)
                left -= n
            }
            bodyBytes.add(length, ordering: .relaxed)
            requests.add(1, ordering: .relaxed)
            do { try writeAll(Self.answer, to: fd) } catch { return }
        }
    }

    /// Where "\r\n\r\n" starts in `buffer[from..<to]`.
    private static func headerEnd(_ buffer: UnsafeMutableRawBufferPointer, from: Int, to: Int) -> Int? {
        var at = from
        while at + 4 <= to {
            if buffer[at] == 13, buffer[at + 1] == 10, buffer[at + 2] == 13, buffer[at + 3] == 10 { return at }
            at += 1
        }
        return nil
    }

    /// The value of a Content-Length header among `headers`; 0 without one.
    private static func contentLength(_ headers: UnsafeRawBufferPointer) -> Int {
        let name = Array("content-length:".utf8)
        var line = 0
        while line < headers.count {
            var next = line
            while next < headers.count, headers[next] != 10 { next += 1 }
            if next - line > name.count, (0..<name.count).allSatisfy({ headers[line + $0] | 0x20 == name[$0] | 0x20 }) {
                var value = 0
                for byte in headers[(line + name.count)..<next] {
                    if byte == 32 || byte == 9 { continue }
                    guard byte >= 48, byte <= 57 else { break }
                    value = value * 10 + Int(byte - 48)
                }
                return value
            }
            line = next + 1
        }
        return 0
    }
}

/// Sends `request` (a whole HTTP request, `Connection: close`) to
/// 127.0.0.1:`port` in the calling thread's namespace and reads the
/// response to its end: every byte read, the body's size, and the body
/// itself when `keepingBody`.
func httpGet(port: UInt16, _ request: String, keepingBody: Bool = false) throws(SystemError) -> (total: Int, body: Int, text: [UInt8]) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw .system("socket(AF_INET)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard rc == 0 else { throw .system("connect(127.0.0.1:\(port))") }
    try writeAll(Array(request.utf8), to: fd)
    var total = 0, headerEnd: Int? = nil, matched = 0
    var text: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw .system("read(127.0.0.1:\(port))")
        }
        if n == 0 { break }
        var bodyStart = 0
        if headerEnd == nil {
            // "\r\n\r\n", perhaps across reads.
            for i in 0..<n {
                let byte = chunk[i]
                matched = byte == (matched % 2 == 0 ? 13 : 10) ? matched + 1 : (byte == 13 ? 1 : 0)
                if matched == 4 {
                    headerEnd = total + i + 1
                    bodyStart = i + 1
                    break
                }
            }
        }
        if keepingBody, headerEnd != nil { text.append(contentsOf: chunk[bodyStart..<n]) }
        total += n
    }
    return (total, headerEnd.map { total - $0 } ?? 0, text)
}
