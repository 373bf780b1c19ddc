#if os(Linux)
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore

/// The one place that calls libnl's socket and message API. Everything above
/// it sees Swift values; every error carries the libnl or system call.
final class NetlinkSocket {
    let handle: OpaquePointer
    /// Reused for every dump: a netlink dump message is at most 32 KiB, and a
    /// larger buffer lets the kernel fill more per `recvmsg`.
    private var buffer: UnsafeMutableRawBufferPointer

    /// A connected NETLINK_ROUTE socket. With `multicastGroup` it listens
    /// to that group's notifications instead, without blocking, and asks
    /// for its receive buffer past net.core.rmem_max when allowed (root).
    init(receiveBuffer: Int32 = 1 << 20, multicastGroup: Int32? = nil) throws(SamplingError) {
        guard let sk = nl_socket_alloc() else {
            throw SamplingError(call: "nl_socket_alloc", message: "out of memory")
        }
        var call = "nl_connect"
        var rc = nl_connect(sk, NETLINK_ROUTE)
        if rc >= 0, let group = multicastGroup {
            nl_socket_disable_seq_check(sk)
            call = "nl_socket_add_membership"
            rc = nl_socket_add_membership(sk, group)
            if rc >= 0 {
                call = "nl_socket_set_nonblocking"
                rc = nl_socket_set_nonblocking(sk)
            }
        }
        if rc < 0 {
            nl_socket_free(sk)
            throw Self.libnl(call, rc)
        }
        nl_socket_disable_auto_ack(sk)
        _ = nl_socket_set_buffer_size(sk, receiveBuffer, 0)
        if multicastGroup != nil {
            var size = receiveBuffer
            _ = setsockopt(nl_socket_get_fd(sk), SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        handle = sk
        buffer = .allocate(byteCount: 64 * 1024, alignment: 8)
    }

    /// The buffer `dump` reads into, for other readers of this socket.
    var receiveArea: UnsafeMutableRawBufferPointer { buffer }

    deinit {
        nl_socket_free(handle)
        buffer.deallocate()
    }

    var fd: Int32 { nl_socket_get_fd(handle) }

    static func libnl(_ call: String, _ code: Int32) -> SamplingError {
        SamplingError(call: call, errno: nil, message: String(cString: nl_geterror(code)))
    }

    /// Builds a dump request once; send it again and again with `dump`.
    static func request(type: Int32, header: UnsafeRawBufferPointer) throws(SamplingError) -> OpaquePointer {
        guard let msg = nlmsg_alloc_simple(type, NLM_F_DUMP | NLM_F_REQUEST) else {
            throw SamplingError(call: "nlmsg_alloc_simple", message: "out of memory")
        }
        let rc = nlmsg_append(msg, UnsafeMutableRawPointer(mutating: header.baseAddress), header.count, Int32(NLMSG_ALIGNTO))
        if rc < 0 {
            nlmsg_free(msg)
            throw libnl("nlmsg_append", rc)
        }
        return msg
    }

    /// Sends `request` and calls `visit` for every message of the answer.
    /// A dump the kernel marks as interrupted (NLM_F_DUMP_INTR: the set of
    /// links changed under it) is run again, up to three times; `restart`
    /// is called first, so the caller can forget what it collected.
    func dump(
        _ request: OpaquePointer, name: String, restart: () -> Void = {},
        _ visit: (UnsafeMutablePointer<nlmsghdr>) -> Void
    ) throws(SamplingError) {
        var attempt = 0
        while true {
            attempt += 1
            let interrupted = try dumpOnce(request, name: name, visit)
            if !interrupted || attempt >= 3 { return }
            restart()
        }
    }

    private func dumpOnce(
        _ request: OpaquePointer, name: String, _ visit: (UnsafeMutablePointer<nlmsghdr>) -> Void
    ) throws(SamplingError) -> Bool {
        let seq = nl_socket_use_seq(handle)
        nlmsg_hdr(request).pointee.nlmsg_seq = seq
        let sent = nl_send_auto(handle, request)
        if sent < 0 { throw Self.libnl("nl_send_auto(\(name))", sent) }
        let port = nl_socket_get_local_port(handle)
        var interrupted = false
        while true {
            var iov = iovec(iov_base: buffer.baseAddress, iov_len: buffer.count)
            var peer = sockaddr_nl()
            var hdr = msghdr()
            let n: Int = withUnsafeMutablePointer(to: &peer) { peerPtr in
                withUnsafeMutablePointer(to: &iov) { iovPtr in
                    hdr.msg_name = UnsafeMutableRawPointer(peerPtr)
                    hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_nl>.size)
                    hdr.msg_iov = iovPtr
                    hdr.msg_iovlen = 1
                    return recvmsg(fd, &hdr, 0)
                }
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw SamplingError.system("recvmsg(\(name))")
            }
            if hdr.msg_flags & Int32(MSG_TRUNC) != 0 {
                throw SamplingError(call: "recvmsg(\(name))", message: "netlink message truncated")
            }
            if peer.nl_pid != 0 { continue }  // not from the kernel
            var remaining = Int32(n)
            var nh = buffer.baseAddress!.assumingMemoryBound(to: nlmsghdr.self)
            while nlmsg_ok(nh, remaining) != 0 {
                let h = nh.pointee
                if h.nlmsg_seq == seq && (h.nlmsg_pid == port || h.nlmsg_pid == 0) {
                    if Int32(h.nlmsg_flags) & NLM_F_DUMP_INTR != 0 { interrupted = true }
                    switch Int32(h.nlmsg_type) {
                    case NLMSG_DONE:
                        return interrupted
                    case NLMSG_ERROR:
                        let err = nlmsg_data(nh).assumingMemoryBound(to: nlmsgerr.self).pointee.error
                        if err == 0 { break }
                        throw SamplingError(
                            call: "netlink \(name)", errno: -err, message: String(cString: strerror(-err)))
                    case NLMSG_NOOP, NLMSG_OVERRUN:
                        break
                    default:
                        visit(nh)
                    }
                }
                nh = nlmsg_next(nh, &remaining)
            }
        }
    }
}

/// Reads a `struct rtnl_link_stats64` from an attribute, which netlink
/// aligns to 4 bytes only. Only the eight counters ifmeter keeps are loaded
/// (the struct has 24 and more), field by field; older kernels send a
/// shorter struct, so only what the attribute holds is read.
func linkStats64(_ attr: UnsafeMutablePointer<nlattr>) -> Counters? {
    guard nla_len(attr) >= 8 * 8 else { return nil }
    let p = UnsafeRawPointer(nla_data(attr)!)
    func field(_ n: Int) -> UInt64 { p.loadUnaligned(fromByteOffset: n * 8, as: UInt64.self) }
    // rtnl_link_stats64 begins rx_packets, tx_packets, rx_bytes, tx_bytes,
    // rx_errors, tx_errors, rx_dropped, tx_dropped.
    return Counters(all: field(2), field(3), field(0), field(1), field(4), field(5), field(6), field(7))
}

/// All the 64-bit link statistics the attribute holds (up to 24 fields).
func kernelStats64(_ attr: UnsafeMutablePointer<nlattr>) -> KernelLinkStats {
    let count = min(Int(nla_len(attr)) / 8, KernelLinkStats.Field.allCases.count)
    let p = UnsafeRawPointer(nla_data(attr)!)
    return KernelLinkStats(values: (0..<count).map { p.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self) })
}

/// All the 32-bit link statistics the attribute holds, widened.
func kernelStats32(_ attr: UnsafeMutablePointer<nlattr>) -> KernelLinkStats {
    let count = min(Int(nla_len(attr)) / 4, KernelLinkStats.Field.allCases.count)
    let p = UnsafeRawPointer(nla_data(attr)!)
    return KernelLinkStats(values: (0..<count).map { UInt64(p.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self)) })
}

/// Reads the 32-bit `struct rtnl_link_stats` (IFLA_STATS), for kernels whose
/// answer lacks IFLA_STATS64.
func linkStats32(_ attr: UnsafeMutablePointer<nlattr>) -> Counters? {
    guard nla_len(attr) >= 8 * 4 else { return nil }
    let s = UnsafeRawPointer(nla_data(attr)!).loadUnaligned(as: rtnl_link_stats.self)
    return Counters(
        rxBytes: UInt64(s.rx_bytes), txBytes: UInt64(s.tx_bytes), rxPackets: UInt64(s.rx_packets),
        txPackets: UInt64(s.tx_packets), rxErrors: UInt64(s.rx_errors), txErrors: UInt64(s.tx_errors),
        rxDropped: UInt64(s.rx_dropped), txDropped: UInt64(s.tx_dropped))
}
#endif
