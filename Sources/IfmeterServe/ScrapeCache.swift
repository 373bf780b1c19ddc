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
public final class ScrapeCache: SeriesSource {
    /// One format's exposition of one generation, kept gzipped: a client
    /// that takes gzip gets these bytes; another gets them inflated as it
    /// reads. The text itself is never held whole (5 MB at 4000
    /// interfaces; gzipped, a twentieth).
    public struct Rendered: Sendable {
        public var generation: Int
        public var contentType: String
        public var gzipped: HTTPBody
        /// The text's length.
        public var size: UInt64
    }

    /// Every interface's totals and the health, as of `generation`.
    struct Snapshot: Sendable {
        var view = TotalsView { ExpositionRow($0) }
        var health: PipelineHealth?
        var generation = 0
        var routes: RouteExposition?
    }

    private let families: ExpositionFamilies
    private let version: String
    private let interval: Double
    private let snapshot = Mutex(Snapshot())
    /// By format: OpenMetrics (true) or text (false).
    private let cache = Mutex<[Bool: Rendered]>([:])
    /// One render at a time: concurrent scrapes of a new sample wait for
    /// the first one's render instead of all rendering it.
    private let rendering = Mutex<Void>(())
    /// What the HTTP endpoint closed to protect itself, as of the last update.
    private let httpClosed = Mutex<HTTPConnectionCounts?>(nil)
    /// serve's 5xx answers by path and status: the ones it can give start
    /// at 0 (`expectServerErrors`), so that a rate sees the first.
    private let serverErrors = Mutex<[HTTPServerErrorKey: UInt64]>([:])
    /// serve --remote-write: each receiver's status, as of the last update.
    private let remoteWrite = Mutex<[RemoteWriteStatus]>([])
    /// serve's own process figures, as of the last update.
    private let process = Mutex<ProcessMetrics?>(nil)
    /// Planned interfaces' cycles and the aliases (both from the state
    /// file), and a count of their changes.
    private let plans = Mutex<(gauges: [PlanGauge], aliases: [SeriesKey: String], changes: Int)>(([], [:], 0))

    private let revision: String

    public init(families: ExpositionFamilies, version: String, revision: String = "unknown", interval: Double) {
        self.families = families
        self.version = version
        self.revision = revision
        self.interval = interval
    }

    /// Takes an update's changes, during the update: costs what changed
    /// (the view is shared with a render in progress only while it runs).
    public func apply(_ update: borrowing PipelineUpdate) {
        let changed = update.changed, forgotten = update.forgotten, health = update.health, sequence = update.sequence
        snapshot.withLock { snapshot in
            snapshot.view.apply(changed: changed, forgotten: forgotten)
            snapshot.health = health
            snapshot.generation = sequence
        }
    }

    /// What `serve --probe` shows now (nil: no probe).
    public func currentRoutes() -> RouteExposition? { snapshot.withLock { $0.routes } }

    /// Every interface's row as the scrape shows it, and its generation
    /// (the dashboard's board wakes from these).
    public func exposedRows() -> (rows: [ExpositionRow], generation: Int) {
        snapshot.withLock { ($0.view.rows, $0.generation) }
    }

    /// Sets what `serve --probe` shows; called before the update that it
    /// belongs to is applied, so a render of that generation has it.
    /// The route families (nil: none, after a reload removed every probe).
    public func setRoutes(_ routes: RouteExposition?) {
        snapshot.withLock { $0.routes = routes }
    }

    /// The 5xx answers serve can give, each at 0 until it does.
    public func expectServerErrors(_ keys: [(path: String, status: Int)]) {
        serverErrors.withLock { counts in
            for key in keys { counts[HTTPServerErrorKey(path: key.path, status: key.status), default: 0] += 0 }
        }
    }

    /// One more 5xx answer (shown from the next sample's render on).
    public func countServerError(path: String, status: Int) {
        serverErrors.withLock { $0[HTTPServerErrorKey(path: path, status: status), default: 0] += 1 }
    }

    /// Sets the endpoint's closed-connection counts (read on the pipeline's
    /// thread after each update, never from a request handler); a render
    /// shows them as of its sample.
    public func setHTTPClosed(_ counts: HTTPConnectionCounts) {
        httpClosed.withLock { $0 = counts }
    }

    /// Sets serve's own `process_*` figures (on the pipeline's thread,
    /// before the update's render).
    public func setProcess(_ metrics: ProcessMetrics?) {
        process.withLock { $0 = metrics }
    }

    /// Sets what remote write shows (on the pipeline's thread, before the
    /// update's render).
    public func setRemoteWrite(_ statuses: [RemoteWriteStatus]) {
        remoteWrite.withLock { $0 = statuses }
    }

    /// The latest generation's text exposition (the series a scrape gets),
    /// in pieces.
    public func renderText(chunk: Int, into sink: (UnsafeRawBufferPointer) -> Void) {
        withLatest { PrometheusTextRenderer().render($0, chunk: chunk, into: sink) }
    }

    /// Visits the latest generation's series, those of the text exposition
    /// (what remote write sends), without rendering them.
    public func visitSeries(_ visitor: inout some SeriesVisitor, keeping: (ExpositionRow) -> Bool) {
        withLatest { $0.visitSeries(&visitor, keeping: keeping) }
    }

    /// The latest generation's exposition input, under the snapshot's lock.
    private func withLatest(_ body: (ExpositionInput) -> Void) {
        let planned = plans.withLock { $0 }
        snapshot.withLock { current in body(input(current, planned.gauges, planned.aliases)) }
    }

    /// The exposition input of a snapshot, with the plans and what the
    /// cache keeps beside the pipeline's update.
    private func input(_ current: borrowing Snapshot, _ plans: [PlanGauge], _ aliases: [SeriesKey: String]) -> ExpositionInput {
        var input = Self.input(current.view.sorted(), health: current.health, families: families, version: version, interval: interval)
        input.routes = current.routes
        input.plans = plans
        input.aliases = aliases
        fill(&input)
        return input
    }

    /// Replaces the plans' gauges (read from the state file after a save);
    /// the next scrape renders afresh.
    public func setPlans(_ gauges: [PlanGauge]) {
        plans.withLock { if $0.gauges != gauges { $0 = (gauges, $0.aliases, $0.changes + 1) } }
    }

    /// Replaces the aliases (`state alias`); the next scrape renders afresh.
    public func setAliases(_ aliases: [SeriesKey: String]) {
        plans.withLock { if $0.aliases != aliases { $0 = ($0.gauges, aliases, $0.changes + 1) } }
    }

    /// The latest exposition in one format, rendered at most once per
    /// generation. Nil only when zlib fails.
    public func rendered(openMetrics: Bool) -> Rendered? {
        let generation = snapshot.withLock { $0.generation } &+ plans.withLock { $0.changes } << 40
        if let hit = cache.withLock({ $0[openMetrics] }), hit.generation == generation { return hit }
        return rendering.withLock { _ -> Rendered? in
            let planned = plans.withLock { $0 }
            // Rendered under the snapshot's lock: an update waits for the
            // render (10 ms at 4000 interfaces, once per sample and format)
            // rather than copying every row the render still reads.
            let result = snapshot.withLock { current -> Rendered? in
                // A change of the plans makes a new generation too.
                let generation = current.generation &+ planned.changes << 40
                if let hit = cache.withLock({ $0[openMetrics] }), hit.generation == generation { return hit }
                let input = input(current, planned.gauges, planned.aliases)
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

    /// What the cache keeps beside the pipeline's update: the endpoint's,
    /// remote write's and the process's figures, and the build.
    private func fill(_ input: inout ExpositionInput) {
        input.health.httpClosed = httpClosed.withLock { $0 }
        input.health.httpServerErrors = serverErrors.withLock { counts in
            counts.map { HTTPServerErrorCount(path: $0.key.path, status: $0.key.status, count: $0.value) }
        }
        input.health.remoteWrite = remoteWrite.withLock { $0 }
        input.health.process = process.withLock { $0 }
        input.health.revision = revision
    }

    /// The exposition input for totals and the pipeline's health.
    public static func input(
        _ interfaces: [ExpositionRow], health: PipelineHealth?, families: ExpositionFamilies, version: String, interval: Double
    ) -> ExpositionInput {
        ExpositionInput(interfaces, health: health, families: families, version: version, interval: interval)
    }
}

/// Reads the endpoint's closed-connection counts into the cache after each
/// update, on the pipeline's thread: a request handler never asks the
/// server, whose lock it may be called under.
public final class HTTPClosedFeed: PipelineEnricher {
    let server: HTTPServer
    let cache: ScrapeCache

    public init(server: HTTPServer, cache: ScrapeCache) {
        self.server = server
        self.cache = cache
    }

    public func enrich(_ update: borrowing PipelineUpdate) {
        cache.setHTTPClosed(server.closedCounts)
    }
}

/// Reads serve's own `process_*` figures into the cache at each sample, on
/// the pipeline's thread (a /proc read and a listing of its descriptors).
public final class ProcessFeed: PipelineEnricher {
    let cache: ScrapeCache

    public init(cache: ScrapeCache) { self.cache = cache }

    public func enrich(_ update: borrowing PipelineUpdate) {
        cache.setProcess(ProcessStats.current())
    }
}

/// Feeds a scrape cache from the pipeline, and says once when the first
/// sample is in.
public final class ScrapeFeed: PipelineSink {
    let cache: ScrapeCache
    private var ready: (() -> Void)?

    public init(cache: ScrapeCache, ready: @escaping () -> Void) {
        self.cache = cache
        self.ready = ready
    }

    public func receive(_ update: borrowing PipelineUpdate) {
        cache.apply(update)
        if let ready {
            ready()
            self.ready = nil
        }
    }
}
