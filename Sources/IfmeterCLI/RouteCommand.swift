import IfmeterCore
import IfmeterOutput
import IfmeterPipeline
import IfmeterRoute
import IfmeterSampling
import IfmeterSystem

/// `ifmeter route`: the kernel's routing decision for probe addresses, each
/// tunnel's underlay, and how much traffic went around the tunnels.
struct RouteCommand: Command {
    enum Options {
        static let over = Option(
            "--over", value: "duration", help: "Sample the counters over this window and estimate the traffic outside the tunnels.")
    }

    static let spec = CommandSpec(
        name: "ifmeter route",
        abstract: "Say where ordinary traffic leaves, and how much goes around the tunnels.",
        discussion: """
            For each probe address, asks the kernel which interface a packet to it
            would leave by (RTM_GETROUTE, as 'ip route get' does: policy rules
            count; no packet is sent), and whether that is a tunnel. Each tunnel's
            underlay is --underlay TUN=IF, else the route to --endpoint TUN=ADDR,
            else the best default route outside the tunnels. With --over, samples
            the counters over that window and estimates, per tunnel and direction,
            the traffic that used the underlay without the tunnel:
              outside = underlay bytes - tunnel bytes - tunnel packets x overhead
            floored at 0 (local network traffic, the tunnel's own control
            traffic, and leaks). The default overhead is 28 bytes (IPv4 and UDP;
            WireGuard: 60) plus the underlay's link header (14 on Ethernet-like
            links, 0 on raw-IP ones).

            SIGINT, SIGTERM or SIGQUIT end the --over window early: the
            estimate is over the time sampled.

            EXIT STATUS: 0 when no probe leaves outside a tunnel (a probe with no
            route leaves nowhere), 3 when one does, 1 on failure, 64 on usage errors.
            """,
        options: RouteOptions.specs + [
            Options.over.spec,
            CommonOptions.textOrJSON.spec,
        ] + CommonOptions.source)

    let setup: SamplingSetup
    let options: RouteSettings
    let window: Double?
    let json: Bool

    init(_ p: ParsedArguments) throws(CLIError) {
        json = try CommonOptions.format(p, CommonOptions.textOrJSON, allowed: ["text", "json"], default: "text") == "json"
        options = try RouteOptions.settings(p, command: "route")
        window = p.has(Options.over) ? try CommonOptions.duration(p, Options.over, default: 10) : nil
        var setup = try SamplingSetup(p, sampleLimit: window == nil ? 1 : 2, stopOnFailure: true)
        setup.configuration.interval = window ?? 1
        self.setup = setup
    }

    func run() throws(CLIError) {
        #if os(Linux)
        let router: Router
        do throws(SystemError) {
            router = try options.router(watch: false)
        } catch {
            throw .runtime("\(error)")
        }
        let pipeline = try setup.pipeline()
        let collector = RouteCollector()
        pipeline.add(sink: collector)
        if window != nil { StopSignal.install() }
        var waiter = WindowWaiter()
        pipeline.run(&waiter)
        if let failure = collector.failure { throw .runtime(failure.description) }
        guard let sample = collector.sample else { throw .runtime("no sample was taken") }
        let routes = RouteAnalysis(router: router, interfaces: sample.interfaces, options: options)
        let report: RouteReport
        do {
            report = try routes.report(deltas: window == nil ? nil : collector.deltas)
        } catch {
            throw .runtime(error.description)
        }
        try Output.put(
            json ? JSONWriter(indent: 2).string(report.json(window: window != nil)) + "\n" : Output.forPeople(report.text(window: window != nil)))
        if report.leaksOutside { throw .status(3) }
        #else
        throw .runtime("'route' needs Linux's netlink")
        #endif
    }
}

/// Waits out the --over window; a stop signal ends it early, and the
/// window's second sample is taken then (its deltas cover the time sampled).
struct WindowWaiter: PipelineWaiter {
    mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool {
        _ = sleepUntil(deadline)
        return true
    }
}

/// Keeps the first sample (names, kinds, indexes) and the deltas of the
/// window.
final class RouteCollector: PipelineSink {
    var sample: Sample?
    var deltas: [InterfaceDelta] = []
    var failure: SystemError?

    func receive(_ update: borrowing PipelineUpdate) {
        switch update.outcome {
        case .sampled:
            if sample == nil { sample = update.reading?.sample }
            if !update.isBaseline { deltas = update.deltas }
        case .failed(let error):
            failure = error
        default:
            break
        }
    }
}

/// The options `route` and `serve --probe` share, read into
/// `RouteSettings`: probes, underlays, endpoints, overheads, and the one
/// namespace whose routes are asked.
enum RouteOptions {
    static let defaultProbes = ["8.8.8.8", "2001:4860:4860::8888"]

    /// route and live ask about the default probes without --probe.
    static let specs = specs(probesByDefault: true)

    /// serve and export report routes only for the --probe addresses given.
    static let specsWithoutDefaultProbes = specs(probesByDefault: false)

    /// `--probe` of route and live, which ask about the default probes
    /// without it.
    static let probe = ListOption(
        "--probe", value: "address",
        help:
            "An address to ask the kernel's routing about (repeatable; no packet is sent). Default: \(defaultProbes.joined(separator: " and ")).")
    static let underlay = ListOption("--underlay", value: "tun=if", help: "The interface that carries a tunnel (repeatable).")
    static let endpoint = ListOption(
        "--endpoint", value: "tun=address", help: "A tunnel's remote endpoint: its underlay is the route to it (repeatable).")
    static let overhead = ListOption(
        "--overhead", value: "tun=bytes", help: "Bytes the underlay counts per tunnel packet beyond the tunnel's count (repeatable).")

    static func specs(probesByDefault: Bool) -> [OptionSpec] {
        [
            probesByDefault
                ? probe.spec
                : probe.helping(
                    "An address to ask the kernel's routing about (repeatable; no packet is sent). Without it, no route figures."
                ).spec,
            underlay.spec, endpoint.spec, overhead.spec,
        ]
    }

    /// The settings a command's options give.
    static func settings(_ p: ParsedArguments, command: String) throws(CLIError) -> RouteSettings {
        if p[CommonOptions.allNetns] { throw p.usage("'\(command)' asks one namespace's routing tables: give one --netns, not --all-netns") }
        let names = try CommonOptions.namespaceNames(p) ?? []
        if names.count > 1 { throw p.usage("'\(command)' asks one namespace's routing tables: give one --netns, not \(names.count)") }
        let (probes, underlays, endpoints, overheads) = try values(p)
        return RouteSettings(probes: probes, underlays: underlays, endpoints: endpoints, overheads: overheads, namespace: names.first)
    }

    /// Checks the route options' values where no route is followed (serve
    /// and export without --probe, live over several namespaces): a value
    /// they would refuse is refused there too, not passed over unread.
    static func check(_ p: ParsedArguments) throws(CLIError) {
        _ = try values(p)
    }

    /// The probes, underlays, endpoints and overheads (0 to 1024 bytes),
    /// each value checked.
    private static func values(_ p: ParsedArguments) throws(CLIError)
        -> ([(text: String, address: IPAddress)], [String: String], [String: IPAddress], [String: Int])
    {
        var probes: [(String, IPAddress)] = []
        for text in p.has(probe) ? p[probe] : Self.defaultProbes {
            guard let address = IPAddress(text) else {
                throw p.usage(
                    "invalid value '\(text)' for '\(probe.spec.long) <address>': expected an IPv4 or IPv6 address like 192.0.2.1 or 2001:db8::1")
            }
            probes.append((text, address))
        }
        func pairs(_ option: ListOption, _ what: String, example: String) throws(CLIError) -> [String: String] {
            var out: [String: String] = [:]
            for item in p[option] {
                let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
                // No interface name holds a space, nor does a number: a value
                // with one is refused, not matched against nothing.
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, !item.contains(where: \.isWhitespace) else {
                    throw p.usage(
                        "invalid value '\(item)' for '\(option.spec.long) <tun=\(what)>': expected TUNNEL=\(what.uppercased()) with no spaces, like \(example)"
                    )
                }
                out[parts[0]] = parts[1]
            }
            return out
        }
        let underlays = try pairs(underlay, "if", example: "tun0=eth0")
        var endpoints: [String: IPAddress] = [:]
        for (tunnel, text) in try pairs(endpoint, "address", example: "tun0=192.0.2.7") {
            guard let address = IPAddress(text) else {
                throw p.usage("invalid value '\(tunnel)=\(text)' for '--endpoint <tun=address>': '\(text)' is not an IPv4 or IPv6 address")
            }
            endpoints[tunnel] = address
        }
        var overheads: [String: Int] = [:]
        for (tunnel, text) in try pairs(overhead, "bytes", example: "tun0=42") {
            guard let bytes = Int(text), (0...1024).contains(bytes) else {
                throw p.usage("invalid value '\(tunnel)=\(text)' for '--overhead <tun=bytes>': expected a whole number of bytes from 0 to 1024")
            }
            overheads[tunnel] = bytes
        }
        return (probes, underlays, endpoints, overheads)
    }

}
