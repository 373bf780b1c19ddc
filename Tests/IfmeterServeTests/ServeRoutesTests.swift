import IfmeterCore
import IfmeterOutput
import IfmeterServe
import Testing

/// serve's routes in process: no socket, no server. The same answers a
/// client gets from a running serve (ServeTests asks one).
@Suite struct ServeRoutesTests {
    let routes = ServeRoutes(cache: ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1), version: "9.8.7")

    func header(_ response: HTTPResponse, _ name: String) -> String? {
        response.headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    func text(_ response: HTTPResponse) -> String? {
        guard case .bytes(let body) = response.payload else { return nil }
        return String(decoding: body.bytes, as: UTF8.self)
    }

    @Test func onlyGetAndHeadAreAnswered() {
        for method in ["POST", "PUT", "DELETE", "OPTIONS", "get"] {
            let response = routes.respond(to: HTTPRequest(method: method, path: "/metrics", headers: [:]))
            #expect(response.status == 405, "\(method)")
            #expect(header(response, "Allow") == "GET, HEAD")
        }
        #expect(routes.respond(to: HTTPRequest(method: "HEAD", path: "/metrics", headers: [:])).status == 200)
    }

    @Test func anUnknownPathIs404AndSaysWhatIsServed() {
        let response = routes.respond(to: HTTPRequest(method: "GET", path: "/metric", headers: [:]))
        #expect(response.status == 404)
        #expect(text(response) == "404 Not Found: ifmeter serves /, /metrics, /usage.png and /api/v1/{interfaces,events,usage,routes}.\n")
    }

    @Test func theFrontPageLinksTheMetricsAndSaysTheyAreEstimates() throws {
        let response = routes.respond(to: HTTPRequest(method: "GET", path: "/", headers: [:]))
        #expect(response.status == 200)
        #expect(header(response, "Content-Type") == "text/html; charset=utf-8")
        let page = try #require(text(response))
        #expect(page.contains("ifmeter</a> <span class=\"version\">9.8.7</span></h1>"))
        #expect(page.contains("<a href=\"/metrics\">/metrics</a>"))
        #expect(page.contains(Caveat.sentence))
        #expect(page.contains(Caveat.lowerBoundSentence))
    }

    @Test func metricsAreGzippedOnlyWhenTheClientTakesGzip() throws {
        let gzipped = routes.respond(to: HTTPRequest(method: "GET", path: "/metrics", headers: ["accept-encoding": "gzip"]))
        #expect(gzipped.status == 200)
        #expect(header(gzipped, "Content-Encoding") == "gzip")
        #expect(header(gzipped, "Vary") == "Accept, Accept-Encoding")
        #expect(header(gzipped, "Cache-Control") == "no-store")
        guard case .bytes(let body) = gzipped.payload else {
            Issue.record("a gzip answer sends the cached gzip as it is")
            return
        }
        #expect(Array(body.bytes.prefix(2)) == [0x1f, 0x8b])

        for refused in [nil, "identity", "gzip;q=0", "br, deflate"] as [String?] {
            let plain = routes.respond(
                to: HTTPRequest(method: "GET", path: "/metrics", headers: refused.map { ["accept-encoding": $0] } ?? [:]))
            #expect(header(plain, "Content-Encoding") == nil, "\(refused ?? "no header")")
            guard case .inflated(_, let size) = plain.payload else {
                Issue.record("a client without gzip gets the text inflated as it reads")
                continue
            }
            #expect(size > 0)
        }
    }

    @Test func theAcceptHeaderChoosesTheFormat() {
        let text = routes.respond(to: HTTPRequest(method: "GET", path: "/metrics", headers: [:]))
        #expect(header(text, "Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        let openMetrics = routes.respond(
            to: HTTPRequest(method: "GET", path: "/metrics", headers: ["accept": "application/openmetrics-text; version=1.0.0"]))
        #expect(header(openMetrics, "Content-Type")?.hasPrefix("application/openmetrics-text") == true)
    }

    @Test(
        arguments: [
            (nil, false), ("gzip", true), ("GZIP", true), ("gzip;q=0", false), ("gzip; q=0.0", false), ("gzip;q=0.5", true),
            ("*", true), ("*;q=0", false), ("br, gzip;q=0", false), ("deflate, gzip", true), ("identity", false), ("", false),
        ] as [(String?, Bool)])
    func gzipIsTakenUnlessRefused(header: String?, takes: Bool) {
        #expect(ServeRoutes.acceptsGzip(header) == takes)
    }
}
