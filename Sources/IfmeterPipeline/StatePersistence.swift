import IfmeterCore
import IfmeterStore
import IfmeterSystem

/// Where saved totals go: the state file, or in tests a store that fails
/// when told to.
package protocol StateSaving: AnyObject {
    /// What the store held when it was opened.
    var restored: [DeltaEngine.SavedSeries] { get }
    /// The store was written during this boot: the kernel counters went on.
    var sameBoot: Bool { get }
    /// What reports say of the state.
    var info: StateInfo { get }
    /// Saves every series and adds `usage` to the usage tables, in one
    /// transaction; a save that is not `full` may skip rows that did not
    /// change.
    func save(_ saved: [DeltaEngine.SavedSeries], usage: [SeriesKey: UsageEntry], wallTime: Double, full: Bool) throws(StoreError)
    /// The same, and each tunnel's outside estimate, in the same transaction.
    func save(
        _ saved: [DeltaEngine.SavedSeries], usage: [SeriesKey: UsageEntry], outside: [OutsideTotal], wallTime: Double, full: Bool
    ) throws(StoreError)
    /// Each tunnel's outside estimate as the store held it when opened.
    var restoredOutside: [OutsideTotal] { get }
    /// The last writer did not stop cleanly: what it counted after its last
    /// save is missing, except what the kernel's counters show.
    var uncleanStop: Bool { get }
    /// Unix time of the last save before this start, when known.
    var lastSaved: Double? { get }
    /// Records a clean stop, after the last save.
    func markStopped(wallTime: Double) throws(StoreError)
    /// The start failed: remove what this start created.
    func abandon()
    /// Changes `ifmeter state` asked for while this writes the file.
    func pendingChanges() throws(StoreError) -> [(id: Int64, change: StateChange)]
    /// Applies one (its rows; the request goes with it).
    func apply(_ change: StateChange, id: Int64) throws(StoreError)
    /// How long usage is kept by the hour and the day, from the next save.
    func setRetention(_ retention: Retention)
    /// Whether the path still names the file being written.
    func standing() -> StatePathStanding
    /// The file written anew at its path (it was deleted or replaced), and
    /// where what was there went.
    func rewritten(now: Double) throws(StoreError) -> (store: any StateSaving, movedAside: String?)
}

extension StateSaving {
    /// A store that keeps no outside estimate saves the rest.
    package func save(
        _ saved: [DeltaEngine.SavedSeries], usage: [SeriesKey: UsageEntry], outside: [OutsideTotal], wallTime: Double, full: Bool
    ) throws(StoreError) {
        try save(saved, usage: usage, wallTime: wallTime, full: full)
    }
    package var restoredOutside: [OutsideTotal] { [] }
    package var uncleanStop: Bool { false }
    package var lastSaved: Double? { nil }
    package func markStopped(wallTime: Double) throws(StoreError) {}
    package func abandon() {}
    package func standing() -> StatePathStanding { .same }
    package func setRetention(_ retention: Retention) {}
    package func pendingChanges() throws(StoreError) -> [(id: Int64, change: StateChange)] { [] }
    package func apply(_ change: StateChange, id: Int64) throws(StoreError) {}
    package func rewritten(now: Double) throws(StoreError) -> (store: any StateSaving, movedAside: String?) { (self, nil) }
}

extension StateStore: StateSaving {
    package var info: StateInfo {
        StateInfo(path: path, since: since, restored: restoresTotals, sameBoot: sameBoot)
    }

    package func rewritten(now: Double) throws(StoreError) -> (store: any StateSaving, movedAside: String?) {
        let (store, aside) = try recreated(now: now)
        return (store, aside)
    }

    package func setRetention(_ retention: Retention) { self.retention = retention }

    package func save(
        _ saved: [DeltaEngine.SavedSeries], usage: [SeriesKey: UsageEntry], outside: [OutsideTotal], wallTime: Double, full: Bool
    ) throws(StoreError) {
        try save(saved, usage: usage, outside: Optional(outside), wallTime: wallTime, full: full)
    }
}

/// Something that happened to the state file that the log should say.
package enum PersistenceNotice: Sendable, Hashable {
    /// The file was deleted (or its folder) under the writer and written
    /// anew at its path.
    case recreated(path: String)
    /// Another file was put at the path: moved aside to `aside`, and the
    /// writer's written anew.
    case replaced(path: String, aside: String)
    /// `ifmeter state` changed the history; applied.
    case changed(StateChange)
}

/// The state of persistence, as updates carry it.
package struct PersistenceStatus: Sendable {
    package var info: StateInfo
    package var saves: Int
    /// The last save's failure; nil once a save works again.
    package var lastError: StoreError?
    /// Saves, failures and the last good save, as metrics say them.
    package var health: StateHealth
    /// What happened to the file since the last update (each said once).
    package var notices: [PersistenceNotice] = []
    /// The sample time (monotonic) the last save that worked holds
    /// everything up to: a save at SIGHUP, between samples, holds the
    /// sample before.
    package var savedThrough: Double?
}

/// A state file in use: restores the engine, then saves its totals, and
/// the traffic since the last save into the usage tables, at a slow pace.
/// Traffic of a failed save is kept for the next one: nothing counted is
/// dropped. Used from the pipeline's thread.
package final class StatePersistence {
    /// The store saved to: another one after the file was written anew.
    package private(set) var store: any StateSaving
    /// Seconds between saves.
    package let every: Double
    /// After a failed save, the next try comes this long after (or at the
    /// next due save, when sooner): a full disk is not hammered every
    /// sample, and a save that can work again does within half a minute.
    package var retryEvery: Double {
        didSet { health.retryEvery = retryEvery }
    }
    private var retryAt: Double?
    package private(set) var health: StateHealth
    private var notices: [PersistenceNotice] = []
    private var savedThrough: Double?
    private var usage = PeriodAccumulator()
    /// The same traffic per local hour (what the usage tables get).
    private var hourly = HourlyUsage()
    private var lastSave: Double?
    private let zone: LocalZone
    /// The local day of the last save that worked: a save is due when the
    /// day changes, so what a cycle ending at midnight holds is on disk as
    /// it ends (plan gauges then read the new cycle from the file).
    private var lastSaveDay: Int64?
    /// The first sample was looked at (after an unclean stop).
    private var reviewed = false
    package private(set) var saves = 0
    package private(set) var lastError: StoreError?
    /// Each tunnel's outside estimate (`--probe`'s route feed continues
    /// from it and keeps it here each sample): what the file held at the
    /// start, saved with the totals, so `ifmeter_tunnel_outside_bytes_total`
    /// goes on across restarts (and across a route feed a reload replaced).
    package var outside: [OutsideTotal]
    /// What was counted since the last save that worked, for readers
    /// that show current figures (serve's usage tables).
    package let unsaved = UnsavedUsage()

    /// `zone`: where hours begin (the local time zone; tests pass one).
    package init(store: any StateSaving, every: Double, zone: LocalZone = .system) {
        self.store = store
        self.every = every
        self.zone = zone
        retryEvery = min(every, 30)
        health = StateHealth(saveEvery: every, retryEvery: min(every, 30))
        hourly = HourlyUsage(zone: zone)
        outside = store.restoredOutside
    }

    package var status: PersistenceStatus {
        PersistenceStatus(info: store.info, saves: saves, lastError: lastError, health: health, notices: notices, savedThrough: savedThrough)
    }

    /// A failing save is tried at the next chance (SIGHUP: an operator
    /// who freed space says so).
    func retryNow() { retryAt = nil }

    /// The notices of the last update are said: the next starts empty.
    func noticesSaid() { notices.removeAll() }

    /// Continues `engine` from what the store held.
    func restore(into engine: inout DeltaEngine, now: Double) {
        engine.restore(store.restored, sameBoot: store.sameBoot, now: now)
    }

    /// Adds a sample's deltas to the traffic not yet saved (baselines
    /// count nothing). After the first sample following an unclean stop,
    /// what the counters cannot vouch for becomes a lower bound: saved
    /// interfaces now gone (their traffic after the last save is unknown)
    /// and interfaces new to the file (the dead process may have counted
    /// some of theirs). Saved interfaces still there continue from their
    /// saved counters: within one boot they lose nothing.
    func record(_ deltas: [InterfaceDelta], engine: inout DeltaEngine, sample: Sample, sampleTime: Double, wallTime: Double) {
        usage.add(deltas)
        hourly.add(deltas, sampleTime: sampleTime, wallTime: wallTime)
        defer { publishUnsaved() }
        guard !reviewed else { return }
        reviewed = true
        guard store.uncleanStop else { return }
        // From the sample, not the deltas: serve and export publish no
        // idle ones, and a new interface's baseline is idle.
        let known = Set(store.restored.map(\.totals.key))
        var suspects = sample.interfaces.map(\.key).filter { !known.contains($0) }
        for item in store.restored where item.last != nil {
            if let totals = engine.totals(for: item.totals.key), !totals.present { suspects.append(totals.key) }
        }
        for key in suspects {
            guard let classification = engine.totals(for: key)?.classification else { continue }
            engine.markLowerBound(key)
            usage.markLowerBound(key, classification: classification)
            // The traffic lost was counted after the last save, before the
            // kill: the hour of that save is marked, and the restart's.
            if let saved = store.lastSaved { hourly.markLowerBound(key, at: saved) }
            hourly.markLowerBound(key, at: wallTime)
        }
    }

    /// Saves when a save is due: `every` after the last, at once when
    /// `force`d (SIGHUP, the end), and after a `deletion` (whose final
    /// counters exist nowhere else) at most once per `deletionGap`: a storm
    /// of deletions costs one save a minute, not one a sample. Returns
    /// whether it tried.
    @discardableResult
    func saveIfDue(_ engine: DeltaEngine, at time: Double, wallTime: Double, force: Bool = false, deletion: Bool = false) -> Bool {
        if deletion { deletionPending = true }
        guard let last = lastSave else {
            // The first sample is saved at once: from then on a kill -9
            // loses nothing the counters can show (a failed save is tried
            // again `every` later).
            lastSave = time
            return save(engine, at: time, wallTime: wallTime, full: true)
        }
        let regular = time - last >= every || (lastSaveDay.map { $0 != localDay(wallTime) } ?? false)
        if lastError != nil, let retryAt {
            // Failing: the next try is at `retryAt`, forced or not.
            guard time >= retryAt else { return false }
        } else {
            // The first deletion after a quiet minute is saved at once (a
            // kill right after it loses nothing); those after it wait.
            let deletionDue = deletionPending && time - (lastDeletionSave ?? -Double.infinity) >= deletionGap
            guard force || regular || deletionDue else { return false }
        }
        // A deletion's save writes the rows that changed; the others all.
        let full = force || regular || lastError != nil
        if !full { lastDeletionSave = time }
        return save(engine, at: time, wallTime: wallTime, full: full)
    }

    /// Days since 1970-01-01 of `wallTime`'s local date.
    private func localDay(_ wallTime: Double) -> Int64 {
        let c = zone.civil(Int64(wallTime.rounded(.down)))
        return LocalZone.days(c.year, c.month, c.day)
    }

    /// Applies what `ifmeter state` asked for since the last sample: first
    /// a save (what was counted is then all in the file), then each change
    /// in its own transaction, and the name whose history went starts its
    /// totals again (present: from its last counters, exact; gone:
    /// forgotten). A
    /// failed save leaves the requests for a later sample.
    func applyChanges(_ engine: inout DeltaEngine, at time: Double, wallTime: Double) {
        guard let changes = try? store.pendingChanges(), !changes.isEmpty else { return }
        _ = save(engine, at: time, wallTime: wallTime, full: true)
        guard lastError == nil else { return }
        for (id, change) in changes {
            do throws(StoreError) {
                try store.apply(change, id: id)
            } catch {
                lastError = error
                return
            }
            engine.restart(StateStore.key(change.source))
            notices.append(.changed(change))
        }
        // The rows the engine no longer keeps go at this save.
        _ = save(engine, at: time, wallTime: wallTime, full: true)
    }

    /// The least time between two saves forced by deletions (60 s:
    /// at 2 veth pairs created and deleted a second, 1.4 MiB an hour; one
    /// per deletion wrote 171 MiB). A kill -9 within it loses what the
    /// deleted interfaces counted since the last save, and says so: their
    /// totals are lower bounds at the next start. The first deletion after
    /// a quiet minute is saved at once.
    package var deletionGap: Double = 60
    private var deletionPending = false
    private var lastDeletionSave: Double?

    /// The last save, then the mark of a clean stop (only when that save
    /// worked: otherwise the next start must not trust the file's end).
    func finish(_ engine: DeltaEngine, at time: Double, wallTime: Double) {
        retryAt = nil
        saveIfDue(engine, at: time, wallTime: wallTime, force: true)
        guard lastError == nil else { return }
        do {
            try store.markStopped(wallTime: wallTime)
        } catch {
            lastError = error
        }
    }

    /// The start failed after the store was opened.
    package func abandon() { store.abandon() }

    /// How long usage is kept by the hour and the day (a reload changed
    /// `--keep-hours` or `--keep-days`): applied at the next save.
    package func setRetention(_ retention: Retention) { store.setRetention(retention) }

    /// The file is still at its path, or written there anew (what was
    /// put in its place moved aside): a save into a deleted file keeps
    /// nothing.
    private func checkPath(wallTime: Double) throws(StoreError) {
        let standing = store.standing()
        guard standing != .same else { return }
        if case .unknown(let error) = standing { throw StoreError.system(path: store.info.path, error) }
        let (fresh, aside) = try store.rewritten(now: wallTime)
        store = fresh
        health.recreations += 1
        notices.append(aside.map { .replaced(path: store.info.path, aside: $0) } ?? .recreated(path: store.info.path))
    }

    /// `unsaved`, as of now.
    private func publishUnsaved() {
        unsaved.publish(hours: hourly.hours, kinds: usage.entries.mapValues(\.classification.kind))
    }

    private func save(_ engine: DeltaEngine, at time: Double, wallTime: Double, full: Bool) -> Bool {
        defer { publishUnsaved() }
        let taken = usage.take()
        let takenHours = hourly.take()
        var rows = taken.mapValues { UsageEntry(kind: $0.classification.kind, counters: $0.counters, quality: $0.quality) }
        for (key, hours) in takenHours { rows[key]?.hours = hours }
        do throws(StoreError) {
            try checkPath(wallTime: wallTime)
            try store.save(engine.saved, usage: rows, outside: outside, wallTime: wallTime, full: full)
            lastSave = time
            savedThrough = time
            lastSaveDay = localDay(wallTime)
            deletionPending = false
            saves += 1
            lastError = nil
            retryAt = nil
            health.saves += 1
            health.lastSaveTime = wallTime
            health.failing = false
        } catch {
            // Kept for the next save.
            usage.putBack(taken)
            hourly.putBack(takenHours)
            lastError = error
            retryAt = time + retryEvery
            health.failures += 1
            health.failing = true
        }
        return true
    }
}

/// Persistent totals for a pipeline (`--state`).
package struct StateOptions: Sendable {
    package var path: String
    package var host: String
    /// Where the boot id is read (tests point it at a file of their own).
    package var bootIDFile: String
    /// Seconds between saves.
    package var saveEvery: Double
    /// How long usage is kept by the hour and by the day (`--keep-hours`,
    /// `--keep-days`).
    package var retention = Retention.defaults

    /// `--save-every`'s default: 5 minutes (issue 23's write budget: at
    /// most 1 MiB an hour with 3 idle interfaces). A restart within a boot
    /// loses nothing at any pace (the kernel's counters hold the traffic
    /// since the last save); the pace is what a power cut or a reboot can
    /// lose, which is then counted as a lower bound.
    package static let defaultSaveEvery: Double = 300

    package init(
        path: String, host: String, bootIDFile: String = "/proc/sys/kernel/random/boot_id", saveEvery: Double = StateOptions.defaultSaveEvery
    ) {
        self.path = path
        self.host = host
        self.bootIDFile = bootIDFile
        self.saveEvery = saveEvery
    }

    /// Opens the state file, or says why not.
    package func open(wallTime: Double) throws(StoreError) -> StatePersistence {
        guard let bootID = readBootID(bootIDFile) else { throw .noBootID(file: bootIDFile) }
        let store = try StateStore(path: path, host: host, bootID: bootID, now: wallTime, saveEvery: saveEvery)
        store.retention = retention
        return StatePersistence(store: store, every: saveEvery)
    }
}
