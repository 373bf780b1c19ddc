import IfmeterCore
import IfmeterServe

/// serve's `/api/v1/usage`: `usage --format json` on serve's state file,
/// run in process for each request, so its numbers are that command's
/// (`schemas/ifmeter-usage.v6.schema.json`). One interface, when asked
/// for, is kept from the document (matched exactly, not as a pattern).
enum UsageAPI {
    static func response(state path: String, query: UsageQuery) -> HTTPResponse {
        var arguments = ["--state", path, "--format", "json"]
        let flags = [
            "fiveminutes": "--fiveminutes", "hour": "--hourly", "day": "--daily", "month": "--monthly", "year": "--yearly", "cycle": "--cycle",
        ]
        arguments.append(flags[query.granularity] ?? "--daily")
        if let begin = query.begin { arguments += ["--begin", begin] }
        if let end = query.end { arguments += ["--end", end] }
        if let limit = query.limit { arguments += ["--limit", String(limit)] }
        var text = ""
        do throws(CLIError) {
            var command = try UsageCommand(ParsedArguments.parse(arguments, spec: UsageCommand.spec))
            command.output = { text += $0 }
            try command.run()
        } catch {
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
}
