import IfmeterCore
import IfmeterSystem

/// Reads counters with getifaddrs: portable to Apple platforms, but its
/// counters are 32-bit and wrap at 4 GiB (on Linux too: AF_PACKET entries
/// carry a `struct rtnl_link_stats`; on Darwin, AF_LINK entries an
/// `if_data`). Every sample says width 32, so the engine knows what wraps.
public final class GetifaddrsSampler: CounterSource {
    public let sourceName = "getifaddrs"
    #if os(Linux) && !IFMETER_PORTABLE_CHECK
    /// Kinds and attributes from netlink and sysfs, as the netlink sampler
    /// has them; only the counters differ.
    private let catalog: LinkCatalog?
    private let catalogSocket: NetlinkSocket?
    #endif
    private var options: SamplerOptions
    /// New `--kind-of` rules came: the next reading refreshes the catalog.
    private var reclassify = false
    /// getifaddrs opens a socket per call: with a namespace, each call runs
    /// on a helper thread inside it.
    var namespace: String?

    public init(options: SamplerOptions = SamplerOptions()) throws(SystemError) {
        self.options = options
        #if os(Linux) && !IFMETER_PORTABLE_CHECK
        let socket = try NetlinkSocket(receiveBuffer: options.receiveBufferBytes)
        catalogSocket = socket
        catalog = try LinkCatalog(socket: socket, sysfs: options.sysfs, overrides: options.kindOverrides, netnsName: options.netnsName)
        #endif
    }

    /// Reads every link's counters (getifaddrs gives no link events).
    /// New `--kind-of` rules, from the next reading.
    public func setKindOverrides(_ overrides: KindOverrides) {
        options.kindOverrides = overrides
        #if os(Linux) && !IFMETER_PORTABLE_CHECK
        catalog?.setOverrides(overrides)
        reclassify = true
        #endif
    }

    public func read() throws(SystemError) -> SourceReading {
        SourceReading(sample: try sample())
    }

    private func sample() throws(SystemError) -> Sample {
        #if os(Linux) && !IFMETER_PORTABLE_CHECK
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

    /// One link's reading as getifaddrs gives it, before the catalog names
    /// its kind: read per OS (GetifaddrsLinux.swift, GetifaddrsDarwin.swift).
    typealias Entry = (name: String, index: Int, type: Int, counters: Counters, stats: KernelLinkStats?)

    private func sampleHere() throws(SystemError) -> Sample {
        let t = monotonicSeconds()
        let found = try Self.entries(kernelStats: options.kernelStats)
        #if os(Linux) && !IFMETER_PORTABLE_CHECK
        if let catalog {
            let stale =
                catalog.byIndex.count != found.count
                || t - catalog.refreshedAt >= options.catalogRefreshSeconds
                || found.contains { catalog.byIndex[$0.index]?.name != $0.name } || reclassify
            if stale { try catalog.refresh() }
            reclassify = false
        }
        #endif
        var interfaces: [InterfaceSample] = []
        interfaces.reserveCapacity(found.count)
        for entry in found {
            var classification: Classification
            var attributes: LinkAttributes?
            var ceiling: UInt64?
            #if os(Linux) && !IFMETER_PORTABLE_CHECK
            if let link = catalog?.byIndex[entry.index], link.name == entry.name {
                classification = link.classification
                attributes = link.attributes
                ceiling = link.speedCeilingBps
            } else {
                let facts = options.sysfs?.read(entry.name).facts ?? KernelFacts(arphrdType: entry.type >= 0 ? entry.type : nil)
                classification =
                    options.kindOverrides.classification(for: SeriesKey(netns: options.netnsName, name: entry.name))
                    ?? Classifier.classify(name: entry.name, facts: facts, platform: .linux)
            }
            #else
            // Apple's names are the evidence there (shared with the
            // NET_RT_IFLIST2 sampler, InterfaceList2.swift).
            classification = options.appleClassification(entry.name)
            attributes = nil
            ceiling = nil
            #endif
            interfaces.append(
                InterfaceSample(
                    name: entry.name, index: entry.index, classification: classification, width: .bits32,
                    speedBps: ceiling, counters: entry.counters, attributes: attributes, kernelStats: entry.stats))
        }
        return Sample(time: t, interfaces: interfaces)
    }
}
