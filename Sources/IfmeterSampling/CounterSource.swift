import IfmeterCore

/// Something that reads every interface's counters at one instant.
///
/// A source owns C resources (sockets, buffers) and is used from one thread
/// at a time; create it on the thread that samples.
public protocol CounterSource: AnyObject {
    /// `netlink` or `getifaddrs`: written into trace headers and reports.
    var sourceName: String { get }
    /// Reads all interfaces now.
    func sample() throws(SamplingError) -> Sample
}

/// Which counter source to use.
public enum SourceKind: String, CaseIterable, Sendable {
    case netlink, getifaddrs

    /// The default on this platform: netlink on Linux, getifaddrs elsewhere.
    public static var platformDefault: SourceKind {
        #if os(Linux)
        return .netlink
        #else
        return .getifaddrs
        #endif
    }
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
    /// Keep the kernel's full link statistics in each sample (for
    /// node_exporter compatibility); off, samples carry ifmeter's counters only.
    public var kernelStats: Bool

    public init(
        sysfs: SysfsReader? = SysfsReader(), catalogRefreshSeconds: Double = 10, forceLinkDump: Bool = false,
        receiveBufferBytes: Int32 = 1 << 20, kernelStats: Bool = false
    ) {
        self.kernelStats = kernelStats
        self.sysfs = sysfs
        self.catalogRefreshSeconds = catalogRefreshSeconds
        self.forceLinkDump = forceLinkDump
        self.receiveBufferBytes = receiveBufferBytes
    }
}

/// Opens a counter source of the given kind.
public func makeCounterSource(_ kind: SourceKind, options: SamplerOptions = SamplerOptions()) throws(SamplingError)
    -> any CounterSource
{
    switch kind {
    case .netlink:
        #if os(Linux)
        return try NetlinkSampler(options: options)
        #else
        throw SamplingError(call: "netlink", message: "the netlink source exists on Linux only; use --source getifaddrs")
        #endif
    case .getifaddrs:
        return try GetifaddrsSampler(options: options)
    }
}
