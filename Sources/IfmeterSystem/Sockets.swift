#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// A TCP socket listening on `host:port` (a name may stand for several
/// addresses, as localhost for 127.0.0.1 and ::1: the first that binds
/// serves; `[::]` serves IPv4 too). `named` is the address as errors say it.
public func listeningSocket(host: String, port: UInt16, named: String) throws(SystemError) -> Int32 {
    var hints = addrinfo()
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
    #if canImport(Glibc)
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    #else
    hints.ai_socktype = SOCK_STREAM
    #endif
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
