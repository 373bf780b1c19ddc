import IfmeterCore
import IfmeterSystem

/// Which counter source to use.
public enum SourceKind: String, CaseIterable, Sendable {
    case netlink, getifaddrs

    /// How `--source`'s help names it.
    public var summary: String {
        switch self {
        case .netlink: "netlink (64-bit)"
        case .getifaddrs: "getifaddrs (32-bit, portable)"
        }
    }

    /// `--source`'s help: every source, from this list.
    public static var help: String {
        let names = allCases.map(\.summary)
        return "Counter source: " + names.dropLast().joined(separator: ", ") + (names.count > 1 ? " or " : "") + names.last! + "."
    }

    /// The default on this platform: netlink on Linux, getifaddrs elsewhere.
    public static var platformDefault: SourceKind {
        #if os(Linux) && !IFMETER_PORTABLE_CHECK
        return .netlink
        #else
        return .getifaddrs
        #endif
    }
}

/// Which network namespaces a source samples.
public enum NamespaceSelection: Sendable, Hashable {
    /// These named ones (`ip netns`), followed when they go and come back.
    case named([String])
    /// The own namespace and every named one, followed as they are created
    /// and removed.
    case all
}

/// Settings shared by the samplers.
public struct SamplerOptions: Sendable {
    /// Where to read interface facts; nil to read none (a namespace whose
    /// sysfs is not mounted here).
    public var sysfs: SysfsReader?
    /// How often the link catalog is refreshed even when no interface came
    /// or went, for renames, operstate and speed.
    public var catalogRefreshSeconds: Double
    /// Use the RTM_GETLINK dump even where RTM_GETSTATS works (for tests and
    /// old kernels).
    public var forceLinkDump: Bool
    /// The netlink socket's receive buffer.
    public var receiveBufferBytes: Int32
    /// Keep the kernel's full link statistics in each sample, and each
    /// link's netclass facts in its attributes (for node_exporter
    /// compatibility); off, samples carry ifmeter's counters only.
    public var kernelStats: Bool
    /// Listen to link notifications: deletions with their final counters
    /// (nothing lost to a deleted or recreated interface) and creations.
    public var linkEvents: Bool
    /// The notification socket's receive buffer.
    public var eventBufferBytes: Int32
    /// Sample inside these network namespaces (`/run/netns/NAME`), every
    /// interface marked with its namespace; nil samples this one alone.
    public var namespaces: NamespaceSelection?
    /// The user's word on kinds (`--kind-of`): applied where a link is
    /// classified, before any filter sees it.
    public var kindOverrides = KindOverrides()
    /// The namespace this sampler reads ("" for the own one), which
    /// `kindOverrides`' `NS/NAME` patterns match.
    public var netnsName = ""

    public init(
        sysfs: SysfsReader? = SysfsReader(), catalogRefreshSeconds: Double = 10, forceLinkDump: Bool = false,
        receiveBufferBytes: Int32 = 1 << 20, kernelStats: Bool = false, linkEvents: Bool = true,
        eventBufferBytes: Int32 = 4 << 20, namespaces: NamespaceSelection? = nil
    ) {
        self.kernelStats = kernelStats
        self.linkEvents = linkEvents
        self.eventBufferBytes = eventBufferBytes
        self.namespaces = namespaces
        self.sysfs = sysfs
        self.catalogRefreshSeconds = catalogRefreshSeconds
        self.forceLinkDump = forceLinkDump
        self.receiveBufferBytes = receiveBufferBytes
    }
}

/// Opens a counter source of the given kind. With `options.namespaces`, a
/// `NamespaceSet`: one sampler per namespace, its sockets opened inside it
/// (sysfs, which shows this namespace's links, is not read for the others).
public func makeCounterSource(_ kind: SourceKind, options: SamplerOptions = SamplerOptions()) throws(SystemError)
    -> any CounterSource
{
    #if os(Linux) && !IFMETER_PORTABLE_CHECK
    if let namespaces = options.namespaces {
        return try NamespaceSet(namespaces, kind: kind, options: options)
    }
    #else
    if options.namespaces != nil {
        throw SystemError(call: "setns", message: "network namespaces exist on Linux only")
    }
    #endif
    switch kind {
    case .netlink:
        #if os(Linux) && !IFMETER_PORTABLE_CHECK
        return try NetlinkSampler(options: options)
        #else
        throw SystemError(call: "netlink", message: "the netlink source exists on Linux only; use --source getifaddrs")
        #endif
    case .getifaddrs:
        return try GetifaddrsSampler(options: options)
    }
}
