import IfmeterCore

/// A meter's saved state as JSON (IfmeterCore's writer and strict parser;
/// no Foundation): which source and boot it belongs to, and each
/// interface's totals and last counters, as the engine saves them.
///
///     {"format": "ifmeter-meter-state/1", "source": "getifaddrs",
///      "boot": "…", "saved_at": 5123.4,
///      "interfaces": [{"name": "en0", "kind": "wifi", "evidence": "name:en0",
///        "index": 4, "width": 32, "speed_bps": null,
///        "totals": {"rx_bytes": 1200, …}, "baseline": {…},
///        "quality": "exact", "events": {"wraps": 0, …},
///        "first_seen": 10.0, "last_seen": 5120.0, "deleted_at": null,
///        "last": {"rx_bytes": 90000, …}, "last_time": 5120.0}]}
///
/// Reading refuses what the engine must never be given: counters that are
/// not integers from 0 to 2^64-1, an index outside 0 to 2^31-1, a time that
/// is not a number within ±1e12 s, a count outside 0 to 2^32-1, a quality
/// or width it does not know, and one name twice.
struct SavedMeter {
    static let format = "ifmeter-meter-state/1"

    var source: TrafficMeter.Source
    var boot: String?
    var savedAt: Double
    var series: [DeltaEngine.SavedSeries]

    init(source: TrafficMeter.Source, boot: String?, savedAt: Double, series: [DeltaEngine.SavedSeries]) {
        self.source = source
        self.boot = boot
        self.savedAt = savedAt
        self.series = series
    }

    // MARK: Writing

    var json: String {
        let interfaces = series.map { item -> JSONValue in
            let t = item.totals
            return .object([
                "name": .string(t.name),
                "kind": .string(t.classification.kind.rawValue),
                "evidence": .string(t.classification.evidence),
                "index": t.index.map { .number($0) } ?? .null,
                "width": .number(t.width.rawValue),
                "speed_bps": t.speedBps.map { .number($0) } ?? .null,
                "totals": Self.write(t.totals),
                "baseline": Self.write(t.baseline),
                "quality": .string(t.quality.name),
                "events": .object([
                    "wraps": .number(t.events.wraps), "resets": .number(t.events.resets),
                    "recreations": .number(t.events.recreations), "deletions": .number(t.events.deletions),
                ]),
                "first_seen": .number(t.firstSeen),
                "last_seen": .number(t.lastSeen),
                "deleted_at": t.deletedAt.map { .number($0) } ?? .null,
                "last": item.last.map { Self.write($0.counters) } ?? .null,
                "last_time": .number(item.lastTime),
            ])
        }
        return JSONWriter().string(
            .object([
                "format": .string(Self.format),
                "source": .string(source.rawValue),
                "boot": boot.map { .string($0) } ?? .null,
                "saved_at": .number(savedAt),
                "interfaces": .array(interfaces),
            ]))
    }

    private static func write(_ counters: Counters) -> JSONValue {
        var members: [String: JSONValue] = [:]
        for key in counters.keys { members[key.jsonKey] = .number(counters.value(key)) }
        return .object(members)
    }

    // MARK: Reading

    init(json text: String) throws(MeterError) {
        let root: JSONValue
        do {
            root = try JSONParser.parse(text)
        } catch {
            throw .invalidState("not JSON: \(error.description)")
        }
        guard root["format"]?.stringValue == Self.format else {
            throw .invalidState("not a meter's saved state (\"format\" is not \"\(Self.format)\")")
        }
        guard let name = root["source"]?.stringValue, let source = TrafficMeter.Source(rawValue: name) else {
            throw .invalidState("\"source\" must be \"getifaddrs\", \"netlink\" or \"sysctl\"")
        }
        self.source = source
        switch root["boot"] {
        case .string(let boot)?: self.boot = boot
        case .null?: self.boot = nil
        default: throw .invalidState("\"boot\" must be a string or null")
        }
        savedAt = try Self.time(root["saved_at"], "saved_at")
        guard case .array(let items)? = root["interfaces"] else { throw .invalidState("\"interfaces\" must be an array") }
        var seen = Set<String>()
        series = []
        for (n, item) in items.enumerated() {
            let saved = try Self.series(item, at: n)
            guard seen.insert(saved.totals.name).inserted else {
                throw .invalidState("interfaces[\(n)]: \"\(saved.totals.name)\" is saved twice")
            }
            series.append(saved)
        }
    }

    private static func series(_ item: JSONValue, at n: Int) throws(MeterError) -> DeltaEngine.SavedSeries {
        let at = "interfaces[\(n)]"
        guard case .object = item, let name = item["name"]?.stringValue, !name.isEmpty else {
            throw .invalidState("\(at): \"name\" must be a non-empty string")
        }
        let here = "\(at) (\"\(name)\")"
        guard let kindName = item["kind"]?.stringValue, let evidence = item["evidence"]?.stringValue else {
            throw .invalidState("\(here): \"kind\" and \"evidence\" must be strings")
        }
        let classification = Classification(kind: IfmeterCore.InterfaceKind(rawValue: kindName) ?? .other, evidence: evidence)
        var index: Int?
        if let value = item["index"], value != .null {
            guard let number = value.uint64Value, number <= UInt64(Int32.max) else {
                throw .invalidState("\(here): \"index\" must be an interface index from 0 to 2147483647 or null")
            }
            index = Int(number)
        }
        guard let widthValue = item["width"]?.uint64Value, let width = CounterWidth(rawValue: Int(clamping: widthValue)) else {
            throw .invalidState("\(here): \"width\" must be 32 or 64")
        }
        var speed: UInt64?
        if let value = item["speed_bps"], value != .null {
            guard let number = value.uint64Value else { throw .invalidState("\(here): \"speed_bps\" must be an unsigned integer or null") }
            speed = number
        }
        guard let qualityName = item["quality"]?.stringValue, let quality = IfmeterCore.Quality(name: qualityName) else {
            throw .invalidState("\(here): \"quality\" must be exact, wrap-corrected or lower-bound")
        }
        var events = EventCounts()
        for (key, path) in [("wraps", \EventCounts.wraps), ("resets", \.resets), ("recreations", \.recreations), ("deletions", \.deletions)] {
            guard let count = item["events"]?[key]?.uint64Value, count <= UInt64(UInt32.max) else {
                throw .invalidState("\(here): events \"\(key)\" must be a count from 0 to 4294967295")
            }
            events[keyPath: path] = Int(count)
        }
        var deletedAt: Double?
        if let value = item["deleted_at"], value != .null { deletedAt = try time(value, "\(here): deleted_at") }
        let totals = InterfaceTotals(
            name: name, classification: classification, index: index, width: width, speedBps: speed, attributes: nil,
            totals: try counters(item["totals"], "\(here): totals"), quality: quality, events: events,
            baseline: try counters(item["baseline"], "\(here): baseline"), lastKernelStats: nil,
            firstSeen: try time(item["first_seen"], "\(here): first_seen"), lastSeen: try time(item["last_seen"], "\(here): last_seen"),
            present: false, deletedAt: deletedAt)
        var last: InterfaceSample?
        if let value = item["last"], value != .null {
            let counters = try counters(value, "\(here): last")
            guard counters.hasRequired else { throw .invalidState("\(here): last must hold rx_bytes, tx_bytes, rx_packets and tx_packets") }
            last = InterfaceSample(
                name: name, index: index, classification: classification, width: width, speedBps: speed, counters: counters)
        }
        return DeltaEngine.SavedSeries(totals: totals, last: last, lastTime: try time(item["last_time"], "\(here): last_time"))
    }

    private static func counters(_ value: JSONValue?, _ what: String) throws(MeterError) -> Counters {
        guard case .object(let members)? = value else { throw .invalidState("\(what) must be an object of counters") }
        var counters = Counters()
        for (name, number) in members {
            guard let key = CounterKey(jsonKey: name) else { throw .invalidState("\(what): \"\(name)\" is no counter") }
            guard let count = number.uint64Value else {
                throw .invalidState("\(what): \"\(name)\" must be an unsigned integer up to 2^64-1")
            }
            counters[key] = count
        }
        return counters
    }

    private static func time(_ value: JSONValue?, _ what: String) throws(MeterError) -> Double {
        guard let seconds = value?.doubleValue, seconds.isFinite, abs(seconds) <= 1e12 else {
            throw .invalidState("\(what) must be a time in seconds within ±1e12")
        }
        return seconds
    }
}
