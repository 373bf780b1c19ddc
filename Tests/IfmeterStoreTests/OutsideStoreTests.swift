import Foundation
import IfmeterCore
import IfmeterStore
import IfmeterTestSupport
import Testing

/// Schema 5 (issue 48): each tunnel's outside estimate is kept in the state
/// file, so `ifmeter_tunnel_outside_bytes_total` goes on across restarts; a
/// schema 4 file is brought forward and keeps everything else.
@Suite(.blocking) struct OutsideStoreTests {
    let dir: String
    let noon = 1_796_040_000.0 // 2026-11-30 12:00 UTC

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-outside-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func open(_ now: Double) throws -> StateStore { try StateStore(path: dir + "/state.db", host: "h", bootID: "b", now: now) }

    func total(_ tunnel: String, _ underlay: String, rx: UInt64, tx: UInt64, uncertain: Bool = false) -> OutsideTotal {
        var t = OutsideTotal(tunnel: tunnel, underlay: underlay)
        t.rxBytes = rx
        t.txBytes = tx
        t.uncertain = uncertain
        return t
    }

    @Test func outsideTotalsRoundTripThroughTheFile() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let wg = total("wg0", "eth0", rx: 1_200, tx: 100_794)
        // Past 2^63: kept by its bit pattern, as the interface counters are.
        let tun = total("tun0", "wlan0", rx: UInt64.max - 5, tx: 1 << 63, uncertain: true)
        do {
            let store = try open(noon)
            #expect(store.restoredOutside.isEmpty, "a new file has none")
            try store.save([], usage: [:], outside: [wg, tun], wallTime: noon, full: true)
        }
        do {
            let store = try open(noon + 60)
            #expect(store.restoredOutside == [tun, wg], "every figure and the uncertain mark, by tunnel")
            // A save that says nothing of them, and one without a tunnel gone
            // for now, leave the rows as they were.
            try store.save([], usage: [:], wallTime: noon + 60)
            var grown = wg
            grown.txBytes += 5_000
            try store.save([], usage: [:], outside: [grown], wallTime: noon + 120, full: false)
        }
        let store = try open(noon + 180)
        var grown = wg
        grown.txBytes += 5_000
        #expect(store.restoredOutside == [tun, grown])
    }

    @Test func aSchema4FileIsBroughtForwardWithItsRows() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do { _ = try open(noon) }
        try run([
            "sqlite3", dir + "/state.db",
            """
            DROP TABLE tunnel_outside; UPDATE meta SET value = '4' WHERE key = 'schema_version';
            INSERT INTO usage_hours VALUES ('eth0', 1796036400, 3600, 'ethernet', 100, 10, 2, 1, 0);
            """,
        ])
        // Read before a writer opens it: the usage is there.
        #expect(try StateStore.snapshot(path: dir + "/state.db", zone: .utc).slices.map(\.counters.rxBytes) == [100])
        do {
            let store = try open(noon + 60)
            #expect(store.restoredOutside.isEmpty, "a schema 4 file kept no outside totals: they start at its first save")
            try store.save([], usage: [:], outside: [total("wg0", "eth0", rx: 7, tx: 9)], wallTime: noon + 60, full: true)
        }
        let version = try run(["sqlite3", dir + "/state.db", "SELECT value FROM meta WHERE key = 'schema_version'"])
        #expect(version.out.trimmingCharacters(in: .whitespacesAndNewlines) == "5" && StateStore.schemaVersion == 5)
        #expect(try open(noon + 120).restoredOutside == [total("wg0", "eth0", rx: 7, tx: 9)])
        #expect(try StateStore.snapshot(path: dir + "/state.db", zone: .utc).slices.map(\.counters.rxBytes) == [100], "the hours are kept")
    }

    /// A row another hand wrote with a count that is no integer stops the
    /// start with a line naming the file, the row and the column.
    @Test func aBadOutsideRowIsRefusedNamingIt() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do { _ = try open(noon) }
        try run(["sqlite3", dir + "/state.db", "INSERT INTO tunnel_outside VALUES ('wg0', 'eth0', 'lots', 0, 0)"])
        do {
            _ = try open(noon + 60)
            Issue.record("a text byte count was read")
        } catch {
            let text = String(describing: error)
            #expect(text.contains("tunnel_outside row of 'wg0' over 'eth0': rx_bytes is"), "\(text)")
            #expect(text.contains(dir + "/state.db"), "\(text)")
        }
    }
}
