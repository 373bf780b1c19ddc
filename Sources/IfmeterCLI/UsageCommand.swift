import IfmeterCore
import IfmeterStore

struct UsageCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter usage",
        abstract: "Daily or monthly totals per interface from a state file, with their quality.",
        discussion: """
            Reads the state file that serve, live or export keep with --state (it
            may be in use). Days and months are local time; a period's traffic is
            counted on the day it was saved.
            """,
        options: [
            OptionSpec("--state", value: "path", help: "The state file."),
            OptionSpec("--daily", help: "One row per day (the default)."),
            OptionSpec("--monthly", help: "One row per month."),
            OptionSpec("--format", value: "format", help: "text or json.", default: "text", choices: ["text", "json"]),
            CommonOptions.bits,
        ] + CommonOptions.filters + CommonOptions.namespaceFilters)

    let path: String
    let granularity: StateStore.Granularity
    let json: Bool
    let filter: InterfaceFilter

    init(_ p: ParsedArguments) throws(CLIError) {
        guard let path = p.value("--state") else { throw p.usage("give the state file with --state PATH") }
        self.path = path
        if p.flag("--daily") && p.flag("--monthly") { throw p.usage("'--daily' and '--monthly' cannot be used together") }
        granularity = p.flag("--monthly") ? .month : .day
        json = try CommonOptions.format(p, allowed: ["text", "json"], default: "text") == "json"
        var filter = try CommonOptions.filter(p)
        filter.namespaces = try CommonOptions.namespaceNames(p).map(Set.init)
        self.filter = filter
    }

    func run() throws(CLIError) {
        let rows: [StateStore.UsageRow]
        do {
            rows = try StateStore.usage(path: path, granularity: granularity).filter {
                filter.admits(StateStore.key($0.name), kind: $0.kind)
            }
        } catch {
            throw CLIError.reading(error, command: Self.spec.name)
        }
        let byName = Dictionary(grouping: rows, by: \.name)
        let names = byName.keys.sorted { StateStore.key($0) < StateStore.key($1) }
        if json {
            let interfaces: [JSONValue] = names.map { name in
                let mine = byName[name] ?? []
                let key = StateStore.key(name)
                var o: [String: JSONValue] = [
                    "name": .string(key.name),
                    "kind": .string(mine.first?.kind.rawValue ?? "other"),
                    "periods": .array(mine.map { row in
                        .object([
                            "period": .string(row.period),
                            "rx_bytes": .number(row.counters.rxBytes), "tx_bytes": .number(row.counters.txBytes),
                            "rx_packets": .number(row.counters.rxPackets), "tx_packets": .number(row.counters.txPackets),
                            "quality": .string(row.quality.name),
                        ])
                    }),
                ]
                if !key.netns.isEmpty { o["netns"] = .string(key.netns) }
                return .object(o)
            }
            let value: JSONValue = .object([
                "schema": .string("ifmeter.usage"), "schema_version": .number(1), "estimate": .bool(true),
                "caveats": .array(Caveat.all.map(JSONValue.string)),
                "granularity": .string(granularity.rawValue), "interfaces": .array(interfaces),
            ])
            return try Output.put(JSONWriter(indent: 2).string(value) + "\n")
        }
        var out = ""
        if names.isEmpty { out += "No usage recorded yet in \(path).\n" }
        for name in names {
            let mine = byName[name] ?? []
            out += "\(TerminalText.escaped(name)) (\(mine.first?.kind.rawValue ?? "other"))\n"
            var table = TextTable(headers: [granularity == .day ? "DAY" : "MONTH", "RX", "TX", "TOTAL", "QUALITY"], rightAligned: [1, 2, 3])
            for row in mine {
                let mark = row.quality.mark
                table.add([
                    row.period, mark + " " + Units.bytes(row.counters.rxBytes), mark + " " + Units.bytes(row.counters.txBytes),
                    mark + " " + Units.bytes(row.counters.rxBytes &+ row.counters.txBytes), row.quality.name,
                ])
            }
            out += table.lines().map { "  " + $0 }.joined(separator: "\n") + "\n\n"
        }
        out += Caveat.all.joined(separator: "\n") + "\n"
        try Output.put(out)
    }
}
