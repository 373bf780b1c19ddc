import Foundation
@testable import IfmeterCLI
import IfmeterCore
import IfmeterSystem
import IfmeterStore
import IfmeterTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// No input makes ifmeter crash: every numeric option of every command
/// (found from the command specs), every numeric field of a trace, and
/// every numeric column of a state file's tables, driven with the
/// extremes (0, -1, 2^63-1, 2^63, 2^64-1, 1e19, 1e309, NaN, inf, -inf),
/// the edges of each range, and values from a fixed seed. Every run ends
/// with an exit below 128; a failure is 64, 65 or 1 with exactly one
/// `Error:` line (a 64 naming the option and its value), or a status the
/// command documents (route 3, usage --check 3 and 4). A command that
/// runs until stopped (or a valid extreme that makes one wait a year) is
/// stopped with SIGTERM and must then exit 0.
@Suite(.serialized, .blocking) struct NumericFuzzTests {
    /// The seed of the random values; a failure names its run, and the
    /// same seed makes the same runs.
    static let seed: UInt64 = 0x6966_6D65_7465_7221

    /// What every numeric input is driven with.
    enum Extreme: String, CaseIterable, Sendable {
        case zero = "0", minusOne = "-1", int64Max = "9223372036854775807", twoTo63 = "9223372036854775808"
        case uint64Max = "18446744073709551615", e19 = "1e19", e309 = "1e309", nan = "NaN", inf = "inf", minusInf = "-inf"

        /// As an SQL literal for a numeric column: NaN and inf as text
        /// (SQLite stores NaN as NULL), -inf as the real -1e309.
        var sql: String {
            switch self {
            case .nan: "'NaN'"
            case .inf: "'inf'"
            case .minusInf: "-1e309"
            default: rawValue
            }
        }
    }

    // MARK: options

    /// What an option's value is, by its spec's value name.
    enum Kind: Sendable { case duration, size, rate, count, day, port, tunBytes }

    /// The value names of options that take no number.
    static let notNumeric: Set<String> = [
        "path", "glob", "kinds", "source", "names", "format", "file", "node|node-only", "tun=if", "tun=address", "direction", "pattern=kind",
        "url", "dir", "name=value",
        // serve --allow-host: a host name (or *), refused when it is none
        // in RebindingTests.
        "name",
        // plan --limit's size is read by the size parser the fuzzed options
        // use; its period=size form is checked in FiveMinuteSplitTests.
        "period=size",
        // usage --begin/--end: local dates and times, refused field by
        // field (month 13, day 31 of November, hour 25) in UsageRangeOptionTests.
        "date",
        // --keep-hours/--keep-days: an age (a duration, w, y, forever or 0,
        // at least 2d or 32d), its edges and bad spellings refused in
        // RetentionCommandTests.badKeepsAreRefusedInOneLine.
        "age",
    ]

    static func kind(_ option: OptionSpec) -> Kind? {
        if option.long == "--listen" { return .port }
        switch option.valueName {
        case "duration": return .duration
        case "size", "bytes": return .size
        case "rate": return .rate
        case "n": return .count
        case "day": return .day
        case "tun=bytes": return .tunBytes
        default: return nil
        }
    }

    /// Every (command, option) whose value is a number, from the specs.
    static var numericOptions: [(command: String, option: OptionSpec, kind: Kind)] {
        IfmeterCLI.commands.flatMap { command in
            command.spec.options.compactMap { option in
                kind(option).map { (String(command.spec.name.dropFirst("ifmeter ".count)), option, $0) }
            }
        }
    }

    /// A number as an option of this kind says it: plain, or with a unit
    /// (which one turns with `n`, so every unit meets the extremes).
    static func spelled(_ number: String, _ kind: Kind, _ n: Int) -> [String] {
        switch kind {
        case .duration: [number, number + ["ms", "s", "h", "d"][n % 4]]
        case .size: [number, number + ["B", "KiB", "GiB", "TB"][n % 4]]
        case .rate: [number, number + ["bit", "Tbit", "MB/s", "Gbps"][n % 4]]
        case .count, .day: [number]
        case .port: ["127.0.0.1:" + number, [":", "[::1]:", "localhost:"][n % 3] + number]
        case .tunBytes: ["tun0=" + number]
        }
    }

    /// The edges of an option's range: values it must accept, and the
    /// nearest ones it must refuse.
    static func edges(_ option: String, _ kind: Kind) -> (accept: [String], refuse: [String]) {
        switch (option, kind) {
        case (_, .duration): (["1ms", "365d", "0.001"], ["0.0009", "366d", "31536001"])
        case ("--max-size", _): (["1KiB", "9223372036854775807B"], ["1023", "9223372036854775808B"])
        case ("--event-buffer", _): (["4KiB", "1GiB"], ["4095", "1025MiB"])
        case ("--remote-write-queue-max", _): (["64KiB", "1TiB"], ["65535", "1025GiB"])
        case ("--quota", _): (["1B", "9223372036854775807B", "1.5GB"], ["0B", "8388608TiB"])
        case (_, .rate): (["1bit", "1000Tbit", "1.25e9"], ["0.9bit", "1001Tbit"])
        case ("--count", _): (["1", "1000000000"], ["1000000001"])
        case ("--keep", _): (["1", "1000"], ["1001"])
        case (_, .count): (["1", "9223372036854775807"], ["9223372036854775808"])
        case (_, .day): (["1", "31"], ["32"])
        case (_, .port): (["127.0.0.1:1", "127.0.0.1:65535"], ["127.0.0.1:65536"])
        case (_, .tunBytes): (["tun0=0", "tun0=1024"], ["tun0=1025"])
        case (_, .size): (["1B"], [])
        }
    }

    /// The command line that tries `option value`, and how it ends.
    static func attempt(_ command: String, _ option: String, _ value: String) -> FuzzRun {
        func without(_ base: [String], _ names: String...) -> [String] {
            var out: [String] = []
            var i = 0
            while i < base.count {
                if names.contains(base[i]) { i += 2 } else { out.append(base[i]); i += 1 }
            }
            return out
        }
        let tried = [option, value]
        var run = FuzzRun(label: "\(command) \(option) \(value)", arguments: [], names: [option, value])
        switch command {
        case "live":
            run.arguments = ["live"] + without(["--interval", "10ms"], option) + tried
            if option == "--save-every" { run.arguments += ["--state", "{dir}/s.db"] }
            run.inNamespace = true
            run.stop = .after(0.4)
        case "list":
            run.arguments = ["list"] + tried
            run.inNamespace = true
        case "sample":
            run.arguments = ["sample"] + without(["--count", "1", "--interval", "1ms"], option) + tried
            run.inNamespace = true
            run.stop = .after(0.4)
        case "record":
            run.arguments =
                ["record", "-o", "{dir}/t.jsonl"] + without(["--count", "1", "--interval", "1ms"], option, option == "--duration" ? "--count" : "")
                + tried
            run.inNamespace = true
            run.stop = .after(0.4)
        case "replay":
            run.arguments = ["replay", repositoryRoot.appendingPathComponent("Fixtures/traces/wrap.jsonl").path] + tried
        case "serve":
            run.arguments = ["serve"] + without(["--listen", "127.0.0.1:{port}", "--interval", "10ms"], option) + tried
            if option == "--save-every" { run.arguments += ["--state", "{dir}/s.db"] }
            // A queue's bound needs a receiver: one on the namespace's
            // loopback where nothing listens.
            if option == "--remote-write-queue-max" || option == "--remote-write-interval" {
                run.arguments += ["--remote-write", "http://127.0.0.1:9/api/v1/write", "--remote-write-queue", "{dir}/q"]
            }
            run.inNamespace = true
            run.stop = .whenStderr("listening on", 3)
        case "export":
            run.arguments = ["export", "--json", "{dir}/r.json"] + without(["--every", "20ms", "--interval", "10ms"], option) + tried
            if option == "--max-size" || option == "--keep" { run.arguments += ["--json-lines", "{dir}/l.jsonl"] }
            if option == "--save-every" { run.arguments += ["--state", "{dir}/s.db"] }
            run.inNamespace = true
            run.stop = .whenFile("{dir}/r.json", 1.5)
        case "usage":
            run.arguments = ["usage", "--state", "{base}"] + tried
        case "plan":
            run.arguments = ["plan", "set", "eth0", "--state", "{dir}/p.db"] + (option == "--cycle-start" ? [] : ["--cycle-start", "1"]) + tried
        case "route":
            run.arguments = ["route"] + tried
            run.inNamespace = true
            run.stop = .after(0.4)
            run.statuses = [3]
        default:
            run.arguments = []
        }
        return run
    }

    /// Every numeric option of every command, with every extreme (plain
    /// and with a unit), the edges of its range, and three values from the
    /// seed.
    static func optionJobs() -> [FuzzJob] {
        var random = SplitMix64(seed: seed)
        var jobs: [FuzzJob] = []
        for (command, option, kind) in numericOptions {
            var runs: [FuzzRun] = []
            for (n, extreme) in Extreme.allCases.enumerated() {
                for value in spelled(extreme.rawValue, kind, n) {
                    var run = attempt(command, option.long, value)
                    run.extreme = extreme
                    runs.append(run)
                }
            }
            let (accept, refuse) = edges(option.long, kind)
            for value in accept {
                var run = attempt(command, option.long, value)
                run.expect = .accept
                runs.append(run)
            }
            for value in refuse {
                var run = attempt(command, option.long, value)
                run.expect = .refuse
                runs.append(run)
            }
            let randoms = [
                String(random.next()), String(Double(bitPattern: random.next())),
                String(Int64(bitPattern: random.next()) >> (random.next() % 64)),
            ]
            for (n, number) in randoms.enumerated() {
                let spellings = spelled(number, kind, n)
                runs.append(attempt(command, option.long, spellings[Int(random.next() % UInt64(spellings.count))]))
            }
            jobs += runs.map { FuzzJob(runs: [$0]) }
        }
        return jobs
    }

    /// The specs' options are all known: numeric ones are fuzzed, and a new
    /// option with a value must be classified here, so that none escapes.
    @Test func everyOptionWithAValueIsFuzzedOrTakesNoNumber() throws {
        for command in IfmeterCLI.commands {
            for option in command.spec.options {
                guard let valueName = option.valueName else { continue }
                let known = Self.kind(option) != nil || Self.notNumeric.contains(valueName) || option.long == "--probe"
                #expect(known, "\(command.spec.name) \(option.long) <\(valueName)>: is it a number? classify it in NumericFuzzTests")
            }
        }
        let jobs = Self.optionJobs()
        for (command, option, _) in Self.numericOptions {
            let mine = jobs.flatMap(\.runs).filter { $0.names.first == option.long && $0.label.hasPrefix(command + " ") }
            #expect(!mine.isEmpty && mine.allSatisfy { !$0.arguments.isEmpty }, "\(command) \(option.long) has a command line")
            #expect(Set(mine.compactMap(\.extreme)) == Set(Extreme.allCases), "\(command) \(option.long): every extreme")
        }
        // Those the brief names, at least.
        let pairs = Set(Self.numericOptions.map { "\($0.command) \($0.option.long)" })
        for pair in [
            "sample --interval", "sample --count", "record --duration", "export --max-size", "export --keep", "export --every",
            "serve --listen", "serve --max-connections", "usage --top", "plan --cycle-start", "plan --quota", "route --over",
            "route --overhead", "live --save-every", "live --series-lifetime", "list --event-buffer", "replay --max-rate",
        ] {
            #expect(pairs.contains(pair), "\(pair)")
        }
    }

    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func everyNumericOptionOfEveryCommand() throws {
        try Netns.requireRoot()
        let fuzz = try FuzzRoom()
        try fuzz.makeBaseState()
        let ns = try TestNamespace()
        try fuzz.run(Self.optionJobs(), namespace: ns.name, what: "options")
    }

    // MARK: traces

    /// The numeric fields of a trace line.
    static let traceFields = ["t", "index", "width", "speed_bps"] + CounterKey.allCases.map(\.jsonKey)

    /// A trace whose second sample, deletion and rename hold `value` in
    /// `field` (raw JSON text), after a first sample that is ordinary.
    static func trace(_ field: String, _ value: String, width: Int) -> String {
        func interface(_ step: Int, _ name: String = "eth0") -> String {
            var fields: [(String, String)] = [("index", "2"), ("width", String(width)), ("speed_bps", "1000000000")]
            for (k, key) in CounterKey.allCases.enumerated() { fields.append((key.jsonKey, String(4_294_965_000 + 700 * step + k))) }
            if step > 0, let at = fields.firstIndex(where: { $0.0 == field }) { fields[at].1 = value }
            return "{\"name\": \"\(name)\", " + fields.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ", ") + "}"
        }
        let t = field == "t" ? value : "1.5"
        return [
            #"{"trace": "ifmeter/1", "platform": "linux"}"#,
            #"{"t": 0, "interfaces": [\#(interface(0)), \#(interface(0, "eth9"))]}"#,
            #"{"t": \#(t), "interfaces": [\#(interface(1)), \#(interface(1, "eth9"))]}"#,
            #"{"t": \#(t), "event": "renamed", "from": "eth9", "interface": {"name": "eth8", "index": \#(field == "index" ? value : "3")}}"#,
            #"{"t": \#(t), "event": "deleted", "interface": \#(interface(2))}"#,
        ].joined(separator: "\n") + "\n"
    }

    /// The edges of each field's range: what must still be read, and
    /// the nearest values that must not.
    static func traceEdges(_ field: String) -> [String] {
        switch field {
        case "t": ["1e12", "-1e12", "1000000000000.5", "1.5"]
        case "index": ["2147483647", "2147483648"]
        case "width": ["32", "16"]
        case "speed_bps": ["1"]
        default: ["4294967295", "4294967296"]
        }
    }

    /// Each field with each extreme (and, for counters and width, once
    /// more with 32-bit counters), its edges and a value from the seed;
    /// each trace replayed as text, JSON or text in bits in turn.
    static func traceJobs(room: FuzzRoom) throws -> [FuzzJob] {
        var random = SplitMix64(seed: seed ^ 0x7472_6163_65)
        let formats = [["--format", "text"], ["--format", "json"], ["--format", "text", "--bits"]]
        var jobs: [FuzzJob] = []
        for field in traceFields {
            var values: [(String, Extreme?, Int)] = Extreme.allCases.map { ($0.rawValue, $0, 64) }
            if field != "t", field != "index", field != "speed_bps" { values += Extreme.allCases.map { ($0.rawValue, $0, 32) } }
            values += traceEdges(field).map { ($0, nil, 64) }
            values.append((String(random.next() >> (random.next() % 64)), nil, random.next() % 2 == 0 ? 64 : 32))
            for (value, extreme, width) in values {
                let file = room.root + "/traces/\(field)-\(jobs.count).jsonl"
                try trace(field, value, width: width).write(toFile: file, atomically: false, encoding: .utf8)
                let format = formats[jobs.count % formats.count]
                var run = FuzzRun(
                    label: "replay \(field)=\(value) width \(width) \(format.joined(separator: " "))", arguments: ["replay"] + format + [file])
                run.extreme = extreme
                jobs.append(FuzzJob(runs: [run]))
            }
        }
        return jobs
    }

    @Test func everyNumericFieldOfATrace() throws {
        let fuzz = try FuzzRoom()
        try fuzz.run(try Self.traceJobs(room: fuzz), namespace: nil, what: "traces")
    }

    // MARK: sysfs trees

    /// The numeric files of a sysfs tree (`--sysfs-root`, how tests and
    /// fixtures give facts).
    static let sysfsFiles = ["speed", "mtu", "type", "ifindex", "dev_id", "name_assign_type", "addr_assign_type"]

    /// A tree for lo with every file ordinary but `file`, which says `value`.
    static func sysfsJobs(room: FuzzRoom) throws -> [FuzzJob] {
        var random = SplitMix64(seed: seed ^ 0x7379_7366_73)
        let ordinary = [
            "speed": "1000", "mtu": "65536", "type": "772", "ifindex": "1", "dev_id": "0x0", "name_assign_type": "0",
            "addr_assign_type": "0",
        ]
        var jobs: [FuzzJob] = []
        for file in sysfsFiles {
            let values: [(String, Extreme?)] = Extreme.allCases.map { ($0.rawValue, $0) } + [(String(random.next() >> (random.next() % 64)), nil)]
            for (value, extreme) in values {
                let tree = room.root + "/sysfs-\(jobs.count)"
                try FileManager.default.createDirectory(atPath: tree + "/lo", withIntermediateDirectories: true)
                for (name, text) in ordinary {
                    try ((name == file ? value : text) + "\n").write(toFile: tree + "/lo/" + name, atomically: false, encoding: .utf8)
                }
                var list = FuzzRun(label: "sysfs \(file)=\(value): list", arguments: ["list", "--sysfs-root", tree, "--format", "json"])
                list.inNamespace = true
                var export = FuzzRun(
                    label: "sysfs \(file)=\(value): export --compat node",
                    arguments: [
                        "export", "--compat", "node", "--sysfs-root", tree, "--textfile", "{dir}/m.prom", "--every", "20ms", "--interval", "10ms",
                    ])
                export.inNamespace = true
                export.stop = .whenFile("{dir}/m.prom", 1.5)
                for run in [list, export] {
                    var run = run
                    run.extreme = extreme
                    run.expect = .accept
                    jobs.append(FuzzJob(runs: [run]))
                }
            }
        }
        return jobs
    }

    /// A file there says anything: a speed of 2^63-1 Mbit/s trapped
    /// (UInt64(mbps) * 1_000_000); every value is read, or is no fact.
    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func everyNumericFileOfASysfsTree() throws {
        try Netns.requireRoot()
        let fuzz = try FuzzRoom()
        let ns = try TestNamespace()
        try fuzz.run(try Self.sysfsJobs(room: fuzz), namespace: ns.name, what: "sysfs trees")
    }

    // MARK: state files

    /// `usage` in every mode, with what each may exit with.
    static let usageModes: [(arguments: [String], statuses: Set<Int32>)] = [
        ([], []), (["--hourly"], []), (["--daily", "--format", "csv"], []), (["--monthly"], []), (["--yearly", "--format", "json"], []),
        (["--cycle"], []), (["--cycle", "--format", "json"], []), (["--top", "3"], []), (["--check"], [3, 4]),
        (["--svg", "{dir}/c.svg", "--cycle"], []), (["--format", "json"], []), (["--format", "csv", "--hourly"], []),
    ]

    /// A value for a state file's column: each extreme, the edges, and
    /// random ones from the seed.
    static func columnValues(_ random: inout SplitMix64, edges: [String]) -> [(String, Extreme?)] {
        var values: [(String, Extreme?)] = Extreme.allCases.map { ($0.sql, $0) }
        for edge in edges { values.append((edge, nil)) }
        let shift = random.next() % 64
        values.append((String(Int64(bitPattern: random.next()) >> shift), nil))
        let double = Double(bitPattern: random.next())
        values.append((double.isFinite ? String(double) : "0.5", nil))
        return values
    }

    /// One mutation of the base state file, then its readers.
    static func stateJob(_ label: String, sql: String, extreme: Extreme?, readers: [FuzzRun]) -> FuzzJob {
        FuzzJob(
            setup: [["cp", "{base}", "{dir}/s.db"], ["sqlite3", "{dir}/s.db", "PRAGMA ignore_check_constraints = ON; " + sql]],
            runs: readers.map { reader in
                var run = reader
                run.label = label + ": " + reader.label
                run.extreme = extreme
                return run
            })
    }

    static func usageReaders(_ modes: [(arguments: [String], statuses: Set<Int32>)] = usageModes) -> [FuzzRun] {
        modes.map { mode in
            var run = FuzzRun(
                label: (["usage"] + mode.arguments).joined(separator: " "), arguments: ["usage", "--state", "{dir}/s.db"] + mode.arguments)
            run.statuses = mode.statuses
            return run
        }
    }

    /// A sampler that restores the file: export, stopped once it wrote a report.
    static var exportReader: FuzzRun {
        var run = FuzzRun(
            label: "export --state",
            arguments: [
                "export", "--state", "{dir}/s.db", "--boot-id-file", "{boot}", "--json", "{dir}/r.json", "--every", "20ms", "--interval", "10ms",
            ])
        run.inNamespace = true
        run.stop = .whenFile("{dir}/r.json", 1.5)
        return run
    }

    /// serve with the file: its plan gauges read the plans after each save.
    static var serveReader: FuzzRun {
        var run = FuzzRun(
            label: "serve --state",
            arguments: [
                "serve", "--state", "{dir}/s.db", "--boot-id-file", "{boot}", "--listen", "127.0.0.1:{port}", "--interval", "10ms",
                "--save-every", "10ms",
            ])
        run.inNamespace = true
        run.stop = .after(0.5)
        return run
    }

    /// Three usage modes, turning with `n`: every mode meets every column.
    static func someModes(_ n: Int) -> [(arguments: [String], statuses: Set<Int32>)] {
        [usageModes[n % usageModes.count], usageModes[(n + 4) % usageModes.count], usageModes[(n + 8) % usageModes.count]]
    }

    /// The tables `usage` and `plan` read: usage_hours (its start and
    /// bytes in every usage mode, the other columns in three modes each,
    /// turning), schema 1's usage days, plans (with plan list and plan
    /// set), and meta's times.
    static func readerJobs() -> [FuzzJob] {
        var random = SplitMix64(seed: seed ^ 0x7573_6167_65)
        var jobs: [FuzzJob] = []
        let first = "rowid = (SELECT min(rowid) FROM usage_hours)"
        let hours: [(String, [String], Bool)] = [
            ("start", ["-62104060800", "253370764799", "-62104060801", "253370764800", "0"], true), ("rx_bytes", [], true), ("tx_bytes", [], true),
            ("seconds", ["1", "31622400", "31622401"], false), ("rx_packets", [], false), ("tx_packets", [], false), ("quality", ["2", "3"], false),
        ]
        for (column, edges, everyMode) in hours {
            for (value, extreme) in columnValues(&random, edges: edges) {
                jobs.append(
                    stateJob(
                        "usage_hours.\(column) = \(value)", sql: "UPDATE usage_hours SET \(column) = \(value) WHERE \(first);",
                        extreme: extreme, readers: usageReaders(everyMode ? usageModes : someModes(jobs.count))))
            }
        }
        // Totals near 2^64: every hour of a day holds 2^63-1 each way.
        jobs.append(
            stateJob(
                "every hour at 2^63-1 bytes", sql: "UPDATE usage_hours SET rx_bytes = 9223372036854775807, tx_bytes = 9223372036854775807;",
                extreme: nil,
                readers: usageReaders().map {
                    var run = $0; run.expect = .accept; return run
                }))
        let days: [(String, [String])] = [
            ("period", ["'0002-01-01'", "'9998-12-31'", "'0001-12-31'", "'2026-02-30'", "'99999-01-01'", "'-1-01-01'", "'2026-1-1'"]),
            ("rx_bytes", []), ("tx_bytes", []), ("rx_packets", []), ("tx_packets", []), ("quality", []),
        ]
        for (column, edges) in days {
            for (value, extreme) in columnValues(&random, edges: edges) {
                let text = column == "period" && extreme != nil ? "'\(extreme!.rawValue)-01-01'" : value
                jobs.append(
                    stateJob(
                        "usage.\(column) = \(text)", sql: "UPDATE usage SET \(column) = \(text) WHERE granularity = 'day';", extreme: extreme,
                        readers: usageReaders([([], []), (["--monthly", "--format", "json"], [])])))
            }
        }
        let plans: [(String, [String])] = [("cycle_start_day", ["1", "31", "32"]), ("quota_bytes", ["NULL", "1"])]
        let planModes = usageModes.filter { $0.arguments.contains("--cycle") || $0.arguments.contains("--check") } + [([], [])]
        for (column, edges) in plans {
            for (value, extreme) in columnValues(&random, edges: edges) {
                var readers = usageReaders(planModes)
                readers.append(FuzzRun(label: "plan list", arguments: ["plan", "list", "--state", "{dir}/s.db", "--format", "json"]))
                readers.append(FuzzRun(label: "plan set", arguments: ["plan", "set", "wlan0", "--state", "{dir}/s.db", "--cycle-start", "2"]))
                jobs.append(stateJob("plans.\(column) = \(value)", sql: "UPDATE plans SET \(column) = \(value);", extreme: extreme, readers: readers))
            }
        }
        let meta = ["saved", "save_every", "stopped", "totals_since", "created", "schema_version"]
        for key in meta {
            for (value, extreme) in columnValues(&random, edges: ["'1796083200.5'"]) {
                let text = value.hasPrefix("'") ? value : "'\(value)'"
                jobs.append(
                    stateJob(
                        "meta.\(key) = \(text)",
                        sql: "INSERT OR REPLACE INTO meta VALUES ('\(key)', \(text)); UPDATE meta SET value = '1' WHERE key = 'running';",
                        extreme: extreme, readers: usageReaders([([], []), (["--format", "json"], []), (["--check"], [3, 4])])))
            }
        }
        return jobs
    }

    @Test func everyNumericColumnUsageAndPlanRead() throws {
        let fuzz = try FuzzRoom()
        try fuzz.makeBaseState()
        try fuzz.run(Self.readerJobs(), namespace: nil, what: "state files (usage, plan)")
    }

    /// The tables a sampler restores: interfaces (every counter, time,
    /// index, quality and event count), meta's times, and plans (serve's
    /// gauges).
    static func samplerJobs() -> [FuzzJob] {
        var random = SplitMix64(seed: seed ^ 0x7361_6D70_6C65)
        var jobs: [FuzzJob] = []
        let counters = CounterKey.allCases.map(\.jsonKey)
        var columns: [(String, [String])] = [
            ("ifindex", ["NULL", "2147483647", "2147483648"]), ("width", ["32"]), ("speed_bps", ["NULL"]), ("has_last", ["0"]),
            ("last_time", ["1e12", "-1e12", "1000000000001"]), ("first_seen", []), ("last_seen", []), ("deleted_at", ["NULL", "5"]),
            ("quality", ["2", "7"]), ("wraps", ["4294967295", "4294967296"]), ("resets", []), ("recreations", []), ("deletions", []),
        ]
        columns += counters.flatMap { key in ["last_", "total_", "base_"].map { ($0 + key, ["NULL"]) } }
        for (column, edges) in columns {
            for (value, extreme) in columnValues(&random, edges: edges) {
                jobs.append(
                    stateJob(
                        "interfaces.\(column) = \(value)", sql: "UPDATE interfaces SET \(column) = \(value) WHERE name = 'lo';",
                        extreme: extreme, readers: [exportReader]))
            }
        }
        for key in ["saved", "save_every", "stopped", "totals_since", "created", "started"] {
            for (value, extreme) in columnValues(&random, edges: []) {
                let text = value.hasPrefix("'") ? value : "'\(value)'"
                jobs.append(
                    stateJob(
                        "meta.\(key) = \(text)",
                        sql:
                            "INSERT OR REPLACE INTO meta VALUES ('\(key)', \(text)); UPDATE meta SET value = '1' WHERE key = 'running'; DELETE FROM meta WHERE key = 'totals_since' AND '\(key)' = 'created';",
                        extreme: extreme, readers: [exportReader]))
            }
        }
        for column in ["cycle_start_day", "quota_bytes"] {
            for (value, extreme) in columnValues(&random, edges: []) {
                jobs.append(
                    stateJob("plans.\(column) = \(value)", sql: "UPDATE plans SET \(column) = \(value);", extreme: extreme, readers: [serveReader]))
            }
        }
        return jobs
    }

    @Test(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)))
    func everyNumericColumnASamplerRestores() throws {
        try Netns.requireRoot()
        let fuzz = try FuzzRoom()
        try fuzz.makeBaseState()
        let ns = try TestNamespace()
        try fuzz.run(Self.samplerJobs(), namespace: ns.name, what: "state files (samplers)")
    }

    /// Every table and column the state fuzz mutates is in the schema, and
    /// every one of them meets every extreme.
    @Test func theStateFuzzCoversEveryNumericColumn() throws {
        let fuzz = try FuzzRoom()
        try fuzz.makeBaseState()
        let schema = try run(["sqlite3", fuzz.base, ".schema"]).out
        let jobs = Self.readerJobs() + Self.samplerJobs()
        var seen: [String: Set<Extreme>] = [:]
        for job in jobs {
            guard let label = job.runs.first?.label, let dot = label.firstIndex(of: "."), let equals = label.range(of: " = ") else { continue }
            let column = String(label[label.index(after: dot)..<equals.lowerBound])
            #expect(schema.contains(column) || label.hasPrefix("meta."), "\(label): no such column")
            if let extreme = job.runs.first?.extreme { seen[String(label[..<equals.lowerBound]), default: []].insert(extreme) }
        }
        for (column, extremes) in seen { #expect(extremes == Set(Extreme.allCases), "\(column): \(extremes)") }
        // Every integer or real column of the tables the readers read, and
        // the times meta keeps.
        var numeric = ["meta.saved", "meta.save_every", "meta.stopped", "meta.totals_since", "meta.created", "meta.started", "usage.period"]
        for table in ["interfaces", "usage_hours", "usage", "plans"] {
            let columns = try run(["sqlite3", fuzz.base, "SELECT name FROM pragma_table_info('\(table)') WHERE type IN ('INTEGER', 'REAL')"]).out
            numeric += columns.split(separator: "\n").map { "\(table).\($0)" }
        }
        #expect(numeric.count > 50)
        for column in numeric { #expect(seen[column] != nil, "\(column) is not fuzzed") }
    }

    // MARK: what the messages say

    /// A refusal says what was wrong, where, and what is allowed.
    @Test func refusalsNameTheValueWhereItIsAndTheRange() throws {
        let fuzz = try FuzzRoom()
        try fuzz.makeBaseState()
        let interval = try ifmeter(["sample", "--interval", "9223372036854775807"])
        #expect(
            interval.status == 64 && interval.err.contains("'9223372036854775807' for '--interval <duration>'")
                && interval.err.contains("1ms to 365d"), "\(interval)")
        let size = try ifmeter(["export", "--json-lines", fuzz.root + "/l", "--max-size", "17179869184GiB"])
        #expect(size.status == 64 && size.err.contains("'17179869184GiB' for '--max-size <size>'") && size.err.contains("2^63-1"), "\(size)")

        let file = fuzz.root + "/t.jsonl"
        try Self.trace("t", "1e19", width: 64).write(toFile: file, atomically: false, encoding: .utf8)
        let replay = try ifmeter(["replay", "--format", "text", file])
        #expect(
            replay.status == 65 && replay.err == "Error: \(file):3: \"t\" must be a number of seconds from -1e12 to 1e12, got 1e19\n", "\(replay)")

        let state = fuzz.root + "/hostile.db"
        try run(["cp", fuzz.base, state])
        try run(["sqlite3", state, "UPDATE usage_hours SET start = 9223372036854775807 WHERE rowid = (SELECT min(rowid) FROM usage_hours);"])
        for mode in Self.usageModes.map(\.arguments) {
            let usage = try ifmeter(["usage", "--state", state] + mode.map { $0.replacingOccurrences(of: "{dir}", with: fuzz.root) })
            #expect(usage.status == 65, "\(mode): \(usage)")
            #expect(usage.err.hasPrefix("Error: refusing state file \(state): ") && usage.err.split(separator: "\n").count == 1, "\(usage.err)")
            #expect(
                usage.err.contains("usage_hours row of 'eth0': start is 9223372036854775807, not a Unix time from -62104060800 to 253370764799"),
                "\(usage.err)")
        }
        try run(["cp", fuzz.base, state])
        try run(["sqlite3", state, "PRAGMA ignore_check_constraints = ON; UPDATE plans SET cycle_start_day = -9223372036854775808;"])
        let plans = try ifmeter(["plan", "list", "--state", state])
        #expect(
            plans.status == 65
                && plans.err.contains("plans row 'eth0': cycle_start_day is -9223372036854775808, not a day of the month from 1 to 31"), "\(plans)")
    }
}

// MARK: - running many ifmeters at once

/// What a run must end with, beyond not crashing.
enum FuzzExpectation: Sendable {
    /// Any exit a failure may have (or 0).
    case any
    /// Accepted: 0 (or a status the command documents).
    case accept
    /// A usage error (64) naming the option and the value.
    case refuse
}

/// How a run is ended.
enum FuzzStop: Sendable {
    /// It ends by itself (or the test fails it after 60 s).
    case never
    /// SIGTERM after this long when it still runs.
    case after(Double)
    /// SIGTERM once this file exists, or after the limit.
    case whenFile(String, Double)
    /// SIGTERM once its stderr says this, or after the limit.
    case whenStderr(String, Double)
}

/// One ifmeter command line and what it must do. `{dir}` is the job's
/// folder, `{base}` the base state file, `{boot}` its boot id file,
/// `{port}` a port of the worker's own (9880-9889).
struct FuzzRun: Sendable {
    var label: String
    var arguments: [String]
    var inNamespace = false
    var stop = FuzzStop.never
    var expect = FuzzExpectation.any
    /// Statuses the command documents besides 0, 1, 64 and 65.
    var statuses: Set<Int32> = []
    /// What a usage error must name.
    var names: [String] = []
    /// The extreme this run holds, for coverage.
    var extreme: NumericFuzzTests.Extreme?
}

/// What the workers share: the next job, the runs done, the failures.
final class FuzzTally: Sendable {
    let next = Mutex(0)
    let runs = Mutex(0)
    let failures = Mutex<[String]>([])
}

/// Runs done one after the other in one folder: setup commands, then ifmeters.
struct FuzzJob: Sendable {
    var setup: [[String]] = []
    var runs: [FuzzRun]
}

/// A folder for a fuzz, its base state file, and the pool that runs jobs.
final class FuzzRoom: Sendable {
    let root: String
    var base: String { root + "/base.db" }
    var boot: String { root + "/boot_id" }
    static let workers = 10

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-fuzz-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/traces", withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    /// A state file as a sampler leaves it: lo's totals and last counters
    /// (index 1, this boot), gone0's (an interface no longer there), eth0's
    /// usage in three hours, a plan for eth0, and a schema 1 day row; written through the store, then made one
    /// file (no WAL) so that a copy holds it all.
    func makeBaseState() throws {
        let now = Date().timeIntervalSince1970
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let monotonic = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
        try "fuzz-boot\n".write(toFile: boot, atomically: true, encoding: .utf8)
        do {
            let store = try StateStore(path: base, host: hostName(), bootID: "fuzz-boot", now: now - 7200)
            var all = Counters()
            for (k, key) in CounterKey.allCases.enumerated() { all[key] = UInt64(1000 + k) }
            let loopback = Classification(kind: .loopback, evidence: "fuzz")
            let lo = InterfaceTotals(
                name: "lo", netns: "", classification: loopback, index: 1, width: .bits64, speedBps: nil, attributes: nil, totals: all,
                quality: .exact, events: EventCounts(wraps: 1, resets: 1), baseline: all, lastKernelStats: nil, firstSeen: monotonic - 60,
                lastSeen: monotonic - 5, present: true, deletedAt: nil)
            let ethernet = Classification(kind: .ethernet, evidence: "fuzz")
            let eth0 = InterfaceTotals(
                name: "eth0", netns: "", classification: ethernet, index: 7, width: .bits64, speedBps: 1_000_000_000, attributes: nil,
                totals: all, quality: .exact, events: EventCounts(), baseline: .zero, lastKernelStats: nil, firstSeen: monotonic - 60,
                lastSeen: monotonic - 50, present: false, deletedAt: monotonic - 50)
            // Saved with its last counters and not in the namespace: after
            // an unclean stop its traffic since the save is unknown, and the
            // hour of meta's `saved` is marked a lower bound.
            let gone = InterfaceTotals(
                name: "gone0", netns: "", classification: ethernet, index: 42, width: .bits32, speedBps: nil, attributes: nil,
                totals: all, quality: .wrapCorrected, events: EventCounts(wraps: 3), baseline: .zero, lastKernelStats: nil,
                firstSeen: monotonic - 60, lastSeen: monotonic - 5, present: true, deletedAt: nil)
            let hour = LocalZone.system.hourStart(Int64(now))
            let hours = (0..<3).map { n in
                HourUsage(
                    start: hour - 3600 * Int64(2 - n), counters: Counters(rxBytes: 1000, txBytes: 500, rxPackets: 10, txPackets: 5), quality: .exact)
            }
            try store.save(
                [
                    DeltaEngine.SavedSeries(
                        totals: lo, last: InterfaceSample(name: "lo", index: 1, classification: loopback, counters: all), lastTime: monotonic - 5),
                    DeltaEngine.SavedSeries(totals: eth0, last: nil, lastTime: monotonic - 50),
                    DeltaEngine.SavedSeries(
                        totals: gone, last: InterfaceSample(name: "gone0", index: 42, classification: ethernet, width: .bits32, counters: all),
                        lastTime: monotonic - 5),
                ],
                usage: [SeriesKey(name: "eth0"): UsageEntry(kind: .ethernet, counters: .zero, quality: .exact, hours: hours)], wallTime: now - 60)
            try store.setPlan(Plan(pattern: "eth0", cycleStartDay: 1, quotaBytes: 1_000_000_000, direction: .both))
            try store.markStopped(wallTime: now - 60)
        }
        try IfmeterTestSupport.run([
            "sqlite3", base, "INSERT INTO usage VALUES ('eth0', 'day', '2026-11-30', 'ethernet', 100, 10, 2, 1, 0); PRAGMA journal_mode = DELETE;",
        ])
    }

    /// Runs the jobs on `workers` threads and records every run that broke
    /// a rule; prints how many ran and how long it took.
    func run(_ jobs: [FuzzJob], namespace: String?, what: String) throws {
        let binary = try ifmeterBinary()
        let tally = FuzzTally()
        let started = Date()
        let group = DispatchGroup()
        for worker in 0..<Self.workers {
            group.enter()
            let thread = Thread { [self] in
                defer { group.leave() }
                while true {
                    let index = tally.next.withLock { n in
                        defer { n += 1 }
                        return n
                    }
                    guard index < jobs.count else { return }
                    let problems = self.execute(jobs[index], index: index, worker: worker, binary: binary, namespace: namespace)
                    tally.runs.withLock { $0 += jobs[index].runs.count }
                    if !problems.isEmpty { tally.failures.withLock { $0 += problems } }
                }
            }
            thread.start()
        }
        group.wait()
        let failed = tally.failures.withLock { $0 }
        let count = tally.runs.withLock { $0 }
        let crashed = failed.filter { $0.contains(": crashed: ") || $0.contains(": trapped: ") }
        print(
            "numeric fuzz (\(what), seed \(String(NumericFuzzTests.seed, radix: 16))): \(count) runs in \(jobs.count) jobs, "
                + "\(String(format: "%.1f", Date().timeIntervalSince(started))) s, \(failed.count) failed, \(crashed.count) of them crashes")
        // Crashes first: they are what the fuzz is for.
        for failure in (crashed + failed.filter { !crashed.contains($0) }).prefix(60) { Issue.record(Comment(rawValue: failure)) }
        if failed.count > 60 { Issue.record("… and \(failed.count - 60) more") }
    }

    /// One job: its setup, then each run, checked. Returns what went wrong.
    func execute(_ job: FuzzJob, index: Int, worker: Int, binary: String, namespace: String?) -> [String] {
        let dir = root + "/job-\(index)"
        mkdir(dir, 0o700)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func fill(_ text: String) -> String {
            text.replacingOccurrences(of: "{dir}", with: dir).replacingOccurrences(of: "{base}", with: base)
                .replacingOccurrences(of: "{boot}", with: boot).replacingOccurrences(of: "{port}", with: String(9880 + worker))
        }
        for command in job.setup {
            guard let result = try? IfmeterTestSupport.run(command.map(fill), allowFailure: true), result.status == 0 else {
                return ["setup of '\(job.runs.first?.label ?? "?")' failed: \(command.map(fill).joined(separator: " "))"]
            }
        }
        var problems: [String] = []
        for (n, run) in job.runs.enumerated() {
            if let problem = execute(
                run, arguments: run.arguments.map(fill), stderr: dir + "/stderr-\(n)", fill: fill, binary: binary, namespace: namespace)
            {
                problems.append(problem)
            }
        }
        return problems
    }

    func execute(_ run: FuzzRun, arguments: [String], stderr path: String, fill: (String) -> String, binary: String, namespace: String?) -> String? {
        let command = (run.inNamespace ? ["ip", "netns", "exec", namespace ?? "", binary] : [binary]) + arguments
        let line = "ifmeter " + arguments.joined(separator: " ")
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0, let child = try? ChildProcess(command, stderr: fd) else {
            if fd >= 0 { close(fd) }
            return "\(run.label): cannot start \(line)"
        }
        close(fd)
        func stderr() -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        var signalled = false
        func stop(once ready: () -> Bool, within limit: Double) {
            let deadline = Date().addingTimeInterval(limit)
            while child.isRunning, !ready(), Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            // Not before it handles SIGTERM: a start that a loaded machine
            // made slower than `limit` would be ended by the signal's
            // default action, which says nothing of how ifmeter stops.
            let started = Date().addingTimeInterval(60)
            while child.isRunning, child.handles(SIGTERM) == false, Date() < started { Thread.sleep(forTimeInterval: 0.02) }
            if child.isRunning {
                signalled = true
                child.signal(SIGTERM)
            }
        }
        switch run.stop {
        case .never: break
        case .after(let seconds): stop(once: { false }, within: seconds)
        case .whenFile(let file, let limit): stop(once: { FileManager.default.fileExists(atPath: fill(file)) }, within: limit)
        case .whenStderr(let text, let limit): stop(once: { stderr().contains(text) }, within: limit)
        }
        if !child.wait(timeout: 60) {
            child.forceStop()
            return "\(run.label): \(line) \(signalled ? "did not stop on SIGTERM" : "did not finish in 60 s")"
        }
        let err = stderr()
        let status = child.terminationStatus
        let said =
            "\(line) → \(child.terminationReason == .exit ? "exit \(status)" : "signal \(status)")\(signalled ? " after SIGTERM" : ""); stderr: \(err.suffix(600).debugDescription)"
        guard child.terminationReason == .exit, status < 128 else { return "\(run.label): crashed: \(said)" }
        if err.contains("Fatal error") || err.contains("Program crashed") || err.contains("runtime failure") {
            return "\(run.label): trapped: \(said)"
        }
        // 65: the data was refused (one Error line, checked below), which
        // a slow start can say after the signal was sent.
        if signalled, status != 0, status != 64, status != 65 { return "\(run.label): stopped by SIGTERM, it must exit 0: \(said)" }
        let documented: Set<Int32> = [0, 1, 64, 65]
        guard documented.contains(status) || run.statuses.contains(status) else { return "\(run.label): an exit no command documents: \(said)" }
        if [1, 64, 65].contains(status) {
            let errors = err.split(separator: "\n").filter { $0.hasPrefix("Error: ") }
            guard errors.count == 1 else { return "\(run.label): \(errors.count) 'Error:' lines: \(said)" }
            if status == 64, !run.names.allSatisfy({ errors[0].contains("'\($0)") }) {
                return "\(run.label): the usage error does not name \(run.names): \(said)"
            }
        }
        switch run.expect {
        case .any: break
        case .accept where status != 0 && !run.statuses.contains(status): return "\(run.label): a value in range was refused: \(said)"
        case .refuse where status != 64: return "\(run.label): a value out of range was not a usage error: \(said)"
        default: break
        }
        return nil
    }
}

/// The numeric options the fuzz finds in the specs, parsed in process:
/// its tables, without running the binary.
@Suite struct NumbersWithSpacesTests {
    func failure(_ arguments: [String], _ command: any Command.Type) -> CLIError? {
        do {
            _ = try command.init(ParsedArguments.parse(arguments, spec: command.spec))
            return nil
        } catch {
            return error
        }
    }

    /// Issue 29, finding 10: `plan set --quota ' 1 '` was accepted (the
    /// quota's parser trimmed spaces, no other did). Every number of every
    /// command (from the specs, as `NumericFuzzTests` finds them) refuses a
    /// value with spaces or a tab around it, as a usage error naming the
    /// option, in one line; the same value without them is taken.
    @Test func numbersWithSpacesAroundAreRefused() throws {
        var tried = 0
        for (command, option, kind) in NumericFuzzTests.numericOptions {
            let type = try #require(IfmeterCLI.commands.first { $0.spec.name == "ifmeter " + command })
            let value = try #require(NumericFuzzTests.edges(option.long, kind).accept.first)
            func arguments(_ value: String) -> [String] {
                NumericFuzzTests.attempt(command, option.long, value).arguments.dropFirst().map {
                    $0.replacing("{port}", with: "9874").replacing("{dir}", with: "/nonexistent").replacing("{base}", with: "/nonexistent/s.db")
                }
            }
            let plain = failure(arguments(value), type)
            #expect(plain.map { !$0.line.contains("'\(option.long)") } ?? true, "\(command) \(option.long) \(value): \(plain?.line ?? "")")
            for padded in [" \(value) ", " \(value)", "\(value) ", "\t\(value)"] {
                let error = failure(arguments(padded), type)
                #expect(error?.exitCode == 64, "\(command) \(option.long) '\(padded)' is refused as a usage error")
                #expect(error?.line.contains("'\(option.long)") == true && error?.line.contains("\n") == false, "\(error?.line ?? "")")
                tried += 1
            }
        }
        #expect(tried > 60, "every numeric option was tried")
        // plan --limit PERIOD=SIZE reads its size with the same parser.
        let base = ["set", "eth0", "--state", "/nonexistent/p.db"]
        #expect(failure(base + ["--limit", "day=1GB"], PlanCommand.self) == nil)
        for padded in ["day= 1GB", "day=1GB ", " day=1GB"] {
            #expect(failure(base + ["--limit", padded], PlanCommand.self)?.line.contains("'--limit <period=size>'") == true, "\(padded)")
        }
    }
}
