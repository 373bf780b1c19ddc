import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 29, findings 2 and 6: a save that fails (a full disk, a deleted
/// folder) is said, counted and ends in exit 1; a state file deleted under
/// a running writer is written anew; a state file `usage` calls corrupt is
/// refused by every command with the same words, and left as it was.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct StateSaveAbuseTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-saves-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        chmod(path, 0o755)
        return path
    }

    /// An unlabelled family's value in a scrape.
    func metric(_ exposition: String, _ name: String) -> Double? { Scenario.metric(exposition, name)[""] }

    func scrape(_ ns: TestNamespace, _ port: UInt16) throws -> String { try Scenario.scrape(ns, port: port) }

    func waitForMetric(_ ns: TestNamespace, _ port: UInt16, _ name: String, timeout: Double = 60, _ ok: @escaping (Double) -> Bool) throws {
        _ = try waitFor("\(name) as wanted", timeout: timeout) { () throws -> Bool? in
            guard let value = metric(try scrape(ns, port), name), ok(value) else { return nil }
            return true
        }
    }

    /// Fills the file system holding `folder` (a tmpfs the test mounted).
    func fill(_ folder: String) throws {
        _ = try run(["dd", "if=/dev/zero", "of=\(folder)/filler", "bs=4096"], allowFailure: true)
    }

    func occurrences(_ text: String, _ part: String) -> Int { text.components(separatedBy: part).count - 1 }

    @Test func aFullDiskUnderServeIsSaidCountedAndEndsInExitOne() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", dir])
        defer { _ = try? run(["umount", "-l", dir], allowFailure: true) }
        let state = dir + "/s.db"
        let port: UInt16 = 19311
        let serve = try startServe(
            in: pair.a, port: port, interval: "200ms", name: "serve-full", ["--listen", "127.0.0.1:\(port)", "--state", state, "--save-every", "1s"])
        try waitForMetric(pair.a, port, "ifmeter_state_saves_total") { $0 >= 1 }
        try fill(dir)
        try pair.sendUDP(count: 50, payload: 1000)
        try waitForMetric(pair.a, port, "ifmeter_state_save_failures_total") { $0 >= 3 }
        var exposition = try scrape(pair.a, port)
        #expect(metric(exposition, "ifmeter_state_save_failing") == 1)
        #expect(metric(exposition, "ifmeter_state_last_save_timestamp_seconds") != nil)
        let failed = "saving state to \(state) failed: database or disk is full."
        #expect(occurrences(serve.log, failed) == 1, "said once for three failures: \(serve.log)")
        // Room again: the next try works, and says so.
        try FileManager.default.removeItem(atPath: dir + "/filler")
        try waitForMetric(pair.a, port, "ifmeter_state_save_failing") { $0 == 0 }
        #expect(serve.log.contains("saving state to \(state) works again, after"), "\(serve.log)")
        exposition = try scrape(pair.a, port)
        #expect((metric(exposition, "ifmeter_state_saves_total") ?? 0) >= 2)
        // Full again, and stopped while full: exit 1, and the last line says why.
        try fill(dir)
        try pair.sendUDP(count: 50, payload: 1000)
        try waitForMetric(pair.a, port, "ifmeter_state_save_failing") { $0 == 1 }
        #expect(serve.stop() == 1, "\(serve.log)")
        #expect(serve.log.contains("Error: the last save of the state file \(state) failed (database or disk is full)"), "\(serve.log)")
    }

    @Test func aFullDiskUnderExportEndsInExitOne() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        let out = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        defer { try? FileManager.default.removeItem(atPath: out) }
        try run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", dir])
        defer { _ = try? run(["umount", "-l", dir], allowFailure: true) }
        let state = dir + "/s.db"
        let export = try Background(
            [
                "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "export", "--interval", "200ms", "--every", "200ms",
                "--json", out + "/r.json", "--state", state, "--save-every", "1s",
            ], name: "export-full")
        _ = try ExportReport.waitForFirst(out + "/r.json")
        try fill(dir)
        try pair.sendUDP(count: 50, payload: 1000)
        _ = try waitFor("a failed save said") { export.log.contains("saving state to \(state) failed") ? true : nil }
        #expect(export.stop() == 1, "\(export.log)")
        #expect(export.log.contains("Error: the last save of the state file \(state) failed"), "\(export.log)")
        #expect(occurrences(export.log, "saving state to \(state) failed") == 1, "\(export.log)")
    }

    @Test func aStateFolderDeletedUnderServeIsSaidThenWrittenAnew() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sub = dir + "/state"
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        chmod(sub, 0o700)
        let state = sub + "/s.db"
        let port: UInt16 = 19312
        let serve = try startServe(
            in: pair.a, port: port, interval: "200ms", name: "serve-deleted",
            ["--listen", "127.0.0.1:\(port)", "--state", state, "--save-every", "1s"])
        try waitForMetric(pair.a, port, "ifmeter_state_saves_total") { $0 >= 1 }
        try pair.sendUDP(count: 20, payload: 1000)
        try FileManager.default.removeItem(atPath: sub)
        try waitForMetric(pair.a, port, "ifmeter_state_save_failing") { $0 == 1 }
        #expect(serve.log.contains("saving state to \(state) failed: its folder \(sub) no longer exists"), "\(serve.log)")
        // Made again by another user: refused, never adopted.
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        chown(sub, 65534, 65534)
        _ = try waitFor("the foreign folder refused") { serve.log.contains("owned by uid 65534") ? true : nil }
        #expect(!FileManager.default.fileExists(atPath: state), "nothing is written in another user's folder")
        // Made again by root: the file is written anew with everything counted.
        chown(sub, 0, 0)
        chmod(sub, 0o700)
        try waitForMetric(pair.a, port, "ifmeter_state_recreations_total") { $0 == 1 }
        try waitForMetric(pair.a, port, "ifmeter_state_save_failing") { $0 == 0 }
        #expect(serve.log.contains("state file \(state) was deleted under this ifmeter (or its folder was): written anew"), "\(serve.log)")
        try pair.sendUDP(count: 10, payload: 1000)
        _ = try waitFor("the traffic counted") { () throws -> Bool? in
            let line = try scrape(pair.a, port).split(separator: "\n").first {
                $0.hasPrefix("ifmeter_transmit_bytes_total{") && $0.contains("interface=\"vA\"")
            }
            let tx = line.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
            return tx >= 30 * 1028 ? true : nil
        }
        #expect(serve.stop() == 0, "\(serve.log)")
        let usage = try ifmeter(["usage", "--state", state, "--format", "json"])
        #expect(usage.status == 0, "\(usage.err)")
        let json = try JSONParser.parse(usage.out)
        guard case .array(let interfaces)? = json["interfaces"],
            let mine = interfaces.first(where: { $0["name"]?.stringValue == "vA" }), case .array(let periods)? = mine["periods"]
        else { throw TestFailure("no vA in \(usage.out)") }
        let tx = periods.compactMap { $0["tx_bytes"]?.uint64Value }.reduce(0, +)
        #expect(tx >= 30 * 1028, "what was counted before the folder went is in the file written anew: \(tx)")
    }

    @Test func aStateFileUsageCallsCorruptIsRefusedByEveryCommand() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/s.db"
        #expect(try ifmeter(["plan", "set", "lo", "--state", state, "--cycle-start", "1", "--quota", "1GB"]).status == 0)
        try run([
            "sqlite3", state,
            "INSERT INTO usage_hours VALUES ('lo', 1796040000, 3600, 'loopback', 0, -5, 0, 0, 0);",
        ])
        let before = try Data(contentsOf: URL(fileURLWithPath: state))
        let usage = try ifmeter(["usage", "--state", state])
        #expect(usage.status == 65, "\(usage.err)")
        let words = try #require(usage.err.split(separator: "\n").first.map(String.init))
        #expect(words.contains("tx_bytes is -5"), "\(words)")
        let commands: [(String, [String])] = [
            ("serve", ["serve", "--listen", "127.0.0.1:19313", "--state", state]),
            ("export", ["export", "--json", dir + "/r.json", "--state", state]),
            ("live", ["live", "--state", state]),
            ("plan set", ["plan", "set", "lo", "--state", state, "--cycle-start", "1", "--quota", "2GB"]),
            ("plan remove", ["plan", "remove", "lo", "--state", state]),
            ("plan list", ["plan", "list", "--state", state]),
        ]
        for (name, arguments) in commands {
            let result = try ifmeter(arguments, in: ns)
            #expect(result.status == 65, "\(name): \(result.status) \(result.err)")
            #expect(result.err.split(separator: "\n").first.map(String.init) == words, "\(name) says what usage says: \(result.err)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: state)) == before, "nothing was written to it")
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.json"))
    }
}
