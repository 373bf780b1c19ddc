import IfmeterCore

/// Every JSON document ifmeter writes is stamped here, and only here:
/// `schema` and `schema_version` name its shape (its file in `schemas/`
/// where there is one), `estimate` is always true, and `caveats` spells out
/// what the figures are (interface counters, overhead included, not
/// per-app; what the quality marks mean).
package struct JSONEnvelope: Sendable, Hashable {
    package let schema: String
    package let version: Int

    package init(schema: String, version: Int) {
        self.schema = schema
        self.version = version
    }

    /// `replay --format json` (`schemas/ifmeter-report.v2.schema.json`;
    /// the same in v1).
    package static let replay = JSONEnvelope(schema: "ifmeter.replay", version: 1)
    /// `export` reports (`schemas/ifmeter-report.v2.schema.json`: version 2
    /// adds the period's `clock_step_seconds` and `note`; version 1 is in
    /// `ifmeter-report.v1.schema.json`).
    package static let export = JSONEnvelope(schema: "ifmeter.export", version: 2)
    /// `usage --format json` (`schemas/ifmeter-usage.v6.schema.json`:
    /// version 6 adds an interface's `alias`, version 5 each period's
    /// `seconds` and `average_bits_per_second`; versions 3 to 5, before it,
    /// are in their own files).
    package static let usage = JSONEnvelope(schema: "ifmeter.usage", version: 6)
    /// `usage --fiveminutes --format json`: the same version 6 (version 4
    /// added the five-minute granularity).
    package static let usageFiveMinutes = JSONEnvelope(schema: "ifmeter.usage", version: 6)
    /// A page of serve's `/api/v1/usage` cut short at its row count
    /// (`schemas/ifmeter-usage.v7.schema.json`: version 7 adds `next`, the
    /// URL of the next page; a document without it is version 6).
    package static let usagePage = JSONEnvelope(schema: "ifmeter.usage", version: 7)
    /// `sample --format json`: one snapshot of the counters.
    package static let sample = JSONEnvelope(schema: "ifmeter.sample", version: 1)
    /// `sample --count N --format json`: one line per interval.
    package static let interval = JSONEnvelope(schema: "ifmeter.interval", version: 1)
    /// `list --format json`: the interfaces and their facts.
    package static let list = JSONEnvelope(schema: "ifmeter.list", version: 1)
    /// `route --format json`.
    package static let route = JSONEnvelope(schema: "ifmeter.route", version: 1)
    /// `plan list --format json`.
    package static let plans = JSONEnvelope(schema: "ifmeter.plans", version: 1)
    /// serve's `/api/v1/interfaces` and each event of its dashboard's
    /// stream (`schemas/ifmeter-interfaces.v2.schema.json`; 2 added each
    /// interface's `since` and `alias`).
    package static let interfaces = JSONEnvelope(schema: "ifmeter.interfaces", version: 2)
    /// serve's `/api/v1/routes`: the route verdict of `serve --probe` now.
    package static let routes = JSONEnvelope(schema: "ifmeter.routes", version: 1)

    /// The document: `body` with the envelope's keys stamped on it.
    package func document(_ body: [String: JSONValue], caveats: [String] = Caveat.all) -> JSONValue {
        var o = body
        o["schema"] = .string(schema)
        o["schema_version"] = .number(version)
        o["estimate"] = .bool(true)
        o["caveats"] = .array(caveats.map(JSONValue.string))
        return .object(o)
    }
}
