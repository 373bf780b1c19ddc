#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore
import IfmeterSystem

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
    private var options: SamplerOptions
    private let socket: NetlinkSocket
    private let catalog: LinkCatalog
    private let statsRequest: NetlinkMessage
    private let linkRequest: NetlinkMessage
    private let listener: LinkEventListener?
    private var pending = LinkEvents()
    /// Notifications were lost: the catalog may be stale.
    private var catalogStale = false
    /// Indexes deleted since the last sample: a dump may still show them.
    private var recentlyDeleted = Set<Int>()
    private typealias Raw = (index: Int, counters: Counters, width: CounterWidth, stats: KernelLinkStats?)
    /// The last sample's interfaces in dump order. The kernel dumps links in
    /// the same order every time, so the next sample finds each link's
    /// name and kind by position, without hashing.
    private var order: [Int] = []
    private var templates: [InterfaceSample] = []
    /// Numbers the facts the templates hold; a sample built from them says
    /// so (`factsVersion`), and the engine skips comparing them.
    private var factsGeneration: UInt64 = 0

    public init(options: SamplerOptions = SamplerOptions()) throws(SystemError) {
        self.options = options
        socket = try NetlinkSocket(receiveBuffer: options.receiveBufferBytes)
        catalog = try LinkCatalog(
            socket: socket, sysfs: options.sysfs, netclass: options.kernelStats, overrides: options.kindOverrides, netnsName: options.netnsName)
        var stats = if_stats_msg()
        stats.family = UInt8(AF_UNSPEC)
        stats.filter_mask = cifm_stats_filter_link64()
        statsRequest = try NetlinkMessage(dump: Int32(RTM_GETSTATS), stats)
        var info = ifinfomsg()
        info.ifi_family = UInt8(AF_UNSPEC)
        linkRequest = try NetlinkMessage(dump: Int32(RTM_GETLINK), info)
        mode = options.forceLinkDump ? .link : .stats
        listener = options.linkEvents ? try LinkEventListener(receiveBuffer: options.eventBufferBytes) : nil
        listener?.netclass = options.kernelStats
    }

    /// New `--kind-of` rules: the catalog is refreshed at the next reading
    /// and every link classified again.
    public func setKindOverrides(_ overrides: KindOverrides) {
        options.kindOverrides = overrides
        catalog.setOverrides(overrides)
        catalogStale = true
    }

    /// The socket for one-off requests in the sampler's namespace.
    var requestSocket: NetlinkSocket { socket }

    /// How many times the link catalog was refilled (for tests and benchmarks).
    public var catalogRefreshes: Int { catalog.refreshes }

    /// Refills the link catalog now (an RTM_GETLINK dump without statistics,
    /// plus the sysfs facts of new links).
    public func refreshCatalog() throws(SystemError) { try catalog.refresh() }

    /// Notification overflows so far (for tests and benchmarks).
    public private(set) var overruns = 0
    /// CPU seconds this sampler's thread spent reading and applying link
    /// notifications (for the benchmark).
    public private(set) var eventCPUSeconds = 0.0

    /// The notification socket, for a waiter to watch between samples.
    public var eventDescriptors: [Int32] { listener.map { [$0.fd] } ?? [] }

    /// Reads the link notifications waiting now, so that each is timed
    /// when it is read rather than at the next sample.
    @discardableResult
    public func readEvents() -> Bool { !drainEvents().isEmpty }

    /// Reads the queued link notifications: deletions become events with
    /// their final counters (timed when read), renames become events, and
    /// the catalog follows creations and changes without a dump. Returns
    /// the indexes deleted.
    @discardableResult
    private func drainEvents() -> Set<Int> {
        guard let listener else { return [] }
        // Thread CPU time costs a system call: taken only when there is
        // something to read.
        var cpu0: Double?
        defer { if let cpu0 { eventCPUSeconds += threadCPUSeconds() - cpu0 } }
        var deleted = Set<Int>()
        let first = pending.deleted.count
        let overflowed = listener.drain(arrived: { cpu0 = threadCPUSeconds() }) { message in
            let t = monotonicSeconds()
            if message.deleted {
                let known = catalog.byIndex[message.index]
                catalog.remove(index: message.index)
                recentlyDeleted.insert(message.index)
                deleted.insert(message.index)
                guard let name = message.name ?? known?.name, let counters = message.counters else { return }
                let classification =
                    known?.classification
                    ?? options.kindOverrides.classification(for: SeriesKey(netns: options.netnsName, name: name))
                    ?? Classifier.classify(name: name, facts: KernelFacts(linkKind: message.linkKind, arphrdType: message.arphrd))
                let linkKind = message.linkKind ?? known?.linkKind
                pending.deleted.append(
                    DeletionEvent(
                        time: t,
                        interface: InterfaceSample(
                            name: name, index: message.index, classification: classification, width: .bits64, counters: counters),
                        lowerBound: DeletionFinals.lowerBound(linkKind: linkKind),
                        // At deletion the kernel names the peer no more (index 0):
                        // the catalog remembers it.
                        peer: linkKind == "veth"
                            ? (message.link.flatMap { $0 > 0 ? PeerLink(index: $0, netnsID: message.linkNetnsID) : nil } ?? known?.peer)
                            : nil))
            } else {
                let known = catalog.byIndex[message.index]
                if known == nil, let name = message.name {
                    pending.created.append(SeriesKey(name: name))
                } else if let known, let name = message.name, name != known.name {
                    pending.renamed.append(RenameEvent(time: t, index: message.index, from: known.name, to: name))
                }
                catalog.upsert(message)
            }
            // The links changed: the next sample rebuilds its templates.
            order = []
        }
        if overflowed > 0 {
            overruns += overflowed
            pending.overruns += overflowed
            catalogStale = true
            order = []
        }
        if pending.deleted.count > first { VethPeers.complete(&pending.deleted) }
        return deleted
    }

    /// Reads every link's counters, with the link notifications read
    /// before and during the dump (their deletions apply first).
    public func read() throws(SystemError) -> SourceReading {
        let sample = try sample()
        defer { pending = LinkEvents() }
        var events = pending
        events.clamp(to: sample.time)
        return SourceReading(events: events, sample: sample)
    }

    private func sample() throws(SystemError) -> Sample {
        let t = monotonicSeconds()
        drainEvents()
        // Readings by index, for when links came, went or moved: none are
        // made while they stay (not even for the periodic refresh), so no
        // buffer of every link's readings is kept between samples.
        var raw: [Raw] = []
        // The last sample, taken out: while nothing else holds it (the
        // pipeline has let go of it by now), this sample is built over it
        // and no second array of every link is made.
        var interfaces = templates
        templates = []
        var aligned = !order.isEmpty
        if aligned {
            // The common case: the links are the ones of the last sample, in
            // the same order. Each element takes its new counters in place
            // as the dump is parsed: no copy, no hashing.
            var failure: SystemError?
            interfaces.withUnsafeMutableBufferPointer { buffer in
                var assembler = Assembler(order: order, base: buffer, raw: raw)
                do throws(SystemError) {
                    try readCounters(into: &assembler)
                } catch {
                    failure = error
                    return
                }
                assembler.finish()
                aligned = assembler.aligned
                raw = assembler.raw
            }
            if let failure {
                order = []
                throw failure
            }
        } else {
            interfaces = []
            var collector = Collector(raw: raw)
            try readCounters(into: &collector)
            raw = collector.raw
        }
        // Deletions during or after the dump: their events apply before
        // this sample, and carry the final counters; a reading the dump
        // made of such a link before it went is left out (the engine would
        // take it for a new instance).
        let deletedDuringDump = drainEvents()
        if aligned, catalogStale || t - catalog.refreshedAt >= options.catalogRefreshSeconds {
            // The periodic refresh (renames, operstate, speed): the sample
            // keeps its counters and each link takes its facts anew, in
            // place. A link the catalog no longer has sends it the slow way.
            try catalog.refresh()
            catalogStale = false
            aligned = refreshFacts(of: &interfaces, except: deletedDuringDump)
            if !aligned { raw = interfaces.map { ($0.index ?? 0, $0.counters, $0.width, $0.kernelStats) } }
        }
        if !aligned {
            // Links came, went or moved, or the periodic refresh is due.
            interfaces = []
            interfaces.reserveCapacity(raw.count)
            let missing = raw.contains { catalog.byIndex[$0.index] == nil && !recentlyDeleted.contains($0.index) }
            if missing || catalogStale || t - catalog.refreshedAt >= options.catalogRefreshSeconds {
                try catalog.refresh()
                catalogStale = false
            }
            let links = catalog.byIndex
            factsGeneration += 1
            for entry in raw {
                // A link created between the two dumps is left for the next
                // sample, which counts it in full: nothing is lost.
                guard let link = links[entry.index] else { continue }
                var reading = InterfaceSample(
                    name: link.name, index: entry.index, width: entry.width, counters: entry.counters, kernelStats: entry.stats)
                reading.takeFacts(of: link, version: factsGeneration)
                interfaces.append(reading)
            }
            order = interfaces.count == raw.count ? raw.map(\.index) : []
        }
        recentlyDeleted.removeAll(keepingCapacity: true)
        if !deletedDuringDump.isEmpty {
            interfaces.removeAll { $0.index.map(deletedDuringDump.contains) ?? false }
            order = []
        }
        // The next sample's templates: this one, shared, not copied.
        if !order.isEmpty { templates = interfaces }
        return Sample(time: t, interfaces: interfaces)
    }

    /// Gives each link of an aligned sample its facts from the just
    /// refreshed catalog, in place, under a new facts version (so the
    /// engine compares them). False when a link is missing from the catalog
    /// and was not deleted during the dump (whose readings are left out).
    private func refreshFacts(of interfaces: inout [InterfaceSample], except deleted: Set<Int>) -> Bool {
        factsGeneration += 1
        for i in interfaces.indices {
            guard let index = interfaces[i].index else { return false }
            guard let link = catalog.byIndex[index] else {
                if deleted.contains(index) { continue }
                return false
            }
            interfaces[i].takeFacts(of: link, version: factsGeneration)
        }
        return true
    }

    /// Dumps every link's counters into `sink`, in dump order.
    private func readCounters<Sink: CounterSink>(into sink: inout Sink) throws(SystemError) {
        let keepStats = options.kernelStats
        if mode == .stats {
            do {
                try socket.dump(statsRequest, name: "RTM_GETSTATS", restart: { sink.restart() }) { message in
                    guard message.type == Int32(RTM_NEWSTATS), let header = message.header(as: if_stats_msg.self),
                        let attr = message.attributes(after: if_stats_msg.self)?.first(Int32(IFLA_STATS_LINK_64)),
                        let counters = linkStats64(attr)
                    else { return }
                    sink.emit(Int(header.ifindex), counters, .bits64, keepStats ? kernelStats64(attr) : nil)
                }
                return
            } catch let error where error.errno == EOPNOTSUPP || error.errno == EINVAL {
                // No RTM_GETSTATS on this kernel: use the link dump from now on.
                mode = .link
                sink.restart()
            }
        }
        try socket.dump(linkRequest, name: "RTM_GETLINK", restart: { sink.restart() }) { message in
            guard message.type == Int32(RTM_NEWLINK), let header = message.header(as: ifinfomsg.self),
                let attributes = message.attributes(after: ifinfomsg.self)
            else { return }
            let index = Int(header.ifi_index)
            if let attr = attributes.first(Int32(IFLA_STATS64)), let counters = linkStats64(attr) {
                sink.emit(index, counters, .bits64, keepStats ? kernelStats64(attr) : nil)
            } else if let attr = attributes.first(Int32(IFLA_STATS)), let counters = linkStats32(attr) {
                sink.emit(index, counters, .bits32, keepStats ? kernelStats32(attr) : nil)
            }
        }
    }
}

/// Receives each link's counters as a dump is parsed.
private protocol CounterSink {
    mutating func emit(_ index: Int, _ counters: Counters, _ width: CounterWidth, _ stats: KernelLinkStats?)
    /// The dump starts over (it was interrupted): forget what came.
    mutating func restart()
}

/// Collects every link's counters, for the slow path.
private struct Collector: CounterSink {
    var raw: [(index: Int, counters: Counters, width: CounterWidth, stats: KernelLinkStats?)]

    mutating func emit(_ index: Int, _ counters: Counters, _ width: CounterWidth, _ stats: KernelLinkStats?) {
        raw.append((index, counters, width, stats))
    }

    mutating func restart() { raw.removeAll(keepingCapacity: true) }
}

/// Gives the last sample's interfaces their new counters in place while the
/// links come in its order; from the first surprise on, collects them into
/// `raw` instead.
private struct Assembler: CounterSink {
    let order: [Int]
    let base: UnsafeMutableBufferPointer<InterfaceSample>
    var raw: [(index: Int, counters: Counters, width: CounterWidth, stats: KernelLinkStats?)]
    var built = 0
    var aligned = true

    init(
        order: [Int], base: UnsafeMutableBufferPointer<InterfaceSample>,
        raw: [(index: Int, counters: Counters, width: CounterWidth, stats: KernelLinkStats?)]
    ) {
        self.order = order
        self.base = base
        self.raw = raw
    }

    mutating func emit(_ index: Int, _ counters: Counters, _ width: CounterWidth, _ stats: KernelLinkStats?) {
        if aligned {
            // The same link, with the same counter width as last time
            // (whose facts the sample's `factsVersion` vouches for).
            if built < order.count, built < base.count, order[built] == index, base[built].width == width {
                base[built].counters = counters
                base[built].kernelStats = stats
                built += 1
                return
            }
            spill()
        }
        raw.append((index, counters, width, stats))
    }

    mutating func restart() {
        built = 0
        aligned = true
        raw.removeAll(keepingCapacity: true)
    }

    /// Ends the dump: fewer links than last time is a surprise too.
    mutating func finish() {
        if aligned, built != order.count { spill() }
    }

    /// Moves what was built into `raw`, for the slow path.
    private mutating func spill() {
        aligned = false
        for k in 0..<built { raw.append((order[k], base[k].counters, base[k].width, base[k].kernelStats)) }
    }
}
extension InterfaceSample {
    /// What a reading takes from the link catalog: one list, for a sample
    /// built from readings and for one refreshed in place alike.
    fileprivate mutating func takeFacts(of link: LinkEntry, version: UInt64) {
        name = link.name
        classification = link.classification
        speedBps = link.speedCeilingBps
        attributes = link.attributes
        factsVersion = version
    }
}
#endif
