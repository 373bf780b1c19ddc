import CSQLite

/// A SQLite failure: the call, and SQLite's words.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The thin layer over SQLite's C API: a connection, statements, values.
/// Everything above it sees Swift values.
final class Database {
    let handle: OpaquePointer
    let path: String

    init(path: String, readOnly: Bool) throws(StoreError) {
        var db: OpaquePointer?
        let flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        let rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            if let db { sqlite3_close_v2(db) }
            throw StoreError("cannot open \(path): \(message)")
        }
        handle = db
        self.path = path
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { sqlite3_close_v2(handle) }

    var lastError: String { String(cString: sqlite3_errmsg(handle)) }

    func execute(_ sql: String) throws(StoreError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? lastError
            sqlite3_free(message)
            throw StoreError("\(path): \(text)")
        }
    }

    func prepare(_ sql: String) throws(StoreError) -> Statement {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw StoreError("\(path): \(lastError)")
        }
        return Statement(statement, database: self)
    }

    /// Runs `body` in one transaction: all of it is saved, or none.
    func transaction(_ body: () throws(StoreError) -> Void) throws(StoreError) {
        try execute("BEGIN IMMEDIATE")
        do {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}

/// A prepared statement, reset for each use.
final class Statement {
    let handle: OpaquePointer
    unowned let database: Database

    init(_ handle: OpaquePointer, database: Database) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// SQLite's "copy this text now" destructor.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    enum Value {
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
            if rc != SQLITE_OK { throw StoreError("\(database.path): \(database.lastError)") }
        }
    }

    /// Runs a statement that returns no rows.
    func run(_ values: [Value] = []) throws(StoreError) {
        try bind(values)
        let rc = sqlite3_step(handle)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw StoreError("\(database.path): \(database.lastError)") }
        sqlite3_reset(handle)
    }

    /// Runs a query and calls `row` for each result row.
    func query(_ values: [Value] = [], _ row: (Row) throws(StoreError) -> Void) throws(StoreError) {
        try bind(values)
        defer { sqlite3_reset(handle) }
        while true {
            let rc = sqlite3_step(handle)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw StoreError("\(database.path): \(database.lastError)") }
            try row(Row(handle: handle))
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
}
