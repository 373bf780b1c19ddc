import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterServe
import IfmeterPipeline
import IfmeterRemoteWrite
import IfmeterRoute
import IfmeterSampling
import IfmeterSystem

/// The default port: not node_exporter's 9100. (Prometheus's list of
/// exporter ports, 9100-9999, is full, so no number there is unique.)
let defaultServePort: UInt16 = 9874

/// Which node_exporter families `serve` and `export --textfile` add.
enum CompatOption {
    static let compat = Option(
        "--compat", value: "node|node-only",
        help: "Also (node) or only (node-only) node_exporter's netdev and netclass families (node_network_*{device}), as its collectors serve them.",
        choices: ExpositionFamilies.allCases.filter { $0 != .ifmeter }.map(\.rawValue))

    static func families(_ p: ParsedArguments) throws(CLIError) -> ExpositionFamilies {
        guard let text = p[compat] else { return .ifmeter }
        guard let families = ExpositionFamilies(rawValue: text), families != .ifmeter else {
            throw p.usage("unknown value '\(text)' for '\(compat.spec.long)'; use node (add node_exporter's families) or node-only")
        }
        return families
    }
}

struct ServeCommand: Command {
    enum Options {
        static let listen = Option(
            "--listen", value: "address",
            help:
                "Address and port: 127.0.0.1:9874, localhost:9874, [::1]:9874, :9874 for every address, or none (with --remote-write: push only).",
            default: "127.0.0.1:\(defaultServePort)")
        static let maxConnections = Option(
            "--max-connections", value: "n", help: "Open connections; past it the oldest one still waiting for its request is closed.",
            default: "1024")
        static let webConfig = Option(
            "--web-config", value: "file", help: "TLS and basic auth, in Prometheus exporter-toolkit's web config format (see above).")
        static let allowHost = ListOption(
            "--allow-host", value: "name",
            help:
                "Also answer requests for this name (the Host a scraper or browser gives, like metrics.example.org); * answers any (see above).")
    }

    static let spec = CommandSpec(
        name: "ifmeter serve",
        abstract: "Serve Prometheus metrics over HTTP (text 0.0.4, or OpenMetrics when asked).",
        discussion: """
            A background sampler feeds the delta engine every interval; scrapes
            render its state (no netlink dump per scrape). Counters continue the
            kernel's from when ifmeter first saw each interface and never go down,
            across wraps, resets and recreated interfaces. Listens on loopback
            unless told otherwise; SIGINT, SIGTERM or SIGQUIT stop it (after a
            last save), SIGHUP saves the state and it goes on.

            --web-config takes Prometheus exporter-toolkit's web config (YAML):
              tls_server_config:
                cert_file: server.crt        # PEM; paths relative to the file
                key_file: server.key
                client_auth_type: RequireAndVerifyClientCert  # or NoClientCert,
                client_ca_file: clients-ca.crt               # VerifyClientCertIfGiven
                min_version: TLS12           # TLS12 (default) or TLS13; max_version too
              basic_auth_users:
                prometheus: '$2y$10$...'     # bcrypt: htpasswd -nBC 10 prometheus
            Not supported (an error): http_server_config, cipher_suites,
            curve_preferences, client_allowed_sans, inline cert/key, RequestClientCert,
            RequireAnyClientCert, TLS10/TLS11. The file is checked before serving.
            bcrypt costs 4 to 16; passwords are checked off the request path, a
            remembered success at once; past 5 failed checks a second (a burst of
            10) from one address, 429.

            Limits: a whole request within 5 s of connecting (or of the previous
            response), however it trickles; at --max-connections (a quarter of them
            per client address) a new connection closes the oldest one still
            waiting for its request; idle connections close after 10 s; headers up
            to 32 KiB (431), query strings up to 1024 bytes and 32 parameters (414),
            bodies up to 4 KiB (413); plain-text responses being sent hold 32 MiB
            at most together (past it the oldest one's connection is closed).

            Against DNS rebinding (a web page whose name was pointed at this
            machine reading its answers), a request is answered only when its Host
            is an IP address, a name without a dot (localhost), the --listen name,
            the machine's host name or its canonical name, or an --allow-host name
            (port, case and a trailing dot aside), or has no Host (HTTP/1.0); any
            other gets 421 and one line.
            """,
        options: [
            ConfigFile.option.spec,
            Options.listen.spec,
            CompatOption.compat.spec,
            Options.maxConnections.spec,
            Options.webConfig.spec,
            Options.allowHost.spec,
        ] + RemoteWriteOptions.specs + RouteOptions.specsWithoutDefaultProbes + CommonOptions.monitoring)

    /// Nil with `--listen none` (push only).
    let address: ListenAddress?
    let remoteWrite: RemoteWriteOptions?
    let families: ExpositionFamilies
    let setup: SamplingSetup
    let limits: HTTPLimits
    /// `--probe` and the tunnel options: route families in the exposition.
    let routes: RouteSettings?
    let webConfig: WebConfig?
    let webConfigPath: String?
    /// `--allow-host`: names answered beside the addresses and the machine's.
    let allowedHosts: [String]
    /// With `--config`: the file and command line to read again on SIGHUP.
    var reload: ConfigReload?

    init(_ p: ParsedArguments) throws(CLIError) {
        let listen = p[Options.listen] ?? "127.0.0.1:\(defaultServePort)"
        let address = listen == "none" ? nil : ListenAddress(parsing: listen)
        guard address != nil || listen == "none" else {
            throw p.usage(
                "invalid value '\(listen)' for '--listen <address>': expected HOST:PORT, [IPv6]:PORT or :PORT, like 127.0.0.1:9874, localhost:9874, [::1]:9874 or :9874"
            )
        }
        self.address = address
        families = try CompatOption.families(p)
        setup = try SamplingSetup(p, kernelStats: families != .ifmeter, saveEvery: StateOptions.defaultSaveEvery, idleDeltas: false)
        remoteWrite = try RemoteWriteOptions(p, statePath: setup.state?.path)
        if address == nil, remoteWrite == nil { throw p.usage("'--listen none' serves nothing; add '--remote-write URL' to push instead") }
        var limits = HTTPLimits()
        // Any whole number from 1 up; past 2^20 it is 2^20 (file descriptors).
        if let n = try CommonOptions.positiveInt(p, Options.maxConnections) {
            limits.connections = UInt32(min(n, 1 << 20))
            limits.perClient = max(1, limits.connections / 4)
        }
        self.limits = limits
        allowedHosts = p[Options.allowHost]
        for name in allowedHosts where name != "*" && AllowedHosts.normalized(name) == nil {
            throw p.usage(
                "invalid value '\(TerminalText.escaped(name))' for '--allow-host <name>': expected a host name like metrics.example.org (letters, digits, '-' and '_' between dots), or * for any"
            )
        }
        if !p.has(RouteOptions.probe) { try RouteOptions.check(p) }
        routes = p.has(RouteOptions.probe) ? try RouteOptions.settings(p, command: "serve --probe") : nil
        webConfigPath = p[Options.webConfig]
        webConfig = try webConfigPath.map { path throws(CLIError) in
            do throws(WebConfig.LoadError) {
                return try WebConfig.load(path, foreignAllowed: CommandLinePath.allowForeign)
            } catch {
                switch error {
                case .unreadable(let cause):
                    throw .usage(
                        "cannot read the web config '\(path)': \(cause.message); name a readable YAML file with '--web-config'",
                        command: Self.spec.name)
                case .invalid(let location, let message):
                    throw .data("web config \(location): \(message)")
                case .refused(let location, let message):
                    throw CommandLinePath.refusedSettings("the web config", at: location, message)
                }
            }
        }
    }

    func run() throws(CLIError) {
        if let path = webConfigPath, webConfig?.asksForNothing == true {
            Output.error(
                "Warning: the web config \(path) names neither tls_server_config nor basic_auth_users: serving plain HTTP without authentication, as without --web-config."
            )
        }
        // TLS settings GnuTLS refuses are the file's fault: found before sampling starts.
        if let tls = webConfig?.tls, let path = webConfigPath {
            do throws(SystemError) {
                try HTTPServer.loadLibrary()
            } catch {
                throw .runtime(error.message)
            }
            do throws(SystemError) {
                try HTTPServer.check(tls)
            } catch {
                throw .data("web config \(path): tls_server_config: \(error.message); fix the files it names")
            }
        }
        StopSignal.block()
        // libmicrohttpd's own limit sits a quarter above (see HTTPServer).
        raiseOpenFileLimit(to: Int(limits.connections) * 5 / 4 + 128)
        // The queue's folders are checked (and made) before the state file
        // is opened: one another user controls stops the start with nothing
        // written.
        try remoteWrite?.makeQueueFolder()
        let pipeline = try setup.pipeline()
        let interval = setup.configuration.interval
        let cache = ScrapeCache(families: families, version: IfmeterCLI.version, revision: buildRevision, interval: interval)
        pipeline.add(enricher: ProcessFeed(cache: cache))
        #if os(Linux)
        // Enrichers run before every sink: a generation's render has its
        // routes and plans.
        var routeFeed: RouteFeed?
        if let routes {
            routeFeed = try Self.routeFeed(routes, persistence: pipeline.persistence) { cache.setRoutes($0) }
            routeFeed.map { pipeline.add(enricher: $0) }
        }
        if let persistence = pipeline.persistence {
            pipeline.add(enricher: PlanFeed(persistence: persistence, deliver: { cache.setPlans($0) }, aliases: { cache.setAliases($0) }))
        }
        #endif
        let scheme = webConfig?.tls == nil ? "http" : "https"
        let auth = (webConfig?.users.isEmpty ?? true) ? "" : ", basic auth"
        let pushing = remoteWrite.map { " and pushing to " + $0.urls.map(RemoteWriter.withoutCredentials).joined(separator: ", ") } ?? ""
        let target = address.map { "listening on \(scheme)://\($0)/metrics\(auth)" + pushing } ?? "pushing only, to " + pushing.dropFirst(16)
        let announce = "ifmeter serve: \(target) (source \(pipeline.source.sourceName), every \(Units.duration(interval)))"
        pipeline.add(sink: ScrapeFeed(cache: cache) { Output.error(announce) })
        // The dashboard's figures: the same totals, their rates, pushed to
        // open pages each sample.
        // (It sleeps, holding nothing, until a page or a script asks.)
        let board = LiveBoard(interval: interval, version: IfmeterCLI.version, cache: cache)
        pipeline.add(sink: LiveBoardFeed(board: board))
        let statePath = setup.state?.path
        // State saves are said once per change already; every other line
        // at most once per 10 s from each place that says it, so a flood
        // of bad requests cannot flood the log, nor hide a line said
        // elsewhere (a failed push does not hide a sample not queued).
        pipeline.sayStateSaves(Log.everyLine(prefix: "ifmeter serve: ") { Output.error($0) })
        let log = Log(prefix: "ifmeter serve: ", every: 10) { Output.error($0) }
        // The tables are the file plus what was counted since its last save.
        let unsaved = pipeline.persistence?.unsaved
        let usage = statePath.map { path in
            { @Sendable (query: UsageQuery) in UsageEndpoint.tables(state: path, query: query, unsaved: unsaved, log: log) }
        }
        let usageImage = statePath.map { path in { @Sendable (query: UsageQuery) in UsageEndpoint.image(state: path, query: query) } }
        let pushSet = RemoteWriteSet()
        do {
            if let started = try remoteWrite?.started(pipeline: pipeline, cache: cache, sampleInterval: interval, log: log) {
                pushSet.writers = started.writers
                pushSet.feed = started.feed
            }
        } catch {
            pipeline.persistence?.abandon()
            throw error
        }
        // After the loop's last push (and the stale markers of every series),
        // a moment for what is in memory to go out, then the rest to disk.
        defer { pushSet.stop() }
        // The reload's own lines: 10 per 10 s from each place that says one.
        let rereader = reload.map { reload in
            ServeConfigReload(
                reload: reload,
                reloader: ServeReloader(
                    path: reload.path, pushing: pushSet, webConfig: webConfig,
                    log: Log(prefix: "ifmeter serve: ", every: 10, burst: 10) { Output.error($0) },
                    publishRoutes: { [cache] in cache.setRoutes($0) }), cache: cache, sampleInterval: interval, log: log)
        }
        #if os(Linux)
        rereader?.reloader.routeFeed = routeFeed
        #endif
        // The family is there from the first render, before any update.
        cache.setHTTPClosed(HTTPConnectionCounts(deadline: 0, idle: 0, evicted: 0))
        let users = webConfig?.users ?? [:]
        let authenticator: BasicAuthenticator?
        do throws(SystemError) {
            authenticator = users.isEmpty ? nil : try BasicAuthenticator(users: users)
        } catch {
            pipeline.persistence?.abandon()
            throw .runtime("cannot set up basic auth: \(error.description)")
        }
        var server: HTTPServer?
        if let address {
            let routes = ServeRoutes(
                cache: cache, version: IfmeterCLI.version, board: board, usage: usage, usageImage: usageImage, log: log)
            let hosts = AllowedHosts(configured: allowedHosts, listen: address)
            hosts.lookUpCanonicalName()
            do {
                server = try HTTPServer(
                    address: address, limits: limits, tls: webConfig?.tls,
                    authenticator: authenticator, hosts: hosts,
                    log: log,
                    serverError: routes.countServerError(path:status:),
                    handler: routes.respond(to:))
            } catch {
                // A failed start leaves no state file of its own behind.
                pipeline.persistence?.abandon()
                throw .runtime("cannot listen on \(address): \(error.message). Choose another with --listen.")
            }
        }
        if let server { pipeline.add(enricher: HTTPClosedFeed(server: server, cache: cache)) }
        rereader?.reloader.server = server
        // The server's threads have the signals blocked; this one takes
        // them. SIGHUP saves the state and serve goes on.
        StopSignal.install(hangup: true)
        var waiter = SignalWaiter(hangup: { pipeline in
            pipeline.saveNow()
            rereader?.reload(pipeline)
        })
        pipeline.run(&waiter)
        server?.stop()
        Output.error("ifmeter serve: stopped")
        try pipeline.checkLastSave()
    }

    #if os(Linux)
    /// The route feed of `--probe`, continuing the state file's outside
    /// totals; a router that cannot be opened is a runtime failure (1).
    static func routeFeed(
        _ routes: RouteSettings, persistence: StatePersistence?, publish: @escaping (RouteExposition) -> Void
    ) throws(CLIError) -> RouteFeed {
        do throws(SystemError) {
            return try RouteFeed(options: routes, persistence: persistence, publish: publish)
        } catch {
            throw .runtime("\(error)")
        }
    }
    #endif
}

/// SIGHUP under `--config`: the file and command line read again (every
/// value checked as at start) and turned into what a reload can change,
/// typed (`ServeReload`), which IfmeterServe's `ServeReloader` applies;
/// the options it took then count as running. A file that no longer
/// reads is said, and nothing changes.
final class ServeConfigReload {
    var reload: ConfigReload
    let reloader: ServeReloader
    let cache: ScrapeCache
    let sampleInterval: Double
    /// serve's log, for the remote writers a reload starts.
    let log: Log
    private var remoteWriteFile: [UInt8]?

    init(reload: ConfigReload, reloader: ServeReloader, cache: ScrapeCache, sampleInterval: Double, log: Log) {
        self.reload = reload
        self.reloader = reloader
        self.cache = cache
        self.sampleInterval = sampleInterval
        self.log = log
        remoteWriteFile = Self.contents(reload.running[RemoteWriteOptions.remoteWriteConfig])
    }

    /// An error's line without its "Error: ".
    static func words(_ error: CLIError) -> String {
        error.line.hasPrefix("Error: ") ? String(error.line.dropFirst(7)) : error.line
    }

    static func contents(_ path: String?) -> [UInt8]? {
        guard let path else { return nil }
        return (try? readTextFile(path)).map { Array($0.utf8) }
    }

    func reload(_ pipeline: Pipeline) {
        let fresh: (serve: ServeCommand, parsed: ParsedArguments, changed: Set<String>)
        do {
            fresh = try reload.reread()
        } catch {
            reloader.failed(Self.words(error))
            return
        }
        var change = ServeReload()
        change.restart = fresh.changed.subtracting(ConfigReload.filterOptions).subtracting(ConfigReload.remoteWriteOptions)
            .subtracting(ConfigReload.retentionOptions).subtracting(ConfigReload.webConfigOptions).subtracting(ConfigReload.kindOptions)
        var adopted = Set<String>()
        if !fresh.changed.isDisjoint(with: ConfigReload.kindOptions) {
            // Checked by reread (the file built serve).
            if let overrides = try? CommonOptions.kindOverrides(fresh.parsed) {
                change.kindOverrides = overrides
                adopted.formUnion(ConfigReload.kindOptions)
            }
        }
        if !fresh.changed.isDisjoint(with: ConfigReload.filterOptions) {
            change.filter = fresh.serve.setup.configuration.filter
            adopted.formUnion(ConfigReload.filterOptions)
        }
        let fileNow = Self.contents(fresh.parsed[RemoteWriteOptions.remoteWriteConfig])
        if !fresh.changed.isDisjoint(with: ConfigReload.remoteWriteOptions) || fileNow != remoteWriteFile {
            let options = fresh.serve.remoteWrite
            change.remoteWrite = (
                start: { [cache, sampleInterval, log] pipeline throws(ServeReload.Failure) in
                    do throws(CLIError) {
                        try options?.makeQueueFolder()
                        return try options?.started(pipeline: pipeline, cache: cache, sampleInterval: sampleInterval, log: log)
                    } catch {
                        throw ServeReload.Failure(Self.words(error))
                    }
                }, urls: options?.urls.map(RemoteWriter.withoutCredentials) ?? []
            )
            remoteWriteFile = fileNow
            adopted.formUnion(ConfigReload.remoteWriteOptions)
        }
        #if os(Linux)
        if !fresh.changed.isDisjoint(with: ConfigReload.routeOptions) {
            change.routesChanged = true
            change.routes = fresh.serve.routes
            change.restart.subtract(ConfigReload.routeOptions)
            adopted.formUnion(ConfigReload.routeOptions)
        }
        #endif
        if !fresh.changed.isDisjoint(with: ConfigReload.retentionOptions) {
            let keeps = [RetentionOptions.keepHours, RetentionOptions.keepDays].map { option in
                "\(option.spec.long.dropFirst(2)) \(fresh.parsed[option] ?? option.spec.defaultText ?? "")"
            }
            change.retention = (fresh.serve.setup.state?.retention ?? .defaults, keeps.joined(separator: ", "))
        }
        change.webConfig = fresh.serve.webConfig
        let applied = reloader.apply(change, to: pipeline)
        if applied.retention { adopted.formUnion(ConfigReload.retentionOptions) }
        if applied.webConfig { adopted.formUnion(ConfigReload.webConfigOptions) }
        var running = reload.running
        for option in adopted {
            running.take(option, from: fresh.parsed)
        }
        reload.running = running
    }
}
