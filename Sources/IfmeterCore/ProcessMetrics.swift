/// What a process uses, as every Prometheus client library exposes it
/// (`process_*`): read by the system layer, rendered by the exposition.
public struct ProcessMetrics: Sendable, Hashable {
    /// User and system CPU time, seconds.
    public var cpuSeconds: Double
    public var residentBytes: UInt64
    public var virtualBytes: UInt64
    public var openFDs: UInt64
    /// The soft limit on open files.
    public var maxFDs: UInt64
    /// Unix time the process started.
    public var startTime: Double

    public init(cpuSeconds: Double, residentBytes: UInt64, virtualBytes: UInt64, openFDs: UInt64, maxFDs: UInt64, startTime: Double) {
        self.cpuSeconds = cpuSeconds
        self.residentBytes = residentBytes
        self.virtualBytes = virtualBytes
        self.openFDs = openFDs
        self.maxFDs = maxFDs
        self.startTime = startTime
    }
}
