import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// Issue 31: `--keep-hours` and `--keep-days` on the writers, their config
/// keys, their refusals, and a roll done by a real writer's save.
@Suite(.serialized, .blocking)
struct RetentionCommandTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-keep-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A bad keep is one line: 64 on the command line, 65 naming the
    /// config file's line; `config check` shows good ones.
    @Test func badKeepsAreRefusedInOneLine() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let bad: [(arguments: [String], words: String)] = [
            (["--keep-hours", "1d"], "invalid value '1d' for '--keep-hours <age>': expected forever (or 0) or an age from 2d to 100y"),
            (["--keep-hours", "-3d"], "invalid value '-3d' for '--keep-hours <age>'"),
            (["--keep-hours", "101y"], "invalid value '101y' for '--keep-hours <age>'"),
            (["--keep-hours", "nan"], "invalid value 'nan' for '--keep-hours <age>'"),
            (["--keep-days", "31d"], "an age from 32d to 100y, like 10y, 13w or 1y (shorter would sum the current billing cycle's days"),
            (["--keep-days", "always"], "invalid value 'always' for '--keep-days <age>'"),
        ]
        for command in [["export", "--json", dir + "/r.json"], ["serve", "--listen", "127.0.0.1:19361"], ["live"]] {
            for c in bad {
                let result = try ifmeter(command + ["--state", state] + c.arguments)
                #expect(result.status == 64, "\(command[0]) \(c.arguments): \(result.err)")
                #expect(result.err.hasPrefix("Error: ") && result.err.contains(c.words), "\(command[0]) \(c.arguments): \(result.err)")
                #expect(result.err.split(separator: "\n").count == 1, "one line: \(result.err)")
            }
            let stateless = try ifmeter(command + ["--keep-days", "1y"])
            #expect(stateless.status == 64 && stateless.err.contains("'--keep-days' needs '--state FILE'"), "\(stateless.err)")
        }
        #expect(!FileManager.default.fileExists(atPath: state), "nothing was started")
        let path = dir + "/ifmeter.yml"
        try "interval: 1s\nserve:\n  keep-hours: 12h\n".write(toFile: path, atomically: true, encoding: .utf8)
        for command in [["config", "check", path], ["serve", "--config", path, "--state", state]] {
            let result = try ifmeter(command)
            #expect(result.status == 65, "\(command): \(result.err)")
            #expect(result.err.hasPrefix("Error: \(path):3: serve.keep-hours: invalid value '12h'"), "\(result.err)")
            #expect(result.err.split(separator: "\n").count == 1, "one line: \(result.err)")
        }
        try "keep-hours: 13w\nkeep-days: forever\n".write(toFile: path, atomically: true, encoding: .utf8)
        let check = try ifmeter(["config", "check", path])
        #expect(check.status == 0, "\(check.err)")
        #expect(check.out.contains("ifmeter serve\n  keep-hours: 13w  (line 1)\n  keep-days: forever  (line 2)"), "\(check.out)")
        // The shipped file names both, with their defaults.
        let example = try ifmeter(["--generate-config"]).out
        #expect(example.contains("#keep-hours: 92d\n") && example.contains("#keep-days: 10y\n"), "\(example)")
    }

    /// `export --state --keep-hours 2d --keep-days 32d` on a file with a
    /// year of hours: its first save sums them into days and months, and
    /// `usage` shows the same days, months and year as before.
    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func aWriterRollsAtItsFirstSave() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace(named: "ifm-keep")
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        // A state file ifmeter made (plan set makes one), with 400 days of
        // hours up to 30 days ago added by hand.
        let made = try ifmeter(["plan", "set", "wan0", "--state", state, "--cycle-start", "1"])
        #expect(made.status == 0, "\(made.err)")
        let now = Int64(Date().timeIntervalSince1970) / 3600 * 3600
        let last = now - 30 * 86400
        _ = try run([
            "sqlite3", state,
            """
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < \(400 * 24 - 1))
            INSERT INTO usage_hours SELECT 'wan0', \(last) - i * 3600, 3600, 'ethernet', 1000 + i, 2 * i, 3, i % 7, CASE WHEN i % 1000 = 5 THEN 2 ELSE 0 END FROM n;
            """,
        ])
        func usage(_ table: String) throws -> String {
            let result = try ifmeter(["usage", "--state", state, table, "--format", "csv"])
            #expect(result.status == 0, "\(result.err)")
            // Without the current period's seconds, which move with now.
            return result.out.split(separator: "\n").map { $0.split(separator: ",").prefix(13).joined(separator: ",") }.joined(separator: "\n")
        }
        let monthly = try usage("--monthly"), yearly = try usage("--yearly"), daily = try usage("--daily")
        let exporter = try Background(
            [
                "ip", "netns", "exec", ns.name, try ifmeterBinary(), "export", "--interval", "100ms", "--every", "200ms", "--json", dir + "/r.json",
                "--state", state,
                "--keep-hours", "2d", "--keep-days", "32d",
            ], name: "export-keep")
        _ = try ExportReport.waitForFirst(dir + "/r.json")
        #expect(exporter.stop() == 0, "\(exporter.log)")
        let hours = try run(["sqlite3", state, "SELECT count(*) FROM usage_hours WHERE name = 'wan0'"]).out
        #expect(hours.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "every hour was older than 2 days")
        let months = try run(["sqlite3", state, "SELECT count(*) FROM usage WHERE granularity = 'month'"]).out
        #expect(Int(months.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 12, "\(months)")
        #expect(try usage("--monthly") == monthly)
        #expect(try usage("--yearly") == yearly)
        // The latest days are still days (older ones are months now).
        #expect(try usage("--daily").split(separator: "\n").last == daily.split(separator: "\n").last)
        let days = try run(["sqlite3", state, "SELECT count(*) FROM usage WHERE granularity = 'day'"]).out
        #expect(Int(days.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 2, "\(days)")
    }
}
