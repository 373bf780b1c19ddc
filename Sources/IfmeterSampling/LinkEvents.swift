#if os(Linux)
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore

/// What a link notification (RTM_NEWLINK or RTM_DELLINK) says.
struct LinkMessage {
    var deleted: Bool
    var index: Int
    var name: String?
    var linkKind: String?
    var arphrd: Int
    var flags: UInt32
    var operstate: String?
    var mtu: UInt32?
    /// The final counters, on a deletion (RTM_DELLINK carries IFLA_STATS64).
    var counters: Counters?
}

/// Parses an RTM_NEWLINK or RTM_DELLINK message; nil for other messages
/// and for one too short to hold its `ifinfomsg`.
func parseLinkMessage(_ message: NetlinkReceived) -> LinkMessage? {
    let type = message.type
    guard type == Int32(RTM_NEWLINK) || type == Int32(RTM_DELLINK),
          let info = message.header(as: ifinfomsg.self), let attributes = message.attributes(after: ifinfomsg.self)
    else { return nil }
    var link = LinkMessage(
        deleted: type == Int32(RTM_DELLINK), index: Int(info.ifi_index), arphrd: Int(info.ifi_type), flags: info.ifi_flags)
    for attribute in attributes {
        switch attribute.type {
        case Int(IFLA_IFNAME): link.name = attribute.string
        case Int(IFLA_MTU): link.mtu = attribute.u32
        case Int(IFLA_OPERSTATE): link.operstate = attribute.u8.map(operstateName)
        case Int(IFLA_LINKINFO):
            if let kind = attribute.nested.first(Int32(IFLA_INFO_KIND)) { link.linkKind = kind.string }
        case Int(IFLA_STATS64): link.counters = linkStats64(attribute)
        default: break
        }
    }
    return link
}

/// RFC 2863 operational states, as the kernel numbers them (IF_OPER_*).
func operstateName(_ value: UInt8) -> String {
    switch value {
    case 1: "notpresent"
    case 2: "down"
    case 3: "lowerlayerdown"
    case 4: "testing"
    case 5: "dormant"
    case 6: "up"
    default: "unknown"
    }
}

/// A socket subscribed to link notifications (RTNLGRP_LINK). The kernel
/// queues them until they are read; a burst bigger than the receive buffer
/// overflows it (ENOBUFS), which `drain` counts and reports, never hides
/// (no NETLINK_NO_ENOBUFS).
final class LinkEventListener {
    private let socket: NetlinkSocket

    init(receiveBuffer: Int32) throws(SystemError) {
        socket = try NetlinkSocket(receiveBuffer: receiveBuffer, multicastGroups: [Int32(RTNLGRP_LINK.rawValue)])
    }

    /// Reads every queued notification. Returns how many times the queue
    /// had overflowed (each loses an unknown number of notifications).
    func drain(_ visit: (LinkMessage) -> Void) -> Int {
        var overruns = 0
        while true {
            let buffer = socket.receiveArea
            let n = recv(socket.fd, buffer.baseAddress, buffer.count, 0)
            if n < 0 {
                switch errno {
                case EINTR: continue
                case ENOBUFS:
                    overruns += 1
                    continue
                default: return overruns  // EAGAIN: nothing more
                }
            }
            if n == 0 { return overruns }
            for message in NetlinkMessages(UnsafeRawBufferPointer(start: buffer.baseAddress, count: n)) {
                if let link = parseLinkMessage(message) { visit(link) }
            }
        }
    }
}
#endif
