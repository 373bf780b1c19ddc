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

/// Parses an RTM_NEWLINK or RTM_DELLINK message with libnl's attribute API.
func parseLinkMessage(_ nh: UnsafeMutablePointer<nlmsghdr>) -> LinkMessage? {
    let type = Int32(nh.pointee.nlmsg_type)
    guard type == Int32(RTM_NEWLINK) || type == Int32(RTM_DELLINK) else { return nil }
    let header = Int32(MemoryLayout<ifinfomsg>.size)
    guard nh.pointee.nlmsg_len >= UInt32(MemoryLayout<nlmsghdr>.size) + UInt32(header) else { return nil }
    let info = nlmsg_data(nh).assumingMemoryBound(to: ifinfomsg.self).pointee
    let attrs = nlmsg_attrdata(nh, header), length = nlmsg_attrlen(nh, header)
    var message = LinkMessage(
        deleted: type == Int32(RTM_DELLINK), index: Int(info.ifi_index), arphrd: Int(info.ifi_type), flags: info.ifi_flags)
    if let attr = nla_find(attrs, length, Int32(IFLA_IFNAME)), let name = nla_get_string(attr) {
        message.name = String(cString: name)
    }
    if let attr = nla_find(attrs, length, Int32(IFLA_MTU)) { message.mtu = nla_get_u32(attr) }
    if let attr = nla_find(attrs, length, Int32(IFLA_OPERSTATE)) { message.operstate = operstateName(nla_get_u8(attr)) }
    if let attr = nla_find(attrs, length, Int32(IFLA_LINKINFO)),
       let kind = nla_find(nla_data(attr)?.assumingMemoryBound(to: nlattr.self), nla_len(attr), Int32(IFLA_INFO_KIND)),
       let text = nla_get_string(kind) {
        message.linkKind = String(cString: text)
    }
    if let attr = nla_find(attrs, length, Int32(IFLA_STATS64)) { message.counters = linkStats64(attr) }
    return message
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

    init(receiveBuffer: Int32) throws(SamplingError) {
        socket = try NetlinkSocket(receiveBuffer: receiveBuffer, multicastGroup: Int32(RTNLGRP_LINK.rawValue))
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
            var remaining = Int32(n)
            var nh = buffer.baseAddress!.assumingMemoryBound(to: nlmsghdr.self)
            while nlmsg_ok(nh, remaining) != 0 {
                if let message = parseLinkMessage(nh) { visit(message) }
                nh = nlmsg_next(nh, &remaining)
            }
        }
    }
}
#endif
