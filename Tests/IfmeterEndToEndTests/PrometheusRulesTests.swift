import Foundation
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The recording rules and alerts shipped in `dist/prometheus/`: promtool
/// checks them and runs their test suite, every alert has a case that fires
/// and one that does not, and every metric and label they use is in what a
/// real `ifmeter serve` exposes (with a plan, a probe, a tunnel, another
/// namespace and remote write, so that every family is there).
@Suite(.blocking)
struct PrometheusRulesTests {
    static let folder = repositoryRoot.appendingPathComponent("dist/prometheus")
    /// IFMETER_RULES checks another copy of the rules (to see the test fail).
    static let rulesFile =
        ProcessInfo.processInfo.environment["IFMETER_RULES"] ?? folder.appendingPathComponent("ifmeter-rules.yml").path
    static let testsFile = folder.appendingPathComponent("ifmeter-rules-test.yml").path
    static let port: UInt16 = 39_517
    /// Labels Prometheus adds to every series of a target.
    static let targetLabels: Set<String> = ["job", "instance"]

    static func promtool() throws -> String {
        let found = try run(["sh", "-c", "command -v promtool"], allowFailure: true)
        let path = found.out.trimmingCharacters(in: .whitespacesAndNewlines)
        guard found.status == 0, !path.isEmpty else {
            throw TestFailure("no promtool in PATH: install Debian's prometheus package (make test does)")
        }
        return path
    }

    @Test func promtoolChecksTheRules() throws {
        let result = try run([try Self.promtool(), "check", "rules", Self.rulesFile], allowFailure: true)
        #expect(result.status == 0 && result.out.contains("SUCCESS"), "promtool check rules: \(result.out)\(result.err)")
    }

    @Test func promtoolRunsTheRulesTests() throws {
        let result = try run([try Self.promtool(), "test", "rules", Self.testsFile], allowFailure: true)
        #expect(result.status == 0 && result.out.contains("SUCCESS"), "promtool test rules: \(result.out)\(result.err)")
    }

    /// Each alert of the rules has a test case that expects it to fire and
    /// one that expects it not to (`exp_alerts: []`).
    @Test func everyAlertIsTestedFiringAndNot() throws {
        let rules = Self.rules(try String(contentsOfFile: Self.rulesFile, encoding: .utf8))
        let alerts = rules.filter(\.isAlert).map(\.name)
        #expect(alerts.count >= 8, "\(alerts)")
        var fires: Set<String> = [], silent: Set<String> = []
        var current: String?
        for line in try String(contentsOfFile: Self.testsFile, encoding: .utf8).components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("- alertname:") {
                current = trimmed.dropFirst("- alertname:".count).trimmingCharacters(in: .whitespaces)
            } else if let alert = current, trimmed == "exp_alerts: []" {
                silent.insert(alert)
                current = nil
            } else if let alert = current, trimmed.hasPrefix("- exp_labels:") {
                fires.insert(alert)
                current = nil
            }
        }
        for alert in alerts {
            #expect(fires.contains(alert), "no test case where \(alert) fires")
            #expect(silent.contains(alert), "no test case where \(alert) does not fire")
        }
    }

    /// Each alert points an on-call person at its own runbook: a
    /// `runbook_url` whose anchor is a heading of docs/alerts.md.
    @Test func everyAlertHasARunbookThatExists() throws {
        let rules = Self.rules(try String(contentsOfFile: Self.rulesFile, encoding: .utf8)).filter(\.isAlert)
        let anchors = Markdown.anchors(try String(contentsOf: repositoryRoot.appendingPathComponent("docs/alerts.md"), encoding: .utf8))
        for rule in rules {
            let line = rule.text.components(separatedBy: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("runbook_url:") }
            guard let line, let hash = line.firstIndex(of: "#") else {
                Issue.record("\(rule.name) has no runbook_url with an anchor")
                continue
            }
            let anchor = String(line[line.index(after: hash)...]).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
            #expect(anchor == rule.name.lowercased(), "\(rule.name)'s runbook is its own section: \(line)")
            #expect(anchors.contains(anchor), "\(rule.name): docs/alerts.md has no heading #\(anchor)")
            // Issue 48: the alerting host's serve answers the page (a file
            // URL named the viewer's own disk, which no browser follows).
            #expect(
                line.contains("runbook_url: \"http://{{ stripPort $labels.instance }}:9874/runbooks#"), "the alerting host's serve: \(line)")
        }
        #expect(rules.count >= 17, "\(rules.map(\.name))")
    }

    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func everyMetricAndLabelTheRulesUseIsServed() throws {
        try Netns.requireRoot()
        let rules = Self.rules(try String(contentsOfFile: Self.rulesFile, encoding: .utf8))
        #expect(!rules.isEmpty)
        let exposition = Exposition(try scrape())

        let recorded = Dictionary(rules.filter { !$0.isAlert }.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        /// The labels a metric's series carry: served ones from the scrape,
        /// recorded ones from the metrics of their expression.
        func labels(of metric: String, seen: Set<String> = []) -> Set<String> {
            guard let rule = recorded[metric] else { return exposition.labels[metric] ?? [] }
            guard !seen.contains(metric) else { return [] }
            return Self.parse(rule.expr).metrics.reduce(into: Set<String>()) { $0.formUnion(labels(of: $1, seen: seen.union([metric]))) }
        }

        for rule in rules {
            let expr = Self.parse(rule.expr)
            #expect(!expr.metrics.isEmpty, "\(rule.name): no metric in \(rule.expr)")
            for metric in expr.metrics {
                if metric.contains(":") {
                    #expect(recorded[metric] != nil, "\(rule.name) uses \(metric), which no rule records")
                } else {
                    #expect(exposition.labels[metric] != nil, "\(rule.name) uses \(metric), which serve does not expose")
                }
            }
            for selector in expr.selectors {
                let available = labels(of: selector.metric)
                for matcher in selector.matchers {
                    #expect(
                        available.contains(matcher.label),
                        "\(rule.name) matches \(matcher.label) on \(selector.metric), whose labels are \(available.sorted())")
                    // A plain value must be one serve gives (quality="lower-bound", kind="tunnel").
                    if matcher.op == "=", !matcher.value.isEmpty, recorded[selector.metric] == nil {
                        let values = exposition.values[selector.metric]?[matcher.label] ?? []
                        #expect(
                            values.contains(matcher.value),
                            "\(rule.name) matches \(matcher.label)=\"\(matcher.value)\" on \(selector.metric), which has \(values.sorted())")
                    }
                }
            }
            let inExpression = expr.metrics.reduce(into: Self.targetLabels) { $0.formUnion(labels(of: $1)) }
            for label in expr.grouping {
                #expect(inExpression.contains(label), "\(rule.name) groups or matches on \(label), which none of \(expr.metrics) has")
            }
            for label in Self.templateLabels(rule.text) {
                #expect(inExpression.contains(label), "\(rule.name)'s annotations use $labels.\(label), which none of \(expr.metrics) has")
            }
            // Metrics named in annotations (what to look at) exist too.
            for name in Self.metricNames(rule.text) {
                #expect(exposition.labels[name] != nil, "\(rule.name) names \(name), which serve does not expose")
            }
        }
    }

    /// One scrape of `ifmeter serve` with `--state` and a plan on a veth,
    /// and `--probe` routed by a tun whose underlay is the veth. serve runs
    /// in the veth pair's B and samples A (`--netns`, which asks A's routes
    /// too), so the interfaces carry the `netns` label as well. In
    /// OpenMetrics (`openMetrics`), the families have their `# UNIT`.
    func scrape(openMetrics: Bool = false) throws -> String {
        let pair = try VethPair()
        let sampled = pair.a, own = pair.b
        let tun = try sampled.openTun("tR")
        defer { close(tun) }
        try sampled.ip("link", "set", "tR", "up")
        try sampled.ip("route", "add", "default", "dev", "tR")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-rules-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let plan = try ifmeter(["plan", "set", "\(sampled.name)/vA", "--state", state, "--cycle-start", "1", "--quota", "5GB", "--direction", "tx"])
        try #require(plan.status == 0, "plan set: \(plan.err)")
        let server = try Background(
            [
                "ip", "netns", "exec", own.name, try ifmeterBinary(), "serve", "--interval", "300ms", "--listen", "127.0.0.1:\(Self.port)",
                "--state", state, "--netns", sampled.name, "--probe", "192.0.2.99", "--underlay", "tR=vA",
                // Nothing listens there: the remote write families, counting retries.
                "--remote-write", "http://127.0.0.1:9/api/v1/write", "--remote-write-interval", "300ms",
            ], name: "serve-rules")
        defer { server.stop() }
        let families = [
            "ifmeter_plan_quota_bytes{", "ifmeter_route_egress_info{", "ifmeter_tunnel_outside_bytes_total{",
            "ifmeter_last_sample_timestamp_seconds ", "ifmeter_last_sample_duration_seconds ", "netns=\"\(sampled.name)\"",
            "ifmeter_remote_write_samples_dropped_total{", "ifmeter_remote_write_last_success_timestamp_seconds{",
        ]
        let text = try waitFor("serve to expose the plan, route and health families") { () -> String? in
            try server.requireRunning()
            let accept = openMetrics ? ["Accept": "application/openmetrics-text;version=1.0.0"] : [:]
            guard let text = try? RawHTTP.request("/metrics", port: Self.port, in: own.name, headers: accept).text else { return nil }
            return families.allSatisfy { text.contains($0) } ? text : nil
        }
        #expect(server.stop() == 0, "\(server.log)")
        return text
    }

    // MARK: the rules file

    struct Rule {
        var name: String
        var isAlert: Bool
        var expr = ""
        /// The rule's lines, annotations included.
        var text = ""
    }

    /// The rules of a rules file: each `- alert:` or `- record:` item with
    /// its `expr:` (one line, or a block scalar), comments left out.
    static func rules(_ yaml: String) -> [Rule] {
        let lines = yaml.components(separatedBy: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") }
        func indent(_ line: String) -> Int { line.prefix { $0 == " " }.count }
        var rules: [Rule] = []
        var i = 0
        while i < lines.count {
            let line = lines[i]
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            for (key, isAlert) in [("- alert:", true), ("- record:", false)] where trimmed.hasPrefix(key) {
                rules.append(Rule(name: trimmed.dropFirst(key.count).trimmingCharacters(in: .whitespaces), isAlert: isAlert))
            }
            if trimmed.hasPrefix("- name:") {
                i += 1
                continue
            }
            guard !rules.isEmpty else {
                i += 1
                continue
            }
            rules[rules.count - 1].text += line + "\n"
            if trimmed.hasPrefix("expr:") {
                var value = trimmed.dropFirst("expr:".count).trimmingCharacters(in: .whitespaces)
                if [">", ">-", "|", "|-"].contains(value) {
                    var parts: [String] = []
                    while i + 1 < lines.count, lines[i + 1].trimmingCharacters(in: .whitespaces).isEmpty || indent(lines[i + 1]) > indent(line) {
                        i += 1
                        rules[rules.count - 1].text += lines[i] + "\n"
                        let part = lines[i].trimmingCharacters(in: .whitespaces)
                        if !part.isEmpty { parts.append(part) }
                    }
                    value = parts.joined(separator: " ")
                } else if let quote = value.first, quote == "'" || quote == "\"", value.count >= 2, value.last == quote {
                    value = String(value.dropFirst().dropLast())
                }
                rules[rules.count - 1].expr = value
            }
            i += 1
        }
        return rules
    }

    /// `$labels.NAME` in templates.
    static func templateLabels(_ text: String) -> Set<String> {
        var found: Set<String> = []
        var rest = Substring(text)
        while let range = rest.range(of: "$labels.") {
            rest = rest[range.upperBound...]
            let name = rest.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
            if !name.isEmpty { found.insert(String(name)) }
        }
        return found
    }

    /// Words of the form ifmeter_[a-z_]+ (not part of a recorded name).
    static func metricNames(_ text: String) -> Set<String> {
        let words = text.split { !($0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":")) }
        return Set(
            words.filter { $0.hasPrefix("ifmeter_") && !$0.contains(":") && $0.allSatisfy { $0 == "_" || ($0.isASCII && $0.isLowercase) } }
                .map(String.init))
    }

    // MARK: PromQL, as far as the check needs it

    struct Matcher {
        var label: String, op: String, value: String
    }

    struct Selector {
        var metric: String
        var matchers: [Matcher]
    }

    struct Expression {
        /// Metric names: served ones (ifmeter_...) and recorded ones (with colons).
        var metrics: [String] = []
        var selectors: [Selector] = []
        /// Labels of by, without, on, ignoring, group_left and group_right.
        var grouping: [String] = []
    }

    static let groupingKeywords: Set<String> = ["by", "without", "on", "ignoring", "group_left", "group_right"]

    /// The metrics, selectors' matchers and grouping labels of an
    /// expression; string literals, ranges and numbers are skipped.
    static func parse(_ expr: String) -> Expression {
        let chars = Array(expr)
        var i = 0
        var result = Expression()
        func isStart(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c == "_" || c == ":") }
        func isPart(_ c: Character) -> Bool { isStart(c) || (c.isASCII && c.isNumber) }
        func skipSpaces() { while i < chars.count, chars[i].isWhitespace { i += 1 } }
        func identifier() -> String {
            let start = i
            while i < chars.count, isPart(chars[i]) { i += 1 }
            return String(chars[start..<i])
        }
        func string() -> String {
            let quote = chars[i]
            var value = ""
            i += 1
            while i < chars.count, chars[i] != quote {
                if chars[i] == "\\", i + 1 < chars.count { i += 1 }
                value.append(chars[i])
                i += 1
            }
            i += 1
            return value
        }
        while i < chars.count {
            let c = chars[i]
            if c == "\"" || c == "'" || c == "`" {
                _ = string()
            } else if c == "[" {
                while i < chars.count, chars[i] != "]" { i += 1 }
                i += 1
            } else if c.isASCII, c.isNumber {
                while i < chars.count, isPart(chars[i]) || chars[i] == "." { i += 1 }
            } else if isStart(c) {
                let name = identifier()
                skipSpaces()
                let next = i < chars.count ? chars[i] : " "
                if groupingKeywords.contains(name), next == "(" {
                    i += 1
                    while i < chars.count, chars[i] != ")" {
                        skipSpaces()
                        let label = identifier()
                        if label.isEmpty { i += 1 } else { result.grouping.append(label) }
                    }
                    i += 1
                    continue
                }
                let isMetric = next != "(" && (name.hasPrefix("ifmeter_") || name.contains(":"))
                if isMetric { result.metrics.append(name) }
                if next == "{" {
                    i += 1
                    var matchers: [Matcher] = []
                    while i < chars.count, chars[i] != "}" {
                        skipSpaces()
                        let label = identifier()
                        skipSpaces()
                        var op = ""
                        while i < chars.count, "=!~".contains(chars[i]) {
                            op.append(chars[i])
                            i += 1
                        }
                        skipSpaces()
                        let value = i < chars.count && "\"'`".contains(chars[i]) ? string() : ""
                        if !label.isEmpty { matchers.append(Matcher(label: label, op: op, value: value)) }
                        skipSpaces()
                        if i < chars.count, chars[i] == "," || label.isEmpty { i += 1 }
                    }
                    i += 1
                    if isMetric { result.selectors.append(Selector(metric: name, matchers: matchers)) }
                }
            } else {
                i += 1
            }
        }
        return result
    }

    // MARK: the exposition

    /// Each metric's label names, and each label's values, in a text exposition.
    struct Exposition {
        var labels: [String: Set<String>] = [:]
        var values: [String: [String: Set<String>]] = [:]

        init(_ text: String) {
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                let chars = Array(line)
                var i = 0
                while i < chars.count, chars[i] != "{", chars[i] != " " { i += 1 }
                let name = String(chars[0..<i])
                labels[name, default: []].formUnion([])
                guard i < chars.count, chars[i] == "{" else { continue }
                i += 1
                while i < chars.count, chars[i] != "}" {
                    let start = i
                    while i < chars.count, chars[i] != "=" { i += 1 }
                    let label = String(chars[start..<i]).trimmingCharacters(in: CharacterSet(charactersIn: ", "))
                    i += 2 // ="
                    var value = ""
                    while i < chars.count, chars[i] != "\"" {
                        if chars[i] == "\\", i + 1 < chars.count { i += 1 }
                        value.append(chars[i])
                        i += 1
                    }
                    i += 1
                    if i < chars.count, chars[i] == "," { i += 1 }
                    labels[name, default: []].insert(label)
                    values[name, default: [:]][label, default: []].insert(value)
                }
            }
        }
    }
}
