#if canImport(Glibc)
import CIfmeterLinux
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterSystem

/// Reads counters with getifaddrs: portable to Apple platforms, but its
/// counters are 32-bit and wrap at 4 GiB (on Linux too: AF_PACKET entries
/// carry a `struct rtnl_link_stats`; on Darwin, AF_LINK entries an
/// `if_data`). Every sample says width 32, so the engine knows what wraps.
public final class GetifaddrsSampler: CounterSource {
    public let sourceName = "getifaddrs"
    #if os(Linux)
    /// Kinds and attributes from netlink and sysfs, as the netlink sampler
    /// has them; only the counters differ.
    private let catalog: LinkCatalog?
    private let catalogSocket: NetlinkSocket?
    #endif
    private let options: SamplerOptions
    /// getifaddrs opens a socket per call: with a namespace, each call runs
    /// on a helper thread inside it.
    var namespace: String?

    public init(options: SamplerOptions = SamplerOptions()) throws(SystemError) {
        self.options = options
        #if os(Linux)
        let socket = try NetlinkSocket(receiveBuffer: options.receiveBufferBytes)
        catalogSocket = socket
        catalog = try LinkCatalog(socket: socket, sysfs: options.sysfs)
        #endif
    }

    /// Reads every link's counters (getifaddrs gives no link events).
    public func read() throws(SystemError) -> SourceReading {
        SourceReading(sample: try sample())
    }

    private func sample() throws(SystemError) -> Sample {
        #if os(Linux)
        if let namespace {
            do {
                return try NetworkNamespace.perform(in: namespace) { try self.sampleHere() }
            } catch let error as SystemError {
                throw error
            } catch {
                throw SystemError(call: "setns(\(namespace))", message: "\(error)")
            }
        }
        #endif
        return try sampleHere()
    }

    private func sampleHere() throws(SystemError) -> Sample {
        let t = monotonicSeconds()
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { throw SystemError.system("getifaddrs") }
        defer { freeifaddrs(list) }
        var found: [(name: String, index: Int, type: Int, counters: Counters, stats: KernelLinkStats?)] = []
        var cursor = list
        while let ifa = cursor {
            defer { cursor = ifa.pointee.ifa_next }
            #if os(Linux)
            var stats = cifm_stats32()
            var index: Int32 = 0, hatype: Int32 = 0
            guard cifm_ifaddrs_stats32(ifa, &stats) == 0 else { continue }
            if cifm_ifaddrs_packet_info(ifa, &index, &hatype) != 0 {
                // No hardware address (a tun): found by name.
                index = Int32(if_nametoindex(ifa.pointee.ifa_name))
                hatype = -1
                guard index > 0 else { continue }
            }
            let counters = Counters(
                rxBytes: UInt64(stats.rx_bytes), txBytes: UInt64(stats.tx_bytes),
                rxPackets: UInt64(stats.rx_packets), txPackets: UInt64(stats.tx_packets),
                rxErrors: UInt64(stats.rx_errors), txErrors: UInt64(stats.tx_errors),
                rxDropped: UInt64(stats.rx_dropped), txDropped: UInt64(stats.tx_dropped))
            var kernelStats: KernelLinkStats?
            if options.kernelStats {
                var fields = [UInt64](repeating: 0, count: 24)
                if cifm_ifaddrs_kernel_stats(ifa, &fields) == 0 { kernelStats = KernelLinkStats(values: fields) }
            }
            found.append((InterfaceName.decode(cString: ifa.pointee.ifa_name), Int(index), Int(hatype), counters, kernelStats))
            #else
            guard let addr = ifa.pointee.ifa_addr, addr.pointee.sa_family == UInt8(AF_LINK),
                  let data = ifa.pointee.ifa_data
            else { continue }
            let d = data.assumingMemoryBound(to: if_data.self).pointee
            let index = addr.withMemoryRebound(to: sockaddr_dl.self, capacity: 1) { Int($0.pointee.sdl_index) }
            let counters = Counters(
                rxBytes: UInt64(d.ifi_ibytes), txBytes: UInt64(d.ifi_obytes),
                rxPackets: UInt64(d.ifi_ipackets), txPackets: UInt64(d.ifi_opackets),
                rxErrors: UInt64(d.ifi_ierrors), txErrors: UInt64(d.ifi_oerrors),
                rxDropped: UInt64(d.ifi_iqdrops), txDropped: nil)
            found.append((InterfaceName.decode(cString: ifa.pointee.ifa_name), index, Int(d.ifi_type), counters, nil))
            #endif
        }
        #if os(Linux)
        if let catalog {
            let stale = catalog.byIndex.count != found.count
                || t - catalog.refreshedAt >= options.catalogRefreshSeconds
                || found.contains { catalog.byIndex[$0.index]?.name != $0.name }
            if stale { try catalog.refresh() }
        }
        #endif
        var interfaces: [InterfaceSample] = []
        interfaces.reserveCapacity(found.count)
        for entry in found {
            var classification: Classification
            var attributes: LinkAttributes?
            var ceiling: UInt64?
            #if os(Linux)
            if let link = catalog?.byIndex[entry.index], link.name == entry.name {
                classification = link.classification
                attributes = link.attributes
                ceiling = link.speedCeilingBps
            } else {
                let facts = options.sysfs?.read(entry.name).facts ?? KernelFacts(arphrdType: entry.type >= 0 ? entry.type : nil)
                classification = Classifier.classify(name: entry.name, facts: facts, platform: .linux)
            }
            #else
            classification = NameRules.classify(entry.name, platform: .darwin)
            attributes = nil
            ceiling = nil
            #endif
            interfaces.append(InterfaceSample(
                name: entry.name, index: entry.index, classification: classification, width: .bits32,
                speedBps: ceiling, counters: entry.counters, attributes: attributes, kernelStats: entry.stats))
        }
        return Sample(time: t, interfaces: interfaces)
    }
}
