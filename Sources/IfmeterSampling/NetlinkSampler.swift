#if os(Linux)
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore

/// Reads 64-bit counters with one RTM_GETSTATS dump per sample, asking only
/// for IFLA_STATS_LINK_64; names and kinds come from a `LinkCatalog`.
/// Falls back to an RTM_GETLINK dump (IFLA_STATS64) on kernels without
/// RTM_GETSTATS (before 4.7).
public final class NetlinkSampler: CounterSource {
    public enum Mode: String, Sendable {
        /// RTM_GETSTATS with IFLA_STATS_LINK_64: the cheap path.
        case stats
        /// RTM_GETLINK with IFLA_STATS64: the fallback.
        case link
    }

    public let sourceName = "netlink"
    public private(set) var mode: Mode
    private let options: SamplerOptions
    private let socket: NetlinkSocket
    private let catalog: LinkCatalog
    private let statsRequest: OpaquePointer
    private let linkRequest: OpaquePointer
    /// Reused between samples.
    private var raw: [(index: Int, counters: Counters, width: CounterWidth)] = []

    public init(options: SamplerOptions = SamplerOptions()) throws(SamplingError) {
        self.options = options
        socket = try NetlinkSocket(receiveBuffer: options.receiveBufferBytes)
        catalog = LinkCatalog(socket: socket, sysfs: options.sysfs)
        var stats = if_stats_msg()
        stats.family = UInt8(AF_UNSPEC)
        stats.filter_mask = cifm_stats_filter_link64()
        statsRequest = try withUnsafeBytes(of: &stats) { bytes throws(SamplingError) in
            try NetlinkSocket.request(type: Int32(RTM_GETSTATS), header: bytes)
        }
        var info = ifinfomsg()
        info.ifi_family = UInt8(AF_UNSPEC)
        do {
            linkRequest = try withUnsafeBytes(of: &info) { bytes throws(SamplingError) in
                try NetlinkSocket.request(type: Int32(RTM_GETLINK), header: bytes)
            }
        } catch {
            nlmsg_free(statsRequest)
            throw error
        }
        mode = options.forceLinkDump ? .link : .stats
    }

    deinit {
        nlmsg_free(statsRequest)
        nlmsg_free(linkRequest)
    }

    /// How many times the link catalog was refilled (for tests and benchmarks).
    public var catalogRefreshes: Int { catalog.refreshes }

    public func sample() throws(SamplingError) -> Sample {
        let t = monotonicSeconds()
        try readCounters()
        var needsRefresh = catalog.byIndex.count != raw.count
            || t - catalog.refreshedAt >= options.catalogRefreshSeconds
        if !needsRefresh {
            for entry in raw where catalog.byIndex[entry.index] == nil {
                needsRefresh = true
                break
            }
        }
        if needsRefresh { try catalog.refresh() }

        var interfaces: [InterfaceSample] = []
        interfaces.reserveCapacity(raw.count)
        let links = catalog.byIndex
        for entry in raw {
            // A link created between the two dumps is left for the next
            // sample, which counts it in full: nothing is lost.
            guard let link = links[entry.index] else { continue }
            interfaces.append(InterfaceSample(
                name: link.name, index: entry.index, classification: link.classification, width: entry.width,
                speedBps: link.speedCeilingBps, counters: entry.counters, attributes: link.attributes))
        }
        return Sample(time: t, interfaces: interfaces)
    }

    private func readCounters() throws(SamplingError) {
        raw.removeAll(keepingCapacity: true)
        if mode == .stats {
            do {
                try socket.dump(statsRequest, name: "RTM_GETSTATS") { nh in
                    let header = Int32(MemoryLayout<if_stats_msg>.size)
                    let message = nlmsg_data(nh).assumingMemoryBound(to: if_stats_msg.self)
                    guard let attr = nla_find(nlmsg_attrdata(nh, header), nlmsg_attrlen(nh, header),
                                              Int32(IFLA_STATS_LINK_64)),
                          let counters = linkStats64(attr)
                    else { return }
                    raw.append((Int(message.pointee.ifindex), counters, .bits64))
                }
                return
            } catch let error where error.errno == EOPNOTSUPP || error.errno == EINVAL {
                // No RTM_GETSTATS on this kernel: use the link dump from now on.
                mode = .link
                raw.removeAll(keepingCapacity: true)
            }
        }
        try socket.dump(linkRequest, name: "RTM_GETLINK") { nh in
            guard Int32(nh.pointee.nlmsg_type) == Int32(RTM_NEWLINK) else { return }
            let header = Int32(MemoryLayout<ifinfomsg>.size)
            let message = nlmsg_data(nh).assumingMemoryBound(to: ifinfomsg.self)
            let attrs = nlmsg_attrdata(nh, header), length = nlmsg_attrlen(nh, header)
            let index = Int(message.pointee.ifi_index)
            if let attr = nla_find(attrs, length, Int32(IFLA_STATS64)), let counters = linkStats64(attr) {
                raw.append((index, counters, .bits64))
            } else if let attr = nla_find(attrs, length, Int32(IFLA_STATS)), let counters = linkStats32(attr) {
                raw.append((index, counters, .bits32))
            }
        }
    }
}
#endif
