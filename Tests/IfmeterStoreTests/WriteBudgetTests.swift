import Foundation
import IfmeterCore
import IfmeterStore
import Testing

/// Issue 23's write budget, counted where it is decided: the pages a save
/// appends to the WAL. SQLite writes a WAL frame (24 bytes and one page)
/// per page a transaction changes, so the WAL's growth over saves that
/// checkpoint nothing is exactly what they write (a checkpoint later
/// copies each distinct page once more, shared by every save since the
/// last one). Deterministic: no clock and no kernel counters involved.
@Suite struct WriteBudgetTests {
    let dir: String
    let noon = 1_796_040_000.0 // 2026-11-30 12:00 UTC
    static let page = 4096 + 24

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-budget-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func series(_ name: String, rx: UInt64, time: Double) -> DeltaEngine.SavedSeries {
        let classification = Classification(kind: .virtual, evidence: "link-kind:veth")
        let counters = Counters(rxBytes: rx, txBytes: rx / 2, rxPackets: rx / 100, txPackets: rx / 200)
        let totals = InterfaceTotals(
            name: name, netns: "", classification: classification, index: 3, width: .bits64, speedBps: 10_000_000_000,
            attributes: nil, totals: counters, quality: .exact, events: EventCounts(), baseline: Counters(),
            lastKernelStats: nil, firstSeen: 1, lastSeen: time, present: true, deletedAt: nil)
        let sample = InterfaceSample(name: name, index: 3, classification: classification, counters: counters)
        return DeltaEngine.SavedSeries(totals: totals, last: sample, lastTime: time)
    }

    func walSize() -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: dir + "/state.db-wal"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Bytes the WAL grew by per save, over `saves` saves of `count`
    /// interfaces 5 minutes apart (`active`: each with traffic every
    /// save, so the saves also start new hours' usage rows).
    func bytesPerSave(interfaces count: Int, active: Bool, saves: Int = 20) throws -> Int {
        let store = try StateStore(path: dir + "/state.db", host: "h", bootID: "b", now: noon, saveEvery: 300)
        let names = (0..<count).map { "eth\($0)" }
        // The first save inserts the rows (and this hour's usage rows).
        func save(_ n: Int) throws {
            let rx = active ? UInt64(1000 * (n + 1)) : 1000
            let usage: [SeriesKey: UsageEntry] =
                active
                ? Dictionary(
                    uniqueKeysWithValues: names.map {
                        (
                            SeriesKey(name: $0),
                            UsageEntry(kind: .virtual, counters: Counters(rxBytes: 1000, txBytes: 500, rxPackets: 10, txPackets: 5), quality: .exact)
                        )
                    }) : [:]
            try store.save(names.map { series($0, rx: rx, time: 10 + Double(n) * 300) }, usage: usage, wallTime: noon + 1 + Double(n) * 300)
        }
        try save(0)
        let before = walSize()
        for n in 1...saves { try save(n) }
        let grown = walSize() - before
        try FileManager.default.removeItem(atPath: dir + "/state.db")
        for side in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: dir + "/state.db" + side) }
        return grown / saves
    }

    /// With 3 interfaces a save writes 2 pages (the interfaces table and
    /// the meta row of the save's time), about 3 when they carried traffic
    /// (the hour's usage rows, updated in place, and once an hour the new
    /// rows' index entries). At the default pace (12 saves an hour) that
    /// is under 192 KiB an hour, a fifth of the budget of 1 MiB. Before: REPLACE deleted and inserted every row, rewriting the
    /// name indexes' pages too (4 to 5 pages a save).
    @Test func aSaveOfThreeInterfacesWritesAFewPages() throws {
        let idle = try bytesPerSave(interfaces: 3, active: false)
        let active = try bytesPerSave(interfaces: 3, active: true)
        print("WAL bytes a save, 3 interfaces: idle \(idle), with traffic \(active)")
        #expect(idle <= 2 * Self.page, "idle: \(idle) bytes a save")
        // 3 pages, and now and then an hour's new rows in the name index.
        #expect(active <= 3 * Self.page + Self.page / 2, "active: \(active) bytes a save")
        #expect(active * 12 <= 192 * 1024, "\(active * 12) bytes an hour")
    }

    /// Each interface more costs its row's share of a page (about 300
    /// bytes) a save, and with traffic a new usage row an hour; 40 more
    /// interfaces with traffic stay far under the budget's 50 KiB an hour
    /// each.
    @Test func eachInterfaceMoreCostsAFractionOfAPage() throws {
        let three = try bytesPerSave(interfaces: 3, active: true)
        let many = try bytesPerSave(interfaces: 43, active: true)
        let perInterfaceHour = (many - three) * 12 / 40
        print("WAL bytes a save: 3 interfaces \(three), 43 interfaces \(many); each interface more: \(perInterfaceHour) bytes an hour")
        #expect(perInterfaceHour <= 8 * 1024, "\(perInterfaceHour) bytes an hour per interface (\(three) and \(many) a save)")
        #expect(perInterfaceHour > 0, "more rows write more")
    }
}
