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
import IfmeterTestSupport
import Testing

@testable import IfmeterSampling

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
