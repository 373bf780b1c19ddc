import IfmeterCore
import IfmeterOutput
import IfmeterPipeline
import IfmeterSampling
import IfmeterStore
import IfmeterSystem

/// A subcommand: its declaration, validation (in `init`) and its work.
protocol Command {
    static var spec: CommandSpec { get }
    /// Validates everything before anything runs.
    init(_ p: ParsedArguments) throws(CLIError)
    func run() throws(CLIError)
}

package enum IfmeterCLI {
    package static let version = "0.1.0"

    static var commands: [any Command.Type] {
        [
            LiveCommand.self, ListCommand.self, SampleCommand.self, RecordCommand.self, ReplayCommand.self,
            ServeCommand.self, ExportCommand.self, UsageCommand.self, PlanCommand.self, StateCommand.self, RouteCommand.self, ConfigCommand.self,
        ]
    }

    static let versionFlag = Flag("--version", help: "Show the version.")

    static let rootSpec = CommandSpec(
        name: "ifmeter",
        abstract: "Measure network traffic per interface, and say how sure the figures are.",
        discussion: """
            SUBCOMMANDS:
            \(commands.map { "  " + pad(String($0.spec.name.dropFirst("ifmeter ".count)), 10) + $0.spec.abstract }.joined(separator: "\n"))

              See 'ifmeter <subcommand> --help' for detailed help.

            \(wordWrap(Caveat.sentence, width: 72).joined(separator: "\n"))
            """,
        options: [versionFlag.spec] + Generate.options)

    static func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count)
    }

    /// Runs ifmeter with `arguments` (without the program name) and returns
    /// the exit code.
    package static func main(_ arguments: [String]) -> Int32 {
        ProcessStart.prepare()
        do {
            try dispatch(arguments)
            return 0
        } catch {
            if !error.line.isEmpty { Output.error(error.line) }
            return error.exitCode
        }
    }

    static func dispatch(_ arguments: [String]) throws(CLIError) {
        if try Generate.run(arguments) { return }
        guard let first = arguments.first, !first.hasPrefix("-") else {
            let root = try ParsedArguments.parse(arguments, spec: rootSpec)
            if root.wantsHelp { return try Output.put(Output.forPeople(rootSpec.help)) }
            if root[versionFlag] { return try Output.put("ifmeter \(version)\n") }
            // No command: the main job on a terminal; help elsewhere.
            guard Output.isTerminal(1) else { return try Output.put(Output.forPeople(rootSpec.help)) }
            return try LiveCommand(ParsedArguments.parse([], spec: LiveCommand.spec)).run()
        }
        guard let command = commands.first(where: { $0.spec.name == "ifmeter " + first }) else {
            let names = commands.map { String($0.spec.name.dropFirst("ifmeter ".count)) }
            let hint = Suggestion.closest(to: first, among: names).map { " (did you mean '\($0)'?)" } ?? ""
            throw .usage("unknown subcommand '\(first)'\(hint)", command: "ifmeter")
        }
        let parsed = try ParsedArguments.parse(Array(arguments.dropFirst()), spec: command.spec)
        if parsed.wantsHelp { return try Output.put(Output.forPeople(command.spec.help)) }
        CommandLinePath.allowForeign = parsed[CommandLinePath.allowForeignFiles]
        // serve and export: the config file's settings, under the flags.
        if let path = parsed[ConfigFile.option] {
            let rest = Array(arguments.dropFirst())
            let (built, effective) = try ConfigFile.load(path).built(command, parsed, arguments: rest)
            // serve reads the file again on SIGHUP.
            if var serve = built as? ServeCommand {
                serve.reload = ConfigReload(path: path, given: parsed, arguments: rest, running: effective)
                return try serve.run()
            }
            return try built.run()
        }
        try command.init(parsed).run()
    }
}

struct ListCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter list",
        abstract: "List interfaces with index, kind, its evidence, counter width, speed and state.",
        options: CommonOptions.source + CommonOptions.filters + [CommonOptions.textOrJSON.spec])

    let setup: SamplingSetup
    let json: Bool

    init(_ p: ParsedArguments) throws(CLIError) {
        json = try CommonOptions.format(p, CommonOptions.textOrJSON, allowed: ["text", "json"], default: "text") == "json"
        setup = try SamplingSetup(p, sampleLimit: 1, stopOnFailure: true)
    }

    func run() throws(CLIError) {
        let pipeline = try setup.pipeline()
        let renderer = ListRenderer(), source = pipeline.source.sourceName
        let printer = Printer { update, _ in
            guard let sample = update.reading?.sample else { return nil }
            return json
                ? JSONWriter(indent: 2).string(renderer.json(sample, source: source)) + "\n"
                : Output.forPeople(renderer.text(sample, source: source))
        }
        pipeline.add(sink: printer)
        var waiter = SignalWaiter()
        pipeline.run(&waiter)
        try printer.check()
    }
}

struct SampleCommand: Command {
    enum Options {
        static let count = Option("--count", short: "-n", value: "n", help: "Number of intervals to print.")
        static let watch = Flag("--watch", help: "Print intervals until interrupted.")
        static let wide = Flag("--wide", help: "Also packet rates, errors and drops per interval.")
    }

    static let spec = CommandSpec(
        name: "ifmeter sample",
        abstract: "Print one snapshot of the counters, or N intervals with deltas and rates.",
        discussion: """
            Without --count or --watch, prints each interface's counters once. With
            --count N, samples N+1 times and prints N intervals; with --watch, goes
            on until interrupted. JSON output is one object per line.
            """,
        options: [
            CommonOptions.interval.spec,
            Options.count.spec,
            Options.watch.spec,
            Options.wide.spec,
            CommonOptions.textOrJSON.spec,
            CommonOptions.bits.spec, CommonOptions.maxRate.spec,
        ] + CommonOptions.source + CommonOptions.filters)

    let setup: SamplingSetup
    let count: Int?
    let watch: Bool
    let json: Bool
    let bits: Bool
    let wide: Bool
    /// The quality marks the intervals showed, for the legend at the end.
    let shown = Box<Set<Quality>>([])

    init(_ p: ParsedArguments) throws(CLIError) {
        count = try CommonOptions.positiveInt(p, Options.count, max: CommonOptions.maxCount)
        watch = p[Options.watch]
        if watch, count != nil { throw p.usage("'--count' and '--watch' cannot be used together") }
        json = try CommonOptions.format(p, CommonOptions.textOrJSON, allowed: ["text", "json"], default: "text") == "json"
        bits = p[CommonOptions.bits]
        wide = p[Options.wide]
        let limit = watch ? nil : (count.map { $0 + 1 } ?? 1)
        setup = try SamplingSetup(p, sampleLimit: limit, stopOnFailure: true)
    }

    func run() throws(CLIError) {
        // Before the state file says "running": a stop signal from then on
        // ends with a save, never with the default action.
        StopSignal.install(hangupStops: true)
        let pipeline = try setup.pipeline()
        let source = pipeline.source.sourceName
        let printer: Printer
        if count == nil && !watch {
            let renderer = SnapshotRenderer(bits: bits)
            printer = Printer { update, _ in
                guard let sample = update.reading?.sample else { return nil }
                return json
                    ? JSONWriter().string(renderer.json(sample, source: source)) + "\n"
                    : Output.forPeople(renderer.text(sample, source: source))
            }
        } else {
            let renderer = IntervalRenderer(bits: bits)
            let wide = self.wide
            printer = Printer(keepsTotals: true) { [shown] update, totals in
                // The baseline: its link events count nothing.
                guard case .sampled = update.outcome, !update.isBaseline else { return nil }
                if json {
                    return JSONWriter().string(
                        renderer.json(
                            deltas: update.deltas, totals: { totals[$0] }, time: update.time, seconds: update.seconds,
                            wallTime: LocalZone.system.rfc3339(milliseconds: update.wallTime), clockStep: update.clockStepSeconds)) + "\n"
                }
                return Output.forPeople(
                    renderer.text(
                        deltas: update.deltas, totals: { totals[$0] }, time: update.time, seconds: update.seconds,
                        heading: localTimeLabel(update.wallTime), clockStep: update.clockStepSeconds,
                        wide: wide, shown: &shown.value) + "\n")
            }
            if !json, !watch || Output.isTerminal(1) {
                try Output.put(
                    Output.forPeople(
                        "Sampling \(source) every \(Units.duration(setup.configuration.interval)); figures are estimates (see the end).\n\n"))
            }
        }
        pipeline.add(sink: printer)
        var waiter = SignalWaiter(stop: { printer.failure != nil })
        pipeline.run(&waiter)
        try printer.check()
        if !json, count != nil || watch { try Output.put(Output.forPeople(Caveat.legend(shown: shown.value).joined(separator: "\n") + "\n")) }
    }
}

struct RecordCommand: Command {
    enum Options {
        static let count = Option("--count", short: "-n", value: "n", help: "Number of intervals to record (N+1 samples).")
        static let duration = Option("--duration", value: "duration", help: "Record for this long.")
        static let output = Option("--output", short: "-o", value: "file", help: "Write the trace here instead of stdout.")
    }

    static let spec = CommandSpec(
        name: "ifmeter record",
        abstract: "Record live samples as a trace (ifmeter/1, JSON Lines) for replay.",
        discussion: """
            Each sample is one line, written and flushed whole, so an interrupted
            recording is still a valid trace. Without --count or --duration,
            records until interrupted.
            """,
        options: [
            CommonOptions.interval.spec,
            Options.count.spec,
            Options.duration.spec,
            Options.output.spec,
            CommandLinePath.allowForeignFiles.spec,
        ] + CommonOptions.source + CommonOptions.filters)

    let setup: SamplingSetup
    let output: String?

    init(_ p: ParsedArguments) throws(CLIError) {
        let interval = try CommonOptions.duration(p, CommonOptions.interval, default: 1)
        let count = try CommonOptions.positiveInt(p, Options.count, max: CommonOptions.maxCount)
        let duration = p.has(Options.duration) ? try CommonOptions.duration(p, Options.duration, default: 0) : nil
        if count != nil, duration != nil { throw p.usage("'--count' and '--duration' cannot be used together") }
        // Both in Units.durationRange: at most 365 d / 1 ms = 3.2e10 intervals.
        let intervals = duration.map { max(1, Int(($0 / interval).rounded(.down))) } ?? count
        output = p[Options.output].flatMap { $0 == "-" ? nil : $0 }
        setup = try SamplingSetup(p, sampleLimit: intervals.map { $0 + 1 }, stopOnFailure: true)
    }

    func run() throws(CLIError) {
        // Before the pipeline is built: a stop signal from then on ends
        // the trace cleanly, never with the default action.
        StopSignal.install(hangupStops: true)
        let pipeline = try setup.pipeline()
        let file = try output.map { path throws(CLIError) in
            let path = try CommandLinePath.output(path, option: Options.output.spec.long, command: Self.spec.name, writing: .inPlace)
            do throws(SystemError) {
                return try TraceFile(creating: path)
            } catch {
                throw CLIError.runtime("cannot create '\(path)': \(error.message)")
            }
        }
        defer { file?.close() }
        let header = TraceHeader(platform: Platform.current, source: pipeline.source.sourceName, host: hostName())
        let fd = file?.fd ?? 1
        try Output.put(TraceWriter.headerLine(header, extra: ["interval": .number(setup.configuration.interval)]) + "\n", to: fd)
        // Deletions with their final counters come before the sample, as
        // the engine applies them (none before the first sample).
        let printer = Printer(fd: fd) { update, _ in
            guard case .sampled = update.outcome, let reading = update.reading else { return nil }
            var lines = ""
            if !update.isBaseline {
                // In time order across namespaces, as the engine applied them.
                for record in reading.events.records { lines += TraceWriter.line(record) + "\n" }
            }
            return lines + TraceWriter.line(.sample(reading.sample)) + "\n"
        }
        pipeline.add(sink: printer)
        var waiter = SignalWaiter(stop: { printer.failure != nil })
        pipeline.run(&waiter)
        try printer.check()
        do throws(SystemError) {
            try file?.sync()
        } catch {
            throw .runtime("cannot sync '\(file?.path ?? "")': \(error.message)")
        }
    }
}

extension ReplayCommand {
    static func next(_ lines: LineReader) throws(CLIError) -> ArraySlice<UInt8>? {
        do throws(SystemError) {
            return try lines.next()
        } catch {
            throw .runtime("cannot read '\(lines.name)': \(error.message)")
        }
    }
}

struct ReplayCommand: Command {
    enum Options {
        static let format = Option(
            "--format", value: "format", help: ReportFormats.names.joined(separator: " or ") + ".", default: "json",
            choices: ReportFormats.names)
    }

    static let spec = CommandSpec(
        name: "ifmeter replay",
        abstract: "Replay a trace through the delta engine and print the report.",
        discussion: """
            FILE is a trace in the ifmeter/1 format ('-' reads stdin). A malformed
            line stops the replay with its line number; no report is printed.
            """,
        options: [
            Options.format.spec,
            CommonOptions.bits.spec, CommonOptions.maxRate.spec,
        ] + CommonOptions.filters + CommonOptions.namespaceFilters,
        positionals: [PositionalSpec("file", help: "The trace to replay.")])

    let path: String
    let renderer: any ReportRenderer
    let format: String
    let bits: Bool
    let filter: InterfaceFilter
    let arguments: ParsedArguments

    init(_ p: ParsedArguments) throws(CLIError) {
        arguments = p
        path = p.positionals[0]
        bits = p[CommonOptions.bits]
        format = try CommonOptions.format(p, Options.format, allowed: ReportFormats.names, default: "json")
        renderer = ReportFormats.renderer(format, bits: bits) ?? JSONReportRenderer()
        var filter = try CommonOptions.filter(p)
        filter.namespaces = try CommonOptions.namespaceNames(p).map(Set.init)
        self.filter = filter
        _ = try CommonOptions.engineConfiguration(p)
    }

    func run() throws(CLIError) {
        // Streamed a line at a time: memory does not grow with the trace.
        let lines: LineReader
        do throws(SystemError) {
            lines = path == "-" ? LineReader(fd: 0, name: "stdin") : try LineReader(opening: path)
        } catch {
            // A name that names no file, or a folder: the argument is wrong.
            switch error.errno {
            case Errno.noSuchFile: throw .usage("no such file '\(path)'", command: Self.spec.name)
            case Errno.isADirectory: throw .usage("'\(path)' is a folder, not a file", command: Self.spec.name)
            default: throw .runtime("cannot open '\(path)': \(error.message)")
            }
        }
        var reader = TraceReader()
        let name = path == "-" ? "<stdin>" : path
        var engine: DeltaEngine?
        var platform = Platform.linux
        var unmatched = UnmatchedPatterns(filter)
        var samples = 0
        while let line = try Self.next(lines) {
            let record: TraceRecord?
            do {
                record = try reader.read(line: line)
            } catch {
                throw .data("\(name):\(error.line): \(error.message)")
            }
            guard let record else { continue }
            if engine == nil {
                // The header, read with the first line, picks the name rules.
                platform = reader.header.platform
                engine = DeltaEngine(configuration: try CommonOptions.engineConfiguration(arguments, platform: platform))
            }
            if case .sample(let sample) = record {
                unmatched.see(sample.interfaces.map(\.key))
                samples += 1
            }
            if let kept = filter.filtered(record, platform: platform) { engine!.apply(kept) }
        }
        // An empty file, or one without a sample line (a header alone,
        // events alone), is no trace to report on: an empty report with
        // exit 0 would read as "no traffic".
        guard samples > 0 else {
            throw .data("\(name): no sample line (a trace has at least one line with \"t\" and \"interfaces\"); nothing to replay")
        }
        unmatched.warn(what: "the trace")
        let report = Report(engine: engine ?? DeltaEngine(), header: reader.header)
        let text = renderer.render(report)
        try Output.put(format == "text" ? Output.forPeople(text) : text)
    }
}

/// A value a closure and its owner share (the pipeline's thread only).
final class Box<Value> {
    var value: Value
    init(_ value: Value) { self.value = value }
}
