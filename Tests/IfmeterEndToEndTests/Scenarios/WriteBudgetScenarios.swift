import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 23's write budget, on the real process: `write_bytes` of
/// /proc/PID/io (what reaches storage; a page-cache page counts when it is
/// dirtied) of `serve --state` in a namespace of 3 idle interfaces. The
/// budget is 1 MiB an hour at the default pace (12 saves): so a save may
/// write at most 87 KiB, and between saves nothing may be written at all.
/// Counted in bytes per save, never in time: the test scales the pace
/// down, and `make bench` measures the hour.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct WriteBudgetScenarios {
    static let perSaveBudget = 1_048_576 / 12

    func written(_ pid: Int32) throws -> Int {
        let io = try String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)
        guard let line = io.split(separator: "\n").first(where: { $0.hasPrefix("write_bytes: ") }), let n = Int(line.dropFirst(13)) else {
            throw TestFailure("no write_bytes in /proc/\(pid)/io: \(io)")
        }
        return n
    }

    /// Waits until the state file holds serve's first save (meta 'saved'),
    /// read only.
    func waitForFirstSave(_ state: String) throws {
        _ = try waitFor("serve's first save") { () throws -> Bool? in
            let saved = try run(["sqlite3", "-readonly", state, "SELECT value FROM meta WHERE key = 'saved'"], allowFailure: true)
            return Double(saved.out.trimmingCharacters(in: .whitespacesAndNewlines)) != nil ? true : nil
        }
    }

    /// serve's samples so far, as its scrape says.
    func samples(_ ns: TestNamespace) throws -> Double {
        Scenario.metric(try Scenario.scrape(ns), "ifmeter_samples_total")[""] ?? 0
    }

    func threeIdleInterfaces() throws -> TestNamespace {
        let ns = try TestNamespace()
        try ns.ip("link", "add", "wa0", "type", "veth", "peer", "name", "wb0")
        try ns.ip("link", "set", "wa0", "up")
        try ns.ip("link", "set", "wb0", "up")
        return ns
    }

    /// At the default pace nothing is written between saves: ten samples
    /// (300 ms apart) after the first save write 0 bytes.
    @Test func betweenSavesServeWritesNothing() throws {
        try Netns.requireRoot()
        let ns = try threeIdleInterfaces()
        let dir = try ScenarioFolder("budget-idle")
        let server = try startServe(in: ns, ["--state", dir["state.db"], "--boot-id-file", try dir.bootFile()])
        defer { _ = server.stop() }
        try waitForFirstSave(dir["state.db"])
        let before = try written(server.process.processIdentifier)
        let first = try samples(ns)
        _ = try waitFor("ten samples more") { try samples(ns) >= first + 10 ? true : nil }
        let after = try written(server.process.processIdentifier)
        #expect(after - before == 0, "\(after - before) bytes written in 10 samples with no save due")
    }

    /// Saves every 500 ms for 6 s (about 10 saves, at most 13): each
    /// within the per-save budget, and the saves are counted (a folder on
    /// a tmpfs would count none, and prove nothing).
    @Test func aSaveStaysWithinItsShareOfTheBudget() throws {
        try Netns.requireRoot()
        let ns = try threeIdleInterfaces()
        let dir = try ScenarioFolder("budget-saves")
        let server = try startServe(in: ns, ["--state", dir["state.db"], "--boot-id-file", try dir.bootFile(), "--save-every", "500ms"])
        defer { _ = server.stop() }
        try waitForFirstSave(dir["state.db"])
        let pid = server.process.processIdentifier
        let before = try written(pid)
        let started = Date()
        // The window measured, 6 s long by design: about 10 saves, and the
        // budget is counted from the time it really took.
        Thread.sleep(forTimeInterval: 6)
        let after = try written(pid)
        let seconds = Date().timeIntervalSince(started)
        let mostSaves = Int(seconds / 0.5) + 1
        let bytes = after - before
        #expect(bytes > 0, "saves were written (is \(dir.path) on a tmpfs?)")
        #expect(bytes <= mostSaves * Self.perSaveBudget, "\(bytes) bytes in \(seconds) s: over \(Self.perSaveBudget) a save")
        // What it wrote, said for the record (the bench gives the hour).
        print("serve --state, 3 idle interfaces, a save every 500 ms: \(bytes) bytes in \(Units.fixed(seconds, 1)) s")
    }
}
