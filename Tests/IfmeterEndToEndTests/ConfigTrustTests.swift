import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 45, part 2: a config file, and every file it names, is trusted as
/// a state file is: another user's, or one others may write, or one reached
/// through another user's link or folder, is refused at start (exit 1, one
/// line naming the file and what is wrong), used with
/// `--allow-foreign-files`, and left aside by SIGHUP (the running config
/// stays).
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ConfigTrustTests {
    /// `nobody`: another user, who owns what the tests plant.
    static let nobody: UInt32 = 65534

    /// A fresh folder of root's, 0755.
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-trust-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o755)
        return path
    }

    func write(_ path: String, _ text: String, mode: mode_t = 0o644, owner: UInt32? = nil) throws {
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        #expect(chmod(path, mode) == 0)
        if let owner { #expect(chown(path, owner, owner) == 0) }
    }

    /// Runs ifmeter in `ns` until it exits on its own, or until serve says
    /// it listens (then it is stopped): its status, its log, and whether it
    /// started.
    func start(_ arguments: [String], in ns: TestNamespace) throws -> (status: Int32, log: String, started: Bool) {
        let process = try Background(["ip", "netns", "exec", ns.name, try ifmeterBinary()] + arguments, name: "trust")
        _ = try waitFor("ifmeter \(arguments[0]) to refuse or start") { () -> Bool? in
            !process.process.isRunning || process.log.contains("listening on http") ? true : nil
        }
        let started = process.process.isRunning
        return (process.stop(), process.log, started)
    }

    /// The one error line of a refusal: it names `file` and says `problem`.
    func expectRefused(_ result: (status: Int32, log: String, started: Bool), _ file: String, _ problem: String, _ what: String) {
        #expect(!result.started && result.status == 1, "\(what): refused, exit 1: \(result.log)")
        let lines = result.log.split(separator: "\n")
        #expect(lines.count == 1, "\(what): one line: \(result.log)")
        #expect(result.log.hasPrefix("Error: cannot use ") && result.log.contains(file), "\(what): names \(file): \(result.log)")
        #expect(result.log.contains(problem), "\(what): says '\(problem)': \(result.log)")
        #expect(result.log.contains("--allow-foreign-files"), "\(what): says how to use it anyway: \(result.log)")
    }

    /// The config file itself: nobody's, writable by all, reached through
    /// nobody's link in a sticky folder, in a folder all may write or nobody
    /// owns. serve and `config check` refuse each; `--allow-foreign-files`
    /// uses it.
    @Test func aConfigAnotherUserCouldChangeIsRefusedAtStart() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = "serve:\n  listen: 127.0.0.1:19451\n  interval: 200ms\n"
        var cases: [(what: String, path: String, problem: String)] = []

        try write(dir + "/nobodys.yml", config, owner: Self.nobody)
        cases.append(("nobody's config", dir + "/nobodys.yml", "it is owned by uid 65534, another user"))
        try write(dir + "/open.yml", config, mode: 0o666)
        cases.append(("a 0666 config", dir + "/open.yml", "it is writable by every user (mode 0666)"))
        try write(dir + "/group.yml", config, mode: 0o664)
        cases.append(("a 0664 config", dir + "/group.yml", "it is writable by its group (mode 0664)"))
        // nobody's link in a sticky folder (as /tmp is), to root's own file.
        try FileManager.default.createDirectory(atPath: dir + "/sticky", withIntermediateDirectories: false)
        #expect(chmod(dir + "/sticky", 0o1777) == 0)
        try write(dir + "/good.yml", config)
        #expect(symlink(dir + "/good.yml", dir + "/sticky/linked.yml") == 0 && lchown(dir + "/sticky/linked.yml", Self.nobody, Self.nobody) == 0)
        cases.append(("nobody's link in a sticky folder", dir + "/sticky/linked.yml", "a symbolic link owned by uid 65534"))
        // A folder every user may write, and one nobody owns.
        for (name, mode, owner, problem) in [
            ("open", mode_t(0o777), UInt32(0), "writable by every user (mode 0777) and not sticky"),
            ("nobodys", mode_t(0o755), Self.nobody, "the folder is owned by uid 65534"),
        ] {
            try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: false)
            try write(dir + "/\(name)/ifmeter.yml", config)
            #expect(chmod(dir + "/" + name, mode) == 0 && chown(dir + "/" + name, owner, owner) == 0)
            cases.append(("a config in a folder \(name)", dir + "/\(name)/ifmeter.yml", problem))
        }

        for c in cases {
            expectRefused(try start(["serve", "--config", c.path], in: ns), c.path, c.problem, "serve: \(c.what)")
            let check = try ifmeter(["config", "check", c.path])
            expectRefused((check.status, check.err, false), c.path, c.problem, "config check: \(c.what)")
            #expect(check.out.isEmpty)
            let allowed = try ifmeter(["config", "check", "--allow-foreign-files", c.path])
            #expect(allowed.status == 0 && allowed.out.contains("good."), "\(c.what): used with --allow-foreign-files: \(allowed.err)")
        }
        // serve itself starts from one with --allow-foreign-files.
        let allowed = try start(["serve", "--config", dir + "/nobodys.yml", "--allow-foreign-files"], in: ns)
        #expect(allowed.started && allowed.log.contains("127.0.0.1:19451"), "\(allowed.log)")
        // A good one starts as before.
        let good = try start(["serve", "--config", dir + "/good.yml"], in: ns)
        #expect(good.started, "\(good.log)")
    }

    /// The files a good config names: a web config, a remote write config,
    /// the TLS key and certificate a web config or remote write config
    /// names, nobody's or writable by all; an export target in a folder
    /// nobody owns. Each refused at start, naming the file; `config check`
    /// refuses the same; `--allow-foreign-files` uses it.
    @Test func theFilesAGoodConfigNamesAreCheckedAlike() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pki = try TestPKI()
        let base = "serve:\n  listen: 127.0.0.1:19452\n  interval: 200ms\n"
        let users = "basic_auth_users:\n  \(pki.user): '\(pki.hash)'\n"
        let remote = "  remote-write: [http://127.0.0.1:19453/api/v1/write]\n  remote-write-queue: \(dir)/queue\n"
        try FileManager.default.createDirectory(atPath: dir + "/keys", withIntermediateDirectories: false)
        for name in ["server.crt", "server.key"] { try FileManager.default.copyItem(atPath: pki.dir + "/" + name, toPath: dir + "/keys/" + name) }
        var cases: [(what: String, config: String, file: String, problem: String)] = []
        for (owner, mode, problem) in [
            (Self.nobody, mode_t(0o644), "it is owned by uid 65534, another user"),
            (UInt32(0), mode_t(0o666), "it is writable by every user (mode 0666)"),
        ] {
            let tag = owner == 0 ? "open" : "nobodys"
            try write(dir + "/web-\(tag).yml", users, mode: mode, owner: owner)
            cases.append(("\(tag) web config", base + "  web-config: \(dir)/web-\(tag).yml\n", dir + "/web-\(tag).yml", problem))
            try write(dir + "/rw-\(tag).yml", "remote_timeout: 5s\n", mode: mode, owner: owner)
            cases.append(
                ("\(tag) remote write config", base + remote + "  remote-write-config: \(dir)/rw-\(tag).yml\n", dir + "/rw-\(tag).yml", problem))
            // A key named by a good web config, and by a good remote write config.
            try FileManager.default.copyItem(atPath: pki.dir + "/server.key", toPath: dir + "/keys/\(tag).key")
            #expect(chmod(dir + "/keys/\(tag).key", mode) == 0 && chown(dir + "/keys/\(tag).key", owner, owner) == 0)
            try write(dir + "/web-key-\(tag).yml", "tls_server_config:\n  cert_file: keys/server.crt\n  key_file: keys/\(tag).key\n")
            cases.append(("\(tag) TLS key of the web config", base + "  web-config: \(dir)/web-key-\(tag).yml\n", dir + "/keys/\(tag).key", problem))
            try write(dir + "/rw-key-\(tag).yml", "tls_config:\n  cert_file: keys/server.crt\n  key_file: keys/\(tag).key\n")
            cases.append(
                (
                    "\(tag) TLS key of the remote write config", base + remote + "  remote-write-config: \(dir)/rw-key-\(tag).yml\n",
                    dir + "/keys/\(tag).key", problem
                ))
        }
        for (n, c) in cases.enumerated() {
            let path = dir + "/config-\(n).yml"
            try write(path, c.config)
            expectRefused(try start(["serve", "--config", path], in: ns), c.file, c.problem, "serve: \(c.what)")
            let check = try ifmeter(["config", "check", path])
            expectRefused((check.status, check.err, false), c.file, c.problem, "config check: \(c.what)")
            let allowed = try start(["serve", "--config", path, "--allow-foreign-files"], in: ns)
            #expect(allowed.started, "\(c.what): used with --allow-foreign-files: \(allowed.log)")
        }

        // An export target the config names, in a folder nobody owns.
        try FileManager.default.createDirectory(atPath: dir + "/nobodys", withIntermediateDirectories: false)
        #expect(chown(dir + "/nobodys", Self.nobody, Self.nobody) == 0)
        for key in ["json", "textfile"] {
            let target = dir + "/nobodys/r.\(key)"
            let path = dir + "/export-\(key).yml"
            try write(path, "interval: 100ms\nexport:\n  every: 100ms\n  \(key): \(target)\n")
            let refused = try start(["export", "--config", path], in: ns)
            expectRefused(refused, target, "its folder \(dir)/nobodys: the folder is owned by uid 65534", "export: \(key) in nobody's folder")
            #expect(!FileManager.default.fileExists(atPath: target), "nothing written")
            let check = try ifmeter(["config", "check", path])
            expectRefused((check.status, check.err, false), target, "owned by uid 65534", "config check: \(key) in nobody's folder")
            let export = try Background(
                ["ip", "netns", "exec", ns.name, try ifmeterBinary(), "export", "--config", path, "--allow-foreign-files"], name: "trust-export")
            _ = try waitFor("the \(key) target written with --allow-foreign-files") { () throws -> Bool? in
                try export.requireRunning()
                return FileManager.default.fileExists(atPath: target) ? true : nil
            }
            #expect(export.stop() == 0, "\(export.log)")
        }
    }

    /// SIGHUP finds the config (or a file it names) now nobody's or open to
    /// all: one line naming the file, and the running config stays (its
    /// filter on /metrics); made root's again, the same change applies.
    @Test func sighupKeepsTheRunningConfigWhenTheFileIsNoLongerTrusted() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ifmeter.yml"
        func config(_ include: String, web: String? = nil) -> String {
            "include: [\(include)]\nserve:\n  listen: 127.0.0.1:19454\n  interval: 200ms\n" + (web.map { "  web-config: \($0)\n" } ?? "")
        }
        try write(path, config("lo"))
        let serve = try Background(["ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "serve", "--config", path], name: "trust-reload")
        _ = try waitFor("serve") { () throws -> Bool? in
            try serve.requireRunning()
            return serve.log.contains("listening") ? true : nil
        }
        func interfaces() throws -> (lo: Bool, vA: Bool) {
            let text = try Scenario.scrape(pair.a, port: 19454)
            return (text.contains("interface=\"lo\""), text.contains("interface=\"vA\""))
        }
        #expect(try interfaces() == (true, false))
        func failures() -> [Substring] { serve.log.split(separator: "\n").filter { $0.contains("after SIGHUP failed") } }
        let web = dir + "/web.yml"
        try write(web, "# nothing yet\n", owner: Self.nobody)
        let steps: [(what: String, prepare: () throws -> Void, file: String, problem: String)] = [
            ("nobody's config", { try self.write(path, config("vA"), owner: Self.nobody) }, path, "owned by uid 65534"),
            ("a 0666 config", { try self.write(path, config("vA"), mode: 0o666, owner: 0) }, path, "writable by every user (mode 0666)"),
            ("nobody's web config", { try self.write(path, config("vA", web: web), owner: 0) }, web, "owned by uid 65534"),
        ]
        for (n, step) in steps.enumerated() {
            try step.prepare()
            serve.process.signal(SIGHUP)
            let line = try waitFor("\(step.what): the reload refused") { failures().count > n ? String(failures()[n]) : nil }
            #expect(line.contains("reloading \(path) after SIGHUP failed: cannot use "), "\(step.what): \(line)")
            #expect(line.contains(step.file) && line.contains(step.problem), "\(step.what): names the file and what is wrong: \(line)")
            #expect(line.contains("the running settings stay"), "\(line)")
            #expect(try interfaces() == (true, false), "\(step.what): the running filter stays")
        }
        // The same change from files of root's own: applied.
        #expect(chown(web, 0, 0) == 0)
        serve.process.signal(SIGHUP)
        let applied = try waitFor("the reload applied") { serve.log.split(separator: "\n").first { $0.contains("reloaded \(path)") } }
        #expect(applied.contains("filters"), "\(applied)")
        _ = try waitFor("vA, not lo, on /metrics") { try interfaces() == (false, true) ? true : nil }
        #expect(failures().count == steps.count, "\(serve.log)")
        #expect(serve.stop() == 0, "\(serve.log)")
    }
}

/// Issue 45, part 3 and part 6: an error never quotes a line that is not a
/// setting (a shadow file given as a config or a web config says its file,
/// line and column, never its text), bytes that are not UTF-8 are refused
/// where they are, and a flood of SIGHUPs is applied, every one, but said
/// in a bounded number of lines.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ConfigWordsTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-words-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o755)
        return path
    }

    /// A shadow file's lines, with a fake hash (the real /etc/shadow is
    /// never read): no word of them may appear in a message.
    static let shadow = """
        root:$6$fAkEsAlT$FAKEHASHfakehashFAKEHASHfakehashFAKEHASHfakehash0123456789abcdefABCDEF.:20228:0:99999:7:::
        daemon:*:20228:0:99999:7:::
        operator:$y$j9T$SECRETsecretSECRET$MoreFakeHashMoreFakeHash:20228:0:99999:7:::

        """
    static let secrets = ["$6$", "fAkEsAlT", "FAKEHASH", "root:", "daemon", "operator", "SECRET", ":20228:"]

    func expectNoSecret(_ text: String, _ what: String) {
        for secret in Self.secrets { #expect(!text.contains(secret), "\(what): '\(secret)' must not appear: \(text)") }
    }

    @Test func aShadowFileIsNeverQuoted() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let shadow = dir + "/shadow"
        try Self.shadow.write(toFile: shadow, atomically: false, encoding: .utf8)
        #expect(chmod(shadow, 0o640) == 0)
        #expect(symlink(shadow, dir + "/link.yml") == 0)
        // As the config: check, serve and export, the file itself or a link.
        for path in [shadow, dir + "/link.yml"] {
            for command in [["config", "check", path], ["serve", "--config", path], ["export", "--config", path]] {
                let result = try ifmeter(command, in: ns)
                #expect(result.status == 65, "\(command): \(result.err)")
                #expect(result.err.hasPrefix("Error: \(path):1:1: this line is not a setting"), "names file, line and column: \(result.err)")
                #expect(result.err.split(separator: "\n").count == 1, "\(result.err)")
                expectNoSecret(result.err + result.out, "\(command)")
            }
        }
        // As the web config and the remote write config, named on the
        // command line or by a config.
        let config = dir + "/ifmeter.yml"
        try "serve:\n  web-config: \(shadow)\n".write(toFile: config, atomically: false, encoding: .utf8)
        let rw = ["serve", "--listen", "127.0.0.1:19455", "--remote-write", "http://127.0.0.1:1/w", "--remote-write-queue", dir + "/q"]
        for (command, prefix) in [
            (["serve", "--listen", "127.0.0.1:19455", "--web-config", shadow], "Error: web config \(shadow):1:1: a key that is not a name"),
            (["serve", "--config", config], "Error: web config \(shadow):1:1: a key that is not a name"),
            (["config", "check", config], "Error: web config \(shadow):1:1: a key that is not a name"),
            (rw + ["--remote-write-config", shadow], "Error: remote write config \(shadow):1:1: a key that is not a name"),
        ] {
            let result = try ifmeter(command, in: ns)
            #expect(result.status == 65 && result.err.hasPrefix(prefix), "\(command): \(result.err)")
            expectNoSecret(result.err + result.out, "\(command)")
        }
        // Lines of other shapes: a scalar at the top, a list, a value of an
        // unknown key, a key given twice, a key with spaces, a user name and
        // a label name that are such a line; each as a config, a web config
        // and a remote write config.
        let shapes = [
            "$6$fAkEsAlT$FAKEHASH\n", "- root:$6$fAkEsAlT$FAKEHASH\n", "unknown: $6$fAkEsAlT$FAKEHASH\n",
            "root:$6$fAkEsAlT:\nroot:$6$fAkEsAlT:\n", "root $6$ fAkEsAlT: x\n", "serve:\n  root:$6$fAkEsAlT$FAKEHASH: 1\n",
            "basic_auth_users:\n  root:$6$fAkEsAlT$FAKEHASH: x\n", "external_labels:\n  root:$6$fAkEsAlT$FAKEHASH: x\n",
        ]
        for (n, text) in shapes.enumerated() {
            let path = dir + "/shape-\(n).yml"
            try text.write(toFile: path, atomically: false, encoding: .utf8)
            let result = try ifmeter(["config", "check", path])
            #expect(result.status == 65 && result.err.hasPrefix("Error: \(path):"), "\(text.debugDescription): \(result.err)")
            expectNoSecret(result.err, text.debugDescription)
            let web = try ifmeter(["serve", "--listen", "127.0.0.1:19455", "--web-config", path], in: ns)
            #expect(web.status == 65, "\(text.debugDescription): \(web.err)")
            expectNoSecret(web.err, "web config \(text.debugDescription)")
            let remote = try ifmeter(rw + ["--remote-write-config", path], in: ns)
            #expect(remote.status == 65, "\(text.debugDescription): \(remote.err)")
            expectNoSecret(remote.err, "remote write config \(text.debugDescription)")
        }
        // A misspelt key still gets its hint; one of ours is named.
        try "listne: 1\n".write(toFile: dir + "/typo.yml", atomically: false, encoding: .utf8)
        #expect(
            try ifmeter(["config", "check", dir + "/typo.yml"]).err.contains("'listne' is not a setting of serve or export (did you mean 'listen'?)"))

        // On SIGHUP: the config now names the shadow file as its web config.
        try "serve:\n  listen: 127.0.0.1:19456\n  interval: 200ms\n".write(toFile: config, atomically: false, encoding: .utf8)
        let serve = try startServe(in: ns, port: 19456, ["--config", config])
        try "serve:\n  listen: 127.0.0.1:19456\n  interval: 200ms\n  web-config: \(shadow)\n".write(
            toFile: config, atomically: false, encoding: .utf8)
        serve.process.signal(SIGHUP)
        let line = try waitFor("the reload refused") { serve.log.split(separator: "\n").first { $0.contains("after SIGHUP failed") } }
        #expect(line.contains("web config \(shadow):1:1: a key that is not a name"), "\(line)")
        try Self.shadow.write(toFile: config, atomically: false, encoding: .utf8)
        serve.process.signal(SIGHUP)
        _ = try waitFor("the second reload refused") { serve.log.contains("reloading \(config) after SIGHUP failed: \(config):1:1:") ? true : nil }
        #expect(serve.stop() == 0)
        expectNoSecret(serve.log, "serve's log")
    }

    /// A byte that is not UTF-8 in a config value: refused at its line and
    /// column (65); in an alias: refused naming the argument (64).
    @Test func bytesThatAreNotUTF8AreRefusedWhereTheyAre() throws {
        try Netns.requireRoot()
        // serve in a namespace of its own: were it to start, it disturbs no one.
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ifmeter.yml"
        var bytes = Array("interval: 1s\ninclude: [eth0, wl".utf8)
        bytes += [0xFF] + Array("an0]\n".utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        for command in [["config", "check", path], ["serve", "--config", path]] {
            let result = try ifmeter(command, in: ns)
            #expect(result.status == 65, "\(command): \(result.err)")
            #expect(result.err.hasPrefix("Error: \(path):2:19: byte 0xFF is not UTF-8"), "\(command): \(result.err)")
            #expect(result.err.split(separator: "\n").count == 1, "\(result.err)")
        }
        // The web config too.
        try Data(Array("basic_auth_users:\n  al".utf8) + [0xC3, 0x28] + Array("ce: x\n".utf8)).write(to: URL(fileURLWithPath: dir + "/web.yml"))
        let web = try ifmeter(["serve", "--listen", "127.0.0.1:1", "--web-config", dir + "/web.yml"], in: ns)
        #expect(web.status == 65 && web.err.hasPrefix("Error: web config \(dir)/web.yml:2:5: byte 0xC3 is not UTF-8"), "\(web.err)")

        // An alias, given from a shell (Swift's strings cannot carry the byte).
        let state = dir + "/s.db"
        #expect(try ifmeter(["plan", "set", "lo", "--state", state, "--cycle-start", "1"]).status == 0)
        let alias = try run(
            ["sh", "-c", "exec \"$0\" state alias lo \"$(printf 'up\\377link')\" --state \"$1\"", try ifmeterBinary(), state], allowFailure: true)
        #expect(alias.status == 64, "\(alias.err)")
        #expect(alias.err.hasPrefix("Error: invalid alias (the <new> argument): byte 3 (0xFF) is not UTF-8"), "\(alias.err)")
        #expect(alias.err.split(separator: "\n").count == 1, "\(alias.err)")
    }

    /// 2,000 SIGHUPs, a millisecond apart, while traffic flows and the file
    /// changes mid-way: a bounded number of reload lines, the number held
    /// back said, the last file applied, and every byte counted.
    @Test func aFloodOfSighupsIsAppliedButSaidInFewLines() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ifmeter.yml"
        func config(_ include: String) -> String { "include: [\(include)]\nserve:\n  listen: 127.0.0.1:19457\n  interval: 100ms\n" }
        try config("vA").write(toFile: path, atomically: false, encoding: .utf8)
        let serve = try startServe(in: pair.a, port: 19457, interval: "100ms", name: "serve-flood", ["--config", path])
        func reloadLines() -> [Substring] { serve.log.split(separator: "\n").filter { $0.contains("reloaded \(path)") } }
        let frame = VethPair.frameBytes(payload: 500)
        var sent: UInt64 = 0
        for n in 0..<2000 {
            serve.process.signal(SIGHUP)
            if n % 100 == 0 {
                try pair.sendUDP(count: 5, payload: 500)
                sent += 5 * frame
            }
            if n == 1000 { try config("vA, lo").write(toFile: path, atomically: false, encoding: .utf8) }
            // A pace, as the tester's 1,000 a second.
            Thread.sleep(forTimeInterval: 0.001)
        }
        try serve.requireRunning()
        // Every byte counted, and the last file applied.
        _ = try waitFor("every byte sent counted, lo shown") { () throws -> Bool? in
            let text = try Scenario.scrape(pair.a, port: 19457)
            let tx = Scenario.metric(text, "ifmeter_transmit_bytes_total").first { $0.key.contains(#"interface="vA""#) }?.value ?? 0
            return UInt64(tx) == sent && text.contains("interface=\"lo\"") ? true : nil
        }
        let said = reloadLines().count
        #expect(said >= 1 && said <= 20, "at most 10 lines each 10 s from each place, not one per SIGHUP: \(said)")
        // The next line said after the window says how many were held back.
        let held = try waitFor("a reload line saying how many were held back", timeout: 120, every: 0.5) { () throws -> Int? in
            try serve.requireRunning()
            serve.process.signal(SIGHUP)
            guard let line = reloadLines().last(where: { $0.contains("more messages like it") }),
                let range = line.range(of: "(and "), let n = Int(line[range.upperBound...].prefix { $0.isNumber })
            else { return nil }
            return n
        }
        #expect(held >= 10, "the flood's lines were held back and counted: \(held)")
        #expect(reloadLines().count < 40, "\(reloadLines().count)")
        #expect(serve.stop() == 0, "\(serve.log)")
    }
}
