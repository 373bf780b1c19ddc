import IfmeterCore

/// A usage table written a part at a time (`usage --hourly` on years of
/// hours): the same text, JSON and CSV as `UsageTable`'s, from rows handed
/// over a chunk at a time, so memory holds one chunk. `table` gives
/// everything but the interfaces (zone, now, saves, path, granularity).
///
/// Text columns are as wide as the widest figure could be, so that the
/// parts of one interface's table line up.
package struct UsageStream {
    package let table: UsageTable
    package let format: String
    private var shown = Set<Quality>()
    private var interfaces = 0
    private var rows = 0
    private var current: UsageTable.Interface?
    private var documentTail = ""
    private var interfaceTail = ""

    package init(table: UsageTable, format: String) {
        self.table = table
        self.format = format
    }

    static let sentinel = "@@ifmeter-usage-stream@@"
    static let quotedSentinel = "\"" + sentinel + "\""

    /// Text cells at most this wide, whatever the figure: a byte count
    /// (marked for its quality) and a rate.
    static let figureWidths: (bytes: Int, rate: Int) = {
        var bytes = 0, rate = 0
        var values: [UInt64] = [0, .max]
        for shift in 0..<64 {
            let v = UInt64(1) << shift
            values += [v - 1, v, v + v / 2, v / 1000 * 999, v / 10000 * 9999]
        }
        for v in values {
            for q in Quality.allCases {
                bytes = max(bytes, TextTable.width(q.marked(Units.bytes(v))))
                rate = max(rate, TextTable.width(q.marked(Units.rate(bytesPerSecond: Double(v) / 3600, bits: true))))
            }
        }
        return (bytes, rate)
    }()

    /// What comes first.
    package mutating func start() -> String {
        switch format {
        case "json":
            let document = JSONWriter(indent: 2).string(table.json(interfaces: .string(Self.sentinel)))
            let (head, tail) = Self.split(document, last: false)
            documentTail = tail
            return head + "["
        case "csv":
            return UsageTable.csvHeader + "\n"
        default:
            return ""
        }
    }

    /// Some rows of an interface (its rows in order, over as many calls as
    /// it takes); a new interface ends the one before. `whole`: these are
    /// all its rows (its text table is then as wide as they need).
    package mutating func add(_ interface: UsageTable.Interface, whole: Bool = false) -> String {
        var out = ""
        if current?.stored != interface.stored {
            out += endInterface()
            current = interface
            interfaces += 1
            rows = 0
            switch format {
            case "json":
                let object = JSONWriter(indent: 2).string(table.json(interface, periods: .string(Self.sentinel)), level: 2)
                let (head, tail) = Self.split(object, last: true)
                interfaceTail = tail
                out += (interfaces > 1 ? "," : "") + "\n    " + head + "["
            case "csv":
                break
            default:
                out += table.textTitle(interface)
            }
        }
        switch format {
        case "json":
            for r in interface.rows {
                out += (rows > 0 ? "," : "") + "\n        " + JSONWriter(indent: 2).string(table.json(r), level: 4)
                rows += 1
            }
        case "csv":
            out += table.csv(interface, rows: interface.rows)
            rows += interface.rows.count
        default:
            var text = table.textTable(interface)
            let label = interface.rows.first.map { TextTable.width(table.textCells($0, plan: false, shown: &shown)[0]) } ?? 0
            if !whole {
                text.minimumWidths = [label, Self.figureWidths.bytes, Self.figureWidths.bytes, Self.figureWidths.bytes, Self.figureWidths.rate]
            }
            for r in interface.rows { text.add(table.textCells(r, plan: interface.plan != nil, shown: &shown)) }
            out += text.lines(headers: rows == 0).map { "  " + $0 }.joined(separator: "\n") + "\n" + table.textProjection(interface)
            rows += interface.rows.count
        }
        return out
    }

    /// What ends the interface being written, if any.
    private mutating func endInterface() -> String {
        guard current != nil else { return "" }
        current = nil
        switch format {
        case "json": return (rows > 0 ? "\n      ]" : "]") + interfaceTail
        case "csv": return ""
        default: return "\n"
        }
    }

    /// What comes last; in text, the table's empty note (`emptyNote`, or
    /// that nothing was recorded) when no interface had a row.
    /// `next`: where the next page is (JSON: the document's `next`, in
    /// schema version 7), when this one was cut short.
    package mutating func finish(path: String, next: String? = nil) -> String {
        var out = endInterface()
        switch format {
        case "json":
            if let next {
                let document = JSONWriter(indent: 2).string(table.json(interfaces: .string(Self.sentinel), next: next))
                documentTail = Self.split(document, last: false).1
            }
            out += (interfaces > 0 ? "\n  ]" : "]") + documentTail + "\n"
        case "csv":
            break
        default:
            if interfaces == 0 { out += (table.emptyNote ?? "No usage recorded yet in \(TerminalText.escaped(path)).") + "\n" }
            out += table.textFoot(shown: shown)
        }
        return out
    }

    /// What text comes before the first interface: how current the
    /// figures are.
    package func textHead(path: String) -> String { format == "text" ? table.textHead(path: path, empty: false) : "" }

    /// A rendered value split at the sentinel: the first (the document's
    /// `interfaces`) or the last (an interface's `periods`, after its name)
    /// occurrence.
    static func split(_ text: String, last: Bool) -> (String, String) {
        let bytes = Array(text.utf8), needle = Array(quotedSentinel.utf8)
        guard bytes.count >= needle.count else { return (text, "") }
        let starts = Array(0...(bytes.count - needle.count))
        guard let at = (last ? starts.reversed() : starts).first(where: { bytes[$0..<$0 + needle.count].elementsEqual(needle) }) else {
            return (text, "")
        }
        return (String(decoding: bytes[..<at], as: UTF8.self), String(decoding: bytes[(at + needle.count)...], as: UTF8.self))
    }
}
