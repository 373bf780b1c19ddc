import IfmeterCore

/// The pipeline's own health: what `ifmeter_samples_total` and its
/// neighbours report.
public struct PipelineHealth: Sendable, Hashable {
    public var source: String
    /// Unix time the pipeline started.
    public var startTime: Double
    public var samples: UInt64 = 0
    public var sampleErrors: UInt64 = 0
    /// Link-notification overruns (each resynchronized with a full dump).
    public var overruns: UInt64 = 0
    /// How long the last sample took (read, filter, engine, save).
    public var lastSampleSeconds: Double?
    /// Unix time of the last successful sample.
    public var lastSampleTime: Double?
    /// The last sample's failure; nil once sampling works again.
    public var lastError: SystemError?
    /// With a state file: how its saves go.
    public var state: StateHealth?

    public init(source: String, startTime: Double) {
        self.source = source
        self.startTime = startTime
    }
}
