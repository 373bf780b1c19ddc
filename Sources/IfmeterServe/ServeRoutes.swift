import IfmeterCore
import IfmeterOutput

/// A `/api/v1/usage` request, checked: what `usage --format json` is
/// asked for.
public struct UsageQuery: Sendable, Hashable {
    /// fiveminutes, hour, day, month, year or cycle.
    public var granularity: String
    /// Local dates or times, as `usage --begin`/`--end` take them.
    public var begin: String?
    public var end: String?
    /// One interface (NS/NAME for another namespace's), matched exactly.
    public var interface: String?
    /// The last this many periods of each interface.
    public var limit: Int?

    public static let granularities = ["fiveminutes", "hour", "day", "month", "year", "cycle"]

    public init(granularity: String, begin: String? = nil, end: String? = nil, interface: String? = nil, limit: Int? = nil) {
        self.granularity = granularity
        self.begin = begin
        self.end = end
        self.interface = interface
        self.limit = limit
    }
}

/// What serve answers: `/metrics` (the scrape cache's exposition, in the
/// format the client's Accept prefers, gzipped when Accept-Encoding allows
/// it), the dashboard at `/` (with its script and stylesheet), and the JSON
/// API: `/api/v1/interfaces` (now), `/api/v1/events` (the same, pushed
/// each sample) and `/api/v1/usage` (the state file's tables, when serve
/// keeps one). The CLI wires a server to `respond(to:)`; the routes,
/// content negotiation and gzip live here.
/// A bad request's one line (without its status).
public struct HTTPError: Error, Sendable, Hashable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

public struct ServeRoutes: Sendable {
    let cache: ScrapeCache
    let version: String
    let board: LiveBoard?
    /// `usage --format json` for a query (the CLI's); nil without a state file.
    let usage: (@Sendable (UsageQuery) -> HTTPResponse)?
    /// `usage --png` for a query (granularity `summary`: `--summary`).
    let usageImage: (@Sendable (UsageQuery) -> HTTPResponse)?
    /// Where a 5xx answer is said (serve's log), beside its count in
    /// `ifmeter_http_server_errors_total`: no failure is silent.
    let log: (@Sendable (String) -> Void)?

    public init(
        cache: ScrapeCache, version: String, board: LiveBoard? = nil, usage: (@Sendable (UsageQuery) -> HTTPResponse)? = nil,
        usageImage: (@Sendable (UsageQuery) -> HTTPResponse)? = nil, log: (@Sendable (String) -> Void)? = nil
    ) {
        self.cache = cache
        self.version = version
        self.board = board
        self.usage = usage
        self.usageImage = usageImage
        self.log = log
        var expected: [(path: String, status: Int)] = [("/metrics", 500)]
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

    /// The query of `/api/v1/usage`, or what is wrong with it.
    public static func usageQuery(_ query: [String: String], image: Bool = false) -> Result<UsageQuery, HTTPError> {
        let known: Set = ["granularity", "begin", "end", "interface", "limit"]
        if let unknown = query.keys.sorted().first(where: { !known.contains($0) }) {
            return .failure(HTTPError("unknown parameter '\(ServeRoutes.shown(unknown))'; use granularity, begin, end, interface or limit"))
        }
        let granularity = query["granularity"] ?? "day"
        let granularities = UsageQuery.granularities + (image ? ["summary"] : [])
        guard granularities.contains(granularity) else {
            return .failure(
                HTTPError("invalid granularity '\(ServeRoutes.shown(granularity))'; use \(granularities.joined(separator: ", "))"))
        }
        var limit: Int?
        if let text = query["limit"] {
            guard let value = Int(text), (1...100_000).contains(value) else {
                return .failure(HTTPError("invalid limit '\(ServeRoutes.shown(text))'; use a whole number from 1 to 100000"))
            }
            limit = value
        }
        if let interface = query["interface"], interface.isEmpty || interface.utf8.count > 256 {
            return .failure(HTTPError("invalid interface: give one interface's name (NS/NAME for another namespace's)"))
        }
        for key in ["begin", "end"] {
            if let text = query[key], text.isEmpty || text.utf8.count > 32 {
                return .failure(
                    HTTPError("invalid \(key) '\(ServeRoutes.shown(text))': expected a local date or time like 2026-11-01 or 2026-11-01T08:30"))
            }
        }
        return .success(UsageQuery(granularity: granularity, begin: query["begin"], end: query["end"], interface: query["interface"], limit: limit))
    }

    /// The answer to a request; a 5xx one (the server's failure) is counted
    /// and said in the log with its first line. The usage tables and
    /// picture are answered `later`, on the server's slow lane: on a
    /// five-year state file they take seconds, which no HTTP thread (and so
    /// no scrape) waits for.
    public func respond(to request: HTTPRequest) -> HTTPResponse {
        let response = route(request)
        if case .later(let work) = response.payload {
            return .later { [self] in account(work(), path: request.path) }
        }
        return account(response, path: request.path)
    }

    private func account(_ response: HTTPResponse, path: String) -> HTTPResponse {
        guard response.status >= 500 else { return response }
        cache.countServerError(path: path, status: response.status)
        if case .bytes(let body) = response.payload {
            let text = String(decoding: UnsafeRawBufferPointer(start: body.base, count: min(body.count, 300)), as: UTF8.self)
            log?("answered \(path) with \(text.split(separator: "\n").first.map(String.init) ?? String(response.status))")
        } else {
            log?("answered \(path) with \(response.status)")
        }
        return response
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
        case "/api/v1/interfaces":
            guard let board else { return Self.notServed(request.path) }
            if let unknown = request.query.keys.sorted().first(where: { $0 != "history" }) {
                return HTTPResponse(status: 400, text: "400 Bad Request: unknown parameter '\(ServeRoutes.shown(unknown))'; use history=1.\n")
            }
            return Self.json(board.document(history: request.query["history"].map { $0 == "1" || $0 == "true" } ?? false))
        case "/api/v1/routes":
            return Self.json(HTTPBody(Array(Self.routesDocument(cache.currentRoutes()).utf8)))
        case "/api/v1/events":
            guard let board else { return Self.notServed(request.path) }
            board.wake()
            return HTTPResponse(events: board.events, headers: [("X-Accel-Buffering", "no")])
        case "/api/v1/usage":
            guard let usage else {
                return HTTPResponse(
                    status: 404, text: "404 Not Found: this serve keeps no state file, so it has no usage tables; start it with --state FILE.\n")
            }
            switch Self.usageQuery(request.query) {
            case .success(let query): return .later { usage(query) }
            case .failure(let error): return HTTPResponse(status: 400, text: "400 Bad Request: \(error.message).\n")
            }
        case "/usage.png":
            guard let usageImage else {
                return HTTPResponse(
                    status: 404, text: "404 Not Found: this serve keeps no state file, so it draws no usage; start it with --state FILE.\n")
            }
            switch Self.usageQuery(request.query, image: true) {
            case .success(let query): return .later { usageImage(query) }
            case .failure(let error): return HTTPResponse(status: 400, text: "400 Bad Request: \(error.message).\n")
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
    static func shown(_ text: String) -> String {
        let escaped = TerminalText.escaped(text)
        return escaped.count > 64 ? String(escaped.prefix(64)) + "…" : escaped
    }

    static func notServed(_ path: String) -> HTTPResponse {
        HTTPResponse(status: 404, text: "404 Not Found: ifmeter serves /, /metrics, /usage.png and /api/v1/{interfaces,events,usage,routes}.\n")
    }

    /// Whether Accept-Encoding allows gzip (and does not refuse it, q=0).
    public static func acceptsGzip(_ header: String?) -> Bool {
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
