import Foundation
@testable import IfmeterCLI
import IfmeterCore
import IfmeterSystem
import IfmeterTestSupport
import Testing

/// Rough edges a new user hit (issue 23), each reproduced first: what the
/// binary prints, and what its help and pages say of it.
@Suite(.blocking) struct RoughEdgeTests {
    /// ifmeter with the locale set to `locale` alone.
    func ifmeter(locale: String, _ arguments: [String]) throws -> (out: String, err: String, status: Int32) {
        let binary = try ifmeterBinary()
        return try run(["env", "-u", "LC_ALL", "-u", "LC_CTYPE", "LANG=\(locale)", binary] + arguments, allowFailure: true)
    }

    /// `sample` printed `≈` before every raw counter, which no footer
    /// explained: a rounded size is no estimate mark.
    @Test func sampleMarksNoRawCounter() throws {
        let result = try IfmeterTestSupport.ifmeter(["sample", "--include", "lo"])
        #expect(result.status == 0, "\(result.err)")
        #expect(!result.out.contains("≈"), "\(result.out)")
        #expect(result.out.contains("Sizes from 1 KiB up are rounded; --format json gives every counter exactly."))
        let bits = try IfmeterTestSupport.ifmeter(["sample", "--include", "lo", "--bits"])
        #expect(!bits.out.contains("rounded"), "bit counts are whole: \(bits.out)")
    }

    /// Under LANG=C (or any locale without UTF-8) text is ASCII; JSON keeps
    /// UTF-8. A replayed trace with a recreation shows a lower bound.
    @Test func aCLocaleGetsASCIIAndJSONKeepsUTF8() throws {
        let trace = repositoryRoot.appendingPathComponent("Fixtures/traces/recreation.jsonl").path
        let utf8 = try ifmeter(locale: "C.UTF-8", ["replay", trace, "--format", "text"])
        #expect(utf8.status == 0 && utf8.out.contains("≥"), "\(utf8.out)")
        for locale in ["C", "POSIX", "en_US.ISO-8859-1", ""] {
            let text = try ifmeter(locale: locale, ["replay", trace, "--format", "text"])
            #expect(text.status == 0, "\(text.err)")
            #expect(text.out.unicodeScalars.allSatisfy { $0.isASCII }, "LANG=\(locale): \(text.out)")
            #expect(text.out.contains(">="), "LANG=\(locale): \(text.out)")
            // The table keeps its columns: every row as wide as with UTF-8.
            let widths = { (s: String) in s.split(separator: "\n").prefix(4).map { $0.unicodeScalars.count } }
            #expect(widths(text.out) == widths(utf8.out), "LANG=\(locale)")
            let json = try ifmeter(locale: locale, ["replay", trace, "--format", "json"])
            #expect(json.out.contains("≥"), "JSON's caveats keep UTF-8 under LANG=\(locale)")
            let help = try ifmeter(locale: locale, ["usage", "--help"])
            #expect(help.out.unicodeScalars.allSatisfy { $0.isASCII }, "LANG=\(locale) usage --help")
        }
        #expect(localeUsesUTF8 { ["LANG": "de_DE.utf8"][$0] })
        #expect(!localeUsesUTF8 { ["LC_ALL": "C", "LANG": "C.UTF-8"][$0] }, "LC_ALL decides first")
        #expect(localeUsesUTF8 { ["LC_CTYPE": "C.UTF-8", "LANG": "C"][$0] })
        #expect(!localeUsesUTF8 { _ in nil }, "no locale is the C locale")
    }

    /// `serve --help` said --probe defaults to 8.8.8.8, but serve without
    /// --probe serves no route metrics; route and live do use the default.
    @Test func probeHelpSaysWhatEachCommandDoes() throws {
        func probeHelp(_ spec: CommandSpec) -> String { spec.options.first { $0.long == "--probe" }?.help ?? "" }
        for spec in [ServeCommand.spec, ExportCommand.spec] {
            #expect(!probeHelp(spec).contains("8.8.8.8") && probeHelp(spec).contains("Without it, no route figures"), "\(spec.name)")
        }
        for spec in [RouteCommand.spec, LiveCommand.spec] {
            #expect(probeHelp(spec).contains("Default: 8.8.8.8"), "\(spec.name)")
        }
    }

    /// The README and ifmeter(1) said filters work on every command, but
    /// `route --include` is unknown; FILES said daily and monthly tables
    /// (the file holds hours); ENVIRONMENT lacked IFMETER_STATE.
    @Test func pagesSayWhatTheBinaryDoes() throws {
        var unfiltered: Set<String> = []
        for command in IfmeterCLI.commands {
            let spec = command.spec
            if !spec.options.contains(where: { $0.long == "--include" }) { unfiltered.insert(CompletionScript.subcommand(spec)) }
        }
        #expect(unfiltered == ["route", "plan", "state", "config"], "the pages name route, plan, state and config as the commands without filters")
        let root = try #require(ManPages().pages.first).text
        #expect(
            root.contains(#"Filters work on every command that reports interfaces (all but \fBroute\fR, \fBplan\fR, \fBstate\fR and \fBconfig\fR)"#))
        #expect(!root.contains("daily and monthly usage tables"))
        #expect(root.contains(".B IFMETER_STATE"))
        #expect(root.contains(".B LC_ALL"), "the locale's effect is documented")
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("Filters\nwork on every command that reports interfaces (all but `route`, `plan`, `state`, `config`)"))
        let route = try IfmeterTestSupport.ifmeter(["route", "--include", "lo"])
        #expect(route.status == 64 && route.err.contains("--include"), "\(route.err)")
    }

    /// `list --netns NS` showed SPEED `-` and no reported_speed_bps for
    /// links that report one from inside the namespace (a veth: 10 Gbit/s).
    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason))) func listInANamespaceReportsTheSpeed() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let inside = try IfmeterTestSupport.ifmeter(["list", "--format", "json"], in: pair.a)
        let outside = try IfmeterTestSupport.ifmeter(["list", "--netns", pair.a.name, "--format", "json"])
        #expect(inside.status == 0 && outside.status == 0, "\(inside.err) \(outside.err)")
        func speed(_ json: String, _ name: String) throws -> Int? {
            let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            let interfaces = object?["interfaces"] as? [[String: Any]] ?? []
            return interfaces.first { $0["name"] as? String == name }?["reported_speed_bps"] as? Int
        }
        let own = try speed(inside.out, pair.nameA)
        #expect(own == 10_000_000_000, "\(inside.out)")
        #expect(try speed(outside.out, pair.nameA) == own, "\(outside.out)")
        let text = try IfmeterTestSupport.ifmeter(["list", "--netns", pair.a.name])
        let row = text.out.split(separator: "\n").first { $0.contains(pair.nameA) } ?? ""
        #expect(row.contains("(10.0 Gbit/s)"), "\(text.out)")
    }
}
