import IfmeterCore
import IfmeterStore
import IfmeterSystem

/// Where saved totals go: the state file, or in tests a store that fails
/// when told to.
public protocol StateSaving: AnyObject {
    /// What the store held when it was opened.
    var restored: [DeltaEngine.SavedSeries] { get }
    /// The store was written during this boot: the kernel counters went on.
    var sameBoot: Bool { get }
    /// What reports say of the state.
    var info: StateInfo { get }
    /// Saves every series and adds `usage` to the usage tables, in one
    /// transaction.
    func save(_ saved: [DeltaEngine.SavedSeries], usage: [SeriesKey: UsageEntry], wallTime: Double) throws(StoreError)
    /// The last writer did not stop cleanly: what it counted after its last
    /// save is missing, except what the kernel's counters show.
    var uncleanStop: Bool { get }
    /// Unix time of the last save before this start, when known.
    var lastSaved: Double? { get }
    /// Records a clean stop, after the last save.
    func markStopped(wallTime: Double) throws(StoreError)
    /// The start failed: remove what this start created.
    func abandon()
}

extension StateSaving {
    public var uncleanStop: Bool { false }
    public var lastSaved: Double? { nil }
    public func markStopped(wallTime: Double) throws(StoreError) {}
    public func abandon() {}
}

extension StateStore: StateSaving {
    public var info: StateInfo {
        StateInfo(path: path, since: since, restored: restoresTotals, sameBoot: sameBoot)
    }
}

/// The state of persistence, as updates carry it.
public struct PersistenceStatus: Sendable {
    public var info: StateInfo
    public var saves: Int
    /// The last save's failure; nil once a save works again.
    public var lastError: StoreError?
}

/// A state file in use: restores the engine, then saves its totals, and
/// the traffic since the last save into the usage tables, at a slow pace.
/// Traffic of a failed save is kept for the next one: nothing counted is
/// dropped. Used from the pipeline's thread.
public final class StatePersistence {
    public let store: any StateSaving
    /// Seconds between saves.
    public let every: Double
    private var usage = PeriodAccumulator()
    /// The same traffic per local hour (what the usage tables get).
    private var hourly = HourlyUsage()
    private var lastSave: Double?
    /// The first sample was looked at (after an unclean stop).
    private var reviewed = false
    public private(set) var saves = 0
    public private(set) var lastError: StoreError?

    /// `zone`: where hours begin (the local time zone; tests pass one).
    public init(store: any StateSaving, every: Double, zone: LocalZone = .system) {
        self.store = store
        self.every = every
        hourly = HourlyUsage(zone: zone)
    }

    public var status: PersistenceStatus { PersistenceStatus(info: store.info, saves: saves, lastError: lastError) }

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

    /// Saves when a save is due (`every` after the last, or at once when
    /// forced); returns whether it tried.
    @discardableResult
    func saveIfDue(_ engine: DeltaEngine, at time: Double, wallTime: Double, force: Bool) -> Bool {
        guard let last = lastSave else {
            // The first sample is saved at once: from then on a kill -9
            // loses nothing the counters can show (a failed save is tried
            // again `every` later).
            lastSave = time
            return save(engine, at: time, wallTime: wallTime)
        }
        guard force || time - last >= every else { return false }
        return save(engine, at: time, wallTime: wallTime)
    }

    /// The last save, then the mark of a clean stop (only when that save
    /// worked: otherwise the next start must not trust the file's end).
    func finish(_ engine: DeltaEngine, at time: Double, wallTime: Double) {
        saveIfDue(engine, at: time, wallTime: wallTime, force: true)
        guard lastError == nil else { return }
        do {
            try store.markStopped(wallTime: wallTime)
        } catch {
            lastError = error
        }
    }

    /// The start failed after the store was opened.
    public func abandon() { store.abandon() }

    private func save(_ engine: DeltaEngine, at time: Double, wallTime: Double) -> Bool {
        let taken = usage.take()
        let takenHours = hourly.take()
        var rows = taken.mapValues { UsageEntry(kind: $0.classification.kind, counters: $0.counters, quality: $0.quality) }
        for (key, hours) in takenHours { rows[key]?.hours = hours }
        do {
            try store.save(engine.saved, usage: rows, wallTime: wallTime)
            lastSave = time
            saves += 1
            lastError = nil
        } catch {
            // Kept for the next save.
            usage.putBack(taken)
            hourly.putBack(takenHours)
            lastError = error
        }
        return true
    }
}

/// Persistent totals for a pipeline (`--state`).
public struct StateOptions: Sendable {
    public var path: String
    public var host: String
    /// Where the boot id is read (tests point it at a file of their own).
    public var bootIDFile: String
    /// Seconds between saves.
    public var saveEvery: Double

    /// `--save-every`'s default: 5 minutes (issue 23's write budget: at
    /// most 1 MiB an hour with 3 idle interfaces). A restart within a boot
    /// loses nothing at any pace (the kernel's counters hold the traffic
    /// since the last save); the pace is what a power cut or a reboot can
    /// lose, which is then counted as a lower bound.
    public static let defaultSaveEvery: Double = 300

    public init(
        path: String, host: String, bootIDFile: String = "/proc/sys/kernel/random/boot_id", saveEvery: Double = StateOptions.defaultSaveEvery
    ) {
        self.path = path
        self.host = host
        self.bootIDFile = bootIDFile
        self.saveEvery = saveEvery
    }

    /// Opens the state file, or says why not.
    public func open(wallTime: Double) throws(StoreError) -> StatePersistence {
        guard let bootID = readBootID(bootIDFile) else { throw .noBootID(file: bootIDFile) }
        let store = try StateStore(path: path, host: host, bootID: bootID, now: wallTime, saveEvery: saveEvery)
        return StatePersistence(store: store, every: saveEvery)
    }
}
