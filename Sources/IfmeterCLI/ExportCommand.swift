import IfmeterCore
import IfmeterOutput
import IfmeterExport
import IfmeterPipeline
import IfmeterRoute
import IfmeterServe
import IfmeterSampling
import IfmeterSystem

struct ExportCommand: Command {
    enum Options {
        static let json = Option("--json", value: "path", help: "Replace this file with each period's JSON report ('-' for stdout).")
        static let jsonLines = Option("--json-lines", value: "path", help: "Append each period's JSON report as one line ('-' for stdout).")
        static let maxSize = Option(
            "--max-size", value: "size", help: "Rotate the --json-lines file past this size, like 10MB or 512KiB.", default: "10MB")
        static let keep = Option("--keep", value: "n", help: "Rotated --json-lines files to keep (PATH.1 ... PATH.N).", default: "5")
        static let textfile = Option("--textfile", value: "path", help: "Write the Prometheus text exposition here.")
        static let every = Option("--every", value: "duration", help: "Length of a period: time between writes.", default: "15s")
    }

    static let spec = CommandSpec(
        name: "ifmeter export",
        abstract: "Write reports or metrics to files periodically, never half-written.",
        discussion: """
            --json PATH replaces PATH with each period's report (schema
            ifmeter.export 2, schemas/ifmeter-report.v2.schema.json; a period
            across a step of the wall clock says so in clock_step_seconds and note);
            --json-lines PATH appends one report per line, rotating by size;
            '-' writes to stdout. --textfile PATH writes the Prometheus exposition
            for node_exporter's textfile collector (name it *.prom). Replaced files
            are written atomically (a temporary file in the same folder, fsync,
            rename). A failed write is logged once per failure streak, keeps the
            previous file and is retried the next period. SIGINT, SIGTERM or
            SIGQUIT write the current period, then stop; SIGHUP saves the state
            and reopens the --json-lines file (for logrotate), and export goes on.
            """,
        options: [
            ConfigFile.option.spec,
            Options.json.spec,
            Options.jsonLines.spec,
            Options.maxSize.spec,
            Options.keep.spec,
            Options.textfile.spec,
            Options.every.spec,
            CompatOption.compat.spec,
        ] + RouteOptions.specsWithoutDefaultProbes + CommonOptions.monitoring)

    var textfile: String?
    var json: String?
    var jsonLines: String?
    let maxSize: Int
    let keep: Int
    let every: Double
    let families: ExpositionFamilies
    let setup: SamplingSetup
    /// `--probe`: routes and the outside-the-tunnel bytes in each period.
    let routes: RouteSettings?
    /// The options a config file gave: their targets are checked as the
    /// state file is (their folder one no other user controls).
    let fromConfigFile: Set<String>

    init(_ p: ParsedArguments) throws(CLIError) {
        textfile = p[Options.textfile]
        json = p[Options.json]
        jsonLines = p[Options.jsonLines]
        guard textfile != nil || json != nil || jsonLines != nil else {
            throw p.usage("nothing to export: give --json PATH, --json-lines PATH or --textfile PATH")
        }
        if json == "-" && jsonLines == "-" { throw p.usage("only one of --json and --json-lines can write to stdout") }
        // 1 KiB to 2^63-1 bytes (what a file's size can be).
        maxSize = Int(try CommonOptions.size(p, Options.maxSize, 1024...Units.maxSize, "1KiB to 9223372036854775807B (2^63-1)") ?? 10_000_000)
        keep = try CommonOptions.positiveInt(p, Options.keep, max: CommonOptions.maxKeep) ?? 5
        every = try CommonOptions.duration(p, Options.every, default: 15)
        families = try CompatOption.families(p)
        setup = try SamplingSetup(p, kernelStats: families != .ifmeter, saveEvery: StateOptions.defaultSaveEvery, idleDeltas: false)
        if !p.has(RouteOptions.probe) { try RouteOptions.check(p) }
        routes = p.has(RouteOptions.probe) ? try RouteOptions.settings(p, command: "export --probe") : nil
        fromConfigFile = p.fromConfigFile
    }

    func run() throws(CLIError) {
        try checkedTargets().start()
    }

    /// The targets checked, links given resolved once, now (`config check`
    /// checks them too). One a config file names is checked as the state
    /// file is: a folder another user controls is refused, or whoever
    /// wrote the file would choose where ifmeter writes in it.
    func checkedTargets() throws(CLIError) -> ExportCommand {
        var command = self
        func checked(_ path: String?, _ option: Option, _ writing: CommandLinePath.Writing) throws(CLIError) -> String? {
            guard let path else { return nil }
            return try CommandLinePath.output(
                path, option: option.spec.long, command: Self.spec.name, writing: writing, ownFolder: fromConfigFile.contains(option.spec.long))
        }
        command.json = try checked(json, Options.json, .replaced)
        command.jsonLines = try checked(jsonLines, Options.jsonLines, .inPlace)
        command.textfile = try checked(textfile, Options.textfile, .replaced)
        return command
    }

    private func start() throws(CLIError) {
        // What writers killed mid-write left (their PIDs dead) goes.
        for path in [textfile, json].compactMap({ $0 }) where path != "-" {
            AtomicFile.removeLeftovers(of: path)
        }
        // A folder that is missing or read-only is an error now, not later.
        for path in [textfile, json, jsonLines].compactMap({ $0 }) where path != "-" {
            do {
                try AtomicFile.checkWritable(path)
            } catch {
                throw .runtime("cannot export to \(path): \(Describe.folderProblem(error, for: path))")
            }
        }
        var linesFile: JSONLinesFile?
        if let jsonLines, jsonLines != "-" {
            do {
                let file = try JSONLinesFile(path: jsonLines, maxSize: maxSize, keep: keep)
                if let repaired = file.repairedBytes {
                    Output.error(
                        "ifmeter export: \(jsonLines) ended with an unfinished line (\(repaired) bytes, from an interrupted write); removed it")
                }
                linesFile = file
            } catch {
                throw .runtime("cannot export to \(jsonLines): \(error.message)")
            }
        }
        // Before the state file says "running": a stop signal from then on
        // ends with a save, never with the default action.
        StopSignal.install(hangup: true)
        let pipeline = try setup.pipeline()
        let targets = Exporter.Targets(
            json: json, jsonLines: jsonLines, textfile: textfile, every: every, families: families, version: IfmeterCLI.version)
        // Its lines are said once per failure streak: none held back.
        let log = Log.everyLine(prefix: "ifmeter export: ", sink: { Output.error($0) })
        let exporter = Exporter(
            targets: targets, linesFile: linesFile, host: hostName(), interval: setup.configuration.interval,
            log: log, stdout: { line throws(CLIError) in try Output.put(line) })
        #if os(Linux)
        // Before the exporter: a period's end has its sample's routes. Its
        // reports say each period's outside bytes, not a counter: the feed
        // starts from 0, not from the state file's totals.
        if let routes {
            let feed = try ServeCommand.routeFeed(routes, persistence: nil) { _ in }
            exporter.routes = feed
            pipeline.add(enricher: feed)
        }
        #endif
        pipeline.add(sink: exporter)
        pipeline.sayStateSaves(log)
        var waiter = SignalWaiter(hangup: { pipeline in
            pipeline.saveNow()
            exporter.reopen()
        })
        pipeline.run(&waiter)
        try pipeline.checkLastSave()
    }
}
