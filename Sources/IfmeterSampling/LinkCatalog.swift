#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore
import IfmeterSystem

/// What ifmeter knows about one link besides its counters.
public struct LinkEntry: Sendable, Hashable {
    public var index: Int
    public var name: String
    public var classification: Classification
    public var attributes: LinkAttributes
    /// The link speed when it bounds the counters' growth: real hardware only
    /// (veth reports 10 Gbit/s and tun 10 Mbit/s, which are not limits).
    public var speedCeilingBps: UInt64?
    /// What the classification was decided from (netlink's link kind and
    /// ARPHRD type): while they stay, the link instance is the same, and
    /// its sysfs facts need not be read again.
    var linkKind: String?
    var arphrd: Int
    /// sysfs says it is backed by hardware (nil: sysfs not read, or not
    /// about this link).
    var hardware: Bool?
    /// A veth's other end, as the kernel names it while both live (at
    /// deletion it no longer does).
    var peer: PeerLink?
}

/// Links by interface index, kept densely: a table of positions (12 bytes
/// a bucket) beside one array of entries. A dictionary of entries held
/// every empty bucket at an entry's size too (1 MB at 4000 links).
struct LinkTable: Sendable {
    private var positions: [Int: Int32] = [:]
    private var entries: [LinkEntry] = []

    var count: Int { entries.count }
    /// The interface indexes held, in no order.
    var indexes: Dictionary<Int, Int32>.Keys { positions.keys }

    subscript(index: Int) -> LinkEntry? {
        get { positions[index].map { entries[Int($0)] } }
        set {
            guard var entry = newValue else {
                removeValue(forKey: index)
                return
            }
            entry.index = index
            if let position = positions[index] {
                entries[Int(position)] = entry
            } else {
                positions[index] = Int32(entries.count)
                entries.append(entry)
            }
        }
    }

    /// Removes a link; the last entry takes its place.
    mutating func removeValue(forKey index: Int) {
        guard let position = positions.removeValue(forKey: index).map(Int.init) else { return }
        let last = entries.count - 1
        if position != last {
            entries.swapAt(position, last)
            positions[entries[position].index] = Int32(position)
        }
        entries.removeLast()
    }
}

/// Names and metadata of links, from a link dump plus sysfs.
///
/// Refreshing costs a full link dump (about 6 us per link), so samplers
/// refresh it only when the set of interface indexes changes, and at a slow
/// periodic pace for renames, operstate and speed.
final class LinkCatalog {
    private let socket: NetlinkSocket
    /// Nil when sysfs does not describe the sampled namespace.
    let sysfs: SysfsReader?
    /// Keep node_exporter's netclass facts (`--compat node`).
    let netclass: Bool
    private(set) var byIndex = LinkTable()
    private(set) var refreshedAt: Double = -.infinity
    private(set) var refreshes = 0

    /// RTM_GETLINK for every link, asking the kernel to leave the
    /// statistics out (RTEXT_FILTER_SKIP_STATS; older kernels ignore it).
    private let linkRequest: NetlinkMessage

    /// The user's kinds (`--kind-of`) and the namespace they are matched in.
    private(set) var overrides: KindOverrides
    /// New overrides came: the next refresh classifies every link again.
    private var reclassify = false

    /// Takes new `--kind-of` rules; the caller refreshes.
    func setOverrides(_ overrides: KindOverrides) {
        self.overrides = overrides
        reclassify = true
    }
    let netnsName: String

    init(
        socket: NetlinkSocket, sysfs: SysfsReader?, netclass: Bool = false, overrides: KindOverrides = KindOverrides(), netnsName: String = ""
    ) throws(SystemError) {
        self.overrides = overrides
        self.netnsName = netnsName
        self.socket = socket
        self.sysfs = sysfs
        self.netclass = netclass
        var info = ifinfomsg()
        info.ifi_family = UInt8(AF_UNSPEC)
        linkRequest = try NetlinkMessage(dump: Int32(RTM_GETLINK), info)
        try linkRequest.put(u32: UInt32(RTEXT_FILTER_SKIP_STATS), attribute: Int32(IFLA_EXT_MASK))
    }

    /// What a link dump says of one link.
    private struct KernelLink {
        var index: Int
        var name: String
        var linkKind: String?
        var arphrd: Int
        var flags: UInt32
        var operstate: String
        var mtu: UInt32
        var carrierChanges: UInt32?
        var link: Int?
        var linkNetnsID: Int32?
        var netclass: NetclassFacts?
    }

    /// Dumps every link (RTM_GETLINK, without statistics), parsing each
    /// message as link notifications are parsed, and rebuilds each link's
    /// entry (with sysfs facts) in place as its message comes: no list of
    /// the links and no second table, which at 4000 links were 0.8 and 1 MB
    /// more at every refresh. Nothing else is kept: a libnl link cache held
    /// 1.7 KiB per link in small allocations, which fragmented the heap for
    /// good after each refresh.
    func refresh() throws(SystemError) {
        var seen = Set<Int>(minimumCapacity: byIndex.count + 16)
        try socket.dump(linkRequest, name: "RTM_GETLINK", restart: { seen.removeAll(keepingCapacity: true) }) { message in
            guard let link = parseLinkMessage(message, netclass: netclass), !link.deleted, let name = link.name else { return }
            let kernel = KernelLink(
                index: link.index, name: name, linkKind: link.linkKind, arphrd: link.arphrd, flags: link.flags,
                operstate: link.operstate ?? "unknown", mtu: link.mtu ?? 0, carrierChanges: link.carrierChanges, link: link.link,
                linkNetnsID: link.linkNetnsID,
                netclass: link.netclass)
            byIndex[link.index] = entry(for: kernel, was: byIndex[link.index])
            seen.insert(link.index)
        }
        // Links the dump did not name are gone.
        if seen.count != byIndex.count {
            for index in byIndex.indexes.filter({ !seen.contains($0) }) { byIndex.removeValue(forKey: index) }
        }
        refreshedAt = monotonicSeconds()
        refreshes += 1
        reclassify = false
    }

    /// Takes what a link notification says: a new or changed link is
    /// entered at once, without a dump.
    func upsert(_ message: LinkMessage) {
        guard let name = message.name ?? byIndex[message.index]?.name else { return }
        let old = byIndex[message.index]
        let link = KernelLink(
            index: message.index, name: name, linkKind: message.linkKind, arphrd: message.arphrd, flags: message.flags,
            operstate: message.operstate ?? old?.attributes.operstate ?? "unknown",
            mtu: message.mtu ?? old?.attributes.mtu ?? 0,
            carrierChanges: message.carrierChanges ?? old?.attributes.carrierChanges,
            // A veth whose peer is going names it no more (0): keep the one known.
            link: (message.link ?? 0) > 0 ? message.link : old?.peer?.index,
            linkNetnsID: (message.link ?? 0) > 0 ? message.linkNetnsID : old?.peer?.netnsID,
            netclass: message.netclass ?? (netclass ? old?.attributes.netclass : nil))
        byIndex[message.index] = entry(for: link, was: old)
    }

    func remove(index: Int) {
        byIndex.removeValue(forKey: index)
    }

    /// Builds one entry: netlink's facts, then sysfs's, then the classifier.
    /// The same link instance as `old` (same name, link kind and type)
    /// keeps what sysfs said of it; only a hardware link's speed is read
    /// again (it may renegotiate).
    private func entry(for link: KernelLink, was old: LinkEntry?) -> LinkEntry {
        var classification: Classification
        var reportedSpeed: UInt64?
        var hardware: Bool?
        let sameInstance =
            !reclassify
            && old.map {
                $0.name == link.name && $0.linkKind == link.linkKind && $0.arphrd == link.arphrd && (sysfs == nil || $0.hardware != nil)
            } ?? false
        if let old, sameInstance {
            classification = old.classification
            hardware = old.hardware
            reportedSpeed = old.attributes.reportedSpeedBps
            if hardware == true, let sysfs { reportedSpeed = sysfs.speedBps(link.name) }
        } else {
            var facts = KernelFacts(linkKind: link.linkKind, arphrdType: link.arphrd)
            if let sysfs {
                let fromSysfs = sysfs.read(link.name)
                // A name reused by another namespace's link would mislead:
                // trust sysfs only when it names the same index (else it
                // is read again next time).
                if fromSysfs.ifindex == link.index {
                    hardware = fromSysfs.facts.hasDevice
                    facts = fromSysfs.merged(linkKind: link.linkKind, arphrdType: link.arphrd)
                    reportedSpeed = fromSysfs.speedBps
                }
            }
            // sysfs shows another namespace (`list --netns`): the driver
            // says the speed sysfs would, through the socket in the link's
            // namespace (while the link runs, as sysfs).
            if hardware == nil { reportedSpeed = ethtoolSpeedBps(link.name, running: link.flags & 0x40 != 0 /* IFF_RUNNING */) }
            classification =
                overrides.classification(for: SeriesKey(netns: netnsName, name: link.name))
                ?? Classifier.classify(name: link.name, facts: facts, platform: .linux)
        }
        var attributes = LinkAttributes(
            operstate: link.operstate, adminUp: link.flags & 1 != 0 /* IFF_UP */, mtu: link.mtu,
            arphrdType: link.arphrd, reportedSpeedBps: reportedSpeed, isHardware: sysfs == nil ? nil : hardware ?? false,
            carrierChanges: link.carrierChanges,
            netclass: link.netclass.map {
                withSysfs(
                    $0, name: link.name, verified: hardware != nil, hardware: hardware == true,
                    was: sameInstance ? old?.attributes.netclass : nil)
            })
        // The same attributes as before: keep the one instance samples share.
        if let old, old.attributes == attributes { attributes = old.attributes }
        return LinkEntry(
            index: link.index, name: link.name, classification: classification, attributes: attributes,
            speedCeilingBps: hardware == true ? reportedSpeed : nil, linkKind: link.linkKind, arphrd: link.arphrd,
            hardware: hardware,
            peer: link.linkKind == "veth" ? link.link.flatMap { $0 > 0 ? PeerLink(index: $0, netnsID: link.linkNetnsID) : nil } : nil)
    }

    /// Adds what only sysfs says to a link's netclass facts. sysfs is read
    /// when it was checked to name this link (`verified`); otherwise it
    /// shows another namespace, and the driver is asked for the speed and
    /// duplex (ETHTOOL_GSET, what sysfs shows) through the netlink socket,
    /// which is in the link's namespace; the other three stay unknown. They
    /// are read when the link is new, or something they depend on changed
    /// (up or down, carrier, address), or it is hardware (its speed may
    /// renegotiate); otherwise the last reading stands, so a periodic
    /// refresh reads nothing for thousands of unchanged virtual links.
    private func withSysfs(
        _ facts: NetclassFacts, name: String, verified: Bool, hardware: Bool, was old: NetclassFacts?
    ) -> NetclassFacts {
        var facts = facts
        let read: SysfsNetclass
        if let old, !hardware, old.running == facts.running, old.carrier == facts.carrier, old.address == facts.address {
            read = old.sysfs
        } else if let sysfs, verified {
            read = sysfs.netclass(name)
        } else {
            read = ethtool(name, running: facts.running)
        }
        facts.sysfs = read
        return facts
    }

    /// The driver's speed in bit/s, as sysfs's `speed` gives it.
    private func ethtoolSpeedBps(_ name: String, running: Bool) -> UInt64? {
        var speed: Int32 = 0, duplex: UInt8 = 0
        guard running, cifm_ethtool_link(socket.fd, name, &speed, &duplex) == 0 else { return nil }
        return SysfsReader.bitsPerSecond(Int(speed))
    }

    /// Speed and duplex from the driver, while the link is up (sysfs
    /// answers only then); nil where the driver has no ethtool support.
    private func ethtool(_ name: String, running: Bool) -> SysfsNetclass {
        var speed: Int32 = 0, duplex: UInt8 = 0
        guard running, cifm_ethtool_link(socket.fd, name, &speed, &duplex) == 0 else { return SysfsNetclass() }
        return SysfsNetclass(speedMbps: speed, duplex: duplex == 0 ? "half" : duplex == 1 ? "full" : "unknown")
    }
}
#endif
