import Foundation
import IfmeterCore
import IfmeterImage
import IfmeterTestSupport
import Testing

/// Issue 29, finding 7: an interface named `a<ESC>b` went raw into the SVG
/// summary's `data-name`, and the SVG was not well-formed XML, while the
/// other outputs escaped it. Issue 11 and 21 fixed outputs one at a time
/// (`TerminalEscapeTests`); this test takes hostile names through every
/// output ifmeter has, at once, and checks each is well-formed for its
/// format: JSON parses, JSON Lines parse line by line, the SVG passes
/// `xmllint`, the Prometheus text passes `promtool check metrics`,
/// OpenMetrics passes prometheus_client's parser, CSV has the header's
/// columns on every row; and none of them (JSON, SVG and expositions
/// included) carries a control character, a bidirectional override or an
/// invisible character raw, only newlines.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct HostileNameTests {
    /// Names the kernel takes (at most 15 bytes; no `/`, `:` or
    /// whitespace), as the two ends of five veth pairs.
    static let linkNames: [(String, String)] = [
        // ESC (the finding's); a window title (ESC ... BEL).
        ("a\u{1B}b", "\u{1B}]0;T\u{07}"),
        // Markup; quotes, an ampersand.
        ("<script>", "q\"'&x>"),
        // DEL and two C1 controls (NEL, CSI); a line separator and a
        // right-to-left override.
        ("d\u{7F}\u{85}\u{9B}", "e\u{2028}\u{202E}f"),
        // SOH, backspace and U+FFFF (no XML document may hold it); a
        // zero-width space and a byte order mark.
        ("g\u{1}\u{8}\u{FFFF}", "h\u{200B}\u{FEFF}"),
        // Markup and CSV's specials, each followed by a combining accent:
        // one Character with it, so an escape that compares Characters
        // misses them.
        ("<\u{301}i>&\u{301}", ",\u{301}\"\u{301}x"),
    ]
    /// A name that is not UTF-8: `b`, byte 0xFF, ESC. `ip` cannot type it,
    /// so a link is renamed to it over netlink; ifmeter reads it as
    /// `b:xff` and ESC (`InterfaceName`).
    static let notUTF8: [UInt8] = [0x62, 0xFF, 0x1B]
    static let notUTF8Name = "b:xff\u{1B}"
    /// Names only a trace can carry (the kernel refuses whitespace, `/` and
    /// `:`), and a namespace name of a trace's.
    static let traceNames = ["sp ace", "tab\t", "new\nline", "cr\r", "sl/ash", "co:lon", "n\u{0}l", "x\u{FFFE}y", "\u{1B}[2J"]
    static let traceNamespace = "\u{1B}]0;NS\u{07}"

    enum Format: String { case text, json, jsonLines, svg, prometheus, openMetrics, csv }

    /// Python for what has no tool of its own here: JSON, JSON Lines,
    /// OpenMetrics and CSV read strictly; exits non-zero with the reason.
    static let python = """
        import csv, io, json, sys
        mode, text = sys.argv[1], sys.stdin.read()
        if mode == "json":
            json.loads(text)
        elif mode == "jsonLines":
            lines = text.split("\\n")
            assert lines[-1] == "", "the last line is not ended"
            for n, line in enumerate(lines[:-1]):
                json.loads(line)
        elif mode == "openMetrics":
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
            list(text_string_to_metric_families(text))
        elif mode == "csv":
            rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
            assert len(rows) > 1, "no rows"
            for row in rows:
                assert len(row) == len(rows[0]), "a row of %d fields under %d columns: %r" % (len(row), len(rows[0]), row)
        """

    /// Checks one output: not empty, the name `mark` in it (as the format
    /// writes it), nothing raw that a terminal would act on, valid UTF-8
    /// (no U+FFFD from bytes that were not), and well-formed for its
    /// format.
    func check(_ label: String, _ format: Format, _ content: String, mark: String?, folder: ScenarioFolder) throws {
        #expect(!content.isEmpty, "\(label) wrote nothing")
        if let mark { #expect(content.contains(mark), "\(label) names \(mark.debugDescription): \(content.prefix(3000).debugDescription)") }
        let raw = content.unicodeScalars.filter { $0 != "\n" && TerminalText.mayNeedEscaping(String($0)) }
        #expect(raw.isEmpty, "\(label) carries \(raw.map { "U+" + String($0.value, radix: 16) }) raw")
        #expect(!content.unicodeScalars.contains("\u{FFFD}"), "\(label) wrote bytes that are not UTF-8")
        let result: (out: String, err: String, status: Int32)
        switch format {
        case .text:
            return
        case .svg:
            let file = folder["check-\(UUID().uuidString).svg"]
            try content.write(toFile: file, atomically: true, encoding: .utf8)
            result = try run(["xmllint", "--noout", file], allowFailure: true)
        case .prometheus:
            result = try run(["promtool", "check", "metrics"], input: content, allowFailure: true)
        case .json, .jsonLines, .openMetrics, .csv:
            result = try run(["/usr/bin/python3", "-c", Self.python, format.rawValue], input: content, allowFailure: true)
        }
        #expect(result.status == 0 && result.out.isEmpty && result.err.isEmpty, "\(label) is not well-formed \(format): \(result.out)\(result.err)")
    }

    /// Renames link `from` to raw bytes over netlink (RTM_NEWLINK with
    /// IFLA_IFNAME), which `ip` cannot.
    func rename(_ ns: TestNamespace, _ from: String, to bytes: [UInt8]) throws {
        let literal = "b\"" + bytes.map { "\\x" + String(format: "%02x", $0) }.joined() + "\\x00\""
        let script = """
            import socket, struct
            s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
            idx = socket.if_nametoindex("\(from)")
            name = \(literal)
            attr = struct.pack("HH", 4 + len(name), 3) + name + b"\\x00" * ((4 - (4 + len(name)) % 4) % 4)
            body = struct.pack("BxHiII", 0, 0, idx, 0, 0) + attr
            s.send(struct.pack("IHHII", 16 + len(body), 16, 5, 1, 0) + body)
            error = struct.unpack("i", s.recv(4096)[16:20])[0]
            assert error == 0, "RTM_NEWLINK: %d" % error
            """
        let renamed = try ns.exec(["python3", "-c", script], allowFailure: true)
        guard renamed.status == 0 else { throw TestFailure("renaming \(from): \(renamed.err)") }
    }

    /// A hand-made trace whose interfaces carry the trace-only names (one
    /// in a hostile namespace) and the kernel's.
    func trace() -> String {
        let names = Self.traceNames + Self.linkNames.flatMap { [$0.0, $0.1] }
        func line(_ t: Int, _ bytes: Int) -> String {
            let interfaces = names.enumerated().map { n, name in
                var o: [String: JSONValue] = [
                    "name": .string(name), "index": .number(n + 2), "rx_bytes": .number(bytes * (n + 1)), "tx_bytes": .number(bytes),
                    "rx_packets": .number(t), "tx_packets": .number(t),
                ]
                if n == 0 { o["netns"] = .string(Self.traceNamespace) }
                return JSONValue.object(o)
            }
            return JSONWriter().string(.object(["t": .number(t), "interfaces": .array(interfaces)]))
        }
        return #"{"trace": "ifmeter/1", "platform": "linux", "source": "hand-made"}"# + "\n" + line(0, 0) + "\n" + line(1, 1500) + "\n"
    }

    @Test func everyOutputIsWellFormedWhateverTheNames() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        for (a, b) in Self.linkNames {
            try ns.ip("link", "add", "name", a, "type", "veth", "peer", "name", b)
        }
        try ns.ip("link", "add", "p1", "type", "veth", "peer", "name", "p2")
        try rename(ns, "p1", to: Self.notUTF8)
        let sendable = Self.linkNames.flatMap { [$0.0, $0.1] }
        for name in sendable + ["p2"] { try ns.ip("link", "set", name, "up") }
        let folder = try ScenarioFolder("hostile-names")
        let esc = Self.linkNames[0].0
        // The ESC name as each format writes it.
        let text = TerminalText.escaped(esc), json = JSONWriter().string(.string(esc)), label = #"a\\x1bb"#
        func take(_ label: String, _ format: Format, _ content: String, mark: String?) throws {
            try check(label, format, content, mark: mark, folder: folder)
        }
        func command(_ arguments: [String], in namespace: TestNamespace? = nil) throws -> String {
            let result = try ifmeter(arguments, in: namespace)
            #expect(result.status == 0, "\(arguments): \(result.err)")
            try check(arguments.joined(separator: " ") + " (stderr)", .text, result.err + "\n", mark: nil, folder: folder)
            return result.out
        }

        // list and sample, text and JSON; JSON keeps the exact names.
        try take("list", .text, try command(["list"], in: ns), mark: text)
        let listed = try command(["list", "--format", "json"], in: ns)
        try take("list --format json", .json, listed, mark: json)
        guard case .array(let interfaces)? = try JSONParser.parse(listed)["interfaces"] else { throw TestFailure("no interfaces: \(listed)") }
        #expect(
            Set(interfaces.compactMap { $0["name"]?.stringValue }) == Set(sendable + [Self.notUTF8Name, "p2", "lo"]),
            "JSON names every link exactly")
        try take("sample", .text, try command(["sample"], in: ns), mark: text)
        try take("sample --format json", .json, try command(["sample", "--format", "json"], in: ns), mark: json)
        try take("sample --count 1", .text, try command(["sample", "--count", "1", "--interval", "200ms"], in: ns), mark: text)
        try take(
            "sample --count 1 --format json", .jsonLines, try command(["sample", "--count", "1", "--interval", "200ms", "--format", "json"], in: ns),
            mark: json)

        // record and replay, and a trace with names only a trace can carry.
        _ = try command(["record", "--count", "1", "--interval", "200ms", "-o", folder["recorded.jsonl"]], in: ns)
        try take("record -o", .jsonLines, try String(contentsOfFile: folder["recorded.jsonl"], encoding: .utf8), mark: json)
        try trace().write(toFile: folder["hand-made.jsonl"], atomically: true, encoding: .utf8)
        for file in ["recorded.jsonl", "hand-made.jsonl"] {
            try take("replay \(file) --format text", .text, try command(["replay", folder[file], "--format", "text"]), mark: text)
            try take("replay \(file)", .json, try command(["replay", folder[file]]), mark: json)
        }
        let replayed = try command(["replay", folder["hand-made.jsonl"], "--format", "text"])
        for name in Self.traceNames { #expect(replayed.contains(TerminalText.escaped(name)), "replay shows \(name.debugDescription) escaped") }

        // export: JSON, JSON Lines and the textfile, with a state file whose
        // usage rows hold traffic of every name that can send.
        let state = folder["state.db"]
        let export = try Scenario.start(
            ns, "export",
            [
                "--state", state, "--json", folder["r.json"], "--json-lines", folder["r.jsonl"], "--textfile", folder["r.prom"],
                "--every", "300ms", "--interval", "100ms",
            ])
        try ExportReport.waitForFirst(folder["r.json"])
        for name in sendable { try sendFrames(in: ns.name, interface: name, count: 3) }
        for name in sendable { try ExportReport.waitForTotal(folder["r.json"], name, atLeast: 3 * 300) }
        #expect(export.stop() == 0, "\(export.log)")
        try check("export (stderr)", .text, export.log + "\n", mark: nil, folder: folder)
        try take("export --json", .json, try String(contentsOfFile: folder["r.json"], encoding: .utf8), mark: json)
        try take("export --json-lines", .jsonLines, try String(contentsOfFile: folder["r.jsonl"], encoding: .utf8), mark: json)
        try take("export --textfile", .prometheus, try String(contentsOfFile: folder["r.prom"], encoding: .utf8), mark: label)

        // Plans whose patterns are hostile too (plan refuses C0 controls).
        _ = try command(["plan", "set", "<script>", "--state", state, "--cycle-start", "1", "--quota", "1KB"])
        _ = try command(["plan", "set", "e\u{2028}\u{202E}f", "--state", state, "--cycle-start", "5", "--limit", "day=1GB"])
        try take("plan list", .text, try command(["plan", "list", "--state", state]), mark: "<script>")
        try take("plan list --format json", .json, try command(["plan", "list", "--state", state, "--format", "json"]), mark: "<script>")

        // usage, in every format, and its charts.
        try take("usage", .text, try command(["usage", "--state", state]), mark: text)
        try take("usage --cycle", .text, try command(["usage", "--state", state, "--cycle"]), mark: text)
        try take("usage --format json", .json, try command(["usage", "--state", state, "--format", "json"]), mark: json)
        try take("usage --format csv", .csv, try command(["usage", "--state", state, "--format", "csv", "--hourly"]), mark: text)
        try take("usage --oneline", .text, try command(["usage", "--state", state, "--oneline"]), mark: text)
        let verdict = try ifmeter(["usage", "--state", state, "--check"])
        #expect(verdict.status == 3, "a quota of 1 KB is over: \(verdict.out)\(verdict.err)")
        try take("usage --check", .text, verdict.out + verdict.err, mark: "<script>")
        for (name, arguments) in [
            ("daily", [String]()), ("hourly", ["--hourly"]), ("cycle", ["--cycle"]), ("summary", ["--summary"]),
        ] {
            _ = try command(["usage", "--state", state, "--svg", folder["\(name).svg"]] + arguments)
            try take("usage --svg \(name)", .svg, try String(contentsOfFile: folder["\(name).svg"], encoding: .utf8), mark: text)
            // The PNG's figures: JSON in a Latin-1 tEXt chunk, every name whole.
            _ = try command(["usage", "--state", state, "--png", folder["\(name).png"]] + arguments)
            let png = Array(try Data(contentsOf: URL(fileURLWithPath: folder["\(name).png"])))
            try take("usage --png \(name) (its figures)", .json, try #require(try PNGChunks.text(UsagePNG.figuresKey, in: png)), mark: json)
        }

        // serve, with the state file's plans: Prometheus text and OpenMetrics.
        let server = try startServe(in: ns, ["--state", state])
        let exposition = try waitFor("the plans in a scrape") { () -> String? in
            let body = try RawHTTP.request("/metrics", port: 9874, in: ns.name).text
            return body.contains("ifmeter_plan_quota_bytes{") ? body : nil
        }
        try take("serve /metrics", .prometheus, exposition, mark: label)
        let openMetrics = try RawHTTP.request(
            "/metrics", port: 9874, in: ns.name, headers: ["Accept": "application/openmetrics-text;version=1.0.0"]
        ).text
        #expect(openMetrics.hasSuffix("# EOF\n"), "OpenMetrics was served")
        try take("serve /metrics (OpenMetrics)", .openMetrics, openMetrics, mark: label)
        #expect(server.stop() == 0, "\(server.log)")
        try check("serve (stderr)", .text, server.log + "\n", mark: nil, folder: folder)

        // live, as plain lines (stdout is not a terminal here).
        let live = try Scenario.start(ns, "live", ["--interval", "100ms"])
        _ = try waitFor("live's lines of every link") { () -> Bool? in
            let log = live.log
            return sendable.allSatisfy { log.contains(TerminalText.escaped($0) + " ") } ? true : nil
        }
        #expect(live.stop() == 0, "\(live.log)")
        try take("live (plain lines)", .text, live.log, mark: text)
    }
}
