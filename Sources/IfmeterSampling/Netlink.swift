#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore
import IfmeterSystem

/// The one place that calls libnl's socket and message API. Everything above
/// it sees Swift values; every error carries the libnl or system call.
final class NetlinkSocket {
    let handle: OpaquePointer
    /// Reused for every dump: a netlink dump message is at most 32 KiB, and a
    /// larger buffer lets the kernel fill more per `recvmsg`.
    private var buffer: UnsafeMutableRawBufferPointer

    /// A connected NETLINK_ROUTE socket. With `multicastGroups` it listens
    /// to those groups' notifications instead, without blocking, and asks
    /// for its receive buffer past net.core.rmem_max when allowed (root).
    init(receiveBuffer: Int32 = 1 << 20, multicastGroups: [Int32] = []) throws(SystemError) {
        guard let sk = nl_socket_alloc() else {
            throw SystemError(call: "nl_socket_alloc", message: "out of memory")
        }
        var call = "nl_connect"
        var rc = nl_connect(sk, NETLINK_ROUTE)
        if rc >= 0, !multicastGroups.isEmpty {
            nl_socket_disable_seq_check(sk)
            for group in multicastGroups where rc >= 0 {
                call = "nl_socket_add_membership(\(group))"
                rc = nl_socket_add_membership(sk, group)
            }
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
        if !multicastGroups.isEmpty {
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

    static func libnl(_ call: String, _ code: Int32) -> SystemError {
        SystemError(call: call, errno: nil, message: String(cString: nl_geterror(code)))
    }

    /// Sends `request` and calls `visit` for every message of the answer.
    /// A dump the kernel marks as interrupted (NLM_F_DUMP_INTR: the set of
    /// links changed under it) is run again, up to three times; `restart`
    /// is called first, so the caller can forget what it collected.
    func dump(
        _ request: NetlinkMessage, name: String, restart: () -> Void = {},
        _ visit: (NetlinkReceived) -> Void
    ) throws(SystemError) {
        var attempt = 0
        while true {
            attempt += 1
            let interrupted = try dumpOnce(request, name: name, visit)
            if !interrupted || attempt >= 3 { return }
            restart()
        }
    }

    /// What the kernel answered a one-message request with.
    enum Answer {
        case message(NetlinkReceived)
        case failure(SystemError)
    }

    /// Sends a request answered by one message and hands the answer, or
    /// the kernel's error (with its errno), to the caller. The message
    /// lives in this socket's buffer: read it before the next request.
    func answer(_ request: NetlinkMessage, name: String) throws(SystemError) -> Answer {
        let seq = nl_socket_use_seq(handle)
        nlmsg_hdr(request.handle).pointee.nlmsg_seq = seq
        let sent = nl_send_auto(handle, request.handle)
        if sent < 0 { throw Self.libnl("nl_send_auto(\(name))", sent) }
        while true {
            let n = recv(fd, buffer.baseAddress, buffer.count, 0)
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError.system("recv(\(name))")
            }
            for message in NetlinkMessages(UnsafeRawBufferPointer(start: buffer.baseAddress, count: n)) where message.sequence == seq {
                guard message.type == NLMSG_ERROR else { return .message(message) }
                let code = message.header(as: nlmsgerr.self)?.error ?? -EIO
                return .failure(SystemError.system("netlink \(name)", code: -code))
            }
        }
    }

    /// Sends a request that is answered by one message (not a dump) and
    /// returns what `read` takes from the answer; nil when the kernel
    /// answered with an error.
    func ask<T>(_ request: NetlinkMessage, name: String, _ read: (NetlinkReceived) -> T?) throws(SystemError) -> T? {
        guard case .message(let message) = try answer(request, name: name) else { return nil }
        return read(message)
    }

    private func dumpOnce(
        _ request: NetlinkMessage, name: String, _ visit: (NetlinkReceived) -> Void
    ) throws(SystemError) -> Bool {
        let seq = nl_socket_use_seq(handle)
        nlmsg_hdr(request.handle).pointee.nlmsg_seq = seq
        let sent = nl_send_auto(handle, request.handle)
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
                throw SystemError.system("recvmsg(\(name))")
            }
            if hdr.msg_flags & Int32(MSG_TRUNC) != 0 {
                throw SystemError(call: "recvmsg(\(name))", message: "netlink message truncated")
            }
            if peer.nl_pid != 0 { continue } // not from the kernel
            for message in NetlinkMessages(UnsafeRawBufferPointer(start: buffer.baseAddress, count: n)) {
                guard message.sequence == seq, message.port == port || message.port == 0 else { continue }
                if message.flags & Int32(NLM_F_DUMP_INTR) != 0 { interrupted = true }
                switch message.type {
                case NLMSG_DONE:
                    return interrupted
                case NLMSG_ERROR:
                    guard let err = message.header(as: nlmsgerr.self)?.error else {
                        throw SystemError(call: "netlink \(name)", message: "short NLMSG_ERROR message")
                    }
                    if err == 0 { break }
                    throw SystemError.system("netlink \(name)", code: -err)
                case NLMSG_NOOP, NLMSG_OVERRUN:
                    break
                default:
                    visit(message)
                }
            }
        }
    }
}

/// A netlink request built once and sent again and again; freed with its
/// owner (no `nlmsg_free` by hand).
final class NetlinkMessage {
    let handle: OpaquePointer

    /// A dump request of `type` with the fixed header `header`.
    convenience init(dump type: Int32, header: UnsafeRawBufferPointer) throws(SystemError) {
        try self.init(type: type, flags: NLM_F_DUMP | NLM_F_REQUEST, header: header)
    }

    /// A request of `type` with `flags` and the fixed header `header`.
    init(type: Int32, flags: Int32, header: UnsafeRawBufferPointer) throws(SystemError) {
        guard let msg = nlmsg_alloc_simple(type, flags) else {
            throw SystemError(call: "nlmsg_alloc_simple", message: "out of memory")
        }
        let rc = nlmsg_append(msg, UnsafeMutableRawPointer(mutating: header.baseAddress), header.count, Int32(NLMSG_ALIGNTO))
        if rc < 0 {
            nlmsg_free(msg)
            throw NetlinkSocket.libnl("nlmsg_append", rc)
        }
        handle = msg
    }

    /// A dump request whose fixed header is `header`'s bytes.
    convenience init<Header>(dump type: Int32, _ header: Header) throws(SystemError) {
        try self.init(type: type, flags: NLM_F_DUMP | NLM_F_REQUEST, header)
    }

    /// A request whose fixed header is `header`'s bytes.
    convenience init<Header>(type: Int32, flags: Int32, _ header: Header) throws(SystemError) {
        var copy = header
        let bytes = withUnsafeBytes(of: &copy) { Array($0) }
        try self.init(type: type, flags: flags, header: bytes.withUnsafeBytes { $0 })
    }

    /// Appends a 32-bit attribute.
    func put(u32 value: UInt32, attribute: Int32) throws(SystemError) {
        let rc = nla_put_u32(handle, attribute, value)
        if rc < 0 { throw NetlinkSocket.libnl("nla_put_u32", rc) }
    }

    /// Appends an attribute holding `bytes` (an address).
    func put(bytes: [UInt8], attribute: Int32) throws(SystemError) {
        let rc = bytes.withUnsafeBytes { nla_put(handle, attribute, Int32($0.count), $0.baseAddress) }
        if rc < 0 { throw NetlinkSocket.libnl("nla_put", rc) }
    }

    deinit { nlmsg_free(handle) }
}

/// The messages in a buffer the kernel filled, each checked to lie within it.
struct NetlinkMessages: Sequence, IteratorProtocol {
    private var rest: UnsafeRawBufferPointer

    init(_ buffer: UnsafeRawBufferPointer) { rest = buffer }

    mutating func next() -> NetlinkReceived? {
        let headerSize = MemoryLayout<nlmsghdr>.size
        guard rest.count >= headerSize, let base = rest.baseAddress else { return nil }
        let length = Int(base.loadUnaligned(as: UInt32.self))
        guard length >= headerSize, length <= rest.count else { return nil }
        let message = NetlinkReceived(bytes: UnsafeRawBufferPointer(start: base, count: length))
        let advance = Swift.min(rest.count, (length + 3) & ~3)
        rest = UnsafeRawBufferPointer(rebasing: rest[advance...])
        return message
    }
}

/// One received netlink message: its header fields, its fixed header, and
/// its attributes, every read checked against the message's length.
struct NetlinkReceived {
    /// The whole message, `nlmsg_len` bytes.
    let bytes: UnsafeRawBufferPointer

    private func field<T>(_ offset: Int, _ type: T.Type) -> T {
        bytes.baseAddress!.loadUnaligned(fromByteOffset: offset, as: T.self)
    }

    var type: Int32 { Int32(field(4, UInt16.self)) }
    var flags: Int32 { Int32(field(6, UInt16.self)) }
    var sequence: UInt32 { field(8, UInt32.self) }
    var port: UInt32 { field(12, UInt32.self) }

    static let headerLength = (MemoryLayout<nlmsghdr>.size + 3) & ~3

    /// The fixed header after `nlmsghdr` (`ifinfomsg`, `if_stats_msg`, ...);
    /// nil when the message is too short to hold one.
    func header<T>(as type: T.Type) -> T? {
        guard bytes.count >= Self.headerLength + MemoryLayout<T>.size else { return nil }
        return field(Self.headerLength, T.self)
    }

    /// The attributes after a fixed header of `T`; nil when the message is
    /// too short to hold the header.
    func attributes<T>(after type: T.Type) -> NetlinkAttributes? {
        let start = Self.headerLength + ((MemoryLayout<T>.size + 3) & ~3)
        guard bytes.count >= Self.headerLength + MemoryLayout<T>.size else { return nil }
        guard start <= bytes.count else { return NetlinkAttributes(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return NetlinkAttributes(UnsafeRawBufferPointer(rebasing: bytes[start...]))
    }
}

/// A run of netlink attributes (`struct nlattr`: length, type, payload).
/// Walking it checks every length against what is left, as `nla_ok` does.
struct NetlinkAttributes: Sequence, IteratorProtocol {
    private var rest: UnsafeRawBufferPointer

    init(_ buffer: UnsafeRawBufferPointer) { rest = buffer }

    mutating func next() -> NetlinkAttribute? {
        guard rest.count >= 4, let base = rest.baseAddress else { return nil }
        let length = Int(base.loadUnaligned(as: UInt16.self))
        let type = base.loadUnaligned(fromByteOffset: 2, as: UInt16.self) & 0x3FFF // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
        guard length >= 4, length <= rest.count else { return nil }
        let attribute = NetlinkAttribute(type: Int(type), payload: UnsafeRawBufferPointer(rebasing: rest[4..<length]))
        rest = UnsafeRawBufferPointer(rebasing: rest[Swift.min(rest.count, (length + 3) & ~3)...])
        return attribute
    }

    /// The first attribute of `type`.
    func first(_ type: Int32) -> NetlinkAttribute? {
        for attribute in self where attribute.type == Int(type) { return attribute }
        return nil
    }
}

/// One attribute; every read checks the payload's length.
struct NetlinkAttribute {
    let type: Int
    let payload: UnsafeRawBufferPointer

    var u8: UInt8? { payload.count >= 1 ? payload.load(as: UInt8.self) : nil }
    var u32: UInt32? { payload.count >= 4 ? payload.loadUnaligned(as: UInt32.self) : nil }

    /// The `n`th 64-bit field (a `struct rtnl_link_stats64`), when present.
    func u64(at n: Int) -> UInt64? {
        (n + 1) * 8 <= payload.count ? payload.loadUnaligned(fromByteOffset: n * 8, as: UInt64.self) : nil
    }

    /// The `n`th 32-bit field (a `struct rtnl_link_stats`), when present.
    func u32(at n: Int) -> UInt32? {
        (n + 1) * 4 <= payload.count ? payload.loadUnaligned(fromByteOffset: n * 4, as: UInt32.self) : nil
    }

    /// A NUL-terminated string, read within the payload.
    var string: String? {
        guard !payload.isEmpty else { return nil }
        let end = payload.firstIndex(of: 0) ?? payload.count
        return InterfaceName.decode(payload[..<end])
    }

    var nested: NetlinkAttributes { NetlinkAttributes(payload) }
}

/// Reads the eight counters ifmeter keeps from a `struct rtnl_link_stats64`
/// (which begins rx_packets, tx_packets, rx_bytes, tx_bytes, rx_errors,
/// tx_errors, rx_dropped, tx_dropped); nil when the attribute is shorter.
func linkStats64(_ attr: NetlinkAttribute) -> Counters? {
    guard attr.payload.count >= 8 * 8 else { return nil }
    let p = attr.payload
    func field(_ n: Int) -> UInt64 { p.loadUnaligned(fromByteOffset: n * 8, as: UInt64.self) }
    return Counters(all: field(2), field(3), field(0), field(1), field(4), field(5), field(6), field(7))
}

/// The same from the 32-bit `struct rtnl_link_stats` (IFLA_STATS), for
/// kernels whose answer lacks IFLA_STATS64.
func linkStats32(_ attr: NetlinkAttribute) -> Counters? {
    guard attr.payload.count >= 8 * 4 else { return nil }
    let p = attr.payload
    func field(_ n: Int) -> UInt64 { UInt64(p.loadUnaligned(fromByteOffset: n * 4, as: UInt32.self)) }
    return Counters(all: field(2), field(3), field(0), field(1), field(4), field(5), field(6), field(7))
}

/// All the 64-bit link statistics the attribute holds (up to 24 fields).
func kernelStats64(_ attr: NetlinkAttribute) -> KernelLinkStats {
    let count = min(attr.payload.count / 8, KernelLinkStats.Field.allCases.count)
    return KernelLinkStats(values: (0..<count).map { attr.u64(at: $0)! })
}

/// All the 32-bit link statistics the attribute holds, widened.
func kernelStats32(_ attr: NetlinkAttribute) -> KernelLinkStats {
    let count = min(attr.payload.count / 4, KernelLinkStats.Field.allCases.count)
    return KernelLinkStats(values: (0..<count).map { UInt64(attr.u32(at: $0)!) })
}
#endif
