import IfmeterCore
import IfmeterSampling
import IfmeterSystem
import Synchronization

/// Measures each interface's traffic from the system's interface counters.
///
/// Each ``sample()`` reads every interface's counters and returns what each
/// moved since the previous sample and since the meter started, with how
/// far each figure can be trusted (``Quality``) and what happened to the
/// counters (``CounterChange``): a 32-bit wrap is told apart from a reset
/// and from an interface recreated under the same name.
///
/// The meter can be used from any thread; samples are taken one at a time.
public final class TrafficMeter: Sendable {
    /// Where the counters come from.
    public enum Source: String, Sendable, Hashable, CaseIterable {
        /// `getifaddrs(3)`, on Apple platforms and Linux: 32-bit counters,
        /// which wrap at 4 GiB, and no deletion events.
        case getifaddrs
        /// Linux's netlink: 64-bit counters, and deletion events with each
        /// deleted interface's final counters. Linux only.
        case netlink
        /// Apple's interface list, `sysctl` with `NET_RT_IFLIST2`: the same
        /// interfaces as getifaddrs with 64-bit counters (`if_data64`), so
        /// no wrap to tell from a reset and no gap that makes a figure a
        /// lower bound; no deletion events. macOS and iOS only.
        case sysctl

        /// The default of ``TrafficMeter/init(source:maxBitsPerSecond:)``:
        /// ``sysctl`` (64-bit) on Apple platforms; ``getifaddrs`` on Linux,
        /// where ``netlink`` gives 64-bit counters when asked for (the
        /// default there is kept so that state saved by earlier versions
        /// still restores).
        public static var platformDefault: Source {
            #if os(Linux) && !IFMETER_PORTABLE_CHECK
            .getifaddrs
            #else
            .sysctl
            #endif
        }

        /// How wide this source's counters are: 32 (getifaddrs, which
        /// wrap at 4 GiB) or 64.
        public var counterBits: Int { self == .getifaddrs ? 32 : 64 }
    }

    /// Where this meter's counters come from.
    public let source: Source
    /// The fastest the meter assumes a link can go, in bits per second,
    /// where the system reports no real speed (always, on Apple platforms).
    public let maxBitsPerSecond: Double

    private struct State {
        let reader: any CounterSource
        var engine: DeltaEngine
        var lastTime: Double?
        /// The state restored, until the first sample: saved again
        /// before then, it is given back as it came (nothing was measured,
        /// and it still names the boot its counters belong to).
        var restored: String?
    }

    private let state: Mutex<State>

    /// Opens the counter source.
    ///
    /// - Parameters:
    ///   - source: ``Source/platformDefault``: the 64-bit ``Source/sysctl``
    ///     on Apple platforms, ``Source/getifaddrs`` on Linux. ``source``
    ///     and its ``Source/counterBits`` say which the meter reads.
    ///   - maxBitsPerSecond: the ceiling that tells a 32-bit wrap from a
    ///     reset, and decides how long apart two 32-bit readings can be
    ///     before a whole wrap could hide between them: 10 Gbit/s by
    ///     default, which makes a gap of 2.75 s or more a lower bound. A
    ///     lower ceiling allows longer gaps (100 Mbit/s: 275 s), but traffic
    ///     faster than it makes wraps read as resets, and hides them.
    /// - Throws: ``MeterError/unavailable(_:)`` for netlink off Linux and
    ///   sysctl on it, or ``MeterError/system(_:)`` when the source cannot
    ///   be opened.
    public init(source: Source = .platformDefault, maxBitsPerSecond: Double = 10e9) throws(MeterError) {
        guard maxBitsPerSecond.isFinite, maxBitsPerSecond >= 1 else {
            throw .invalidArgument("maxBitsPerSecond must be a finite rate of at least 1 bit/s")
        }
        let reader: any CounterSource
        do {
            switch source {
            case .getifaddrs:
                reader = try makeCounterSource(.getifaddrs)
            case .netlink:
                #if os(Linux) && !IFMETER_PORTABLE_CHECK
                reader = try makeCounterSource(.netlink)
                #else
                throw MeterError.unavailable("the netlink source exists on Linux only; use sysctl or getifaddrs")
                #endif
            case .sysctl:
                #if os(Linux) && !IFMETER_PORTABLE_CHECK
                throw MeterError.unavailable("the sysctl source (NET_RT_IFLIST2) exists on Apple platforms only; use netlink or getifaddrs")
                #else
                reader = InterfaceListSampler(options: SamplerOptions())
                #endif
            }
        } catch let error as MeterError {
            throw error
        } catch {
            throw .system(String(describing: error))
        }
        self.source = source
        self.maxBitsPerSecond = maxBitsPerSecond
        state = Self.state(reader: reader, maxBitsPerSecond: maxBitsPerSecond)
    }

    /// A meter over a given reader (tests and replays: the sysctl parser
    /// over recorded buffers, on any platform).
    init(source: Source, reader: sending any CounterSource, maxBitsPerSecond: Double = 10e9) {
        self.source = source
        self.maxBitsPerSecond = maxBitsPerSecond
        state = Self.state(reader: reader, maxBitsPerSecond: maxBitsPerSecond)
    }

    private static func state(reader: sending any CounterSource, maxBitsPerSecond: Double) -> Mutex<State> {
        let configuration = EngineConfiguration(defaultMaxBytesPerSecond: maxBitsPerSecond / 8, platform: .current)
        return Mutex(State(reader: reader, engine: DeltaEngine(configuration: configuration)))
    }

    /// Reads every interface's counters now.
    ///
    /// The first sample is the baseline: it counts nothing for the
    /// interfaces it finds (except those restored from saved state).
    /// A 32-bit figure read long after the previous one (more than 2.75 s
    /// at the default ceiling; hours, for an app that samples when it is
    /// opened) is a lower bound, since a whole wrap could have passed
    /// unseen: see ``InterfaceTraffic/mayHaveMissedWrap``.
    ///
    /// - Throws: ``MeterError/system(_:)`` when the counters cannot be read.
    public func sample() throws(MeterError) -> TrafficReading {
        try state.withLock { state throws(MeterError) -> TrafficReading in
            let reading: SourceReading
            do {
                reading = try state.reader.read()
            } catch {
                throw .system(String(describing: error))
            }
            var intervals: [String: InterfaceTraffic.Interval] = [:]
            for delta in state.engine.apply(reading) where delta.netns.isEmpty {
                if intervals[delta.name] == nil {
                    intervals[delta.name] = InterfaceTraffic.Interval(delta)
                } else {
                    intervals[delta.name]?.add(delta)
                }
            }
            let time = reading.sample.time
            let since = state.lastTime.map { time - $0 }
            state.lastTime = time
            state.restored = nil
            let interfaces = state.engine.interfaces.filter(\.netns.isEmpty).map {
                InterfaceTraffic(totals: $0, interval: intervals[$0.name])
            }
            return TrafficReading(time: time, secondsSinceLastSample: since, interfaces: interfaces)
        }
    }

    /// The meter's state, to store (in `UserDefaults`, a file) and give to
    /// ``restore(_:)`` at the next launch: each interface's totals, their
    /// quality and events, its last counters, and this boot's identity.
    /// A JSON text; empty of interfaces before the first sample.
    public func savedState() -> String {
        state.withLock { state in
            if let restored = state.restored { return restored }
            return SavedMeter(
                source: source, boot: Self.bootIdentity(), savedAt: monotonicSeconds(),
                series: state.engine.saved.filter(\.totals.netns.isEmpty)
            ).json
        }
    }

    /// Continues from what ``savedState()`` returned, before the first
    /// sample.
    ///
    /// Within the same boot the kernel's counters went on while the app
    /// was not running, so the next sample counts that traffic and the
    /// totals continue exactly (but a 32-bit figure read hours after the
    /// save is a lower bound, as between any two samples that far apart).
    /// After a reboot the counters started over: the next sample counts
    /// them in full and the totals become lower bounds, since what passed
    /// between the save and the reboot is unknown.
    ///
    /// On failure the meter is left as it was.
    ///
    /// - Returns: whether the state was saved in this boot.
    /// - Throws: ``MeterError/invalidState(_:)`` for a text that is not
    ///   such state, or state another source saved;
    ///   ``MeterError/alreadyStarted`` after the first sample or a restore;
    ///   ``MeterError/unknownBoot`` when this boot or the saved one cannot
    ///   be identified (then neither rule is safe: continuing could count
    ///   a reboot's counters as traffic, restarting could count traffic
    ///   twice).
    @discardableResult
    public func restore(_ saved: String) throws(MeterError) -> RestoreOutcome {
        let parsed = try SavedMeter(json: saved)
        guard parsed.source == source else {
            throw .invalidState("saved by the \(parsed.source.rawValue) source; this meter reads \(source.rawValue)")
        }
        guard let bootNow = Self.bootIdentity(), let bootThen = parsed.boot else { throw .unknownBoot }
        return try state.withLock { state throws(MeterError) -> RestoreOutcome in
            guard state.engine.samplesSeen == 0, state.restored == nil else { throw .alreadyStarted }
            let now = monotonicSeconds()
            let sameBoot = bootNow == bootThen
            if sameBoot, parsed.savedAt > now {
                // One boot's monotonic clock never goes back.
                throw .invalidState("saved at \(parsed.savedAt) s of this boot, which is later than now (\(now) s)")
            }
            state.engine.restore(parsed.series, sameBoot: sameBoot, now: now)
            state.restored = saved
            return sameBoot ? .sameBoot : .afterReboot
        }
    }

    /// This boot's identity: Linux's boot id, Apple's boot session UUID.
    static func bootIdentity() -> String? {
        #if canImport(Darwin)
        readBootSessionUUID()
        #else
        readBootID()
        #endif
    }
}

/// What ``TrafficMeter/restore(_:)`` did with the saved state.
public enum RestoreOutcome: String, Sendable, Hashable {
    /// Saved in this boot: the totals continue exactly, and the next
    /// sample counts the traffic since the save.
    case sameBoot
    /// Saved before a reboot: the next sample counts the counters in full
    /// (they started over at boot), and the totals are lower bounds.
    case afterReboot
}

/// Why a meter could not do what was asked.
public enum MeterError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A system call failed (opening the source, reading the counters).
    case system(String)
    /// The source does not exist on this platform.
    case unavailable(String)
    /// An argument is out of its range.
    case invalidArgument(String)
    /// The saved state cannot be restored: not JSON, not such state, a
    /// value out of range, or saved by another source.
    case invalidState(String)
    /// ``TrafficMeter/restore(_:)`` came after the first sample, or after
    /// another restore.
    case alreadyStarted
    /// This boot or the saved one has no identity, so saved totals cannot
    /// be continued safely.
    case unknownBoot

    /// The error in one line.
    public var description: String {
        switch self {
        case .system(let text): text
        case .unavailable(let text): text
        case .invalidArgument(let text): text
        case .invalidState(let text): "saved state: " + text
        case .alreadyStarted: "saved state is restored once, before the first sample"
        case .unknownBoot: "saved state: this boot or the saved one cannot be identified"
        }
    }
}
