import Foundation
import IfmeterCore
import IfmeterSystem
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 11, files and signals: links planted in an output folder, aliases
/// of one state file, kill -9 before the first save, SIGHUP and SIGQUIT,
/// what `usage` reads, and what a failed start leaves.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct FileHardeningTests {
    /// The uid and gid of `nobody`: another user, for planted links and
    /// for reading without root's rights.
    let nobody: UInt32 = 65534

    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-harden-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o755)
        return path
    }

    func export(_ ns: TestNamespace, _ arguments: [String], name: String = "export") throws -> Background {
        try Background(["ip", "netns", "exec", ns.name, try ifmeterBinary(), "export", "--interval", "100ms"] + arguments, name: name)
    }

    /// Runs ifmeter until it exits on its own: its exit status and log. One
    /// still running at waitFor's deadline (a hang) is stopped, and fails.
    func runToExit(_ arguments: [String], in ns: TestNamespace? = nil) throws -> (status: Int32, log: String) {
        let process = try Background(command(arguments, in: ns), name: "brief")
        let exited = try? waitFor("ifmeter \(arguments[0]) to exit on its own") { process.process.isRunning ? nil : true }
        let status = process.stop()
        guard exited != nil else { throw TestFailure("ifmeter \(arguments.joined(separator: " ")) did not exit: \(process.log)") }
        return (status, process.log)
    }

    /// Runs ifmeter until `ready` holds (or it exits), then stops it: the
    /// exit status, the log, and whether it was still running (stopped).
    func runUntil(_ arguments: [String], in ns: TestNamespace? = nil, _ what: String, _ ready: @escaping (String) -> Bool) throws
        -> (status: Int32, log: String, stopped: Bool)
    {
        let process = try Background(command(arguments, in: ns), name: "brief")
        let seen = try? waitFor(what) { ready(process.log) || !process.process.isRunning ? true : nil }
        let stopped = process.process.isRunning
        let status = process.stop()
        guard seen != nil else { throw TestFailure("timed out waiting for \(what): \(process.log)") }
        return (status, process.log, stopped)
    }

    func command(_ arguments: [String], in ns: TestNamespace?) throws -> [String] {
        (ns.map { ["ip", "netns", "exec", $0.name] } ?? []) + [try ifmeterBinary()] + arguments
    }

    func contents(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    func isLink(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFLNK
    }

    func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    func interface(_ report: JSONValue, _ name: String) -> JSONValue? {
        guard case .array(let list)? = report["interfaces"] else { return nil }
        return list.first { $0["name"]?.stringValue == name }
    }

    /// A symbolic link at `link` to `target`, owned by `owner` (root when nil).
    func plant(_ link: String, to target: String, owner: UInt32? = nil) throws {
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        if let owner { _ = lchown(link, owner, owner) }
    }

    /// A PID no process has: a child that has exited.
    func deadPID() throws -> Int32 {
        let process = try ChildProcess(["true"])
        process.waitUntilExit()
        return process.processIdentifier
    }

    /// The bytes `usage --format json` adds up for one interface's tx.
    /// Waits until serve on `port` in `ns` counted `atLeast` bytes sent
    /// by vA: its samples took the traffic.
    func waitForServe(_ ns: TestNamespace, port: UInt16, toCount atLeast: UInt64) throws {
        _ = try waitFor("serve to count \(atLeast) bytes sent by vA") {
            let sent =
                Scenario.metric(try Scenario.scrape(ns, port: port), "ifmeter_transmit_bytes_total")
                .first { $0.key.contains(#"interface="vA""#) }?.value ?? 0
            return sent >= Double(atLeast) ? true : nil
        }
    }

    /// Waits until the usage table has `bytes` sent by vA.
    func waitForUsage(_ state: String, _ bytes: UInt64, _ what: String) throws {
        _ = try waitFor(what) { try usageTx(state, "vA") == bytes ? true : nil }
    }

    func usageTx(_ state: String, _ name: String) throws -> UInt64? {
        let result = try ifmeter(["usage", "--state", state, "--format", "json"])
        guard result.status == 0, case .array(let list)? = try JSONParser.parse(result.out)["interfaces"] else { return nil }
        guard let mine = list.first(where: { $0["name"]?.stringValue == name }), case .array(let periods)? = mine["periods"] else {
            return 0
        }
        return periods.compactMap { $0["tx_bytes"]?.uint64Value }.reduce(0, +)
    }

    @Test func plantedLinksLeaveTheirTargetsUnchanged() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder(), victims = try folder()
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: victims)
        }
        let victim = victims + "/victim"
        try "keep me\n".write(toFile: victim, atomically: false, encoding: .utf8)

        // The temporary file of --json, planted under the name the running
        // export would use.
        let exporter = try export(ns, ["--json", dir + "/r.json", "--every", "300ms"])
        try plant(dir + "/.r.json.tmp-\(exporter.process.processIdentifier)", to: victim)
        // Two reports written past the planted name.
        let first = try ExportReport.waitForFirst(dir + "/r.json")
        _ = try waitFor("a second report") {
            ExportReport.read(dir + "/r.json").flatMap { $0["period"]?["end"] != first["period"]?["end"] ? true : nil }
        }
        #expect(exporter.stop() == 0)
        #expect(contents(victim) == "keep me\n", "a planted temporary name is never followed")
        _ = try JSONParser.parse(try #require(contents(dir + "/r.json")))

        // Links another user planted where the JSON Lines file and the state
        // file go: refused at start.
        try plant(dir + "/r.jsonl", to: victim, owner: nobody)
        var result = try runToExit(["export", "--every", "100ms", "--json-lines", dir + "/r.jsonl"], in: ns)
        #expect(result.status == 1 && result.log.contains("symbolic link"), "\(result.log)")
        #expect(contents(victim) == "keep me\n", "the JSON Lines file follows no planted link")
        try plant(dir + "/s.db", to: victims + "/made-by-ifmeter.db", owner: nobody)
        result = try runToExit(["export", "--every", "100ms", "--json", dir + "/r.json", "--state", dir + "/s.db"], in: ns)
        #expect(result.status == 1 && result.log.contains("symbolic link"), "\(result.log)")
        #expect(!exists(victims + "/made-by-ifmeter.db"), "no database is created where a planted link points")

        // record -o: another user's link is refused, the file untouched.
        try plant(dir + "/trace.jsonl", to: victim, owner: nobody)
        let record = try ifmeter(["record", "--count", "1", "--interval", "100ms", "-o", dir + "/trace.jsonl"], in: ns)
        #expect(record.status == 1 && record.err.contains("symbolic link"), "\(record.err)")
        #expect(contents(victim) == "keep me\n", "record follows no planted link")

        // The lock file of old: a link there makes nothing either.
        try plant(dir + "/t.db.lock", to: victims + "/lock-made-by-ifmeter")
        // (Until its first report, written after it opened the file.)
        let ran = try runUntil(["export", "--every", "100ms", "--json", dir + "/r.json", "--state", dir + "/t.db"], in: ns, "the first report") {
            _ in self.exists(dir + "/r.json")
        }
        #expect(ran.stopped, "it ran: \(ran.log)")
        #expect(!exists(victims + "/lock-made-by-ifmeter"), "no file is created where a planted link points")
        #expect(try FileManager.default.contentsOfDirectory(atPath: victims) == ["victim"])
    }

    @Test func aLinkGivenOnTheCommandLineIsResolvedOnceAndSaid() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/real", withIntermediateDirectories: true)
        try "".write(toFile: dir + "/real/r.jsonl", atomically: false, encoding: .utf8)
        try plant(dir + "/r.jsonl", to: dir + "/real/r.jsonl")
        try plant(dir + "/s.db", to: dir + "/real/s.db")
        let result = try runUntil(
            ["export", "--interval", "100ms", "--every", "100ms", "--json-lines", dir + "/r.jsonl", "--state", dir + "/s.db"], in: ns,
            "a line for each link and two reports where the link points"
        ) { log in
            log.split(separator: "\n").filter { $0.contains("symbolic link") }.count >= 2
                && (self.contents(dir + "/real/r.jsonl") ?? "").split(separator: "\n").count >= 2
        }
        #expect(result.stopped, "it ran: \(result.log)")
        let said = result.log.split(separator: "\n").filter { $0.contains("symbolic link") }
        #expect(said.count == 2, "one line for each link: \(result.log)")
        #expect(said.contains { $0.contains(dir + "/real/s.db") } && said.contains { $0.contains(dir + "/real/r.jsonl") })
        #expect(isLink(dir + "/r.jsonl") && isLink(dir + "/s.db"), "the links stay links")
        #expect((contents(dir + "/real/r.jsonl") ?? "").split(separator: "\n").count >= 2, "the lines went where the link points")
        #expect(exists(dir + "/real/s.db"))
    }

    @Test func leftoverTemporaryFilesOfDeadProcessesAreRemovedAtStart() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder(), victims = try folder()
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: victims)
        }
        let victim = victims + "/victim"
        try "keep me\n".write(toFile: victim, atomically: false, encoding: .utf8)
        let dead = try deadPID()
        let names = (
            deadOld: ".r.json.tmp-\(dead)", deadNew: ".r.json.tmp-\(dead)-0123456789abcdef",
            alive: ".r.json.tmp-\(getpid())", deadLink: ".r.prom.tmp-\(dead)", other: ".notes.tmp-\(dead)"
        )
        for name in [names.deadOld, names.deadNew, names.alive, names.other] {
            try "half a report".write(toFile: dir + "/" + name, atomically: false, encoding: .utf8)
        }
        try plant(dir + "/" + names.deadLink, to: victim)
        let result = try runUntil(
            ["export", "--every", "10s", "--json", dir + "/r.json", "--textfile", dir + "/r.prom"], in: ns, "the dead process's leftovers removed"
        ) { _ in !self.exists(dir + "/" + names.deadOld) && !self.exists(dir + "/" + names.deadNew) }
        #expect(result.stopped, "\(result.log)")
        #expect(!exists(dir + "/" + names.deadOld) && !exists(dir + "/" + names.deadNew), "a dead process's leftovers are removed")
        #expect(exists(dir + "/" + names.alive), "a running process's temporary file stays")
        #expect(exists(dir + "/" + names.other), "files of other names stay")
        #expect(isLink(dir + "/" + names.deadLink) && contents(victim) == "keep me\n", "a link is neither followed nor removed")
    }

    @Test func anAliasOfARunningStateFileIsRefused() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try export(ns, ["--json", dir + "/a.json", "--every", "100ms", "--state", dir + "/a.db"])
        _ = try waitFor("the state file") { exists(dir + "/a.json") ? true : nil }
        try plant(dir + "/b.db", to: dir + "/a.db")
        // A symbolic link finds the file's lock taken; a hard link is refused
        // before that (a file written in place must have one link, issue 21).
        for (alias, why) in [("b.db", "in use by another ifmeter"), ("c.db", "2 hard links")] {
            if alias == "c.db" { #expect(link(dir + "/a.db", dir + "/c.db") == 0) }
            let second = try runToExit(["export", "--json", dir + "/b.json", "--every", "100ms", "--state", dir + "/" + alias], in: ns)
            #expect(second.status == 1, "\(alias): \(second.log)")
            #expect(second.log.contains(why), "\(alias): \(second.log)")
            let errors = second.log.split(separator: "\n").filter { $0.hasPrefix("Error:") }
            #expect(errors.count == 1, "one clear line: \(second.log)")
        }
        #expect(first.stop() == 0)
    }

    @Test func killNineOneSecondAfterStartLosesNothing() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let frame = VethPair.frameBytes(payload: 700)
        let server = try startServe(
            in: pair.a, port: 19280, interval: "100ms", name: "serve-kill9", ["--listen", "127.0.0.1:19280", "--state", state])
        // Killed once its samples took the traffic: the state has only the
        // baseline its first sample saved (the next save is 5 minutes on).
        try pair.sendUDP(count: 20, payload: 700)
        try waitForServe(pair.a, port: 19280, toCount: 20 * frame)
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        // While it is down, the kernel counts on.
        try pair.sendUDP(count: 10, payload: 700)

        let exporter = try export(pair.a, ["--json", dir + "/r.json", "--every", "200ms", "--state", state])
        _ = try ExportReport.waitForFirst(dir + "/r.json")
        #expect(exporter.stop() == 0)
        let report = try JSONParser.parse(try #require(contents(dir + "/r.json")))
        let vA = try #require(interface(report, "vA"))
        let tx = vA["totals"]?["tx_bytes"]?.uint64Value ?? 0
        let quality = vA["quality"]?.stringValue
        #expect(quality == "lower-bound" || tx == 30 * frame, "never exact with bytes missing: \(tx) of \(30 * frame), \(quality ?? "?")")
        #expect(tx == 30 * frame && quality == "exact", "within one boot the saved baseline recovers every byte")
        #expect(try usageTx(state, "vA") == 30 * frame, "and the usage table has them")
    }

    @Test func sighupSavesAndKeepsRunningAndSigquitStopsCleanly() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let frame = VethPair.frameBytes(payload: 300)
        // serve saves every 10 s: within this test only the signals save.
        let server = try startServe(
            in: pair.a, port: 19281, interval: "100ms", name: "serve-signals", ["--listen", "127.0.0.1:19281", "--state", state])
        try pair.sendUDP(count: 10, payload: 300)
        try waitForServe(pair.a, port: 19281, toCount: 10 * frame)
        kill(server.process.processIdentifier, SIGHUP)
        try waitForUsage(state, 10 * frame, "SIGHUP to save the traffic")
        #expect(server.process.isRunning, "SIGHUP does not stop serve: \(server.log)")

        try pair.sendUDP(count: 5, payload: 300)
        try waitForServe(pair.a, port: 19281, toCount: 15 * frame)
        kill(server.process.processIdentifier, SIGQUIT)
        #expect(server.process.wait(timeout: 60), "SIGQUIT stops serve")
        server.stop()
        #expect(server.process.terminationReason == .exit && server.process.terminationStatus == 0, "SIGQUIT is a clean stop")
        #expect(!server.log.contains("crashed") && !server.log.contains("Backtrace"), "\(server.log)")
        #expect(try usageTx(state, "vA") == 15 * frame, "SIGQUIT saved the traffic")
    }

    @Test func sighupReopensTheJSONLinesFileForLogrotate() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let exporter = try export(ns, ["--json-lines", dir + "/r.jsonl", "--every", "200ms"])
        _ = try waitFor("a first line") { (contents(dir + "/r.jsonl") ?? "").contains("\n") ? true : nil }
        // What logrotate does: move the file, then SIGHUP.
        #expect(rename(dir + "/r.jsonl", dir + "/r.jsonl.rotated") == 0)
        kill(exporter.process.processIdentifier, SIGHUP)
        _ = try waitFor("a new file") { (contents(dir + "/r.jsonl") ?? "").contains("\n") ? true : nil }
        #expect(exporter.process.isRunning, "\(exporter.log)")
        #expect(exporter.stop() == 0)
        for name in ["r.jsonl", "r.jsonl.rotated"] {
            let lines = (contents(dir + "/" + name) ?? "").split(separator: "\n")
            #expect(!lines.isEmpty)
            for line in lines { _ = try JSONParser.parse(String(line)) }
        }
    }

    /// `usage` as another user (nobody): what root can always do proves nothing.
    func usageAsNobody(_ state: String) throws -> (out: String, err: String, status: Int32) {
        try run(
            ["setpriv", "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", try ifmeterBinary(), "usage", "--state", state],
            allowFailure: true)
    }

    @Test func usageReadsWhatItCanAndSaysWhyNotWhenItCannot() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        let exporter = try export(pair.a, ["--json", dir + "/r.json", "--every", "200ms", "--state", state])
        try ExportReport.waitForFirst(dir + "/r.json")
        try pair.sendUDP(count: 10, payload: 300)
        try ExportReport.waitForTotal(dir + "/r.json", "vA", atLeast: 10 * VethPair.frameBytes(payload: 300))
        #expect(exporter.stop() == 0)
        func sideFiles() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix("-wal") || $0.hasSuffix("-shm") }
        }
        #expect(try sideFiles().isEmpty)

        // Root reads it and leaves no -wal or -shm behind.
        var result = try ifmeter(["usage", "--state", state])
        #expect(result.status == 0 && result.out.contains("vA (virtual)"), "\(result.err)")
        #expect(try sideFiles().isEmpty, "usage creates no side files")

        // Read-only to its reader (who cannot write in the folder either):
        // read, not called corrupt.
        chmod(state, 0o444)
        result = try usageAsNobody(state)
        #expect(result.status == 0 && result.out.contains("vA (virtual)"), "a read-only state file is read: \(result.err)")
        #expect(try sideFiles().isEmpty)

        // Not readable: a permission problem (exit 1), not corrupt (65).
        chmod(state, 0o600)
        result = try usageAsNobody(state)
        #expect(result.status == 1 && result.err.contains("ermission denied") && !result.err.contains("corrupt"), "\(result.err)")

        // A FIFO, a folder: refused at once (64), no hang.
        mkfifo(dir + "/fifo.db", 0o644)
        let fifo = try runToExit(["usage", "--state", dir + "/fifo.db"])
        #expect(fifo.status == 64 && fifo.log.contains("not a regular file"), "\(fifo.log)")
        try FileManager.default.createDirectory(atPath: dir + "/folder.db", withIntermediateDirectories: true)
        result = try ifmeter(["usage", "--state", dir + "/folder.db"])
        #expect(result.status == 64 && result.err.contains("not a regular file"), "\(result.err)")

        // A newer schema: a clear error (65), no table.
        try FileManager.default.copyItem(atPath: state, toPath: dir + "/newer.db")
        try run(["sqlite3", dir + "/newer.db", "UPDATE meta SET value = '99' WHERE key = 'schema_version';"])
        result = try ifmeter(["usage", "--state", dir + "/newer.db"])
        #expect(result.status == 65 && result.err.contains("newer ifmeter") && result.out.isEmpty, "\(result.err)")

        // A damaged page, in a table the usage query does not read: found (65).
        try FileManager.default.copyItem(atPath: state, toPath: dir + "/damaged.db")
        let root = try run(["sqlite3", dir + "/damaged.db", "SELECT rootpage FROM sqlite_master WHERE name = 'interfaces';"]).out
        let page = try #require(Int(root.trimmingCharacters(in: .whitespacesAndNewlines)))
        let handle = try #require(FileHandle(forUpdatingAtPath: dir + "/damaged.db"))
        try handle.seek(toOffset: UInt64((page - 1) * 4096))
        handle.write(Data(repeating: 0xA5, count: 4096))
        try handle.close()
        result = try ifmeter(["usage", "--state", dir + "/damaged.db"])
        #expect(result.status == 65 && result.err.contains("corrupt") && result.out.isEmpty, "\(result.err)")
    }

    @Test func aFailedStartLeavesNoStateFile() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try startServe(in: ns, port: 19282, name: "serve-port", ["--listen", "127.0.0.1:19282"])
        let second = try ifmeter(["serve", "--listen", "127.0.0.1:19282", "--state", dir + "/new.db"], in: ns)
        #expect(second.status == 1 && second.err.contains("Address already in use"), "\(second.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [], "the state file it created is removed")
        #expect(first.stop() == 0)
    }
}
