import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// Rough edge 9: a filter that matches none of a state file's interfaces
/// says so (not "no usage recorded yet"), --kind warns as --include does,
/// and an empty trace is bad data.
@Suite(.blocking) struct UsageFilterNoteTests {
    /// A state file with hours of eth0 (ethernet) and wlan0 (wireless).
    func stateWithData() throws -> (dir: String, state: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-filter-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let state = dir + "/state.db"
        #expect(try ifmeter(["plan", "set", "eth0", "--state", state, "--cycle-start", "1"]).status == 0)
        let hour = 1_796_040_000
        let sql = """
            BEGIN;
            INSERT INTO usage_hours VALUES ('eth0', \(hour), 3600, 'ethernet', 1000, 2000, 1, 2, 0);
            INSERT INTO usage_hours VALUES ('wlan0', \(hour), 3600, 'wireless', 10, 20, 1, 2, 0);
            COMMIT;
            """
        let insert = try run(["sqlite3", state, sql], allowFailure: true)
        #expect(insert.status == 0, "\(insert.err)")
        return (dir, state)
    }

    @Test func anIncludeMatchingNothingNamesTheRecordedInterfaces() throws {
        let (dir, state) = try stateWithData()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try ifmeter(["usage", "--state", state, "--include", "veht0"])
        #expect(r.status == 0, "\(r)")
        #expect(!r.out.contains("No usage recorded yet"), "the file is full of data: \(r.out)")
        #expect(r.out.contains("matched none of the interfaces recorded"), "\(r.out)")
        #expect(r.out.contains("eth0") && r.out.contains("wlan0"), "names them: \(r.out)")
        #expect(r.err.contains("--include 'veht0' matches no interface"), "\(r.err)")
        // A file with no usage at all still says so.
        let empty = dir + "/empty.db"
        #expect(try ifmeter(["plan", "set", "eth0", "--state", empty, "--cycle-start", "1"]).status == 0)
        #expect(try ifmeter(["usage", "--state", empty]).out.contains("No usage recorded yet"))
    }

    @Test func aKindMatchingNothingWarnsAsIncludeDoes() throws {
        let (dir, state) = try stateWithData()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try ifmeter(["usage", "--state", state, "--kind", "cellular"])
        #expect(r.status == 0, "\(r)")
        #expect(r.err.contains("Warning: --kind 'cellular' matches no interface in \(state)"), "\(r.err)")
        #expect(r.out.contains("matched none of the interfaces recorded") && !r.out.contains("No usage recorded yet"), "\(r.out)")
        let json = try ifmeter(["usage", "--state", state, "--kind", "cellular", "--format", "json"])
        #expect(json.err.contains("Warning: --kind 'cellular'"), "\(json.err)")
        // A kind that matches says nothing.
        let fine = try ifmeter(["usage", "--state", state, "--kind", "ethernet"])
        #expect(!fine.err.contains("Warning"), "\(fine.err)")
    }

    @Test func anEmptyTraceOnStdinIsBadData() throws {
        let binary = try ifmeterBinary()
        let r = try run(["sh", "-c", ": | '\(binary)' replay -"], allowFailure: true)
        #expect(r.status == 65, "\(r)")
        #expect(r.out.isEmpty, "no report: \(r.out)")
        let lines = r.err.split(separator: "\n")
        #expect(lines.count <= 2 && lines.first?.hasPrefix("Error: ") == true, "one clear line: \(r.err)")
    }
}
