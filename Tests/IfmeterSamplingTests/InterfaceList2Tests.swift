// NET_RT_IFLIST2 buffers built field by field after XNU's headers, at
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

import IfmeterCore
import Synchronization
import Testing

@testable import IfmeterSampling

/// Little-endian bytes written field by field. Each write names the offset
/// its field has in XNU's structure; a write elsewhere fails, so the offsets
/// in the comments below are checked by every build of a fixture.
struct FieldWriter {
    var bytes: [UInt8] = []
    var count: Int { bytes.count }

    private func at(_ offset: Int) {
        precondition(bytes.count == offset, "field written at \(bytes.count), declared at \(offset)")
    }

    mutating func u8(_ offset: Int, _ value: UInt8) {
        at(offset)
        bytes.append(value)
    }

    mutating func u16(_ offset: Int, _ value: UInt16) {
        at(offset)
        bytes += (0..<2).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    mutating func u32(_ offset: Int, _ value: UInt32) {
        at(offset)
        bytes += (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    mutating func u64(_ offset: Int, _ value: UInt64) {
        at(offset)
        bytes += (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    mutating func raw(_ offset: Int, _ value: [UInt8]) {
        at(offset)
        bytes += value
    }

    /// Zeros up to `length`.
    mutating func zeros(to length: Int) {
        bytes += [UInt8](repeating: 0, count: max(0, length - bytes.count))
    }

    /// The message's length into its first field (`*_msglen`, u16 @0).
    mutating func patchLength() {
        bytes[0] = UInt8(bytes.count & 0xff)
        bytes[1] = UInt8(bytes.count >> 8)
    }
}

/// rtsock.c's ROUNDUP32: a sockaddr takes its length rounded up to 4 (4 when 0).
func roundup32(_ length: Int) -> Int { length > 0 ? 1 + ((length - 1) | 3) : 4 }

enum IfList2Fixture {
    static let rtaGateway: UInt32 = 0x2, rtaNetmask: UInt32 = 0x4, rtaIFP: UInt32 = 0x10
    static let rtaIFA: UInt32 = 0x20, rtaBRD: UInt32 = 0x80

    /// struct sockaddr_dl (if_dl.h), `sdl_len` at least sizeof (20), and
    /// with `padded` the zeros of ROUNDUP32 after it, as rt_msg2 writes it.
    static func sockaddrDL(index: UInt16, type: UInt8, name: String, address: [UInt8], padded: Bool = true) -> [UInt8] {
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
    static func interfaceInfo2(
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
    static func newAddress(index: UInt16) -> [UInt8] {
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
    static func newMulticastAddress2(index: UInt16, name: String) -> [UInt8] {
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
    static func record(
        _ name: String, index: Int, type: UInt8, mac: [UInt8] = [], seed: UInt64, flags: UInt32 = 0x8863
    ) -> InterfaceList2.Record {
        func c(_ field: UInt64) -> UInt64 { (1 << 32) + seed * 1_000_000_007 + field * 65_537 }
        return InterfaceList2.Record(
            name: name, index: index, type: type, flags: flags, mtu: 1500, baudrate: 1_000_000_000 + seed,
            ibytes: c(1), obytes: c(2), ipackets: c(3), opackets: c(4), ierrors: c(5), oerrors: c(6),
            iqdrops: c(7), noproto: c(8), collisions: c(9), imcasts: c(10), omcasts: c(11),
            sndDrops: 0xdead_0000 | UInt32(seed), linkAddress: mac)
    }

    static let en0 = record("en0", index: 4, type: 6, mac: [0xa4, 0x83, 0xe7, 0x12, 0x34, 0x56], seed: 1)
    static let pdp = record("pdp_ip0", index: 9, type: 0xff, seed: 2, flags: 0x8851)
    static let utun3 = record("utun3", index: 23, type: 1, seed: 3, flags: 0x8051)
}

@Suite struct InterfaceList2Tests {
    typealias F = IfList2Fixture

    @Test func threeInterfacesAmongAddressRecords() throws {
        let buffer =
            F.interfaceInfo2(F.en0) + F.newAddress(index: 4) + F.newMulticastAddress2(index: 4, name: "en0")
            + F.interfaceInfo2(F.pdp) + F.newAddress(index: 9)
            + F.interfaceInfo2(F.utun3) + F.newMulticastAddress2(index: 23, name: "utun3")
        let records = try InterfaceList2.parse(buffer)
        #expect(records == [F.en0, F.pdp, F.utun3])
        // The fixture is what the test says: every counter above 2^32, none alike.
        let values = records.flatMap {
            [$0.ibytes, $0.obytes, $0.ipackets, $0.opackets, $0.ierrors, $0.oerrors]
                + [$0.iqdrops, $0.noproto, $0.collisions, $0.imcasts, $0.omcasts]
        }
        #expect(values.allSatisfy { $0 > 1 << 32 } && Set(values).count == 33)
        #expect(records[0].ibytes == 4_294_967_296 + 1_000_000_007 + 65_537)
        #expect(records.map(\.name) == ["en0", "pdp_ip0", "utun3"])
        #expect(records.map(\.type) == [6, 0xff, 1])
        #expect(records.map(\.index) == [4, 9, 23])
        #expect(records[0].linkAddress == [0xa4, 0x83, 0xe7, 0x12, 0x34, 0x56] && records[2].linkAddress.isEmpty)
        #expect(records[1].sndDrops == 0xdead_0002 && records[0].isUp)
    }

    @Test func recordsGiveCounters() {
        let c = F.en0.counters
        #expect(c[.rxBytes] == F.en0.ibytes && c[.txBytes] == F.en0.obytes)
        #expect(c[.rxPackets] == F.en0.ipackets && c[.txPackets] == F.en0.opackets)
        #expect(c[.rxErrors] == F.en0.ierrors && c[.txErrors] == F.en0.oerrors && c[.rxDropped] == F.en0.iqdrops)
        // ifm_snd_drops is a 32-bit int: it stays out of a 64-bit sample.
        #expect(c[.txDropped] == nil)
    }

    /// rtsock.c leaves RTAX_GATEWAY set after a multicast membership with a
    /// link-level address, so an RTM_IFINFO2 may carry that sockaddr before
    /// its own: the name is the RTA_IFP one all the same.
    @Test func interfaceAddressAfterAStaleGateway() throws {
        let gateway = F.sockaddrDL(index: 4, type: 6, name: "", address: [0x01, 0x00, 0x5e, 0, 0, 0xfb])
        let records = try InterfaceList2.parse(F.interfaceInfo2(F.pdp, gateway: gateway) + F.interfaceInfo2(F.utun3))
        #expect(records == [F.pdp, F.utun3])
    }

    @Test func truncatedBuffersAreErrors() {
        let one = F.interfaceInfo2(F.en0)
        #expect(one.count == 160 + 20)
        #expect(throws: InterfaceList2.ParseError.truncatedHeader(offset: 0, available: 3)) {
            try InterfaceList2.parse(Array(one.prefix(3)))
        }
        // Cut inside the header (if_data64), and inside the sockaddr_dl.
        for cut in [100, 170] {
            #expect(throws: InterfaceList2.ParseError.pastEnd(offset: 0, length: 180, available: cut)) {
                try InterfaceList2.parse(Array(one.prefix(cut)))
            }
        }
        // Every cut is an error, and none reads past what it was given.
        for cut in 1..<one.count {
            #expect(throws: InterfaceList2.ParseError.self) { try InterfaceList2.parse(Array(one.prefix(cut))) }
        }
        #expect((try? InterfaceList2.parse([UInt8]())) == [])
        let two = one + F.interfaceInfo2(F.pdp)
        let error = #expect(throws: InterfaceList2.ParseError.self) { try InterfaceList2.parse(Array(two.prefix(280))) }
        #expect(error?.description == "NET_RT_IFLIST2 record at byte 180: length 180 runs past the end of the buffer (100 bytes left)")
    }

    /// The bytes after the end given are a valid record, in the same
    /// memory: the parser stops at the end it was given, and at each
    /// message's own length, rather than use them.
    @Test func nothingPastTheEndIsRead() {
        let whole = F.interfaceInfo2(F.en0) + F.interfaceInfo2(F.pdp) + F.interfaceInfo2(F.utun3)
        whole.withUnsafeBytes { all in
            let prefix = UnsafeRawBufferPointer(rebasing: all[..<(180 + 180 + 24)])
            #expect(throws: InterfaceList2.ParseError.pastEnd(offset: 360, length: 180, available: 24)) {
                try InterfaceList2.parse(prefix)
            }
            // A whole record as the prefix: exactly it.
            #expect((try? InterfaceList2.parse(UnsafeRawBufferPointer(rebasing: all[..<180]))) == [F.en0])
        }
        // en0's length cut to end 8 bytes into its sockaddr_dl: the rest of
        // the sockaddr (and the next record) follow, but are not its own.
        var short = whole
        short[0] = 168
        short[1] = 0
        #expect(
            throws: InterfaceList2.ParseError.linkAddress(offset: 0, at: 160, .lengthPastEnd(sdlLen: 20, available: 8))
        ) { try InterfaceList2.parse(short) }
    }

    @Test func lengthsShorterThanTheirHeader() {
        let en0 = F.interfaceInfo2(F.en0)
        var bad = en0 + F.interfaceInfo2(F.pdp)
        bad[180] = 12
        bad[181] = 0
        let error = #expect(throws: InterfaceList2.ParseError.self) { try InterfaceList2.parse(bad) }
        #expect(error?.description == "NET_RT_IFLIST2 record at byte 180: length 12 is shorter than an if_msghdr2 (160 bytes)")
        var address = F.newAddress(index: 4) + en0
        address[0] = 8
        #expect(
            throws: InterfaceList2.ParseError.shorterThanHeader(offset: 0, length: 8, header: "ifa_msghdr", headerSize: 20)
        ) { try InterfaceList2.parse(address) }
        var zero = en0 + en0
        zero[180] = 0
        zero[181] = 0
        let zeroError = #expect(throws: InterfaceList2.ParseError.zeroLength(offset: 180)) { try InterfaceList2.parse(zero) }
        #expect(zeroError?.description == "NET_RT_IFLIST2 record at byte 180: length 0")
    }

    @Test func unknownTypeNamesTypeAndOffset() {
        let buffer = F.interfaceInfo2(F.en0) + F.newAddress(index: 4) + F.interfaceInfo2(F.pdp, type: 0x7f)
        let error = #expect(throws: InterfaceList2.ParseError.unknownType(offset: 248, type: 0x7f)) {
            try InterfaceList2.parse(buffer)
        }
        #expect(
            error?.description
                == "NET_RT_IFLIST2 record at byte 248: unknown message type 0x7f (expected RTM_IFINFO2, RTM_NEWADDR or RTM_NEWMADDR2)")
    }

    @Test func wrongVersionIsAnError() {
        let buffer = F.interfaceInfo2(F.en0) + F.interfaceInfo2(F.pdp, version: 4)
        let error = #expect(throws: InterfaceList2.ParseError.wrongVersion(offset: 180, version: 4)) {
            try InterfaceList2.parse(buffer)
        }
        #expect(error?.description == "NET_RT_IFLIST2 record at byte 180: version 4, not RTM_VERSION (5)")
    }

    @Test func interfaceInfoWithoutItsAddress() {
        var buffer = F.interfaceInfo2(F.en0)
        buffer[4] = 0 // ifm_addrs: no RTA_IFP
        #expect(throws: InterfaceList2.ParseError.noInterfaceAddress(offset: 0, addrs: 0)) { try InterfaceList2.parse(buffer) }
    }

    @Test func sockaddrDLAlone() throws {
        let en0 = try LinkLayerAddress.parse(F.sockaddrDL(index: 4, type: 6, name: "en0", address: F.en0.linkAddress, padded: false))
        #expect(en0 == LinkLayerAddress(index: 4, type: 6, name: "en0", address: [0xa4, 0x83, 0xe7, 0x12, 0x34, 0x56]))
        #expect(en0.macText == "a4:83:e7:12:34:56")
        let utun = try LinkLayerAddress.parse(F.sockaddrDL(index: 23, type: 1, name: "utun3", address: [], padded: false))
        #expect(utun.name == "utun3" && utun.address.isEmpty && utun.macText == nil)
        // A long name: sdl_len past the 20 bytes of the struct.
        let long = try LinkLayerAddress.parse(F.sockaddrDL(index: 7, type: 6, name: "bridge100abc", address: [1, 2, 3, 4, 5, 6]))
        #expect(long.name == "bridge100abc" && long.macText == "01:02:03:04:05:06")

        let bytes = F.sockaddrDL(index: 4, type: 6, name: "en0", address: F.en0.linkAddress, padded: false)
        #expect(throws: LinkLayerAddress.ParseError.lengthPastEnd(sdlLen: 20, available: 19)) {
            try LinkLayerAddress.parse(Array(bytes.prefix(19)))
        }
        let error = #expect(throws: LinkLayerAddress.ParseError.self) { try LinkLayerAddress.parse(Array(bytes.prefix(12))) }
        #expect(error?.description == "sockaddr_dl: sdl_len 20 runs past the 12 bytes given")
        #expect(throws: LinkLayerAddress.ParseError.shorterThanHeader(available: 7)) { try LinkLayerAddress.parse(Array(bytes.prefix(7))) }
        var nameTooLong = bytes
        nameTooLong[5] = 9 // sdl_nlen: 8 + 9 + 6 > 20
        #expect(throws: LinkLayerAddress.ParseError.dataPastLength(nlen: 9, alen: 6, sdlLen: 20)) { try LinkLayerAddress.parse(nameTooLong) }
        var inet = bytes
        inet[1] = 2
        #expect(throws: LinkLayerAddress.ParseError.notLink(family: 2)) { try LinkLayerAddress.parse(inet) }
    }

    /// Byte counters crossing 2^32 through the sampler and the engine: 64
    /// bits say exactly what passed; the same readings cut to 32 bits (as
    /// getifaddrs' if_data gives them) cannot.
    @Test func replayAcrossTwoToThe32() throws {
        let bytes: [UInt64] = [4_294_967_000, 4_294_968_000, 8_000_000_000]
        let buffers = bytes.map { value in
            var en0 = F.en0
            en0.ibytes = value
            en0.obytes = value + 123
            return F.interfaceInfo2(en0) + F.newAddress(index: 4) + F.interfaceInfo2(F.utun3)
        }
        let feed = ListFeed(buffers)
        let sampler = InterfaceListSampler(read: { feed.read() })
        sampler.clock = { feed.time() }
        #expect(sampler.sourceName == "sysctl")
        var engine = DeltaEngine(configuration: EngineConfiguration(platform: .darwin))
        var changes: [DeltaChange] = []
        for _ in bytes {
            let reading = try sampler.read()
            #expect(reading.sample.interfaces.map(\.width) == [.bits64, .bits64])
            changes += engine.apply(reading).filter { $0.name == "en0" }.map(\.change)
        }
        #expect(changes == [.baseline, .steady, .steady])
        let en0 = try #require(engine.totals(for: "en0"))
        #expect(en0.totals[.rxBytes] == 8_000_000_000 - 4_294_967_000)
        #expect(en0.totals[.txBytes] == 8_000_000_000 - 4_294_967_000)
        #expect(en0.quality == .exact && en0.width == .bits64)
        #expect(en0.events == EventCounts())
        #expect(en0.classification.kind == .wifi && engine.totals(for: "utun3")?.classification.kind == .tunnel)

        // The same readings at 32 bits: a wrap, and a gap that could hide another.
        var engine32 = DeltaEngine(configuration: EngineConfiguration(platform: .darwin))
        for (n, value) in bytes.enumerated() {
            let cut = UInt64(UInt32(truncatingIfNeeded: value))
            let sample = InterfaceSample(
                name: "en0", index: 4, width: .bits32, counters: Counters(rxBytes: cut, txBytes: cut, rxPackets: 0, txPackets: 0))
            _ = engine32.apply(Sample(time: Double(n) * 10, interfaces: [sample]))
        }
        let en0at32 = try #require(engine32.totals(for: "en0"))
        #expect(en0at32.quality == .lowerBound && en0at32.events.wraps == 1)
    }

    @Test func aDamagedBufferIsASystemError() {
        let sampler = InterfaceListSampler(read: { [0x10, 0x00, 0x05, 0x7f] + [UInt8](repeating: 0, count: 12) })
        let error = #expect(throws: SystemError.self) { try sampler.read() }
        #expect(error?.call == "sysctl(NET_RT_IFLIST2)")
        #expect(error?.message.hasPrefix("NET_RT_IFLIST2 record at byte 0: unknown message type 0x7f") == true)
    }

    @Test func kindOverridesApply() throws {
        let buffer = F.interfaceInfo2(F.utun3)
        let sampler = InterfaceListSampler(read: { buffer })
        #expect(try sampler.read().sample.interfaces.first?.classification?.kind == .tunnel)
        sampler.setKindOverrides(KindOverrides([.init(pattern: "utun*", kind: .ethernet)]))
        let overridden = try sampler.read().sample.interfaces.first?.classification
        #expect(overridden == Classification(kind: .ethernet, evidence: KindOverrides.evidence))
    }
}

/// NET_RT_IFLIST2 buffers handed out one per reading, ten seconds apart.
final class ListFeed: Sendable {
    private let state: Mutex<(next: Int, buffers: [[UInt8]])>

    init(_ buffers: [[UInt8]]) { state = Mutex((0, buffers)) }

    /// The time of the reading about to be taken.
    func time() -> Double { state.withLock { Double($0.next) * 10 } }

    func read() -> [UInt8] {
        state.withLock { state in
            defer { state.next += 1 }
            return state.buffers[state.next]
        }
    }
}
