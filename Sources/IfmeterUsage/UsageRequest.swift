import IfmeterCore
import IfmeterStore
import IfmeterSystem

/// What usage is asked for, typed: the `usage` command's options and
/// `/api/v1/usage`'s and `/usage.png`'s parameters both become one of
/// these, and `UsageDocument` answers it.
package struct UsageRequest: Sendable, Hashable {
    /// The rows: hour, day, month, year, cycle, five minutes or top days.
    package var granularity: UsagePeriodKind
    /// Only usage from `begin` (a Unix time) on, and before `end`: already
    /// resolved in the local zone (`LocalZone.unix(localDateOrTime:end:)`).
    package var begin: Int64?
    package var end: Int64?
    /// One interface, by its stored name (`NS/NAME` for another
    /// namespace's), matched exactly: only its rows are read.
    package var interface: String?
    /// The latest `limit` periods of each interface.
    package var limit: Int?
    /// At most this many rows in the document (nil: every row); when more
    /// remain, the document says where to go on (`UsageDocument.next`).
    package var rows: Int?
    /// Rows after this one only (a page after the first).
    package var after: UsageCursor?

    package init(
        granularity: UsagePeriodKind, begin: Int64? = nil, end: Int64? = nil, interface: String? = nil, limit: Int? = nil, rows: Int? = nil,
        after: UsageCursor? = nil
    ) {
        self.granularity = granularity
        self.begin = begin
        self.end = end
        self.interface = interface
        self.limit = limit
        self.rows = rows
        self.after = after
    }

    /// The HTTP parameters' names for the granularities (`usage`'s flags
    /// without their dashes and plural).
    package static let granularityNames: [(name: String, kind: UsagePeriodKind)] = [
        ("fiveminutes", .fiveMinutes), ("hour", .hour), ("day", .day), ("month", .month), ("year", .year), ("cycle", .cycle),
    ]

    /// Rows of a document over HTTP when the query gives no `rows`, and the
    /// most it may ask for (docs/state-and-usage.md): a page of hours is a
    /// few MB of JSON, read and written a chunk at a time.
    package static let defaultRows = 10_000
    package static let maximumRows = 50_000

    /// A request from HTTP parameters (`granularity`, `begin`, `end`,
    /// `interface`, `limit`, `rows`, `after`); `summary` is a granularity of
    /// the picture's only (`image`). `begin` and `end` are read in `zone`
    /// as `usage --begin`/`--end` read them, and must be in order. A bad
    /// value is refused naming its parameter.
    package static func parse(_ query: [String: String], image: Bool = false, zone: LocalZone = .system) throws(UsageQueryError) -> (
        request: UsageRequest, summary: Bool
    ) {
        let granularity = query["granularity"] ?? "day"
        let names = granularityNames.map(\.name) + (image ? ["summary"] : [])
        guard names.contains(granularity) else {
            throw .badParameter("granularity", "invalid granularity '\(shown(granularity))'; use \(names.joined(separator: ", "))")
        }
        var request = UsageRequest(granularity: granularityNames.first { $0.name == granularity }?.kind ?? .day)
        if let text = query["limit"] {
            guard let value = Int(text), (1...100_000).contains(value) else {
                throw .badParameter("limit", "invalid limit '\(shown(text))'; use a whole number from 1 to 100000")
            }
            request.limit = value
        }
        if let text = query["rows"] {
            guard let value = Int(text), (1...maximumRows).contains(value) else {
                throw .badParameter("rows", "invalid rows '\(shown(text))'; use a whole number from 1 to \(maximumRows)")
            }
            request.rows = value
        }
        if let interface = query["interface"] {
            guard !interface.isEmpty, interface.utf8.count <= 256 else {
                throw .badParameter("interface", "invalid interface: give one interface's name (NS/NAME for another namespace's)")
            }
            request.interface = interface
        }
        for key in ["begin", "end"] {
            guard let text = query[key] else { continue }
            if text.isEmpty || text.utf8.count > 32 {
                throw .badParameter(key, "invalid \(key) '\(shown(text))': expected \(LocalZone.localTimeForm)")
            }
            guard let time = zone.unix(localDateOrTime: text, end: key == "end") else {
                throw .badParameter(key, "invalid value '\(shown(text))' for '\(key)': expected \(LocalZone.localTimeForm)")
            }
            if key == "begin" { request.begin = time } else { request.end = time }
        }
        if let begin = request.begin, let end = request.end, begin >= end {
            throw .badParameter(
                "begin",
                "begin '\(shown(query["begin"] ?? ""))' is not before end '\(shown(query["end"] ?? ""))': give begin before end (an end date takes its whole day)"
            )
        }
        if let text = query["after"] {
            guard let cursor = UsageCursor(text) else {
                throw .badParameter("after", "invalid after '\(shown(text))'; use the next URL a usage document gives, as it is")
            }
            request.after = cursor
        }
        return (request, granularity == "summary")
    }

    /// A value from a request, safe to print: escaped, and cut at 64 characters.
    package static func shown(_ text: String) -> String {
        let escaped = TerminalText.escaped(text)
        return escaped.count > 64 ? String(escaped.prefix(64)) + "…" : escaped
    }
}

/// Where a page of a usage document ended: its last row's interface
/// (stored name) and start. Written `START:NAME` in a `next` URL.
package struct UsageCursor: Sendable, Hashable, CustomStringConvertible {
    package var interface: String
    package var start: Int64

    package init(interface: String, start: Int64) {
        self.interface = interface
        self.start = start
    }

    package init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), let start = Int64(text[..<colon]) else { return nil }
        let name = String(text[text.index(after: colon)...])
        guard !name.isEmpty, name.utf8.count <= 256 else { return nil }
        self.init(interface: name, start: start)
    }

    package var description: String { "\(start):\(interface)" }
}

/// Why a usage request was not answered, typed: what HTTP status it is
/// (`status`) follows from the case, never from the words.
package enum UsageQueryError: Error, Sendable {
    /// The request's fault: this parameter, and what is wrong with it.
    case badParameter(String, String)
    /// The state file cannot be read now: not there yet (serve makes it at
    /// its first save), or in the middle of being made anew.
    case unavailable(StoreError)
    /// The state file could not be read (damaged, not a state file).
    case failed(StoreError)
    /// The picture could not be drawn (libcairo missing).
    case drawing(String)

    /// 400, 503 or 500.
    package var status: Int {
        switch self {
        case .badParameter: 400
        case .unavailable: 503
        case .failed, .drawing: 500
        }
    }

    /// What a store's failure is for a reader.
    package init(_ error: StoreError) {
        switch error {
        case .missing, .noFolder, .inUse: self = .unavailable(error)
        default: self = .failed(error)
        }
    }

    /// Its one line.
    package var message: String {
        switch self {
        case .badParameter(_, let message): message
        case .unavailable(let error), .failed(let error): error.description
        case .drawing(let message): message
        }
    }
}

extension UsageRequest {
    /// The instant tables are made at: now, or `IFMETER_USAGE_NOW` (a Unix
    /// time) when set, so that a test prints one table several ways (the
    /// command's, serve's) at one instant instead of guessing that no
    /// second passed between them.
    package static func clock() -> Double {
        environment("IFMETER_USAGE_NOW").flatMap(Double.init).flatMap { $0.isFinite ? $0 : nil } ?? wallClock()
    }
}
