/// A state file as the reports describe it: where it is, since when its
/// totals count, and whether this start restored totals saved in the same
/// boot.
public struct StateInfo: Sendable {
    public var path: String
    /// Unix time the totals count from.
    public var since: Double
    public var restored: Bool
    public var sameBoot: Bool

    public init(path: String, since: Double, restored: Bool, sameBoot: Bool) {
        self.path = path
        self.since = since
        self.restored = restored
        self.sameBoot = sameBoot
    }
}

/// What a state file says of its writer, as `usage` reports it: when it
/// last saved, how often it saves, and whether it still writes. A figure
/// read from the file is as of its last save; when that is older than two
/// save intervals, nothing has been saved for a while (the writer was
/// killed, hung or stopped), and the report says so first.
public struct SaveStatus: Sendable, Hashable {
    public enum Writer: String, Sendable {
        /// An ifmeter writes the file now.
        case running
        /// The last writer stopped cleanly.
        case stopped
        /// The last writer stopped without a clean stop (kill -9, a crash,
        /// a power cut): nothing it counted after its last save is here.
        case stoppedUncleanly = "stopped-uncleanly"
        /// No sampler ever wrote the file (only `plan`).
        case none
    }

    /// Unix time of the last save; nil when none was made.
    public var savedAt: Double?
    /// Seconds between the writer's saves; nil when it did not say (a file
    /// from before ifmeter recorded it).
    public var saveEvery: Double?
    public var writer: Writer
    /// Unix time of the last clean stop.
    public var stoppedAt: Double?

    public init(savedAt: Double?, saveEvery: Double?, writer: Writer, stoppedAt: Double? = nil) {
        self.savedAt = savedAt
        self.saveEvery = saveEvery
        self.writer = writer
        self.stoppedAt = stoppedAt
    }

    /// The save interval a staleness judgment uses: the writer's, else the
    /// default of serve and live before ifmeter recorded it (10 s). An
    /// interval no ifmeter writes (not 1 ms to 365 days: NaN, 0, 1e308) is
    /// no interval: the default judges, so no file is current for ever.
    public var interval: Double {
        guard let saveEvery, Units.durationRange.contains(saveEvery) else { return 10 }
        return saveEvery
    }

    /// How far in the future a save time may be before the clocks are said
    /// to disagree: the writer and `usage` read the same machine's clock,
    /// so more than a few seconds is a clock that was ahead or stepped.
    public static let futureTolerance = 5.0

    /// How the last save stands against now.
    public enum Standing: Sendable, Hashable {
        /// No save was made.
        case never
        /// Within two save intervals.
        case current
        /// Older than two save intervals.
        case stale
        /// Later than now by more than `futureTolerance`, by this many
        /// seconds: the writer's clock was ahead, or this one stepped back.
        case ahead(Double)
        /// No time a calendar holds (NaN, infinite, past the years 0001 to
        /// 9999): a crafted or damaged file.
        case unreadable
    }

    public func standing(now: Double) -> Standing {
        guard let savedAt else { return .never }
        guard Self.readable(savedAt) else { return .unreadable }
        if savedAt - now > Self.futureTolerance { return .ahead(savedAt - now) }
        return now - savedAt > 2 * interval ? .stale : .current
    }

    /// What happened since the last save may not be in the file: it is
    /// older than two save intervals, or later than now, or no time at all.
    public func isStale(now: Double) -> Bool {
        switch standing(now: now) {
        case .never, .current: false
        case .stale, .ahead, .unreadable: true
        }
    }

    /// One sentence: when the file was last saved, and by whom.
    public func sentence(now: Double, zone: LocalZone) -> String {
        guard let savedAt else { return "Never saved by serve, live or export: no traffic has been counted in it yet." }
        let when: String
        switch standing(now: now) {
        case .unreadable: when = "at a time that cannot be read (\(savedAt))"
        case .ahead(let ahead): when = "\(Self.stamp(savedAt, zone)) (\(Units.duration(ahead)) in the future)"
        default: when = "\(Self.stamp(savedAt, zone)) (\(savedAt >= now ? "just now" : Units.duration(now - savedAt) + " ago"))"
        }
        let pace = saveEvery.map { " every \(Units.duration($0))" } ?? ""
        switch writer {
        case .running:
            return "Last saved \(when) by the ifmeter writing it now, which saves\(pace.isEmpty ? " periodically" : pace)."
        case .stopped:
            return "Last saved \(when), when ifmeter stopped cleanly: nothing has been counted since."
        case .stoppedUncleanly:
            return "Last saved \(when); the ifmeter that wrote it stopped without a clean stop (killed, crashed or a power cut): "
                + "what it counted after that save is not here, and nothing has been counted since."
        case .none:
            return "Last saved \(when)."
        }
    }

    /// The warning when the last save is not current (stale, in the
    /// future, or no time); nil otherwise.
    public func warning(now: Double, zone: LocalZone) -> String? {
        guard let savedAt else { return nil }
        switch standing(now: now) {
        case .never, .current:
            return nil
        case .unreadable:
            return "WARNING: the state file's last save time cannot be read (\(savedAt)): how current these figures are is unknown."
        case .ahead(let ahead):
            return "WARNING: these figures are as of \(Self.stamp(savedAt, zone)), \(Units.duration(ahead)) in the future: "
                + "the clock of the ifmeter that saved them was ahead, or this clock stepped back since; how current they are is unknown."
        case .stale:
            let age = Units.duration(now - savedAt)
            let why: String =
                switch writer {
                case .running:
                    "the ifmeter writing this file has not saved for \(age), more than two of its save intervals (\(Units.duration(interval))): it may be hung"
                case .stopped: "ifmeter stopped \(age) ago; nothing has been counted since"
                case .stoppedUncleanly:
                    "the ifmeter that wrote this file stopped without a clean stop \(age) ago or less; nothing has been saved since"
                case .none: "nothing has been saved for \(age)"
                }
            return "WARNING: these figures are as of \(Self.stamp(savedAt, zone)): \(why)."
        }
    }

    /// A time a calendar holds, as `stamp` prints it.
    static func readable(_ time: Double) -> Bool { time.isFinite && abs(time) < 1e12 }

    /// RFC 3339 local time; a time no calendar holds (a crafted file's)
    /// is said to be unknown rather than trapping.
    static func stamp(_ time: Double, _ zone: LocalZone) -> String {
        guard readable(time) else { return "an unknown time" }
        return zone.rfc3339(Int64(time.rounded(.down)))
    }

    public func json(now: Double, zone: LocalZone, path: String) -> JSONValue {
        .object([
            "path": .string(path),
            "saved_at": savedAt.flatMap { Self.readable($0) ? .string(Self.stamp($0, zone)) : nil } ?? .null,
            "save_every_seconds": saveEvery.flatMap { $0.isFinite && $0 > 0 ? .number($0) : nil } ?? .null,
            "writer": .string(writer.rawValue),
            "stale": .bool(isStale(now: now)),
            "note": .string(warning(now: now, zone: zone) ?? sentence(now: now, zone: zone)),
        ])
    }
}

/// How the saves of a running writer go, as its metrics say it
/// (`ifmeter_state_*`): a save that fails is counted and said, never
/// silent.
public struct StateHealth: Sendable, Hashable {
    /// Saves that worked, and saves that failed (each retried).
    public var saves: UInt64 = 0
    public var failures: UInt64 = 0
    /// Unix time of the last save that worked (this run's); nil before one.
    public var lastSaveTime: Double?
    /// The last save failed (and no later one worked yet).
    public var failing = false
    /// Times the state file was found deleted or replaced under the writer
    /// and written anew at its path.
    public var recreations: UInt64 = 0
    /// Seconds between saves, and between tries of a failing one.
    public var saveEvery: Double
    public var retryEvery: Double

    public init(saveEvery: Double, retryEvery: Double) {
        self.saveEvery = saveEvery
        self.retryEvery = retryEvery
    }
}
