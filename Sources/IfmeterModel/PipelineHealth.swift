import IfmeterCore

/// The pipeline's own health: what `ifmeter_samples_total` and its
/// neighbours report.
package struct PipelineHealth: Sendable, Hashable {
    package var source: String
    /// Unix time the pipeline started.
    package var startTime: Double
    package var samples: UInt64 = 0
    package var sampleErrors: UInt64 = 0
    /// Link-notification overruns (each resynchronized with a full dump).
    package var overruns: UInt64 = 0
    /// How long the last sample took (read, filter, engine, save).
    package var lastSampleSeconds: Double?
    /// Unix time of the last successful sample.
    package var lastSampleTime: Double?
    /// The last sample's failure; nil once sampling works again.
    package var lastError: SystemError?
    /// With a state file: how its saves go.
    package var state: StateHealth?

    package init(source: String, startTime: Double) {
        self.source = source
        self.startTime = startTime
    }
}
