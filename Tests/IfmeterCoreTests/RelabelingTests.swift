import IfmeterCore
import Testing

/// `write_relabel_configs` as Prometheus applies them. The cases are the
/// vectors of Prometheus' own `TestRelabel` and `TestTargetLabelValidity`
/// (prometheus/prometheus, model/relabel/relabel_test.go, commit
/// 000182e4b8638bfe781a583c27a1e8a366ac82bf), and the examples of its
/// configuration documentation (relabel_config: keep, drop, labeldrop,
/// labelkeep, replace with `${1}`), written out as label sets.
@Suite struct RelabelingTests {
    typealias Labels = [String: String]

    func run(_ input: Labels, _ rules: [RelabelRule]) -> Labels? {
        RelabelRule.apply(rules, to: input.map { ($0.key, $0.value) }).map { Dictionary(uniqueKeysWithValues: $0.map { ($0.0, $0.1) }) }
    }

    @Test func prometheusReplaceVectors() throws {
        let base: Labels = ["a": "foo", "b": "bar", "c": "baz"]
        #expect(
            run(base, [try RelabelRule(sourceLabels: ["a"], regex: "f(.*)", targetLabel: "d", replacement: "ch${1}-ch${1}")])
                == ["a": "foo", "b": "bar", "c": "baz", "d": "choo-choo"])
        #expect(
            run(
                base,
                [
                    try RelabelRule(sourceLabels: ["a", "b"], regex: "f(.*);(.*)r", targetLabel: "a", replacement: "b${1}${2}m"),
                    try RelabelRule(sourceLabels: ["c", "a"], regex: "(b).*b(.*)ba(.*)", targetLabel: "d", replacement: "$1$2$2$3"),
                ]) == ["a": "boobam", "b": "bar", "c": "baz", "d": "boooom"])
        #expect(run(["a": "abc"], [try RelabelRule(sourceLabels: ["a"], regex: ".*(b).*", targetLabel: "d")]) == ["a": "abc", "d": "b"])
        // No match, no replacement.
        #expect(run(["a": "boo"], [try RelabelRule(sourceLabels: ["a"], regex: "f", targetLabel: "b", replacement: "bar")]) == ["a": "boo"])
        // The target label from the match; an empty result sets nothing; an
        // invalid target changes nothing.
        #expect(
            run(
                ["a": "some-name-value"],
                [try RelabelRule(sourceLabels: ["a"], regex: "some-([^-]+)-([^,]+)", targetLabel: "${1}", replacement: "${2}")])
                == ["a": "some-name-value", "name": "value"])
        #expect(
            run(
                ["a": "some-name-value"],
                [try RelabelRule(sourceLabels: ["a"], regex: "some-([^-]+)-([^,]+)", targetLabel: "${1}", replacement: "${3}")])
                == ["a": "some-name-value"])
        #expect(
            run(["a": "some-name-0"], [try RelabelRule(sourceLabels: ["a"], regex: "some-([^-]+)-([^,]+)", targetLabel: "${3}", replacement: "${1}")])
                == ["a": "some-name-0"])
        // The "more complex real-life like" case.
        let tags = "path:/secret,job:some-job,label:foo=bar"
        #expect(
            run(
                ["__meta_sd_tags": tags],
                [
                    try RelabelRule(
                        sourceLabels: ["__meta_sd_tags"], regex: "(?:.+,|^)path:(/[^,]+).*", targetLabel: "__metrics_path__", replacement: "${1}"),
                    try RelabelRule(sourceLabels: ["__meta_sd_tags"], regex: "(?:.+,|^)job:([^,]+).*", targetLabel: "job", replacement: "${1}"),
                    try RelabelRule(
                        sourceLabels: ["__meta_sd_tags"], regex: "(?:.+,|^)label:([^=]+)=([^,]+).*", targetLabel: "${1}", replacement: "${2}"),
                ]) == ["__meta_sd_tags": tags, "__metrics_path__": "/secret", "job": "some-job", "foo": "bar"])
    }

    @Test func prometheusKeepDropAndLabelVectors() throws {
        // Drop matches the whole value: ".*o.*" drops foo, "f|o" (anchored) does not.
        #expect(run(["a": "foo"], [try RelabelRule(action: .drop, sourceLabels: ["a"], regex: ".*o.*")]) == nil)
        #expect(run(["a": "foo"], [try RelabelRule(action: .drop, sourceLabels: ["a"], regex: "f|o")]) == ["a": "foo"])
        #expect(run(["a": "foo"], [try RelabelRule(action: .drop, sourceLabels: ["a"], regex: "no-match")]) == ["a": "foo"])
        #expect(run(["a": "foo"], [try RelabelRule(action: .keep, sourceLabels: ["a"], regex: "no-match")]) == nil)
        #expect(run(["a": "foo"], [try RelabelRule(action: .keep, sourceLabels: ["a"], regex: "f.*")]) == ["a": "foo"])
        // A drop stops the rules after it.
        #expect(
            run(
                ["a": "foo"],
                [
                    try RelabelRule(action: .drop, sourceLabels: ["a"], regex: ".*o.*"),
                    try RelabelRule(sourceLabels: ["a"], regex: "f(.*)", targetLabel: "d", replacement: "ch$1-ch$1"),
                ]) == nil)
        let three: Labels = ["a": "foo", "b1": "bar", "b2": "baz"]
        #expect(run(three, [try RelabelRule(action: .labelkeep, regex: "(b.*)")]) == ["b1": "bar", "b2": "baz"])
        #expect(run(three, [try RelabelRule(action: .labeldrop, regex: "(b.*)")]) == ["a": "foo"])
        #expect(
            run(three, [try RelabelRule(action: .labelmap, regex: "(b.*)", replacement: "bar_${1}")])
                == ["a": "foo", "b1": "bar", "b2": "baz", "bar_b1": "bar", "bar_b2": "baz"])
        #expect(
            run(
                ["foo": "bAr123Foo"],
                [
                    try RelabelRule(action: .uppercase, sourceLabels: ["foo"], targetLabel: "foo_uppercase"),
                    try RelabelRule(action: .lowercase, sourceLabels: ["foo"], targetLabel: "foo_lowercase"),
                ]) == ["foo": "bAr123Foo", "foo_lowercase": "bar123foo", "foo_uppercase": "BAR123FOO"])
        let ports: Labels = ["__tmp_port": "1234", "__port1": "1234", "__port2": "5678"]
        #expect(run(ports, [try RelabelRule(action: .keepequal, sourceLabels: ["__tmp_port"], targetLabel: "__port1")]) == ports)
        #expect(run(ports, [try RelabelRule(action: .dropequal, sourceLabels: ["__tmp_port"], targetLabel: "__port1")]) == nil)
        #expect(run(ports, [try RelabelRule(action: .dropequal, sourceLabels: ["__tmp_port"], targetLabel: "__port2")]) == ports)
        #expect(run(ports, [try RelabelRule(action: .keepequal, sourceLabels: ["__tmp_port"], targetLabel: "__port2")]) == nil)
    }

    /// The shapes of the configuration documentation's examples, on the
    /// series ifmeter pushes.
    @Test func documentationExamplesOnPushedSeries() throws {
        let series: Labels = [
            "__name__": "ifmeter_receive_errors_total", "interface": "eth0", "kind": "ethernet", "job": "ifmeter", "instance": "gw1",
        ]
        // Dropping expensive metrics by name.
        #expect(
            run(series, [try RelabelRule(action: .drop, sourceLabels: ["__name__"], regex: "ifmeter_(receive|transmit)_(errors|drops)_total")]) == nil
        )
        // Keeping only what a dashboard needs.
        #expect(run(series, [try RelabelRule(action: .keep, sourceLabels: ["__name__"], regex: "ifmeter_(receive|transmit)_bytes_total")]) == nil)
        // Dropping a label; keeping a set of them.
        #expect(run(series, [try RelabelRule(action: .labeldrop, regex: "kind")])?["kind"] == nil)
        #expect(
            run(series, [try RelabelRule(action: .labelkeep, regex: "__name__|interface|job|instance")])
                == ["__name__": "ifmeter_receive_errors_total", "interface": "eth0", "job": "ifmeter", "instance": "gw1"])
        // A new label from two, with a separator; a fixed value with no source.
        #expect(
            run(series, [try RelabelRule(sourceLabels: ["instance", "interface"], separator: "/", regex: "(.*)", targetLabel: "link")])?["link"]
                == "gw1/eth0")
        #expect(run(series, [try RelabelRule(targetLabel: "site", replacement: "lisbon")])?["site"] == "lisbon")
        // An empty replacement removes the label.
        #expect(run(series, [try RelabelRule(sourceLabels: ["kind"], targetLabel: "kind", replacement: "")])?["kind"] == nil)
    }

    @Test func targetLabelValidityAsPrometheusHasIt() throws {
        for (text, valid) in [
            ("-label", false), ("label", true), ("label${1}", true), ("${1}label", true), ("${1}", true), ("${", false), ("$", false),
            ("${}", false), ("foo${", false), ("$1", true), ("asd$2asd", true), ("-foo${1}bar-", false), ("_${1}_", true),
            ("foo${bar}foo", true),
        ] {
            let made = Result { try RelabelRule(targetLabel: text) }
            #expect(((try? made.get()) != nil) == valid, "\(text): \(made)")
        }
        #expect(throws: RelabelRule.Invalid.self) { try RelabelRule(regex: "(unclosed", targetLabel: "a") }
        #expect(throws: RelabelRule.Invalid.self) { try RelabelRule(action: .replace) }
        #expect(throws: RelabelRule.Invalid.self) { try RelabelRule(action: .lowercase, targetLabel: "${1}") }
        #expect(throws: RelabelRule.Invalid.self) { try RelabelRule(action: .keep, sourceLabels: ["not-a-name"]) }
    }
}
