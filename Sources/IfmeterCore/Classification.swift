/// What kind of link an interface is. The summary never adds tunnel traffic to
/// physical traffic, because a tunnel's packets ride inside a physical link.
public enum InterfaceKind: String, CaseIterable, Sendable, Hashable, Comparable {
    case wifi, cellular, tunnel, ethernet, loopback, virtual, other

    /// Wi-Fi, cellular and Ethernet carry traffic that leaves the machine.
    public var isPhysical: Bool { self == .wifi || self == .cellular || self == .ethernet }

    public static func < (lhs: InterfaceKind, rhs: InterfaceKind) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// A kind together with the evidence it was decided from, for example
/// `link-kind:tun`, `sysfs:phy80211` or `name:wwan*`.
public struct Classification: Sendable, Hashable {
    public var kind: InterfaceKind
    public var evidence: String

    public init(kind: InterfaceKind, evidence: String) {
        self.kind = kind
        self.evidence = evidence
    }
}

/// Which naming conventions apply when nothing but a name is known.
public enum Platform: String, Sendable, Hashable {
    case linux, darwin

    /// The platform this code runs on.
    public static var current: Platform {
        #if canImport(Darwin)
        return .darwin
        #else
        return .linux
        #endif
    }
}

/// The contract's name rules (trace v1): the last resort of classification.
public enum NameRules {
    private typealias Rule = (pattern: String, kind: InterfaceKind)

    private static let linux: [Rule] = [
        ("lo", .loopback),
        ("wl*", .wifi),
        ("wwan*", .cellular), ("rmnet*", .cellular), ("ccmni*", .cellular), ("pdp_ip*", .cellular),
        ("tun*", .tunnel), ("tap*", .tunnel), ("utun*", .tunnel), ("wg*", .tunnel), ("ipsec*", .tunnel),
        ("eth*", .ethernet), ("en*", .ethernet), ("em*", .ethernet),
        ("veth*", .virtual), ("docker*", .virtual), ("br-*", .virtual), ("virbr*", .virtual),
        ("bridge*", .virtual), ("vnet*", .virtual), ("dummy*", .virtual), ("ifb*", .virtual),
    ]

    private static let darwin: [Rule] = [
        ("lo0", .loopback),
        ("en0", .wifi),
        ("en*", .ethernet),
        ("pdp_ip*", .cellular),
        ("utun*", .tunnel), ("ipsec*", .tunnel),
        ("awdl*", .virtual), ("llw*", .virtual), ("bridge*", .virtual), ("anpi*", .virtual), ("ap*", .virtual),
    ]

    /// Classifies by name alone; the evidence names the rule that matched
    /// (`name:wl*`), or `name:no-rule` when none did.
    public static func classify(_ name: String, platform: Platform = .linux) -> Classification {
        for rule in platform == .darwin ? darwin : linux {
            let matches: Bool
            if rule.pattern.hasSuffix("*") {
                matches = name.hasPrefix(rule.pattern.dropLast())
            } else {
                matches = name == rule.pattern
            }
            if matches { return Classification(kind: rule.kind, evidence: "name:\(rule.pattern)") }
        }
        return Classification(kind: .other, evidence: "name:no-rule")
    }
}

/// What the kernel says about an interface, gathered by a sampler from
/// netlink and sysfs. Every field is optional: a source fills what it can.
public struct KernelFacts: Sendable, Hashable {
    /// Netlink `IFLA_INFO_KIND` (`tun`, `veth`, `wireguard`, ...).
    public var linkKind: String?
    /// ARPHRD hardware type (`/sys/class/net/X/type`, `ifi_type`).
    public var arphrdType: Int?
    /// `/sys/class/net/X/wireless` exists.
    public var sysfsWireless: Bool = false
    /// `/sys/class/net/X/phy80211` exists.
    public var sysfsPhy80211: Bool = false
    /// `DEVTYPE=` from `/sys/class/net/X/uevent`.
    public var devtype: String?
    /// `/sys/class/net/X/tun_flags` exists (tun or tap).
    public var sysfsTunFlags: Bool = false
    /// `/sys/class/net/X/device` exists: backed by real hardware.
    public var hasDevice: Bool = false
    /// The bound driver's name (`qmi_wwan`, `iwlwifi`, ...), when known.
    public var driver: String?

    public init(
        linkKind: String? = nil, arphrdType: Int? = nil, sysfsWireless: Bool = false,
        sysfsPhy80211: Bool = false, devtype: String? = nil, sysfsTunFlags: Bool = false,
        hasDevice: Bool = false, driver: String? = nil
    ) {
        self.linkKind = linkKind
        self.arphrdType = arphrdType
        self.sysfsWireless = sysfsWireless
        self.sysfsPhy80211 = sysfsPhy80211
        self.devtype = devtype
        self.sysfsTunFlags = sysfsTunFlags
        self.hasDevice = hasDevice
        self.driver = driver
    }
}

/// Kernel facts first, names last. Pure: the facts are gathered elsewhere.
///
/// Order of evidence: netlink link kind, decisive ARPHRD types (loopback,
/// raw IP, 802.11, IP tunnels), sysfs (wireless, phy80211, uevent DEVTYPE,
/// tun_flags, the driver, a hardware device), the ambiguous ARPHRD types
/// (NONE, PPP), then the name rules.
public enum Classifier {
    static let linkKinds: [String: InterfaceKind] = [
        // Tunnels: their packets ride inside another interface's.
        "tun": .tunnel, "wireguard": .tunnel, "gre": .tunnel, "gretap": .tunnel,
        "ip6gre": .tunnel, "ip6gretap": .tunnel, "erspan": .tunnel, "ip6erspan": .tunnel,
        "ipip": .tunnel, "sit": .tunnel, "ip6tnl": .tunnel, "vti": .tunnel, "vti6": .tunnel,
        "xfrm": .tunnel, "vxlan": .tunnel, "geneve": .tunnel, "bareudp": .tunnel,
        "l2tp": .tunnel, "amt": .tunnel, "gtp": .tunnel, "openvpn": .tunnel, "ovpn": .tunnel,
        // Virtual links that sit on top of, or beside, the physical ones.
        "veth": .virtual, "bridge": .virtual, "ifb": .virtual, "vlan": .virtual,
        "macvlan": .virtual, "macvtap": .virtual, "ipvlan": .virtual, "ipvtap": .virtual,
        "bond": .virtual, "team": .virtual, "dummy": .virtual, "vrf": .virtual,
        "nlmon": .virtual, "netkit": .virtual, "vcan": .virtual, "vxcan": .virtual,
        "macsec": .virtual, "hsr": .virtual, "batadv": .virtual,
        "openvswitch": .virtual,
        // Cellular data channels.
        "rmnet": .cellular, "wwan": .cellular,
    ]

    static let arphrdTypes: [Int: (name: String, kind: InterfaceKind)] = [
        772: ("loopback", .loopback),
        519: ("rawip", .cellular),
        768: ("tunnel", .tunnel),
        769: ("tunnel6", .tunnel),
        776: ("sit", .tunnel),
        778: ("ipgre", .tunnel),
        823: ("ip6gre", .tunnel),
        801: ("ieee80211", .wifi),
        802: ("ieee80211-prism", .wifi),
        803: ("ieee80211-radiotap", .wifi),
    ]

    /// ARPHRD types that say little on their own: tun and WireGuard use
    /// NONE, but so does a qmi_wwan modem in raw-IP mode, and PPP carries
    /// VPNs as well as modems. They are weighed after sysfs.
    static let weakArphrdTypes: [Int: (name: String, kind: InterfaceKind)] = [
        65534: ("none", .tunnel),
        512: ("ppp", .tunnel),
    ]

    static let cellularDrivers: Set<String> = [
        "qmi_wwan", "cdc_mbim", "cdc_ncm_wwan", "huawei_cdc_ncm", "sierra_net", "mhi_net",
        "ipheth", "rmnet", "rmnet_ipa", "option", "cdc_ether_wwan",
    ]

    /// Classifies from kernel facts, falling back to the name rules.
    public static func classify(name: String, facts: KernelFacts, platform: Platform = .linux) -> Classification {
        if let kind = facts.linkKind, !kind.isEmpty {
            if let mapped = linkKinds[kind] {
                return Classification(kind: mapped, evidence: "link-kind:\(kind)")
            }
        }
        if let type = facts.arphrdType, let entry = arphrdTypes[type] {
            return Classification(kind: entry.kind, evidence: "arphrd:\(entry.name)(\(type))")
        }
        if facts.sysfsPhy80211 { return Classification(kind: .wifi, evidence: "sysfs:phy80211") }
        if facts.sysfsWireless { return Classification(kind: .wifi, evidence: "sysfs:wireless") }
        if let devtype = facts.devtype {
            switch devtype {
            case "wlan": return Classification(kind: .wifi, evidence: "sysfs:DEVTYPE=wlan")
            case "wwan": return Classification(kind: .cellular, evidence: "sysfs:DEVTYPE=wwan")
            case "wireguard": return Classification(kind: .tunnel, evidence: "sysfs:DEVTYPE=wireguard")
            case "bridge", "vlan", "bond", "team", "macsec":
                return Classification(kind: .virtual, evidence: "sysfs:DEVTYPE=\(devtype)")
            default: break
            }
        }
        if facts.sysfsTunFlags { return Classification(kind: .tunnel, evidence: "sysfs:tun_flags") }
        if let driver = facts.driver, cellularDrivers.contains(driver) {
            return Classification(kind: .cellular, evidence: "sysfs:driver=\(driver)")
        }
        if facts.hasDevice, facts.arphrdType == nil || facts.arphrdType == 1 {
            return Classification(kind: .ethernet, evidence: "sysfs:device")
        }
        if let type = facts.arphrdType, let entry = weakArphrdTypes[type] {
            // Hardware with no link-layer header is a modem's data channel.
            if facts.hasDevice, type == 65534 {
                return Classification(kind: .cellular, evidence: "sysfs:device+arphrd:none(65534)")
            }
            return Classification(kind: entry.kind, evidence: "arphrd:\(entry.name)(\(type))")
        }
        if let kind = facts.linkKind, !kind.isEmpty {
            // A link kind this table does not know: still a software link.
            return Classification(kind: .virtual, evidence: "link-kind:\(kind)")
        }
        return NameRules.classify(name, platform: platform)
    }
}
