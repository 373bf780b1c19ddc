import IfmeterCore
import IfmeterOutput
import IfmeterSampling
import IfmeterStore
import IfmeterSystem

/// `ifmeter plan set|list|remove`: data plans kept in the state file.
struct PlanCommand: Command {
    enum Options {
        static let cycleStart = Option("--cycle-start", value: "day", help: "The day of the month a cycle starts, 1-31.")
        static let quota = Option("--quota", value: "size", help: "The quota per cycle, like 20GB, 20GiB or 500MB.")
        static let limit = ListOption("--limit", value: "period=size", help: "A limit per hour, day, month or year, like day=2GB (set).")
        static let direction = Option(
            "--direction", value: "direction", help: "What counts against the quota: rx, tx or both.", default: "both")
        static let format = Option("--format", value: "format", help: "text or json (list).", default: "text")
        /// The options of one action or another: given to another, an error.
        static let ofActions: [any OptionHandle] = [cycleStart, quota, limit, direction, format]
    }

    static let spec = CommandSpec(
        name: "ifmeter plan",
        abstract: "Set, list or remove data plans (billing cycle and quota) in a state file.",
        discussion: """
            ACTIONS:
              set NAME     Add or replace the plan of NAME (an interface name or a
                           glob like 'wlan*'; NS/NAME for another namespace's).
                           Needs --cycle-start or --limit; --quota, --limit and
                           --direction are optional.
              list         Print the plans.
              remove NAME  Remove the plan of NAME.

            The day a cycle starts is clamped to short months (31 is the last day
            of every month). --limit PERIOD=SIZE adds a limit per local hour,
            day, month or year (vnStat's --alert), counted in --direction:
            '--limit day=2GB --limit month=50GB'; 'usage --check' checks each in
            the period holding now (the cycle defaults to day 1 with limits
            alone). 'usage --cycle' and 'usage --check' use the plans;
            serve and live show them when they have --state. set and remove
            work while serve, live or export write the file: each change is
            one transaction, and the running ifmeter shows it within a sample.
            Without --state: $IFMETER_STATE, else /var/lib/ifmeter/state.db for
            root, else $XDG_STATE_HOME/ifmeter/state.db or
            ~/.local/state/ifmeter/state.db.
            """,
        options: [
            DefaultState.option.spec,
            Options.cycleStart.spec,
            Options.quota.spec,
            Options.limit.spec,
            Options.direction.spec,
            Options.format.spec,
            CommandLinePath.allowForeignFiles.spec,
        ],
        positionals: [
            PositionalSpec("action", help: "set, list or remove.", choices: ["set", "list", "remove"]),
            PositionalSpec("name", help: "The interface name or glob (set, remove).", optional: true, isInterface: true),
        ])

    enum Action {
        case set(Plan)
        case list(json: Bool)
        case remove(String)
    }

    let action: Action
    let path: String

    init(_ p: ParsedArguments) throws(CLIError) {
        let verb = p.positionals[0]
        let name = p.positionals.count > 1 ? p.positionals[1] : nil
        switch verb {
        case "set":
            guard let name, !name.isEmpty else { throw p.usage("'plan set' needs the interface name or glob") }
            try Self.checkName(name, p)
            var limits: [PeriodLimit] = []
            for text in p[Options.limit] {
                guard let limit = PeriodLimit.parse(text) else {
                    throw p.usage(
                        "invalid value '\(TerminalText.escaped(text))' for '--limit <period=size>': expected hour, day, month or year, '=', and a size from 1B to 9223372036854775807B, like day=2GB"
                    )
                }
                if limits.contains(where: { $0.period == limit.period }) {
                    throw p.usage("'--limit \(limit.period.rawValue)=...' is given twice: one limit per period")
                }
                limits.append(limit)
            }
            if p.has(Options.limit), limits.isEmpty { throw p.usage("'\(Options.limit.spec.long)' needs PERIOD=SIZE, like day=2GB") }
            guard let dayText = p[Options.cycleStart] ?? (limits.isEmpty ? nil : "1") else {
                throw p.usage("'plan set' needs --cycle-start DAY (1-31) or --limit PERIOD=SIZE")
            }
            guard let day = Int(dayText), (1...31).contains(day) else {
                throw p.usage("invalid value '\(dayText)' for '--cycle-start <day>': expected a day of the month, 1-31 (clamped to short months)")
            }
            var quota: UInt64?
            if let text = p[Options.quota] {
                guard let bytes = Units.parseSize(text), bytes > 0 else {
                    throw p.usage(
                        "invalid value '\(text)' for '--quota <size>': expected a size from 1B to 9223372036854775807B (2^63-1), like 20GB, 20GiB or 500MB"
                    )
                }
                quota = bytes
            }
            let directionText = p[Options.direction] ?? "both"
            guard let direction = Plan.Direction(rawValue: directionText) else {
                throw p.usage("invalid value '\(directionText)' for '--direction <direction>': expected rx, tx or both")
            }
            var plan = Plan(pattern: name, cycleStartDay: day, quotaBytes: quota, direction: direction)
            plan.limits = limits.sorted { $0.period < $1.period }
            action = .set(plan)
        case "list":
            if let name { throw p.usage("unexpected argument '\(name)': 'plan list' takes no name") }
            try Self.onlyFor(p, "list", allowed: [Options.format])
            action = .list(json: try CommonOptions.format(p, Options.format, allowed: ["text", "json"], default: "text") == "json")
        case "remove":
            guard let name, !name.isEmpty else { throw p.usage("'plan remove' needs the name the plan was set for") }
            try Self.onlyFor(p, "remove", allowed: [])
            action = .remove(name)
        default:
            throw p.usage("unknown action '\(verb)': use set, list or remove")
        }
        if case .set = action, p.has(Options.format) { throw p.usage("'\(Options.format.spec.long)' is for 'plan list'") }
        path = DefaultState.resolve(p)
    }

    static func onlyFor(_ p: ParsedArguments, _ verb: String, allowed: [any OptionHandle]) throws(CLIError) {
        for option in Options.ofActions where p.has(option) && !allowed.contains(where: { $0.spec.long == option.spec.long }) {
            throw p.usage("'\(option.spec.long)' is for 'plan set', not 'plan \(verb)'")
        }
    }

    /// `day 1.86 GiB (2000000000 B), month ...`
    static func limitsText(_ limits: [PeriodLimit]) -> String {
        limits.isEmpty ? "none" : limits.map { "\($0.period.rawValue) \(Units.bytes($0.bytes)) (\($0.bytes) B)" }.joined(separator: ", ")
    }

    static func checkName(_ name: String, _ p: ParsedArguments) throws(CLIError) {
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) || name.filter({ $0 == "/" }).count > 1 {
            throw p.usage("invalid interface name or glob '\(TerminalText.escaped(name))'")
        }
    }

    func run() throws(CLIError) {
        switch action {
        case .list(let json):
            let plans: [Plan]
            do {
                plans = try StateStore.plans(path: path)
            } catch {
                throw CLIError.reading(error, command: Self.spec.name)
            }
            if json {
                let list: [JSONValue] = plans.map { plan in
                    var o: [String: JSONValue] = [
                        "name": .string(plan.pattern), "cycle_start_day": .number(plan.cycleStartDay),
                        "quota_bytes": plan.quotaBytes.map { .number($0) } ?? .null, "direction": .string(plan.direction.rawValue),
                    ]
                    // Only plans with limits carry the key: other plans list as before.
                    if !plan.limits.isEmpty {
                        o["limits"] = .object(Dictionary(uniqueKeysWithValues: plan.limits.map { ($0.period.rawValue, JSONValue.number($0.bytes)) }))
                    }
                    return .object(o)
                }
                return try Output.put(JSONWriter(indent: 2).string(JSONEnvelope.plans.document(["plans": .array(list)])) + "\n")
            }
            if plans.isEmpty { return try Output.put("No plans in \(TerminalText.escaped(path)).\n") }
            // The LIMITS column only when a plan has limits: other lists print as before.
            let withLimits = plans.contains { !$0.limits.isEmpty }
            var table = TextTable(headers: ["NAME", "CYCLE START", "QUOTA", "DIRECTION"] + (withLimits ? ["LIMITS"] : []), rightAligned: [1, 2])
            for plan in plans {
                table.add(
                    [
                        TerminalText.escaped(plan.pattern), "day \(plan.cycleStartDay)",
                        plan.quotaBytes.map { "\(Units.bytes($0)) (\($0) B)" } ?? "none", plan.direction.rawValue,
                    ] + (withLimits ? [Self.limitsText(plan.limits)] : []))
            }
            try Output.put(Output.forPeople(table.lines().joined(separator: "\n") + "\n"))
        case .set(let plan):
            let store = try open(create: true)
            let names: [String]
            do {
                names = try store.interfaceNames()
                try store.setPlan(plan)
            } catch {
                throw .runtime(error.description)
            }
            try Output.put(
                "Plan for '\(TerminalText.escaped(plan.pattern))': cycle from day \(plan.cycleStartDay)"
                    + (plan.quotaBytes.map { ", quota \(Units.bytes($0)) (\($0) B) \(plan.direction.rawValue)" } ?? ", no quota")
                    + (plan.limits.isEmpty ? "" : ", limits \(Self.limitsText(plan.limits)) \(plan.direction.rawValue)") + ".\n")
            if !names.contains(where: { plan.matches($0) }) {
                Output.error(
                    "warning: '\(TerminalText.escaped(plan.pattern))' matches no interface in \(TerminalText.escaped(path)) yet; the plan applies once one is seen."
                )
            }
        case .remove(let name):
            let store = try open(create: false)
            let removed: Bool
            do {
                removed = try store.removePlan(name)
            } catch {
                throw .runtime(error.description)
            }
            guard removed else {
                throw .usage("no plan for '\(TerminalText.escaped(name))' in \(TerminalText.escaped(path))", command: Self.spec.name)
            }
            try Output.put("Removed the plan for '\(TerminalText.escaped(name))'.\n")
        }
    }

    /// Opens the state file for a change (one a sampler writes included).
    func open(create: Bool) throws(CLIError) -> StateStore {
        let path = try CommandLinePath.output(
            self.path, option: DefaultState.option.spec.long, command: Self.spec.name, writing: .inPlace, sideSuffixes: ["-wal", "-shm"],
            ownFolder: true)
        if FileStatus(path, followingLinks: true) == nil {
            guard create else { throw .usage(StoreError.missing(path: path).description, command: Self.spec.name) }
            DefaultState.makeFolders(for: path)
        }
        do {
            // An editor: the file is not marked as being written, so the
            // first sampler after a plan set first is no restart after a kill.
            return try StateStore(path: path, host: hostName(), bootID: readBootID() ?? "unknown", now: wallClock(), role: .editor)
        } catch {
            switch error {
            case .inUse, .missing, .noFolder, .notRegularFile:
                throw .usage(error.description, command: Self.spec.name)
            default:
                throw CLIError.reading(error, command: Self.spec.name)
            }
        }
    }
}
