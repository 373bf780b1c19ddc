import IfmeterCore
import IfmeterImage
import IfmeterOutput
import IfmeterPipeline
import IfmeterStore
import IfmeterSystem
import IfmeterUsage
import Synchronization

/// serve's `/api/v1/usage` and `/usage.png`: the typed request answered by
/// `UsageDocument` (the tables `usage --format json` writes) and
/// `UsageWhole` (the picture `usage --png` draws) on serve's own state
/// file, read through its writer's connection a piece at a time. The
/// status follows from `UsageQueryError`'s case: a bad parameter 400, a
/// state file not there yet 503, any other failure 500.
package enum UsageEndpoint {
    static let headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")]

    /// The tables, written to the client as their rows are read: at most
    /// `rows` of them (`UsageRequest.defaultRows` when not given), and the
    /// URL of the rest as `next`. `log` hears of a failure after the
    /// first byte, which ends the connection.
    /// `unsaved`: the writer's traffic since its last save, added to the
    /// file's rows, so that the tables are current within one sample.
    package static func tables(
        state path: String, query: UsageQuery, unsaved: UnsavedUsage? = nil, log: Log? = nil
    ) -> HTTPResponse {
        var request = query.request
        request.rows = request.rows ?? UsageRequest.defaultRows
        let document: UsageDocument
        do throws(UsageQueryError) {
            // Each piece is read and rendered on the HTTP thread that
            // asks for it: 256 hours at a time keeps that a few ms.
            document = try UsageDocument(
                request, pieces: .eachOpen(path: path), wall: UsageRequest.clock(), chunk: 256,
                unsaved: unsaved?.slices(fiveMinutes: request.granularity == .fiveMinutes) ?? [])
        } catch {
            return failure(error)
        }
        document.link = { cursor in
            var parameters = query.parameters
            parameters["rows"] = String(request.rows ?? UsageRequest.defaultRows)
            parameters["after"] = cursor.description
            return "/api/v1/usage?" + QueryString.encode(parameters)
        }
        let failed = Failure()
        let stream = HTTPStream(
            next: {
                do throws(UsageQueryError) {
                    return try document.piece().map { Array($0.utf8) }
                } catch {
                    failed.set()
                    log?.warning("/api/v1/usage ended early: \(error.message)")
                    return nil
                }
            }, failed: { failed.isSet })
        return HTTPResponse(status: 200, headers: headers, stream: stream)
    }

    /// The picture: `usage --png`'s for the query (granularity `summary`:
    /// `--summary`'s), of one interface when asked.
    package static func image(state path: String, query: UsageQuery) -> HTTPResponse {
        let image: [UInt8]
        do throws(UsageQueryError) {
            // (The picture was drawn through usage's glob filter once: a
            // name that reads as a pattern is still refused, not guessed.)
            if let interface = query.interface, interface.contains(where: { "*?[],\\".contains($0) }) {
                throw .badParameter("interface", "an interface named with * ? [ ] , or \\ cannot be drawn alone; leave out interface")
            }
            let whole = try UsageWhole(query.request, path: path, wall: UsageRequest.clock(), summary: query.summary)
            do throws(CairoError) {
                image = try whole.png(summary: query.summary)
            } catch {
                // cairo is loaded on the first picture; without it nothing is drawn.
                throw .drawing(error.unloaded.map { "libcairo.so.2 could not be loaded (\($0)). Hint: apt-get install libcairo2" } ?? "\(error)")
            }
        } catch {
            return failure(error)
        }
        return HTTPResponse(
            status: 200, headers: [("Content-Type", "image/png"), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")],
            body: HTTPBody(image))
    }

    /// A failure as its answer: the status its case says, and its line
    /// (which `ServeRoutes` keeps for the log when the status is 5xx).
    static func failure(_ error: UsageQueryError) -> HTTPResponse {
        switch error.status {
        case 400: HTTPResponse(status: 400, text: "400 Bad Request: \(error.message).\n")
        case 503: HTTPResponse(status: 503, text: "503 Service Unavailable: \(error.message)\n", headers: [("Retry-After", "60")])
        default: HTTPResponse(status: error.status, text: "\(error.status) Internal Server Error: \(error.message)\n")
        }
    }

    /// Whether a stream failed after its first byte.
    final class Failure: Sendable {
        private let flag = Mutex(false)
        func set() { flag.withLock { $0 = true } }
        var isSet: Bool { flag.withLock { $0 } }
    }
}
