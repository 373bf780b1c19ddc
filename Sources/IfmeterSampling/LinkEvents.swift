#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore
import IfmeterSystem

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
    /// IFLA_CARRIER_CHANGES.
    var carrierChanges: UInt32?
    /// The final counters, on a deletion (RTM_DELLINK carries IFLA_STATS64).
    var counters: Counters?
    /// The link's peer or lower device (IFLA_LINK), and the peer's
    /// namespace as this one numbers it (IFLA_LINK_NETNSID).
    var link: Int?
    var linkNetnsID: Int32?
    /// node_exporter's netclass facts, when asked for.
    var netclass: NetclassFacts?
}

/// Which final counters the kernel under-reports at deletion, by link kind,
/// as `LinkKindFinalsTests` measures on this kernel: a veth's receive
/// counters are read from its peer, detached before the deletion is
/// announced. The other kinds that could be created here (tun, tap,
/// macvlan, macvtap, bridge, vxlan, ifb) announce complete finals.
enum DeletionFinals {
    static let underReported: [String: CounterKeySet] = [
        "veth": [.rxBytes, .rxPackets]
    ]

    static func lowerBound(linkKind: String?) -> CounterKeySet {
        linkKind.flatMap { underReported[$0] } ?? []
    }
}

/// Parses an RTM_NEWLINK or RTM_DELLINK message; nil for other messages
/// and for one too short to hold its `ifinfomsg`. `netclass`: also
/// node_exporter's netclass facts (a second pass over the attributes).
func parseLinkMessage(_ message: NetlinkReceived, netclass: Bool = false) -> LinkMessage? {
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
        case Int(IFLA_CARRIER_CHANGES): link.carrierChanges = attribute.u32
        case Int(IFLA_OPERSTATE): link.operstate = attribute.u8.map(operstateName)
        case Int(IFLA_LINKINFO):
            if let kind = attribute.nested.first(Int32(IFLA_INFO_KIND)) { link.linkKind = kind.string }
        case Int(IFLA_STATS64): link.counters = linkStats64(attribute)
        case Int(IFLA_LINK): link.link = attribute.u32.map(Int.init)
        case Int(IFLA_LINK_NETNSID): link.linkNetnsID = attribute.u32.map { Int32(bitPattern: $0) }
        default: break
        }
    }
    // A bridge's notices about its ports (AF_BRIDGE) carry a few
    // attributes only: the facts come from the link's own messages.
    if netclass, !link.deleted, info.ifi_family == UInt8(AF_UNSPEC) { link.netclass = netclassFacts(info, attributes) }
    return link
}

/// A veth's receive counters are its peer's transmit counters; at deletion
/// the peer is detached first, so each end announces its receive counters
/// without them. When both ends' deletions are seen (the same namespace, or
/// two watched ones), each end's final receive counters are the other's
/// final transmit counters, which are complete: write them, and they are
/// no longer a lower bound.
///
/// Which end is whose peer: an end's own word (`peer`, which the catalog
/// keeps, since a deletion names no peer), else the word of the end that
/// names it. Only one end may have said it: `ip link add P type veth peer
/// name Q` registers and announces Q before P exists, so Q's announcement
/// names no peer (IFLA_LINK 0), and nothing announces Q again while it
/// stays as it is (an idle pair never brought up); P's names Q.
enum VethPeers {
    /// Completes the deletions of pairs whose both ends are in `events`;
    /// `namespaces(id, in:)` names the namespaces the kernel's id for the
    /// peer's may stand for, seen from the event's own (empty: the same
    /// namespace; more than one when an id was given again after its
    /// namespace went), tried in order. `finals(netns, index)`: the last
    /// counters of an interface whose deletion is not among `events` (its
    /// namespace went earlier, after a last reading).
    static func complete(
        _ events: inout [DeletionEvent], namespaces: (Int32, String) -> [String] = { _, _ in [] },
        finals known: (String, Int) -> Counters? = { _, _ in nil }
    ) {
        let finals = events
        var byKey: [PeerKey: Int] = [:]
        for (n, event) in finals.enumerated() {
            guard let index = event.interface.index else { continue }
            byKey[PeerKey(netns: event.interface.netns, index: index)] = n
        }
        func candidates(_ event: DeletionEvent, _ peer: PeerLink) -> [String] {
            peer.netnsID.map { namespaces($0, event.interface.netns) } ?? [event.interface.netns]
        }
        // Each end that a deletion among `events` names as its peer, and
        // that deletion; made when first needed.
        var namedBy: [PeerKey: Int]?
        func namer(of event: DeletionEvent) -> Int? {
            guard let index = event.interface.index else { return nil }
            if namedBy == nil {
                var map: [PeerKey: Int] = [:]
                for (m, other) in finals.enumerated() {
                    guard let peer = other.peer else { continue }
                    for netns in candidates(other, peer) where byKey[PeerKey(netns: netns, index: peer.index)] != nil {
                        map[PeerKey(netns: netns, index: peer.index)] = m
                        break
                    }
                }
                namedBy = map
            }
            return namedBy?[PeerKey(netns: event.interface.netns, index: index)]
        }
        for n in events.indices where events[n].lowerBound.contains(.rxBytes) {
            var found: Counters?
            if let peer = events[n].peer {
                for netns in candidates(events[n], peer) {
                    if let other = byKey[PeerKey(netns: netns, index: peer.index)] {
                        found = finals[other].interface.counters
                    } else {
                        found = known(netns, peer.index)
                    }
                    if found != nil { break }
                }
            }
            // The end that names this one as its peer.
            if found == nil, let other = namer(of: finals[n]) { found = finals[other].interface.counters }
            guard let tx = found else { continue }
            events[n].interface.counters[.rxBytes] = tx.value(.txBytes)
            events[n].interface.counters[.rxPackets] = tx.value(.txPackets)
            events[n].lowerBound.remove(.rxBytes)
            events[n].lowerBound.remove(.rxPackets)
        }
    }

    private struct PeerKey: Hashable {
        var netns: String
        var index: Int
    }
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
    /// Parse node_exporter's netclass facts too.
    var netclass = false

    init(receiveBuffer: Int32) throws(SystemError) {
        socket = try NetlinkSocket(receiveBuffer: receiveBuffer, multicastGroups: [Int32(RTNLGRP_LINK.rawValue)])
    }

    /// Readable when notifications wait.
    var fd: Int32 { socket.fd }

    /// Reads every queued notification. Returns how many times the queue
    /// had overflowed (each loses an unknown number of notifications).
    /// Reads every queued notification; `arrived` is called once before
    /// the first one is parsed (nothing is done when nothing is queued).
    func drain(arrived: () -> Void = {}, _ visit: (LinkMessage) -> Void) -> Int {
        var overruns = 0
        var first = true
        while true {
            let buffer = socket.receiveArea
            let n = recv(socket.fd, buffer.baseAddress, buffer.count, 0)
            if n < 0 {
                switch errno {
                case EINTR: continue
                case ENOBUFS:
                    overruns += 1
                    continue
                default: return overruns // EAGAIN: nothing more
                }
            }
            if n == 0 { return overruns }
            if first {
                first = false
                arrived()
            }
            for message in NetlinkMessages(UnsafeRawBufferPointer(start: buffer.baseAddress, count: n)) {
                if let link = parseLinkMessage(message, netclass: netclass) { visit(link) }
            }
        }
    }
}
#endif
