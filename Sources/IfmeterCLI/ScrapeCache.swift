import IfmeterCore
import IfmeterHTTP
import IfmeterService
import Synchronization

/// Renders what a scrape shows from the monitor's latest state, once per
/// sample and format: every scrape between two samples gets the same bytes,
/// so scrapes cost a copy, not a render (and never a netlink dump).
public final class ScrapeCache: Sendable {
    public struct Variant: Hashable, Sendable {
        public var openMetrics: Bool
        public var gzip: Bool
        public init(openMetrics: Bool, gzip: Bool) {
            self.openMetrics = openMetrics
            self.gzip = gzip
        }
    }

    public struct Rendered: Sendable {
        public var generation: Int
        public var contentType: String
        /// Shared by every response that sends it.
        public var body: HTTPBody
    }

    private let families: ExpositionFamilies
    private let version: String
    private let interval: Double
    private let cache = Mutex<[Variant: Rendered]>([:])
    /// One render at a time: concurrent scrapes of a new sample wait for
    /// the first one's render instead of all rendering it.
    private let rendering = Mutex<Void>(())

    public init(families: ExpositionFamilies, version: String, interval: Double) {
        self.families = families
        self.version = version
        self.interval = interval
    }

    /// The exposition of `state` in `variant`, rendered at most once per
    /// generation. Nil only when gzip fails (then send it uncompressed).
    public func rendered(_ state: @autoclosure () -> MonitorState, generation: Int, variant: Variant) -> Rendered? {
        if let hit = cache.withLock({ $0[variant] }), hit.generation == generation { return hit }
        return rendering.withLock { _ -> Rendered? in
            if let hit = cache.withLock({ $0[variant] }), hit.generation == generation { return hit }
            let snapshot = state()
            let input = Self.input(snapshot, families: families, version: version, interval: interval)
            let renderer: any ExpositionRenderer = variant.openMetrics ? OpenMetricsRenderer() : PrometheusTextRenderer()
            let bytes = renderer.render(input)
            let body: HTTPBody
            if variant.gzip {
                guard let compressed = gzip(bytes) else { return nil }
                body = compressed
            } else {
                body = HTTPBody(bytes)
            }
            let result = Rendered(generation: snapshot.generation, contentType: renderer.contentType, body: body)
            cache.withLock { entries in
                // Keep only the newest generation's renders.
                entries = entries.filter { $0.value.generation == snapshot.generation }
                entries[variant] = result
            }
            return result
        }
    }

    /// The exposition input for a monitor state.
    public static func input(_ state: MonitorState, families: ExpositionFamilies, version: String, interval: Double) -> ExpositionInput {
        ExpositionInput(
            interfaces: state.interfaces,
            health: ExporterHealth(
                version: version, source: state.sourceName, samples: state.samples, sampleErrors: state.sampleErrors,
                overruns: state.overruns, lastSampleSeconds: state.lastSampleSeconds, lastSampleTime: state.lastSampleTime,
                startTime: state.startTime, intervalSeconds: interval),
            families: families)
    }
}
