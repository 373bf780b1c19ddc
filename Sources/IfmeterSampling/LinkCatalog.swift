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
    private var cache: OpaquePointer?
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

    deinit {
        if let cache { nl_cache_free(cache) }
    }

    /// Refills the link cache and rebuilds every entry.
    func refresh() throws(SamplingError) {
        if let cache {
            let rc = nl_cache_refill(socket.handle, cache)
            if rc < 0 { throw NetlinkSocket.libnl("nl_cache_refill(route/link)", rc) }
        } else {
            var created: OpaquePointer?
            let rc = rtnl_link_alloc_cache(socket.handle, AF_UNSPEC, &created)
            if rc < 0 { throw NetlinkSocket.libnl("rtnl_link_alloc_cache", rc) }
            cache = created
        }
        var entries: [Int: LinkEntry] = [:]
        entries.reserveCapacity(Int(nl_cache_nitems(cache)))
        var keptFacts: [FactKey: SysfsFacts] = [:]
        var object = nl_cache_get_first(cache)
        var operstateText = [CChar](repeating: 0, count: 32)
        while let obj = object {
            let link = obj
            let index = Int(rtnl_link_get_ifindex(link))
            let name = String(cString: rtnl_link_get_name(link))
            let linkKind = rtnl_link_get_type(link).map { String(cString: $0) }
            let arphrd = Int(rtnl_link_get_arptype(link))
            let flags = rtnl_link_get_flags(link)
            let operstate = operstateText.withUnsafeMutableBufferPointer { buf in
                rtnl_link_operstate2str(rtnl_link_get_operstate(link), buf.baseAddress, buf.count)
                    .map { String(cString: $0).lowercased() } ?? "unknown"
            }

            var facts = KernelFacts(linkKind: linkKind, arphrdType: arphrd)
            var reportedSpeed: UInt64?
            var hardware = false
            if let sysfs {
                let key = FactKey(index: index, name: name)
                let fromSysfs = sysfsFacts[key] ?? sysfs.read(name)
                // A name reused by another namespace's link would mislead:
                // trust sysfs only when it names the same index.
                if fromSysfs.ifindex == index {
                    keptFacts[key] = fromSysfs
                    facts = fromSysfs.merged(linkKind: linkKind, arphrdType: arphrd)
                    hardware = fromSysfs.facts.hasDevice
                    // The speed may change (renegotiation): read it again.
                    reportedSpeed = sysfs.speedBps(name)
                }
            }
            let classification = Classifier.classify(name: name, facts: facts, platform: .linux)
            let attributes = LinkAttributes(
                operstate: operstate, adminUp: flags & 1 != 0 /* IFF_UP */,
                mtu: UInt32(rtnl_link_get_mtu(link)), arphrdType: arphrd,
                reportedSpeedBps: reportedSpeed, isHardware: sysfs == nil ? nil : hardware)
            entries[index] = LinkEntry(
                index: index, name: name, classification: classification, attributes: attributes,
                speedCeilingBps: hardware ? reportedSpeed : nil)
            object = nl_cache_get_next(obj)
        }
        byIndex = entries
        sysfsFacts = keptFacts
        refreshedAt = monotonicSeconds()
        refreshes += 1
    }
}
#endif
