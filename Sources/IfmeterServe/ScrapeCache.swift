import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import Synchronization
import IfmeterSystem

/// What a scrape shows, kept from the pipeline's updates, rendered once
/// per sample and format when first asked for: every scrape between two
/// samples gets the same bytes, so scrapes cost a copy, not a render (and
/// never a netlink dump).
package final class ScrapeCache: SeriesSource {
    /// One format's exposition of one generation, kept gzipped: a client
    /// that takes gzip gets these bytes; another gets them inflated as it
    /// reads. The text itself is never held whole (5 MB at 4000
    /// interfaces; gzipped, a twentieth).
    package struct Rendered: Sendable {
        package var generation: Int
        package var contentType: String
        package var gzipped: HTTPBody
        /// The text's length.
        package var size: UInt64
    }

    private let families: ExpositionFamilies
    private let version: String
    private let interval: Double
    /// What a scrape shows: the read model's snapshot. The cache keeps the
    /// renders of it, no rows or facts of its own.
    package let model: ReadModel
    /// By format: OpenMetrics (true) or text (false).
    private let cache = Mutex<[Bool: Rendered]>([:])
    /// One render at a time: concurrent scrapes of a new sample wait for
    /// the first one's render instead of all rendering it.
    private let rendering = Mutex<Void>(())

    package init(families: ExpositionFamilies, version: String, revision: String = "unknown", interval: Double) {
        self.families = families
        self.version = version
        self.interval = interval
        model = ReadModel(revision: revision)
    }

    /// Takes an update's changes, during the update, into the read model:
    /// costs what changed (the rows are shared with a render in progress
    /// only while it runs).
    package func apply(_ update: borrowing PipelineUpdate) {
        model.apply(ModelUpdate(update))
    }

    /// What `serve --probe` shows now (nil: no probe).
    package func currentRoutes() -> RouteExposition? { model.read { $0.facts.routes } }

    /// Sets what `serve --probe` shows; called before the update that it
    /// belongs to is applied, so a render of that generation has it.
    /// The route families (nil: none, after a reload removed every probe).
    package func setRoutes(_ routes: RouteExposition?) { model.setRoutes(routes) }

    /// The 5xx answers serve can give, each at 0 until it does.
    package func expectServerErrors(_ keys: [(path: String, status: Int)]) { model.expectServerErrors(keys) }

    /// One more 5xx answer (shown from the next sample's render on).
    package func countServerError(path: String, status: Int) { model.countServerError(path: path, status: status) }

    /// Sets the endpoint's closed-connection counts (read on the pipeline's
    /// thread after each update, never from a request handler); a render
    /// shows them as of its sample.
    package func setHTTPClosed(_ counts: HTTPConnectionCounts) { model.setHTTPClosed(counts) }

    /// Sets serve's own `process_*` figures (on the pipeline's thread,
    /// before the update's render).
    package func setProcess(_ metrics: ProcessMetrics?) { model.setProcess(metrics) }

    /// Sets what remote write shows (on the pipeline's thread, before the
    /// update's render).
    package func setRemoteWrite(_ statuses: [RemoteWriteStatus]) { model.setRemoteWrite(statuses) }

    /// The latest generation's text exposition (the series a scrape gets),
    /// in pieces.
    package func renderText(chunk: Int, into sink: (UnsafeRawBufferPointer) -> Void) {
        model.read { PrometheusTextRenderer().render(input($0), chunk: chunk, into: sink) }
    }

    /// Visits the latest generation's series, those of the text exposition
    /// (what remote write sends), without rendering them.
    package func visitSeries(_ visitor: inout some SeriesVisitor, keeping: (ExpositionRow) -> Bool) {
        model.read { input($0).visitSeries(&visitor, keeping: keeping) }
    }

    /// Replaces the plans' gauges (read from the state file after a save);
    /// the next scrape renders afresh.
    package func setPlans(_ gauges: [PlanGauge]) { model.setPlans(gauges) }

    /// Replaces the aliases (`state alias`); the next scrape renders afresh.
    package func setAliases(_ aliases: [SeriesKey: String]) { model.setAliases(aliases) }

    /// The latest exposition in one format, rendered at most once per
    /// generation. Nil only when zlib fails.
    package func rendered(openMetrics: Bool) -> Rendered? {
        // A change of the plans makes a new generation too.
        let generation = model.read { $0.generation &+ $0.planChanges << 40 }
        if let hit = cache.withLock({ $0[openMetrics] }), hit.generation == generation { return hit }
        return rendering.withLock { _ -> Rendered? in
            // Rendered under the model's lock: an update waits for the
            // render (10 ms at 4000 interfaces, once per sample and format)
            // rather than copying every row the render still reads.
            let result = model.read { current -> Rendered? in
                let generation = current.generation &+ current.planChanges << 40
                if let hit = cache.withLock({ $0[openMetrics] }), hit.generation == generation { return hit }
                let input = input(current)
                let renderer: any ExpositionRenderer = openMetrics ? OpenMetricsRenderer() : PrometheusTextRenderer()
                // Room for about the last render's size at once (the other
                // format's, the first time: they differ by a few percent).
                // Older generations' renders are let go of first: a scrape
                // still sending one holds it, and nothing else needs it.
                let last = cache.withLock { entries -> Int in
                    let size = (entries[openMetrics] ?? entries[!openMetrics])?.gzipped.count ?? 0
                    entries = entries.filter { $0.value.generation == generation }
                    return size
                }
                guard let gzip = GzipWriter(expectedSize: last > 0 ? last + last / 16 + 4096 : 0) else { return nil }
                renderer.render(input, chunk: 64 * 1024) { gzip.write($0) }
                guard let body = gzip.finish() else { return nil }
                return Rendered(generation: generation, contentType: renderer.contentType, gzipped: body, size: gzip.inputBytes)
            }
            guard let result else { return nil }
            // Older generations' renders went before this one was made
            // (renders take turns under `rendering`).
            cache.withLock { $0[openMetrics] = result }
            return result
        }
    }

    /// The exposition input of a snapshot: its rows, health and facts.
    private func input(_ current: borrowing ModelSnapshot) -> ExpositionInput {
        var input = Self.input(current.rows, health: current.health, families: families, version: version, interval: interval)
        let facts = current.facts
        input.routes = facts.routes
        input.plans = facts.plans
        input.aliases = facts.aliases
        input.health.httpClosed = facts.httpClosed
        input.health.httpServerErrors = facts.serverErrorCounts
        input.health.remoteWrite = facts.remoteWrite
        input.health.process = facts.process
        input.health.revision = facts.revision
        return input
    }

    /// The exposition input for totals and the pipeline's health.
    package static func input(
        _ interfaces: [ExpositionRow], health: PipelineHealth?, families: ExpositionFamilies, version: String, interval: Double
    ) -> ExpositionInput {
        ExpositionInput(interfaces, health: health, families: families, version: version, interval: interval)
    }
}

/// Reads the endpoint's closed-connection counts into the cache after each
/// update, on the pipeline's thread: a request handler never asks the
/// server, whose lock it may be called under.
package final class HTTPClosedFeed: PipelineEnricher {
    let server: HTTPServer
    let cache: ScrapeCache

    package init(server: HTTPServer, cache: ScrapeCache) {
        self.server = server
        self.cache = cache
    }

    package func enrich(_ update: borrowing PipelineUpdate) {
        cache.setHTTPClosed(server.closedCounts)
    }
}

/// Reads serve's own `process_*` figures into the cache at each sample, on
/// the pipeline's thread (a /proc read and a listing of its descriptors).
package final class ProcessFeed: PipelineEnricher {
    let cache: ScrapeCache

    package init(cache: ScrapeCache) { self.cache = cache }

    package func enrich(_ update: borrowing PipelineUpdate) {
        cache.setProcess(ProcessStats.current())
    }
}

/// Feeds a scrape cache from the pipeline, and says once when the first
/// sample is in.
package final class ScrapeFeed: PipelineSink {
    let cache: ScrapeCache
    private var ready: (() -> Void)?

    package init(cache: ScrapeCache, ready: @escaping () -> Void) {
        self.cache = cache
        self.ready = ready
    }

    package func receive(_ update: borrowing PipelineUpdate) {
        cache.apply(update)
        if let ready {
            ready()
            self.ready = nil
        }
    }
}
