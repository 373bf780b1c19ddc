import Foundation
import IfmeterCore
import IfmeterStore
import IfmeterTestSupport
import Testing

/// The state file on temporary files: what it keeps, and what it refuses.
@Suite(.blocking) struct StateStoreTests {
    let dir: String
    let noon = 1_796_040_000.0 // 2026-11-30 12:00 UTC

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func open(_ name: String = "state.db", host: String = "h", boot: String = "boot-1") throws(StoreError) -> StateStore {
        try StateStore(path: dir + "/" + name, host: host, bootID: boot, now: noon)
    }

    /// The store's error, or nil when `body` worked.
    func failure(_ body: () throws -> Void) -> StoreError? {
        do {
            try body()
            return nil
        } catch let error as StoreError {
            return error
        } catch {
            Issue.record("not a StoreError: \(error)")
            return nil
        }
    }

    /// A series as the engine saves it, in a namespace when given.
    func saved(_ name: String, netns: String = "", rx: UInt64, last: UInt64?, quality: Quality = .exact) -> DeltaEngine.SavedSeries {
        let classification = Classification(kind: .tunnel, evidence: "link-kind:tun")
        let totals = InterfaceTotals(
            name: name, netns: netns, classification: classification, index: 7, width: .bits64, speedBps: nil,
            attributes: nil, totals: Counters(rxBytes: rx, txBytes: 2, rxPackets: 3, txPackets: 4), quality: quality,
            events: EventCounts(wraps: 1, resets: 0, recreations: 2, deletions: 3),
            baseline: Counters(rxBytes: 10, txBytes: 20, rxPackets: 1, txPackets: 2),
            lastKernelStats: nil, firstSeen: 5, lastSeen: 9, present: true, deletedAt: last == nil ? 9 : nil)
        let sample = last.map {
            InterfaceSample(
                name: name, netns: netns, index: 7, classification: classification,
                counters: Counters(rxBytes: $0, txBytes: 1, rxPackets: 1, txPackets: 1))
        }
        return DeltaEngine.SavedSeries(totals: totals, last: sample, lastTime: 9)
    }

    /// `plan set` on a new file opens it as an editor: the first sampler
    /// after it restores nothing, sees no unclean stop, and its totals
    /// count from its own start (the honest-workflows issue, finding 1).
    @Test func anEditorLeavesNoMarkOfAWriter() throws {
        do {
            let editor = try StateStore(path: dir + "/state.db", host: "h", bootID: "boot-1", now: noon - 86400, role: .editor)
            #expect(editor.isNew && !editor.restoresTotals)
        }
        let sampler = try open()
        #expect(!sampler.isNew && !sampler.uncleanStop && !sampler.restoresTotals && sampler.lastSaved == nil)
        #expect(sampler.since == noon, "totals count from the first sampler's start, not the plan's")
    }

    @Test func aSamplerKilledAfterAnEditorIsStillAnUncleanStop() throws {
        do {
            let sampler = try open()
            try sampler.save([saved("tun0", rx: 1, last: 2)], usage: [:], wallTime: noon + 1)
            // No markStopped: as after kill -9.
        }
        do {
            let editor = try StateStore(path: dir + "/state.db", host: "h", bootID: "boot-1", now: noon + 2, role: .editor)
            #expect(editor.restoresTotals)
        }
        let again = try open()
        #expect(again.uncleanStop && again.restoresTotals && again.lastSaved == noon + 1 && again.since == noon)
    }

    /// A file refused for a row outside what ifmeter writes keeps its marks:
    /// the refusal does not make it look as if a writer had started and
    /// died (usage would say "stopped uncleanly").
    @Test func aFileRefusedForABadRowKeepsItsMarks() throws {
        do {
            let store = try open()
            try store.save([saved("tun0", rx: 1, last: 2)], usage: [:], wallTime: noon + 1)
            try store.markStopped(wallTime: noon + 2)
        }
        try run(["sqlite3", dir + "/state.db", "UPDATE interfaces SET last_time = 1e300"])
        #expect(failure { _ = try open() } != nil, "the row is refused")
        let running = try run(["sqlite3", dir + "/state.db", "SELECT value FROM meta WHERE key = 'running'"]).out
        #expect(running.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "still marked stopped: \(running)")
    }

    @Test func savesAndRestoresEverySeries() throws {
        do {
            let store = try open()
            #expect(store.isNew && store.restored.isEmpty && store.sameBoot)
            try store.save(
                [
                    saved("tun0", rx: 1000, last: 5000), saved("eth0", netns: "ctr-1", rx: UInt64.max - 1, last: UInt64.max),
                    saved("wg0", rx: 7, last: nil, quality: .lowerBound),
                ],
                usage: [:], wallTime: noon)
        }
        let again = try open()
        #expect(!again.isNew && again.sameBoot && again.since == noon)
        let byName = Dictionary(uniqueKeysWithValues: again.restored.map { ($0.totals.key, $0) })
        let tun0 = try #require(byName[SeriesKey(name: "tun0")])
        #expect(tun0.totals.totals.rxBytes == 1000 && tun0.last?.counters.rxBytes == 5000)
        #expect(tun0.totals.events == EventCounts(wraps: 1, resets: 0, recreations: 2, deletions: 3))
        #expect(tun0.totals.baseline.rxBytes == 10 && tun0.last?.index == 7)
        // Unsigned 64-bit counters survive SQLite's signed integers, and a
        // namespace's interface keeps its namespace.
        let eth0 = try #require(byName[SeriesKey(netns: "ctr-1", name: "eth0")])
        #expect(eth0.totals.totals.rxBytes == UInt64.max - 1 && eth0.last?.counters.rxBytes == UInt64.max)
        let wg0 = try #require(byName[SeriesKey(name: "wg0")])
        #expect(wg0.last == nil && wg0.totals.quality == .lowerBound && wg0.totals.deletedAt == 9)
    }

    @Test func anotherBootIsSeen() throws {
        do { try open().save([saved("tun0", rx: 1, last: 1)], usage: [:], wallTime: noon) }
        #expect(try open(boot: "boot-2").sameBoot == false)
    }

    @Test func usageAddsUpPerDayAndMonthWithTheWorstQuality() throws {
        let store = try open()
        let key = SeriesKey(name: "wwan0")
        func entry(_ rx: UInt64, _ quality: Quality) -> [SeriesKey: UsageEntry] {
            [key: UsageEntry(kind: .cellular, counters: Counters(rxBytes: rx, txBytes: rx / 2, rxPackets: 1, txPackets: 1), quality: quality)]
        }
        // Mid-month, so that no time zone moves a day into another month.
        let day = noon - 86_400 * 10
        try store.save([], usage: entry(100, .exact), wallTime: day)
        try store.save([], usage: entry(50, .lowerBound), wallTime: day + 60)
        try store.save([], usage: entry(7, .exact), wallTime: day - 86_400 * 2)
        let days = try StateStore.usage(path: store.path, granularity: .day)
        #expect(days.map(\.counters.rxBytes) == [7, 150])
        #expect(days.map(\.quality) == [.exact, .lowerBound])
        let months = try StateStore.usage(path: store.path, granularity: .month)
        #expect(months.count == 1 && months[0].counters.rxBytes == 157 && months[0].counters.txBytes == 78)
        #expect(months[0].kind == .cellular && months[0].quality == .lowerBound)
    }

    @Test func aSecondOpenIsRefusedWhileTheFirstHoldsIt() throws {
        let first = try open()
        #expect(failure { _ = try open() } == .inUse(path: first.path))
    }

    /// A first start killed before its schema was committed leaves an
    /// empty file, or SQLite's header alone (journal_mode=WAL is written
    /// first): every later start refused it as "not an ifmeter state file"
    /// (ExportStateTests' kill -9 at any moment found it). Such a file
    /// reads as a state with no usage, and the next writer makes it; a note
    /// shorter than a page (which SQLite reads as an empty database) is
    /// still refused and left alone.
    @Test func aFileAFirstStartLeftBlankIsMadeNotRefused() throws {
        let empty = dir + "/empty.db", header = dir + "/header.db", note = dir + "/note.db"
        try Data().write(to: URL(fileURLWithPath: empty))
        _ = try run(["sqlite3", header, "PRAGMA journal_mode=WAL;"])
        try "x".write(toFile: note, atomically: true, encoding: .utf8)
        for path in [empty, header] {
            #expect(try StateStore.usage(path: path, granularity: .day).isEmpty, "\(path) reads as a state with no usage")
        }
        _ = try open("empty.db")
        _ = try open("header.db")
        #expect(try StateStore.plans(path: header) == [], "made: a state file now")
        #expect(failure { _ = try open("note.db") }.map { if case .notState = $0 { true } else { false } } == true)
        #expect(failure { _ = try StateStore.usage(path: note, granularity: .day) }?.isBadData == true)
        #expect(try String(contentsOfFile: note, encoding: .utf8) == "x", "never overwritten")
    }

    @Test func filesThatAreNotStateAreRefusedAndLeftAlone() throws {
        let text = dir + "/notes.db"
        try "not a database, a note".write(toFile: text, atomically: true, encoding: .utf8)
        guard case .notState = failure({ _ = try open("notes.db") }) else {
            Issue.record("a text file is not state")
            return
        }
        #expect(try String(contentsOfFile: text, encoding: .utf8) == "not a database, a note", "never overwritten")
        #expect(failure { _ = try StateStore.usage(path: text, granularity: .day) }?.isBadData == true)
    }

    @Test func aNewerSchemaAndAnotherHostAreRefused() throws {
        do { _ = try open() }
        #expect(failure { _ = try open(host: "other") } == .otherHost(path: dir + "/state.db", owner: "h", host: "other"))
        try sqlite(dir + "/state.db", "UPDATE meta SET value = '99' WHERE key = 'schema_version';")
        #expect(failure { _ = try open() } == .newerSchema(path: dir + "/state.db", version: 99, known: StateStore.schemaVersion))
    }

    @Test func missingThingsAreSaidByCase() throws {
        #expect(failure { _ = try StateStore.usage(path: dir + "/none.db", granularity: .day) } == .missing(path: dir + "/none.db"))
        let path = dir + "/no/such/folder/state.db"
        #expect(
            failure { _ = try StateStore(path: path, host: "h", bootID: "b", now: noon) } == .noFolder(path: path, folder: dir + "/no/such/folder"))
    }

    @Test func anotherNameForTheSameFileIsInUse() throws {
        let first = try open("a.db")
        // A hard link: another path, the same inode.
        #expect(link(first.path, dir + "/c.db") == 0)
        #expect(failure { _ = try open("c.db") } == .inUse(path: dir + "/c.db"))
        // A symbolic link is no state file (the command line resolves it first).
        try FileManager.default.createSymbolicLink(atPath: dir + "/b.db", withDestinationPath: first.path)
        #expect(failure { _ = try open("b.db") } == .notRegularFile(path: dir + "/b.db"))
    }

    @Test func usageRefusesANewerSchemaAndDamage() throws {
        do {
            let store = try open()
            try store.save(
                [saved("tun0", rx: 1, last: 1)],
                usage: [
                    SeriesKey(name: "tun0"): UsageEntry(
                        kind: .tunnel, counters: Counters(rxBytes: 5, txBytes: 5, rxPackets: 1, txPackets: 1), quality: .exact)
                ],
                wallTime: noon)
        }
        #expect(try StateStore.usage(path: dir + "/state.db", granularity: .day).count == 1)
        let sides = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0 != "state.db" }
        #expect(sides.isEmpty, "reading usage leaves no side files: \(sides)")
        try FileManager.default.copyItem(atPath: dir + "/state.db", toPath: dir + "/newer.db")
        try sqlite(dir + "/newer.db", "UPDATE meta SET value = '99' WHERE key = 'schema_version';")
        #expect(
            failure { _ = try StateStore.usage(path: dir + "/newer.db", granularity: .day) }
                == .newerSchema(path: dir + "/newer.db", version: 99, known: StateStore.schemaVersion))
        #expect(failure { _ = try StateStore.usage(path: dir, granularity: .day) } == .notRegularFile(path: dir))
    }

    @Test func aStartThatFailsRemovesTheFileItCreated() throws {
        // A planted link where SQLite's shared-memory file goes.
        try FileManager.default.createSymbolicLink(atPath: dir + "/state.db-shm", withDestinationPath: dir + "/elsewhere")
        #expect(failure { _ = try open() } != nil)
        let left = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(left == ["state.db-shm"], "nothing made by the failed start stays: \(left)")
    }

    @Test func storedNamesKeepTheirNamespace() {
        #expect(StateStore.key("eth0") == SeriesKey(name: "eth0"))
        #expect(StateStore.key("ctr-1/eth0") == SeriesKey(netns: "ctr-1", name: "eth0"))
    }

    func sqlite(_ path: String, _ statement: String) throws {
        try run(["sqlite3", path, statement])
    }
}
