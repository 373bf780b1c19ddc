import IfmeterCore
import IfmeterModel

extension ExpositionInput {
    /// The exposition of `interfaces` with the pipeline's health (what a
    /// scrape and export's --textfile write alike).
    package init(
        _ interfaces: [ExpositionRow], health: PipelineHealth?, families: ExpositionFamilies, version: String, interval: Double
    ) {
        let health = health ?? PipelineHealth(source: "", startTime: 0)
        self.init(
            interfaces: interfaces,
            health: ExporterHealth(
                version: version, source: health.source, samples: health.samples, sampleErrors: health.sampleErrors,
                overruns: health.overruns, lastSampleSeconds: health.lastSampleSeconds, lastSampleTime: health.lastSampleTime,
                startTime: health.startTime, intervalSeconds: interval),
            families: families)
        self.health.state = health.state
    }
}
