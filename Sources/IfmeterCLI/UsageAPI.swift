import IfmeterCore
import IfmeterServe

/// serve's `/api/v1/usage`: `usage --format json` on serve's state file,
/// run in process for each request, so its numbers are that command's
/// (`schemas/ifmeter-usage.v6.schema.json`). One interface, when asked
/// for, is kept from the document (matched exactly, not as a pattern).
enum UsageAPI {
    /// usage's arguments for the query's table and range, after `first`.
    static func arguments(_ first: [String], _ query: UsageQuery) -> [String] {
        let flags = [
            "fiveminutes": "--fiveminutes", "hour": "--hourly", "day": "--daily", "month": "--monthly", "year": "--yearly", "cycle": "--cycle",
            "summary": "--summary",
        ]
        var arguments = first + [flags[query.granularity] ?? "--daily"]
        if let begin = query.begin { arguments += ["--begin", begin] }
        if let end = query.end { arguments += ["--end", end] }
        if let limit = query.limit { arguments += ["--limit", String(limit)] }
        return arguments
    }

    /// `/usage.png`: `usage --png` on serve's state file (`--summary` for
    /// granularity summary), the image as the response.
    static func image(state path: String, query: UsageQuery) -> HTTPResponse {
        var arguments = arguments(["--state", path, "--png", "serve.png"], query)
        if let interface = query.interface {
            // The picture is drawn from usage's filter, a glob list.
            guard !interface.contains(where: { "*?[],\\".contains($0) }) else {
                return HTTPResponse(
                    status: 400, text: "400 Bad Request: an interface named with * ? [ ] , or \\ cannot be drawn alone; leave out interface.\n")
            }
            arguments += ["--include", interface]
        }
        var image: [UInt8]?
        do throws(CLIError) {
            var command = try UsageCommand(ParsedArguments.parse(arguments, spec: UsageCommand.spec))
            command.output = { _ in }
            command.imageOutput = { image = $0 }
            try command.run()
        } catch {
            return failure(error)
        }
        guard let image else { return HTTPResponse(status: 500, text: "500 Internal Server Error: no image was drawn\n") }
        return HTTPResponse(
            status: 200, headers: [("Content-Type", "image/png"), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")],
            body: HTTPBody(image))
    }

    static func response(state path: String, query: UsageQuery) -> HTTPResponse {
        // Granularity summary is the image's alone (ServeRoutes answers 400).
        let arguments = arguments(["--state", path, "--format", "json"], query)
        var text = ""
        do throws(CLIError) {
            var command = try UsageCommand(ParsedArguments.parse(arguments, spec: UsageCommand.spec))
            command.output = { text += $0 }
            try command.run()
        } catch {
            return failure(error)
        }
        if let interface = query.interface {
            guard case .object(var document)? = try? JSONParser.parse(text), case .array(let interfaces)? = document["interfaces"] else {
                return HTTPResponse(status: 500, text: "500 Internal Server Error: usage gave no interfaces\n")
            }
            document["interfaces"] = .array(
                interfaces.filter { row in
                    let name = row["name"]?.stringValue ?? "", netns = row["netns"]?.stringValue ?? ""
                    return (netns.isEmpty ? name : netns + "/" + name) == interface
                })
            text = JSONWriter(indent: 2).string(.object(document)) + "\n"
        }
        return HTTPResponse(
            status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")],
            body: HTTPBody(Array(text.utf8)))
    }

    /// A usage error as the HTTP answer: the query's fault (400) or the server's.
    static func failure(_ error: CLIError) -> HTTPResponse {
        switch error {
        case .usage(let message, _):
            // The options' names are the query's here; a missing or
            // unreadable state file is the server's, not the request's.
            var said = message
            for (option, parameter) in [("'--begin <date>'", "'begin'"), ("'--end <date>'", "'end'"), ("'--limit <n>'", "'limit'")] {
                said = said.replacing(option, with: parameter)
            }
            let request = said.contains("'begin'") || said.contains("'end'") || said.contains("'limit'")
            return request
                ? HTTPResponse(status: 400, text: "400 Bad Request: \(said).\n")
                : HTTPResponse(status: 503, text: "503 Service Unavailable: \(said).\n")
        case .data(let message), .runtime(let message):
            return HTTPResponse(status: 500, text: "500 Internal Server Error: \(message)\n")
        case .status:
            return HTTPResponse(status: 500, text: "500 Internal Server Error: usage ended early\n")
        }
    }
}
