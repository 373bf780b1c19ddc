import IfmeterCore
import IfmeterOutput

/// What serve answers: `/metrics` (the scrape cache's exposition, in the
/// format the client's Accept prefers, gzipped when Accept-Encoding allows
/// it) and `/` (a page that points to it). The CLI wires a server to
/// `respond(to:)`; the routes, content negotiation and gzip live here.
public struct ServeRoutes: Sendable {
    let cache: ScrapeCache
    let version: String

    public init(cache: ScrapeCache, version: String) {
        self.cache = cache
        self.version = version
    }

    public func respond(to request: HTTPRequest) -> HTTPResponse {
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
                text: """
                    <!DOCTYPE html>
                    <html><head><title>ifmeter</title></head><body>
                    <h1>ifmeter \(version)</h1>
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
