import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 31, finding 7: small lies in what ifmeter says, each reproduced
/// first, then fixed.
@Suite(.serialized, .blocking)
struct SmallLiesTests {
    /// Each command's man page lists the exit statuses it gives, with a
    /// usage-error example it has, and no other.
    @Test func eachManPageSaysTheExitStatusesOfItsCommand() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        func exitStatus(_ page: String) throws -> String {
            let text = try tree.renderedPage(page)
            guard let start = text.range(of: "EXIT STATUS") else { throw TestFailure("\(page): no EXIT STATUS") }
            let rest = text[start.upperBound...]
            let end = rest.range(of: "\nEXAMPLES") ?? rest.range(of: "\nSEE ALSO") ?? rest.range(of: "\nENVIRONMENT")
            return String(rest[..<(end?.lowerBound ?? rest.endIndex)])
        }
        let usage = try exitStatus("ifmeter-usage")
        for status in ["0", "64", "65", "1", "3", "4", "5"] {
            #expect(usage.contains("\n       \(status) "), "ifmeter-usage(1) lists \(status): \(usage)")
        }
        #expect(usage.contains("--format yaml") && !usage.contains("--interval 0"), "usage has no --interval: \(usage)")
        let plan = try exitStatus("ifmeter-plan")
        #expect(!plan.contains("in use") && !plan.contains("\n       3 "), "\(plan)")
        #expect(!plan.contains("--interval 0"), "\(plan)")
        let serve = try exitStatus("ifmeter-serve")
        #expect(serve.contains("--interval 0") && serve.contains("its last save failed") && !serve.contains("\n       3 "), "\(serve)")
        let route = try exitStatus("ifmeter-route")
        #expect(route.contains("\n       3 ") && route.contains("outside the tunnels"), "\(route)")
    }

    /// docs/state-and-usage.md said 0.3 MiB an hour written (vnStat 0.7)
    /// where the README and docs/benchmark.md said 0.43 (0.87).
    @Test func theWriteRateIsTheSameFigureEverywhere() throws {
        func read(_ path: String) throws -> String {
            try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8).replacingOccurrences(of: "\n", with: " ")
        }
        func first(_ pattern: String, in text: String) -> String? {
            guard let range = text.range(of: pattern, options: .regularExpression) else { return nil }
            return String(text[range]).components(separatedBy: CharacterSet(charactersIn: "0123456789.").inverted).last { $0.contains(".") }
        }
        let benchmark = try read("docs/benchmark.md")
        let serve = try #require(first(#"\*\*ifmeter serve --state\*\* \(a save every 5 min\) \| \*\*[0-9.]+"#, in: benchmark))
        let vnstat = try #require(first(#"vnStat 2\.10 `vnstatd` \(SaveInterval 5 min\) \| [0-9.]+"#, in: benchmark))
        let readme = try read("README.md")
        #expect(first(#"`serve --state` writes [0-9.]+ MiB"#, in: readme) == serve)
        #expect(first(#"vnStat's daemon: [0-9.]+"#, in: readme) == vnstat)
        let state = try read("docs/state-and-usage.md")
        #expect(first(#"hour come to [0-9.]+ MiB"#, in: state) == serve)
        #expect(first(#"vnStat's daemon, beside it: [0-9.]+"#, in: state) == vnstat)
    }

    @Test func onelineHelpSaysWhatIsEscaped() throws {
        let help = try ifmeter(["usage", "--help"])
        #expect(
            help.out.replacingOccurrences(of: "\n", with: " ").contains("A ';', a '\\' or a control character in a name is written \\xHH"),
            "\(help.out)")
    }

    /// `usage --include wan0` on a file where wan0 is recorded but idle
    /// said the filter matched none of the interfaces, naming wan0 among
    /// them.
    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func aFilterThatMatchesAnIdleRecordedInterfaceSaysSo() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        try ns.ip("link", "add", "wan0", "type", "veth", "peer", "name", "lan0")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-lies-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/k.db"
        let exporter = try Background(
            [
                "ip", "netns", "exec", ns.name, try ifmeterBinary(), "export", "--interval", "100ms", "--json", dir + "/r.json", "--every", "200ms",
                "--state", state,
            ], name: "export-idle")
        _ = try ExportReport.waitForFirst(dir + "/r.json")
        #expect(exporter.stop() == 0)
        let result = try ifmeter(["usage", "--state", state, "--include", "wan0"])
        #expect(result.status == 0, "\(result.err)")
        #expect(!result.out.contains("matched none"), "\(result.out)")
        #expect(
            result.out.contains("No usage recorded in \(state) for wan0 (virtual): the filter (--include 'wan0') matched it, recorded but idle"),
            "\(result.out)")
        // A filter that matches nothing still says so.
        let none = try ifmeter(["usage", "--state", state, "--include", "wan9"])
        #expect(none.out.contains("matched none of the interfaces recorded"), "\(none.out)")
    }

    /// The last report after SIGTERM was a period of 0 seconds with null
    /// rates that replaced the last real period, whenever a period had just
    /// ended (here every sample ends one).
    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func theLastExportReportIsARealPeriod() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-lies-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for _ in 0..<3 {
            let exporter = try Background(
                [
                    "ip", "netns", "exec", ns.name, try ifmeterBinary(), "export", "--interval", "100ms", "--every", "100ms", "--json",
                    dir + "/r.json", "--json-lines", dir + "/r.jsonl",
                ], name: "export-last")
            _ = try waitFor("a few periods") { () -> Bool? in
                ((try? String(contentsOfFile: dir + "/r.jsonl", encoding: .utf8))?.split(separator: "\n").count ?? 0) >= 3 ? true : nil
            }
            #expect(exporter.stop() == 0)
            let last = try #require(ExportReport.read(dir + "/r.json"))
            let seconds = last["period"]?["seconds"]?.doubleValue ?? 0
            #expect(seconds > 0, "the last report is a real period: \(seconds) s")
            let lines = try String(contentsOfFile: dir + "/r.jsonl", encoding: .utf8).split(separator: "\n")
            for line in lines {
                let report = try JSONParser.parse(String(line))
                #expect((report["period"]?["seconds"]?.doubleValue ?? 0) > 0, "no period of 0 seconds: \(line.prefix(200))")
            }
            try? FileManager.default.removeItem(atPath: dir + "/r.jsonl")
        }
    }
}

/// `usage --begin/--end/--limit` refuse what they cannot mean, before any
/// file is read.
@Suite(.blocking) struct UsageRangeOptionTests {
    @Test(arguments: [
        (["--begin", "2026-13-01"], "invalid value '2026-13-01' for '--begin <date>'"),
        (["--end", "2026-11-31"], "invalid value '2026-11-31' for '--end <date>'"),
        (["--begin", "2026-11-01T25:00"], "invalid value '2026-11-01T25:00' for '--begin <date>'"),
        (["--begin", "yesterday"], "expected a local date or time like 2026-11-01"),
        (["--begin", "2026-11-02", "--end", "2026-11-01"], "'--begin' must be before '--end'"),
        (["--limit", "0"], "--limit"),
        (["--check", "--limit", "3"], "'--check' judges the current cycle"),
        (["--oneline", "--begin", "2026-11-01"], "'--oneline' shows its own periods"),
    ])
    func refused(arguments: [String], words: String) throws {
        let result = try ifmeter(["usage", "--state", "/nonexistent/s.db"] + arguments)
        #expect(result.status == 64 && result.err.contains(words), "\(arguments): \(result.err)")
    }
}
