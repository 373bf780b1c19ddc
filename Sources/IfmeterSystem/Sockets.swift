#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// getaddrinfo's hints for TCP with `flags` (SOCK_STREAM as each C library
/// spells it).
func streamHints(flags: Int32) -> addrinfo {
    var hints = addrinfo()
    hints.ai_flags = flags
    #if canImport(Glibc)
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    #else
    hints.ai_socktype = SOCK_STREAM
    #endif
    return hints
}

/// A TCP socket listening on `host:port` (a name may stand for several
/// addresses, as localhost for 127.0.0.1 and ::1: the first that binds
/// serves; `[::]` serves IPv4 too). `named` is the address as errors say it.
public func listeningSocket(host: String, port: UInt16, named: String) throws(SystemError) -> Int32 {
    var hints = streamHints(flags: AI_PASSIVE | AI_NUMERICSERV)
    var result: UnsafeMutablePointer<addrinfo>?
    let rc = getaddrinfo(host, String(port), &hints, &result)
    if rc != 0 {
        throw SystemError(
            call: "getaddrinfo(\(host))",
            message: "cannot resolve '\(host)' (\(String(cString: gai_strerror(rc)))); give an IP address, or a name in /etc/hosts")
    }
    defer { freeaddrinfo(result) }
    var firstError: SystemError?
    var next = result
    while let info = next {
        next = info.pointee.ai_next
        #if canImport(Glibc)
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(info.pointee.ai_family, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw .system("socket") }
        var one: Int32 = 1, zero: Int32 = 0
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if info.pointee.ai_family == AF_INET6 {
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, socklen_t(MemoryLayout<Int32>.size))
        }
        if bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) != 0 {
            let code = errno
            close(fd)
            firstError = firstError ?? .system("bind(\(named))", code: code)
            continue
        }
        if listen(fd, 511) != 0 {
            let code = errno
            close(fd)
            throw .system("listen(\(named))", code: code)
        }
        return fd
    }
    throw firstError ?? SystemError(call: "getaddrinfo(\(host))", message: "no address")
}

/// Frees memory a C library allocated with malloc.
public func freeMallocated(_ pointer: UnsafeMutableRawPointer) { free(pointer) }

/// The processors online.
public var processorCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

/// Grows or cuts memory from malloc (realloc: past malloc's mmap
/// threshold it moves no bytes); nil when there is no room (the memory is
/// left as it was).
public func reallocateMallocated(_ pointer: UnsafeMutableRawPointer?, count: Int) -> UnsafeMutableRawPointer? {
    realloc(pointer, count)
}

/// Shuts a connected socket down both ways (shutdown(2)): its owner sees
/// the end of the stream and closes it as usual.
public func shutdownSocket(_ fd: Int32) {
    #if canImport(Glibc)
    _ = shutdown(fd, Int32(SHUT_RDWR))
    #else
    _ = shutdown(fd, SHUT_RDWR)
    #endif
}

/// A peer's address as a value: its family and its IP address (4 or 16
/// bytes), no port.
public struct PeerAddress: Sendable, Hashable {
    public enum Family: Sendable, Hashable { case ipv4, ipv6 }
    public var family: Family
    public var bytes: [UInt8]

    public init(family: Family, bytes: [UInt8]) {
        self.family = family
        self.bytes = bytes
    }

    /// An IPv4 or IPv6 address as `inet_pton` reads it (`127.0.0.1`,
    /// `::1`; no brackets, no zone); nil for anything else.
    public init?(parsing text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(family: .ipv4, bytes: withUnsafeBytes(of: &v4) { Array($0) })
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        self.init(family: .ipv6, bytes: withUnsafeBytes(of: &v6) { Array($0) })
    }

    /// From a `struct sockaddr` (AF_INET or AF_INET6); nil for others.
    public init?(sockaddr raw: UnsafeRawPointer) {
        let family = raw.load(as: sockaddr.self).sa_family
        if Int32(family) == AF_INET {
            let address = raw.load(as: sockaddr_in.self).sin_addr
            self.init(family: .ipv4, bytes: withUnsafeBytes(of: address) { Array($0) })
        } else if Int32(family) == AF_INET6 {
            let address = raw.load(as: sockaddr_in6.self).sin6_addr
            self.init(family: .ipv6, bytes: withUnsafeBytes(of: address) { Array($0) })
        } else {
            return nil
        }
    }
}

/// `count` random bytes from the kernel (getentropy(3): getrandom(2),
/// 256 bytes at a time).
public func randomBytes(_ count: Int) throws(SystemError) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    var filled = 0
    while filled < count {
        let chunk = min(256, count - filled)
        let rc = bytes.withUnsafeMutableBytes { getentropy($0.baseAddress! + filled, chunk) }
        guard rc == 0 else { throw .system("getentropy") }
        filled += chunk
    }
    return bytes
}
