import CSQLite
import IfmeterCore
import IfmeterSystem

/// Whether a state file's path still names the file its writer writes.
package enum StatePathStanding: Sendable, Hashable {
    case same
    /// Nothing is there (the file or its folder was deleted).
    case missing
    /// Another file is there (this kind): the writer's was moved or
    /// deleted and something else put in its place.
    case replaced(FileStatus.Kind)
    /// lstat failed otherwise.
    case unknown(SystemError)
}

/// Totals that survive restarts and reboots, usage per local hour and plans,
/// in one SQLite file (WAL mode).
///
/// Per interface it keeps the totals, the quality and events, and the last
/// counters seen with their index; with them the kernel's boot id. On start,
/// the same boot and the same index mean the counters went on while ifmeter
/// was stopped, so that traffic is added and nothing is lost; a new boot or a
/// new index means the downtime's traffic is unknown, and those totals become
/// lower bounds (the delta engine applies exactly these rules). The meta
/// table's `running` says whether the last writer stopped cleanly; a
/// writer holds flock on the file's inode for as long as it runs.
package final class StateStore {
    /// 4: day rows summed from the hours (`usage_days`, for `usage`'s
    /// tables); month rows are usage (days rolled by `retention`), schema
    /// 1's copies of its days are gone. 5: each tunnel's outside estimate
    /// (`tunnel_outside`), kept across restarts.
    package static let schemaVersion = 5

    package let path: String
    package let host: String
    package let bootID: String
    /// What the file held when it was opened.
    package let restored: [DeltaEngine.SavedSeries]
    /// Each tunnel's outside estimate as the file held it when opened.
    package let restoredOutside: [OutsideTotal]
    /// The file was written during this boot: the counters went on.
    package let sameBoot: Bool
    /// Unix time the state began (its totals count from then).
    package let since: Double
    /// The file was created now.
    package let isNew: Bool
    /// The ifmeter that wrote the file last did not stop cleanly (kill -9,
    /// a crash, power): what it counted after its last save is gone, except
    /// what the kernel's counters still show.
    package let uncleanStop: Bool
    /// Unix time of the last save before this start (nil for a new file,
    /// and for one that only `plan` wrote: no sampler saved there yet).
    package let lastSaved: Double?
    /// A sampler (serve, live, export) saved totals here before this start:
    /// they are restored. False for a new file, and for one only `plan`
    /// wrote.
    package var restoresTotals: Bool { lastSaved != nil || !restored.isEmpty }
    /// Opened by a sampler, which marks the file as being written until a
    /// clean stop; `plan` opens it as an editor and leaves that mark alone.
    package let role: Role

    /// Who opens the file for writing.
    package enum Role: Sendable {
        /// serve, live, export: saves totals and usage until it stops.
        case sampler
        /// `plan set` and `plan remove`: change the plans and go.
        case editor
    }

    let database: Database
    private let upsertInterface: Statement
    private let removeInterface: Statement
    private let addUsage: Statement
    private let setMeta: Statement
    let upsertOutside: Statement
    /// Each outside total as this store last wrote (or read) it: a save
    /// rewrites only those whose figures changed.
    var writtenOutside: [OutsideTotal.Key: OutsideTotal] = [:]
    /// This boot's id is in the file (written by the first save that
    /// worked; a save after that leaves its row alone).
    private var bootIDSaved = false
    /// Each row in the file as this store last wrote (or read) it, without
    /// its times: a save rewrites only the rows whose content changed
    /// (`full` saves write all), and removes those of interfaces the
    /// engine forgot. Keeps churn within the write budget (issue 29,
    /// finding 8).
    var written: [String: Int] = [:]
    /// SQLite's data_version when the requests were last looked at.
    var lastDataVersion: Int64 = -1
    /// The side files that did not exist before this start (removed with
    /// the file when the start fails).
    private let createdFiles: [String]

    /// The file this store writes (device and inode), to notice one
    /// deleted or replaced under it (`standing`).
    private let identity: (device: UInt64, inode: UInt64)
    /// What the store was opened with, to open the file written anew.
    private let saveEvery: Double?

    /// How long each granularity is kept: applied at each save (writers
    /// set it; `keepAll` until then).
    package var retention = Retention.keepAll
    /// Where local days and months begin, for `retention` (tests inject
    /// one).
    package var zone: LocalZone = .system
    /// The boundaries the last saved roll rolled before: the next roll
    /// comes when one moves (once a local day) or `retention` changes.
    var rolled: RollMark?

    /// SQLite's side files of a database.
    static let sideSuffixes = ["-wal", "-shm", "-journal"]

    /// Opens (or creates) the state file. Refuses, never overwriting, a file
    /// that is not ifmeter state, is corrupt, comes from a newer ifmeter or
    /// from another host, or is in use by another ifmeter (under any name:
    /// the lock is on the file itself), and a symbolic link (callers
    /// resolve one given on the command line first). When the start fails,
    /// a file it created is removed.
    ///
    /// `role`: a sampler marks the file as being written (`running`) until
    /// `markStopped`, and says how often it saves (`saveEvery`, seconds),
    /// so that a reader can tell a writer that stopped saving; an editor
    /// changes neither, so a plan set before the first sample makes no
    /// later start look like one after a kill.
    package init(
        path: String, host: String, bootID: String, now: Double, role: Role = .sampler, saveEvery: Double? = nil
    ) throws(StoreError) {
        self.path = path
        self.role = role
        self.host = host
        self.bootID = bootID
        let folder = SafeFile.folder(of: path)
        guard FileStatus(folder, followingLinks: true)?.kind == .directory else {
            throw StoreError.noFolder(path: path, folder: folder)
        }
        let (lock, created) = try Self.openLocked(path, role: role)
        // An editor beside a running sampler holds no lock: side files it
        // finds missing may be the sampler's to make, never its own to remove.
        let locked = FileLock.holdsExclusive(lock)
        var newFiles = created ? [path] : []
        for suffix in Self.sideSuffixes {
            // SQLite opens its side files with O_NOFOLLOW; say why a planted
            // link or FIFO there stops the start, before SQLite says less.
            guard let side = FileStatus(path + suffix) else {
                if locked { newFiles.append(path + suffix) }
                continue
            }
            if side.kind != .regular {
                removeRegularFiles(created ? [path] : [])
                FileLock.release(lock)
                throw StoreError.notRegularFile(path: path + suffix)
            }
        }
        let opened = FileStatus(descriptor: lock)
        var existed = (opened?.size ?? 0) > 0

        let db: Database
        var meta: [String: String] = [:]
        do throws(StoreError) {
            do {
                // From here the database owns the lock.
                db = try Database(path: path, readOnly: false, lockDescriptor: lock)
            } catch {
                FileLock.release(lock)
                throw error
            }
            // A file a first start left blank (killed before its schema was
            // committed: empty, or a SQLite header alone) holds nothing:
            // it is made now, not refused at every start after.
            if existed, Self.isSQLiteOrEmpty(lock), Self.isBlank(db) { existed = false }
            if existed {
                try Self.check(db, path: path, host: host)
            }
            // WAL: a save appends only the pages it changed (a rollback
            // journal writes each twice, and syncs three times). FULL: each
            // commit is synced, so a power cut loses at most the traffic
            // since the last save (at the default pace a sync every 5 min).
            try db.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;")
            if existed {
                try Self.dropCopiedMonths(db)
                try Self.migrate(db)
            }
            if !existed {
                try db.transaction { () throws(StoreError) in
                    try db.execute(Self.schema)
                    let meta = try db.prepare("INSERT INTO meta(key, value) VALUES (?, ?)")
                    for (key, value) in [
                        ("schema_version", String(Self.schemaVersion)), ("host", host), ("created", String(now)),
                        ("boot_id", bootID),
                    ] {
                        try meta.run([.text(key), .text(value)])
                    }
                }
            }
            try db.prepare("SELECT key, value FROM meta").query { row throws(StoreError) in
                if let key = row.text(0), let value = row.text(1) { meta[key] = value }
            }
            // Read (and checked) before the file is marked as being
            // written: a file refused for a bad row keeps its marks as they
            // were.
            restored = try Self.loadSeries(db)
            restoredOutside = try Self.loadOutside(db)
            if existed { try Self.checkRows(db) }
            let set = try db.prepare(Self.setMetaSQL)
            if role == .sampler {
                // Running from now: a clean stop says so (`markStopped`).
                try db.transaction { () throws(StoreError) in
                    try set.run([.text("running"), .text("1")])
                    try set.run([.text("started"), .text(String(now))])
                    try set.run([.text("save_every"), .text(saveEvery.map { String($0) } ?? "")])
                    // The totals count from the first sampler's start (a
                    // file `plan` made earlier has counted nothing yet).
                    if meta["saved"] == nil, meta["totals_since"] == nil { try set.run([.text("totals_since"), .text(String(now))]) }
                }
                if meta["saved"] == nil, meta["totals_since"] == nil { meta["totals_since"] = String(now) }
            }
            setMeta = set
            upsertInterface = try db.prepare(Self.upsertSQL)
            removeInterface = try db.prepare("DELETE FROM interfaces WHERE name = ?")
            addUsage = try db.prepare(Self.usageSQL)
            upsertOutside = try db.prepare(Self.outsideSQL)
        } catch {
            // What this start made goes with it.
            Self.remove(newFiles)
            throw error
        }
        database = db
        createdFiles = newFiles
        // Rows read back count as unwritten: the first save writes them.
        for item in restored { written[item.totals.key.description] = 0 }
        writtenOutside = Dictionary(restoredOutside.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        identity = (opened?.device ?? 0, opened?.inode ?? 0)
        self.saveEvery = saveEvery
        isNew = !existed
        since = (meta["totals_since"] ?? meta["created"]).flatMap(Double.init) ?? now
        sameBoot = meta["boot_id"] == bootID
        uncleanStop = existed && meta["running"] == "1"
        lastSaved = existed ? meta["saved"].flatMap(Double.init) : nil
    }

    /// Opens `path` without following a link, creating it when missing, and
    /// takes ifmeter's lock on the file itself (flock on its inode, so a
    /// link or another name of the same file finds it taken). Readers
    /// (`usage`) hold a shared lock for a moment: a writer waits a second
    /// for them. Checks after locking that the path still names the file.
    ///
    /// An editor (`plan set`) of a file a sampler holds opens it without
    /// the lock: its change is one SQLite transaction, which SQLite's own
    /// locking keeps apart from the sampler's saves (neither writes the
    /// other's tables), and the sampler reads it within a sample
    /// (`PlanFeed`).
    static func openLocked(_ path: String, role: Role = .sampler) throws(StoreError) -> (fd: Int32, created: Bool) {
        do throws(FileLock.Failure) {
            return try FileLock.openExclusive(path, waiting: role != .editor)
        } catch {
            switch error {
            case .notRegular: throw StoreError.notRegularFile(path: path)
            case .inUse:
                guard role == .editor else { throw StoreError.inUse(path: path) }
                // Only readers (usage's moment of a shared lock)? Then the
                // lock is waited for, as a sampler waits: a reader takes a
                // file no writer holds for immutable.
                if !FileLock.heldByWriter(path) {
                    do throws(FileLock.Failure) {
                        return try FileLock.openExclusive(path, waiting: true)
                    } catch {
                        if case .notRegular = error { throw StoreError.notRegularFile(path: path) }
                        if case .system(let cause) = error { throw StoreError.system(path: path, cause) }
                        // A sampler took it meanwhile: go on beside it.
                    }
                }
                do throws(SystemError) {
                    return (try FileLock.openUnlocked(path), false)
                } catch {
                    throw StoreError.system(path: path, error)
                }
            case .system(let cause): throw StoreError.system(path: path, cause)
            }
        }
    }

    /// Removes files (a failed start's), never through a link.
    static func remove(_ paths: [String]) { removeRegularFiles(paths) }

    /// Whether the path still names the file this store writes: a save
    /// into a file deleted (or moved away and replaced) under a running
    /// writer would keep nothing anyone can read.
    package func standing() -> StatePathStanding {
        guard let now = FileStatus(path) else {
            if currentErrno() == Errno.noSuchFile || currentErrno() == Errno.notADirectory { return .missing }
            return .unknown(SystemError.system("lstat(\(path))"))
        }
        return now.device == identity.device && now.inode == identity.inode ? .same : .replaced(now.kind)
    }

    /// Writes what this store holds to its path anew (after `standing`
    /// said it is gone or replaced) and returns the store of that file,
    /// locked and marked as being written; this one is then done. What
    /// another hand put at the path is moved aside (`PATH.replaced-TIME`),
    /// never written over or removed. The folder is checked as at start:
    /// one that came back owned by another user is refused.
    package func recreated(now: Double) throws(StoreError) -> (store: StateStore, movedAside: String?) {
        let folder = SafeFile.folder(of: path)
        do throws(SystemError) {
            try OwnFolder.check(folder, followingLinks: true)
        } catch {
            if error.errno == Errno.noSuchFile { throw StoreError.noFolder(path: path, folder: folder) }
            throw StoreError.system(path: path, error)
        }
        var movedAside: String?
        if FileStatus(path) != nil {
            // Another ifmeter's live file (it started on the path after
            // this one's file went): left alone, with its side files; this
            // one keeps what it counts in memory and tries again.
            if FileLock.heldByWriter(path) {
                throw StoreError.system(
                    path: path,
                    SystemError(
                        call: "flock(\(path))", errno: Errno.again,
                        message: "another ifmeter now writes the file at this path; this one keeps what it counts in memory and tries again"))
            }
            let aside = path + ".replaced-" + String(Int64(now.rounded(.down))) + "-" + String(currentProcessIdentifier())
            do throws(SystemError) {
                // link, then unlink: an aside name already there is never replaced.
                try linkPath(path, to: aside)
                try removeFile(path)
            } catch {
                throw StoreError.system(path: path, error)
            }
            movedAside = aside
        }
        // Written beside the path, then renamed onto it: a reader never
        // sees half a file. O_EXCL and 0600: nothing planted is written
        // through.
        let fresh: String
        do throws(SystemError) {
            let made = try SafeFile.createTemporary(for: path, mode: 0o600)
            _ = closeDescriptor(made.fd)
            fresh = made.path
        } catch {
            throw StoreError.system(path: path, error)
        }
        do throws(StoreError) {
            // SQLite reads a file moved or deleted under it (its WAL
            // included), and writes it no more.
            try database.prepare("VACUUM INTO ?").run([.text(fresh)])
            // The permissions the file had (a group that reads it keeps
            // reading it).
            if let lock = database.lockDescriptor, let mode = FileStatus(descriptor: lock)?.permissions {
                try? setPermissions(fresh, mode)
            }
        } catch {
            removeRegularFiles([fresh])
            throw error
        }
        // The old file's WAL and its index keep their names: the new file's
        // connection would open them as its own. This connection keeps
        // them open, and cannot checkpoint a moved file, so never removes
        // the new file's.
        removeRegularFiles([path + "-wal", path + "-shm"])
        let freshStatus = FileStatus(fresh)
        do throws(SystemError) {
            // link, then unlink: a file put at the path meanwhile is never
            // replaced (the save fails, and is tried again).
            try linkPath(fresh, to: path)
        } catch {
            removeRegularFiles([fresh])
            throw StoreError.system(path: path, error)
        }
        removeRegularFiles([fresh])
        do {
            let store = try StateStore(path: path, host: host, bootID: bootID, now: now, role: role, saveEvery: saveEvery)
            store.retention = retention
            store.zone = zone
            return (store, movedAside)
        } catch {
            // The copy put at the path goes again (this store still holds
            // everything): the next try is no "other file" to move aside.
            if let made = freshStatus, let there = FileStatus(path), made.inode == there.inode, made.device == there.device {
                removeRegularFiles([path])
            }
            throw error
        }
    }

    /// Records a clean stop (after the last save): the next start knows
    /// that nothing counted is missing.
    package func markStopped(wallTime: Double) throws(StoreError) {
        try database.transaction { () throws(StoreError) in
            try setMeta.run([.text("running"), .text("0")])
            try setMeta.run([.text("stopped"), .text(String(wallTime))])
        }
    }

    /// A start that failed after the file was opened (serve could not
    /// listen): a file this start created is removed; one that existed is
    /// left as it was, marked stopped.
    package func abandon() {
        if isNew {
            Self.remove(createdFiles)
        } else if !uncleanStop {
            try? database.transaction { () throws(StoreError) in try setMeta.run([.text("running"), .text("0")]) }
        }
    }

    static let counterColumns = CounterKey.allCases.map(\.jsonKey)

    static var schema: String {
        let last = counterColumns.map { "last_\($0) INTEGER" }.joined(separator: ", ")
        let totals = counterColumns.map { "total_\($0) INTEGER" }.joined(separator: ", ")
        let base = counterColumns.map { "base_\($0) INTEGER" }.joined(separator: ", ")
        return """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            -- Counters are unsigned 64-bit values stored as their signed bit pattern.
            CREATE TABLE interfaces (
                name TEXT PRIMARY KEY, kind TEXT NOT NULL, evidence TEXT NOT NULL, ifindex INTEGER, width INTEGER NOT NULL,
                speed_bps INTEGER, has_last INTEGER NOT NULL, last_time REAL NOT NULL, \(last), \(totals), \(base),
                quality INTEGER NOT NULL, wraps INTEGER NOT NULL, resets INTEGER NOT NULL, recreations INTEGER NOT NULL,
                deletions INTEGER NOT NULL, first_seen REAL NOT NULL, last_seen REAL NOT NULL, deleted_at REAL);
            -- Daily (YYYY-MM-DD) and monthly (YYYY-MM) usage in local time; quality 0 exact, 1 wrap-corrected, 2 lower bound.
            CREATE TABLE usage (
                name TEXT NOT NULL, granularity TEXT NOT NULL CHECK (granularity IN ('day', 'month')), period TEXT NOT NULL,
                kind TEXT NOT NULL, rx_bytes INTEGER NOT NULL, tx_bytes INTEGER NOT NULL, rx_packets INTEGER NOT NULL,
                tx_packets INTEGER NOT NULL, quality INTEGER NOT NULL, PRIMARY KEY (name, granularity, period));
            \(schemaV2)
            \(schemaV3)
            \(schemaV4)
            \(schemaV5)
            """
    }

    static var upsertSQL: String {
        let columns =
            ["name", "kind", "evidence", "ifindex", "width", "speed_bps", "has_last", "last_time"]
            + counterColumns.map { "last_" + $0 } + counterColumns.map { "total_" + $0 } + counterColumns.map { "base_" + $0 }
            + ["quality", "wraps", "resets", "recreations", "deletions", "first_seen", "last_seen", "deleted_at"]
        let placeholders = columns.map { _ in "?" }.joined(separator: ", ")
        // An update in place: REPLACE deletes the row and inserts it again,
        // which rewrote the name index's page at every save too.
        let updates = columns.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        return "INSERT INTO interfaces (\(columns.joined(separator: ", "))) VALUES (\(placeholders)) ON CONFLICT (name) DO UPDATE SET \(updates)"
    }

    /// A meta value set in place (the key's index page is left alone).
    static let setMetaSQL = "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"

    static let usageSQL = """
        INSERT INTO usage (name, granularity, period, kind, rx_bytes, tx_bytes, rx_packets, tx_packets, quality)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (name, granularity, period) DO UPDATE SET
            kind = excluded.kind,
            rx_bytes = rx_bytes + excluded.rx_bytes, tx_bytes = tx_bytes + excluded.tx_bytes,
            rx_packets = rx_packets + excluded.rx_packets, tx_packets = tx_packets + excluded.tx_packets,
            quality = max(quality, excluded.quality)
        """

    /// SQLite's words for a failure, without the path.
    static func detail(_ error: StoreError) -> String {
        if case .sqlite(_, _, let message) = error { return message }
        return error.description
    }

    /// Refuses what is not ifmeter state of a version it reads, and, when
    /// `host` is given, another host's.
    /// `tables`: check only these tables' pages (those of them the file
    /// has), not the whole file's: `usage` on a five-year file reads its
    /// day rows, and checking 70 MB of hour pages would take longer than
    /// the table (SQLite still refuses a damaged page it reads).
    static func check(_ db: Database, path: String, host: String?, tables: [String]? = nil) throws(StoreError) {
        // Checked when its writer opened it (`Database.isBorrowed`).
        if db.isBorrowed { return }
        var results: [String] = []
        do {
            if let tables {
                var present = Set<String>()
                try db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").query { row throws(StoreError) in
                    if let name = row.text(0) { present.insert(name) }
                }
                for table in tables where present.contains(table) {
                    try db.prepare("PRAGMA quick_check(\(table))").query { row throws(StoreError) in results.append(row.text(0) ?? "") }
                }
            } else {
                try db.prepare("PRAGMA quick_check").query { row throws(StoreError) in results.append(row.text(0) ?? "") }
            }
        } catch {
            throw StoreError.notState(path: path, detail: Self.detail(error))
        }
        if let result = results.first(where: { $0 != "ok" }) {
            throw StoreError.corrupt(path: path, detail: result)
        }
        var meta: [String: String] = [:]
        do {
            try db.prepare("SELECT key, value FROM meta").query { row throws(StoreError) in
                if let key = row.text(0), let value = row.text(1) { meta[key] = value }
            }
        } catch {
            throw StoreError.notState(path: path, detail: "a SQLite file without ifmeter's meta table")
        }
        guard let version = meta["schema_version"].flatMap(Int.init) else {
            throw StoreError.notState(path: path, detail: "no schema version")
        }
        if version > schemaVersion {
            throw StoreError.newerSchema(path: path, version: version, known: schemaVersion)
        }
        if version < 1 {
            throw StoreError.olderSchema(path: path, version: version, known: schemaVersion)
        }
        if let host, let owner = meta["host"], owner != host {
            throw StoreError.otherHost(path: path, owner: owner, host: host)
        }
    }

    /// A stored name: `NAME`, or `NS/NAME` for another namespace's interface
    /// (neither a namespace nor an interface name holds a `/`).
    package static func key(_ stored: String) -> SeriesKey {
        guard let slash = stored.firstIndex(of: "/") else { return SeriesKey(name: stored) }
        return SeriesKey(netns: String(stored[..<slash]), name: String(stored[stored.index(after: slash)...]))
    }

    /// Every interface's saved state. Refuses (as bad data naming the
    /// interface) an index that is not NULL or 0 to 2^31-1, a counter that
    /// is not a 64-bit integer or NULL, a time (last_time, first_seen,
    /// last_seen, deleted_at) that is not a monotonic time within ±1e12 s,
    /// and an event count that is not 0 to 2^32-1: no value a crafted file
    /// holds reaches the engine as one that overflows or spans 10^300 s. A
    /// width other than 32 reads as 64 bits, a quality this version does
    /// not know as a lower bound, a kind it does not know as other.
    static func loadSeries(_ db: Database) throws(StoreError) -> [DeltaEngine.SavedSeries] {
        var series: [DeltaEngine.SavedSeries] = []
        let n = Int32(counterColumns.count)
        try db.prepare("SELECT * FROM interfaces ORDER BY name").query { row throws(StoreError) in
            guard let stored = row.text(0), let kindText = row.text(1), let evidence = row.text(2) else { return }
            let check = RowCheck(row: row, path: db.path, what: "interfaces row \(RowCheck.quoted(stored))")
            let key = Self.key(stored)
            let classification = Classification(kind: InterfaceKind(rawValue: kindText) ?? .other, evidence: evidence)
            let index: Int? =
                row.isNull(3)
                ? nil : Int(try check.integer(3, "ifindex", in: 0...Int64(Int32.max), expected: "an interface index from 0 to 2147483647 or NULL"))
            let width = CounterWidth(rawValue: Int(row.int(4))) ?? .bits64
            let speed = try check.counter(5, "speed_bps")
            let hasLast = row.int(6) != 0
            let lastTime = try check.time(7, "last_time")
            func counters(from column: Int32, _ prefix: String) throws(StoreError) -> Counters {
                var c = Counters()
                for (k, key) in CounterKey.allCases.enumerated() {
                    if let value = try check.counter(column + Int32(k), prefix + key.jsonKey) { c[key] = value }
                }
                return c
            }
            let last = try counters(from: 8, "last_"), totals = try counters(from: 8 + n, "total_"), base = try counters(from: 8 + 2 * n, "base_")
            let q = 8 + 3 * n
            func events(_ i: Int32, _ column: String) throws(StoreError) -> Int {
                Int(try check.integer(i, column, in: 0...Int64(UInt32.max), expected: "a count from 0 to 4294967295"))
            }
            let state = InterfaceTotals(
                name: key.name, netns: key.netns, classification: classification, index: index, width: width,
                speedBps: speed, attributes: nil,
                totals: totals, quality: check.quality(q),
                events: EventCounts(
                    wraps: try events(q + 1, "wraps"), resets: try events(q + 2, "resets"),
                    recreations: try events(q + 3, "recreations"), deletions: try events(q + 4, "deletions")),
                baseline: base, lastKernelStats: nil, firstSeen: try check.time(q + 5, "first_seen"),
                lastSeen: try check.time(q + 6, "last_seen"), present: false, deletedAt: row.isNull(q + 7) ? nil : try check.time(q + 7, "deleted_at")
            )
            let sample =
                hasLast
                ? InterfaceSample(
                    name: key.name, netns: key.netns, index: index, classification: classification, width: width,
                    speedBps: speed, counters: last)
                : nil
            series.append(DeltaEngine.SavedSeries(totals: state, last: sample, lastTime: lastTime))
        }
        return series
    }

    /// Saves every interface's state, adds `usage` (the traffic since the
    /// last save, per interface) to its local hours, and rolls the hours and
    /// days `retention` no longer keeps into days and months, in one
    /// transaction: a kill at any moment leaves the last save whole.
    ///
    /// `saved` is every series the engine keeps: a row of one it no longer
    /// keeps is removed, and so is that of an interface deleted (its final
    /// traffic is in the usage rows this save adds) or gone with nothing
    /// counted (an idle peer of a churned veth pair). The engine keeps
    /// their totals for `--series-lifetime`; a restart forgets them. A
    /// save that is not `full` (one forced by a deletion) rewrites only the
    /// rows whose content changed since they were last written.
    package func save(
        _ saved: [DeltaEngine.SavedSeries], usage: [SeriesKey: UsageEntry], wallTime: Double, full: Bool = true
    ) throws(StoreError) {
        try save(saved, usage: usage, outside: nil, wallTime: wallTime, full: full)
    }

    /// The same, and each tunnel's outside estimate (`outside`; nil leaves
    /// the file's as they are), in the same transaction.
    package func save(
        _ saved: [DeltaEngine.SavedSeries], usage: [SeriesKey: UsageEntry], outside: [OutsideTotal]?, wallTime: Double, full: Bool
    ) throws(StoreError) {
        var nowWritten = written
        var mark = rolled
        try database.transaction { () throws(StoreError) in
            var kept = Set<String>()
            for item in saved {
                let t = item.totals
                let name = t.key.description
                // A deleted interface's row goes at the save that holds its
                // final traffic (in the usage rows, which keep its history);
                // so does that of one gone with nothing counted.
                let idle =
                    t.quality == .exact && CounterKey.allCases.allSatisfy({ (t.totals[$0] ?? 0) == 0 })
                    && t.events.wraps == 0 && t.events.resets == 0 && t.events.recreations == 0
                if !t.present, t.deletedAt != nil || idle { continue }
                kept.insert(name)
                var values: [Statement.Value] = [
                    .text(t.key.description), .text(t.classification.kind.rawValue), .text(t.classification.evidence),
                    t.index.map { .integer(Int64($0)) } ?? .null, .integer(Int64(t.width.rawValue)),
                    t.speedBps.map { .integer(Int64(bitPattern: $0)) } ?? .null, .integer(item.last == nil ? 0 : 1),
                    .real(item.lastTime),
                ]
                for counters in [item.last?.counters ?? Counters(), t.totals, t.baseline] {
                    for key in CounterKey.allCases {
                        values.append(counters[key].map { .integer(Int64(bitPattern: $0)) } ?? .null)
                    }
                }
                values += [
                    .integer(Int64(t.quality.rawValue)), .integer(Int64(t.events.wraps)), .integer(Int64(t.events.resets)),
                    .integer(Int64(t.events.recreations)), .integer(Int64(t.events.deletions)), .real(t.firstSeen),
                    .real(t.lastSeen), t.deletedAt.map { .real($0) } ?? .null,
                ]
                // The content without its times (last_time, last_seen):
                // an idle interface's row changes only by them.
                var hasher = Hasher()
                for (i, value) in values.enumerated() where i != 7 && i != values.count - 2 { hasher.combine(value) }
                let digest = hasher.finalize() | 1
                if !full, nowWritten[name] == digest { continue }
                try upsertInterface.run(values)
                nowWritten[name] = digest
            }
            for name in nowWritten.keys where !kept.contains(name) {
                try removeInterface.run([.text(name)])
                nowWritten[name] = nil
            }
            // What `retention` no longer keeps by the hour or the day, summed
            // into days and months in this same transaction; first, so that
            // the day rows summed from the hours below no longer hold the
            // days rolled (a roll makes them stale: they are summed anew).
            mark = try roll(wallTime: wallTime)
            // Usage goes into local hours (schema 2); the day and month rows
            // of schema 1 are kept as they were and read with them.
            try addHours(usage, wallTime: wallTime, zone: zone)
            if let outside { try saveOutside(outside) }
            if !bootIDSaved {
                try setMeta.run([.text("boot_id"), .text(bootID)])
            }
            try setMeta.run([.text("saved"), .text(String(wallTime))])
        }
        written = nowWritten
        for total in outside ?? [] { writtenOutside[total.key] = total }
        rolled = mark
        bootIDSaved = true
    }

    // MARK: reading usage

    package enum Granularity: String, Sendable {
        case day, month
    }

    package struct UsageRow: Sendable, Hashable {
        package var name: String
        package var kind: InterfaceKind
        package var period: String
        package var counters: Counters
        package var quality: Quality
    }

    /// Usage rows of a state file, by interface then local day or month
    /// (summed from its hours). Read as `reading` reads.
    package static func usage(path: String, granularity: Granularity, zone: LocalZone = .system) throws(StoreError) -> [UsageRow] {
        let calendar = PeriodCalendar(zone: zone)
        let slices = try Self.slices(path: path, zone: zone)
        var rows: [UsageRow] = []
        for (name, mine) in Dictionary(grouping: slices, by: \.name).sorted(by: { $0.key < $1.key }) {
            for p in calendar.group(mine, by: granularity == .day ? .day : .month) {
                rows.append(UsageRow(name: name, kind: mine.last?.kind ?? .other, period: p.period.label, counters: p.counters, quality: p.quality))
            }
        }
        return rows
    }

    /// Opens a state file for reading and hands it to `body`, writing
    /// nothing, side files included. In a process that writes the file
    /// (serve's usage endpoints), `body` gets the writer's own connection:
    /// nothing opens the file again there. Elsewhere, with no ifmeter writing the file,
    /// SQLite reads it as immutable (no locks, no -wal or -shm); while one
    /// writes it, as a read-only reader of the writer's WAL. Refuses what is
    /// not a regular file at once (a FIFO never blocks it), says a
    /// permission problem apart from damage, and (with `verify`) checks the
    /// schema version and the pages (`PRAGMA quick_check`).
    static func reading<T>(_ given: String, verify: Bool = true, _ body: (Database) throws(StoreError) -> T) throws(StoreError) -> T {
        try reading(given, verify: verify) { db, _ throws(StoreError) in try body(db) }
    }

    /// The same, telling `body` whether an ifmeter holds the file's lock
    /// (writes it) while it is read.
    static func reading<T>(
        _ given: String, verify: Bool = true, _ body: (Database, _ written: Bool) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        // A link is followed once: the WAL and the other side files are
        // beside the file it names, not beside the link.
        let path = realPath(given) ?? given
        do {
            return try readingResolved(path, verify: verify, body)
        } catch {
            throw path == given ? error : error.renamed(path, to: given)
        }
    }

    private static func readingResolved<T>(
        _ path: String, verify: Bool, _ body: (Database, _ written: Bool) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        guard let status = FileStatus(path, followingLinks: true) else {
            let code = currentErrno()
            if code == Errno.noSuchFile { throw StoreError.missing(path: path) }
            throw Self.openFailure(path, call: "stat", code)
        }
        guard status.kind == .regular else { throw StoreError.notRegularFile(path: path) }
        if let writer = WriterConnections.connection(to: status) {
            // This process writes the file: read through its writer's
            // connection. A descriptor of its own would drop the writer's
            // POSIX locks when closed (and SQLite's view of the file is
            // the writer's anyway). The writer checked the file at its start.
            return try writer.borrowed { db throws(StoreError) -> T in try body(db, true) }
        }
        let fd: Int32
        do throws(SystemError) {
            fd = try openRegularForReading(path)
        } catch {
            if error.errno == SafeFile.notRegularErrno { throw StoreError.notRegularFile(path: path) }
            throw Self.openFailure(path, call: "open", error.errno ?? 0)
        }
        defer { _ = closeDescriptor(fd) }
        // A shared lock: no writer holds the file, and none starts while
        // this reads (a writer waits a second for it).
        let idle = FileLock.tryShared(fd)
        defer { if idle { FileLock.unlock(fd) } }
        let wal = FileStatus(path + "-wal")
        let walBytes = wal?.kind == .regular ? wal?.size ?? 0 : 0
        if idle, walBytes > 0 {
            // A writer was killed: its last saves are in the WAL, which an
            // immutable read would skip. Read a private copy instead.
            return try readCopy(path, fd: fd, verify: verify, blankIsEmpty: isSQLiteOrEmpty(fd)) { db throws(StoreError) in try body(db, false) }
        }
        let query = idle ? "mode=ro&immutable=1" : "mode=ro"
        let db = try Database(path: path, readOnly: true, uri: Database.uri(path, query: query))
        if isSQLiteOrEmpty(fd), isBlank(db) { return try readingBlank { db throws(StoreError) in try body(db, !idle) } }
        if verify { try check(db, path: path, host: nil) }
        return try body(db, !idle)
    }

    /// Whether an open file is empty or starts with SQLite's header
    /// (SQLite itself reads any file shorter than a page as an empty
    /// database: a note of a few bytes is not one).
    static func isSQLiteOrEmpty(_ fd: Int32) -> Bool {
        let head = readPrefix(fd, count: 16)
        return head.isEmpty || head == Array("SQLite format 3\u{0}".utf8)
    }

    /// A SQLite file with nothing in it (empty, or a header alone): what a
    /// first start killed before its schema was committed leaves. Ask
    /// `isSQLiteOrEmpty` first.
    static func isBlank(_ db: Database) -> Bool {
        var objects: Int64 = -1
        try? db.prepare("SELECT count(*) FROM sqlite_master").query { row throws(StoreError) in objects = row.int(0) }
        return objects == 0
    }

    /// `body` on a state that holds nothing yet (schema, no rows), in
    /// memory: a blank file reads as a state file with no usage, as the
    /// start that made it would have left it.
    static func readingBlank<T>(_ body: (Database) throws(StoreError) -> T) throws(StoreError) -> T {
        let db = try Database(path: ":memory:", readOnly: false, uri: "file::memory:")
        try db.execute(schema)
        try db.prepare("INSERT INTO meta(key, value) VALUES ('schema_version', ?)").run([.text(String(schemaVersion))])
        return try body(db)
    }

    static func openFailure(_ path: String, call: String, _ code: Int32) -> StoreError {
        let error = SystemError.system("\(call)(\(path))", code: code)
        return code == Errno.permissionDenied || code == Errno.notPermitted ? .unreadable(path: path, error) : .system(path: path, error)
    }

    /// Reads a copy of the file and its WAL in a private folder, removed
    /// after: SQLite applies the WAL there, and nothing is written beside
    /// the original.
    static func readCopy<T>(
        _ path: String, fd: Int32, verify: Bool, blankIsEmpty: Bool, _ body: (Database) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let folder: TemporaryFolder
        do throws(SystemError) {
            folder = try TemporaryFolder(prefix: "ifmeter-usage")
        } catch {
            throw openFailure("/tmp", call: "mkdtemp", error.errno ?? 0)
        }
        let copy = folder.path + "/state.db"
        try copyFile(from: fd, name: path, to: copy)
        let wal: Int32
        do throws(SystemError) {
            wal = try openRegularForReading(path + "-wal", followingLinks: false)
        } catch {
            throw openFailure(path + "-wal", call: "open", error.errno ?? 0)
        }
        defer { _ = closeDescriptor(wal) }
        try copyFile(from: wal, name: path + "-wal", to: copy + "-wal")
        do {
            // The copy's database is closed when this returns, before the
            // folder is removed (with the folder value, after this).
            return try withExtendedLifetime(folder) { () throws(StoreError) -> T in
                try readClosing(copy, verify: verify, blankIsEmpty: blankIsEmpty, body)
            }
        } catch {
            // Say the user's path, not the copy's.
            throw error.renamed(copy, to: path)
        }
    }

    static func readClosing<T>(
        _ path: String, verify: Bool, blankIsEmpty: Bool, _ body: (Database) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let db = try Database(path: path, readOnly: false)
        if blankIsEmpty, isBlank(db) { return try readingBlank(body) }
        if verify { try check(db, path: path, host: nil) }
        return try body(db)
    }

    static func copyFile(from source: Int32, name: String, to target: String) throws(StoreError) {
        do throws(SystemError) {
            try IfmeterSystem.copyFile(from: source, named: name, to: target)
        } catch {
            throw StoreError.system(path: name, error)
        }
    }
}

extension StoreError {
    /// The same error about another path (a copy's, said as the original's).
    func renamed(_ from: String, to path: String) -> StoreError {
        switch self {
        case .notState(_, let detail): .notState(path: path, detail: detail)
        case .corrupt(_, let detail): .corrupt(path: path, detail: detail)
        case .newerSchema(_, let version, let known): .newerSchema(path: path, version: version, known: known)
        case .olderSchema(_, let version, let known): .olderSchema(path: path, version: version, known: known)
        case .sqlite(_, let call, let message): .sqlite(path: path, call: call, message: message)
        default: self
        }
    }
}

/// One interface's traffic to add to the usage tables.
package struct UsageEntry: Sendable, Hashable {
    package var kind: InterfaceKind
    package var counters: Counters
    package var quality: Quality
    /// The same traffic split into local hours (`HourSplit`); when empty,
    /// all of it goes to the hour of the save.
    package var hours: [HourUsage]

    package init(kind: InterfaceKind, counters: Counters, quality: Quality, hours: [HourUsage] = []) {
        self.kind = kind
        self.counters = counters
        self.quality = quality
        self.hours = hours
    }
}
