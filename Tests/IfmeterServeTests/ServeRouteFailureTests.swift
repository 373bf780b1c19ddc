import IfmeterCore
import IfmeterOutput
import IfmeterSystem
import Synchronization
import Testing

@testable import IfmeterServe

/// A 5xx answer is the server's failure: counted by path and code in
/// `ifmeter_http_server_errors_total` and said in serve's log, never silent.
@Suite struct ServeRouteFailureTests {
    /// The text exposition the cache renders now.
    func exposition(_ cache: ScrapeCache) throws -> String {
        let rendered = try #require(cache.rendered(openMetrics: false))
        let inflater = try #require(Inflater(rendered.gzipped))
        return String(decoding: try inflater.readAll(), as: UTF8.self)
    }

    func routes(_ cache: ScrapeCache, log: @escaping @Sendable (String) -> Void = { _ in }) -> ServeRoutes {
        ServeRoutes(
            cache: cache, version: "9.8.7",
            usage: { _ in HTTPResponse(status: 503, text: "503 Service Unavailable: cannot open /var/lib/ifmeter/state.db.\nmore\n") },
            usageImage: { _ in HTTPResponse(status: 200, text: "fine\n") }, log: Log.everyLine(sink: log))
    }

    /// Every 5xx serve can give is there at 0 before the first, so that a
    /// rate or an increase sees the first one.
    @Test func theFamilyStartsAtZero() throws {
        let cache = ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1)
        _ = routes(cache)
        let text = try exposition(cache)
        #expect(text.contains("# TYPE ifmeter_http_server_errors_total counter\n"))
        for (path, code) in [("/api/v1/usage", 500), ("/api/v1/usage", 503), ("/metrics", 500), ("/usage.png", 500), ("/usage.png", 503)] {
            #expect(text.contains("ifmeter_http_server_errors_total{code=\"\(code)\",path=\"\(path)\"} 0\n"), "\(path) \(code)")
        }
    }

    /// The usage tables and picture take seconds on a five-year file: they
    /// are worked out on the slow lane, never on an HTTP thread; a bad
    /// query is answered at once.
    @Test func usageIsAnsweredLaterAndABadQueryAtOnce() {
        let routes = routes(ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1))
        for path in ["/api/v1/usage", "/usage.png"] {
            guard case .later = routes.respond(to: HTTPRequest(method: "GET", path: path, headers: [:])).payload else {
                Issue.record("\(path) is not answered later")
                continue
            }
            let bad = routes.respond(to: HTTPRequest(method: "GET", path: path, headers: [:], query: ["limit": "0"]))
            #expect(bad.status == 400)
        }
    }

    @Test func aFailedUsageAnswerIsCountedAndSaid() throws {
        let cache = ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1)
        let said = Said()
        let routes = routes(cache) { line in said.lines.withLock { $0.append(line) } }
        #expect(routes.respond(to: HTTPRequest(method: "GET", path: "/api/v1/usage", headers: [:])).resolved().status == 503)
        #expect(routes.respond(to: HTTPRequest(method: "GET", path: "/api/v1/usage", headers: [:])).resolved().status == 503)
        // Neither the request's fault (400) nor a good answer counts.
        #expect(routes.respond(to: HTTPRequest(method: "GET", path: "/api/v1/usage", headers: [:], query: ["limit": "0"])).resolved().status == 400)
        #expect(routes.respond(to: HTTPRequest(method: "GET", path: "/usage.png", headers: [:])).resolved().status == 200)
        #expect(
            said.lines.withLock { $0 }
                == Array(repeating: "answered /api/v1/usage with 503 Service Unavailable: cannot open /var/lib/ifmeter/state.db.", count: 2))
        let text = try exposition(cache)
        #expect(text.contains("ifmeter_http_server_errors_total{code=\"503\",path=\"/api/v1/usage\"} 2\n"))
        #expect(text.contains("ifmeter_http_server_errors_total{code=\"500\",path=\"/usage.png\"} 0\n"))
    }
}

final class Said: Sendable {
    let lines = Mutex<[String]>([])
}
