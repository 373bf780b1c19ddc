import IfmeterCore
import IfmeterSystem

/// Reads one row of a state file's table, refusing a value outside what
/// ifmeter writes there as bad data (`StoreError.corrupt`: exit 65 for a
/// reader, a start that fails for a sampler), naming the file, the row,
/// the column, the value and what it should be. A state file is input
/// like any other: another user may have written it, with sqlite3.
struct RowCheck {
    let row: Row
    let path: String
    /// The row as messages name it: `usage_hours row of 'eth0' starting 1796083200`
    /// (made only for a message: a table of years is read row by row).
    let describe: () -> String
    var what: String { describe() }

    init(row: Row, path: String, what: @escaping @autoclosure () -> String) {
        self.row = row
        self.path = path
        describe = what
    }

    /// The most a monotonic time read back may be from 0, either side:
    /// the limit a trace's `t` has (`TraceReader.timeLimit`, 1e12 s).
    static let timeLimit = TraceReader.timeLimit

    /// A name for messages: quoted, control characters escaped.
    static func quoted(_ text: String?) -> String { "'" + TerminalText.escaped(text ?? "") + "'" }

    func refuse(_ column: String, _ i: Int32, expected: String) -> StoreError {
        .corrupt(path: path, detail: "\(what): \(column) is \(row.shown(i)), not \(expected)")
    }

    /// An integer (stored as one) within `range`.
    func integer(_ i: Int32, _ column: String, in range: ClosedRange<Int64>, expected: String) throws(StoreError) -> Int64 {
        guard row.isInteger(i), range.contains(row.int(i)) else { throw refuse(column, i, expected: expected) }
        return row.int(i)
    }

    /// A byte or packet count: an integer from 0 to 2^63-1.
    func count(_ i: Int32, _ column: String) throws(StoreError) -> UInt64 {
        UInt64(try integer(i, column, in: 0...Int64.max, expected: "a whole number from 0 to 9223372036854775807"))
    }

    /// A count kept by its bit pattern (a day row's sums: 0 to 2^64-1).
    func unsigned(_ i: Int32, _ column: String) throws(StoreError) -> UInt64 {
        guard row.isInteger(i) else { throw refuse(column, i, expected: "a 64-bit integer") }
        return UInt64(bitPattern: row.int(i))
    }

    /// A counter kept by its bit pattern (the interfaces table's 64-bit
    /// counters, 2^63 and up stored negative): any integer, or NULL.
    func counter(_ i: Int32, _ column: String) throws(StoreError) -> UInt64? {
        if row.isNull(i) { return nil }
        guard row.isInteger(i) else { throw refuse(column, i, expected: "a 64-bit integer or NULL") }
        return UInt64(bitPattern: row.int(i))
    }

    /// A monotonic time in seconds: a number within ±`timeLimit`.
    func time(_ i: Int32, _ column: String) throws(StoreError) -> Double {
        let t = row.double(i)
        guard row.isNumber(i), t.isFinite, abs(t) <= Self.timeLimit else {
            throw refuse(column, i, expected: "a monotonic time in seconds from -1e12 to 1e12")
        }
        return t
    }

    /// A quality: 0 exact, 1 wrap-corrected, 2 lower bound; anything else
    /// (a later version's, or garbage) reads as a lower bound, the one
    /// claim that is safe whatever the figure.
    func quality(_ i: Int32) -> Quality {
        row.isInteger(i) ? Quality(rawValue: Int(row.int(i))) ?? .lowerBound : .lowerBound
    }
}

extension StoreError {
    /// A failure while reading tables: a row refused for its values stays
    /// as it is (it names the row); anything else is SQLite's word that the
    /// file is not state it can read.
    static func tableFailure(_ error: StoreError, path: String) -> StoreError {
        if case .corrupt = error { return error }
        return .notState(path: path, detail: StateStore.detail(error))
    }
}
