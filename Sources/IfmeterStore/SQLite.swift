import CSQLite
import IfmeterCore
import IfmeterSystem
import Synchronization

/// Why a state file cannot be used, by case: callers pick exit codes and
/// words from the case, never from the text.
package enum StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No file at the path (reading usage).
    case missing(path: String)
    /// The folder for a new state file does not exist.
    case noFolder(path: String, folder: String)
    /// Something other than a regular file is there.
    case notRegularFile(path: String)
    /// Another ifmeter holds the file's lock.
    case inUse(path: String)
    /// A file that is not ifmeter state (not SQLite, or no meta table).
    case notState(path: String, detail: String)
    /// ifmeter state that fails SQLite's check.
    case corrupt(path: String, detail: String)
    /// Written by a newer ifmeter, or an older schema this one cannot read.
    case newerSchema(path: String, version: Int, known: Int)
    case olderSchema(path: String, version: Int, known: Int)
    /// Another machine's totals.
    case otherHost(path: String, owner: String, host: String)
    /// The boot id could not be read.
    case noBootID(file: String)
    /// A system call failed (open, flock).
    case system(path: String, SystemError)
    /// This process may not read the file (permission): the file may be fine.
    case unreadable(path: String, SystemError)
    /// SQLite failed: the call and its words.
    case sqlite(path: String, call: String, message: String)

    package var description: String {
        switch self {
        case .missing(let path):
            "no state file at \(path)"
        case .noFolder(let path, let folder):
            "cannot use state file \(path): the folder \(folder) does not exist"
        case .notRegularFile(let path):
            "cannot use state file \(path): it is not a regular file"
        case .inUse(let path):
            "state file \(path) is in use by another ifmeter; give this one another --state"
        case .notState(let path, let detail):
            "refusing state file \(path): it is not an ifmeter state file or it is corrupt (\(detail)); move it away or choose another --state"
        case .corrupt(let path, let detail):
            "refusing state file \(path): it is corrupt (\(detail)); move it away or choose another --state"
        case .newerSchema(let path, let version, let known):
            "refusing state file \(path): it was written by a newer ifmeter (state schema \(version), this one reads \(known)); use that ifmeter or another --state"
        case .olderSchema(let path, let version, let known):
            "refusing state file \(path): state schema \(version) is older than this ifmeter knows (\(known))"
        case .otherHost(let path, let owner, let host):
            "refusing state file \(path): it belongs to host '\(owner)', and this is '\(host)'; its totals are not this machine's"
        case .noBootID(let file):
            "cannot read the boot id from \(file)"
        case .system(let path, let error):
            "cannot use state file \(path): \(error.call): \(error.message)"
        case .unreadable(let path, let error):
            "cannot read state file \(path): \(error.call): \(error.message); run as a user who may read it"
        case .sqlite(let path, let call, let message):
            "\(path): \(call): \(message)"
        }
    }

    /// The file's content is the problem (not this process, not the system).
    package var isBadData: Bool {
        switch self {
        case .notState, .corrupt, .newerSchema, .olderSchema, .otherHost: true
        default: false
        }
    }
}

/// The thin layer over SQLite's C API: a connection, statements, values.
/// Everything above it sees Swift values.
///
/// A writer's connection (one with a `lockDescriptor`) is the process's one
/// way into its file: readers in the same process (`StateStore.reading`,
/// serve's usage endpoints) borrow it through `WriterConnections` instead
/// of opening the file again, since closing any other descriptor of the
/// file would drop every POSIX lock the process holds on it, SQLite's
/// included, and the next connection of another process would then
/// checkpoint and delete the WAL under this one. So a writer's connection
/// is serialized (SQLite's own recursive mutex, `SQLITE_OPEN_FULLMUTEX`),
/// and a transaction or a borrower holds that mutex for all its calls.
final class Database: @unchecked Sendable {
    let handle: OpaquePointer
    let path: String
    /// A descriptor of the same file that holds ifmeter's lock: closed only
    /// after SQLite has closed (closing any descriptor of a file drops the
    /// process's POSIX locks on it, SQLite's included). Statements keep
    /// their database alive, so this is after the last one is finalized.
    let lockDescriptor: Int32?
    /// The file this writer's connection is registered under, to be
    /// unregistered when it closes.
    private var registered: FileIdentity?
    /// The writer's connection this one borrows (`borrowed`): the same
    /// SQLite handle, kept open by its owner.
    private let owner: Database?
    /// A reader borrowing a writer's connection in the same process: the
    /// file was checked when the writer opened it, so a reader's checks of
    /// every page and row (seconds on a file of years, with the writer's
    /// saves waiting) are skipped; SQLite still refuses a damaged page it
    /// reads.
    var isBorrowed: Bool { owner != nil }

    /// Opens `path` (never through a symbolic link); `uri`, when given, is
    /// what SQLite opens instead (`file:...?mode=ro&immutable=1`).
    init(path: String, readOnly: Bool, uri: String? = nil, lockDescriptor: Int32? = nil) throws(StoreError) {
        var db: OpaquePointer?
        var flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        // A writer's connection may be borrowed by another thread; a
        // reader's own connection never leaves its thread.
        flags |= (lockDescriptor == nil ? SQLITE_OPEN_NOMUTEX : SQLITE_OPEN_FULLMUTEX) | SQLITE_OPEN_NOFOLLOW
        if uri != nil { flags |= SQLITE_OPEN_URI }
        let rc = sqlite3_open_v2(uri ?? Self.withFolderResolved(path), &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            if let db { sqlite3_close_v2(db) }
            throw StoreError.sqlite(path: path, call: "sqlite3_open_v2", message: message)
        }
        handle = db
        self.path = path
        self.lockDescriptor = lockDescriptor
        owner = nil
        sqlite3_busy_timeout(db, 5000)
        if let lockDescriptor, let status = FileStatus(descriptor: lockDescriptor) {
            registered = FileIdentity(status)
            WriterConnections.register(self, as: FileIdentity(status))
        }
    }

    /// A reader's view of a writer's connection (`WriterConnections`).
    private init(borrowing writer: Database) {
        handle = writer.handle
        path = writer.path
        lockDescriptor = nil
        owner = writer
    }

    /// Runs `body` with a reader's view of this writer's connection,
    /// holding its mutex throughout.
    func borrowed<T, E: Error>(_ body: (Database) throws(E) -> T) throws(E) -> T {
        try serialized { () throws(E) -> T in try body(Database(borrowing: self)) }
    }

    deinit {
        guard owner == nil else { return }
        if let registered { WriterConnections.unregister(self, as: registered) }
        sqlite3_close_v2(handle)
        if let lockDescriptor { FileLock.release(lockDescriptor) }
    }

    /// Runs `body` holding the connection's mutex (a writer's; a reader's
    /// own connection has none, and this is then just a call): no other
    /// thread's statement runs on the connection meanwhile. Recursive.
    func serialized<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let mutex = sqlite3_db_mutex(handle)
        sqlite3_mutex_enter(mutex)
        defer { sqlite3_mutex_leave(mutex) }
        return try body()
    }

    /// `path` with its folder's links resolved: SQLITE_OPEN_NOFOLLOW refuses
    /// a link anywhere in the path, and a state folder is often reached
    /// through one (systemd's DynamicUser makes /var/lib/ifmeter a link to
    /// /var/lib/private/ifmeter). The file itself is still never opened
    /// through a link: its name is kept, and SQLite opens it O_NOFOLLOW.
    static func withFolderResolved(_ path: String) -> String {
        guard let folder = realPath(SafeFile.folder(of: path)) else { return path }
        return (folder == "/" ? "" : folder) + "/" + SafeFile.name(of: path)
    }

    /// `path` as a SQLite URI with `query` (`mode=ro&immutable=1`), its
    /// folder's links resolved.
    static func uri(_ path: String, query: String) -> String {
        var text = "file:"
        for byte in withFolderResolved(path).utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "/"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "~"):
                text.append(Character(UnicodeScalar(byte)))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                text += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return text + "?" + query
    }

    var lastError: String { String(cString: sqlite3_errmsg(handle)) }

    func failure(_ call: String) -> StoreError { .sqlite(path: path, call: call, message: lastError) }

    func execute(_ sql: String) throws(StoreError) {
        try serialized { () throws(StoreError) in
            var message: UnsafeMutablePointer<CChar>?
            let rc = sqlite3_exec(handle, sql, nil, nil, &message)
            if rc != SQLITE_OK {
                let text = message.map { String(cString: $0) } ?? lastError
                sqlite3_free(message)
                throw StoreError.sqlite(path: path, call: "sqlite3_exec", message: text)
            }
        }
    }

    func prepare(_ sql: String) throws(StoreError) -> Statement {
        try serialized { () throws(StoreError) in
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
                throw StoreError.sqlite(path: path, call: "sqlite3_prepare_v2", message: lastError)
            }
            return Statement(statement, database: self)
        }
    }

    /// Runs `body` in one transaction: all of it is saved, or none. No
    /// other thread's statement runs on the connection meanwhile.
    func transaction(_ body: () throws(StoreError) -> Void) throws(StoreError) {
        try serialized { () throws(StoreError) in
            try execute("BEGIN IMMEDIATE")
            do throws(StoreError) {
                try body()
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
        }
    }
}

/// Which file a path names (device and inode), whatever the name.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init(_ status: FileStatus) {
        device = status.device
        inode = status.inode
    }
}

/// The state files this process writes, each with its writer's connection:
/// a reader in the same process finds the file here by its identity (from
/// `stat`, which opens nothing) and reads through that connection, never
/// through a descriptor of its own (whose close would drop the writer's
/// POSIX locks). `LockRuleTests` and the serve-wide `/proc/locks` check
/// keep the rule.
enum WriterConnections {
    private final class Entry {
        weak var database: Database?
        init(_ database: Database) { self.database = database }
    }

    private static let table = Mutex<[FileIdentity: Entry]>([:])

    static func register(_ database: Database, as identity: FileIdentity) {
        table.withLock { $0[identity] = Entry(database) }
    }

    static func unregister(_ database: Database, as identity: FileIdentity) {
        table.withLock { entries in
            // Only its own entry: another connection may have taken the
            // identity since (a file written anew under the same inode).
            if let entry = entries[identity], entry.database == nil || entry.database === database { entries[identity] = nil }
        }
    }

    /// The writer's connection to the file `status` describes, if this
    /// process has one open.
    static func connection(to status: FileStatus) -> Database? {
        table.withLock { $0[FileIdentity(status)]?.database }
    }
}

/// A prepared statement, reset for each use. It keeps its database open.
final class Statement {
    let handle: OpaquePointer
    let database: Database

    init(_ handle: OpaquePointer, database: Database) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// SQLite's "copy this text now" destructor.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    enum Value: Hashable {
        case null, integer(Int64), real(Double), text(String)
    }

    func bind(_ values: [Value]) throws(StoreError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (n, value) in values.enumerated() {
            let i = Int32(n + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(handle, i)
            case .integer(let v): rc = sqlite3_bind_int64(handle, i, v)
            case .real(let v): rc = sqlite3_bind_double(handle, i, v)
            case .text(let v): rc = sqlite3_bind_text(handle, i, v, -1, Self.transient)
            }
            if rc != SQLITE_OK { throw database.failure("sqlite3_bind") }
        }
    }

    /// Runs a statement that returns no rows.
    func run(_ values: [Value] = []) throws(StoreError) {
        try database.serialized { () throws(StoreError) in
            try bind(values)
            let rc = sqlite3_step(handle)
            guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw database.failure("sqlite3_step") }
            sqlite3_reset(handle)
        }
    }

    /// Runs a query and calls `row` for each result row.
    func query(_ values: [Value] = [], _ row: (Row) throws(StoreError) -> Void) throws(StoreError) {
        try database.serialized { () throws(StoreError) in
            try bind(values)
            defer { sqlite3_reset(handle) }
            while true {
                let rc = sqlite3_step(handle)
                if rc == SQLITE_DONE { return }
                guard rc == SQLITE_ROW else { throw database.failure("sqlite3_step") }
                try row(Row(handle: handle))
            }
        }
    }
}

/// One result row; columns by position.
struct Row {
    let handle: OpaquePointer

    func isNull(_ i: Int32) -> Bool { sqlite3_column_type(handle, i) == SQLITE_NULL }
    func int(_ i: Int32) -> Int64 { sqlite3_column_int64(handle, i) }
    func double(_ i: Int32) -> Double { sqlite3_column_double(handle, i) }
    func text(_ i: Int32) -> String? { sqlite3_column_text(handle, i).map { String(cString: $0) } }
    /// The value is stored as an integer (not a real, text or blob that
    /// `int` would convert: 1e19 to 2^63-1, 'NaN' to 0).
    func isInteger(_ i: Int32) -> Bool { sqlite3_column_type(handle, i) == SQLITE_INTEGER }
    /// The value is stored as an integer or a real.
    func isNumber(_ i: Int32) -> Bool { [SQLITE_INTEGER, SQLITE_FLOAT].contains(sqlite3_column_type(handle, i)) }

    /// The value as a message shows it: an integer or real as it is, text
    /// quoted (escaped, at most 40 characters), NULL and blobs by name.
    func shown(_ i: Int32) -> String {
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: String(int(i))
        case SQLITE_FLOAT: String(double(i))
        case SQLITE_NULL: "NULL"
        case SQLITE_BLOB: "a blob"
        default: "'" + TerminalText.escaped(String((text(i) ?? "").prefix(40))) + "'"
        }
    }
}
