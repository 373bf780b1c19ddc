#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterSampling
import IfmeterStore
import Synchronization

/// Why the monitor could not start.
public struct MonitorError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A state file in use: restores the engine when opened, then saves its
/// totals, and the traffic since the last save into the usage tables, at a
/// slow pace. Used from one thread.
public final class StatePersistence {
    public let store: StateStore
    public let every: Double
    private var usage = PeriodAccumulator()
    private var lastSave = monotonicSeconds()
    public private(set) var saves = 0
    /// The last save's failure; nil once a save works again.
    public private(set) var lastError: String?

    /// Opens the file and restores `engine` from it (before its first sample).
    public init(options: StateOptions, engine: inout DeltaEngine) throws(MonitorError) {
        store = try options.open(now: wallClock())
        every = options.saveEvery
        engine.restore(store.restored, sameBoot: store.sameBoot, now: monotonicSeconds())
    }

    /// What exports say of the state.
    public var info: PeriodReport.State {
        PeriodReport.State(path: store.path, since: store.since, restored: !store.isNew, sameBoot: store.sameBoot)
    }

    public func record(_ deltas: [InterfaceDelta]) { usage.add(deltas) }

    /// Saves when a save is due (or `force`); returns whether it tried.
    @discardableResult
    public func saveIfDue(_ engine: DeltaEngine, force: Bool) -> Bool {
        let now = monotonicSeconds()
        guard force || now - lastSave >= every else { return false }
        let taken = usage.take()
        let rows = taken.mapValues { (kind: $0.classification.kind, counters: $0.counters, quality: $0.quality) }
        do {
            try store.save(engine.saved, usage: rows, wallTime: wallClock())
            lastSave = now
            saves += 1
            lastError = nil
        } catch {
            // Kept for the next save: nothing counted is dropped.
            usage.putBack(taken)
            lastError = error.message
        }
        return true
    }
}

/// Persistent totals for a monitor (`--state`).
public struct StateOptions: Sendable {
    public var path: String
    public var host: String
    /// Where the boot id is read (tests point it at a file of their own).
    public var bootIDFile: String
    /// Seconds between saves; a kill loses at most this much of the usage
    /// tables (the totals lose nothing within one boot).
    public var saveEvery: Double

    public init(path: String, host: String, bootIDFile: String = "/proc/sys/kernel/random/boot_id", saveEvery: Double = 10) {
        self.path = path
        self.host = host
        self.bootIDFile = bootIDFile
        self.saveEvery = saveEvery
    }

    /// Opens the store, or says why not.
    public func open(now: Double) throws(MonitorError) -> StateStore {
        guard let bootID = readBootID(bootIDFile) else { throw MonitorError("cannot read the boot id from \(bootIDFile)") }
        do {
            return try StateStore(path: path, host: host, bootID: bootID, now: now)
        } catch {
            throw MonitorError(error.message)
        }
    }
}

/// The sampling loop every long-running consumer shares (the scrape
/// endpoint, the exports, the live view): one sampler, one delta engine, on
/// a thread of its own. Consumers read the latest `MonitorState`, or are
/// called after each sample.
public final class Monitor: Sendable {
    public struct Configuration: Sendable {
        public var source: SourceKind
        public var samplerOptions: SamplerOptions
        public var interval: Double
        public var filter: InterfaceFilter
        public var engine: EngineConfiguration
        /// Interfaces gone for longer than this are forgotten; nil keeps them.
        public var seriesLifetime: Double?
        /// Keep totals across restarts in this state file.
        public var state: StateOptions?

        public init(
            source: SourceKind = .platformDefault, samplerOptions: SamplerOptions = SamplerOptions(),
            interval: Double = 1, filter: InterfaceFilter = InterfaceFilter(),
            engine: EngineConfiguration = EngineConfiguration(), seriesLifetime: Double? = nil, state: StateOptions? = nil
        ) {
            self.state = state
            self.source = source
            self.samplerOptions = samplerOptions
            self.interval = interval
            self.filter = filter
            self.engine = engine
            self.seriesLifetime = seriesLifetime
        }
    }

    public let configuration: Configuration
    private let state: Mutex<MonitorState>
    private let stopping = Atomic<Bool>(false)
    private let wakeup: (read: Int32, write: Int32)
    private let thread = Mutex<pthread_t?>(nil)
    private let onSample: (@Sendable (MonitorState) -> Void)?

    /// `onSample` runs on the monitor's thread after each sample (and
    /// after each failed one); keep it short.
    public init(configuration: Configuration, onSample: (@Sendable (MonitorState) -> Void)? = nil) {
        self.configuration = configuration
        self.onSample = onSample
        state = Mutex(MonitorState(sourceName: configuration.source.rawValue, startTime: wallClock()))
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        wakeup = (fds[0], fds[1])
    }

    deinit {
        stop()
        close(wakeup.read)
        close(wakeup.write)
    }

    /// The state after the latest sample.
    public var current: MonitorState { state.withLock { $0 } }

    /// Opens the source (and the state file) and takes the first sample on
    /// the monitor's thread, then returns; throws when either cannot be
    /// opened.
    public func start() throws(MonitorError) {
        let start = StartBox(monitor: self)
        let box = Unmanaged.passRetained(start)
        var handle = pthread_t()
        let rc = pthread_create(&handle, nil, { raw in
            let box = Unmanaged<StartBox>.fromOpaque(raw!).takeRetainedValue()
            box.monitor.run(box)
            return nil
        }, box.toOpaque())
        if rc != 0 {
            box.release()
            throw MonitorError("pthread_create: \(String(cString: strerror(rc)))")
        }
        thread.withLock { $0 = handle }
        // Wait for the source to open (or fail) and the baseline sample.
        while true {
            if let result = start.opened.withLock({ $0 }) {
                if case .failure(let error) = result {
                    join()
                    throw error
                }
                return
            }
            usleep(2000)
        }
    }

    /// Stops the loop after the sample in progress, and waits for it.
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        var byte: UInt8 = 1
        _ = write(wakeup.write, &byte, 1)
        join()
    }

    private func join() {
        let handle = thread.withLock { t -> pthread_t? in
            defer { t = nil }
            return t
        }
        if let handle { pthread_join(handle, nil) }
    }

    /// How `start` learns that the loop's source opened, or why not.
    private final class StartBox: Sendable {
        let monitor: Monitor
        let opened = Mutex<Result<Void, MonitorError>?>(nil)
        init(monitor: Monitor) { self.monitor = monitor }
    }

    // MARK: the loop, on the monitor's thread

    private func openSource() throws(SamplingError) -> any CounterSource {
        try makeCounterSource(configuration.source, options: configuration.samplerOptions)
    }

    private func run(_ start: StartBox) {
        let source: any CounterSource
        do {
            source = try openSource()
        } catch {
            start.opened.withLock { $0 = .failure(MonitorError("cannot open the \(configuration.source.rawValue) source: \(error)")) }
            return
        }
        var engine = DeltaEngine(configuration: configuration.engine)
        var persistence: StatePersistence?
        if let options = configuration.state {
            do {
                let opened = try StatePersistence(options: options, engine: &engine)
                persistence = opened
                state.withLock { $0.stateInfo = opened.info }
            } catch {
                start.opened.withLock { $0 = .failure(error) }
                return
            }
        }
        var next = monotonicSeconds()
        var first = true
        while !stopping.load(ordering: .relaxed) {
            takeSample(source, &engine, &persistence)
            if first {
                start.opened.withLock { $0 = .success(()) }
                first = false
            }
            next += configuration.interval
            let now = monotonicSeconds()
            if next < now { next = now + configuration.interval - (now - next).truncatingRemainder(dividingBy: configuration.interval) }
            waitUntil(next)
        }
        if first { start.opened.withLock { $0 = .success(()) } }
        // Stopping: save what the last period counted.
        if let persistence { save(persistence, engine, force: true) }
    }

    private func save(_ p: StatePersistence, _ engine: DeltaEngine, force: Bool) {
        guard p.saveIfDue(engine, force: force) else { return }
        state.withLock {
            $0.stateSaves = p.saves
            $0.stateError = p.lastError
        }
    }

    private func takeSample(_ source: any CounterSource, _ engine: inout DeltaEngine, _ persistence: inout StatePersistence?) {
        let started = monotonicSeconds()
        do {
            var (events, sample) = try source.read()
            let filter = configuration.filter
            if !filter.isEmpty {
                sample.interfaces.removeAll { !filter.admits(name: $0.name, kind: $0.kind ?? NameRules.classify($0.name).kind) }
            }
            events = events.filtered(filter)
            let deltas = engine.apply(events, sample)
            if let lifetime = configuration.seriesLifetime { engine.forget(notSeenSince: sample.time - lifetime) }
            if let persistence {
                persistence.record(deltas)
                save(persistence, engine, force: false)
            }
            let duration = monotonicSeconds() - started
            let interfaces = engine.interfaces
            let updated = state.withLock { state -> MonitorState in
                state.generation += 1
                state.samples += 1
                state.overruns += UInt64(events.overruns)
                state.lastEvents = events
                state.lastSampleSeconds = duration
                state.lastSampleTime = wallClock()
                state.lastError = nil
                state.interfaces = interfaces
                state.lastDeltas = deltas
                state.lastSample = sample
                state.windowStart = engine.firstTime
                state.windowEnd = engine.lastTime
                return state
            }
            onSample?(updated)
        } catch {
            let updated = state.withLock { state -> MonitorState in
                state.generation += 1
                state.sampleErrors += 1
                state.lastError = error.description
                return state
            }
            onSample?(updated)
        }
    }

    /// Sleeps until `deadline` on the monotonic clock, or until `stop`.
    private func waitUntil(_ deadline: Double) {
        while !stopping.load(ordering: .relaxed) {
            let remaining = deadline - monotonicSeconds()
            if remaining <= 0 { return }
            var fd = pollfd(fd: wakeup.read, events: Int16(POLLIN), revents: 0)
            let rc = poll(&fd, 1, Int32(min(remaining * 1000 + 1, 60_000)))
            if rc > 0 {
                var drain = [UInt8](repeating: 0, count: 16)
                while read(wakeup.read, &drain, drain.count) > 0 {}
            }
        }
    }
}

/// What consumers see after each sample.
public struct MonitorState: Sendable {
    public var sourceName: String
    /// Bumped by every sample, failed or not: caches key on it.
    public var generation = 0
    public var samples: UInt64 = 0
    public var sampleErrors: UInt64 = 0
    /// Link-notification overruns (each resynchronized with a full dump).
    public var overruns: UInt64 = 0
    /// The link events applied with the last sample.
    public var lastEvents = LinkEvents()
    public var lastError: String?
    public var lastSampleSeconds: Double?
    /// Unix time of the last successful sample.
    public var lastSampleTime: Double?
    /// Unix time the monitor started.
    public var startTime: Double
    /// Every interface's totals, sorted by name.
    public var interfaces: [InterfaceTotals] = []
    /// The last sample's per-interface deltas.
    public var lastDeltas: [InterfaceDelta] = []
    public var lastSample: Sample?
    /// The engine's window, monotonic seconds.
    public var windowStart: Double?
    public var windowEnd: Double?
    /// The state file, when totals persist.
    public var stateInfo: PeriodReport.State?
    public var stateSaves = 0
    /// The last save's failure; nil once a save works again.
    public var stateError: String?

    public init(sourceName: String, startTime: Double) {
        self.sourceName = sourceName
        self.startTime = startTime
    }
}

/// Seconds since the Unix epoch.
public func wallClock() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
