import Foundation
import IfmeterCore
import IfmeterSystem
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// JSON exports against the schema, persistent totals across restarts and
/// reboots, kill -9, a full disk, rotation, and refusals.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ExportStateTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-export-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func export(_ ns: TestNamespace, _ arguments: [String], name: String = "export") throws -> Background {
        try Background(["ip", "netns", "exec", ns.name, try ifmeterBinary(), "export", "--interval", "100ms"] + arguments, name: name)
    }

    static func lineCount(_ path: String) -> Int {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// Waits for a report of the export just started: the one before is
    /// removed first, so an old report is never taken for a new one.
    @discardableResult
    func waitForReport(_ path: String, _ what: String, _ accept: (JSONValue) -> Bool) throws -> JSONValue {
        try waitFor(what) { ExportReport.read(path).flatMap { accept($0) ? $0 : nil } }
    }

    func interface(_ report: JSONValue, _ name: String) -> JSONValue? {
        guard case .array(let list)? = report["interfaces"] else { return nil }
        return list.first { $0["name"]?.stringValue == name }
    }

    @Test func reportsValidateAgainstTheSchema() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let exporter = try export(
            pair.a,
            [
                "--json", dir + "/report.json", "--json-lines", dir + "/reports.jsonl", "--every", "300ms",
                "--state", dir + "/state.db",
            ])
        // The baseline is taken once a first report is out; then the bytes
        // sent are counted, and three periods are written.
        try ExportReport.waitForFirst(dir + "/report.json")
        try pair.sendUDP(count: 50, payload: 500)
        try ExportReport.waitForTotal(dir + "/report.json", "vA", atLeast: 50 * VethPair.frameBytes(payload: 500))
        _ = try waitFor("three reports in reports.jsonl") { Self.lineCount(dir + "/reports.jsonl") >= 3 ? true : nil }
        #expect(exporter.stop() == 0)
        let lines = try String(contentsOfFile: dir + "/reports.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(lines.count >= 3)
        var files = [dir + "/report.json"]
        for (n, line) in lines.enumerated() {
            let path = dir + "/line\(n).json"
            try String(line).write(toFile: path, atomically: true, encoding: .utf8)
            files.append(path)
        }
        // The replay report and the usage table too.
        let trace = repositoryRoot.appendingPathComponent("Fixtures/traces/recreation.jsonl").path
        try ifmeter(["replay", trace]).out.write(toFile: dir + "/replay.json", atomically: true, encoding: .utf8)
        try ifmeter(["usage", "--state", dir + "/state.db", "--format", "json"]).out.write(
            toFile: dir + "/usage.json", atomically: true, encoding: .utf8)
        files += [dir + "/replay.json"]
        let check = try checkJSONSchema(files)
        #expect(check.ok, "\(check.output)")
        // Usage tables are version 2, in their own schema file.
        let usageCheck = try checkJSONSchema([dir + "/usage.json"], schema: "ifmeter-usage.v6.schema.json")
        #expect(usageCheck.ok, "\(usageCheck.output)")

        // What the reports say.
        var sent: UInt64 = 0
        for line in lines {
            let report = try JSONParser.parse(String(line))
            #expect(report["estimate"] == .bool(true))
            sent += interface(report, "vA")?["period"]?["counters"]?["tx_bytes"]?.uint64Value ?? 0
        }
        #expect(sent == 50 * VethPair.frameBytes(payload: 500), "the periods add up to the bytes sent")
        let last = try JSONParser.parse(String(lines.last!))
        #expect(interface(last, "vA")?["totals"]?["tx_bytes"]?.uint64Value == 50 * VethPair.frameBytes(payload: 500))
        #expect(last["summary"]?["note"]?.stringValue?.contains("never added") == true)
        #expect(last["state"]?["restored"] == .bool(false))
    }

    @Test func totalsSurviveARestartAndBecomeLowerBoundsAfterAReboot() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bootFile = dir + "/boot_id"
        try "boot-one\n".write(toFile: bootFile, atomically: true, encoding: .utf8)
        let arguments = ["--json", dir + "/r.json", "--every", "200ms", "--state", dir + "/state.db", "--boot-id-file", bootFile]
        let frame = VethPair.frameBytes(payload: 800)

        var exporter = try export(pair.a, arguments)
        try ExportReport.waitForFirst(dir + "/r.json")
        try pair.sendUDP(count: 10, payload: 800)
        try ExportReport.waitForTotal(dir + "/r.json", "vA", atLeast: 10 * frame)
        #expect(exporter.stop() == 0)

        // Traffic while ifmeter is stopped: counted after the restart.
        try pair.sendUDP(count: 20, payload: 800)
        try FileManager.default.removeItem(atPath: dir + "/r.json")
        exporter = try export(pair.a, arguments)
        try waitForReport(dir + "/r.json", "a report after the restart") { $0["state"]?["restored"] == .bool(true) }
        #expect(exporter.stop() == 0)
        var report = try JSONParser.parse(try String(contentsOfFile: dir + "/r.json", encoding: .utf8))
        #expect(report["state"]?["restored"] == .bool(true) && report["state"]?["same_boot"] == .bool(true))
        #expect(interface(report, "vA")?["totals"]?["tx_bytes"]?.uint64Value == 30 * frame)
        #expect(interface(report, "vA")?["quality"]?.stringValue == "exact")

        // A new boot id: the downtime is unknown, the totals lower bounds.
        try "boot-two\n".write(toFile: bootFile, atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: dir + "/r.json")
        exporter = try export(pair.a, arguments)
        try waitForReport(dir + "/r.json", "a report after the new boot") { $0["state"] != nil }
        #expect(exporter.stop() == 0)
        report = try JSONParser.parse(try String(contentsOfFile: dir + "/r.json", encoding: .utf8))
        #expect(report["state"]?["same_boot"] == .bool(false))
        #expect(report["state"]?["note"]?.stringValue?.contains("lower bounds") == true)
        #expect(interface(report, "vA")?["quality"]?.stringValue == "lower-bound")
        #expect(interface(report, "vA")?["lower_bound"] == .bool(true))
        #expect((interface(report, "vA")?["totals"]?["tx_bytes"]?.uint64Value ?? 0) >= 30 * frame)

        let usage = try ifmeter(["usage", "--state", dir + "/state.db"])
        #expect(usage.status == 0 && usage.out.contains("vA (virtual)") && usage.out.contains("lower-bound"))
        let monthly = try ifmeter(["usage", "--state", dir + "/state.db", "--monthly", "--format", "json"])
        #expect(try JSONParser.parse(monthly.out)["granularity"]?.stringValue == "month")
    }

    @Test func killNineAtAnyMomentLeavesEveryFileReadable() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let snapshots = dir + "/snapshots"
        try FileManager.default.createDirectory(atPath: snapshots, withIntermediateDirectories: true)
        for n in 0..<100 {
            let exporter = try export(
                pair.a,
                [
                    "--json", dir + "/r.json", "--json-lines", dir + "/r.jsonl", "--every", "50ms",
                    "--state", dir + "/state.db", "--max-size", "64KiB", "--keep", "2",
                    // Saves as often as it writes reports, so that kills land
                    // during saves too (the default is every 5 minutes).
                    "--save-every", "50ms",
                ], name: "kill9")
            if n % 10 == 0 { try pair.sendUDP(count: 5, payload: 100) }
            Thread.sleep(forTimeInterval: Double.random(in: 0.05...0.3))
            kill(exporter.process.processIdentifier, SIGKILL)
            exporter.process.waitUntilExit()
            if FileManager.default.fileExists(atPath: dir + "/r.json") {
                let text = try String(contentsOfFile: dir + "/r.json", encoding: .utf8)
                _ = try JSONParser.parse(text) // whole, or it throws
                try text.write(toFile: snapshots + "/r\(n).json", atomically: true, encoding: .utf8)
            }
            let usage = try ifmeter(["usage", "--state", dir + "/state.db"])
            #expect(usage.status == 0, "the state file stays readable: \(usage.err)")
        }
        // The JSON Lines file: whole lines (an unfinished last line is
        // removed at the next start).
        let lines = try String(contentsOfFile: dir + "/r.jsonl", encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        for (n, line) in lines.dropLast().enumerated() {
            try String(line).write(toFile: snapshots + "/line\(n).json", atomically: true, encoding: .utf8)
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: snapshots).map { snapshots + "/" + $0 }
        #expect(files.count > 50)
        let check = try checkJSONSchema(files)
        #expect(check.ok, "\(check.output.prefix(2000))")
        let integrity = try run(["sqlite3", dir + "/state.db", "PRAGMA integrity_check;"])
        #expect(integrity.out.trimmingCharacters(in: .whitespacesAndNewlines) == "ok")
    }

    @Test func aFullDiskIsLoggedOnceAndThePreviousFileKept() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer {
            _ = try? run(["umount", dir], allowFailure: true)
            try? FileManager.default.removeItem(atPath: dir)
        }
        try run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir])
        let exporter = try export(ns, ["--json", dir + "/r.json", "--json-lines", dir + "/r.jsonl", "--every", "100ms"])
        _ = try waitFor("a first report") { FileManager.default.fileExists(atPath: dir + "/r.json") ? true : nil }
        // Fill the disk.
        _ = try? run(["dd", "if=/dev/zero", "of=\(dir)/filler", "bs=4k", "count=64"], allowFailure: true)
        // Periods go on failing; the first failure is said.
        _ = try waitFor("the full disk said") { exporter.log.contains("No space left on device") ? true : nil }
        let whole = try String(contentsOfFile: dir + "/r.json", encoding: .utf8)
        _ = try JSONParser.parse(whole)
        try FileManager.default.removeItem(atPath: dir + "/filler")
        _ = try waitFor("the recovery said") { exporter.log.contains("works again") ? true : nil }
        #expect(exporter.stop() == 0)
        let log = exporter.log
        let failures = log.split(separator: "\n").filter { $0.contains("No space left on device") }
        #expect(failures.count >= 1 && failures.count <= 2, "once per failure streak and file: \(log)")
        #expect(log.contains("works again"), "\(log)")
        for line in try String(contentsOfFile: dir + "/r.jsonl", encoding: .utf8).split(separator: "\n") {
            _ = try JSONParser.parse(String(line))
        }
        _ = try JSONParser.parse(try String(contentsOfFile: dir + "/r.json", encoding: .utf8))
        #expect(!(try FileManager.default.contentsOfDirectory(atPath: dir)).contains { $0.contains(".tmp-") }, "no temporary files left")
    }

    @Test func jsonLinesRotate() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let exporter = try export(ns, ["--json-lines", dir + "/r.jsonl", "--every", "50ms", "--max-size", "4KiB", "--keep", "2"])
        // Rotated twice, and then once more (the oldest goes): the keep holds.
        _ = try waitFor("the second rotation") {
            FileManager.default.fileExists(atPath: dir + "/r.jsonl.2") ? true : nil
        }
        let second = FileStatus(dir + "/r.jsonl.2")?.inode
        _ = try waitFor("a third rotation") { FileStatus(dir + "/r.jsonl.2").map { $0.inode != second } == true ? true : nil }
        #expect(exporter.stop() == 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(names == ["r.jsonl", "r.jsonl.1", "r.jsonl.2"], "\(names)")
        for name in names {
            let text = try String(contentsOfFile: dir + "/" + name, encoding: .utf8)
            #expect(text.utf8.count <= 4096 + 2048)
            for line in text.split(separator: "\n") { _ = try JSONParser.parse(String(line)) }
        }
    }

    @Test func badStateFilesAreRefusedNeverOverwritten() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Not a database.
        try "not a database, keep me\n".write(toFile: dir + "/garbage.db", atomically: true, encoding: .utf8)
        var result = try ifmeter(["export", "--json", dir + "/r.json", "--state", dir + "/garbage.db"], in: ns)
        #expect(result.status == 65 && result.err.contains("not an ifmeter state file or it is corrupt"), "\(result.err)")
        #expect(try String(contentsOfFile: dir + "/garbage.db", encoding: .utf8) == "not a database, keep me\n")

        // Made by ifmeter, then from a newer schema.
        let good = dir + "/state.db"
        let first = try export(ns, ["--json", dir + "/r.json", "--every", "100ms", "--state", good])
        // Holding the state: its first report is out.
        try ExportReport.waitForFirst(dir + "/r.json")
        // In use by another ifmeter.
        result = try ifmeter(["export", "--json", dir + "/r2.json", "--state", good], in: ns)
        #expect(result.status == 1 && result.err.contains("in use by another ifmeter"), "\(result.err)")
        #expect(first.stop() == 0)
        let newer = dir + "/newer.db"
        try FileManager.default.copyItem(atPath: good, toPath: newer)
        try run(["sqlite3", newer, "UPDATE meta SET value = '99' WHERE key = 'schema_version';"])
        result = try ifmeter(["export", "--json", dir + "/r.json", "--state", newer], in: ns)
        #expect(result.status == 65 && result.err.contains("written by a newer ifmeter (state schema 99"), "\(result.err)")

        // Another host's file: run under another host name (a UTS namespace).
        result = try run(
            [
                "unshare", "--uts", "sh", "-c",
                "hostname other-host && exec ip netns exec \(ns.name) \(try ifmeterBinary()) export --json \(dir)/r.json --state \(good)",
            ],
            allowFailure: true)
        #expect(result.status == 65 && result.err.contains("belongs to host"), "\(result.err)")

        // A missing or unwritable folder: an error at start.
        result = try ifmeter(["export", "--json", dir + "/missing/r.json"], in: ns)
        #expect(result.status == 1 && result.err.contains("does not exist"))
        result = try ifmeter(["export", "--json", dir + "/r.json", "--state", dir + "/missing/state.db"], in: ns)
        #expect(result.status == 1 && result.err.contains("does not exist"))
        result = try ifmeter(["export"])
        #expect(result.status == 64 && result.err.contains("nothing to export"))
        // A read-only folder (root writes anywhere else): an error at start too.
        let readOnly = dir + "/ro"
        try FileManager.default.createDirectory(atPath: readOnly, withIntermediateDirectories: true)
        try run(["mount", "-t", "tmpfs", "-o", "ro,size=16k", "tmpfs", readOnly])
        defer { _ = try? run(["umount", readOnly], allowFailure: true) }
        result = try ifmeter(["export", "--json", readOnly + "/r.json"], in: ns)
        #expect(result.status == 1 && result.err.contains("Read-only file system"), "\(result.err)")
        result = try ifmeter(["serve", "--state", readOnly + "/state.db"], in: ns)
        #expect(result.status == 1 && result.err.contains("Read-only file system"), "\(result.err)")
    }

    @Test func serveContinuesItsCountersFromTheState() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func scrape() throws -> Double? {
            let text = try RawHTTP.request("/metrics", port: 9874, in: pair.a.name).text
            let line = text.split(separator: "\n").first { $0.hasPrefix(#"ifmeter_transmit_bytes_total{interface="vA""#) }
            return line.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        func start() throws -> Background {
            try startServe(in: pair.a, interval: "200ms", name: "serve-state", ["--state", dir + "/state.db"])
        }
        var server = try start()
        let first = try #require(try scrape())
        try pair.sendUDP(count: 10, payload: 100)
        let sent = first + Double(10 * VethPair.frameBytes(payload: 100))
        let before = try waitFor("the 10 frames counted") { try scrape().flatMap { $0 >= sent ? $0 : nil } }
        #expect(server.stop() == 0)
        try pair.sendUDP(count: 5, payload: 100)
        server = try start()
        // The first scrape after the restart may come before the sample
        // that counts the 5 frames sent while it was stopped.
        let expected = before + Double(5 * VethPair.frameBytes(payload: 100))
        let after = try waitFor("the 5 frames sent while stopped counted") {
            try scrape().flatMap { $0 >= expected ? $0 : nil }
        }
        #expect(after == before + Double(5 * VethPair.frameBytes(payload: 100)), "the counter goes on across the restart")
        #expect(server.stop() == 0)
    }
}
