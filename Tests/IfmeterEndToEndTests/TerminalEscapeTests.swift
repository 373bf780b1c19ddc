import Foundation
import IfmeterCore
import IfmeterOutput
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Interface names are bytes chosen by whoever can create an interface (a
/// container, a VPN client) or write a trace. Issue 11 found
/// `$'\x1b]0;PWNED\x07'` (retitles the window) and `$'\x1b[2J'` (clears the
/// screen) reaching the terminal raw through list, sample, replay --format
/// text, usage, live and error messages. No output may carry them raw.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct TerminalEscapeTests {
    static let title = "\u{1B}]0;PWNED\u{07}"
    static let clear = "\u{1B}[2J"

    /// The namespace's interfaces are a veth pair with both hostile names.
    func hostileNamespace() throws -> TestNamespace {
        let ns = try TestNamespace()
        try ns.ip("link", "add", "name", Self.title, "type", "veth", "peer", "name", Self.clear)
        try ns.ip("link", "set", Self.title, "up")
        try ns.ip("link", "set", Self.clear, "up")
        return ns
    }

    /// No ESC, BEL or other control byte but newlines (and, for the live
    /// screen, its own sequences) in what a command wrote.
    func expectClean(_ output: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let bad = output.unicodeScalars.filter { $0.value < 0x20 && $0 != "\n" || $0.value == 0x7F || (0x80...0x9F).contains($0.value) }
        #expect(
            bad.isEmpty, "\(what) wrote control characters \(bad.map { String($0.value, radix: 16) }): \(output.debugDescription)",
            sourceLocation: sourceLocation)
    }

    @Test func namesNeverReachTheTerminalRaw() throws {
        try Netns.requireRoot()
        let ns = try hostileNamespace()
        let escapedTitle = #"\x1b]0;PWNED\x07"#, escapedClear = #"\x1b[2J"#
        for arguments in [["list"], ["sample"], ["sample", "--count", "1", "--interval", "200ms"], ["list", "--source", "getifaddrs"]] {
            let result = try ifmeter(arguments, in: ns)
            #expect(result.status == 0, "\(arguments): \(result.err)")
            expectClean(result.out + result.err, arguments.joined(separator: " "))
            #expect(result.out.contains(escapedTitle) && result.out.contains(escapedClear), "\(arguments): names shown escaped: \(result.out)")
        }

        // A trace and its text report; the JSON report keeps the exact names.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-escape-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let trace = folder + "/t.jsonl"
        let record = try ifmeter(["record", "--count", "2", "--interval", "200ms", "-o", trace], in: ns)
        #expect(record.status == 0, "\(record.err)")
        let text = try ifmeter(["replay", trace, "--format", "text"])
        #expect(text.status == 0)
        expectClean(text.out + text.err, "replay --format text")
        #expect(text.out.contains(escapedTitle))
        let json = try ifmeter(["replay", trace])
        expectClean(json.out, "replay (JSON)")
        guard case .array(let list)? = try JSONParser.parse(json.out)["interfaces"] else { throw TestFailure("no interfaces") }
        let names = Set(list.compactMap { $0["name"]?.stringValue })
        #expect(names.contains(Self.title) && names.contains(Self.clear), "JSON keeps the exact names")

        // usage, from a state file export kept.
        let state = folder + "/state.db"
        let export = try Background(
            [
                "ip", "netns", "exec", ns.name, try ifmeterBinary(), "export",
                "--state", state, "--json", folder + "/r.json", "--every", "300ms",
            ], name: "export-escape")
        // Usage rows are made of traffic: some frames out of each end, sent
        // once export took its baseline (its first report), and counted
        // (in its totals) before it stops.
        try ExportReport.waitForFirst(folder + "/r.json")
        try sendFrames(in: ns.name, interface: Self.clear, count: 10)
        try sendFrames(in: ns.name, interface: Self.title, count: 10)
        try ExportReport.waitForTotal(folder + "/r.json", Self.clear, atLeast: 10 * 300)
        try ExportReport.waitForTotal(folder + "/r.json", Self.title, atLeast: 10 * 300)
        #expect(export.stop() == 0)
        expectClean(export.log, "export")
        let usage = try ifmeter(["usage", "--state", state])
        #expect(usage.status == 0, "\(usage.err)")
        expectClean(usage.out + usage.err, "usage")
        #expect(usage.out.contains(escapedClear), "\(usage.out)")

        // live, as plain lines (stdout is not a terminal here).
        let plain = try run(
            ["timeout", "-s", "INT", "1.2", "ip", "netns", "exec", ns.name, try ifmeterBinary(), "live", "--interval", "200ms"],
            allowFailure: true)
        expectClean(plain.out + plain.err, "live (plain lines)")
        #expect(plain.out.contains(escapedTitle), "\(plain.out)")
    }

    @Test func theLiveScreenDrawsNamesEscaped() throws {
        try Netns.requireRoot()
        let ns = try hostileNamespace()
        let typescript = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-screen-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: typescript) }
        // A real terminal (tmux), and every byte the view writes to it
        // (pipe-pane: the raw output, before tmux interprets it).
        let tmux = try LiveTerminalTests.Tmux(width: 120, height: 30)
        try run(["tmux", "-L", tmux.socket, "pipe-pane", "-o", "-t", "live", "cat >> \(typescript)"])
        try tmux.keys("ip netns exec \(ns.name) \(try ifmeterBinary()) live --interval 300ms; echo EXITED $?", "Enter")
        _ = try tmux.waitFor(#"\x1b[2J"#)
        // Issue 21, finding 5: an interface made while the view runs is
        // announced ("... appeared" in the status line, and in its events):
        // that line printed the raw name, and the window's title changed.
        try ns.ip("link", "add", "name", "\u{1B}]0;LATE\u{07}", "type", "veth", "peer", "name", "p1")
        _ = try tmux.waitFor("appeared")
        try tmux.keys("q")
        _ = try tmux.waitFor("EXITED 0")
        let screen = try waitFor("the view's bytes in \(typescript)") {
            let bytes = String(decoding: try Data(contentsOf: URL(fileURLWithPath: typescript)), as: UTF8.self)
            return bytes.contains("EXITED 0") ? bytes : nil
        }
        // Without its styles: the title is bold where colour is on, and
        // whether it is depends on what the test run inherited (swift test
        // sets NO_COLOR for its children; the test binary run alone does not).
        let unstyled = screen.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression)
        #expect(unstyled.contains("ifmeter ·"), "the view was drawn: \(screen.debugDescription.prefix(400))")
        #expect(screen.contains(#"\x1b]0;PWNED\x07"#), "the name is drawn escaped")
        #expect(!screen.contains("\u{1B}]0;"), "no window-title sequence reached the terminal")
        #expect(!screen.contains("\u{07}"), "no BEL reached the terminal")
        #expect(screen.contains(#"\x1b[2J"#), "the other name too")
        #expect(screen.contains(#"\x1b]0;LATE\x07 appeared"#), "the note names the new interface escaped")
    }

    /// Issue 21, finding 5: Prometheus and textfile label values carried raw
    /// ESC, BEL and DEL bytes, which `curl /metrics` to a terminal passes
    /// on. They read as the escaped name now, and promtool takes them.
    @Test func labelValuesAreEscapedAsTextIs() throws {
        try Netns.requireRoot()
        let ns = try hostileNamespace()
        let folder = try ScenarioFolder("escape-labels")
        let server = try startServe(in: ns, ["--compat", "node"])
        let text = try Scenario.scrape(ns)
        #expect(server.stop() == 0)
        let export = try Scenario.start(ns, "export", ["--every", "300ms", "--textfile", folder["m.prom"], "--compat", "node"])
        _ = try waitFor("the textfile") { FileManager.default.fileExists(atPath: folder["m.prom"]) ? true : nil }
        #expect(export.stop() == 0)
        let textfile = try String(contentsOfFile: folder["m.prom"], encoding: .utf8)
        for (what, exposition) in [("/metrics", text), ("--textfile", textfile)] {
            expectClean(exposition, what)
            #expect(exposition.contains(#"interface="\\x1b]0;PWNED\\x07""#), "\(what): \(exposition.prefix(600))")
            #expect(exposition.contains(#"device="\\x1b[2J""#), "\(what): node_exporter's families too")
            let check = try run(["promtool", "check", "metrics"], input: exposition, allowFailure: true)
            #expect(!(check.out + check.err).contains("error"), "\(what): promtool: \(check.out)\(check.err)")
        }
    }

    /// Issue 21, finding 7: JSON escaped names twice (`q"x\y` came out as
    /// `q"x\\y`), and a name that is not UTF-8 became the text `\xff`,
    /// which a real name can also be. JSON carries the name's own
    /// characters now, and a byte that is not UTF-8 becomes `:xff`, a form
    /// no Linux interface name can have (the kernel refuses colons).
    @Test func jsonCarriesExactNamesAndOneFormForBytesThatAreNotText() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        try ns.ip("link", "add", "name", #"q"x\y"#, "type", "veth", "peer", "name", #"a\xff"#)
        // A name with byte 0xFF, which ip cannot type: renamed through sysfs's
        // neighbour, a raw netlink request from the shell is not at hand, so
        // python sends RTM_NEWLINK with IFLA_IFNAME set to b"b\xff".
        let rename = """
            import socket, struct
            s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
            idx = socket.if_nametoindex("p1")
            name = b"b\\xff\\x00"
            attr = struct.pack("HH", 4 + len(name), 3) + name + b"\\x00" * ((4 - (4 + len(name)) % 4) % 4)
            ifi = struct.pack("BxHiII", 0, 0, idx, 0, 0)
            body = ifi + attr
            hdr = struct.pack("IHHII", 16 + len(body), 16, 5, 1, 0)
            s.send(hdr + body)
            print(s.recv(4096)[16:20])
            """
        try ns.ip("link", "add", "p1", "type", "veth", "peer", "name", "p2")
        let renamed = try ns.exec(["python3", "-c", rename], allowFailure: true)
        #expect(renamed.status == 0, "\(renamed.err)")
        let json = try ifmeter(["sample", "--format", "json"], in: ns)
        guard case .array(let list)? = try JSONParser.parse(json.out)["interfaces"] else { throw TestFailure("no interfaces: \(json.out)") }
        let names = Set(list.compactMap { $0["name"]?.stringValue })
        #expect(names.isSuperset(of: [#"q"x\y"#, #"a\xff"#, "b:xff"]), "\(names.sorted())")
        #expect(json.out.contains(#""q\"x\\y""#), "one JSON escape, no more: \(json.out)")
    }

    @Test func errorsQuotingTraceNamesAreEscaped() throws {
        let trace = """
            {"trace": "ifmeter/1", "platform": "linux", "source": "hand-made"}
            {"t": 0, "interfaces": [{"name": "\\u001b]0;PWNED\\u0007", "index": 1, "rx_bytes": -4, "tx_bytes": 0}]}

            """
        let result = try ifmeter(["replay", "-"], input: trace)
        #expect(result.status == 65)
        expectClean(result.err, "the error line")
        #expect(result.err.contains("PWNED") && (result.err.contains("line 2") || result.err.contains(":2:")), "\(result.err)")
    }

    @Test func textOutputsEscapeWhatJSONKeeps() {
        #expect(TerminalText.escaped("a\u{1B}[2Jb") == #"a\x1b[2Jb"#)
        #expect(TerminalText.escaped("x\u{202E}y\u{85}") == #"x\u{202e}y\u{85}"#)
        #expect(TerminalText.escaped("wlan0 ünïcode ﻼ") == "wlan0 ünïcode ﻼ", "letters, Arabic presentation forms included, stay")
        #expect(TerminalText.escaped("two\nlines\u{7}", keeping: "\n") == "two\nlines\\x07")
        #expect(JSONWriter().string(.string("\u{1B}\u{202E}\u{85}é")) == #""\u001b\u202e\u0085é""#)
        // A name that is not UTF-8 and one that reads like its escape stay two.
        #expect(InterfaceName.decode([0x61, 0xFF]) != InterfaceName.decode(Array(#"a\xff"#.utf8)))
        #expect(InterfaceName.decode([0x61, 0xFF]) == "a:xff" && InterfaceName.decode(Array(#"a\xff"#.utf8)) == #"a\xff"#)
        #expect(InterfaceName.decode(Array("wlan0 ü".utf8)) == "wlan0 ü")
        // SVG (issue 29, finding 7): escaped as text is, then as XML, scalar
        // by scalar (`<` with a combining accent is one Character).
        #expect(UsageChart.xml("a\u{1B}b<\u{301}&\"'\u{FFFF}") == #"a\x1bb&lt;\#u{301}&amp;&quot;&apos;\u{ffff}"#)
    }
}
