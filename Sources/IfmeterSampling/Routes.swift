#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore
import IfmeterSystem

/// An IPv4 or IPv6 address, parsed and printed as `inet_pton` and
/// `inet_ntop` do.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 or 16 bytes, in network order.
    public let bytes: [UInt8]

    public init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = Array(bytes)
    }

    public var isIPv6: Bool { bytes.count == 16 }
    var family: Int32 { isIPv6 ? AF_INET6 : AF_INET }

    public var description: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        bytes.withUnsafeBytes { _ = inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Where the kernel would send a packet to one address: its routing
/// decision (policy rules and every table), as `ip route get` shows it. No
/// packet is sent.
public struct RouteDecision: Sendable, Hashable {
    public var destination: IPAddress
    /// The interface the packet would leave by; nil when there is no route.
    public var interfaceIndex: Int?
    public var gateway: IPAddress?
    public var preferredSource: IPAddress?
    public var table: Int?
    /// Why there is no route (the kernel's errno: ENETUNREACH, ...).
    public var failure: SystemError?
}

/// A default route (a route to 0/0 or ::/0) in any table.
public struct DefaultRoute: Sendable, Hashable {
    public var interfaceIndex: Int
    public var gateway: IPAddress?
    public var metric: Int
    public var table: Int
    public var ipv6: Bool
}

/// Asks the kernel routing questions (RTM_GETROUTE), and listens to route
/// and rule notifications so a caller asks again only when routing changed.
/// The sockets belong to the namespace the router was made in.
public final class Router {
    private let socket: NetlinkSocket
    private let listener: NetlinkSocket?

    /// `watch`: also open the notification socket (IPv4 and IPv6 routes and
    /// policy rules).
    public init(watch: Bool = false) throws(SystemError) {
        socket = try NetlinkSocket()
        listener =
            watch
            ? try NetlinkSocket(
                receiveBuffer: 1 << 20,
                multicastGroups: [RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, RTNLGRP_IPV4_RULE, RTNLGRP_IPV6_RULE].map { Int32($0.rawValue) })
            : nil
    }

    /// The notification socket, for a waiter to watch.
    public var eventDescriptors: [Int32] { listener.map { [$0.fd] } ?? [] }

    /// Whether routes or rules changed since the last call (reads every
    /// queued notification; an overflow counts as a change).
    public func changed() -> Bool {
        guard let listener else { return true }
        var any = false
        let buffer = listener.receiveArea
        while true {
            let n = recv(listener.fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                any = true
                continue
            }
            if n < 0, errno == EINTR { continue }
            if n < 0, errno == ENOBUFS {
                any = true
                continue
            }
            return any
        }
    }

    /// The kernel's routing decision for a packet to `address`.
    public func lookup(_ address: IPAddress) throws(SystemError) -> RouteDecision {
        var header = rtmsg()
        header.rtm_family = UInt8(address.family)
        header.rtm_dst_len = UInt8(address.bytes.count * 8)
        let request = try NetlinkMessage(type: Int32(RTM_GETROUTE), flags: NLM_F_REQUEST, header)
        try request.put(bytes: address.bytes, attribute: Int32(RTA_DST.rawValue))
        var decision = RouteDecision(destination: address)
        let answer = try socket.answer(request, name: "RTM_GETROUTE")
        switch answer {
        case .failure(let error):
            decision.failure = error
        case .message(let message):
            guard let attributes = message.attributes(after: rtmsg.self), let route = message.header(as: rtmsg.self) else {
                throw SystemError(call: "netlink RTM_GETROUTE", message: "short answer")
            }
            decision.table = Int(route.rtm_table)
            for attribute in attributes {
                switch Int32(attribute.type) {
                case Int32(RTA_OIF.rawValue): decision.interfaceIndex = attribute.u32.map(Int.init)
                case Int32(RTA_GATEWAY.rawValue): decision.gateway = IPAddress(bytes: attribute.payload)
                case Int32(RTA_PREFSRC.rawValue): decision.preferredSource = IPAddress(bytes: attribute.payload)
                case Int32(RTA_TABLE.rawValue): decision.table = attribute.u32.map(Int.init)
                default: break
                }
            }
            if route.rtm_type != UInt8(RTN_UNICAST) && decision.interfaceIndex == nil {
                decision.failure = SystemError(call: "RTM_GETROUTE", errno: ENETUNREACH, message: "no unicast route (type \(route.rtm_type))")
            }
        }
        return decision
    }

    /// Every default route, in every table, both families.
    public func defaultRoutes() throws(SystemError) -> [DefaultRoute] {
        var found: [DefaultRoute] = []
        for family in [AF_INET, AF_INET6] {
            var header = rtmsg()
            header.rtm_family = UInt8(family)
            let request = try NetlinkMessage(dump: Int32(RTM_GETROUTE), header)
            try socket.dump(request, name: "RTM_GETROUTE") { message in
                guard message.type == Int32(RTM_NEWROUTE), let route = message.header(as: rtmsg.self),
                    route.rtm_dst_len == 0, route.rtm_type == UInt8(RTN_UNICAST),
                    let attributes = message.attributes(after: rtmsg.self)
                else { return }
                var entry = DefaultRoute(interfaceIndex: 0, metric: 0, table: Int(route.rtm_table), ipv6: family == AF_INET6)
                for attribute in attributes {
                    switch Int32(attribute.type) {
                    case Int32(RTA_OIF.rawValue): entry.interfaceIndex = attribute.u32.map(Int.init) ?? 0
                    case Int32(RTA_GATEWAY.rawValue): entry.gateway = IPAddress(bytes: attribute.payload)
                    case Int32(RTA_PRIORITY.rawValue): entry.metric = attribute.u32.map(Int.init) ?? 0
                    case Int32(RTA_TABLE.rawValue): entry.table = attribute.u32.map(Int.init) ?? entry.table
                    default: break
                    }
                }
                if entry.interfaceIndex > 0 { found.append(entry) }
            }
        }
        return found
    }
}
#endif
