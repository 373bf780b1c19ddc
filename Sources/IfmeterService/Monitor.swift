#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterSampling
import Synchronization

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
        /// Sample inside this named network namespace.
        public var namespace: String?

        public init(
            source: SourceKind = .platformDefault, samplerOptions: SamplerOptions = SamplerOptions(),
            interval: Double = 1, filter: InterfaceFilter = InterfaceFilter(),
            engine: EngineConfiguration = EngineConfiguration(), seriesLifetime: Double? = nil, namespace: String? = nil
        ) {
            self.source = source
            self.samplerOptions = samplerOptions
            self.interval = interval
            self.filter = filter
            self.engine = engine
            self.seriesLifetime = seriesLifetime
            self.namespace = namespace
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

    /// Opens the source and takes the first sample on the monitor's
    /// thread, then returns; throws when the source cannot be opened.
    public func start() throws(SamplingError) {
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
            throw SamplingError.system("pthread_create", code: rc)
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
        let opened = Mutex<Result<Void, SamplingError>?>(nil)
        init(monitor: Monitor) { self.monitor = monitor }
    }

    // MARK: the loop, on the monitor's thread

    private func openSource() throws(SamplingError) -> any CounterSource {
        let kind = configuration.source, options = configuration.samplerOptions
        #if os(Linux)
        if let namespace = configuration.namespace {
            // Sockets opened inside stay inside: sampling from this thread
            // then reads the namespace's links.
            do {
                return try NetworkNamespace.perform(in: namespace) { try makeCounterSource(kind, options: options) }
            } catch let error as SamplingError {
                throw error
            } catch {
                throw SamplingError(call: "setns(\(namespace))", message: "\(error)")
            }
        }
        #endif
        return try makeCounterSource(kind, options: options)
    }

    private func run(_ start: StartBox) {
        let source: any CounterSource
        do {
            source = try openSource()
        } catch {
            start.opened.withLock { $0 = .failure(error) }
            return
        }
        var engine = DeltaEngine(configuration: configuration.engine)
        var next = monotonicSeconds()
        var first = true
        while !stopping.load(ordering: .relaxed) {
            takeSample(source, &engine)
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
    }

    private func takeSample(_ source: any CounterSource, _ engine: inout DeltaEngine) {
        let started = monotonicSeconds()
        do {
            var sample = try source.sample()
            let filter = configuration.filter
            if !filter.isEmpty {
                sample.interfaces.removeAll { !filter.admits(name: $0.name, kind: $0.kind ?? NameRules.classify($0.name).kind) }
            }
            let deltas = engine.apply(sample)
            if let lifetime = configuration.seriesLifetime { engine.forget(notSeenSince: sample.time - lifetime) }
            let duration = monotonicSeconds() - started
            let interfaces = engine.interfaces
            let updated = state.withLock { state -> MonitorState in
                state.generation += 1
                state.samples += 1
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
