#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterHTTP
import IfmeterPipeline
import IfmeterSampling
import Synchronization

/// The default port: not node_exporter's 9100. (Prometheus's list of
/// exporter ports, 9100-9999, is full, so no number there is unique.)
let defaultServePort: UInt16 = 9874

/// Which node_exporter families `serve` and `export --textfile` add.
enum CompatOption {
    static let spec = OptionSpec(
        "--compat", value: "node|node-only",
        help: "Also (node) or only (node-only) node_exporter's node_network_*_total{device} families, raw kernel counters.")

    static func families(_ p: ParsedArguments) throws(CLIError) -> ExpositionFamilies {
        guard let text = p.value("--compat") else { return .ifmeter }
        guard let families = ExpositionFamilies(rawValue: text), families != .ifmeter else {
            throw p.usage("unknown value '\(text)' for '--compat'; use node (add node_exporter's families) or node-only")
        }
        return families
    }
}

struct ServeCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter serve",
        abstract: "Serve Prometheus metrics over HTTP (text 0.0.4, or OpenMetrics when asked).",
        discussion: """
            A background sampler feeds the delta engine every interval; scrapes
            render its state (no netlink dump per scrape). Counters continue the
            kernel's from when ifmeter first saw each interface and never go down,
            across wraps, resets and recreated interfaces. Listens on loopback
            unless told otherwise; SIGINT or SIGTERM stop it.
            """,
        options: [
            OptionSpec("--listen", value: "address", help: "Address and port, like 127.0.0.1:9874, 0.0.0.0:9874 or [::]:9874.",
                       default: "127.0.0.1:\(defaultServePort)"),
            CompatOption.spec,
            OptionSpec("--max-connections", value: "n", help: "Open connections at most; idle ones are closed after 10 s.",
                       default: "1024"),
        ] + CommonOptions.monitoring)

    let address: ListenAddress
    let families: ExpositionFamilies
    let setup: SamplingSetup
    let limits: HTTPLimits

    init(_ p: ParsedArguments) throws(CLIError) {
        let listen = p.value("--listen") ?? "127.0.0.1:\(defaultServePort)"
        guard let address = ListenAddress(parsing: listen) else {
            throw p.usage("invalid value '\(listen)' for '--listen <address>': expected HOST:PORT like 127.0.0.1:9874 or [::]:9874")
        }
        self.address = address
        families = try CompatOption.families(p)
        setup = try SamplingSetup(p, kernelStats: families != .ifmeter, saveEvery: 10, idleDeltas: false)
        var limits = HTTPLimits()
        if let n = try CommonOptions.positiveInt(p, "--max-connections") {
            limits.connections = UInt32(min(n, 1 << 20))
            limits.perClient = max(1, limits.connections * 3 / 4)
        }
        self.limits = limits
    }

    func run() throws(CLIError) {
        StopSignal.block()
        raiseOpenFileLimit(to: Int(limits.connections) + 64)
        let pipeline = try setup.pipeline()
        let interval = setup.configuration.interval
        let cache = ScrapeCache(families: families, version: IfmeterCLI.version, interval: interval)
        let announce = "ifmeter serve: listening on http://\(address)/metrics (source \(pipeline.source.sourceName), every \(Units.duration(interval)))"
        pipeline.subscribe(ScrapeFeed(cache: cache) { Output.error(announce) })
        if let state = setup.state { pipeline.subscribe(PlanFeed(path: state.path) { cache.setPlans($0) }) }
        let server: HTTPServer
        do {
            let log = RateLimitedLog(prefix: "ifmeter serve: ", every: 10)
            server = try HTTPServer(address: address, limits: limits, logger: { line in log.write(line) }) { request in
                Self.respond(to: request, cache: cache)
            }
        } catch {
            throw .runtime("cannot listen on \(address): \(error.message). Choose another with --listen.")
        }
        // The server's threads have the signals blocked; this one takes them.
        StopSignal.install()
        var waiter = SignalWaiter()
        pipeline.run(&waiter)
        server.stop()
        Output.error("ifmeter serve: stopped")
    }

    static func respond(to request: HTTPRequest, cache: ScrapeCache) -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return HTTPResponse(status: 405, text: "405 Method Not Allowed: use GET or HEAD.\n", headers: [("Allow", "GET, HEAD")])
        }
        switch request.path {
        case "/metrics":
            let openMetrics = ExpositionNegotiation.prefersOpenMetrics(accept: request.headers["accept"])
            let gzip = acceptsGzip(request.headers["accept-encoding"])
            guard let rendered = cache.rendered(openMetrics: openMetrics) else {
                return HTTPResponse(status: 500, text: "500: rendering failed (zlib); see ifmeter's log\n")
            }
            var headers = [("Content-Type", rendered.contentType), ("Vary", "Accept, Accept-Encoding"), ("Cache-Control", "no-store")]
            if gzip {
                headers.append(("Content-Encoding", "gzip"))
                return HTTPResponse(status: 200, headers: headers, body: rendered.gzipped)
            }
            return HTTPResponse(status: 200, headers: headers, inflating: rendered.gzipped, size: rendered.size)
        case "/":
            return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", text: """
                <!DOCTYPE html>
                <html><head><title>ifmeter</title></head><body>
                <h1>ifmeter \(IfmeterCLI.version)</h1>
                <p>Network traffic per interface: <a href="/metrics">/metrics</a>.</p>
                <p>\(Caveat.sentence) \(Caveat.lowerBoundSentence)
                (see <code>ifmeter_interface_quality</code>).</p>
                </body></html>

                """)
        default:
            return HTTPResponse(status: 404, text: "404 Not Found: ifmeter serves /metrics.\n")
        }
    }

    /// Whether Accept-Encoding allows gzip (and does not refuse it, q=0).
    static func acceptsGzip(_ header: String?) -> Bool {
        guard let header else { return false }
        for part in header.split(separator: ",") {
            let fields = part.split(separator: ";")
            guard let coding = fields.first?.trimmingSpaces().lowercased(), coding == "gzip" || coding == "*" else { continue }
            let q = fields.dropFirst().compactMap { field -> Double? in
                let pair = field.split(separator: "=")
                return pair.count == 2 && pair[0].trimmingSpaces().lowercased() == "q" ? Double(pair[1].trimmingSpaces()) : nil
            }.first ?? 1
            if q > 0 { return true }
        }
        return false
    }
}

/// Raises the soft limit on open files toward `wanted` (within the hard
/// limit), so the connection limit, not the descriptor limit, decides.
func raiseOpenFileLimit(to wanted: Int) {
    var limit = rlimit()
    guard getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 else { return }
    let target = min(rlim_t(wanted), limit.rlim_max)
    if limit.rlim_cur < target {
        limit.rlim_cur = target
        _ = setrlimit(RLIMIT_NOFILE_VALUE, &limit)
    }
}

#if canImport(Glibc)
let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
let RLIMIT_NOFILE_VALUE = RLIMIT_NOFILE
#endif

/// Writes at most one line per `every` seconds to stderr, and says how many
/// it held back, so a flood of bad requests cannot flood the log.
final class RateLimitedLog: Sendable {
    private let prefix: String
    private let every: Double
    private let state = Mutex<(last: Double, suppressed: Int)>((-.infinity, 0))

    init(prefix: String, every: Double) {
        self.prefix = prefix
        self.every = every
    }

    func write(_ line: String) {
        let now = monotonicSeconds()
        let (print, suppressed) = state.withLock { state -> (Bool, Int) in
            guard now - state.last >= every else {
                state.suppressed += 1
                return (false, 0)
            }
            let held = state.suppressed
            state = (now, 0)
            return (true, held)
        }
        guard print else { return }
        Output.error(prefix + line + (suppressed > 0 ? " (and \(suppressed) more messages in the last \(Units.duration(every)))" : ""))
    }
}
