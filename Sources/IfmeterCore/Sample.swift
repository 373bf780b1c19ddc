/// Link attributes a live sampler knows besides the counters. Absent in
/// traces. Immutable and shared: every sample of a link refers to the one
/// its source built, so thousands of samples do not copy them.
public final class LinkAttributes: Sendable, Hashable {
    /// RFC 2863 operational state as the kernel names it: `up`, `down`,
    /// `dormant`, `lowerlayerdown`, `notpresent`, `testing`, `unknown`.
    public let operstate: String?
    /// `IFF_UP` is set.
    public let adminUp: Bool?
    public let mtu: UInt32?
    public let arphrdType: Int?
    /// The speed the driver reports, in bits per second, whether or not it is a
    /// real ceiling (veth reports 10 Gbit/s, tun 10 Mbit/s).
    public let reportedSpeedBps: UInt64?
    /// Backed by real hardware (a `device` link in sysfs).
    public let isHardware: Bool?
    /// Times the carrier came or went since the link was made
    /// (IFLA_CARRIER_CHANGES): what tells a flapping link.
    public let carrierChanges: UInt32?
    /// node_exporter's netclass facts; only when asked for (`--compat node`).
    public var netclass: NetclassFacts? { netclassBox?.facts }
    /// Boxed: inline, the facts (about 100 bytes) took room in every
    /// link's attributes, asked for or not.
    private let netclassBox: NetclassBox?

    private final class NetclassBox: Sendable {
        let facts: NetclassFacts
        init(_ facts: NetclassFacts) { self.facts = facts }
    }

    public static func == (a: LinkAttributes, b: LinkAttributes) -> Bool {
        a === b
            || (a.operstate == b.operstate && a.adminUp == b.adminUp && a.mtu == b.mtu && a.arphrdType == b.arphrdType
                && a.reportedSpeedBps == b.reportedSpeedBps && a.isHardware == b.isHardware && a.carrierChanges == b.carrierChanges
                && a.netclass == b.netclass)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(operstate)
        hasher.combine(adminUp)
        hasher.combine(mtu)
        hasher.combine(arphrdType)
        hasher.combine(reportedSpeedBps)
        hasher.combine(isHardware)
        hasher.combine(carrierChanges)
        hasher.combine(netclass)
    }

    public init(
        operstate: String? = nil, adminUp: Bool? = nil, mtu: UInt32? = nil, arphrdType: Int? = nil,
        reportedSpeedBps: UInt64? = nil, isHardware: Bool? = nil, carrierChanges: UInt32? = nil, netclass: NetclassFacts? = nil
    ) {
        self.operstate = operstate
        self.adminUp = adminUp
        self.mtu = mtu
        self.arphrdType = arphrdType
        self.reportedSpeedBps = reportedSpeedBps
        self.isHardware = isHardware
        self.carrierChanges = carrierChanges
        netclassBox = netclass.map(NetclassBox.init)
    }
}

/// The kernel's full link statistics: the first 24 fields of `struct
/// rtnl_link_stats64`, in its order. Samplers keep them only when asked
/// (node_exporter compatibility needs them); ifmeter's own figures use
/// `Counters`.
public struct KernelLinkStats: Sendable, Hashable {
    public enum Field: Int, CaseIterable, Sendable {
        case rxPackets, txPackets, rxBytes, txBytes, rxErrors, txErrors, rxDropped, txDropped
        case multicast, collisions
        case rxLengthErrors, rxOverErrors, rxCrcErrors, rxFrameErrors, rxFifoErrors, rxMissedErrors
        case txAbortedErrors, txCarrierErrors, txFifoErrors, txHeartbeatErrors, txWindowErrors
        case rxCompressed, txCompressed, rxNohandler
    }

    public var values: [UInt64]

    /// `values` in `Field` order; missing trailing fields read as zero.
    public init(values: [UInt64]) {
        self.values = values + [UInt64](repeating: 0, count: max(0, Field.allCases.count - values.count))
    }

    public subscript(field: Field) -> UInt64 { values[field.rawValue] }
}

/// One interface's counters at one instant.
public struct InterfaceSample: Sendable, Hashable {
    public var name: String
    /// The network namespace it lives in; empty for the sampler's own.
    public var netns: String
    /// The kernel's interface index; nil when unknown.
    public var index: Int?
    /// The kind and the evidence for it; nil when the trace gave none (the
    /// engine then applies the name rules).
    public var classification: Classification?
    /// The counter width of the source: 32-bit counters wrap at 4 GiB.
    public var width: CounterWidth
    /// The link speed in bits per second, when it is a real ceiling on the
    /// counters' growth (hardware links only).
    public var speedBps: UInt64?
    public var counters: Counters
    /// Live samplers only.
    public var attributes: LinkAttributes?
    /// Live samplers only, and only when asked for.
    public var kernelStats: KernelLinkStats?
    /// A source may number its facts (kind, index, width, speed,
    /// attributes): the same non-zero number means they are the ones it
    /// gave last time, so the engine need not compare them. Zero: unknown.
    public var factsVersion: UInt64 = 0

    public init(
        name: String, netns: String = "", index: Int? = nil, classification: Classification? = nil,
        width: CounterWidth = .bits64, speedBps: UInt64? = nil, counters: Counters,
        attributes: LinkAttributes? = nil, kernelStats: KernelLinkStats? = nil
    ) {
        self.name = name
        self.netns = netns
        self.index = index
        self.classification = classification
        self.width = width
        self.speedBps = speedBps
        self.counters = counters
        self.attributes = attributes
        self.kernelStats = kernelStats
    }

    public var kind: InterfaceKind? { classification?.kind }

    /// The series this reading belongs to.
    public var key: SeriesKey { SeriesKey(netns: netns, name: name) }
}

/// Every interface seen at one instant. `time` is seconds on a monotonic
/// clock with any origin.
public struct Sample: Sendable, Hashable {
    public var time: Double
    public var interfaces: [InterfaceSample]

    public init(time: Double, interfaces: [InterfaceSample]) {
        self.time = time
        self.interfaces = interfaces
    }
}

/// An interface was deleted; `interface.counters` are its final counters
/// (netlink's RTM_DELLINK carries IFLA_STATS64).
public struct DeletionEvent: Sendable, Hashable {
    public var time: Double
    public var interface: InterfaceSample
    /// Counters whose final value the kernel is known to under-report at
    /// deletion (a veth's receive counters come from its detached peer):
    /// trace v1.1 `lower_bound`.
    public var lowerBound: CounterKeySet
    /// The link's peer as the kernel named it (a veth's other end), so a
    /// source that sees both deletions can complete one with the other.
    /// Not written to traces.
    public var peer: PeerLink?

    public init(time: Double, interface: InterfaceSample, lowerBound: CounterKeySet = [], peer: PeerLink? = nil) {
        self.time = time
        self.interface = interface
        self.lowerBound = lowerBound
        self.peer = peer
    }
}

/// The other end of a link (IFLA_LINK), in the same namespace or in the one
/// the kernel numbers `netnsID` as seen from the link's own (IFLA_LINK_NETNSID).
public struct PeerLink: Sendable, Hashable {
    public var index: Int
    public var netnsID: Int32?

    public init(index: Int, netnsID: Int32? = nil) {
        self.index = index
        self.netnsID = netnsID
    }
}

/// An interface took a new name; its counters go on (same index), so its
/// series goes on under the new name.
public struct RenameEvent: Sendable, Hashable {
    public var time: Double
    public var netns: String
    public var index: Int?
    public var from: String
    public var to: String

    public init(time: Double, netns: String = "", index: Int?, from: String, to: String) {
        self.time = time
        self.netns = netns
        self.index = index
        self.from = from
        self.to = to
    }
}

/// What became of a namespace instance, for a source that follows
/// namespaces (ifmeter's own events; contract readers skip them).
public struct NamespaceEvent: Sendable, Hashable {
    public enum Kind: String, Sendable {
        /// A new instance of the namespace was entered: the interfaces in it
        /// are new instances too, so a deletion of one whose series ended
        /// before is a new instance whatever its index (indexes start over
        /// in every namespace), never a repeat.
        case entered
        /// An instance existed but could not be read (created and removed
        /// before a sampler could enter it, or its last reading failed):
        /// whatever its interfaces carried is unknown, so the totals of
        /// that namespace's series are lower bounds from now on, those seen
        /// later included.
        case lost
    }

    public var time: Double
    public var netns: String
    public var kind: Kind

    public init(time: Double, netns: String, kind: Kind) {
        self.time = time
        self.netns = netns
        self.kind = kind
    }
}

/// Link notifications read with one sample: deletions with their final
/// counters (to apply before the sample), creations, and overruns.
public struct LinkEvents: Sendable, Hashable {
    /// Deleted interfaces with their final counters, in the order read.
    public var deleted: [DeletionEvent] = []
    /// Interfaces created.
    public var created: [SeriesKey] = []
    /// Interfaces renamed (applied before the deletions).
    public var renamed: [RenameEvent] = []
    /// Times the notification queue overflowed: deletions may have been
    /// missed, so the intervals of interfaces that went away are lower bounds.
    public var overruns = 0
    /// Namespace instances entered, and those that came and went unread.
    public var namespaces: [NamespaceEvent] = []

    public init(
        deleted: [DeletionEvent] = [], created: [SeriesKey] = [], renamed: [RenameEvent] = [], overruns: Int = 0,
        namespaces: [NamespaceEvent] = []
    ) {
        self.deleted = deleted
        self.created = created
        self.renamed = renamed
        self.overruns = overruns
        self.namespaces = namespaces
    }

    public var isEmpty: Bool { deleted.isEmpty && created.isEmpty && renamed.isEmpty && overruns == 0 && namespaces.isEmpty }

    /// Events apply before the sample they come with, so none is timed
    /// after it: a notification read while the sample was being taken (its
    /// time is set when the reading starts) is timed at the sample. Traces
    /// keep their lines in time order.
    public mutating func clamp(to time: Double) {
        for n in deleted.indices where deleted[n].time > time { deleted[n].time = time }
        for n in renamed.indices where renamed[n].time > time { renamed[n].time = time }
        for n in namespaces.indices where namespaces[n].time > time { namespaces[n].time = time }
    }

    /// Puts each list in time order, keeping the order read among events of
    /// one time: events gathered from several sources (namespaces) arrive
    /// grouped by source.
    public mutating func sortByTime() {
        func sorted<T>(_ list: [T], _ time: (T) -> Double) -> [T] {
            list.enumerated().sorted { (time($0.element), $0.offset) < (time($1.element), $1.offset) }.map(\.element)
        }
        if !deleted.isEmpty { deleted = sorted(deleted, \.time) }
        if !renamed.isEmpty { renamed = sorted(renamed, \.time) }
    }

    /// The renames and deletions as trace records, in time order (a rename
    /// first at a tie): the order the engine applies them in, and a trace
    /// writes them in, so that a replay of the trace applies what the
    /// live engine applied.
    public var records: [TraceRecord] {
        if renamed.isEmpty, namespaces.isEmpty { return deleted.map(TraceRecord.deleted) }
        // At a tie: renames, then namespaces (an instance entered comes
        // before the deletions in it), then deletions.
        var all = renamed.map(TraceRecord.renamed) + namespaces.map(TraceRecord.namespace) + deleted.map(TraceRecord.deleted)
        all = all.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        return all
    }
}

/// What a counter source read at one instant: the link events since its
/// last reading, which the engine applies first, and the sample.
public struct SourceReading: Sendable, Hashable {
    public var events: LinkEvents
    public var sample: Sample

    public init(events: LinkEvents = LinkEvents(), sample: Sample) {
        self.events = events
        self.sample = sample
    }
}

/// Something that reads every interface's counters at one instant: the
/// netlink and getifaddrs samplers, or a scripted source in tests.
///
/// A source owns its resources (sockets, buffers) and is used from one
/// thread at a time.
public protocol CounterSource: AnyObject {
    /// `netlink` or `getifaddrs`: written into trace headers and reports.
    var sourceName: String { get }
    /// Reads every interface now, with the link events read since the
    /// last reading.
    func read() throws(SystemError) -> SourceReading
    /// Descriptors that become readable when link notifications wait: a
    /// waiter may watch them and call `readEvents` between samples, so that
    /// each event is timed when it comes. Empty for sources without events.
    var eventDescriptors: [Int32] { get }
    /// Reads the notifications waiting now (kept for the next reading).
    /// Returns true when a deletion came with them (an interface, or a
    /// namespace, went): its final counters wait for the next reading, which
    /// a pipeline with a state file takes at once, so that a kill right
    /// after cannot lose them.
    @discardableResult
    func readEvents() -> Bool
    /// Takes new `--kind-of` rules (serve's SIGHUP): every link is
    /// classified again at the next reading. A source without kinds of its
    /// own (a scripted one) ignores them.
    func setKindOverrides(_ overrides: KindOverrides)
}

extension CounterSource {
    public func setKindOverrides(_ overrides: KindOverrides) {}
    public var eventDescriptors: [Int32] { [] }
    @discardableResult
    public func readEvents() -> Bool { false }
}

/// One line of a trace after its header.
public enum TraceRecord: Sendable, Hashable {
    case sample(Sample)
    case deleted(DeletionEvent)
    /// ifmeter's own event (readers of v1 skip it): a rename.
    case renamed(RenameEvent)
    /// ifmeter's own events: a namespace instance entered, or one that came
    /// and went unread.
    case namespace(NamespaceEvent)

    public var time: Double {
        switch self {
        case .sample(let sample): sample.time
        case .deleted(let event): event.time
        case .renamed(let event): event.time
        case .namespace(let event): event.time
        }
    }
}

/// A trace's optional first line.
public struct TraceHeader: Sendable, Hashable {
    public var platform: Platform
    public var source: String?
    /// More keys a writer may add (host, start time); kept for display only.
    public var host: String?

    public init(platform: Platform = .linux, source: String? = nil, host: String? = nil) {
        self.platform = platform
        self.source = source
        self.host = host
    }
}
