#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterSampling

/// Options several commands share, declared once.
enum CommonOptions {
    static let filters: [OptionSpec] = [
        OptionSpec("--include", value: "glob", help: "Only interfaces whose name matches.", repeatable: true),
        OptionSpec("--exclude", value: "glob", help: "Leave out interfaces whose name matches.", repeatable: true),
        OptionSpec(
            "--kind", value: "kinds",
            help: "Only these kinds: wifi, cellular, tunnel, ethernet, loopback, virtual, other.", repeatable: true),
    ]

    static let source: [OptionSpec] = [
        OptionSpec(
            "--source", value: "source", help: "Counter source: netlink (64-bit) or getifaddrs (32-bit, portable).",
            default: SourceKind.platformDefault.rawValue),
        OptionSpec("--sysfs-root", value: "path", help: "Read interface facts from this sysfs tree.", hidden: true),
        OptionSpec("--no-sysfs", help: "Read no sysfs facts.", hidden: true),
        OptionSpec("--netns", value: "name", help: "Sample inside this named network namespace (ip netns), from outside it."),
        OptionSpec("--no-link-events", help: "Do not listen to link notifications (deleted interfaces' last traffic is then lost).", hidden: true),
        OptionSpec("--event-buffer", value: "bytes", help: "Receive buffer of the link-notification socket.", hidden: true),
        OptionSpec("--force-link-dump", help: "Use RTM_GETLINK instead of RTM_GETSTATS.", hidden: true),
    ]

    static let maxRate = OptionSpec(
        "--max-rate", value: "rate",
        help: "Byte-rate ceiling used to tell a 32-bit wrap from a reset when a link's speed is unknown, like 10Gbit, 1Gbit or 125MB.",
        default: "10Gbit")

    static let interval = OptionSpec("--interval", short: "-i", value: "duration", help: "Time between samples, like 500ms, 0.5s, 2m or 10.", default: "1s")

    static let bits = OptionSpec("--bits", help: "Show rates in bits per second.")

    static func filter(_ p: ParsedArguments) throws(CLIError) -> InterfaceFilter {
        var kinds: Set<InterfaceKind>?
        let kindNames = p.list("--kind")
        if p.has("--kind") {
            var set = Set<InterfaceKind>()
            for name in kindNames {
                guard let kind = InterfaceKind(rawValue: name) else {
                    throw p.usage(
                        "unknown kind '\(name)' for '--kind'; kinds are \(InterfaceKind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                set.insert(kind)
            }
            if set.isEmpty { throw p.usage("'--kind' needs at least one kind") }
            kinds = set
        }
        return InterfaceFilter(include: p.list("--include"), exclude: p.list("--exclude"), kinds: kinds)
    }

    static func sourceKind(_ p: ParsedArguments) throws(CLIError) -> SourceKind {
        try validateNamespace(p)
        guard let text = p.value("--source") else { return .platformDefault }
        guard let kind = SourceKind(rawValue: text) else {
            throw p.usage("unknown source '\(text)' for '--source'; use netlink or getifaddrs")
        }
        return kind
    }

    static func samplerOptions(_ p: ParsedArguments) -> SamplerOptions {
        var options = SamplerOptions()
        if let root = p.value("--sysfs-root") { options.sysfs = SysfsReader(root: root) }
        if p.flag("--no-sysfs") { options.sysfs = nil }
        options.forceLinkDump = p.flag("--force-link-dump")
        options.linkEvents = !p.flag("--no-link-events")
        if let bytes = p.value("--event-buffer").flatMap(Int32.init) { options.eventBufferBytes = bytes }
        options.namespace = p.value("--netns")
        return options
    }

    /// Checks --netns before anything runs.
    static func validateNamespace(_ p: ParsedArguments) throws(CLIError) {
        guard let name = p.value("--netns") else { return }
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
            throw p.usage("invalid value '\(name)' for '--netns <name>': expected a name from 'ip netns list'")
        }
        #if os(Linux)
        guard access(NetworkNamespace.path(name), F_OK) == 0 else {
            throw p.usage("no network namespace '\(name)' (no \(NetworkNamespace.path(name))); see 'ip netns list'")
        }
        #endif
    }

    static func openSource(_ p: ParsedArguments) throws(CLIError) -> any CounterSource {
        let kind = try sourceKind(p)
        do {
            return try makeCounterSource(kind, options: samplerOptions(p))
        } catch {
            throw .runtime("cannot open the \(kind.rawValue) source: \(error)")
        }
    }

    static func duration(_ p: ParsedArguments, _ long: String, default value: Double) throws(CLIError) -> Double {
        guard let text = p.value(long) else { return value }
        guard let seconds = Units.parseDuration(text), seconds > 0 else {
            throw p.usage("invalid value '\(text)' for '\(long) <duration>': expected a positive duration like 500ms, 0.5s, 2m or 10")
        }
        return seconds
    }

    static func positiveInt(_ p: ParsedArguments, _ long: String) throws(CLIError) -> Int? {
        guard let text = p.value(long) else { return nil }
        guard let n = Int(text), n > 0 else {
            throw p.usage("invalid value '\(text)' for '\(long) <n>': expected a positive whole number")
        }
        return n
    }

    static func engineConfiguration(_ p: ParsedArguments, platform: Platform = .linux) throws(CLIError) -> EngineConfiguration {
        var configuration = EngineConfiguration(platform: platform)
        if let text = p.value("--max-rate") {
            guard let rate = Units.parseRate(text) else {
                throw p.usage("invalid value '\(text)' for '--max-rate <rate>': expected a rate like 10Gbit, 1Gbit, 125MB or 1.25e9")
            }
            configuration.defaultMaxBytesPerSecond = rate
        }
        return configuration
    }

    static func format(_ p: ParsedArguments, allowed: [String], default value: String) throws(CLIError) -> String {
        guard let text = p.value("--format") else { return value }
        guard allowed.contains(text) else {
            throw p.usage("unknown format '\(text)' for '--format'; use \(allowed.joined(separator: " or "))")
        }
        return text
    }

    /// Takes one sample and the link events that came with it, filtered; a
    /// sampling failure is a runtime error.
    static func take(_ source: any CounterSource, _ filter: InterfaceFilter) throws(CLIError) -> (events: LinkEvents, sample: Sample) {
        do {
            let (events, sample) = try source.read()
            return (events.filtered(filter), filtered(sample, filter))
        } catch {
            throw .runtime("sampling failed: \(error)")
        }
    }

    /// Applies the name and kind filter to a sample.
    static func filtered(_ sample: Sample, _ filter: InterfaceFilter) -> Sample {
        guard !filter.isEmpty else { return sample }
        var s = sample
        s.interfaces = sample.interfaces.filter {
            filter.admits(name: $0.name, kind: $0.kind ?? NameRules.classify($0.name).kind)
        }
        return s
    }
}
