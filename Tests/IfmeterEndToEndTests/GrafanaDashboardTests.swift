import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// Issue 48, part 3: `dist/grafana/ifmeter.json` at a thousand interfaces,
/// and its units. Each panel's unit is the unit of what its queries return,
/// derived from the metrics' `# UNIT`, HELP and type in a real serve's
/// OpenMetrics exposition; each line of a time series is named by the labels
/// it is aggregated by; and against a real Prometheus scraping two serves of
/// a thousand interfaces each, every per-interface panel returns at most
/// `$topk` series per host, without `lo`.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct GrafanaDashboardTests {
    static let prometheusPort: UInt16 = 19420
    static let servePorts: [UInt16] = [19421, 19422]

    @Test func everyPanelShowsTheUnitOfWhatItsQueriesReturn() throws {
        try Netns.requireRoot()
        let dashboard = try GrafanaDashboard()
        let metrics = MetricUnits(openMetrics: try PrometheusRulesTests().scrape(openMetrics: true))
        let rules = PrometheusRulesTests.rules(try String(contentsOfFile: PrometheusRulesTests.rulesFile, encoding: .utf8))
        let recorded = Dictionary(rules.filter { !$0.isAlert }.map { ($0.name, $0.expr) }, uniquingKeysWith: { first, _ in first })
        var checked = 0
        for target in dashboard.targets {
            let place = "panel \(target.panelID) '\(target.panel)' \(target.refId)"
            do {
                let expr = try PromQL.parse(target.expr)
                let quantity = try metrics.quantity(of: expr, recorded: recorded)
                let expected = try quantity.grafanaUnit()
                #expect(
                    target.unit == expected,
                    "\(place): shows \(target.unit ?? "no unit"), its query returns \(quantity) (\(expected)): \(target.expr)")
                checked += 1
            } catch {
                Issue.record("\(place): \(error): \(target.expr)")
            }
        }
        // Every override names a field a query of its panel makes.
        for (panel, fields) in dashboard.overriddenFields {
            let made = Set(dashboard.targets.filter { $0.panelID == panel }.flatMap { [$0.refId, "Value #\($0.refId)"] })
            #expect(fields.isSubset(of: made), "panel \(panel) overrides \(fields.sorted()), its queries make \(made.sorted())")
        }
        #expect(checked >= 25, "\(checked) targets")
    }

    /// A line of a time series is named by its legend; a query that returns
    /// labels the legend does not show makes two lines of one name when
    /// they change (a SIGHUP's new external labels: "gw3 CPU" twice).
    @Test func everyLineIsNamedByTheLabelsItIsAggregatedBy() throws {
        let dashboard = try GrafanaDashboard()
        var checked = 0
        for target in dashboard.targets where target.type == "timeseries" {
            let place = "panel \(target.panelID) '\(target.panel)' \(target.refId)"
            let expr = try PromQL.parse(target.expr)
            guard let labels = expr.resultLabels else {
                Issue.record("\(place): returns every label of its series, its legend shows \(target.legendLabels.sorted()): \(target.expr)")
                continue
            }
            #expect(labels == target.legendLabels, "\(place): aggregated by \(labels.sorted()), its legend shows \(target.legendLabels.sorted())")
            checked += 1
        }
        #expect(checked >= 13, "\(checked) targets")
    }

    /// Two hosts of a thousand interfaces each (500 veth pairs in a
    /// namespace of their own, sampled by a serve with `--netns`), scraped
    /// by a real Prometheus. Fifteen pairs of each host move bytes, pair i
    /// 6(i+1) frames each way, and `lo` moves more than any. Each
    /// per-interface panel, evaluated over the range as Grafana asks it
    /// (a range query for a time series, an instant one for a table), gives
    /// each host exactly `$topk` interfaces, those that moved the most, and
    /// never `lo`; with the exclusion emptied, `lo` is the first of each.
    @Test func aThousandInterfacesPerHostShowTopKAndNoLo() throws {
        try Netns.requireRoot()
        // Not beside a test of the whole machine's namespaces (or of a thousand interfaces).
        MachineWideInterfaces.take()
        defer { MachineWideInterfaces.give() }
        let hub = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-grafana-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let targets = Self.servePorts.map { "'127.0.0.1:\($0)'" }.joined(separator: ", ")
        try """
        global:
          scrape_interval: 1s
        scrape_configs:
          - job_name: ifmeter
            static_configs:
              - targets: [\(targets)]
        """.write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)

        let moving = 15
        var hosts: [TestNamespace] = []
        for h in 0..<Self.servePorts.count {
            let host = try TestNamespace()
            let batch = dir + "/links-\(h).batch"
            var lines = (0..<500).map { "link add p\($0)a type veth peer name p\($0)b\n" }
            lines += (0..<moving).flatMap { ["link set p\($0)a up\n", "link set p\($0)b up\n"] }
            try lines.joined().write(toFile: batch, atomically: true, encoding: .utf8)
            try run(["ip", "-n", host.name, "-batch", batch])
            hosts.append(host)
        }
        let prometheus = try Background(
            [
                "ip", "netns", "exec", hub.name, "prometheus", "--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/data",
                "--web.listen-address=127.0.0.1:\(Self.prometheusPort)", "--log.level=warn",
            ], name: "prometheus-grafana")
        defer { _ = prometheus.stop() }
        let api = PrometheusAPI(namespace: hub.name, port: Self.prometheusPort)
        var serves: [Background] = []
        defer { serves.forEach { _ = $0.stop() } }
        for (host, port) in zip(hosts, Self.servePorts) {
            serves.append(
                try Background(
                    [
                        "ip", "netns", "exec", hub.name, try ifmeterBinary(), "serve", "--interval", "500ms", "--listen", "127.0.0.1:\(port)",
                        "--netns", host.name,
                    ], name: "serve-grafana-\(port)"))
        }
        // Both hosts' thousand interfaces and lo are in Prometheus before
        // anything moves: what moves, moves inside the range.
        let count = #"count by (instance) (ifmeter_receive_bytes_total)"#
        _ = try waitFor("both hosts' interfaces in Prometheus", timeout: 180) { () -> Bool? in
            for serve in serves + [prometheus] { try serve.requireRunning() }
            let counts = try api.query(count).compactMap { $0["value"].flatMap(PrometheusAPI.number) }
            return counts.count == hosts.count && counts.allSatisfy { $0 >= 1001 } ? true : nil
        }
        let start = Date()
        for host in hosts {
            for i in 0..<moving {
                try host.waitForCarrier("p\(i)a")
                try host.waitForCarrier("p\(i)b")
                try sendFrames(in: host.name, interface: "p\(i)a", count: 6 * (i + 1))
                try sendFrames(in: host.name, interface: "p\(i)b", count: 6 * (i + 1))
            }
            try sendFrames(in: host.name, interface: "lo", count: 12 * (moving + 5))
        }
        // Prometheus has each host's last frames.
        let last = [
            #"ifmeter_receive_bytes_total{interface="p\#(moving - 1)a"} >= \#(6 * moving * 300)"#,
            // lo counts a frame without its 14-byte Ethernet header.
            #"ifmeter_transmit_bytes_total{interface="lo"} >= \#(12 * (moving + 5) * 286)"#,
        ]
        _ = try waitFor("the frames in Prometheus", timeout: 120) { () -> Bool? in
            for serve in serves + [prometheus] { try serve.requireRunning() }
            return try last.allSatisfy { try api.query($0).count == hosts.count } ? true : nil
        }
        let end = Date().addingTimeInterval(1)
        _ = try waitFor("both hosts scraped after the range's end") { () -> Bool? in
            try api.query("timestamp(ifmeter_build_info) > \(end.timeIntervalSince1970)").count == hosts.count ? true : nil
        }

        let dashboard = try GrafanaDashboard()
        let range = Int((end.timeIntervalSince(start) + 2).rounded(.up))
        let window = (start: end.addingTimeInterval(-Double(range)), end: end)
        var values = dashboard.defaults
        values["__rate_interval"] = "4s"
        values["__range"] = "\(range)s"
        let topk = try #require(Int(values["topk"] ?? ""))
        #expect(values["exclude"] == "lo" && values["moved"] == "0", "the defaults: \(values)")
        // What each host's interfaces moved: pair i both ways, 6(i+1) frames each.
        let top = Set((moving - topk / 2..<moving).flatMap { ["p\($0)a", "p\($0)b"] })
        let perInterface = dashboard.targets.filter { $0.expr.contains("$topk") }
        #expect(Set(perInterface.map(\.panelID)) == [2, 3, 5, 13, 14, 15], "\(perInterface.map(\.panelID))")
        for target in perInterface {
            let place = "panel \(target.panelID) '\(target.panel)' \(target.refId)"
            for moved in ["0", "-1"] {
                values["moved"] = moved
                values["exclude"] = "lo"
                let shown = try api.interfaces(GrafanaDashboard.substitute(target.expr, values), instant: target.instant, window)
                // Traffic and drops (a veth drops frames that are not for
                // it, lo too): the ten that moved the most. Errors: none.
                // Carrier changes: before the range, when the links came up.
                let byTraffic = [2, 3, 5, 14].contains(target.panelID)
                if target.panelID != 15 || moved == "-1" {
                    let hosts = byTraffic || moved == "-1" ? Self.servePorts.map { "127.0.0.1:\($0)" } : []
                    #expect(shown.keys.sorted() == hosts, "\(place) moved=\(moved): hosts \(shown.keys.sorted())")
                }
                for (host, names) in shown {
                    #expect(names.count <= topk, "\(place) moved=\(moved): \(names.count) interfaces of \(host)")
                    #expect(!names.contains("lo"), "\(place) moved=\(moved): lo on \(host)")
                    if byTraffic {
                        #expect(names == top, "\(place) moved=\(moved): \(host) shows \(names.sorted())")
                    } else if moved == "-1" {
                        #expect(names.count == topk, "\(place) moved=\(moved): \(host) shows \(names.sorted())")
                    }
                }
            }
            guard target.panelID <= 5 else { continue }
            // lo is out by the exclusion alone: without it, lo leads.
            values["moved"] = "0"
            values["exclude"] = ""
            let withLo = try api.interfaces(GrafanaDashboard.substitute(target.expr, values), instant: target.instant, window)
            for (host, names) in withLo {
                #expect(names.count == topk && names.contains("lo"), "\(place) without the exclusion: \(host) shows \(names.sorted())")
            }
        }
        // The interface variable's choices leave lo out too.
        let definition = try #require(dashboard.variables.first { $0["name"]?.stringValue == "interface" }?["definition"]?.stringValue)
        values["exclude"] = "lo"
        let choices = try api.labelValues(GrafanaDashboard.substitute(definition, values))
        #expect(
            choices.count >= 1000 && !choices.contains("lo"),
            "\(GrafanaDashboard.substitute(definition, values)): \(choices.count) choices, lo among them: \(choices.contains("lo"))")
        print("grafana: \(perInterface.count) per-interface queries over \(range) s, 2 hosts of 1001 interfaces, \(topk) each")
    }
}

/// A Prometheus's HTTP API, in a namespace.
struct PrometheusAPI {
    let namespace: String
    let port: UInt16

    static func number(_ value: JSONValue) -> Double? {
        guard case .array(let pair) = value, pair.count == 2 else { return nil }
        return pair[1].stringValue.flatMap(Double.init)
    }

    func get(_ path: String, _ parameters: [(String, String)]) throws -> JSONValue {
        let query = parameters.map { key, value in
            [key, value].map { $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }.joined(separator: "=")
        }.joined(separator: "&")
        let response = try RawHTTP.request("\(path)?\(query)", port: port, in: namespace, timeout: 60)
        let json = try JSONParser.parse(response.text)
        guard json["status"]?.stringValue == "success" else {
            throw TestFailure("\(parameters): \(json["error"]?.stringValue ?? response.text)")
        }
        return json
    }

    func query(_ promql: String) throws -> [JSONValue] {
        guard case .array(let result)? = try get("/api/v1/query", [("query", promql)])["data"]?["result"] else { return [] }
        return result
    }

    /// The `interface` label of each series `promql` returns, per
    /// `instance`: at the window's end (instant), or at any step of it.
    func interfaces(_ promql: String, instant: Bool, _ window: (start: Date, end: Date)) throws -> [String: Set<String>] {
        let end = String(window.end.timeIntervalSince1970)
        let json =
            instant
            ? try get("/api/v1/query", [("query", promql), ("time", end)])
            : try get(
                "/api/v1/query_range", [("query", promql), ("start", String(window.start.timeIntervalSince1970)), ("end", end), ("step", "1")])
        guard case .array(let result)? = json["data"]?["result"] else { return [:] }
        var shown: [String: Set<String>] = [:]
        for series in result {
            guard let instance = series["metric"]?["instance"]?.stringValue, let interface = series["metric"]?["interface"]?.stringValue else {
                throw TestFailure("\(promql): a series without instance or interface: \(series)")
            }
            shown[instance, default: []].insert(interface)
        }
        return shown
    }

    /// What Grafana lists for `label_values(SELECTOR, LABEL)`: Prometheus's
    /// values of LABEL among the series SELECTOR matches.
    func labelValues(_ definition: String) throws -> Set<String> {
        guard definition.hasPrefix("label_values("), let comma = definition.lastIndex(of: ",") else {
            throw TestFailure("not label_values(SELECTOR, LABEL): \(definition)")
        }
        let selector = String(definition[definition.index(definition.startIndex, offsetBy: 13)..<comma])
        let label = definition[definition.index(after: comma)...].dropLast().trimmingCharacters(in: .whitespaces)
        guard case .array(let values)? = try get("/api/v1/label/\(label)/values", [("match[]", selector)])["data"] else { return [] }
        return Set(values.compactMap(\.stringValue))
    }
}

/// `dist/grafana/ifmeter.json` as Grafana reads it: each panel's queries
/// with the unit of the field each makes, and its variables.
struct GrafanaDashboard {
    static let path = repositoryRoot.appendingPathComponent("dist/grafana/ifmeter.json").path

    struct Target {
        var panelID: Int
        var panel: String
        var type: String
        var refId: String
        var expr: String
        var instant: Bool
        /// The unit Grafana formats this query's values with: an override
        /// of its field (by query, or by name in a table), or the panel's.
        var unit: String?
        /// The labels `{{label}}` of its legend.
        var legendLabels: Set<String>
    }

    let panels: [JSONValue]
    let variables: [JSONValue]

    init() throws {
        let json = try JSONParser.parse(try String(contentsOfFile: Self.path, encoding: .utf8))
        guard case .array(let panels)? = json["panels"], case .array(let variables)? = json["templating"]?["list"] else {
            throw TestFailure("no panels or variables in \(Self.path)")
        }
        self.panels = panels.filter { $0["type"]?.stringValue != "row" }
        self.variables = variables
    }

    /// Each override's field (a query's refId or a table's column name), per panel.
    var overriddenFields: [Int: Set<String>] {
        var fields: [Int: Set<String>] = [:]
        for panel in panels {
            guard let id = panel["id"]?.doubleValue.map({ Int($0) }), case .array(let overrides)? = panel["fieldConfig"]?["overrides"] else {
                continue
            }
            for override in overrides {
                if let field = override["matcher"]?["options"]?.stringValue { fields[id, default: []].insert(field) }
            }
        }
        return fields
    }

    var targets: [Target] {
        panels.flatMap { panel -> [Target] in
            guard case .array(let targets)? = panel["targets"] else { return [] }
            let overrides: [JSONValue]
            if case .array(let list)? = panel["fieldConfig"]?["overrides"] { overrides = list } else { overrides = [] }
            func overriddenUnit(_ matcher: String, _ field: String) -> String? {
                for override in overrides where override["matcher"]?["id"]?.stringValue == matcher {
                    guard override["matcher"]?["options"]?.stringValue == field, case .array(let properties)? = override["properties"] else {
                        continue
                    }
                    if let unit = properties.first(where: { $0["id"]?.stringValue == "unit" })?["value"]?.stringValue { return unit }
                }
                return nil
            }
            return targets.map { target in
                let refId = target["refId"]?.stringValue ?? ""
                let legend = target["legendFormat"]?.stringValue ?? ""
                var labels: Set<String> = []
                var rest = Substring(legend)
                while let open = rest.range(of: "{{"), let close = rest[open.upperBound...].range(of: "}}") {
                    labels.insert(rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces))
                    rest = rest[close.upperBound...]
                }
                let unit =
                    overriddenUnit("byFrameRefID", refId) ?? overriddenUnit("byName", targets.count > 1 ? "Value #\(refId)" : "Value")
                    ?? panel["fieldConfig"]?["defaults"]?["unit"]?.stringValue
                return Target(
                    panelID: Int(panel["id"]?.doubleValue ?? -1), panel: panel["title"]?.stringValue ?? "?", type: panel["type"]?.stringValue ?? "?",
                    refId: refId, expr: target["expr"]?.stringValue ?? "", instant: target["instant"] == .bool(true), unit: unit,
                    legendLabels: labels)
            }
        }
    }

    /// Each variable as the dashboard opens: a query variable at all of its
    /// values (its allValue), the others at their saved current value.
    var defaults: [String: String] {
        var values: [String: String] = [:]
        for variable in variables {
            guard let name = variable["name"]?.stringValue else { continue }
            if variable["type"]?.stringValue == "query" {
                values[name] = variable["allValue"]?.stringValue ?? ".*"
            } else if let value = variable["current"]?["value"]?.stringValue {
                values[name] = value
            }
        }
        return values
    }

    /// `expr` with `$name` and `${name}` replaced by `values[name]`, as
    /// Grafana does before it sends a query (longer names first: `$__range`
    /// is not the start of `$__rate_interval`).
    static func substitute(_ expr: String, _ values: [String: String]) -> String {
        var text = expr
        for (name, value) in values.sorted(by: { $0.key.count > $1.key.count }) {
            text = text.replacingOccurrences(of: "${\(name)}", with: value).replacingOccurrences(of: "$\(name)", with: value)
        }
        return text
    }
}

// MARK: units

/// What a query's values are, as far as a unit goes.
enum Quantity: Equatable, CustomStringConvertible {
    case bytes, bytesPerSecond, packets, packetsPerSecond, count, countPerSecond
    case seconds, ratio, unixSeconds, unixMilliseconds
    /// A series whose labels are what it says (an info or a 0/1 flag).
    case label
    /// A number in the query (a literal, a variable).
    case scalar(Double?)

    var description: String {
        switch self {
        case .bytes: "bytes"
        case .bytesPerSecond: "bytes per second"
        case .packets: "packets"
        case .packetsPerSecond: "packets per second"
        case .count: "a count"
        case .countPerSecond: "a count per second"
        case .seconds: "seconds"
        case .ratio: "a ratio"
        case .unixSeconds: "a Unix time in seconds"
        case .unixMilliseconds: "a Unix time in milliseconds"
        case .label: "labels (a value of 1)"
        case .scalar(let value): "the number \(value.map { String($0) } ?? "of a variable")"
        }
    }

    /// Grafana's unit for it.
    func grafanaUnit() throws -> String {
        switch self {
        case .bytes: "bytes"
        case .bytesPerSecond: "Bps"
        case .packets, .count: "short"
        case .packetsPerSecond: "pps"
        case .countPerSecond: "cps"
        case .seconds: "s"
        case .ratio: "percentunit"
        case .unixMilliseconds: "dateTimeAsIso"
        case .label: "none"
        case .unixSeconds: throw TestFailure("a Unix time in seconds has no Grafana unit: subtract it from time(), or multiply it by 1000 for a date")
        case .scalar: throw TestFailure("a query of a number alone")
        }
    }
}

/// Each family's quantity, from a real OpenMetrics exposition: its
/// `# UNIT` (bytes, seconds), `# TYPE` (info) and HELP (a 0/1 flag, a Unix
/// time, packets).
struct MetricUnits {
    struct Family {
        var type = "", unit = "", help = ""
    }
    var families: [String: Family] = [:]

    init(openMetrics text: String) {
        for line in text.split(separator: "\n") where line.hasPrefix("# ") {
            let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
            guard parts.count >= 3 else { continue }
            let name = String(parts[2]), value = parts.count > 3 ? String(parts[3]) : ""
            switch parts[1] {
            case "TYPE": families[name, default: Family()].type = value
            case "UNIT": families[name, default: Family()].unit = value
            case "HELP": families[name, default: Family()].help = value
            default: break
            }
        }
    }

    /// The family a series name belongs to.
    func family(ofSeries name: String) -> (name: String, family: Family)? {
        for (suffix, type) in [("", ""), ("_total", "counter"), ("_info", "info")] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if let family = families[base], type.isEmpty || family.type == type { return (base, family) }
        }
        return nil
    }

    func quantity(ofSeries name: String) throws -> Quantity {
        guard let found = family(ofSeries: name) else { throw TestFailure("\(name) is not in serve's exposition") }
        let base = found.name, family = found.family
        if family.type == "info" || family.help.hasPrefix("1 ") { return .label }
        switch family.unit {
        case "bytes": return .bytes
        case "seconds":
            return base.hasSuffix("_timestamp_seconds") || family.help.contains("Unix time") || family.help.contains("since unix epoch")
                ? .unixSeconds : .seconds
        case "": return family.help.lowercased().contains("packets") ? .packets : .count
        default: throw TestFailure("\(base)'s unit \(family.unit) is not one this check knows")
        }
    }

    /// The quantity of what `expr` returns; `recorded` holds the recording
    /// rules' expressions, by name.
    func quantity(of expr: PromQL, recorded: [String: String], seen: Set<String> = []) throws -> Quantity {
        func of(_ e: PromQL) throws -> Quantity { try quantity(of: e, recorded: recorded, seen: seen) }
        switch expr {
        case .number(let value): return .scalar(value)
        case .string: throw TestFailure("a string")
        case .selector(let name, _):
            if let name, name.contains(":") {
                guard let rule = recorded[name] else { throw TestFailure("no rule records \(name)") }
                guard !seen.contains(name) else { throw TestFailure("\(name) reads itself") }
                return try quantity(of: try PromQL.parse(rule), recorded: recorded, seen: seen.union([name]))
            }
            guard let name else { throw TestFailure("a selector without a metric name") }
            return try quantity(ofSeries: name)
        case .call(let function, let arguments):
            switch (function, arguments.count) {
            case ("time", 0): return .unixSeconds
            case ("timestamp", 1): return .unixSeconds
            case ("rate", 1), ("irate", 1):
                switch try of(arguments[0]) {
                case .bytes: return .bytesPerSecond
                case .packets: return .packetsPerSecond
                case .count: return .countPerSecond
                case .seconds: return .ratio
                case let other: throw TestFailure("\(function) of \(other)")
                }
            case ("increase", 1), ("delta", 1):
                let counted = try of(arguments[0])
                guard [Quantity.bytes, .packets, .count, .seconds].contains(counted) else { throw TestFailure("\(function) of \(counted)") }
                return counted
            default: throw TestFailure("\(function)() with \(arguments.count) arguments is not one this check knows")
            }
        case .aggregation(let name, let arguments, _):
            switch (name, arguments.count) {
            case ("sum", 1), ("min", 1), ("max", 1), ("avg", 1): return try of(arguments[0])
            case ("topk", 2), ("bottomk", 2): return try of(arguments[1])
            case ("count", 1): return .count
            default: throw TestFailure("\(name)() with \(arguments.count) arguments is not one this check knows")
            }
        case .negation(let operand): return try of(operand)
        case .binary(let op, let lhs, let rhs):
            switch op {
            case "and", "unless": return try of(lhs)
            case "or":
                let left = try of(lhs)
                if let right = try? of(rhs), right != left { throw TestFailure("or of \(left) and \(right)") }
                return left
            case "==", "!=", ">", "<", ">=", "<=":
                // A filter: what passes keeps its value.
                let left = try of(lhs)
                if case .scalar = left { return try of(rhs) }
                return left
            default:
                let left = try of(lhs), right = try of(rhs)
                switch (op, left, right) {
                case ("-", .unixSeconds, .unixSeconds): return .seconds
                case ("+", _, _) where left == right, ("-", _, _) where left == right: return left
                case ("/", _, _) where left == right && [Quantity.bytes, .seconds, .count, .packets].contains(left): return .ratio
                case ("*", .unixSeconds, .scalar(let factor)) where factor == 1000: return .unixMilliseconds
                default: throw TestFailure("\(left) \(op) \(right): its unit is not one this check knows (a scale changes the figures, not the unit)")
                }
            }
        }
    }
}

// MARK: PromQL, parsed as far as units and labels need

/// A PromQL expression: Grafana's variables (`$topk`) read as numbers,
/// ranges, offsets and `@` modifiers skipped.
indirect enum PromQL {
    struct Matcher {
        var label: String, op: String, value: String
    }
    case number(Double?)
    case string(String)
    case selector(String?, [Matcher])
    case call(String, [PromQL])
    /// An aggregation and the labels it keeps (`by`), nil for `without`.
    case aggregation(String, [PromQL], by: [String]?)
    case negation(PromQL)
    case binary(String, PromQL, PromQL)

    static let aggregations: Set<String> = [
        "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
    ]

    /// The labels of what it returns, when an aggregation decides them
    /// (nil: every label of the series it reads).
    var resultLabels: Set<String>? {
        switch self {
        case .aggregation(let name, _, let by): return ["topk", "bottomk"].contains(name) ? nil : by.map { Set($0) }
        case .negation(let operand): return operand.resultLabels
        case .binary(let op, let lhs, let rhs):
            // A filter or a set operation keeps the left side's labels;
            // arithmetic between a vector and a number keeps the vector's.
            if case .number = rhs { return lhs.resultLabels }
            if case .number = lhs { return rhs.resultLabels }
            return ["and", "unless", "==", "!=", ">", "<", ">=", "<="].contains(op) ? lhs.resultLabels : nil
        default: return nil
        }
    }

    static func parse(_ text: String) throws -> PromQL {
        var parser = Parser(tokens: try tokenize(text), text: text)
        let expr = try parser.expression(0)
        guard parser.i == parser.tokens.count else { throw TestFailure("PromQL: \(parser.tokens[parser.i]) left over in \(text)") }
        return expr
    }

    enum Token: Equatable {
        case identifier(String), number(Double?), string(String), op(String)
    }

    static func tokenize(_ text: String) throws -> [Token] {
        let chars = Array(text)
        var tokens: [Token] = []
        var i = 0
        func isName(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber || c == "_" || c == ":") }
        while i < chars.count {
            let c = chars[i]
            if c.isWhitespace {
                i += 1
            } else if c == "$" {
                // A Grafana variable: a number where one is expected.
                i += 1
                if i < chars.count, chars[i] == "{" { i += 1 }
                while i < chars.count, isName(chars[i]) { i += 1 }
                if i < chars.count, chars[i] == "}" { i += 1 }
                tokens.append(.number(nil))
            } else if c.isASCII, c.isNumber || (c == "." && i + 1 < chars.count && chars[i + 1].isNumber) {
                let start = i
                while i < chars.count, chars[i].isASCII, chars[i].isNumber || chars[i].isLetter || chars[i] == "." { i += 1 }
                tokens.append(.number(Double(String(chars[start..<i]))))
            } else if c.isASCII, c.isLetter || c == "_" || c == ":" {
                let start = i
                while i < chars.count, isName(chars[i]) { i += 1 }
                tokens.append(.identifier(String(chars[start..<i])))
            } else if c == "\"" || c == "'" || c == "`" {
                var value = ""
                i += 1
                while i < chars.count, chars[i] != c {
                    if chars[i] == "\\", c != "`", i + 1 < chars.count { i += 1 }
                    value.append(chars[i])
                    i += 1
                }
                guard i < chars.count else { throw TestFailure("PromQL: an unclosed string in \(text)") }
                i += 1
                tokens.append(.string(value))
            } else {
                let two = i + 1 < chars.count ? String(chars[i...i + 1]) : ""
                if ["==", "!=", ">=", "<=", "=~", "!~"].contains(two) {
                    tokens.append(.op(two))
                    i += 2
                } else if "(){}[],@+-*/%^<>=".contains(c) {
                    tokens.append(.op(String(c)))
                    i += 1
                } else {
                    throw TestFailure("PromQL: \(c) in \(text)")
                }
            }
        }
        return tokens
    }

    struct Parser {
        let tokens: [Token]
        let text: String
        var i = 0

        static let precedence: [String: Int] = [
            "or": 1, "and": 2, "unless": 2, "==": 3, "!=": 3, ">": 3, "<": 3, ">=": 3, "<=": 3, "+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "^": 6,
        ]

        var next: Token? { i < tokens.count ? tokens[i] : nil }

        mutating func expect(_ op: String) throws {
            guard next == .op(op) else { throw TestFailure("PromQL: expected \(op) at token \(i) of \(text)") }
            i += 1
        }

        mutating func binaryOperator() -> String? {
            switch next {
            case .op(let op)? where Self.precedence[op] != nil: return op
            case .identifier(let word)? where ["and", "or", "unless"].contains(word): return word
            default: return nil
            }
        }

        mutating func expression(_ minimum: Int) throws -> PromQL {
            var lhs = try unary()
            while let op = binaryOperator(), let level = Self.precedence[op], level > minimum {
                i += 1
                // bool, on(...), ignoring(...), group_left(...), group_right(...)
                while case .identifier(let word)? = next, ["bool", "on", "ignoring", "group_left", "group_right"].contains(word) {
                    i += 1
                    if word != "bool", next == .op("(") { _ = try labels() }
                }
                let rhs = try expression(op == "^" ? level - 1 : level)
                lhs = .binary(op, lhs, rhs)
            }
            return lhs
        }

        mutating func unary() throws -> PromQL {
            if next == .op("-") {
                i += 1
                return .negation(try unary())
            }
            if next == .op("+") { i += 1 }
            return try postfix(try primary())
        }

        mutating func labels() throws -> [String] {
            try expect("(")
            var names: [String] = []
            while case .identifier(let name)? = next {
                names.append(name)
                i += 1
                if next == .op(",") { i += 1 }
            }
            try expect(")")
            return names
        }

        mutating func arguments() throws -> [PromQL] {
            try expect("(")
            var arguments: [PromQL] = []
            while next != .op(")") {
                arguments.append(try expression(0))
                if next == .op(",") { i += 1 } else { break }
            }
            try expect(")")
            return arguments
        }

        mutating func primary() throws -> PromQL {
            switch next {
            case .number(let value)?:
                i += 1
                return .number(value)
            case .string(let value)?:
                i += 1
                return .string(value)
            case .op("(")?:
                i += 1
                let inner = try expression(0)
                try expect(")")
                return inner
            case .op("{")?:
                return .selector(nil, try matchers())
            case .identifier(let name)?:
                i += 1
                if PromQL.aggregations.contains(name), next == .op("(") || next == .identifier("by") || next == .identifier("without") {
                    // No by or without: no label kept.
                    var kept: [String]? = []
                    for _ in 0..<2 {
                        if case .identifier(let word)? = next, word == "by" || word == "without" {
                            i += 1
                            let names = try labels()
                            kept = word == "by" ? names : nil
                        } else if next == .op("(") {
                            let arguments = try arguments()
                            if case .identifier(let word)? = next, word == "by" || word == "without" {
                                i += 1
                                let names = try labels()
                                kept = word == "by" ? names : nil
                            }
                            return .aggregation(name, arguments, by: kept)
                        }
                    }
                    throw TestFailure("PromQL: \(name) without its arguments in \(text)")
                }
                if next == .op("(") { return .call(name, try arguments()) }
                return .selector(name, next == .op("{") ? try matchers() : [])
            default:
                throw TestFailure("PromQL: unexpected \(next.map { "\($0)" } ?? "end") at token \(i) of \(text)")
            }
        }

        mutating func matchers() throws -> [Matcher] {
            try expect("{")
            var matchers: [Matcher] = []
            while case .identifier(let label)? = next {
                i += 1
                guard case .op(let op)? = next, ["=", "!=", "=~", "!~"].contains(op) else {
                    throw TestFailure("PromQL: a matcher of \(label) in \(text)")
                }
                i += 1
                guard case .string(let value)? = next else { throw TestFailure("PromQL: a matcher's value in \(text)") }
                i += 1
                matchers.append(Matcher(label: label, op: op, value: value))
                if next == .op(",") { i += 1 }
            }
            try expect("}")
            return matchers
        }

        /// `[range]`, `[range:step]`, `offset d`, `@ end()`: skipped.
        mutating func postfix(_ expr: PromQL) throws -> PromQL {
            while true {
                if next == .op("[") {
                    while i < tokens.count, next != .op("]") { i += 1 }
                    try expect("]")
                } else if next == .op("@") {
                    i += 1
                    if case .identifier? = next {
                        i += 1
                        _ = try arguments()
                    } else {
                        i += 1
                    }
                } else if next == .identifier("offset") {
                    i += 2
                } else {
                    return expr
                }
            }
        }
    }
}
