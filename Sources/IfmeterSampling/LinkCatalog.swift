#if os(Linux)
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore

/// What ifmeter knows about one link besides its counters.
public struct LinkEntry: Sendable, Hashable {
    public var index: Int
    public var name: String
    public var classification: Classification
    public var attributes: LinkAttributes
    /// The link speed when it bounds the counters' growth: real hardware only
    /// (veth reports 10 Gbit/s and tun 10 Mbit/s, which are not limits).
    public var speedCeilingBps: UInt64?
}

/// Names and metadata of links, from a libnl-route link cache plus sysfs.
///
/// Refreshing costs a full link dump (about 6 us per link), so samplers
/// refresh it only when the set of interface indexes changes, and at a slow
/// periodic pace for renames, operstate and speed.
final class LinkCatalog {
    private let socket: NetlinkSocket
    /// Nil when sysfs does not describe the sampled namespace.
    let sysfs: SysfsReader?
    private struct FactKey: Hashable {
        var index: Int
        var name: String
    }
    /// sysfs facts per link instance; they do not change during its life.
    private var sysfsFacts: [FactKey: SysfsFacts] = [:]
    private(set) var byIndex: [Int: LinkEntry] = [:]
    private(set) var refreshedAt: Double = -.infinity
    private(set) var refreshes = 0

    init(socket: NetlinkSocket, sysfs: SysfsReader?) {
        self.socket = socket
        self.sysfs = sysfs
    }

    /// What the link cache says of one link.
    private struct KernelLink {
        var index: Int
        var name: String
        var linkKind: String?
        var arphrd: Int
        var flags: UInt32
        var operstate: String
        var mtu: UInt32
    }

    /// Fills a libnl-route link cache, takes what ifmeter needs from each
    /// link and frees it at once: the cache holds about 1.7 KiB per link
    /// that nothing reads until the next refresh, which fills a new one.
    private func readLinkCache() throws(SystemError) -> [KernelLink] {
        var created: OpaquePointer?
        let rc = rtnl_link_alloc_cache(socket.handle, AF_UNSPEC, &created)
        if rc < 0 { throw NetlinkSocket.libnl("rtnl_link_alloc_cache", rc) }
        guard let cache = created else { throw SystemError(call: "rtnl_link_alloc_cache", message: "no cache") }
        defer { nl_cache_free(cache) }
        var links: [KernelLink] = []
        links.reserveCapacity(Int(nl_cache_nitems(cache)))
        var operstateText = [CChar](repeating: 0, count: 32)
        var object = nl_cache_get_first(cache)
        while let link = object {
            let operstate = operstateText.withUnsafeMutableBufferPointer { buf in
                rtnl_link_operstate2str(rtnl_link_get_operstate(link), buf.baseAddress, buf.count)
                    .map { String(cString: $0).lowercased() } ?? "unknown"
            }
            links.append(KernelLink(
                index: Int(rtnl_link_get_ifindex(link)), name: InterfaceName.decode(cString: rtnl_link_get_name(link)),
                linkKind: rtnl_link_get_type(link).map { String(cString: $0) },
                arphrd: Int(rtnl_link_get_arptype(link)), flags: rtnl_link_get_flags(link),
                operstate: operstate, mtu: UInt32(rtnl_link_get_mtu(link))))
            object = nl_cache_get_next(link)
        }
        return links
    }

    /// Reads the link cache and rebuilds every entry, with sysfs facts.
    func refresh() throws(SystemError) {
        let links = try readLinkCache()
        var entries: [Int: LinkEntry] = [:]
        entries.reserveCapacity(links.count)
        var keptFacts: [FactKey: SysfsFacts] = [:]
        for link in links {
            let (entry, facts) = entry(for: link)
            entries[link.index] = entry
            if let facts { keptFacts[FactKey(index: link.index, name: link.name)] = facts }
        }
        byIndex = entries
        sysfsFacts = keptFacts
        refreshedAt = monotonicSeconds()
        refreshes += 1
    }

    /// Takes what a link notification says: a new or changed link is
    /// entered at once, without a dump.
    func upsert(_ message: LinkMessage) {
        guard let name = message.name ?? byIndex[message.index]?.name else { return }
        let old = byIndex[message.index]
        let link = KernelLink(
            index: message.index, name: name, linkKind: message.linkKind, arphrd: message.arphrd, flags: message.flags,
            operstate: message.operstate ?? old?.attributes.operstate ?? "unknown",
            mtu: message.mtu ?? old?.attributes.mtu ?? 0)
        let (entry, facts) = entry(for: link)
        byIndex[message.index] = entry
        if let facts { sysfsFacts[FactKey(index: link.index, name: link.name)] = facts }
    }

    func remove(index: Int) {
        if let old = byIndex.removeValue(forKey: index) {
            sysfsFacts[FactKey(index: index, name: old.name)] = nil
        }
    }

    /// Builds one entry: netlink's facts, then sysfs's, then the classifier;
    /// returns the sysfs facts to keep for this link instance too.
    private func entry(for link: KernelLink) -> (LinkEntry, SysfsFacts?) {
        var kept: SysfsFacts?
        var facts = KernelFacts(linkKind: link.linkKind, arphrdType: link.arphrd)
        var reportedSpeed: UInt64?
        var hardware = false
        if let sysfs {
            let key = FactKey(index: link.index, name: link.name)
            var fromSysfs = sysfsFacts[key] ?? sysfs.read(link.name)
            // A name reused by another namespace's link would mislead:
            // trust sysfs only when it names the same index.
            if fromSysfs.ifindex == link.index {
                hardware = fromSysfs.facts.hasDevice
                // A hardware link's speed may change (renegotiation).
                if hardware, sysfsFacts[key] != nil { fromSysfs.speedBps = sysfs.speedBps(link.name) }
                kept = fromSysfs
                facts = fromSysfs.merged(linkKind: link.linkKind, arphrdType: link.arphrd)
                reportedSpeed = fromSysfs.speedBps
            }
        }
        let attributes = LinkAttributes(
            operstate: link.operstate, adminUp: link.flags & 1 != 0 /* IFF_UP */, mtu: link.mtu,
            arphrdType: link.arphrd, reportedSpeedBps: reportedSpeed, isHardware: sysfs == nil ? nil : hardware)
        let entry = LinkEntry(
            index: link.index, name: link.name,
            classification: Classifier.classify(name: link.name, facts: facts, platform: .linux),
            attributes: attributes, speedCeilingBps: hardware ? reportedSpeed : nil)
        return (entry, kept)
    }
}
#endif
