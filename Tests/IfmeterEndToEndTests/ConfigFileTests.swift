import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 31, finding 4: one config file for serve and export, checked
/// without running, with the flags on top.
@Suite(.serialized, .blocking)
struct ConfigFileTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-config-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A broken file, the line its error names, and words the error says.
    static let broken: [(name: String, text: String, line: Int, words: String)] = [
        ("unknown key", "interval: 1s\nlistne: 127.0.0.1:9\n", 2, "'listne' is not a setting of serve or export (did you mean 'listen'?)"),
        ("another command's key", "serve:\n  json: r.json\n", 2, "'json' is not a setting of ifmeter serve"),
        ("a section misspelt", "sever:\n  listen: 127.0.0.1:9\n", 1, "(did you mean 'serve'?)"),
        ("an interval of 0", "\n\ninterval: 0\n", 3, "interval: invalid value '0'"),
        ("a list for one value", "interval: [1s, 2s]\n", 1, "'interval' takes one value, not a list"),
        ("a mapping for a value", "interval:\n  every: 1s\n", 1, "'interval' must be a value, not a mapping"),
        ("no value", "state:\n", 1, "'state' has no value"),
        ("an empty list", "include: []\n", 1, "'include' is an empty list"),
        ("a YAML syntax error", "interval: 1s\ninclude: [eth0\n", 2, "a bracket or brace left open"),
        ("a duplicate key", "interval: 1s\ninterval: 2s\n", 2, "interval"),
        ("a list at the top", "- interval\n", 1, "the config file must be a mapping"),
        ("a flag that is not true or false", "all-netns: maybe\n", 1, "'all-netns' is true or false"),
        ("a size that is not one", "export:\n  json: r.json\n  max-size: 10XB\n", 3, "export.max-size: "),
        ("a count below 1", "export:\n  json-lines: r.jsonl\n  keep: -1\n", 3, "export.keep: "),
        ("a choice it does not have", "serve:\n  compat: nodes\n", 2, "serve.compat: "),
        ("a listen address without a port", "serve:\n  listen: localhost\n", 2, "serve.listen: "),
        ("a connection limit of 0", "serve:\n  max-connections: 0\n", 2, "serve.max-connections: "),
        ("an anchor and its alias", "interval: &a 1s\nsave-every: *a\n", 1, "an anchor (&name); write the value out"),
    ]

    @Test func configCheckNamesTheLineOfEachBrokenFile() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (n, c) in Self.broken.enumerated() {
            let path = dir + "/broken-\(n).yml"
            try c.text.write(toFile: path, atomically: true, encoding: .utf8)
            let result = try ifmeter(["config", "check", path])
            #expect(result.status == 65, "\(c.name): \(result.status) \(result.err)")
            #expect(result.err.hasPrefix("Error: \(path):\(c.line): "), "\(c.name): \(result.err)")
            #expect(result.err.contains(c.words), "\(c.name): \(result.err)")
            #expect(result.err.split(separator: "\n").count == 1, "\(c.name): one line: \(result.err)")
            #expect(result.out.isEmpty, "\(c.name)")
            // serve (export for export's section) says the same before
            // running anything.
            let command = c.text.hasPrefix("export:") ? ["export", "--config", path] : ["serve", "--config", path]
            let started = try ifmeter(command)
            #expect(started.status == 65 && started.err == result.err, "\(c.name): \(command[0]): \(started.err)")
        }
        #expect(Self.broken.count >= 15)
        // A file that is not there: a usage error.
        let missing = try ifmeter(["config", "check", dir + "/missing.yml"])
        #expect(missing.status == 64 && missing.err.contains("cannot read the config file"), "\(missing.err)")
    }

    /// A bad flag is the command line's (64), even where the file has the
    /// same key; check judges serve as the unit runs it (with --state), and
    /// export wherever a key only export has is set.
    @Test func flagsAreNotBlamedOnTheFileAndCheckJudgesAsTheServiceRuns() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/a.yml"
        try "interval: 1s\nserve:\n  save-every: 10m\n".write(toFile: path, atomically: true, encoding: .utf8)
        let flag = try ifmeter(["serve", "--config", path, "--interval", "0s"])
        #expect(flag.status == 64 && !flag.err.contains(path), "\(flag.err)")
        let check = try ifmeter(["config", "check", path])
        #expect(check.status == 0, "save-every is good beside the unit's --state: \(check.err)")
        try "max-size: banana\n".write(toFile: path, atomically: true, encoding: .utf8)
        let export = try ifmeter(["config", "check", path])
        #expect(export.status == 65 && export.err.contains("\(path):1: max-size: "), "\(export.err)")
    }

    @Test func aGoodFileIsPrintedWithWhereEachSettingComesFrom() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ifmeter.yml"
        try "interval: 2s\ninclude: [eth*, wlan*]\nserve:\n  listen: 127.0.0.1:9999\n  interval: 5s\nexport:\n  every: 1m\n  json: r.json\n"
            .write(toFile: path, atomically: true, encoding: .utf8)
        let result = try ifmeter(["config", "check", path])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.contains("\(path): good."), "\(result.out)")
        // serve's own interval wins over the top's; export takes the top's.
        #expect(
            result.out.contains(
                "ifmeter serve\n  listen: 127.0.0.1:9999  (line 4, under serve:)\n  interval: 5s  (line 5, under serve:)\n  include: eth*, wlan*  (line 2)"
            ), "\(result.out)")
        #expect(
            result.out.contains(
                "ifmeter export\n  every: 1m  (line 7, under export:)\n  json: r.json  (line 8, under export:)\n  interval: 2s  (line 1)\n  include: eth*, wlan*  (line 2)"
            ), "\(result.out)")
    }

    @Test func theShippedFileIsGoodAndNamesEverySetting() throws {
        let example = try ifmeter(["--generate-config"])
        #expect(example.status == 0, "\(example.err)")
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try example.out.write(toFile: dir + "/ifmeter.yml", atomically: true, encoding: .utf8)
        let check = try ifmeter(["config", "check", dir + "/ifmeter.yml"])
        #expect(check.status == 0 && check.out.contains("ifmeter serve: no settings (the defaults)"), "\(check)")
        #expect(check.out.contains("ifmeter export: not set up in this file"), "\(check)")
        let help = try ifmeter(["serve", "--help"]).out + (try ifmeter(["export", "--help"]).out)
        var keys = Set<String>()
        // The options' own lines: "  --listen <address> ..." or "  -i, --interval <duration>".
        for line in help.split(separator: "\n") where line.hasPrefix("  -") {
            guard let word = line.split(separator: " ").first(where: { $0.hasPrefix("--") }) else { continue }
            keys.insert(String(word.dropFirst(2)))
        }
        keys.subtract(["config", "help", "allow-foreign-files"])
        let missing = keys.filter { key in !example.out.contains("#\(key): ") }
        #expect(missing.isEmpty, "every setting is in the shipped file, commented out: \(missing.sorted())")
        #expect(!example.out.split(separator: "\n").contains { !$0.isEmpty && !$0.hasPrefix("#") && !$0.hasPrefix("  #") }, "every line is a comment")
    }

    /// Flags override the file; a repeatable option given as a flag takes
    /// none of the file's values.
    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func flagsOverrideTheFile() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ifmeter.yml"
        try "include: [lo]\nserve:\n  listen: 127.0.0.1:19341\n  interval: 200ms\n".write(toFile: path, atomically: true, encoding: .utf8)
        // From the file alone: its address, its filter.
        var serve = try Background(["ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "serve", "--config", path], name: "serve-config")
        _ = try waitFor("serve") { serve.log.contains("listening") ? true : nil }
        #expect(serve.log.contains("127.0.0.1:19341") && serve.log.contains("every 200 ms"), "\(serve.log)")
        var metrics = try RawHTTP.request("/metrics", port: 19341, in: pair.a.name).text
        #expect(metrics.contains("interface=\"lo\"") && !metrics.contains("interface=\"vA\""))
        #expect(serve.stop() == 0)
        // Flags on top: another address, another filter (not added to the file's).
        serve = try Background(
            ["ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "serve", "--config", path, "--listen", "127.0.0.1:19342", "--include", "vA"],
            name: "serve-config")
        _ = try waitFor("serve") { serve.log.contains("listening") ? true : nil }
        #expect(serve.log.contains("127.0.0.1:19342"), "\(serve.log)")
        metrics = try RawHTTP.request("/metrics", port: 19342, in: pair.a.name).text
        #expect(metrics.contains("interface=\"vA\"") && !metrics.contains("interface=\"lo\""))
        #expect(serve.stop() == 0)
    }
}

/// Issue 31: SIGHUP under `--config` applies a changed filter and a changed
/// remote write target without a restart, and says what needs one.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ConfigReloadTests {
    @Test func sighupAppliesAChangedFilterAndRemoteWriteTarget() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-reload-\(UUID().uuidString)").path
        for sub in ["", "/a", "/b"] { try FileManager.default.createDirectory(atPath: dir + sub, withIntermediateDirectories: true) }
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try RemoteWriteReceiver(in: pair.a.name, port: 19351, folder: dir + "/a")
        let second = try RemoteWriteReceiver(in: pair.a.name, port: 19352, folder: dir + "/b")
        func config(include: String, target: UInt16, port: UInt16) -> String {
            """
            include: [\(include)]
            serve:
              listen: 127.0.0.1:\(port)
              interval: 200ms
              remote-write: [http://127.0.0.1:\(target)/api/v1/write]
              remote-write-interval: 500ms
              remote-write-queue: \(dir)/queue

            """
        }
        let path = dir + "/ifmeter.yml"
        try config(include: "lo", target: 19351, port: 19343).write(toFile: path, atomically: true, encoding: .utf8)
        let serve = try Background(["ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "serve", "--config", path], name: "serve-reload")
        _ = try waitFor("serve") { serve.log.contains("listening") ? true : nil }
        _ = try waitFor("pushes to the first receiver") { first.requests.isEmpty ? nil : true }
        var metrics = try RawHTTP.request("/metrics", port: 19343, in: pair.a.name).text
        #expect(metrics.contains("interface=\"lo\"") && !metrics.contains("interface=\"vA\""))
        // Another filter, another target, another address: SIGHUP.
        try config(include: "vA", target: 19352, port: 19344).write(toFile: path, atomically: true, encoding: .utf8)
        serve.process.signal(SIGHUP)
        let line = try waitFor("the reload said") { () -> String? in
            serve.log.split(separator: "\n").first { $0.contains("reloaded \(path)") }.map(String.init)
        }
        #expect(line.contains("filters; remote write to http://127.0.0.1:19352/api/v1/write applied"), "\(line)")
        #expect(line.contains("--listen changed but need a restart"), "\(line)")
        _ = try waitFor("the new filter on /metrics (the old address stays)") { () throws -> Bool? in
            metrics = try RawHTTP.request("/metrics", port: 19343, in: pair.a.name).text
            return metrics.contains("interface=\"vA\"") && !metrics.contains("interface=\"lo\"") ? true : nil
        }
        let before = first.requests.count
        _ = try waitFor("pushes to the second receiver") { second.requests.isEmpty ? nil : true }
        // The first receiver got the old series' stale markers, then nothing more.
        let after = first.requests.count
        _ = try waitFor("two more pushes to the second") { second.requests.count >= 3 ? true : nil }
        #expect(first.requests.count == after && after >= before, "no push to the old target after the reload")
        // A file that no longer reads: said, and nothing changes.
        try "include: [\n".write(toFile: path, atomically: true, encoding: .utf8)
        serve.process.signal(SIGHUP)
        _ = try waitFor("the broken file said") { serve.log.contains("reloading \(path) after SIGHUP failed") ? true : nil }
        #expect(serve.process.isRunning)
        #expect(serve.stop() == 0, "\(serve.log)")
    }
}

/// Issue 31: what else SIGHUP applies without a restart, each through a
/// real serve: probes, the web config's basic auth users, and retention.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ConfigReloadMoreTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-reload-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Starts serve in `ns` on `path` and waits until it listens.
    func serve(_ path: String, in ns: TestNamespace, extra: [String] = []) throws -> Background {
        let serve = try Background(["ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--config", path] + extra, name: "serve-reload")
        _ = try waitFor("serve") { () throws -> Bool? in
            try serve.requireRunning()
            return serve.log.contains("listening") ? true : nil
        }
        return serve
    }

    /// Sends SIGHUP and returns the reload's line (the `n`th).
    func reload(_ serve: Background, _ path: String, _ n: Int) throws -> String {
        serve.process.signal(SIGHUP)
        return try waitFor("reload \(n) said") { () -> String? in
            let lines = serve.log.split(separator: "\n").filter { $0.contains("reloaded \(path)") }
            return lines.count >= n ? String(lines[n - 1]) : nil
        }
    }

    @Test func sighupAppliesChangedProbes() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        try pair.a.ip("route", "add", "default", "via", pair.ipB, "dev", pair.nameA)
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ifmeter.yml"
        let base = "serve:\n  listen: 127.0.0.1:19371\n  interval: 200ms\n"
        try base.write(toFile: path, atomically: true, encoding: .utf8)
        let serve = try self.serve(path, in: pair.a)
        func metrics() throws -> String { try RawHTTP.request("/metrics", port: 19371, in: pair.a.name).text }
        #expect(try !metrics().contains("ifmeter_route_"))
        try (base + "  probe: [192.0.2.99]\n").write(toFile: path, atomically: true, encoding: .utf8)
        var line = try reload(serve, path, 1)
        #expect(line.contains("probes 192.0.2.99 applied") && !line.contains("need a restart"), "\(line)")
        let egress = #"ifmeter_route_egress_info{interface="vA",kind="virtual",probe="192.0.2.99"} 1"#
        _ = try waitFor("the probe's route on /metrics") { try metrics().contains(egress) ? true : nil }
        // Probes removed: the route families go.
        try base.write(toFile: path, atomically: true, encoding: .utf8)
        line = try reload(serve, path, 2)
        #expect(line.contains("probes removed applied"), "\(line)")
        _ = try waitFor("no route families") { try metrics().contains("ifmeter_route_") ? nil : true }
        #expect(serve.stop() == 0, "\(serve.log)")
    }

    /// Changed `kind-of` rules: every link is classified again at the next
    /// sample, its series carrying the new kind and its evidence saying so;
    /// rules removed: back to the kernel's facts.
    @Test func sighupAppliesChangedKinds() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ifmeter.yml"
        let base = "serve:\n  listen: 127.0.0.1:19372\n  interval: 200ms\n"
        try base.write(toFile: path, atomically: true, encoding: .utf8)
        let serve = try self.serve(path, in: pair.a)
        func kind() throws -> String? {
            let exposition = try RawHTTP.request("/metrics", port: 19372, in: pair.a.name).text
            let line = exposition.split(separator: "\n").first { $0.hasPrefix("ifmeter_interface_info{") && $0.contains("interface=\"vA\"") }
            return line.flatMap { $0.split(separator: ",").first { $0.hasPrefix("kind=") } }.map { String($0.dropFirst(6).dropLast()) }
        }
        _ = try waitFor("vA as the kernel says") { try kind() == "virtual" ? true : nil }
        try (base + "  kind-of: ['vA=cellular']\n").write(toFile: path, atomically: true, encoding: .utf8)
        var line = try reload(serve, path, 1)
        #expect(line.contains("kinds (--kind-of) applied") && !line.contains("need a restart"), "\(line)")
        _ = try waitFor("vA cellular on /metrics") { try kind() == "cellular" ? true : nil }
        try base.write(toFile: path, atomically: true, encoding: .utf8)
        line = try reload(serve, path, 2)
        #expect(line.contains("kinds (--kind-of) applied"), "\(line)")
        _ = try waitFor("vA back to the kernel's kind") { try kind() == "virtual" ? true : nil }
        #expect(serve.stop() == 0, "\(serve.log)")
    }

    /// The web config file's users change under the same path: the new
    /// ones are asked for from the next request, the old ones refused.
    @Test func sighupAppliesChangedBasicAuthUsers() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func hash(_ user: String, _ password: String) throws -> String {
            let line = try run(["htpasswd", "-nbBC", "4", user, password]).out.trimmingCharacters(in: .whitespacesAndNewlines)
            return String(line.split(separator: ":", maxSplits: 1)[1])
        }
        let web = dir + "/web.yml"
        try "basic_auth_users:\n  alice: '\(try hash("alice", "apple"))'\n".write(toFile: web, atomically: true, encoding: .utf8)
        let path = dir + "/ifmeter.yml"
        try "serve:\n  listen: 127.0.0.1:19372\n  interval: 200ms\n  web-config: \(web)\n".write(toFile: path, atomically: true, encoding: .utf8)
        let serve = try self.serve(path, in: pair.a)
        func status(_ user: String?, _ password: String = "") throws -> Int {
            let headers = user.map { ["Authorization": "Basic " + Data("\($0):\(password)".utf8).base64EncodedString()] } ?? [:]
            return try RawHTTP.request("/metrics", port: 19372, in: pair.a.name, headers: headers).status
        }
        #expect(try status("alice", "apple") == 200 && status(nil) == 401)
        try "basic_auth_users:\n  bob: '\(try hash("bob", "banana"))'\n".write(toFile: web, atomically: true, encoding: .utf8)
        let line = try reload(serve, path, 1)
        #expect(line.contains("basic auth users bob applied") && !line.contains("need a restart"), "\(line)")
        #expect(try status("bob", "banana") == 200)
        #expect(try status("alice", "apple") == 401 && status(nil) == 401)
        // Users removed: plain access again.
        try "# nothing\n".write(toFile: web, atomically: true, encoding: .utf8)
        #expect(try reload(serve, path, 2).contains("basic auth removed applied"))
        #expect(try status(nil) == 200)
        #expect(serve.stop() == 0, "\(serve.log)")
    }

    /// `keep-hours` changed under a running serve: the save the reload
    /// makes rolls the old hours into days, totals unchanged.
    @Test func sighupAppliesChangedRetention() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        #expect(try ifmeter(["plan", "set", "wan0", "--state", state, "--cycle-start", "1"]).status == 0)
        let last = Int64(Date().timeIntervalSince1970) / 3600 * 3600 - 10 * 86400
        _ = try run([
            "sqlite3", state,
            """
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 999)
            INSERT INTO usage_hours SELECT 'wan0', \(last) - i * 3600, 3600, 'ethernet', 1000 + i, i, 3, 1, 0 FROM n;
            """,
        ])
        func sqlite(_ sql: String) throws -> String { try run(["sqlite3", state, sql]).out.trimmingCharacters(in: .whitespacesAndNewlines) }
        // wan0's: the namespace's own links may count a packet meanwhile.
        let sums =
            "SELECT sum(rx_bytes), sum(tx_bytes) FROM (SELECT rx_bytes, tx_bytes FROM usage_hours WHERE name = 'wan0' UNION ALL SELECT rx_bytes, tx_bytes FROM usage WHERE name = 'wan0')"
        let before = try sqlite(sums)
        let path = dir + "/ifmeter.yml"
        let base = "state: \(state)\nserve:\n  listen: 127.0.0.1:19373\n  interval: 200ms\n"
        try (base + "keep-hours: forever\n").write(toFile: path, atomically: true, encoding: .utf8)
        let serve = try self.serve(path, in: pair.a)
        _ = try waitFor("the first save") { try sqlite("SELECT value FROM meta WHERE key = 'saved'").isEmpty ? nil : true }
        #expect(try sqlite("SELECT count(*) FROM usage_hours WHERE name = 'wan0'") == "1000", "forever keeps every hour")
        try (base + "keep-hours: 2d\n").write(toFile: path, atomically: true, encoding: .utf8)
        let line = try reload(serve, path, 1)
        #expect(line.contains("retention (keep-hours 2d, keep-days 10y) applied"), "\(line)")
        #expect(!line.contains("need a restart"), "\(line)")
        #expect(try sqlite("SELECT count(*) FROM usage_hours WHERE name = 'wan0'") == "0", "rolled at the reload's save")
        #expect(try sqlite("SELECT count(*) FROM usage WHERE name = 'wan0' AND granularity = 'day'") != "0")
        #expect(try sqlite(sums) == before, "the same totals")
        #expect(serve.stop() == 0, "\(serve.log)")
    }
}
