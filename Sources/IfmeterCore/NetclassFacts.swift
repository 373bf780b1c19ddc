/// What node_exporter's netclass collector shows of one link besides its
/// name, index, type, MTU and operstate (which `LinkAttributes` holds).
/// Kept only for `--compat node`, in one value shared by every sample of
/// the link (about 100 bytes, plus the addresses' bytes and an alias).
///
/// Most fields come from the link's netlink message (RTM_NEWLINK); the
/// `sysfs` ones are read from `/sys/class/net/NAME/` when sysfs shows the
/// sampled namespace (not for `--netns`), as nothing in netlink carries them.
public struct NetclassFacts: Sendable, Hashable {
    /// IFLA_ADDRESS's bytes, then IFLA_BROADCAST's (each absent when the
    /// link has no hardware address, as a tun).
    public var addresses: [UInt8]
    /// How many of `addresses` are IFLA_ADDRESS's; -1 when it was absent.
    public var addressLength: Int8
    /// How many are IFLA_BROADCAST's; -1 when it was absent.
    public var broadcastLength: Int8
    /// IFLA_IFALIAS, without surrounding white space; nil when none is set.
    public var ifalias: String?
    /// The flags sysfs shows (`dev->flags`): netlink's `ifi_flags` without
    /// the states it adds (IFF_RUNNING, IFF_LOWER_UP, IFF_DORMANT), with
    /// IFF_PROMISC and IFF_ALLMULTI from the counts (IFLA_PROMISCUITY,
    /// IFLA_ALLMULTI) rather than from what was asked by hand.
    public var flags: UInt32
    /// Netlink's `ifi_flags` as sent.
    public var linkFlags: UInt32
    /// IFLA_TXQLEN.
    public var transmitQueueLength: UInt32
    /// IFLA_GROUP.
    public var group: UInt32
    /// IFLA_CARRIER_CHANGES, IFLA_CARRIER_UP_COUNT, IFLA_CARRIER_DOWN_COUNT.
    public var carrierChanges: UInt32
    public var carrierUpCount: UInt32
    public var carrierDownCount: UInt32
    /// IFLA_LINK, or the link's own index when absent (sysfs's `iflink`).
    public var ifaceLink: Int32
    /// IFLA_CARRIER.
    public var carrier: UInt8?
    /// IFLA_LINKMODE.
    public var linkMode: UInt8
    /// What only sysfs (or, for speed and duplex, the driver) says.
    public var sysfs = SysfsNetclass()

    public init(
        address: [UInt8]? = nil, broadcast: [UInt8]? = nil, ifalias: String? = nil, flags: UInt32 = 0,
        linkFlags: UInt32 = 0, transmitQueueLength: UInt32 = 0, group: UInt32 = 0, carrierChanges: UInt32 = 0,
        carrierUpCount: UInt32 = 0, carrierDownCount: UInt32 = 0, ifaceLink: Int32 = 0, carrier: UInt8? = nil,
        linkMode: UInt8 = 0
    ) {
        let a = (address ?? []).prefix(Int(Int8.max)), b = (broadcast ?? []).prefix(Int(Int8.max))
        addresses = Array(a) + Array(b)
        addressLength = address == nil ? -1 : Int8(a.count)
        broadcastLength = broadcast == nil ? -1 : Int8(b.count)
        self.ifalias = ifalias
        self.flags = flags
        self.linkFlags = linkFlags
        self.transmitQueueLength = transmitQueueLength
        self.group = group
        self.carrierChanges = carrierChanges
        self.carrierUpCount = carrierUpCount
        self.carrierDownCount = carrierDownCount
        self.ifaceLink = ifaceLink
        self.carrier = carrier
        self.linkMode = linkMode
    }

    /// IFF_UP is set: the kernel answers sysfs's `carrier`, `dormant`,
    /// `speed` and `duplex` only then.
    public var running: Bool { linkFlags & 0x1 != 0 }
    /// IFF_DORMANT in netlink's flags (set only while running).
    public var dormant: Bool { linkFlags & 0x20000 != 0 }

    public var address: ArraySlice<UInt8>? {
        addressLength < 0 ? nil : addresses[0..<Int(addressLength)]
    }

    public var broadcast: ArraySlice<UInt8>? {
        guard broadcastLength >= 0 else { return nil }
        let start = max(0, Int(addressLength))
        return addresses[start..<start + Int(broadcastLength)]
    }

    /// sysfs's spelling of a hardware address: lower-case hex bytes joined
    /// by colons; empty when there is none.
    public static func spell(_ bytes: ArraySlice<UInt8>?) -> String {
        guard let bytes else { return "" }
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 3)
        for (n, b) in bytes.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ":")) }
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The netclass facts only sysfs gives (see `SysfsReader.netclass`): sysfs
/// `speed` in Mbit/s as the driver reports it (-1: unknown; nil when the
/// file cannot be read: link down, no ethtool support, no sysfs), `duplex`
/// (`full`, `half`, `unknown`), `dev_id`, `name_assign_type` and
/// `addr_assign_type`.
public struct SysfsNetclass: Sendable, Hashable {
    public var speedMbps: Int32?
    public var duplex: String?
    public var devID: UInt16?
    public var nameAssignType: UInt8?
    public var addressAssignType: UInt8?

    public init(
        speedMbps: Int32? = nil, duplex: String? = nil, devID: UInt16? = nil, nameAssignType: UInt8? = nil,
        addressAssignType: UInt8? = nil
    ) {
        self.speedMbps = speedMbps
        self.duplex = duplex
        self.devID = devID
        self.nameAssignType = nameAssignType
        self.addressAssignType = addressAssignType
    }
}
