import Foundation
@testable import IfmeterCLI
import IfmeterCore
import IfmeterTestSupport
import Testing

/// `make install DESTDIR=... PREFIX=/usr` into a temporary folder (one per
/// test: a second or two each), checked
/// as a user and systemd would use it: the binary runs, man renders every
/// page without warnings, the completions complete in real shells, the unit
/// verifies and scores OK, and `make uninstall` leaves nothing.
///
/// The binary installed is IFMETER_INSTALL_BINARY when set, else
/// .build/release/ifmeter when it is newer than every source, else the
/// debug ifmeter beside the test runner (a release build takes minutes);
/// `make install` gets it as BINARY=, so the test never builds. The pages
/// and scripts come from the same specs whichever build it is.
/// Needs man-db, groff, bash, zsh, fish and systemd (`make test` installs
/// them); it needs no root.
@Suite(.serialized, .blocking) struct InstallTests {
    @Test func installedBinaryRuns() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let result = try run([tree.path("/usr/bin/ifmeter"), "--version"])
        #expect(result.out == "ifmeter \(IfmeterCLI.version)\n")
        let help = try run([tree.path("/usr/bin/ifmeter"), "serve", "--help"])
        #expect(help.out == ServeCommand.spec.help, "the installed binary is this build")
    }

    @Test func everyManPageRendersWithoutWarnings() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let pages = try tree.manPages()
        #expect(pages.map(\.lastPathComponent).sorted() == ManPages().pages.map(\.fileName).sorted())
        for page in pages {
            let man = try run(["env", "MANWIDTH=80", "man", "--warnings", "-l", "-Tutf8", page.path])
            #expect(man.err.isEmpty, "\(page.lastPathComponent): \(man.err)")
            #expect(!man.out.isEmpty)
            let groff = try run(["groff", "-man", "-ww", "-z", page.path])
            #expect(groff.err.isEmpty, "\(page.lastPathComponent): \(groff.err)")
        }
    }

    @Test func manPagesNameEveryCommandAndEveryOption() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let root = try tree.renderedPage("ifmeter")
        // What a page should name and does not (the pages are long: list
        // the missing, not the page).
        var missing: [String] = []
        for command in IfmeterCLI.commands {
            let name = CompletionScript.subcommand(command.spec)
            if !root.contains("ifmeter-\(name)(1)") { missing.append("ifmeter(1): \(name)") }
            let page = try tree.renderedPage("ifmeter-\(name)")
            var wanted = ["ifmeter \(name)"] + command.spec.positionals.map(\.name)
            for option in command.spec.options where !option.hidden {
                wanted += option.choices
                // An entry of its own in OPTIONS: "-i, --interval duration"
                // (a short one shares its line with the help).
                let entry = "\n       " + CompletionScript.names(option).joined(separator: ", ") + (option.valueName.map { " " + $0 } ?? "")
                if !page.contains(entry + "\n") && !page.contains(entry + " ") { missing.append("ifmeter-\(name)(1): \(entry)") }
            }
            missing += wanted.filter { !page.contains($0) }.map { "ifmeter-\(name)(1): \($0)" }
        }
        var wanted = IfmeterCLI.rootSpec.options.filter { !$0.hidden }.map {
            "\n       " + CompletionScript.names($0).joined(separator: ", ") + ($0.valueName.map { " " + $0 } ?? "") + "\n"
        }
        wanted += ["0", "64", "65", "1"].map { "\n       \($0) " } // EXIT STATUS entries
        wanted += ["≥", "not per-app accounting", "protocol overhead", "lower bound", "systemctl enable --now ifmeter-serve"]
        missing += wanted.filter { !root.contains($0) }.map { "ifmeter(1): \($0)" }
        #expect(missing == [])
    }

    @Test func bashCompletesCommandsOptionsAndValues() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let script = tree.path("/usr/share/bash-completion/completions/ifmeter")
        /// COMPREPLY for the words, the last one being completed.
        func complete(_ words: [String]) throws -> [String] {
            let quoted = words.map { "'" + $0 + "'" }.joined(separator: " ")
            let program = """
                [[ -r /usr/share/bash-completion/bash_completion ]] && source /usr/share/bash-completion/bash_completion
                source '\(script)'
                complete -p ifmeter >/dev/null || exit 3
                COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
                COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
                _ifmeter
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            return try run(["bash", "--norc", "--noprofile", "-c", program]).out.split(separator: "\n").map(String.init)
        }
        let commands = IfmeterCLI.commands.map { CompletionScript.subcommand($0.spec) }
        #expect(try complete(["ifmeter", "se"]) == commands.filter { $0.hasPrefix("se") })
        #expect(try complete(["ifmeter", "se"]) == ["serve"])
        #expect(try complete(["ifmeter", ""]) == commands)
        let serveOptions = ServeCommand.spec.options.filter { !$0.hidden }.map(\.long)
        #expect(try complete(["ifmeter", "serve", "--li"]) == serveOptions.filter { $0.hasPrefix("--li") })
        #expect(try complete(["ifmeter", "serve", "--li"]) == ["--listen"])
        let kinds = InterfaceKind.allCases.map(\.rawValue)
        for command in IfmeterCLI.commands where command.spec.options.contains(where: { $0.long == "--kind" }) {
            let name = CompletionScript.subcommand(command.spec)
            #expect(try complete(["ifmeter", name, "--kind", ""]) == kinds, "\(name) --kind")
        }
        #expect(try complete(["ifmeter", "sample", "--kind", "wifi,t"]) == kinds.filter { $0.hasPrefix("t") }.map { "wifi," + $0 })
        #expect(try complete(["ifmeter", "list", "--kind", "=", "lo"]) == ["loopback"], "--kind=lo")
        let interfaces = try FileManager.default.contentsOfDirectory(atPath: "/sys/class/net").sorted()
        #expect(try complete(["ifmeter", "sample", "--include", ""]).sorted() == interfaces)
        #expect(try complete(["ifmeter", "sample", "--exclude", ""]).sorted() == interfaces)
        for option in SampleCommand.spec.options where !option.choices.isEmpty {
            #expect(try complete(["ifmeter", "sample", option.long, ""]) == option.choices, "\(option.long)")
        }
        #expect(try complete(["ifmeter", "--generate-completion", ""]) == CompletionShell.allCases.map(\.rawValue))
        // Paths: files for --state and replay's trace.
        let folder = tree.root.appendingPathComponent("usr/share/man/man1").path
        let pages = try FileManager.default.contentsOfDirectory(atPath: folder).map { folder + "/" + $0 }.sorted()
        #expect(try complete(["ifmeter", "serve", "--state", folder + "/ifmeter"]).sorted() == pages)
        #expect(try complete(["ifmeter", "replay", folder + "/ifmeter"]).sorted() == pages)
        // plan's action first, then (set, remove) an interface or an option.
        #expect(try complete(["ifmeter", "plan", ""]) == ["set", "list", "remove"])
        #expect(try complete(["ifmeter", "plan", "r"]) == ["remove"])
        #expect(try complete(["ifmeter", "plan", "--state", "x.db", ""]) == ["set", "list", "remove"])
        #expect(try complete(["ifmeter", "plan", "set", "lo"]) == ["lo"])
        #expect(try complete(["ifmeter", "plan", "set", "lo", "--cy"]) == ["--cycle-start"])
    }

    @Test func zshAndFishAcceptTheirScripts() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let zsh = tree.path("/usr/share/zsh/vendor-completions/_ifmeter")
        let zshCheck = try run(["zsh", "-n", zsh], allowFailure: true)
        #expect(zshCheck.status == 0, "\(zshCheck.err)")
        #expect(try String(contentsOfFile: zsh, encoding: .utf8).hasPrefix("#compdef ifmeter\n"))
        let fish = tree.path("/usr/share/fish/vendor_completions.d/ifmeter.fish")
        let fishCheck = try run(["fish", "-n", fish], allowFailure: true)
        #expect(fishCheck.status == 0, "\(fishCheck.err)")
        // fish can say what it would complete.
        func complete(_ line: String) throws -> [String] {
            let out = try run(["fish", "--no-config", "-c", "source '\(fish)'; complete -C '\(line)'"]).out
            return out.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }
        }
        #expect(try complete("ifmeter se") == ["serve"])
        #expect(try complete("ifmeter serve --li") == ["--listen"])
        #expect(try complete("ifmeter serve --kind ") == InterfaceKind.allCases.map(\.rawValue).sorted())
        #expect(try complete("ifmeter plan ") == ["list", "remove", "set"])
        #expect(try complete("ifmeter plan set lo").contains("lo"))
        #expect(try complete("ifmeter plan set --cy") == ["--cycle-start"])
    }

    @Test func unitVerifiesAndScoresOK() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let unit = tree.path("/lib/systemd/system/ifmeter-serve.service")
        let text = try String(contentsOfFile: unit, encoding: .utf8)
        #expect(text.contains("ExecStart=/usr/bin/ifmeter serve --config /etc/ifmeter/ifmeter.yml --state /var/lib/ifmeter/state.db\n"))
        // verify needs ExecStart's binary to exist: the installed one, by its
        // path under the temporary root. MANPATH lets it check Documentation=.
        let check = tree.root.appendingPathComponent("verify")
        try FileManager.default.createDirectory(at: check, withIntermediateDirectories: true)
        let adjusted = text.replacingOccurrences(of: "ExecStart=/usr/bin/", with: "ExecStart=\(tree.path("/usr/bin"))/")
        let copy = check.appendingPathComponent("ifmeter-serve.service").path
        try adjusted.write(toFile: copy, atomically: true, encoding: .utf8)
        let verify = try run(["env", "MANPATH=\(tree.path("/usr/share/man"))", "systemd-analyze", "verify", copy], allowFailure: true)
        #expect(verify.status == 0 && verify.err.isEmpty, "\(verify.out)\(verify.err)")
        let security = try run(["systemd-analyze", "security", "--offline=true", "--no-pager", unit], allowFailure: true)
        let line = security.out.split(separator: "\n").first { $0.contains("Overall exposure level") }
        let score = line.flatMap { $0.split(separator: ":").last?.split(separator: " ").first }.flatMap { Double($0) }
        let value = try #require(score, "no score in: \(security.out)\(security.err)")
        #expect(value <= 3.0, "\(line ?? "")")
        #expect(line?.contains(" OK") == true, "\(line ?? "")")
    }

    /// Issue 30: the rules, their promtool suite, the dashboard and the
    /// alerts' runbook are installed under share/ifmeter, and the installed
    /// suite passes where it lies.
    @Test func theRulesDashboardAndRunbookAreInstalled() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let files = try tree.files()
        for file in [
            "/usr/share/ifmeter/prometheus/ifmeter-rules.yml", "/usr/share/ifmeter/prometheus/ifmeter-rules-test.yml",
            "/usr/share/ifmeter/grafana/ifmeter.json", "/usr/share/ifmeter/alerts.md",
        ] {
            #expect(files.contains(file), "\(file) in \(files)")
        }
        let suite = try run(["promtool", "test", "rules", tree.path("/usr/share/ifmeter/prometheus/ifmeter-rules-test.yml")], allowFailure: true)
        #expect(suite.status == 0 && suite.out.contains("SUCCESS"), "\(suite.out)\(suite.err)")
        // Where every alert's runbook_url points, on the installed system:
        // the alerting host's serve (issue 48), unless RUNBOOK_BASE says
        // otherwise (below).
        let rules = try String(contentsOfFile: tree.path("/usr/share/ifmeter/prometheus/ifmeter-rules.yml"), encoding: .utf8)
        #expect(rules.contains(#"runbook_url: "http://{{ stripPort $labels.instance }}:9874/runbooks#ifmeterhostsilent""#))
        // The page installed is the one serve answers, as docs/alerts.md has it.
        let page = try String(contentsOfFile: tree.path("/usr/share/ifmeter/alerts.md"), encoding: .utf8)
        #expect(page == (try String(contentsOf: repositoryRoot.appendingPathComponent("docs/alerts.md"), encoding: .utf8)))
    }

    /// Issue 48: an operator sets the runbooks' base once, at install
    /// (`RUNBOOK_BASE`): every alert's runbook_url in the installed rules is
    /// that base and its own fragment, and the installed promtool suite,
    /// rewritten the same way, still passes.
    @Test func runbookBaseIsSetOnceAtInstall() throws {
        let base = "https://wiki.example/ifmeter-alerts?team=net&x=a|b"
        let tree = try Installation(prefix: "/usr", variables: ["RUNBOOK_BASE=\(base)"])
        defer { tree.remove() }
        let installed = try String(contentsOfFile: tree.path("/usr/share/ifmeter/prometheus/ifmeter-rules.yml"), encoding: .utf8)
        let shipped = try String(contentsOf: repositoryRoot.appendingPathComponent("dist/prometheus/ifmeter-rules.yml"), encoding: .utf8)
        func urls(_ text: String) -> [String] {
            text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.hasPrefix("runbook_url:") }
        }
        let before = urls(shipped), after = urls(installed)
        #expect(after.count == before.count && after.count >= 19)
        for (old, new) in zip(before, after) {
            let fragment = try #require(old.split(separator: "#").last)
            #expect(new == "runbook_url: \"\(base)#\(fragment)", "\(new)")
        }
        // Nothing else changed.
        #expect(
            installed.split(separator: "\n").filter { !$0.contains("runbook_url:") }
                == shipped.split(separator: "\n").filter { !$0.contains("runbook_url:") })
        let suite = try run(["promtool", "test", "rules", tree.path("/usr/share/ifmeter/prometheus/ifmeter-rules-test.yml")], allowFailure: true)
        #expect(suite.status == 0 && suite.out.contains("SUCCESS"), "\(suite.out)\(suite.err)")
        let tests = try String(contentsOfFile: tree.path("/usr/share/ifmeter/prometheus/ifmeter-rules-test.yml"), encoding: .utf8)
        #expect(urls(tests).allSatisfy { $0.hasPrefix("runbook_url: \"\(base)#") } && urls(tests).count >= 19)
    }

    /// Issue 30, finding 6: the packaged unit talks to localhost only; a
    /// drop-in (what docs/service.md and README.Debian say) makes it push to
    /// a receiver off the host, its credentials loaded as systemd
    /// credentials. The unit with the drop-in verifies and keeps its score.
    @Test func aDropInMakesTheServicePushOffTheHost() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let dropIn = tree.path("/etc/systemd/system/ifmeter-serve.service.d")
        try FileManager.default.createDirectory(atPath: dropIn, withIntermediateDirectories: true)
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/service.md"), encoding: .utf8)
        // The drop-in as the documentation gives it, between its markers.
        let start = try #require(text.range(of: "# /etc/systemd/system/ifmeter-serve.service.d/push.conf\n"))
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        try String(text[start.upperBound..<end.lowerBound]).write(toFile: dropIn + "/push.conf", atomically: true, encoding: .utf8)
        for file in ["remote-write.yml", "rw-password"] {
            try FileManager.default.createDirectory(atPath: tree.path("/etc/ifmeter"), withIntermediateDirectories: true)
            try "x\n".write(toFile: tree.path("/etc/ifmeter/" + file), atomically: true, encoding: .utf8)
        }
        // What systemd needs to verify a unit offline under a root: the
        // targets, and ExecReload='s kill.
        try FileManager.default.createDirectory(atPath: tree.path("/bin"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "/bin/kill", toPath: tree.path("/bin/kill"))
        let units = tree.path("/usr/lib/systemd/system")
        try FileManager.default.createDirectory(atPath: units, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: "/lib/systemd/system")
        where name.hasSuffix(".target") || name.hasSuffix(".slice") {
            try? FileManager.default.copyItem(atPath: "/lib/systemd/system/" + name, toPath: units + "/" + name)
        }
        let verify = try run(
            ["env", "MANPATH=\(tree.path("/usr/share/man"))", "systemd-analyze", "verify", "--root=\(tree.root.path)", "ifmeter-serve.service"],
            allowFailure: true)
        #expect(verify.status == 0 && verify.err.isEmpty, "\(verify.out)\(verify.err)")
        let effective = try run(
            ["systemd-analyze", "cat-config", "--root=\(tree.root.path)", "systemd/system/ifmeter-serve.service"], allowFailure: true)
        #expect(effective.out.contains("--remote-write https://") && effective.out.contains("IPAddressAllow=192.0.2.10"), "\(effective.out)")
        let security = try run(
            ["systemd-analyze", "security", "--offline=true", "--no-pager", "--root=\(tree.root.path)", "ifmeter-serve.service"], allowFailure: true)
        let line = security.out.split(separator: "\n").first { $0.contains("Overall exposure level") }
        let score = line.flatMap { $0.split(separator: ":").last?.split(separator: " ").first }.flatMap { Double($0) }
        let value = try #require(score, "no score in: \(security.out)\(security.err)")
        #expect(value <= 3.0 && line?.contains(" OK") == true, "\(line ?? "")")
    }

    /// Issue 31: the unit reads the shipped config file, every setting in
    /// it commented out; its ExecStart, run as it stands (the paths under
    /// the temporary root), starts serve from it.
    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func theUnitStartsFromTheShippedConfig() throws {
        try Netns.requireRoot()
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let config = tree.path("/etc/ifmeter/ifmeter.yml")
        let shipped = try String(contentsOfFile: config, encoding: .utf8)
        #expect(shipped == (try ifmeter(["--generate-config"]).out))
        #expect(try ifmeter(["config", "check", config]).status == 0)
        let unit = try String(contentsOfFile: tree.path("/lib/systemd/system/ifmeter-serve.service"), encoding: .utf8)
        let line = try #require(unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        let state = tree.root.appendingPathComponent("state").path
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        chmod(state, 0o700)
        let words = line.dropFirst("ExecStart=".count).split(separator: " ").map { word -> String in
            switch word {
            case "/usr/bin/ifmeter": tree.path("/usr/bin/ifmeter")
            case "/etc/ifmeter/ifmeter.yml": config
            case "/var/lib/ifmeter/state.db": state + "/state.db"
            default: String(word)
            }
        }
        #expect(words.contains(config), "the unit reads the config file: \(line)")
        let ns = try TestNamespace()
        let serve = try Background(["ip", "netns", "exec", ns.name] + words, name: "serve-unit")
        _ = try waitFor("serve from the unit's command line") { serve.log.contains("listening on http://127.0.0.1:9874/metrics") ? true : nil }
        #expect(serve.stop() == 0, "\(serve.log)")
        // A make install over an edited file keeps it.
        try (shipped + "interval: 2s\n").write(toFile: config, atomically: true, encoding: .utf8)
        try tree.make("install")
        #expect(try String(contentsOfFile: config, encoding: .utf8).hasSuffix("interval: 2s\n"))
    }

    @Test func everyDirectiveOfTheUnitIsInTheManPage() throws {
        let tree = try Installation(prefix: "/usr")
        defer { tree.remove() }
        let unit = try String(contentsOfFile: tree.path("/lib/systemd/system/ifmeter-serve.service"), encoding: .utf8)
        let root = try tree.renderedPage("ifmeter")
        let keys = unit.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.hasPrefix("[") && $0.contains("=") }
            .map { String($0[..<$0.firstIndex(of: "=")!]) }
        #expect(keys.count > 20)
        let unexplained = keys.filter { !["Description", "Documentation", "After"].contains($0) && !root.contains($0 + "=") }
        #expect(unexplained == [], "directives of the unit that ifmeter(1) does not explain")
    }

    @Test func uninstallLeavesNothing() throws {
        let tree = try Installation(prefix: "/usr")
        let before = try tree.files()
        #expect(before.contains("/usr/bin/ifmeter") && before.contains("/lib/systemd/system/ifmeter-serve.service"))
        defer { tree.remove() }
        try tree.make("uninstall")
        let left = try FileManager.default.contentsOfDirectory(atPath: tree.root.path)
        #expect(left.isEmpty, "left after uninstall: \(left)")
    }

    @Test func otherPrefixesKeepTheUnitUnderThem() throws {
        let tree = try Installation(prefix: "/usr/local")
        defer { tree.remove() }
        let files = try tree.files()
        #expect(files.contains("/usr/local/lib/systemd/system/ifmeter-serve.service"))
        #expect(files.allSatisfy { $0.hasPrefix("/usr/local/") }, "\(files)")
        let unit = try String(contentsOfFile: tree.path("/usr/local/lib/systemd/system/ifmeter-serve.service"), encoding: .utf8)
        #expect(unit.contains("ExecStart=/usr/local/bin/ifmeter serve"))
        try tree.make("uninstall")
        #expect(try FileManager.default.contentsOfDirectory(atPath: tree.root.path).isEmpty)
    }
}

/// A `make install` into a fresh temporary DESTDIR.
struct Installation: Sendable {
    let root: URL
    let prefix: String
    let binary: String
    let variables: [String]

    /// `variables`: more of make's (`NAME=value`), for install and uninstall.
    init(prefix: String, variables: [String] = []) throws(TestFailure) {
        do {
            for tool in ["make", "man", "groff", "bash", "zsh", "fish", "systemd-analyze"] {
                let found = try run(["sh", "-c", "command -v \(tool)"], allowFailure: true)
                if found.status != 0 {
                    throw TestFailure("\(tool) is missing: run 'make test', which installs TEST_PACKAGES")
                }
            }
            root = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-install-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            self.prefix = prefix
            self.variables = variables
            binary = try Self.binary()
            try make("install")
        } catch let error as TestFailure {
            throw error
        } catch {
            throw TestFailure("make install failed: \(error)")
        }
    }

    /// The binary to install (see InstallTests).
    static func binary() throws -> String {
        if let path = ProcessInfo.processInfo.environment["IFMETER_INSTALL_BINARY"] { return path }
        let release = repositoryRoot.appendingPathComponent(".build/release/ifmeter").path
        if let built = modified(release), newestSource() < built { return release }
        return try ifmeterBinary()
    }

    static func modified(_ path: String) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
    }

    static func newestSource() -> Date {
        var newest = modified(repositoryRoot.appendingPathComponent("Package.swift").path) ?? .distantFuture
        let sources = repositoryRoot.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: [.contentModificationDateKey])
        while let file = files?.nextObject() as? URL {
            if let date = try? file.resourceValues(forKeys: [.contentModificationDateKey]).contentModificationDate, date > newest {
                newest = date
            }
        }
        return newest
    }

    func make(_ target: String) throws {
        // The pages and completions are generated in this test's own
        // folder, not the tree's .build/install, which `make deb` may be
        // using meanwhile (make test builds the package beside the tests).
        try run(
            [
                "make", "-s", "-C", repositoryRoot.path, target, "DESTDIR=\(root.path)", "PREFIX=\(prefix)", "BINARY=\(binary)",
                "GENERATED=\(root.path).generated",
            ] + variables)
    }

    func path(_ installed: String) -> String { root.path + installed }

    func remove() {
        try? FileManager.default.removeItem(at: root)
        try? FileManager.default.removeItem(atPath: root.path + ".generated")
    }

    /// Every file installed, as its path on the target system.
    func files() throws -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: root.path)
        var files: [String] = []
        while let relative = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root.path + "/" + relative, isDirectory: &isDirectory), !isDirectory.boolValue {
                files.append("/" + relative)
            }
        }
        return files.sorted()
    }

    func manPages() throws -> [URL] {
        let folder = root.appendingPathComponent("usr/share/man/man1")
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
    }

    /// A page as man shows it, plain text (wide, so no option is broken).
    func renderedPage(_ name: String) throws -> String {
        try run(["env", "MANWIDTH=200", "man", "-l", path("/usr/share/man/man1/\(name).1")]).out
    }
}
