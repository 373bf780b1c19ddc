import IfmeterCore
import IfmeterModel
import IfmeterStore
import IfmeterSystem

/// How a pipeline samples.
package struct PipelineConfiguration: Sendable {
    /// Seconds between samples.
    package var interval: Double
    /// Which interfaces go on: applied once, to the readings, before the
    /// engine sees them.
    package var filter: InterfaceFilter
    package var engine: EngineConfiguration
    /// Interfaces gone for longer than this are forgotten; nil keeps them.
    package var seriesLifetime: Double?
    /// Stop after this many samples (the first is the baseline); nil runs
    /// until the waiter says stop.
    package var sampleLimit: Int?
    /// End the loop at the first failed sample (commands that print what
    /// they sample); otherwise failures are counted and sampling goes on.
    package var stopOnFailure: Bool
    /// Publish a delta for every interface every interval (what tables and
    /// the live view show); false publishes only those where something
    /// happened (what sums need), which costs what changed.
    package var idleDeltas: Bool = true

    package init(
        interval: Double = 1, filter: InterfaceFilter = InterfaceFilter(), engine: EngineConfiguration = EngineConfiguration(),
        seriesLifetime: Double? = nil, sampleLimit: Int? = nil, stopOnFailure: Bool = false
    ) {
        self.interval = interval
        self.filter = filter
        self.engine = engine
        self.seriesLifetime = seriesLifetime
        self.sampleLimit = sampleLimit
        self.stopOnFailure = stopOnFailure
    }
}

/// What the pipeline published after a sample (or a failed one, or zeroed
/// totals): the typed result every output is built from.
///
/// An update is not copyable: it lives for one publish, borrowed by each
/// enricher and sink in turn. Holding one past that would hold its sample,
/// over which the next sample is built in place when nothing does; a sink
/// that needs something later copies out what it needs (`kept()` copies
/// all of it, sample included, and says so).
package struct PipelineUpdate: ~Copyable, Sendable {
    package enum Outcome: Sendable, Hashable {
        /// A sample was read and applied.
        case sampled
        /// Reading failed; nothing was applied.
        case failed(SystemError)
        /// The totals were zeroed (the live view's `r`).
        case zeroed
    }

    /// Bumped by every update: caches key on it.
    package var sequence: Int
    package var outcome: Outcome
    /// The first sample: every interface's baseline, no traffic yet.
    package var isBaseline: Bool
    /// When (monotonic seconds: the sample's time), and the wall clock then.
    package var time: Double
    package var wallTime: Double
    /// The filtered reading: its link events and its sample.
    package var reading: SourceReading?
    /// Each interface's traffic over the interval (deletions first); with
    /// `idleDeltas` off, only the intervals where something happened.
    package var deltas: [InterfaceDelta]
    /// The totals of the series whose totals, quality, events, presence or
    /// facts changed (new ones included): everything a view kept from the
    /// changes needs, so no sink calls back into the pipeline. And the keys
    /// of series forgotten: apply these first (a key can be forgotten and
    /// seen anew).
    package var changed: [InterfaceTotals]
    package var forgotten: [SeriesKey]
    package var health: PipelineHealth
    package var persistence: PersistenceStatus?
    /// The engine's window, monotonic seconds.
    package var windowStart: Double?
    package var windowEnd: Double?

    /// The time between this sample and the one before it.
    package var seconds: Double?
    /// On the first sample only: the `--include`/`--exclude` patterns that
    /// matched none of its interfaces (empty when every one did).
    package var unmatchedPatterns: [UnmatchedPattern]?
    /// How far the wall clock stepped since this pipeline's previous sample
    /// (`ClockStep`: forward positive, back negative); 0 without a step.
    package var clockStepSeconds: Double = 0

    /// A copy of everything, to keep past this publish: it holds the
    /// sample, so the next sample is built beside it, not over it.
    package func kept() -> KeptUpdate {
        KeptUpdate(
            sequence: sequence, outcome: outcome, isBaseline: isBaseline, time: time, wallTime: wallTime, reading: reading,
            deltas: deltas, changed: changed, forgotten: forgotten, health: health, persistence: persistence,
            windowStart: windowStart, windowEnd: windowEnd, seconds: seconds, clockStepSeconds: clockStepSeconds)
    }
}

/// An update kept on purpose (`PipelineUpdate.kept()`), for tests and for
/// what must look at an update after its publish.
package struct KeptUpdate: Sendable {
    package var sequence: Int
    package var outcome: PipelineUpdate.Outcome
    package var isBaseline: Bool
    package var time: Double
    package var wallTime: Double
    package var reading: SourceReading?
    package var deltas: [InterfaceDelta]
    package var changed: [InterfaceTotals]
    package var forgotten: [SeriesKey]
    package var health: PipelineHealth
    package var persistence: PersistenceStatus?
    package var windowStart: Double?
    package var windowEnd: Double?
    package var seconds: Double?
    package var clockStepSeconds: Double = 0
}

/// An `--include` or `--exclude` pattern that matched no interface.
package struct UnmatchedPattern: Sendable, Hashable {
    package var option: String
    package var pattern: String

    package init(option: String, pattern: String) {
        self.option = option
        self.pattern = pattern
    }
}

private func isSampled(_ outcome: PipelineUpdate.Outcome) -> Bool {
    if case .sampled = outcome { return true }
    return false
}

/// Runs before every sink, for each update: it works out what sinks then
/// read from it (routes and each tunnel's outside estimate, plan gauges).
/// Enrichers run in the order added, all of them before the first sink.
package protocol PipelineEnricher: AnyObject {
    func enrich(_ update: borrowing PipelineUpdate)
}

/// Something fed by the pipeline: a renderer, an exporter, a cache. Called
/// on the pipeline's thread, synchronously, after every enricher, in the
/// order added; keep it short. It borrows the update for the call.
package protocol PipelineSink: AnyObject {
    func receive(_ update: borrowing PipelineUpdate)
    /// The loop ended (after the last save).
    func finished()
}

extension PipelineSink {
    package func finished() {}
}

/// Waits between samples: until a deadline, for a stop signal, for keys.
/// Returns false to end the loop.
package protocol PipelineWaiter {
    mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool
}

/// The clocks a pipeline reads: monotonic seconds (deadlines) and Unix time
/// (wall-clock stamps, usage periods). Tests forge them.
package struct PipelineClock: Sendable {
    package var monotonic: @Sendable () -> Double
    package var wall: @Sendable () -> Double

    package init(monotonic: @escaping @Sendable () -> Double, wall: @escaping @Sendable () -> Double) {
        self.monotonic = monotonic
        self.wall = wall
    }

    package static let system = PipelineClock(monotonic: { monotonicSeconds() }, wall: { wallClock() })
}

/// The one sampling pipeline: source -> filter -> delta engine ->
/// persistence -> a `PipelineUpdate` for each subscriber. Every command
/// that samples builds one and subscribes to it; none owns a loop.
///
/// Synchronous: `step` takes one sample; `run` is the loop, on the calling
/// thread, sleeping in its waiter between samples.
package final class Pipeline {
    package let source: any CounterSource
    package private(set) var configuration: PipelineConfiguration
    package private(set) var engine: DeltaEngine
    package let persistence: StatePersistence?
    package private(set) var health: PipelineHealth
    /// `--include`/`--exclude` patterns that matched no interface of the
    /// first sample (nil until then, or without patterns).
    package private(set) var unmatchedPatterns: [UnmatchedPattern]?
    private var patternsSaid = false
    private var enrichers: [any PipelineEnricher] = []
    private var sinks: [any PipelineSink] = []
    private var sequence = 0
    /// This pipeline's last sample: its monotonic time and the wall clock
    /// then, to tell a step of the wall clock (`ClockStep`).
    private var lastClocks: (monotonic: Double, wall: Double)?
    private let clock: PipelineClock

    /// With `persistence`, the engine starts from the saved totals.
    package init(
        source: any CounterSource, configuration: PipelineConfiguration, persistence: StatePersistence? = nil,
        clock: PipelineClock = .system
    ) {
        self.source = source
        self.configuration = configuration
        self.persistence = persistence
        self.clock = clock
        engine = DeltaEngine(configuration: configuration.engine)
        health = PipelineHealth(source: source.sourceName, startTime: clock.wall())
        persistence?.restore(into: &engine, now: clock.monotonic())
    }

    /// A new `--include`/`--exclude`/`--kind`/`--netns` filter (SIGHUP,
    /// the config file changed), from the next sample on: what it leaves
    /// out is forgotten now (gone from the outputs, its rows from the state
    /// file at the next save; its usage history stays), what it lets in
    /// starts from its baseline at the next sample, and patterns that match
    /// nothing are said again.
    package func setFilter(_ filter: InterfaceFilter) {
        configuration.filter = filter
        engine.forget { key, kind in filter.admits(key, kind: kind) }
        unmatchedPatterns = nil
        patternsSaid = false
    }

    /// New `--kind-of` rules (serve's SIGHUP): the source classifies every
    /// link again at the next sample, and a `--kind` filter judges the new
    /// kinds.
    package func setKindOverrides(_ overrides: KindOverrides) {
        source.setKindOverrides(overrides)
    }

    /// Removes an enricher or a sink added before (by identity).
    package func remove(_ subscriber: AnyObject) {
        enrichers.removeAll { $0 === subscriber }
        sinks.removeAll { $0 === subscriber }
    }

    /// Adds an enricher: it sees every update before any sink does.
    package func add(enricher: any PipelineEnricher) {
        enrichers.append(enricher)
    }

    /// Adds a sink: it sees every update after every enricher.
    package func add(sink: any PipelineSink) {
        sinks.append(sink)
    }

    /// Takes one sample through every stage and publishes it.
    @discardableResult
    package func step() -> PipelineUpdate {
        let started = clock.monotonic()
        let reading: SourceReading
        do {
            reading = try source.read()
        } catch {
            health.sampleErrors += 1
            health.lastError = error
            health.lastSampleSeconds = clock.monotonic() - started
            return publish(outcome: .failed(error), reading: nil, deltas: [], time: started, previous: nil)
        }
        if unmatchedPatterns == nil, !configuration.filter.include.isEmpty || !configuration.filter.exclude.isEmpty {
            unmatchedPatterns = configuration.filter.unmatchedPatterns(in: reading.sample.interfaces.map(\.key))
                .map { UnmatchedPattern(option: $0.option, pattern: $0.pattern) }
        }
        var filtered = reading
        let platform = configuration.engine.platform
        configuration.filter.apply(to: &filtered.sample, platform: platform)
        configuration.filter.apply(to: &filtered.events, platform: platform)
        let previous = engine.lastSampleTime
        let deltas = engine.apply(filtered, idleDeltas: configuration.idleDeltas)
        let t = filtered.sample.time
        if let lifetime = configuration.seriesLifetime { engine.forget(notSeenSince: t - lifetime) }
        let wall = clock.wall()
        if let persistence {
            persistence.record(deltas, engine: &engine, sample: filtered.sample, sampleTime: t, wallTime: wall)
            persistence.applyChanges(&engine, at: t, wallTime: wall)
            // A deletion's final counters exist nowhere else any more: saved
            // soon (at most one such save per `deletionGap`), so a kill
            // after that cannot lose them.
            persistence.saveIfDue(engine, at: t, wallTime: wall, deletion: !filtered.events.deleted.isEmpty)
        }
        health.samples += 1
        health.overruns += UInt64(filtered.events.overruns)
        health.lastError = nil
        health.lastSampleTime = wall
        health.lastSampleSeconds = clock.monotonic() - started
        let step = lastClocks.map { ClockStep.seconds(wall: ($0.wall, wall), monotonic: ($0.monotonic, t)) } ?? 0
        lastClocks = (t, wall)
        let update = publish(outcome: .sampled, reading: filtered, deltas: deltas, time: t, previous: previous, wall: wall, clockStep: step)
        // What this sample (and the scrapes since the last one) freed goes
        // back to the system: glibc keeps freed pages between live blocks
        // resident, about 0.7 MB at 4000 interfaces.
        releaseFreeMemory()
        return update
    }

    /// The loop: a sample every interval (skipping ahead when late), until
    /// the sample limit or until the waiter says stop; then the last save,
    /// and `pipelineFinished` for every subscriber.
    package func run(_ waiter: inout some PipelineWaiter) {
        defer { finish() }
        let interval = configuration.interval
        var next = clock.monotonic()
        var taken = 0
        var early = false
        while true {
            let started = clock.monotonic()
            // Only the outcome is kept: holding the update would hold the
            // sample, which the next one is built over when nothing does.
            let outcome = step().outcome
            switch outcome {
            case .sampled: taken += 1
            case .failed: if configuration.stopOnFailure { return }
            case .zeroed: break
            }
            if let limit = configuration.sampleLimit, taken >= limit { return }
            // An early sample (a deletion to save) leaves the pace as it was.
            if !early {
                next += interval
                let now = clock.monotonic()
                if next < now { next = now + interval - (now - next).truncatingRemainder(dividingBy: interval) }
            }
            early = false
            var deadline = next
            while true {
                if !waiter.wait(until: deadline, self) { return }
                guard earlySampleDue, clock.monotonic() < next else { break }
                // At most one early sample per `earlyGap` after the last one:
                // a storm of deletions costs a few samples and saves a second.
                let earliest = started + Self.earlyGap
                if clock.monotonic() < earliest {
                    deadline = earliest
                    continue
                }
                early = true
                break
            }
            earlySampleDue = false
        }
    }

    /// The least time between a sample and an early one.
    package static let earlyGap = 0.05

    /// A deletion came between samples and a state file should have it.
    private var earlySampleDue = false

    /// Reads the source's link notifications between samples: a waiter
    /// calls this when the source's descriptors are readable. Returns true
    /// when the wait should end for a sample now: a deletion came and a
    /// state file keeps the totals (its final counters are then applied and
    /// saved at once; `run` keeps at least `earlyGap` between samples).
    package func readEvents() -> Bool {
        guard source.readEvents(), persistence != nil else { return false }
        earlySampleDue = true
        return true
    }

    /// Zeroes the totals (their quality and events start over) and
    /// publishes the change.
    package func zeroTotals() {
        engine.zeroTotals()
        let now = clock.monotonic()
        publish(outcome: .zeroed, reading: nil, deltas: [], time: engine.lastSampleTime ?? now, previous: nil)
    }

    /// Saves now (when persisting), records the clean stop, and tells the
    /// subscribers the loop ended.
    package func finish() {
        persistence?.finish(engine, at: engine.lastSampleTime ?? clock.monotonic(), wallTime: clock.wall())
        for sink in sinks { sink.finished() }
    }

    /// Saves now, whatever the pace (SIGHUP); no-op without a state file.
    package func saveNow() {
        persistence?.retryNow()
        persistence?.saveIfDue(engine, at: engine.lastSampleTime ?? clock.monotonic(), wallTime: clock.wall(), force: true)
    }

    /// Every interface's totals, sorted: costs a sort, so for reports and
    /// period ends, not for every sample.
    package var totals: [InterfaceTotals] { engine.interfaces }

    package func totals(for key: SeriesKey) -> InterfaceTotals? { engine.totals(for: key) }

    @discardableResult
    private func publish(
        outcome: PipelineUpdate.Outcome, reading: SourceReading?, deltas: [InterfaceDelta], time: Double,
        previous: Double?, wall: Double? = nil, clockStep: Double = 0
    ) -> PipelineUpdate {
        sequence += 1
        health.state = persistence?.health
        let (changed, forgotten) = engine.takeChangedTotals()
        var seconds: Double?
        if case .sampled = outcome, let previous { seconds = time - previous }
        var isBaseline = false
        if case .sampled = outcome { isBaseline = previous == nil }
        let update = PipelineUpdate(
            sequence: sequence, outcome: outcome, isBaseline: isBaseline, time: time, wallTime: wall ?? clock.wall(),
            reading: reading, deltas: deltas, changed: changed, forgotten: forgotten, health: health,
            persistence: persistence?.status, windowStart: engine.firstTime, windowEnd: engine.lastTime, seconds: seconds,
            unmatchedPatterns: patternsSaid || !isSampled(outcome) ? nil : (unmatchedPatterns ?? []), clockStepSeconds: clockStep)
        if isSampled(outcome) { patternsSaid = true }
        for enricher in enrichers { enricher.enrich(update) }
        for sink in sinks { sink.receive(update) }
        persistence?.noticesSaid()
        return update
    }
}

/// Waits in real time without any other input; for tests and tools that
/// stop by the sample limit.
package struct SleepingWaiter: PipelineWaiter {
    package init() {}

    package mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool {
        while true {
            let remaining = deadline - monotonicSeconds()
            if remaining <= 0 { return true }
            sleepSeconds(min(remaining, 1))
        }
    }
}
