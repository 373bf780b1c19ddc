import Foundation
import IfmeterCore
import IfmeterOutput
import IfmeterSystem
import IfmeterTestSupport
import Synchronization
import Testing

@testable import IfmeterServe

/// Issue 45's HTTP items, in process: a query is read as it was sent (a
/// `%00`, a key given twice, `history=2`, a key an endpoint does not
/// read and `begin` after `end` are each one 400 line naming the key),
/// a 5xx answer's body names nothing of the server, every 5xx the HTTP
/// layer gives itself is counted, and a page that went away is not an
/// error in the log. `Tests/IfmeterEndToEndTests/RequestsThatLieServeTests.swift`
/// checks the same against the real serve.
@Suite struct RequestsThatLieTests {
    func parsed(_ raw: String) -> Result<[String: String], HTTPError> { QueryString.parse(Array(raw.utf8)) }

    @Test func aQueryIsReadWholeOrRefusedNamingItsKey() throws {
        #expect(try parsed("interface=lo&limit=3").get() == ["interface": "lo", "limit": "3"])
        // libmicrohttpd's decoding: + is a space, %XX a byte, a bare % stays.
        #expect(try parsed("interface=a+b%2Fc&x&&begin=100%25%zz%4").get() == ["interface": "a b/c", "x": "", "begin": "100%%zz%4"])
        let refused: [(String, String)] = [
            ("interface=lo%00anything", "invalid interface: its value holds %00 (a NUL byte), which no value here holds; leave it out"),
            ("limit=1%00garbage", "invalid limit: its value holds %00 (a NUL byte), which no value here holds; leave it out"),
            ("lim%00it=1", "a parameter's name 'lim\\x00it' holds %00 (a NUL byte); leave it out"),
            ("limit=1&granularity=day&limit=2", "'limit' is given twice; give each parameter once"),
            ("history=1&history=1", "'history' is given twice; give each parameter once"),
        ]
        for (raw, message) in refused {
            switch parsed(raw) {
            case .success(let query): Issue.record("\(raw) was taken as \(query)")
            case .failure(let error): #expect(error.message == message, "\(raw)")
            }
        }
    }

    func routes(
        usage: (@Sendable (UsageQuery) -> HTTPResponse)? = nil, log: @escaping @Sendable (String) -> Void = { _ in }
    ) -> (ServeRoutes, ScrapeCache) {
        let cache = ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1)
        let answer: @Sendable (UsageQuery) -> HTTPResponse = usage ?? { _ in HTTPResponse(status: 200, text: "{}") }
        let routes = ServeRoutes(
            cache: cache, version: "9.8.7", board: LiveBoard(interval: 1, version: "9.8.7"), usage: answer, usageImage: answer,
            log: Log.everyLine(sink: log))
        return (routes, cache)
    }

    func text(_ response: HTTPResponse) -> String {
        guard case .bytes(let body) = response.payload else { return "" }
        return String(decoding: body.bytes, as: UTF8.self)
    }

    /// Every endpoint that reads a query refuses what the server found
    /// wrong with it, and a key it does not read; `history` is 1 or 0.
    @Test func everyEndpointRefusesWhatItWouldHaveMisread() {
        let (routes, _) = routes()
        let problem = HTTPError("'limit' is given twice; give each parameter once")
        for path in ["/api/v1/usage", "/usage.png", "/api/v1/interfaces", "/api/v1/routes", "/api/v1/events"] {
            let response = routes.respond(to: HTTPRequest(method: "GET", path: path, headers: [:], queryProblem: problem)).resolved()
            #expect(response.status == 400 && text(response) == "400 Bad Request: 'limit' is given twice; give each parameter once.\n", "\(path)")
        }
        let refused: [(String, [String: String], String)] = [
            ("/api/v1/interfaces", ["history": "2"], "invalid history '2'; use history=1 for the last minutes' rates, or leave it out"),
            ("/api/v1/interfaces", ["history": ""], "invalid history ''; use history=1 for the last minutes' rates, or leave it out"),
            ("/api/v1/interfaces", ["colour": "red"], "unknown parameter 'colour'; use history=1"),
            ("/api/v1/routes", ["probe": "1.1.1.1"], "unknown parameter 'probe'; /api/v1/routes takes no parameters"),
            ("/api/v1/events", ["since": "3"], "unknown parameter 'since'; /api/v1/events takes no parameters"),
        ]
        for (path, query, message) in refused {
            let response = routes.respond(to: HTTPRequest(method: "GET", path: path, headers: [:], query: query)).resolved()
            #expect(response.status == 400 && text(response) == "400 Bad Request: \(message).\n", "\(path) \(query): \(text(response))")
        }
        for history in ["1", "true", "0", "false"] {
            let response = routes.respond(to: HTTPRequest(method: "GET", path: "/api/v1/interfaces", headers: [:], query: ["history": history]))
            #expect(response.status == 200, "history=\(history)")
        }
    }

    /// `begin` after `end` is the request's fault, said with the query's
    /// keys, before any usage runs; an end date takes its whole day.
    @Test func beginAfterEndIsTheClientsErrorNamingTheQuerysKeys() {
        let cases: [([String: String], String?)] = [
            (
                ["begin": "2026-11-02", "end": "2026-11-01"],
                "begin '2026-11-02' is not before end '2026-11-01': give begin before end (an end date takes its whole day)"
            ),
            (
                ["begin": "2026-11-01T10:00", "end": "2026-11-01T10:00"],
                "begin '2026-11-01T10:00' is not before end '2026-11-01T10:00': give begin before end (an end date takes its whole day)"
            ),
            (["begin": "2026-11-01", "end": "2026-11-01"], nil),
            (["begin": "2026-11-01T23:00", "end": "2026-11-01"], nil),
            (["begin": "2026-11-31"], "invalid value '2026-11-31' for 'begin': expected a local date or time like 2026-11-01 or 2026-11-01T08:30"),
            (["end": "tomorrow"], "invalid value 'tomorrow' for 'end': expected a local date or time like 2026-11-01 or 2026-11-01T08:30"),
        ]
        for (query, message) in cases {
            switch ServeRoutes.usageQuery(query, zone: .utc) {
            case .success: #expect(message == nil, "\(query) was taken")
            case .failure(let error): #expect(error.message == message, "\(query)")
            }
        }
    }

    /// A 5xx answer's detail (here a library's path) goes to the log; the
    /// client gets a line naming nothing of the server, its status and
    /// Retry-After kept.
    @Test func aServerErrorNamesNoFileOfTheServer() throws {
        let said = Said()
        let (routes, cache) = routes(
            usage: { _ in
                HTTPResponse(
                    status: 500,
                    text:
                        "500 Internal Server Error: cannot draw the PNG: libcairo.so.2 could not be loaded (/usr/lib/x86_64-linux-gnu/libcairo.so.2: file too short)\n",
                    headers: [("Retry-After", "5")])
            }, log: { line in said.lines.withLock { $0.append(line) } })
        for path in ["/usage.png", "/api/v1/usage"] {
            let response = routes.respond(to: HTTPRequest(method: "GET", path: path, headers: [:])).resolved()
            #expect(response.status == 500)
            #expect(text(response) == "500 Internal Server Error: ifmeter could not answer this request; serve's log says why.\n")
            #expect(!text(response).contains("/usr") && !text(response).contains("cairo"))
            #expect(response.headers.contains { $0.0 == "Retry-After" && $0.1 == "5" })
        }
        #expect(said.lines.withLock { $0 }.allSatisfy { $0.contains("(/usr/lib/x86_64-linux-gnu/libcairo.so.2: file too short)") })
        let exposition = try exposition(cache)
        #expect(exposition.contains("ifmeter_http_server_errors_total{code=\"500\",path=\"/usage.png\"} 1\n"))
    }

    func exposition(_ cache: ScrapeCache) throws -> String {
        let rendered = try #require(cache.rendered(openMetrics: false))
        return String(decoding: try #require(Inflater(rendered.gzipped)).readAll(), as: UTF8.self)
    }

    /// The 5xx answers the HTTP layer gives itself are counted by path (a
    /// path serve does not serve is `other`), and the event stream's 503
    /// starts at 0. (The cache renders once per sample: read once, at the end.)
    @Test func theHTTPLayersOwnServerErrorsAreCounted() throws {
        let (routes, cache) = routes()
        routes.countServerError(path: "/api/v1/usage", status: 503)
        routes.countServerError(path: "/api/v1/usage", status: 503)
        routes.countServerError(path: "/\u{1b}[31mwhatever", status: 503)
        let text = try exposition(cache)
        #expect(text.contains("ifmeter_http_server_errors_total{code=\"503\",path=\"/api/v1/usage\"} 2\n"))
        #expect(text.contains("ifmeter_http_server_errors_total{code=\"503\",path=\"other\"} 1\n"))
        #expect(text.contains("ifmeter_http_server_errors_total{code=\"503\",path=\"/api/v1/events\"} 0\n"))
    }

    @Test func aPageThatWentAwayIsNoError() {
        let prefix = "Failed to send the chunked response body for the request for `/api/v1/events'. Error: "
        #expect(LibraryLog.isPageGone(prefix + "The connection was forcibly closed by remote peer"))
        #expect(LibraryLog.isPageGone(prefix + "The socket is no longer available for sending"))
        // Real errors stay in the log.
        #expect(!LibraryLog.isPageGone(prefix + "Not enough system resources to serve the request"))
        #expect(!LibraryLog.isPageGone(prefix + "TLS encryption or decryption error"))
        #expect(!LibraryLog.isPageGone("Failed to send the response body for the request for `/metrics'. Error: Bad FD value"))
        #expect(!LibraryLog.isPageGone("Error processing request (HTTP response code is 400 ('Bad Request')). Closing connection."))
    }
}

/// The same over a real socket, the server wired to the routes as serve
/// wires them: a query is read from the request line as sent, and the
/// slow lane's 503s (13 refused, counted 0, before) are counted.
@Suite(.blocking) struct RequestsThatLieOverSocketsTests {
    @Test func theSlowLanesRefusalsAreCountedAndAQueryIsReadAsSent() throws {
        let gate = SlowLaneTests.Gate()
        let cache = ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1)
        let asked = Mutex<[UsageQuery]>([])
        let routes = ServeRoutes(
            cache: cache, version: "9.8.7",
            usage: { query in
                asked.withLock { $0.append(query) }
                gate.wait()
                return HTTPResponse(status: 200, text: "{}\n")
            })
        let server = try HTTPServer(
            address: ListenAddress(host: "127.0.0.1", port: try SlowLaneTests.freePort()), log: Log.everyLine { _ in },
            serverError: routes.countServerError(path:status:), handler: routes.respond(to:))
        defer { server.stop() }
        // (Released before the stop, which waits for the one at work.)
        defer { gate.release() }
        let port = server.address.port

        // Read as sent: a %00 and a repeated key are refused, never cut or
        // overwritten, and nothing reaches usage.
        for (query, line) in [
            (
                "interface=lo%00anything",
                "400 Bad Request: invalid interface: its value holds %00 (a NUL byte), which no value here holds; leave it out.\n"
            ),
            ("limit=1&limit=2", "400 Bad Request: 'limit' is given twice; give each parameter once.\n"),
        ] {
            let answer = try RawHTTP.request("/api/v1/usage?" + query, port: port, in: nil)
            #expect(answer.status == 400 && answer.text == line, "\(query): \(answer.text)")
        }
        #expect(asked.withLock { $0.isEmpty })

        // One at work (at the gate), 16 waiting, then every further one
        // refused. Each from an address of its own: one address may hold
        // only its share of the places (a quarter).
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for n in 0..<(1 + 16) {
            let fd = try RawHTTP.connect("127.0.0.1", port, in: nil, from: "127.0.0.\(10 + n)", timeout: 30)
            held.append(fd)
            try RawHTTP.send(fd, "GET /api/v1/usage HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            _ = try waitFor("request \(n + 1) on the slow lane") { server.slowRequests == n + 1 ? true : nil }
        }
        for _ in 0..<3 {
            let refused = try RawHTTP.request("/api/v1/usage", port: port, in: nil)
            #expect(refused.status == 503 && refused.headers["retry-after"] == "2", "\(refused.text)")
        }
        let text = try RequestsThatLieTests().exposition(cache)
        #expect(text.contains("ifmeter_http_server_errors_total{code=\"503\",path=\"/api/v1/usage\"} 3\n"), "\(text)")
    }
}
