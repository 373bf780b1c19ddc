import IfmeterCore
import IfmeterSystem

// The layouts below are XNU's (apple-oss-distributions/xnu at
// e3723e1f17661b24996789d8afc084c0c3303b26, xnu-11417.101.15), checked
// field by field against bsd/net/if.h, bsd/net/if_var.h, bsd/net/route.h,
// bsd/net/if_dl.h and bsd/net/rtsock.c. Every Apple platform is
// little-endian. This file is plain Swift over bytes, so it compiles and
// is tested everywhere; only the sysctl call (InterfaceList2Darwin.swift)
// is Apple's.

/// A link-level address, `struct sockaddr_dl` (bsd/net/if_dl.h), read
/// from its bytes: what NET_RT_IFLIST2 gives after each `if_msghdr2`, and
/// what getifaddrs gives for AF_LINK entries on Darwin.
///
/// Layout: `sdl_len` u8 @0, `sdl_family` u8 @1, `sdl_index` u16 @2,
/// `sdl_type` u8 @4, `sdl_nlen` u8 @5, `sdl_alen` u8 @6, `sdl_slen` u8 @7,
/// `sdl_data` @8: the name (`sdl_nlen` bytes, no NUL), then the address
/// (`sdl_alen` bytes; `LLADDR`).
public struct LinkLayerAddress: Sendable, Equatable {
    /// `sdl_index`: the interface's index (0 when the kernel gave none).
    public var index: Int
    /// `sdl_type`: the interface type (`IFT_ETHER` 6, `IFT_CELLULAR` 0xff ...).
    public var type: UInt8
    /// The `sdl_nlen` bytes of `sdl_data`, decoded as `InterfaceName` does.
    public var name: String
    /// The `sdl_alen` bytes after the name: a MAC for Ethernet and Wi-Fi,
    /// empty for tunnels and cellular links.
    public var address: [UInt8]

    public init(index: Int, type: UInt8, name: String, address: [UInt8]) {
        self.index = index
        self.type = type
        self.name = name
        self.address = address
    }

    /// `AF_LINK` (bsd/sys/socket.h).
    public static let family: UInt8 = 18
    /// The bytes before `sdl_data`.
    public static let headerSize = 8

    /// `aa:bb:cc:dd:ee:ff` when the address is six bytes long.
    public var macText: String? {
        guard address.count == 6 else { return nil }
        return address.map { hex2($0) }.joined(separator: ":")
    }

    /// What is wrong with the bytes of a `sockaddr_dl`.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Fewer bytes than the 8 before `sdl_data`.
        case shorterThanHeader(available: Int)
        /// `sdl_family` is not AF_LINK.
        case notLink(family: UInt8)
        /// `sdl_len` is less than the 8 bytes before `sdl_data`.
        case lengthTooSmall(sdlLen: Int)
        /// `sdl_len` runs past the bytes given.
        case lengthPastEnd(sdlLen: Int, available: Int)
        /// `sdl_nlen + sdl_alen` run past `sdl_len`.
        case dataPastLength(nlen: Int, alen: Int, sdlLen: Int)

        public var description: String {
            switch self {
            case .shorterThanHeader(let available):
                "sockaddr_dl: \(available) bytes, fewer than the 8 before sdl_data"
            case .notLink(let family):
                "sockaddr_dl: family \(family) is not AF_LINK (18)"
            case .lengthTooSmall(let sdlLen):
                "sockaddr_dl: sdl_len \(sdlLen) is less than the 8 bytes before sdl_data"
            case .lengthPastEnd(let sdlLen, let available):
                "sockaddr_dl: sdl_len \(sdlLen) runs past the \(available) bytes given"
            case .dataPastLength(let nlen, let alen, let sdlLen):
                "sockaddr_dl: sdl_nlen \(nlen) + sdl_alen \(alen) after 8 header bytes run past sdl_len \(sdlLen)"
            }
        }
    }

    /// Reads a `sockaddr_dl` from the start of `bytes`; nothing past
    /// `min(sdl_len, bytes.count)` is read.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(ParseError) -> LinkLayerAddress {
        let raw = LittleEndianBytes(bytes)
        guard raw.count >= headerSize else { throw .shorterThanHeader(available: raw.count) }
        let sdlLen = Int(raw.u8(0))
        let family = raw.u8(1)
        guard family == Self.family else { throw .notLink(family: family) }
        guard sdlLen >= headerSize else { throw .lengthTooSmall(sdlLen: sdlLen) }
        guard sdlLen <= raw.count else { throw .lengthPastEnd(sdlLen: sdlLen, available: raw.count) }
        let nlen = Int(raw.u8(5)), alen = Int(raw.u8(6))
        guard headerSize + nlen + alen <= sdlLen else { throw .dataPastLength(nlen: nlen, alen: alen, sdlLen: sdlLen) }
        return LinkLayerAddress(
            index: Int(raw.u16(2)), type: raw.u8(4),
            name: InterfaceName.decode(raw.bytes(headerSize, nlen)),
            address: raw.bytes(headerSize + nlen, alen))
    }

    /// `parse` over an array's bytes.
    public static func parse(_ bytes: [UInt8]) throws(ParseError) -> LinkLayerAddress {
        let result: Result<LinkLayerAddress, ParseError> = bytes.withUnsafeBytes { raw in
            do throws(ParseError) { return .success(try parse(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

/// The interface list of `sysctl {CTL_NET, PF_ROUTE, 0, 0, NET_RT_IFLIST2,
/// 0}` on Apple platforms: one `RTM_IFINFO2` message per interface, with
/// 64-bit counters (`struct if_data64`), where getifaddrs' `if_data` has
/// 32-bit ones that wrap at 4 GiB.
///
/// What the kernel writes (bsd/net/rtsock.c, `sysctl_iflist2`): for each
/// interface, an `RTM_IFINFO2` message, then an `RTM_NEWADDR` per address,
/// then an `RTM_NEWMADDR2` per multicast membership. Each message is its
/// header, then one sockaddr per bit of its `*_addrs` in `RTAX_*` order,
/// each taking `ROUNDUP32(sa_len)` bytes (`rt_msg2`); `*_msglen` is the
/// whole. The interface's own `sockaddr_dl` (its name) is its `RTA_IFP`
/// sockaddr, normally the only one, right after the 160-byte
/// `if_msghdr2`.
///
/// For a process that is not an Apple platform binary the kernel rounds
/// `ifi_ibytes` and `ifi_obytes` down to a multiple of 1024 (rtsock.c,
/// `ALIGN_BYTES`): still monotonic, so deltas stay exact to that grain.
public enum InterfaceList2 {
    /// `RTM_VERSION` (bsd/net/route.h).
    public static let version: UInt8 = 5
    /// `RTM_NEWADDR`, `RTM_IFINFO2`, `RTM_NEWMADDR2` (bsd/net/route.h).
    public static let newAddress: UInt8 = 0x0c
    public static let interfaceInfo2: UInt8 = 0x12
    public static let newMulticastAddress2: UInt8 = 0x13
    /// `sizeof(struct if_msghdr2)`: 32 bytes of header, then `if_data64`
    /// (128 bytes, under `#pragma pack(4)`) at 32.
    public static let ifMsghdr2Size = 160
    /// `sizeof(struct ifa_msghdr)` and `sizeof(struct ifma_msghdr2)`.
    public static let ifaMsghdrSize = 20
    public static let ifmaMsghdr2Size = 20
    /// `RTAX_IFP`: the interface's `sockaddr_dl` among a message's sockaddrs.
    static let rtaxIFP = 4
    /// `IFF_UP` (bsd/net/if.h).
    public static let flagUp: UInt32 = 0x1

    /// One interface's `RTM_IFINFO2` message.
    public struct Record: Sendable, Equatable {
        /// From the `RTA_IFP` `sockaddr_dl`.
        public var name: String
        /// `ifm_index`.
        public var index: Int
        /// `ifi_type` (`IFT_*`, bsd/net/if_types.h).
        public var type: UInt8
        /// `ifm_flags`: `IFF_*`, the low 16 bits of the interface's flags.
        public var flags: UInt32
        /// `ifi_mtu`.
        public var mtu: UInt32
        /// `ifi_baudrate`: the link speed the driver reports, bits per second.
        public var baudrate: UInt64
        public var ibytes: UInt64
        public var obytes: UInt64
        public var ipackets: UInt64
        public var opackets: UInt64
        public var ierrors: UInt64
        public var oerrors: UInt64
        public var iqdrops: UInt64
        public var noproto: UInt64
        public var collisions: UInt64
        public var imcasts: UInt64
        public var omcasts: UInt64
        /// `ifm_snd_drops`: an `int` in the header, the send queue's 64-bit
        /// drop count cut to 32 bits by the kernel, so it wraps at 2^32.
        public var sndDrops: UInt32
        /// The `sdl_alen` bytes of the `sockaddr_dl` (a MAC, or empty).
        public var linkAddress: [UInt8]

        public init(
            name: String, index: Int, type: UInt8, flags: UInt32, mtu: UInt32, baudrate: UInt64, ibytes: UInt64, obytes: UInt64,
            ipackets: UInt64, opackets: UInt64, ierrors: UInt64, oerrors: UInt64, iqdrops: UInt64, noproto: UInt64, collisions: UInt64,
            imcasts: UInt64, omcasts: UInt64, sndDrops: UInt32, linkAddress: [UInt8]
        ) {
            self.name = name
            self.index = index
            self.type = type
            self.flags = flags
            self.mtu = mtu
            self.baudrate = baudrate
            self.ibytes = ibytes
            self.obytes = obytes
            self.ipackets = ipackets
            self.opackets = opackets
            self.ierrors = ierrors
            self.oerrors = oerrors
            self.iqdrops = iqdrops
            self.noproto = noproto
            self.collisions = collisions
            self.imcasts = imcasts
            self.omcasts = omcasts
            self.sndDrops = sndDrops
            self.linkAddress = linkAddress
        }

        /// ifmeter's counters: bytes, packets, errors, input drops. The
        /// transmit drops stay out: `ifm_snd_drops` is 32 bits and would
        /// read as a reset where it wraps, in a sample that says 64 bits.
        public var counters: Counters {
            Counters(
                rxBytes: ibytes, txBytes: obytes, rxPackets: ipackets, txPackets: opackets,
                rxErrors: ierrors, txErrors: oerrors, rxDropped: iqdrops, txDropped: nil)
        }

        /// `IFF_UP` is set.
        public var isUp: Bool { flags & InterfaceList2.flagUp != 0 }
    }

    /// Why a buffer could not be read; `offset` is where its message starts.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Fewer than the 4 bytes of `msglen`, `version` and `type` left.
        case truncatedHeader(offset: Int, available: Int)
        /// A message length of 0 (it would never move on).
        case zeroLength(offset: Int)
        /// The length runs past the end of the buffer.
        case pastEnd(offset: Int, length: Int, available: Int)
        /// The length is shorter than the header its type needs.
        case shorterThanHeader(offset: Int, length: Int, header: String, headerSize: Int)
        /// Not `RTM_VERSION`.
        case wrongVersion(offset: Int, version: UInt8)
        /// None of `RTM_IFINFO2`, `RTM_NEWADDR`, `RTM_NEWMADDR2`.
        case unknownType(offset: Int, type: UInt8)
        /// An `RTM_IFINFO2` without the `RTA_IFP` bit in `ifm_addrs`.
        case noInterfaceAddress(offset: Int, addrs: UInt32)
        /// A sockaddr (`RTAX_*` index `slot`, at `at` in the buffer) runs
        /// past its message.
        case addressPastMessage(offset: Int, slot: Int, at: Int, length: Int)
        /// The `RTA_IFP` `sockaddr_dl` (at `at` in the buffer) is damaged.
        case linkAddress(offset: Int, at: Int, LinkLayerAddress.ParseError)

        public var offset: Int {
            switch self {
            case .truncatedHeader(let offset, _), .zeroLength(let offset), .pastEnd(let offset, _, _),
                .shorterThanHeader(let offset, _, _, _), .wrongVersion(let offset, _), .unknownType(let offset, _),
                .noInterfaceAddress(let offset, _), .addressPastMessage(let offset, _, _, _), .linkAddress(let offset, _, _):
                offset
            }
        }

        public var description: String {
            let record = "NET_RT_IFLIST2 record at byte \(offset)"
            switch self {
            case .truncatedHeader(_, let available):
                return "\(record): only \(available) bytes left, fewer than the 4 of msglen, version and type"
            case .zeroLength:
                return "\(record): length 0"
            case .pastEnd(_, let length, let available):
                return "\(record): length \(length) runs past the end of the buffer (\(available) bytes left)"
            case .shorterThanHeader(_, let length, let header, let size):
                return "\(record): length \(length) is shorter than \(article(header)) \(header) (\(size) bytes)"
            case .wrongVersion(_, let version):
                return "\(record): version \(version), not RTM_VERSION (\(InterfaceList2.version))"
            case .unknownType(_, let type):
                return "\(record): unknown message type 0x\(hex2(type)) (expected RTM_IFINFO2, RTM_NEWADDR or RTM_NEWMADDR2)"
            case .noInterfaceAddress(_, let addrs):
                return "\(record): RTM_IFINFO2 without RTA_IFP in ifm_addrs (0x\(String(addrs, radix: 16)))"
            case .addressPastMessage(_, let slot, let at, let length):
                return "\(record): sockaddr \(slot) at byte \(at) (\(length) bytes) runs past the message"
            case .linkAddress(_, let at, let problem):
                return "\(record): RTA_IFP at byte \(at): \(problem)"
            }
        }

        private func article(_ word: String) -> String {
            word.first.map { "aeio".contains($0) } == true ? "an" : "a"
        }
    }

    /// Reads every `RTM_IFINFO2` message of a NET_RT_IFLIST2 buffer, in
    /// order; `RTM_NEWADDR` and `RTM_NEWMADDR2` are skipped. Nothing past
    /// `bytes.count` is read, nor past a message's own length.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(ParseError) -> [Record] {
        let raw = LittleEndianBytes(bytes)
        var records: [Record] = []
        var offset = 0
        while offset < raw.count {
            let available = raw.count - offset
            guard available >= 4 else { throw .truncatedHeader(offset: offset, available: available) }
            // Common to every message: msglen u16 @0, version u8 @2, type u8 @3.
            let length = Int(raw.u16(offset))
            guard length != 0 else { throw .zeroLength(offset: offset) }
            guard length <= available else { throw .pastEnd(offset: offset, length: length, available: available) }
            let version = raw.u8(offset + 2)
            guard version == Self.version else { throw .wrongVersion(offset: offset, version: version) }
            let message = raw.slice(offset, length)
            switch raw.u8(offset + 3) {
            case interfaceInfo2:
                records.append(try interfaceRecord(message, at: offset))
            case newAddress:
                guard length >= ifaMsghdrSize else {
                    throw .shorterThanHeader(offset: offset, length: length, header: "ifa_msghdr", headerSize: ifaMsghdrSize)
                }
            case newMulticastAddress2:
                guard length >= ifmaMsghdr2Size else {
                    throw .shorterThanHeader(offset: offset, length: length, header: "ifma_msghdr2", headerSize: ifmaMsghdr2Size)
                }
            case let type:
                throw .unknownType(offset: offset, type: type)
            }
            offset += length
        }
        return records
    }

    /// `parse` over an array's bytes.
    public static func parse(_ bytes: [UInt8]) throws(ParseError) -> [Record] {
        let result: Result<[Record], ParseError> = bytes.withUnsafeBytes { raw in
            do throws(ParseError) { return .success(try parse(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// One `RTM_IFINFO2` message, `m` holding exactly its `ifm_msglen` bytes.
    private static func interfaceRecord(_ m: LittleEndianBytes, at offset: Int) throws(ParseError) -> Record {
        guard m.count >= ifMsghdr2Size else {
            throw .shorterThanHeader(offset: offset, length: m.count, header: "if_msghdr2", headerSize: ifMsghdr2Size)
        }
        // struct if_msghdr2 (bsd/net/if.h): msglen u16 @0, version u8 @2,
        // type u8 @3, ifm_addrs int @4, ifm_flags int @8, ifm_index u16 @12
        // (2 bytes padding), ifm_snd_len int @16, ifm_snd_maxlen int @20,
        // ifm_snd_drops int @24, ifm_timer int @28, ifm_data @32.
        let addrs = m.u32(4)
        // The sockaddrs follow the header, one per bit of ifm_addrs in RTAX
        // order, each ROUNDUP32(sa_len) bytes (rt_msg2). RTA_IFP is the
        // interface's sockaddr_dl; rtsock.c may leave an earlier one set
        // (a multicast membership's RTA_GATEWAY), so walk to it.
        guard addrs & (1 << UInt32(rtaxIFP)) != 0 else { throw .noInterfaceAddress(offset: offset, addrs: addrs) }
        var at = ifMsghdr2Size
        for slot in 0..<rtaxIFP where addrs & (1 << UInt32(slot)) != 0 {
            let saLen = at < m.count ? Int(m.u8(at)) : 0
            let rounded = saLen > 0 ? 1 + ((saLen - 1) | 3) : 4
            guard at + rounded <= m.count else {
                throw .addressPastMessage(offset: offset, slot: slot, at: offset + at, length: rounded)
            }
            at += rounded
        }
        let link: LinkLayerAddress
        do throws(LinkLayerAddress.ParseError) {
            link = try LinkLayerAddress.parse(m.slice(at, m.count - at).base)
        } catch {
            throw .linkAddress(offset: offset, at: offset + at, error)
        }
        // struct if_data64 (bsd/net/if_var.h, #pragma pack(4)) at 32:
        // ifi_type u8 @0, ifi_mtu u32 @8, ifi_metric u32 @12, ifi_baudrate
        // u64 @16, ifi_ipackets @24, ifi_ierrors @32, ifi_opackets @40,
        // ifi_oerrors @48, ifi_collisions @56, ifi_ibytes @64, ifi_obytes
        // @72, ifi_imcasts @80, ifi_omcasts @88, ifi_iqdrops @96, ifi_noproto
        // @104 (u64 each), ifi_recvtiming u32 @112, ifi_xmittiming u32 @116,
        // ifi_lastchange (timeval32) @120; 128 bytes.
        let d = 32
        return Record(
            name: link.name, index: Int(m.u16(12)), type: m.u8(d + 0), flags: m.u32(8),
            mtu: m.u32(d + 8), baudrate: m.u64(d + 16),
            ibytes: m.u64(d + 64), obytes: m.u64(d + 72), ipackets: m.u64(d + 24), opackets: m.u64(d + 40),
            ierrors: m.u64(d + 32), oerrors: m.u64(d + 48), iqdrops: m.u64(d + 96), noproto: m.u64(d + 104),
            collisions: m.u64(d + 56), imcasts: m.u64(d + 80), omcasts: m.u64(d + 88),
            sndDrops: m.u32(24), linkAddress: link.address)
    }
}

extension SamplerOptions {
    /// An Apple interface's kind: the user's `--kind-of` first, then the
    /// name rules for Darwin (en0 Wi-Fi, pdp_ip* cellular, utun* tunnels).
    /// Apple's names are the evidence there: its samplers read no sysfs.
    func appleClassification(_ name: String) -> Classification {
        kindOverrides.classification(for: SeriesKey(netns: netnsName, name: name))
            ?? NameRules.classify(name, platform: .darwin)
    }
}

/// Reads counters with `sysctl(NET_RT_IFLIST2)` on Apple platforms: 64-bit
/// counters (`if_data64`), so its samples say width 64 and never wrap,
/// where getifaddrs' say 32. The reader is injected: on Darwin the
/// convenience `init(options:)` (InterfaceList2Darwin.swift) reads the
/// kernel's; elsewhere only a given one exists (tests, replays).
public final class InterfaceListSampler: CounterSource {
    public let sourceName = "sysctl"
    private var options: SamplerOptions
    private let readList: @Sendable () throws(SystemError) -> [UInt8]
    /// The samples' clock; tests set their own.
    var clock: @Sendable () -> Double = { monotonicSeconds() }

    /// `read` returns a whole NET_RT_IFLIST2 buffer each time it is called.
    public init(options: SamplerOptions = SamplerOptions(), read: @escaping @Sendable () throws(SystemError) -> [UInt8]) {
        self.options = options
        self.readList = read
    }

    public func setKindOverrides(_ overrides: KindOverrides) {
        options.kindOverrides = overrides
    }

    public func read() throws(SystemError) -> SourceReading {
        let time = clock()
        let bytes = try readList()
        let records: [InterfaceList2.Record]
        do {
            records = try InterfaceList2.parse(bytes)
        } catch {
            throw SystemError(call: "sysctl(NET_RT_IFLIST2)", message: error.description)
        }
        return SourceReading(sample: Sample(time: time, interfaces: records.map(interfaceSample)))
    }

    private func interfaceSample(_ record: InterfaceList2.Record) -> InterfaceSample {
        InterfaceSample(
            name: record.name, index: record.index, classification: options.appleClassification(record.name),
            width: .bits64, speedBps: nil, counters: record.counters,
            attributes: LinkAttributes(adminUp: record.isUp, mtu: record.mtu, reportedSpeedBps: record.baudrate))
    }
}

/// Bounds-checked little-endian reads over raw bytes: every read checks
/// that it lies inside `count` (a failed check traps, never reads past),
/// and loads byte-aligned (`loadUnaligned`), whatever the buffer's
/// alignment.
struct LittleEndianBytes {
    let base: UnsafeRawBufferPointer

    init(_ base: UnsafeRawBufferPointer) { self.base = base }

    var count: Int { base.count }

    @inline(__always)
    private func check(_ at: Int, _ size: Int) {
        precondition(at >= 0 && size >= 0 && at <= base.count - size, "read of \(size) bytes at \(at) past \(base.count)")
    }

    func u8(_ at: Int) -> UInt8 {
        check(at, 1)
        return base.loadUnaligned(fromByteOffset: at, as: UInt8.self)
    }

    func u16(_ at: Int) -> UInt16 {
        check(at, 2)
        return UInt16(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt16.self))
    }

    func u32(_ at: Int) -> UInt32 {
        check(at, 4)
        return UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt32.self))
    }

    func u64(_ at: Int) -> UInt64 {
        check(at, 8)
        return UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self))
    }

    func bytes(_ at: Int, _ length: Int) -> [UInt8] {
        check(at, length)
        return Array(UnsafeRawBufferPointer(rebasing: base[at..<at + length]))
    }

    func slice(_ at: Int, _ length: Int) -> LittleEndianBytes {
        check(at, length)
        return LittleEndianBytes(UnsafeRawBufferPointer(rebasing: base[at..<at + length]))
    }
}

/// Two lowercase hex digits.
private func hex2(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0xf)]])
}
