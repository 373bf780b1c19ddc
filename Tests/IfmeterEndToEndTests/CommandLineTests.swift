import Foundation
import IfmeterCore
import IfmeterOutput
import IfmeterTestSupport
import Testing

let fixtures = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

/// The built `ifmeter` binary, run as a user would.
@Suite(.blocking) struct CommandLineTests {
    func temporaryFile(_ contents: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-test-\(UUID().uuidString).jsonl").path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func helpAndVersion() throws {
        let root = try ifmeter(["--help"])
        #expect(root.status == 0 && root.out.contains("USAGE: ifmeter") && root.out.contains("replay"))
        let version = try ifmeter(["--version"])
        #expect(version.status == 0 && version.out.hasPrefix("ifmeter "))
        for command in ["list", "sample", "record", "replay"] {
            let help = try ifmeter([command, "--help"])
            #expect(help.status == 0 && help.out.contains("USAGE: ifmeter \(command)"), "\(command)")
        }
    }

    @Test func usageErrorsExit64WithOneLine() throws {
        for arguments in [
            ["sample", "--interval", "0"], ["sample", "--interval", "-5"], ["sample", "--interval", "abc"],
            ["sample", "--nope"], ["frobnicate"], ["replay"], ["replay", "/nonexistent/trace.jsonl"],
        ] {
            let result = try ifmeter(arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.out.isEmpty, "\(arguments): nothing on stdout")
            #expect(result.err.hasPrefix("Error: ") && result.err.filter { $0 == "\n" }.count == 1, "\(arguments): \(result.err)")
        }
        #expect(try ifmeter(["replay", "/nonexistent/trace.jsonl"]).err.contains("no such file '/nonexistent/trace.jsonl'"))
    }

    @Test func malformedTraceExits65WithTheLineAndNoReport() throws {
        let good = try String(contentsOf: fixtures.appendingPathComponent("traces/basic.jsonl"), encoding: .utf8)
        var lines = good.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.insert(#"{"t": 2.5, "interfaces": [{"name": "eth0", "rx_bytes": -4, "tx_bytes": 0, "rx_packets": 0, "tx_packets": 0}]}"#, at: 4)
        let path = try temporaryFile(lines.joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try ifmeter(["replay", path])
        #expect(result.status == 65)
        #expect(result.out.isEmpty)
        #expect(result.err == "Error: \(path):5: interfaces[0] (\"eth0\"): counter \"rx_bytes\" must be an unsigned integer up to 2^64-1, got -4\n")
        let notJSON = try temporaryFile("{\"trace\": \"ifmeter/1\"}\n{oops\n")
        defer { try? FileManager.default.removeItem(atPath: notJSON) }
        let second = try ifmeter(["replay", "--format", "text", notJSON])
        #expect(second.status == 65 && second.out.isEmpty && second.err.contains(":2: not valid JSON"))
    }

    @Test func replayPrintsTheGoldenReport() throws {
        for name in ["basic", "recreation", "wrap", "events", "darwin"] {
            let result = try ifmeter(["replay", fixtures.appendingPathComponent("traces/\(name).jsonl").path])
            let golden = try String(contentsOf: fixtures.appendingPathComponent("traces/\(name).report.json"), encoding: .utf8)
            #expect(result.status == 0)
            #expect(result.out == golden, "\(name)")
        }
    }

    @Test func replayFromStdinWithFiltersAndText() throws {
        let trace = try String(contentsOf: fixtures.appendingPathComponent("traces/recreation.jsonl"), encoding: .utf8)
        let json = try ifmeter(["replay", "-", "--kind", "tunnel", "--exclude", "wg*"], input: trace)
        #expect(json.status == 0)
        let report = try JSONParser.parse(json.out)
        guard case .array(let interfaces)? = report["interfaces"] else { throw TestFailure("no interfaces") }
        #expect(interfaces.compactMap { $0["name"]?.stringValue } == ["tun0"])
        let text = try ifmeter(["replay", "-", "--format", "text"], input: trace)
        #expect(text.status == 0)
        #expect(text.out.contains("wg0") && text.out.contains("≥ 600 B") && text.out.contains("lower-bound"))
        #expect(text.out.contains("not per-app accounting"))
        let wrap = try ifmeter(["replay", fixtures.appendingPathComponent("traces/wrap.jsonl").path, "--format", "text"])
        #expect(wrap.out.contains("~ 1.95 KiB") && wrap.out.contains("1 wrap"))
    }

    @Test func maxRateFlagReachesTheEngine() throws {
        let path = fixtures.appendingPathComponent("traces/wrap.jsonl").path
        let strict = try JSONParser.parse(try ifmeter(["replay", path, "--max-rate", "5600bit"]).out)
        guard case .array(let interfaces)? = strict["interfaces"] else { throw TestFailure("no interfaces") }
        #expect(interfaces.first { $0["name"]?.stringValue == "eth1" }?["quality"]?.stringValue == "lower-bound")
    }
}
