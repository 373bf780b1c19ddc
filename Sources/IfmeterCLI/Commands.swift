import IfmeterCore
import IfmeterSampling

/// A subcommand: its declaration, validation (in `init`) and its work.
protocol Command {
    static var spec: CommandSpec { get }
    /// Validates everything before anything runs.
    init(_ p: ParsedArguments) throws(CLIError)
    func run() throws(CLIError)
}

public enum IfmeterCLI {
    public static let version = "0.1.0"

    static var commands: [any Command.Type] {
        [
            LiveCommand.self, ListCommand.self, SampleCommand.self, RecordCommand.self, ReplayCommand.self,
            ServeCommand.self, ExportCommand.self, UsageCommand.self,
        ]
    }

    static let rootSpec = CommandSpec(
        name: "ifmeter",
        abstract: "Measure network traffic per interface, and say how sure the figures are.",
        discussion: """
            SUBCOMMANDS:
            \(commands.map { "  " + pad(String($0.spec.name.dropFirst("ifmeter ".count)), 10) + $0.spec.abstract }.joined(separator: "\n"))

              See 'ifmeter <subcommand> --help' for detailed help.

            Figures are estimates from interface counters: they include protocol
            overhead and are not per-app accounting.
            """,
        options: [OptionSpec("--version", help: "Show the version.")])

    static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count)
    }

    /// Runs ifmeter with `arguments` (without the program name) and returns
    /// the exit code.
    public static func main(_ arguments: [String]) -> Int32 {
        do {
            try dispatch(arguments)
            return 0
        } catch {
            Output.error(error.line)
            return error.exitCode
        }
    }

    static func dispatch(_ arguments: [String]) throws(CLIError) {
        guard let first = arguments.first, !first.hasPrefix("-") else {
            let root = try ParsedArguments.parse(arguments, spec: rootSpec)
            if root.wantsHelp { return try Output.put(rootSpec.help) }
            if root.flag("--version") { return try Output.put("ifmeter \(version)\n") }
            // No command: the main job on a terminal; help elsewhere.
            guard Output.isTerminal(1) else { return try Output.put(rootSpec.help) }
            return try LiveCommand(ParsedArguments.parse([], spec: LiveCommand.spec)).run()
        }
        guard let command = commands.first(where: { $0.spec.name == "ifmeter " + first }) else {
            throw .usage("unknown subcommand '\(first)'", command: "ifmeter")
        }
        let parsed = try ParsedArguments.parse(Array(arguments.dropFirst()), spec: command.spec)
        if parsed.wantsHelp { return try Output.put(command.spec.help) }
        try command.init(parsed).run()
    }
}

struct ListCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter list",
        abstract: "List interfaces with index, kind, its evidence, counter width, speed and state.",
        options: CommonOptions.source + CommonOptions.filters + [
            OptionSpec("--format", value: "format", help: "text or json.", default: "text"),
        ])

    let arguments: ParsedArguments
    let filter: InterfaceFilter
    let json: Bool

    init(_ p: ParsedArguments) throws(CLIError) {
        arguments = p
        filter = try CommonOptions.filter(p)
        json = try CommonOptions.format(p, allowed: ["text", "json"], default: "text") == "json"
        _ = try CommonOptions.sourceKind(p)
    }

    func run() throws(CLIError) {
        let source = try CommonOptions.openSource(arguments)
        let sample = try CommonOptions.take(source, filter).sample
        let renderer = ListRenderer()
        try Output.put(json
            ? JSONWriter(indent: 2).string(renderer.json(sample, source: source.sourceName)) + "\n"
            : renderer.text(sample, source: source.sourceName))
    }
}

struct SampleCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter sample",
        abstract: "Print one snapshot of the counters, or N intervals with deltas and rates.",
        discussion: """
            Without --count or --watch, prints each interface's counters once. With
            --count N, samples N+1 times and prints N intervals; with --watch, goes
            on until interrupted. JSON output is one object per line.
            """,
        options: [
            CommonOptions.interval,
            OptionSpec("--count", short: "-n", value: "n", help: "Number of intervals to print."),
            OptionSpec("--watch", help: "Print intervals until interrupted."),
            OptionSpec("--format", value: "format", help: "text or json.", default: "text"),
            CommonOptions.bits, CommonOptions.maxRate,
        ] + CommonOptions.source + CommonOptions.filters)

    let arguments: ParsedArguments
    let interval: Double
    let count: Int?
    let watch: Bool
    let json: Bool
    let bits: Bool
    let filter: InterfaceFilter
    let configuration: EngineConfiguration

    init(_ p: ParsedArguments) throws(CLIError) {
        arguments = p
        interval = try CommonOptions.duration(p, "--interval", default: 1)
        count = try CommonOptions.positiveInt(p, "--count")
        watch = p.flag("--watch")
        if watch, count != nil { throw p.usage("'--count' and '--watch' cannot be used together") }
        json = try CommonOptions.format(p, allowed: ["text", "json"], default: "text") == "json"
        bits = p.flag("--bits")
        filter = try CommonOptions.filter(p)
        configuration = try CommonOptions.engineConfiguration(p)
        _ = try CommonOptions.sourceKind(p)
    }

    func run() throws(CLIError) {
        let source = try CommonOptions.openSource(arguments)
        guard count != nil || watch else {
            let sample = try CommonOptions.take(source, filter).sample
            let renderer = SnapshotRenderer(bits: bits)
            return try Output.put(json
                ? JSONWriter().string(renderer.json(sample, source: source.sourceName)) + "\n"
                : renderer.text(sample, source: source.sourceName))
        }
        StopSignal.install()
        var engine = DeltaEngine(configuration: configuration)
        let renderer = IntervalRenderer(bits: bits)
        // The baseline: its link events count nothing.
        let first = try CommonOptions.take(source, filter).sample
        engine.apply(first)
        let start = first.time
        var printed = 0
        if !json, !watch || Output.isTerminal(1) {
            try Output.put("Sampling \(source.sourceName) every \(Units.duration(interval)); figures are estimates (see the end).\n\n")
        }
        while watch || printed < count! {
            guard sleepUntil(start + Double(printed + 1) * interval) else { break }
            let (events, sample) = try CommonOptions.take(source, filter)
            let previous = engine.lastSampleTime
            let deltas = engine.apply(events, sample)
            let seconds = previous.map { sample.time - $0 }
            if json {
                try Output.put(JSONWriter().string(
                    renderer.json(deltas: deltas, totals: engine.totals(for:), time: sample.time, seconds: seconds)) + "\n")
            } else {
                try Output.put(renderer.text(deltas: deltas, totals: engine.totals(for:), time: sample.time, seconds: seconds) + "\n")
            }
            printed += 1
        }
        if !json { try Output.put(Caveats.all.joined(separator: "\n") + "\n") }
    }
}

struct RecordCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter record",
        abstract: "Record live samples as a trace (ifmeter/1, JSON Lines) for replay.",
        discussion: """
            Each sample is one line, written and flushed whole, so an interrupted
            recording is still a valid trace. Without --count or --duration,
            records until interrupted.
            """,
        options: [
            CommonOptions.interval,
            OptionSpec("--count", short: "-n", value: "n", help: "Number of intervals to record (N+1 samples)."),
            OptionSpec("--duration", value: "duration", help: "Record for this long."),
            OptionSpec("--output", short: "-o", value: "file", help: "Write the trace here instead of stdout."),
        ] + CommonOptions.source + CommonOptions.filters)

    let arguments: ParsedArguments
    let interval: Double
    let intervals: Int?
    let output: String?
    let filter: InterfaceFilter

    init(_ p: ParsedArguments) throws(CLIError) {
        arguments = p
        interval = try CommonOptions.duration(p, "--interval", default: 1)
        let count = try CommonOptions.positiveInt(p, "--count")
        let duration = p.has("--duration") ? try CommonOptions.duration(p, "--duration", default: 0) : nil
        if count != nil, duration != nil { throw p.usage("'--count' and '--duration' cannot be used together") }
        if let duration {
            intervals = max(1, Int((duration / interval).rounded(.down)))
        } else {
            intervals = count
        }
        output = p.value("--output").flatMap { $0 == "-" ? nil : $0 }
        filter = try CommonOptions.filter(p)
        _ = try CommonOptions.sourceKind(p)
    }

    func run() throws(CLIError) {
        let source = try CommonOptions.openSource(arguments)
        let file = try output.map { path throws(CLIError) in try TraceFile(creating: path) }
        let fd = file?.fd ?? 1
        defer { file?.close() }
        StopSignal.install()
        let header = TraceHeader(platform: Platform.current, source: source.sourceName, host: hostName())
        try Output.put(TraceWriter.headerLine(header, extra: ["interval": .number(interval)]) + "\n", to: fd)
        var taken = 0
        var start = 0.0
        while intervals.map({ taken <= $0 }) ?? true {
            if taken > 0, !sleepUntil(start + Double(taken) * interval) { break }
            let (events, sample) = try CommonOptions.take(source, filter)
            if taken == 0 { start = sample.time }
            // Deletions with their final counters come before the sample, as
            // the engine applies them (none before the first sample).
            var lines = ""
            if taken > 0 {
                for event in events.deleted { lines += TraceWriter.line(.deleted(event)) + "\n" }
            }
            try Output.put(lines + TraceWriter.line(.sample(sample)) + "\n", to: fd)
            taken += 1
        }
        try file?.sync()
    }
}

struct ReplayCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter replay",
        abstract: "Replay a trace through the delta engine and print the report.",
        discussion: """
            FILE is a trace in the ifmeter/1 format ('-' reads stdin). A malformed
            line stops the replay with its line number; no report is printed.
            """,
        options: [
            OptionSpec("--format", value: "format", help: "json or text.", default: "json"),
            CommonOptions.bits, CommonOptions.maxRate,
        ] + CommonOptions.filters,
        positionals: [PositionalSpec("file", help: "The trace to replay.")])

    let path: String
    let text: Bool
    let bits: Bool
    let filter: InterfaceFilter
    let arguments: ParsedArguments

    init(_ p: ParsedArguments) throws(CLIError) {
        arguments = p
        path = p.positionals[0]
        text = try CommonOptions.format(p, allowed: ["json", "text"], default: "json") == "text"
        bits = p.flag("--bits")
        filter = try CommonOptions.filter(p)
        _ = try CommonOptions.engineConfiguration(p)
    }

    func run() throws(CLIError) {
        let data = path == "-" ? try readStandardInput() : try readWholeFile(path, command: Self.spec.name)
        var reader = TraceReader()
        var records: [TraceRecord] = []
        var start = 0
        let name = path == "-" ? "<stdin>" : path
        while start < data.count {
            var end = start
            while end < data.count, data[end] != 0x0A { end += 1 }
            do {
                if let record = try reader.read(line: data[start..<end]) { records.append(record) }
            } catch {
                throw .data("\(name):\(error.line): \(error.message)")
            }
            start = end + 1
        }
        // The header, read with the first line, picks the name rules.
        var engine = DeltaEngine(configuration: try CommonOptions.engineConfiguration(arguments, platform: reader.header.platform))
        for record in records { engine.apply(record) }
        let report = Report(engine: engine, header: reader.header, filter: filter)
        try Output.put(text ? TextReportRenderer(bits: bits).render(report) : JSONReportRenderer().render(report))
    }
}
