import IfmeterCore
import IfmeterOutput
import IfmeterSystem
import IfmeterUsage

/// A `/api/v1/usage` or `/usage.png` request, checked: its parameters as
/// sent (for a `next` URL and a log), and the typed request they make.
package struct UsageQuery: Sendable, Hashable {
    /// fiveminutes, hour, day, month, year or cycle (`summary`: the picture's).
    package var granularity: String
    /// Local dates or times, as `usage --begin`/`--end` take them.
    package var begin: String?
    package var end: String?
    /// One interface (NS/NAME for another namespace's), matched exactly.
    package var interface: String?
    /// The last this many periods of each interface.
    package var limit: Int?
    /// At most this many rows in the document, and where a page starts.
    package var rows: Int?
    package var after: String?
    /// The same, typed: what `UsageDocument` answers.
    package var request: UsageRequest

    package static let granularities = UsageRequest.granularityNames.map(\.name)

    /// A query of these parameters; one that does not parse (which
    /// `ServeRoutes.usageQuery` refuses) asks for the day table.
    package init(
        granularity: String, begin: String? = nil, end: String? = nil, interface: String? = nil, limit: Int? = nil, rows: Int? = nil,
        after: String? = nil
    ) {
        self.granularity = granularity
        self.begin = begin
        self.end = end
        self.interface = interface
        self.limit = limit
        self.rows = rows
        self.after = after
        request = UsageRequest(granularity: .day)
        request = (try? UsageRequest.parse(parameters, image: true).request) ?? request
    }

    init(_ query: [String: String], request: UsageRequest) {
        granularity = query["granularity"] ?? "day"
        begin = query["begin"]
        end = query["end"]
        interface = query["interface"]
        limit = request.limit
        rows = request.rows
        after = query["after"]
        self.request = request
    }

    /// The picture of the last day, this cycle and all time.
    package var summary: Bool { granularity == "summary" }

    /// Its parameters, as given.
    package var parameters: [String: String] {
        var query = ["granularity": granularity]
        for (key, value) in [("begin", begin), ("end", end), ("interface", interface), ("limit", limit.map(String.init))] {
            if let value { query[key] = value }
        }
        if let rows { query["rows"] = String(rows) }
        if let after { query["after"] = after }
        return query
    }
}

/// What serve answers: `/metrics` (the scrape cache's exposition, in the
/// format the client's Accept prefers, gzipped when Accept-Encoding allows
/// it), the dashboard at `/` (with its script and stylesheet), the alerts'
/// runbook at `/runbooks` (each alert's `runbook_url` leads there), and the JSON
/// API: `/api/v1/interfaces` (now), `/api/v1/events` (the same, pushed
/// each sample) and `/api/v1/usage` (the state file's tables, when serve
/// keeps one). The CLI wires a server to `respond(to:)`; the routes,
/// content negotiation and gzip live here.
/// A bad request's one line (without its status).
package struct HTTPError: Error, Sendable, Hashable {
    package var message: String
    package init(_ message: String) { self.message = message }
}

package struct ServeRoutes: Sendable {
    let cache: ScrapeCache
    let version: String
    let board: LiveBoard?
    /// `usage --format json` for a query (the CLI's); nil without a state file.
    let usage: (@Sendable (UsageQuery) -> HTTPResponse)?
    /// `usage --png` for a query (granularity `summary`: `--summary`).
    let usageImage: (@Sendable (UsageQuery) -> HTTPResponse)?
    /// Where a 5xx answer is said (serve's log), beside its count in
    /// `ifmeter_http_server_errors_total`: no failure is silent.
    let log: Log?

    package init(
        cache: ScrapeCache, version: String, board: LiveBoard? = nil, usage: (@Sendable (UsageQuery) -> HTTPResponse)? = nil,
        usageImage: (@Sendable (UsageQuery) -> HTTPResponse)? = nil, log: Log? = nil
    ) {
        self.cache = cache
        self.version = version
        self.board = board
        self.usage = usage
        self.usageImage = usageImage
        self.log = log
        var expected: [(path: String, status: Int)] = [("/metrics", 500)]
        if board != nil { expected.append(("/api/v1/events", 503)) }
        if usage != nil { expected += [("/api/v1/usage", 500), ("/api/v1/usage", 503)] }
        if usageImage != nil { expected += [("/usage.png", 500), ("/usage.png", 503)] }
        cache.expectServerErrors(expected)
    }

    /// Headers of every dashboard response: the page's policy, and no
    /// sniffing, framing or referrer.
    static let pageHeaders = [
        ("Content-Security-Policy", DashboardAssets.contentSecurityPolicy), ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"), ("Cache-Control", "no-cache"),
    ]

    static func json(_ body: HTTPBody) -> HTTPResponse {
        HTTPResponse(status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")] + pageHeaders.prefix(2), body: body)
    }

    /// The query of `/api/v1/usage`, or what is wrong with it: `begin` and
    /// `end` are read in `zone` as `usage` reads them, and must be in
    /// order (`UsageRequest.parse`). An unknown key's hint names the
    /// parameters a person gives (`rows` and `after` page: docs/dashboard.md).
    package static func usageQuery(_ query: [String: String], image: Bool = false, zone: LocalZone = .system) -> Result<UsageQuery, HTTPError> {
        let listed = ["granularity", "begin", "end", "interface", "limit"]
        if let unknown = unknownParameter(query, known: listed + ["rows", "after"], listed: listed) { return .failure(unknown) }
        do throws(UsageQueryError) {
            return .success(UsageQuery(query, request: try UsageRequest.parse(query, image: image, zone: zone).request))
        } catch {
            return .failure(HTTPError(error.message))
        }
    }

    /// What is wrong with a request's parameters for an endpoint that
    /// reads `known` keys (none: it takes no parameters), if anything: the
    /// query string as sent (`QueryString`: a `%00`, a key given twice),
    /// then any key it does not read. Every endpoint that reads a query
    /// asks this first; `/metrics` and the page's files read none, and
    /// leave a query alone (a scrape config's `params`).
    static func parameterProblem(_ request: HTTPRequest, known: [String], use: String? = nil) -> HTTPError? {
        request.queryProblem ?? unknownParameter(request.query, known: known, use: use)
    }

    /// The first key of `query` not in `known`, said with what to use
    /// instead (`use`, or the `listed` keys, or the known keys).
    static func unknownParameter(_ query: [String: String], known: [String], listed: [String]? = nil, use: String? = nil) -> HTTPError? {
        guard let unknown = query.keys.sorted().first(where: { !known.contains($0) }) else { return nil }
        let known = listed ?? known
        let hint =
            switch known.count {
            case 0: "\(use ?? "it") takes no parameters"
            case 1: "use \(use ?? known[0])"
            default: "use " + known.dropLast().joined(separator: ", ") + " or " + known[known.count - 1]
            }
        return HTTPError("unknown parameter '\(ServeRoutes.shown(unknown))'; \(hint)")
    }

    /// `history` of `/api/v1/interfaces`: 1 or true, 0 or false (absent: no history).
    static func history(_ text: String?) -> Result<Bool, HTTPError> {
        switch text {
        case nil, "0", "false": .success(false)
        case "1", "true": .success(true)
        case let text?:
            .failure(HTTPError("invalid history '\(ServeRoutes.shown(text))'; use history=1 for the last minutes' rates, or leave it out"))
        }
    }

    static func badRequest(_ error: HTTPError) -> HTTPResponse { HTTPResponse(status: 400, text: "400 Bad Request: \(error.message).\n") }

    /// The paths serve answers: a 5xx answer's `path` label, any other
    /// path being `other` (a label is no place for what a client sent).
    static let servedPaths: Set = [
        "/", "/metrics", "/dashboard.js", "/dashboard.css", "/runbooks", "/usage.png", "/api/v1/interfaces", "/api/v1/events",
        "/api/v1/usage", "/api/v1/routes",
    ]

    /// Counts a 5xx answer the HTTP layer gave itself (a full slow lane,
    /// too many pages following, a stop, logins it cannot check now) as
    /// the routes' own are counted; the HTTP layer says it in the log.
    package func countServerError(path: String, status: Int) {
        cache.countServerError(path: Self.servedPaths.contains(path) ? path : "other", status: status)
    }

    /// The answer to a request; a 5xx one (the server's failure) is counted
    /// and said in the log with its first line, and the client gets a
    /// line that names nothing of the server (a file, a library's path). The usage tables and
    /// picture are answered `later`, on the server's slow lane: on a
    /// five-year state file they take seconds, which no HTTP thread (and so
    /// no scrape) waits for.
    package func respond(to request: HTTPRequest) -> HTTPResponse {
        let response = route(request)
        if case .later(let work) = response.payload {
            return .later { [self] in account(work(), path: request.path) }
        }
        return account(response, path: request.path)
    }

    private func account(_ response: HTTPResponse, path: String) -> HTTPResponse {
        guard response.status >= 500 else { return response }
        countServerError(path: path, status: response.status)
        if case .bytes(let body) = response.payload {
            let text = String(decoding: UnsafeRawBufferPointer(start: body.base, count: min(body.count, 300)), as: UTF8.self)
            // One kind per route and status: a 503 of one route does not
            // hide a 500 of another (the routes are a fixed few).
            let site = LogSite(file: #fileID + " " + (Self.servedPaths.contains(path) ? path : "other"), line: UInt(response.status))
            log?.write(.error, "answered \(path) with \(text.split(separator: "\n").first.map(String.init) ?? String(response.status))", site: site)
        } else {
            log?.write(
                .error, "answered \(path) with \(response.status)",
                site: LogSite(file: #fileID + " " + (Self.servedPaths.contains(path) ? path : "other"), line: UInt(response.status)))
        }
        return Self.withoutDetail(response)
    }

    /// A 5xx answer as the client gets it: its status and headers (a
    /// Retry-After), and a line that says where the reason is instead of
    /// the reason, which may name a file or library of the server.
    static func withoutDetail(_ response: HTTPResponse) -> HTTPResponse {
        let reason = response.status == 503 ? "Service Unavailable" : response.status == 500 ? "Internal Server Error" : "Server Error"
        return HTTPResponse(
            status: response.status, text: "\(response.status) \(reason): ifmeter could not answer this request; serve's log says why.\n",
            headers: response.headers.filter { $0.0.lowercased() != "content-type" })
    }

    private func route(_ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return HTTPResponse(status: 405, text: "405 Method Not Allowed: use GET or HEAD.\n", headers: [("Allow", "GET, HEAD")])
        }
        switch request.path {
        case "/metrics":
            let openMetrics = ExpositionNegotiation.prefersOpenMetrics(accept: request.headers["accept"])
            let gzip = Self.acceptsGzip(request.headers["accept-encoding"])
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
            return HTTPResponse(
                status: 200, contentType: "text/html; charset=utf-8",
                text: DashboardAssets.page(
                    version: UsageChart.xml(version),
                    caveat: UsageChart.xml("\(Caveat.sentence) \(Caveat.lowerBoundSentence) (see ifmeter_interface_quality)."),
                    usage: usage != nil),
                headers: Self.pageHeaders)
        case "/dashboard.js":
            return HTTPResponse(
                status: 200, contentType: "text/javascript; charset=utf-8", text: DashboardAssets.script, headers: Self.pageHeaders)
        case "/dashboard.css":
            return HTTPResponse(status: 200, contentType: "text/css; charset=utf-8", text: DashboardAssets.stylesheet, headers: Self.pageHeaders)
        case "/runbooks":
            return HTTPResponse(
                status: 200, contentType: "text/html; charset=utf-8", text: Runbooks.page(version: UsageChart.xml(version)),
                headers: Self.pageHeaders)
        case "/api/v1/interfaces":
            guard let board else { return Self.notServed(request.path) }
            if let problem = Self.parameterProblem(request, known: ["history"], use: "history=1") { return Self.badRequest(problem) }
            switch Self.history(request.query["history"]) {
            case .success(let history): return Self.json(board.document(history: history))
            case .failure(let problem): return Self.badRequest(problem)
            }
        case "/api/v1/routes":
            if let problem = Self.parameterProblem(request, known: [], use: request.path) { return Self.badRequest(problem) }
            return Self.json(HTTPBody(Array(Self.routesDocument(cache.currentRoutes()).utf8)))
        case "/api/v1/events":
            guard let board else { return Self.notServed(request.path) }
            if let problem = Self.parameterProblem(request, known: [], use: request.path) { return Self.badRequest(problem) }
            board.wake()
            return HTTPResponse(events: board.events, headers: [("X-Accel-Buffering", "no")])
        case "/api/v1/usage":
            guard let usage else {
                return HTTPResponse(
                    status: 404, text: "404 Not Found: this serve keeps no state file, so it has no usage tables; start it with --state FILE.\n")
            }
            if let problem = request.queryProblem { return Self.badRequest(problem) }
            switch Self.usageQuery(request.query) {
            case .success(let query): return .later { usage(query) }
            case .failure(let error): return Self.badRequest(error)
            }
        case "/usage.png":
            guard let usageImage else {
                return HTTPResponse(
                    status: 404, text: "404 Not Found: this serve keeps no state file, so it draws no usage; start it with --state FILE.\n")
            }
            if let problem = request.queryProblem { return Self.badRequest(problem) }
            switch Self.usageQuery(request.query, image: true) {
            case .success(let query): return .later { usageImage(query) }
            case .failure(let error): return Self.badRequest(error)
            }
        default:
            return Self.notServed(request.path)
        }
    }

    /// `/api/v1/routes`: each probe's way out now (the interface, its
    /// kind, through a tunnel or outside them) and each tunnel's outside
    /// estimate since serve started; `probes` empty without `--probe`.
    static func routesDocument(_ routes: RouteExposition?) -> String {
        let probes: [JSONValue] = (routes?.egress ?? []).map { p in
            var o: [String: JSONValue] = [
                "probe": .string(p.probe), "interface": p.interface.map(JSONValue.string) ?? .null,
                "kind": p.classification.map { .string($0.kind.rawValue) } ?? .null, "via_tunnel": .bool(p.viaTunnel),
                "leaves_outside": .bool(p.leavesOutside),
            ]
            if let gateway = p.gateway { o["gateway"] = .string(gateway) }
            if let failure = p.failure { o["failure"] = .string(failure) }
            return .object(o)
        }
        let outside: [JSONValue] = (routes?.outside ?? []).map { t in
            .object([
                "tunnel": .string(t.tunnel), "underlay": .string(t.underlay), "rx_bytes": .number(String(t.rxBytes)),
                "tx_bytes": .number(String(t.txBytes)), "uncertain": .bool(t.uncertain),
            ])
        }
        return JSONWriter().string(JSONEnvelope.routes.document(["probes": .array(probes), "outside": .array(outside)]))
    }

    /// A value from a request, safe to print: escaped, and cut at 64 characters.
    static func shown(_ text: String) -> String { UsageRequest.shown(text) }

    static func notServed(_ path: String) -> HTTPResponse {
        HTTPResponse(status: 404, text: "404 Not Found: ifmeter serves /, /metrics, /usage.png and /api/v1/{interfaces,events,usage,routes}.\n")
    }

    /// Whether Accept-Encoding allows gzip (and does not refuse it, q=0).
    package static func acceptsGzip(_ header: String?) -> Bool {
        guard let header else { return false }
        for part in header.split(separator: ",") {
            let fields = part.split(separator: ";")
            guard let coding = fields.first?.trimmingSpaces().lowercased(), coding == "gzip" || coding == "*" else { continue }
            let q =
                fields.dropFirst().compactMap { field -> Double? in
                    let pair = field.split(separator: "=")
                    return pair.count == 2 && pair[0].trimmingSpaces().lowercased() == "q" ? Double(pair[1].trimmingSpaces()) : nil
                }.first ?? 1
            if q > 0 { return true }
        }
        return false
    }
}
