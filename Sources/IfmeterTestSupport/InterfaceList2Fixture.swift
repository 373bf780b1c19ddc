// NET_RT_IFLIST2 buffers for the tests of the Apple 64-bit source
// (IfmeterSampling's InterfaceList2, the library's sysctl meter), built
// field by field after XNU's headers:
// apple-oss-distributions/xnu e3723e1f17661b24996789d8afc084c0c3303b26
// (tag xnu-11417.101.15):
//   bsd/net/if.h      struct if_msghdr2, struct ifa_msghdr, struct ifma_msghdr2, IFF_UP
//   bsd/net/if_var.h  struct if_data64 under #pragma pack(4); IF_DATA_TIMEVAL is
//                     struct timeval32 (two 32-bit ints) on LP64
//   bsd/net/route.h   RTM_VERSION 5, RTM_NEWADDR 0xc, RTM_IFINFO2 0x12,
//                     RTM_NEWMADDR2 0x13, RTA_GATEWAY 0x2, RTA_NETMASK 0x4,
//                     RTA_IFP 0x10, RTA_IFA 0x20, RTA_BRD 0x80
//   bsd/net/if_dl.h   struct sockaddr_dl (20 bytes on Apple: no sdl_rcf, sdl_route)
//   bsd/net/rtsock.c  sysctl_iflist2: per interface an RTM_IFINFO2 (RTA_IFP: its
//                     sockaddr_dl), then an RTM_NEWADDR per address, then an
//                     RTM_NEWMADDR2 per multicast membership; rt_msg2: the header,
//                     then the sockaddrs in RTAX order, each ROUNDUP32(sa_len) bytes
//   bsd/sys/socket.h  AF_INET 2, AF_LINK 18, AF_INET6 30
//   bsd/net/if_types.h IFT_OTHER 0x1, IFT_ETHER 0x6, IFT_CELLULAR 0xff
// Apple platforms are little-endian. The sockaddr_in and sockaddr_in6 of the
// address records are opaque to the parser (it skips those records whole).

import IfmeterSampling

/// Little-endian bytes written field by field. Each write names the offset
/// its field has in XNU's structure; a write elsewhere fails, so the offsets
/// in the comments below are checked by every build of a fixture.
package struct FieldWriter {
    package init() {}

    package var bytes: [UInt8] = []
    package var count: Int { bytes.count }

    private func at(_ offset: Int) {
        precondition(bytes.count == offset, "field written at \(bytes.count), declared at \(offset)")
    }

    package mutating func u8(_ offset: Int, _ value: UInt8) {
        at(offset)
        bytes.append(value)
    }

    package mutating func u16(_ offset: Int, _ value: UInt16) {
        at(offset)
        bytes += (0..<2).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    package mutating func u32(_ offset: Int, _ value: UInt32) {
        at(offset)
        bytes += (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    package mutating func u64(_ offset: Int, _ value: UInt64) {
        at(offset)
        bytes += (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    package mutating func raw(_ offset: Int, _ value: [UInt8]) {
        at(offset)
        bytes += value
    }

    /// Zeros up to `length`.
    package mutating func zeros(to length: Int) {
        bytes += [UInt8](repeating: 0, count: max(0, length - bytes.count))
    }

    /// The message's length into its first field (`*_msglen`, u16 @0).
    package mutating func patchLength() {
        bytes[0] = UInt8(bytes.count & 0xff)
        bytes[1] = UInt8(bytes.count >> 8)
    }
}

/// rtsock.c's ROUNDUP32: a sockaddr takes its length rounded up to 4 (4 when 0).
package func roundup32(_ length: Int) -> Int { length > 0 ? 1 + ((length - 1) | 3) : 4 }

package enum IfList2Fixture {
    package static let rtaGateway: UInt32 = 0x2, rtaNetmask: UInt32 = 0x4, rtaIFP: UInt32 = 0x10
    package static let rtaIFA: UInt32 = 0x20, rtaBRD: UInt32 = 0x80

    /// struct sockaddr_dl (if_dl.h), `sdl_len` at least sizeof (20), and
    /// with `padded` the zeros of ROUNDUP32 after it, as rt_msg2 writes it.
    package static func sockaddrDL(index: UInt16, type: UInt8, name: String, address: [UInt8], padded: Bool = true) -> [UInt8] {
        let name = Array(name.utf8)
        let length = max(20, 8 + name.count + address.count)
        var w = FieldWriter()
        w.u8(0, UInt8(length)) // sdl_len: total length of the sockaddr
        w.u8(1, 18) // sdl_family: AF_LINK
        w.u16(2, index) // sdl_index: the interface's index
        w.u8(4, type) // sdl_type: IFT_*
        w.u8(5, UInt8(name.count)) // sdl_nlen: name length, no NUL
        w.u8(6, UInt8(address.count)) // sdl_alen: link-level address length
        w.u8(7, 0) // sdl_slen: selector length
        w.raw(8, name) // sdl_data: the name ...
        w.raw(8 + name.count, address) // ... then the address (LLADDR)
        w.zeros(to: length) // the rest of sdl_data[12]
        if padded { w.zeros(to: roundup32(length)) }
        return w.bytes
    }

    /// An RTM_IFINFO2 message: struct if_msghdr2 (if.h) with its struct
    /// if_data64 (if_var.h) at 32, then the RTA_IFP sockaddr_dl; with
    /// `gateway`, an RTA_GATEWAY sockaddr before it (RTAX_GATEWAY 1 comes
    /// before RTAX_IFP 4).
    package static func interfaceInfo2(
        _ r: InterfaceList2.Record, version: UInt8 = 5, type: UInt8 = 0x12, gateway: [UInt8]? = nil
    ) -> [UInt8] {
        var w = FieldWriter()
        w.u16(0, 0) // ifm_msglen (patched at the end)
        w.u8(2, version) // ifm_version: RTM_VERSION
        w.u8(3, type) // ifm_type: RTM_IFINFO2
        w.u32(4, rtaIFP | (gateway == nil ? 0 : rtaGateway)) // ifm_addrs: RTA_* of the sockaddrs after
        w.u32(8, r.flags) // ifm_flags: (u_short)if_flags
        w.u16(12, UInt16(r.index)) // ifm_index
        w.u16(14, 0) // padding: ifm_snd_len is an int, aligned to 4
        w.u32(16, 3) // ifm_snd_len
        w.u32(20, 512) // ifm_snd_maxlen
        w.u32(24, r.sndDrops) // ifm_snd_drops
        w.u32(28, 0) // ifm_timer
        // ifm_data, struct if_data64 at 32: its own offsets after the '@'.
        w.u8(32, r.type) // ifi_type @0
        w.u8(33, 0) // ifi_typelen @1
        w.u8(34, 0) // ifi_physical @2
        w.u8(35, UInt8(r.linkAddress.count)) // ifi_addrlen @3
        w.u8(36, 14) // ifi_hdrlen @4
        w.u8(37, 0) // ifi_recvquota @5
        w.u8(38, 0) // ifi_xmitquota @6
        w.u8(39, 0) // ifi_unused1 @7
        w.u32(40, r.mtu) // ifi_mtu @8
        w.u32(44, 0) // ifi_metric @12
        w.u64(48, r.baudrate) // ifi_baudrate @16 (u_int64_t, pack(4))
        w.u64(56, r.ipackets) // ifi_ipackets @24
        w.u64(64, r.ierrors) // ifi_ierrors @32
        w.u64(72, r.opackets) // ifi_opackets @40
        w.u64(80, r.oerrors) // ifi_oerrors @48
        w.u64(88, r.collisions) // ifi_collisions @56
        w.u64(96, r.ibytes) // ifi_ibytes @64
        w.u64(104, r.obytes) // ifi_obytes @72
        w.u64(112, r.imcasts) // ifi_imcasts @80
        w.u64(120, r.omcasts) // ifi_omcasts @88
        w.u64(128, r.iqdrops) // ifi_iqdrops @96
        w.u64(136, r.noproto) // ifi_noproto @104
        w.u32(144, 0) // ifi_recvtiming @112
        w.u32(148, 0) // ifi_xmittiming @116
        w.u32(152, 1_700_000_000) // ifi_lastchange.tv_sec @120 (struct timeval32)
        w.u32(156, 250_000) // ifi_lastchange.tv_usec @124
        // 160: sizeof(struct if_msghdr2); rt_msg2's sockaddrs follow.
        if let gateway { w.raw(160, gateway) }
        w.raw(w.count, sockaddrDL(index: UInt16(r.index), type: r.type, name: r.name, address: r.linkAddress))
        w.patchLength()
        return w.bytes
    }

    /// An RTM_NEWADDR message: struct ifa_msghdr (if.h), then RTA_NETMASK,
    /// RTA_IFA and RTA_BRD, three sockaddr_in.
    package static func newAddress(index: UInt16) -> [UInt8] {
        var w = FieldWriter()
        w.u16(0, 0) // ifam_msglen (patched at the end)
        w.u8(2, 5) // ifam_version: RTM_VERSION
        w.u8(3, 0x0c) // ifam_type: RTM_NEWADDR
        w.u32(4, rtaNetmask | rtaIFA | rtaBRD) // ifam_addrs
        w.u32(8, 0) // ifam_flags
        w.u16(12, index) // ifam_index
        w.u16(14, 0) // padding
        w.u32(16, 0) // ifam_metric
        // 20: sizeof(struct ifa_msghdr).
        for address: [UInt8] in [[255, 255, 255, 0], [192, 168, 1, 20], [192, 168, 1, 255]] {
            // sockaddr_in: sin_len, sin_family AF_INET, sin_port, sin_addr, sin_zero[8].
            w.raw(w.count, [16, 2, 0, 0] + address + [UInt8](repeating: 0, count: 8))
        }
        w.patchLength()
        return w.bytes
    }

    /// An RTM_NEWMADDR2 message: struct ifma_msghdr2 (if.h), then
    /// RTA_GATEWAY (the group's link-level address), RTA_IFP (the
    /// interface's sockaddr_dl) and RTA_IFA (a sockaddr_in6 group).
    package static func newMulticastAddress2(index: UInt16, name: String) -> [UInt8] {
        var w = FieldWriter()
        w.u16(0, 0) // ifmam_msglen (patched at the end)
        w.u8(2, 5) // ifmam_version: RTM_VERSION
        w.u8(3, 0x13) // ifmam_type: RTM_NEWMADDR2
        w.u32(4, rtaGateway | rtaIFP | rtaIFA) // ifmam_addrs
        w.u32(8, 0) // ifmam_flags
        w.u16(12, index) // ifmam_index
        w.u16(14, 0) // padding
        w.u32(16, 1) // ifmam_refcount
        // 20: sizeof(struct ifma_msghdr2).
        w.raw(20, sockaddrDL(index: index, type: 6, name: "", address: [0x33, 0x33, 0, 0, 0, 1]))
        w.raw(w.count, sockaddrDL(index: index, type: 6, name: name, address: []))
        // sockaddr_in6 (28 bytes): sin6_len, sin6_family AF_INET6, port, flowinfo, ff02::1, scope id.
        w.raw(w.count, [28, 30, 0, 0, 0, 0, 0, 0, 0xff, 0x02] + [UInt8](repeating: 0, count: 13) + [1, 0, 0, 0, 0])
        w.patchLength()
        return w.bytes
    }

    /// A record with every counter above 2^32 and no two alike.
    package static func record(
        _ name: String, index: Int, type: UInt8, mac: [UInt8] = [], seed: UInt64, flags: UInt32 = 0x8863
    ) -> InterfaceList2.Record {
        func c(_ field: UInt64) -> UInt64 { (1 << 32) + seed * 1_000_000_007 + field * 65_537 }
        return InterfaceList2.Record(
            name: name, index: index, type: type, flags: flags, mtu: 1500, baudrate: 1_000_000_000 + seed,
            ibytes: c(1), obytes: c(2), ipackets: c(3), opackets: c(4), ierrors: c(5), oerrors: c(6),
            iqdrops: c(7), noproto: c(8), collisions: c(9), imcasts: c(10), omcasts: c(11),
            sndDrops: 0xdead_0000 | UInt32(seed), linkAddress: mac)
    }

    package static let en0 = record("en0", index: 4, type: 6, mac: [0xa4, 0x83, 0xe7, 0x12, 0x34, 0x56], seed: 1)
    package static let pdp = record("pdp_ip0", index: 9, type: 0xff, seed: 2, flags: 0x8851)
    package static let utun3 = record("utun3", index: 23, type: 1, seed: 3, flags: 0x8051)
}
