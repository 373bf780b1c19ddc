#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore
import IfmeterSystem

/// node_exporter's netclass facts from a link message (RTM_NEWLINK, from a
/// dump or a notification): everything but what only sysfs has.
func netclassFacts(_ info: ifinfomsg, _ attributes: NetlinkAttributes) -> NetclassFacts {
    var address: [UInt8]?, broadcast: [UInt8]?, alias: String?
    var txqlen: UInt32 = 0, group: UInt32 = 0, changes: UInt32 = 0, upCount: UInt32 = 0, downCount: UInt32 = 0
    var link = info.ifi_index, carrier: UInt8?, mode: UInt8 = 0
    var promiscuity: UInt32?, allmulti: UInt32?
    for attribute in attributes {
        switch attribute.type {
        case Int(IFLA_ADDRESS): address = Array(attribute.payload)
        case Int(IFLA_BROADCAST): broadcast = Array(attribute.payload)
        case Int(IFLA_IFALIAS): alias = trimmedAlias(attribute.payload)
        case Int(IFLA_TXQLEN): txqlen = attribute.u32 ?? 0
        case Int(IFLA_GROUP): group = attribute.u32 ?? 0
        case Int(IFLA_CARRIER_CHANGES): changes = attribute.u32 ?? 0
        case Int(IFLA_CARRIER_UP_COUNT): upCount = attribute.u32 ?? 0
        case Int(IFLA_CARRIER_DOWN_COUNT): downCount = attribute.u32 ?? 0
        // Sent only when it differs from the link's own index.
        case Int(IFLA_LINK): link = attribute.u32.map { Int32(bitPattern: $0) } ?? link
        case Int(IFLA_CARRIER): carrier = attribute.u8
        case Int(IFLA_LINKMODE): mode = attribute.u8 ?? 0
        case Int(IFLA_PROMISCUITY): promiscuity = attribute.u32
        case Int(IFLA_ALLMULTI): allmulti = attribute.u32
        default: break
        }
    }
    return NetclassFacts(
        address: address, broadcast: broadcast, ifalias: alias,
        flags: sysfsFlags(info.ifi_flags, promiscuity: promiscuity, allmulti: allmulti), linkFlags: info.ifi_flags,
        transmitQueueLength: txqlen, group: group, carrierChanges: changes, carrierUpCount: upCount,
        carrierDownCount: downCount, ifaceLink: link, carrier: carrier, linkMode: mode)
}

/// `dev->flags`, which sysfs shows, from what netlink sends
/// (`dev_get_flags`): without the operational bits netlink adds, and with
/// IFF_PROMISC and IFF_ALLMULTI set while their counts are above zero
/// (netlink sets them only when asked for by hand).
func sysfsFlags(_ linkFlags: UInt32, promiscuity: UInt32?, allmulti: UInt32?) -> UInt32 {
    let running: UInt32 = 0x40, lowerUp: UInt32 = 0x10000, dormant: UInt32 = 0x20000
    let promisc: UInt32 = 0x100, allMulti: UInt32 = 0x200
    var flags = linkFlags & ~(running | lowerUp | dormant)
    if let promiscuity { flags = flags & ~promisc | (promiscuity > 0 ? promisc : 0) }
    if let allmulti { flags = flags & ~allMulti | (allmulti > 0 ? allMulti : 0) }
    return flags
}

/// An alias as sysfs's reader in node_exporter gives it: up to the first
/// NUL, without surrounding white space.
private func trimmedAlias(_ payload: UnsafeRawBufferPointer) -> String? {
    let end = payload.firstIndex(of: 0) ?? payload.count
    var bytes = payload[..<end]
    let space: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D]
    while let first = bytes.first, space.contains(first) { bytes = bytes.dropFirst() }
    while let last = bytes.last, space.contains(last) { bytes = bytes.dropLast() }
    return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
}
#endif
