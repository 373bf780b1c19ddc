/// A problem in a trace, with the line it is on.
public struct TraceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// 1-based line number.
    public var line: Int
    public var message: String

    public init(line: Int, message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { "line \(line): \(message)" }
}

/// Reads trace v1 (JSON Lines) one line at a time, validating as it goes.
public struct TraceReader: Sendable {
    /// The largest `t` a line may have, either side of 0: 1e12 s (31,700
    /// years of a monotonic clock). Within it every difference of two
    /// times is finite and resolves a tenth of a millisecond, so the
    /// engine's intervals and rates, and the reports' windows, are figures;
    /// past it (1e19, 1e308) they are not, and the line is refused.
    public static let timeLimit: Double = 1e12

    public private(set) var header = TraceHeader()
    public private(set) var lineNumber = 0
    private var sawContent = false
    private var lastTime: Double?

    public init() {}

    /// Parses the next line (without its `\n`). Returns nil for a blank line,
    /// the header, and informational events this version does not count.
    public mutating func read(line: some Collection<UInt8>) throws(TraceError) -> TraceRecord? {
        lineNumber += 1
        var bytes = Array(line)
        if bytes.last == 0x0D { bytes.removeLast() }
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return nil }
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw fail("not valid JSON: \(error)")
        }
        guard case .object(let object) = value else { throw fail("expected a JSON object") }
        let isFirst = !sawContent
        sawContent = true

        if let trace = object["trace"] {
            guard isFirst else { throw fail("a header line (\"trace\") may only be the first line; two traces joined? Replay each alone") }
            // A header is only a header (v1.3, rule 4): its sample or
            // event would otherwise be dropped unread.
            if let key = ["t", "interfaces", "event"].first(where: { object[$0] != nil }) {
                throw fail("the header line (\"trace\") also carries \"\(key)\"; put the header alone on the first line")
            }
            guard trace.stringValue == "ifmeter/1" else {
                throw fail("unsupported trace version \(JSONWriter().string(trace)); this ifmeter reads \"ifmeter/1\"")
            }
            if let platform = object["platform"] {
                guard let name = platform.stringValue, let p = Platform(rawValue: name) else {
                    throw fail("\"platform\" must be \"linux\" or \"darwin\"")
                }
                header.platform = p
            }
            header.source = object["source"]?.stringValue
            header.host = object["host"]?.stringValue
            return nil
        }

        guard let tValue = object["t"] else { throw fail("missing required key \"t\"") }
        guard let t = tValue.doubleValue, t.isFinite, abs(t) <= Self.timeLimit else {
            throw fail("\"t\" must be a number of seconds from -1e12 to 1e12, got \(JSONWriter().string(tValue))")
        }
        if let lastTime, t < lastTime {
            throw fail("\"t\" \(t) is earlier than the previous line's \(lastTime); lines must be in non-decreasing t order")
        }
        lastTime = t

        if let interfaces = object["interfaces"] {
            guard case .array(let list) = interfaces else { throw fail("\"interfaces\" must be an array") }
            var samples: [InterfaceSample] = []
            samples.reserveCapacity(list.count)
            // Keys compare code points exactly (v1.1): "tun\u{e9}" and
            // "tune\u{301}" are two interfaces.
            var keys = Set<SeriesKey>()
            for (position, entry) in list.enumerated() {
                let sample = try interface(entry, at: "interfaces[\(position)]")
                guard keys.insert(sample.key).inserted else {
                    throw fail("interface \(Self.quoted(sample.key)) appears twice in one sample")
                }
                samples.append(sample)
            }
            return .sample(Sample(time: t, interfaces: samples))
        }
        if let event = object["event"] {
            guard let kind = event.stringValue else { throw fail("\"event\" must be a string") }
            switch kind {
            case "deleted":
                guard let entry = object["interface"] else { throw fail("a \"deleted\" event needs an \"interface\" object") }
                let final = try interface(entry, at: "interface")
                return .deleted(DeletionEvent(time: t, interface: final, lowerBound: try lowerBound(entry, of: final)))
            case "renamed":
                // ifmeter's own: the interface goes on under a new name.
                guard let entry = object["interface"] else { throw fail("a \"renamed\" event needs an \"interface\" object") }
                guard case .object(let o) = entry, let to = o["name"]?.stringValue, !to.isEmpty,
                    let from = object["from"]?.stringValue, !from.isEmpty
                else { throw fail("a \"renamed\" event needs \"from\" and the interface's new \"name\"") }
                var index: Int?
                if let raw = o["index"], raw != .null {
                    guard let v = raw.uint64Value, v <= UInt64(Int32.max) else { throw fail("\"index\" must be a non-negative integer") }
                    index = Int(v)
                }
                return .renamed(RenameEvent(time: t, netns: o["netns"]?.stringValue ?? "", index: index, from: from, to: to))
            case "namespace-entered", "namespace-lost":
                // ifmeter's own: a namespace instance entered, or one that
                // came and went unread.
                guard let netns = object["netns"]?.stringValue, !netns.isEmpty else {
                    throw fail("a \"\(kind)\" event needs \"netns\", the namespace's name")
                }
                return .namespace(NamespaceEvent(time: t, netns: netns, kind: kind == "namespace-lost" ? .lost : .entered))
            default:
                // Unknown event types are skipped (later versions may add
                // events); "created" is informational.
                return nil
            }
        }
        throw fail("a line needs \"interfaces\" (a sample) or \"event\" (an event)")
    }

    private func fail(_ message: String) -> TraceError { TraceError(line: lineNumber, message: message) }

    /// A name for messages: quoted, with control characters escaped.
    static func quoted(_ key: SeriesKey) -> String {
        JSONWriter().string(.string(key.description))
    }

    /// A deleted event's `lower_bound`: the counters whose final value is
    /// under-reported (v1.1). Names of counters this version does not know
    /// are skipped.
    private func lowerBound(_ value: JSONValue, of final: InterfaceSample) throws(TraceError) -> CounterKeySet {
        guard case .object(let o) = value, let raw = o["lower_bound"], raw != .null else { return [] }
        guard case .array(let list) = raw else {
            throw fail("interface (\(Self.quoted(final.key))): \"lower_bound\" must be an array of counter names")
        }
        var keys = CounterKeySet()
        for item in list {
            guard let name = item.stringValue else {
                throw fail("interface (\(Self.quoted(final.key))): \"lower_bound\" must hold counter names, got \(JSONWriter().string(item))")
            }
            if let key = CounterKey(jsonKey: name) { keys.insert(key) }
        }
        return keys
    }

    private func interface(_ value: JSONValue, at path: String) throws(TraceError) -> InterfaceSample {
        guard case .object(let o) = value else { throw fail("\(path) must be an object") }
        guard let name = o["name"]?.stringValue, !name.isEmpty else {
            throw fail("\(path) lacks a \"name\" string")
        }
        var netns = ""
        if let raw = o["netns"], raw != .null {
            guard let text = raw.stringValue else { throw fail("\(path): \"netns\" must be a string") }
            netns = text
        }
        let at = "\(path) (\(Self.quoted(SeriesKey(netns: netns, name: name))))"
        var width = CounterWidth.bits64
        if let w = o["width"] {
            switch w.uint64Value {
            case 32: width = .bits32
            case 64: width = .bits64
            default: throw fail("\(at): \"width\" must be 32 or 64")
            }
        }
        var counters = Counters()
        for key in CounterKey.allCases {
            guard let raw = o[key.jsonKey] else {
                if CounterKey.required.contains(key) { throw fail("\(at) lacks required counter \"\(key.jsonKey)\"") }
                continue
            }
            guard let v = raw.uint64Value else {
                throw fail("\(at): counter \"\(key.jsonKey)\" must be an unsigned integer up to 2^64-1, got \(JSONWriter().string(raw))")
            }
            if width == .bits32, v > UInt64(UInt32.max) {
                throw fail("\(at): counter \"\(key.jsonKey)\" is \(v), too large for a 32-bit counter (\"width\": 32)")
            }
            counters[key] = v
        }
        var index: Int?
        if let raw = o["index"], raw != .null {
            guard let v = raw.uint64Value, v <= UInt64(Int32.max) else {
                throw fail("\(at): \"index\" must be a non-negative integer")
            }
            index = Int(v)
        }
        var classification: Classification?
        if let raw = o["kind"], raw != .null {
            guard let name = raw.stringValue, let kind = InterfaceKind(rawValue: name) else {
                throw fail("\(at): \"kind\" must be one of \(InterfaceKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            classification = Classification(kind: kind, evidence: o["evidence"]?.stringValue ?? "trace:kind")
        }
        var speed: UInt64?
        if let raw = o["speed_bps"], raw != .null {
            guard let v = raw.uint64Value else { throw fail("\(at): \"speed_bps\" must be an unsigned integer") }
            speed = v
        }
        return InterfaceSample(
            name: name, netns: netns, index: index, classification: classification, width: width, speedBps: speed,
            counters: counters)
    }
}

/// Writes trace v1 lines (without the trailing `\n`).
public enum TraceWriter {
    public static func headerLine(_ header: TraceHeader, extra: [String: JSONValue] = [:]) -> String {
        var o = extra
        o["trace"] = .string("ifmeter/1")
        o["platform"] = .string(header.platform.rawValue)
        if let source = header.source { o["source"] = .string(source) }
        if let host = header.host { o["host"] = .string(host) }
        return JSONWriter().string(.object(o))
    }

    public static func line(_ record: TraceRecord) -> String {
        switch record {
        case .sample(let sample):
            return JSONWriter().string(
                .object([
                    "t": .number(sample.time),
                    "interfaces": .array(sample.interfaces.map(object)),
                ]))
        case .deleted(let event):
            var interface = object(event.interface)
            if case .object(var o) = interface, !event.lowerBound.isEmpty {
                o["lower_bound"] = .array(event.lowerBound.map { .string($0.jsonKey) })
                interface = .object(o)
            }
            return JSONWriter().string(
                .object([
                    "t": .number(event.time),
                    "event": .string("deleted"),
                    "interface": interface,
                ]))
        case .renamed(let event):
            var interface: [String: JSONValue] = ["name": .string(event.to)]
            if let index = event.index { interface["index"] = .number(index) }
            if !event.netns.isEmpty { interface["netns"] = .string(event.netns) }
            return JSONWriter().string(
                .object([
                    "t": .number(event.time), "event": .string("renamed"), "from": .string(event.from),
                    "interface": .object(interface),
                ]))
        case .namespace(let event):
            return JSONWriter().string(
                .object([
                    "t": .number(event.time), "event": .string("namespace-" + event.kind.rawValue), "netns": .string(event.netns),
                ]))
        }
    }

    static func object(_ sample: InterfaceSample) -> JSONValue {
        var o: [String: JSONValue] = ["name": .string(sample.name), "width": .number(sample.width.rawValue)]
        if !sample.netns.isEmpty { o["netns"] = .string(sample.netns) }
        for key in sample.counters.keys { o[key.jsonKey] = .number(sample.counters.value(key)) }
        if let index = sample.index { o["index"] = .number(index) }
        if let c = sample.classification {
            o["kind"] = .string(c.kind.rawValue)
            o["evidence"] = .string(c.evidence)
        }
        if let speed = sample.speedBps { o["speed_bps"] = .number(speed) }
        return .object(o)
    }
}
