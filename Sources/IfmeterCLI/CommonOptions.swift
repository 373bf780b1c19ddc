import IfmeterCore
import IfmeterModel
import IfmeterPipeline
import IfmeterStore
import IfmeterSampling
import IfmeterSystem

/// Options several commands share, declared once.
enum CommonOptions {
    static let include = ListOption("--include", value: "glob", help: "Only interfaces whose name matches.")
    static let exclude = ListOption("--exclude", value: "glob", help: "Leave out interfaces whose name matches.")
    static let kind = ListOption(
        "--kind", value: "kinds", help: "Only these kinds: wifi, cellular, tunnel, ethernet, loopback, virtual, other.",
        choices: InterfaceKind.allCases.map(\.rawValue))

    static let filters: [OptionSpec] = [include.spec, exclude.spec, kind.spec]

    static let sourceOption = Option(
        "--source", value: "source", help: SourceKind.help, default: SourceKind.platformDefault.rawValue,
        choices: SourceKind.allCases.map(\.rawValue))
    static let sysfsRoot = Option("--sysfs-root", value: "path", help: "Read interface facts from this sysfs tree.", hidden: true)
    static let noSysfs = Flag("--no-sysfs", help: "Read no sysfs facts.", hidden: true)
    static let netns = ListOption(
        "--netns", value: "names",
        help:
            "Sample inside these named network namespaces (ip netns), from outside them; interfaces are NS/NAME. Entering a namespace needs CAP_SYS_ADMIN (root)."
    )
    static let allNetns = Flag(
        "--all-netns", help: "Sample this namespace and every named one, following those created and removed while running (needs CAP_SYS_ADMIN).")
    static let noLinkEvents = Flag(
        "--no-link-events", help: "Do not listen to link notifications (deleted interfaces' last traffic is then lost).", hidden: true)
    static let eventBuffer = Option("--event-buffer", value: "bytes", help: "Receive buffer of the link-notification socket.", hidden: true)
    static let forceLinkDump = Flag("--force-link-dump", help: "Use RTM_GETLINK instead of RTM_GETSTATS.", hidden: true)

    static let source: [OptionSpec] = [
        sourceOption.spec, kindOf.spec, sysfsRoot.spec, noSysfs.spec, netns.spec, allNetns.spec, noLinkEvents.spec, eventBuffer.spec,
        forceLinkDump.spec,
    ]

    /// `--kind-of PATTERN=KIND`: the user's word on a kind, before any
    /// filter (so `--kind cellular` finds a modem made cellular here).
    static let kindOf = ListOption(
        "--kind-of", value: "pattern=kind",
        help:
            "Say an interface's kind yourself, like 'wwan*=cellular' for a raw-IP modem that is a tun underneath; PATTERN is a glob on the name (NS/NAME in another namespace), KIND one of \(InterfaceKind.allCases.map(\.rawValue).joined(separator: ", ")). Shown with evidence user:--kind-of."
    )

    static func kindOverrides(_ p: ParsedArguments) throws(CLIError) -> KindOverrides {
        var rules: [KindOverrides.Rule] = []
        let kinds = InterfaceKind.allCases.map(\.rawValue).joined(separator: ", ")
        if p.has(kindOf), p[kindOf].isEmpty { throw p.usage("'\(kindOf.spec.long)' needs PATTERN=KIND, like 'wwan*=cellular'") }
        for text in p[kindOf] {
            switch KindOverrides.rule(text) {
            case .success(let rule): rules.append(rule)
            case .failure(.unknownKind(let kind)):
                throw p.usage("invalid value '\(text)' for '--kind-of <pattern=kind>': unknown kind '\(kind)'; kinds are \(kinds)")
            case .failure:
                throw p.usage(
                    "invalid value '\(text)' for '--kind-of <pattern=kind>': expected PATTERN=KIND, like 'wwan*=cellular', with KIND one of \(kinds)")
            }
        }
        return KindOverrides(rules)
    }

    static let maxRate = Option(
        "--max-rate", value: "rate",
        help: "Byte-rate ceiling used to tell a 32-bit wrap from a reset when a link's speed is unknown, like 10Gbit, 1Gbit or 125MB.",
        default: "10Gbit")

    static let interval = Option(
        "--interval", short: "-i", value: "duration", help: "Time between samples, like 500ms, 0.5s, 2m or 10.", default: "1s")

    /// `--format` of the commands that print text or JSON (list, sample,
    /// route).
    static let textOrJSON = Option("--format", value: "format", help: "text or json.", default: "text", choices: ["text", "json"])

    static let bits = Flag("--bits", help: "Show rates in bits per second.")

    static let seriesLifetime = Option(
        "--series-lifetime", value: "duration", help: "Forget an interface this long after it went away.", default: "5m")

    static let saveEvery = Option(
        "--save-every", value: "duration",
        help:
            "Save the state file this often; also at once when an interface is deleted, on SIGHUP and at a stop. Within a boot a restart loses nothing whatever the pace; a power cut loses at most this long's traffic, counted as a lower bound.",
        default: "5m")

    /// `--state` of the commands that sample (none without it).
    static let state = Option(
        "--state", value: "path",
        help: "Keep totals across restarts and reboots, and usage per local hour, in this SQLite file (none without it).")
    static let bootIDFile = Option("--boot-id-file", value: "path", help: "Read the boot id here.", hidden: true)

    /// The options of the commands that sample until stopped.
    static let monitoring: [OptionSpec] =
        [
            interval.spec, maxRate.spec, seriesLifetime.spec, state.spec, saveEvery.spec, RetentionOptions.keepHours.spec,
            RetentionOptions.keepDays.spec, bootIDFile.spec,
            CommandLinePath.allowForeignFiles.spec,
        ] + source + filters

    static func filter(_ p: ParsedArguments) throws(CLIError) -> InterfaceFilter {
        var kinds: Set<InterfaceKind>?
        if p.has(kind) {
            var set = Set<InterfaceKind>()
            for name in p[kind] {
                guard let value = InterfaceKind(rawValue: name) else {
                    throw p.usage(
                        "unknown kind '\(name)' for '\(kind.spec.long)'; kinds are \(InterfaceKind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                set.insert(value)
            }
            if set.isEmpty { throw p.usage("'\(kind.spec.long)' needs at least one kind") }
            kinds = set
        }
        return InterfaceFilter(include: p[include], exclude: p[exclude], kinds: kinds)
    }

    /// The namespace options that filter what was recorded (replay, usage):
    /// `--netns` keeps those namespaces' series, `--all-netns` keeps all.
    static let namespaceFilters: [OptionSpec] = [
        netns.helping("Only the interfaces of these namespaces.").spec, allNetns.helping("The interfaces of every namespace (the default).").spec,
    ]

    /// The namespaces `--netns` names (validated as names; nil without it).
    static func namespaceNames(_ p: ParsedArguments) throws(CLIError) -> [String]? {
        guard p.has(netns) else { return nil }
        if p[allNetns] { throw p.usage("'\(netns.spec.long)' and '\(allNetns.spec.long)' cannot be used together") }
        let names = p[netns]
        if names.isEmpty { throw p.usage("'\(netns.spec.long)' needs at least one name from 'ip netns list'") }
        for name in names where name.isEmpty || name.contains("/") || name == "." || name == ".." {
            throw p.usage("invalid value '\(name)' for '\(netns.spec.long) <names>': expected a name from 'ip netns list'")
        }
        return names
    }

    static func sourceKind(_ p: ParsedArguments) throws(CLIError) -> SourceKind {
        try validateNamespace(p)
        guard let text = p[sourceOption] else { return .platformDefault }
        guard let kind = SourceKind(rawValue: text) else {
            throw p.usage(
                "unknown source '\(text)' for '\(sourceOption.spec.long)'; use \(SourceKind.allCases.map(\.rawValue).joined(separator: " or "))")
        }
        return kind
    }

    static func samplerOptions(_ p: ParsedArguments) throws(CLIError) -> SamplerOptions {
        var options = SamplerOptions()
        if let root = p[sysfsRoot] { options.sysfs = SysfsReader(root: root) }
        if p[noSysfs] { options.sysfs = nil }
        options.forceLinkDump = p[forceLinkDump]
        options.kindOverrides = try kindOverrides(p)
        options.linkEvents = !p[noLinkEvents]
        if let bytes = try eventBufferBytes(p) { options.eventBufferBytes = bytes }
        if p[allNetns] {
            options.namespaces = .all
        } else if p.has(netns) {
            options.namespaces = .named(p[netns])
        }
        return options
    }

    /// Checks --netns before anything runs.
    static func validateNamespace(_ p: ParsedArguments) throws(CLIError) {
        guard let names = try namespaceNames(p) else { return }
        #if os(Linux)
        for name in names where !exists(NetworkNamespace.path(name)) {
            throw p.usage("no network namespace '\(name)' (no \(NetworkNamespace.path(name))); see 'ip netns list'")
        }
        #endif
    }

    /// Every duration option (`--interval`, `--every`, `--save-every`,
    /// `--series-lifetime`, `--duration`, `--over`): 1 ms to 365 days
    /// (`Units.durationRange`); anything else is a usage error that says so.
    static func duration(_ p: ParsedArguments, _ option: Option, default value: Double) throws(CLIError) -> Double {
        guard let text = p[option] else { return value }
        guard let seconds = Units.parseDuration(text), Units.durationRange.contains(seconds) else {
            throw p.usage(
                "invalid value '\(text)' for '\(option.spec.long) <duration>': expected a duration from \(Units.durationRangeText), like 500ms, 0.5s, 2m or 10"
            )
        }
        return seconds
    }

    /// The largest `--count`: a billion intervals (11 days at 1 ms, far
    /// longer at any other pace), so that N+1 samples is a count too.
    static let maxCount = 1_000_000_000
    /// The most rotated `--json-lines` files `--keep` keeps.
    static let maxKeep = 1000

    /// A whole number from 1 to `max` (`--count`, `--keep`, `--top`,
    /// `--max-connections`); anything else is a usage error that gives the
    /// range.
    static func positiveInt(_ p: ParsedArguments, _ option: Option, max: Int = Int.max) throws(CLIError) -> Int? {
        guard let text = p[option] else { return nil }
        guard let n = Int(text), n > 0, n <= max else {
            throw p.usage("invalid value '\(text)' for '\(option.spec.long) <n>': expected a whole number from 1 to \(max)")
        }
        return n
    }

    /// A size option: bytes within `range` (at most 2^63-1,
    /// `Units.parseSize`), like 10MB, 512KiB or 1048576; anything else is a
    /// usage error that gives the range.
    static func size(_ p: ParsedArguments, _ option: Option, _ range: ClosedRange<UInt64>, _ rangeText: String) throws(CLIError) -> UInt64? {
        guard let text = p[option] else { return nil }
        guard let bytes = Units.parseSize(text), range.contains(bytes) else {
            throw p.usage(
                "invalid value '\(text)' for '\(option.spec.long) <\(option.spec.valueName ?? "size")>': expected a size from \(rangeText), like 10MB, 512KiB or 1048576"
            )
        }
        return bytes
    }

    /// `--event-buffer`: 4 KiB to 1 GiB, what the link-notification
    /// socket's receive buffer can be made (the kernel doubles the figure).
    static func eventBufferBytes(_ p: ParsedArguments) throws(CLIError) -> Int32? {
        try size(p, eventBuffer, 4096...(1 << 30), "4KiB to 1GiB").map { Int32($0) }
    }

    /// `--max-rate`: 1 bit/s to 1000 Tbit/s (`Units.rateRange`).
    static func engineConfiguration(_ p: ParsedArguments, platform: Platform = .linux) throws(CLIError) -> EngineConfiguration {
        var configuration = EngineConfiguration(platform: platform)
        if let text = p[maxRate] {
            guard let rate = Units.parseRate(text), Units.rateRange.contains(rate) else {
                throw p.usage(
                    "invalid value '\(text)' for '\(maxRate.spec.long) <rate>': expected a rate from \(Units.rateRangeText), like 10Gbit, 1Gbit, 125MB or 1.25e9"
                )
            }
            configuration.defaultMaxBytesPerSecond = rate
        }
        return configuration
    }

    static func format(_ p: ParsedArguments, _ option: Option, allowed: [String], default value: String) throws(CLIError) -> String {
        guard let text = p[option] else { return value }
        guard allowed.contains(text) else {
            throw p.usage("unknown format '\(text)' for '\(option.spec.long)'; use \(allowed.joined(separator: " or "))")
        }
        return text
    }
}

/// `--keep-hours` and `--keep-days`: how long a state file keeps usage by
/// the hour and by the day before a save sums it into days and months
/// (issue 31, vnStat's HourlyDays and DailyDays).
enum RetentionOptions {
    static let keepHours = Option(
        "--keep-hours", value: "age",
        help:
            "Keep usage by the hour this long; at a save, the hours of older whole local days are summed into day rows. Like 92d, 13w or 1y; forever (or 0) keeps every hour. At least 2d.",
        default: "92d")
    static let keepDays = Option(
        "--keep-days", value: "age",
        help:
            "Keep usage by the day this long; at a save, the days of older whole local months are summed into month rows (kept forever). Like 10y or 400d; forever (or 0) keeps every day. At least 32d, so the current billing cycle stays in days.",
        default: "10y")

    /// Seconds in each unit an age may be written in, beyond a duration's.
    static let units: [(String, Double)] = [("w", 7 * 86400), ("y", 365 * 86400)]

    /// An age: `forever` or `0` (nil: keep all), or a duration (`92d`,
    /// `2160h`, `13w`, `1y`: a year is 365 days) from `least` to 100 years.
    static func age(_ p: ParsedArguments, _ option: Option, least: Double, why: String) throws(CLIError) -> Double?? {
        guard let text = p[option] else { return .none }
        if text == "forever" || text == "0" { return .some(nil) }
        var seconds = Units.parseDuration(text)
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            if !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(number) {
                seconds = value * factor
            }
        }
        guard let seconds, seconds.isFinite, (least...Retention.mostSeconds).contains(seconds) else {
            throw p.usage(
                "invalid value '\(text)' for '\(option.spec.long) <age>': expected forever (or 0) or an age from \(Int(least / 86400))d to 100y, like \(option.spec.defaultText ?? "92d"), 13w or 1y\(why)"
            )
        }
        return .some(seconds)
    }

    static func retention(_ p: ParsedArguments) throws(CLIError) -> Retention {
        var retention = Retention.defaults
        if case .some(let hours) = try age(p, keepHours, least: Retention.leastHours, why: "") { retention.hours = hours }
        let why = " (shorter would sum the current billing cycle's days into a month; plan gauges and usage --check read it by the day)"
        if case .some(let days) = try age(p, keepDays, least: Retention.leastDays, why: why) { retention.days = days }
        return retention
    }
}

/// What a sampling command reads from its options: the source, the
/// pipeline's configuration and the state file. `pipeline()` opens them.
struct SamplingSetup {
    var source: SourceKind
    var samplerOptions: SamplerOptions
    var configuration: PipelineConfiguration
    var state: StateOptions?

    /// Validates the shared options; `interval` and `--state` only where the
    /// command declares them.
    /// `idleDeltas`: false for commands that only add deltas up (serve,
    /// export): the pipeline then publishes only intervals where something
    /// happened.
    init(
        _ p: ParsedArguments, sampleLimit: Int? = nil, stopOnFailure: Bool = false, kernelStats: Bool = false,
        saveEvery: Double = StateOptions.defaultSaveEvery, idleDeltas: Bool = true
    ) throws(CLIError) {
        source = try CommonOptions.sourceKind(p)
        samplerOptions = try CommonOptions.samplerOptions(p)
        samplerOptions.kernelStats = kernelStats
        configuration = PipelineConfiguration(
            interval: try CommonOptions.duration(p, CommonOptions.interval, default: 1), filter: try CommonOptions.filter(p),
            engine: try CommonOptions.engineConfiguration(p),
            seriesLifetime: p.declares(CommonOptions.seriesLifetime)
                ? try CommonOptions.duration(p, CommonOptions.seriesLifetime, default: 300) : nil,
            sampleLimit: sampleLimit, stopOnFailure: stopOnFailure)
        configuration.idleDeltas = idleDeltas
        for option in [CommonOptions.saveEvery, RetentionOptions.keepHours, RetentionOptions.keepDays]
        where p.has(option) && !p.has(CommonOptions.state) {
            throw p.usage("'\(option.spec.long)' needs '\(CommonOptions.state.spec.long) FILE'")
        }
        if let path = p[CommonOptions.state] {
            let saveEvery = try CommonOptions.duration(p, CommonOptions.saveEvery, default: saveEvery)
            var options = StateOptions(path: path, host: hostName(), saveEvery: saveEvery)
            options.retention = try RetentionOptions.retention(p)
            if let file = p[CommonOptions.bootIDFile] { options.bootIDFile = file }
            state = options
        }
    }

    /// Opens the source (and the state file) and builds the pipeline.
    func pipeline() throws(CLIError) -> Pipeline {
        let counters: any CounterSource
        do {
            counters = try makeCounterSource(source, options: samplerOptions)
        } catch {
            if error.errno == Errno.notPermitted, error.call.hasPrefix("setns") {
                throw .runtime("cannot enter a network namespace (\(error.call): \(error.message)): that needs CAP_SYS_ADMIN; run ifmeter as root")
            }
            throw .runtime("cannot open the \(source.rawValue) source: \(error)")
        }
        var persistence: StatePersistence?
        if var state {
            state.path = try CommandLinePath.output(
                state.path, option: CommonOptions.state.spec.long, command: "ifmeter", writing: .inPlace, sideSuffixes: ["-wal", "-shm"],
                ownFolder: true)
            do {
                persistence = try state.open(wallTime: wallClock())
            } catch {
                throw CLIError.opening(error)
            }
        }
        let pipeline = Pipeline(source: counters, configuration: configuration, persistence: persistence)
        pipeline.add(sink: PatternWarning())
        return pipeline
    }
}

extension Pipeline {
    /// With a state file, says each failed save (once per cause), the
    /// first that works again, and a file written anew, through `log`.
    func sayStateSaves(_ log: Log) {
        guard persistence != nil else { return }
        add(sink: StateSaveLog(log: log))
    }

    /// Exit 1 when the last save failed: what was counted since the last
    /// good one is not in the file, and the exit status says so.
    func checkLastSave() throws(CLIError) {
        guard let status = persistence?.status, let line = StateSaveLog.finalFailure(status) else { return }
        throw .runtime(line)
    }
}

/// The `--include`/`--exclude` patterns no interface has matched yet, for
/// what reads many samples (replay) or stored names (usage).
struct UnmatchedPatterns {
    private var pending: InterfaceFilter

    init(_ filter: InterfaceFilter) {
        pending = InterfaceFilter(include: filter.include, exclude: filter.exclude)
    }

    /// Crosses off the patterns these interfaces match.
    mutating func see(_ keys: [SeriesKey]) {
        guard !pending.include.isEmpty || !pending.exclude.isEmpty else { return }
        let left = pending.unmatchedPatterns(in: keys)
        pending.include = left.filter { $0.option == CommonOptions.include.spec.long }.map(\.pattern)
        pending.exclude = left.filter { $0.option == CommonOptions.exclude.spec.long }.map(\.pattern)
    }

    /// One warning line per pattern that matched nothing, on stderr.
    func warn(what: String) {
        for pattern in pending.include { Output.error("Warning: --include '\(pattern)' matches no interface in \(what).") }
        for pattern in pending.exclude { Output.error("Warning: --exclude '\(pattern)' matches no interface in \(what).") }
    }
}

/// Says once, on stderr, which `--include`/`--exclude` patterns matched no
/// interface of the first sample: an empty table with no word is no answer.
final class PatternWarning: PipelineSink {
    func receive(_ update: borrowing PipelineUpdate) {
        for unmatched in update.unmatchedPatterns ?? [] {
            Output.error("Warning: \(unmatched.option) '\(unmatched.pattern)' matches no interface; see 'ifmeter list' for their names.")
        }
    }
}

extension CLIError {
    /// A state file a running command cannot use: its content is bad
    /// data (65, as `usage` says it, with the same words), anything else a
    /// start that failed (1).
    static func opening(_ error: StoreError) -> CLIError { error.isBadData ? .data(error.description) : .runtime(error.description) }

    /// A state file that cannot be read: missing or not a file at all (a
    /// FIFO, a folder) is a usage error (64: the argument names no state
    /// file), its content bad data (65), anything else, a permission
    /// problem included, a runtime failure (1: the file may be fine, this
    /// process may not read it).
    static func reading(_ error: StoreError, command: String) -> CLIError {
        switch error {
        case .missing, .notRegularFile: .usage(error.description, command: command)
        case _ where error.isBadData: .data(error.description)
        default: .runtime(error.description)
        }
    }
}

/// Prints what a command makes of each update, keeping every interface's
/// totals from the updates' changes (for running totals), the last
/// outcome, and the first failure of writing.
final class Printer: PipelineSink {
    private let render: (borrowing PipelineUpdate, TotalsView<InterfaceTotals>) -> String?
    private var totals = TotalsView<InterfaceTotals> { $0 }
    /// Only a printer of running totals keeps them: a copy of every
    /// interface's totals costs a snapshot of 4001 interfaces about 1 MiB.
    private let keepsTotals: Bool
    private(set) var lastOutcome: PipelineUpdate.Outcome?
    private(set) var failure: CLIError?
    let fd: Int32

    /// `render` gives the text for an update (nil prints nothing), with the
    /// totals as of it when `keepsTotals` (else an empty view).
    init(
        fd: Int32 = 1, keepsTotals: Bool = false, _ render: @escaping (borrowing PipelineUpdate, TotalsView<InterfaceTotals>) -> String?
    ) {
        self.fd = fd
        self.keepsTotals = keepsTotals
        self.render = render
    }

    func receive(_ update: borrowing PipelineUpdate) {
        lastOutcome = update.outcome
        if keepsTotals { totals.apply(update) }
        guard failure == nil, let text = render(update, totals) else { return }
        do {
            try Output.put(text, to: fd)
        } catch {
            failure = error
        }
    }

    /// Throws the sampling failure or the write failure that ended the run.
    func check() throws(CLIError) {
        if let failure { throw failure }
        if case .failed(let error)? = lastOutcome { throw .runtime("sampling failed: \(error)") }
    }
}
