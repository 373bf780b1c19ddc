import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 45, finding 1: one file, one descriptor. Closing any descriptor of
/// a file drops every POSIX lock the process holds on it, SQLite's
/// included; a serve that read its state file through a descriptor of its
/// own (one usage request) lost SQLite's read lock, and the next
/// read-write user of the file (`state alias`, `plan set`, sqlite3)
/// checkpointed and deleted the WAL serve was still writing. So: every
/// route serve answers, and every state and plan command run beside it,
/// leaves serve holding its locks on the file and its WAL index, with no
/// side file deleted under it; and the sequences that lost data or broke
/// the file lose nothing.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct StateLockRuleTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-locks-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o700)
        return path
    }

    func value(_ exposition: String, _ family: String, _ labels: [String] = []) -> Double? {
        Scenario.metric(exposition, family).first { sample in labels.allSatisfy { sample.key.contains($0) } }?.value
    }

    /// The POSIX (fcntl) locks `pid` holds on the file at `path`, as
    /// /proc/locks lists them (`POSIX ADVISORY READ pid MAJ:MIN:INODE start end`).
    static func posixLocks(pid: pid_t, on path: String) throws -> [String] {
        var st = stat()
        guard stat(path, &st) == 0 else { throw TestFailure("stat \(path): \(String(cString: strerror(errno)))") }
        let table = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
        return table.split(separator: "\n").map(String.init).filter { line in
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "POSIX", fields[4] == "\(pid)" else { return false }
            return fields[5].split(separator: ":").last.map(String.init) == "\(st.st_ino)"
        }
    }

    /// What is wrong with serve's hold on its state file now: nothing
    /// (nil) while it keeps a POSIX lock on the file and on its WAL index,
    /// and none of its descriptors names a deleted file.
    static func holdProblem(pid: pid_t, state: String) throws -> String? {
        if try posixLocks(pid: pid, on: state).isEmpty { return "serve holds no POSIX lock on \(state)" }
        if try posixLocks(pid: pid, on: state + "-shm").isEmpty { return "serve holds no POSIX lock on \(state)-shm" }
        let fds = "/proc/\(pid)/fd"
        for fd in try FileManager.default.contentsOfDirectory(atPath: fds) {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: fds + "/" + fd) else { continue }
            if target.hasPrefix(state), target.hasSuffix("(deleted)") { return "serve's descriptor \(fd) names \(target)" }
        }
        return nil
    }

    func serve(_ pair: VethPair, port: UInt16, state: String, _ extra: [String] = []) throws -> Background {
        try startServe(in: pair.a, port: port, interval: "200ms", name: "serve-locks", ["--listen", "127.0.0.1:\(port)", "--state", state] + extra)
    }

    func get(_ pair: VethPair, _ port: UInt16, _ path: String) throws -> HTTPResult {
        try RawHTTP.request(path, port: port, in: pair.a.name)
    }

    /// Opens the event stream, reads its first bytes and hangs up, as a
    /// closed dashboard tab does.
    func touchEvents(_ pair: VethPair, _ port: UInt16) throws {
        let fd = try RawHTTP.connect("127.0.0.1", port, in: pair.a.name)
        defer { close(fd) }
        try RawHTTP.send(fd, "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        var buffer = [UInt8](repeating: 0, count: 4096)
        let got = recv(fd, &buffer, buffer.count, 0)
        guard got > 0, String(decoding: buffer[0..<got], as: UTF8.self).hasPrefix("HTTP/1.1 200") else {
            throw TestFailure("the event stream did not answer 200: \(String(decoding: buffer[0..<max(got, 0)], as: UTF8.self))")
        }
    }

    /// Every route serve answers (each usage table, the pictures, the
    /// event stream, a refused query) and every state and plan command run
    /// beside it: after each, serve still holds its locks, and a read-write
    /// user of the file (sqlite3) finds it in use rather than removing its
    /// WAL.
    @Test func noRouteOrCommandBreaksServesHoldOnItsStateFile() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let port: UInt16 = 19341
        let process = try serve(pair, port: port, state: state, ["--save-every", "1s"])
        let pid = process.process.processIdentifier
        _ = try waitFor("the first save") { () throws -> Double? in
            try process.requireRunning()
            return value(try Scenario.scrape(pair.a, port: port), "ifmeter_state_saves_total")
        }
        try pair.sendUDP(count: 5, payload: 500)
        _ = try waitFor("a save with traffic") { () throws -> Bool? in
            try process.requireRunning()
            return try Scenario.usage(state)["vA"].map { $0.tx > 0 } == true ? true : nil
        }
        if let problem = try Self.holdProblem(pid: pid, state: state) { throw TestFailure("before any request: \(problem)") }

        var routes = [
            "/metrics", "/", "/dashboard.js", "/dashboard.css", "/api/v1/interfaces", "/api/v1/interfaces?history=1", "/api/v1/routes",
            "/api/v1/usage", "/api/v1/usage?interface=vA", "/api/v1/usage?granularity=day&begin=2000-01-01", "/api/v1/usage?limit=nope",
            "/usage.png", "/usage.png?interface=vA", "/usage.png?granularity=summary", "/no-such-page",
        ]
        routes += ["fiveminutes", "hour", "day", "month", "year", "cycle"].map { "/api/v1/usage?granularity=\($0)" }
        routes += ["fiveminutes", "hour", "day", "month", "year", "cycle"].map { "/usage.png?granularity=\($0)" }
        for route in routes {
            let answer = try get(pair, port, route)
            #expect(answer.status > 0, "\(route)")
            if let problem = try Self.holdProblem(pid: pid, state: state) {
                Issue.record(Comment(rawValue: "after GET \(route) (\(answer.status)): \(problem)"))
            }
        }
        try touchEvents(pair, port)
        if let problem = try Self.holdProblem(pid: pid, state: state) { Issue.record(Comment(rawValue: "after the event stream: \(problem)")) }

        let commands: [[String]] = [
            ["plan", "set", "vA", "--cycle-start", "1", "--quota", "1GB"], ["plan", "list"], ["plan", "remove", "vA"],
            ["state", "alias", "vA", "uplink"], ["state", "unalias", "vA"], ["usage"], ["usage", "--hourly"],
            ["state", "rename", "lo", "renamed"], ["state", "remove", "renamed"],
        ]
        for command in commands {
            let result = try ifmeter(command + ["--state", state])
            #expect(result.status == 0, "\(command): \(result.err)")
            if let problem = try Self.holdProblem(pid: pid, state: state) {
                Issue.record(Comment(rawValue: "after ifmeter \(command.joined(separator: " ")): \(problem)"))
            }
        }
        // A read-write user of the file that closes believes it is the
        // last connection only when serve has lost its locks: then it
        // checkpoints and deletes the WAL.
        _ = try run(["sqlite3", state, "SELECT count(*) FROM meta"])
        if let problem = try Self.holdProblem(pid: pid, state: state) { Issue.record(Comment(rawValue: "after sqlite3: \(problem)")) }
        #expect(FileManager.default.fileExists(atPath: state + "-wal"), "the WAL is serve's while it runs")
        #expect(process.stop() == 0, "\(process.log)")
    }

    /// The finding's first sequence: a usage request, `state alias` beside
    /// serve, traffic, kill -9. Every byte serve had saved is in the file.
    @Test func aUsageRequestThenAnAliasThenAKillLosesNoSavedByte() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let port: UInt16 = 19342
        let process = try serve(pair, port: port, state: state, ["--save-every", "500ms"])
        _ = try waitFor("the first save") { () throws -> Double? in
            try process.requireRunning()
            return value(try Scenario.scrape(pair.a, port: port), "ifmeter_state_saves_total")
        }
        #expect(try get(pair, port, "/api/v1/usage").status == 200)
        #expect(try get(pair, port, "/usage.png").status == 200)
        let alias = try ifmeter(["state", "alias", "vA", "uplink", "--state", state])
        #expect(alias.status == 0, "\(alias.err)")
        let frame = VethPair.frameBytes(payload: 1000)
        try pair.sendUDP(count: 40, payload: 1000)
        let sent = 40 * frame
        // Counted, then saved by a save that began after it was counted.
        _ = try waitFor("the traffic counted") { () throws -> Bool? in
            try process.requireRunning()
            return value(try Scenario.scrape(pair.a, port: port), "ifmeter_transmit_bytes_total", ["interface=\"vA\""]) == Double(sent) ? true : nil
        }
        let saves = value(try Scenario.scrape(pair.a, port: port), "ifmeter_state_saves_total") ?? 0
        _ = try waitFor("two saves after the count") { () throws -> Bool? in
            try process.requireRunning()
            return (value(try Scenario.scrape(pair.a, port: port), "ifmeter_state_saves_total") ?? 0) >= saves + 2 ? true : nil
        }
        let exposition = try Scenario.scrape(pair.a, port: port)
        #expect(value(exposition, "ifmeter_state_save_failures_total") == 0)
        process.process.signal(SIGKILL)
        process.process.waitUntilExit()
        let usage = try Scenario.usage(state)
        #expect(usage["vA"]?.tx == sent, "every byte saved before the kill is in the file: \(usage)")
        let integrity = try run(["sqlite3", state, "PRAGMA integrity_check"])
        #expect(integrity.out == "ok\n", "\(integrity)")
    }

    /// The second: a usage request, an alias, a rename, SIGTERM. The file
    /// is whole and its totals are the bytes sent, under the new name.
    @Test func aUsageRequestThenAliasAndRenameLeaveTheFileWhole() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let port: UInt16 = 19343
        let process = try serve(pair, port: port, state: state)
        _ = try waitFor("the first save") { () throws -> Double? in
            try process.requireRunning()
            return value(try Scenario.scrape(pair.a, port: port), "ifmeter_state_saves_total")
        }
        #expect(try get(pair, port, "/api/v1/usage?granularity=hour").status == 200)
        let alias = try ifmeter(["state", "alias", "vA", "uplink", "--state", state])
        #expect(alias.status == 0, "\(alias.err)")
        let frame = VethPair.frameBytes(payload: 1000)
        try pair.sendUDP(count: 25, payload: 1000)
        _ = try waitFor("the traffic counted") { () throws -> Bool? in
            try process.requireRunning()
            return value(try Scenario.scrape(pair.a, port: port), "ifmeter_transmit_bytes_total", ["interface=\"vA\""]) == Double(25 * frame)
                ? true : nil
        }
        let rename = try ifmeter(["state", "rename", "vA", "wan", "--state", state])
        #expect(rename.status == 0, "\(rename)")
        _ = try waitFor("serve's line about the rename") { () throws -> Bool? in
            try process.requireRunning()
            return process.log.contains("applied 'ifmeter state rename vA wan'") ? true : nil
        }
        #expect(process.stop() == 0, "\(process.log)")
        let integrity = try run(["sqlite3", state, "PRAGMA integrity_check"])
        #expect(integrity.out == "ok\n", "\(integrity)")
        let usage = try Scenario.usage(state)
        #expect(usage["wan"]?.tx == 25 * frame && (usage["vA"]?.tx ?? 0) == 0, "the bytes sent, under the new name: \(usage)")
        let check = try ifmeter(["plan", "list", "--state", state])
        #expect(check.status == 0, "every command still reads the file: \(check)")
    }

    /// A state file, its WAL and its index are the writer's user's alone,
    /// whatever the umask (the usage history is nobody else's to read).
    @Test func theStateFileAndItsSideFilesAreCreatedPrivate() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        chmod(dir, 0o755)
        let state = dir + "/s.db"
        let port: UInt16 = 19344
        // umask 000: nothing but ifmeter's own mode keeps the file private.
        let command = [
            "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "serve", "--interval", "200ms", "--listen", "127.0.0.1:\(port)",
            "--state", state, "--save-every", "200ms",
        ]
        let process = try Background(["sh", "-c", "umask 000; exec \"$@\"", "sh"] + command, name: "serve-umask")
        _ = try waitFor("the first save") { () throws -> Double? in
            try process.requireRunning()
            return value(try Scenario.scrape(pair.a, port: port), "ifmeter_state_saves_total")
        }
        for file in [state, state + "-wal", state + "-shm"] {
            let mode = (try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) ?? -1
            #expect(mode == 0o600, "\(file): \(String(mode, radix: 8))")
        }
        #expect(process.stop() == 0, "\(process.log)")
    }
}
