import IfmeterCore
import IfmeterOutput
import IfmeterPipeline
import IfmeterRoute
import IfmeterServe
import IfmeterSampling
import IfmeterSystem

struct ExportCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter export",
        abstract: "Write reports or metrics to files periodically, never half-written.",
        discussion: """
            --json PATH replaces PATH with each period's report (schema
            ifmeter.export 1, schemas/ifmeter-report.v1.schema.json);
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
            OptionSpec("--json", value: "path", help: "Replace this file with each period's JSON report ('-' for stdout)."),
            OptionSpec("--json-lines", value: "path", help: "Append each period's JSON report as one line ('-' for stdout)."),
            OptionSpec("--max-size", value: "size", help: "Rotate the --json-lines file past this size, like 10MB or 512KiB.", default: "10MB"),
            OptionSpec("--keep", value: "n", help: "Rotated --json-lines files to keep (PATH.1 ... PATH.N).", default: "5"),
            OptionSpec("--textfile", value: "path", help: "Write the Prometheus text exposition here."),
            OptionSpec("--every", value: "duration", help: "Length of a period: time between writes.", default: "15s"),
            CompatOption.spec,
        ] + RouteOptions.specs + CommonOptions.monitoring)

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

    init(_ p: ParsedArguments) throws(CLIError) {
        textfile = p.value("--textfile")
        json = p.value("--json")
        jsonLines = p.value("--json-lines")
        guard textfile != nil || json != nil || jsonLines != nil else {
            throw p.usage("nothing to export: give --json PATH, --json-lines PATH or --textfile PATH")
        }
        if json == "-" && jsonLines == "-" { throw p.usage("only one of --json and --json-lines can write to stdout") }
        // 1 KiB to 2^63-1 bytes (what a file's size can be).
        maxSize = Int(try CommonOptions.size(p, "--max-size", 1024...Units.maxSize, "1KiB to 9223372036854775807B (2^63-1)") ?? 10_000_000)
        keep = try CommonOptions.positiveInt(p, "--keep", max: CommonOptions.maxKeep) ?? 5
        every = try CommonOptions.duration(p, "--every", default: 15)
        families = try CompatOption.families(p)
        setup = try SamplingSetup(p, kernelStats: families != .ifmeter, saveEvery: every, idleDeltas: false)
        if !p.has("--probe") { try RouteOptions.check(p) }
        routes = p.has("--probe") ? try RouteOptions.settings(p, command: "export --probe") : nil
    }

    func run() throws(CLIError) {
        // Links given on the command line are resolved once, now.
        var command = self
        command.json = try json.map { path throws(CLIError) in
            try CommandLinePath.output(path, option: "--json", command: Self.spec.name, writing: .replaced)
        }
        command.jsonLines = try jsonLines.map { path throws(CLIError) in
            try CommandLinePath.output(path, option: "--json-lines", command: Self.spec.name, writing: .inPlace)
        }
        command.textfile = try textfile.map { path throws(CLIError) in
            try CommandLinePath.output(path, option: "--textfile", command: Self.spec.name, writing: .replaced)
        }
        try command.start()
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
                    Output.error("ifmeter export: \(jsonLines) ended with an unfinished line (\(repaired) bytes, from an interrupted write); removed it")
                }
                linesFile = file
            } catch {
                throw .runtime("cannot export to \(jsonLines): \(error.message)")
            }
        }
        let pipeline = try setup.pipeline()
        let exporter = Exporter(command: self, linesFile: linesFile, host: hostName(), interval: setup.configuration.interval)
        #if os(Linux)
        // Before the exporter: a period's end has its sample's routes.
        if let routes {
            let feed = try ServeCommand.routeFeed(routes) { _ in }
            exporter.routes = feed
            pipeline.add(enricher: feed)
        }
        #endif
        pipeline.add(sink: exporter)
        StopSignal.install(hangup: true)
        var waiter = SignalWaiter(hangup: { pipeline in
            pipeline.saveNow()
            exporter.reopen()
        })
        pipeline.run(&waiter)
    }
}

/// Writes a report every period: the deltas of the period's samples summed
/// (a failed sample adds nothing), and the totals at its end. The last
/// period is written when the pipeline finishes (after the last save).
final class Exporter: PipelineSink {
    let command: ExportCommand
    let linesFile: JSONLinesFile?
    let host: String
    private var accumulator = PeriodAccumulator()
    private var periodStart: (wall: Double, monotonic: Double)?
    /// What the last update said, kept for the period's end.
    private var last: (wallTime: Double, time: Double, health: PipelineHealth, persistence: PersistenceStatus?)?
    /// Every interface's totals, kept from the updates' changes.
    private var totals = TotalsView<InterfaceTotals> { $0 }
    private let interval: Double
    private var since: Double?
    private var failing: [String: Bool] = [:]
    private var stateFailing = false
    #if os(Linux)
    /// `--probe`: the route feed, and its outside totals at the period's start.
    var routes: RouteFeed?
    #endif
    private var outsideAtStart: [OutsideTotal.Key: OutsideTotal] = [:]

    init(command: ExportCommand, linesFile: JSONLinesFile?, host: String, interval: Double) {
        self.command = command
        self.linesFile = linesFile
        self.host = host
        self.interval = interval
    }

    func receive(_ update: borrowing PipelineUpdate) {
        accumulator.add(update.deltas)
        totals.apply(update)
        last = (update.wallTime, update.time, update.health, update.persistence)
        if since == nil { since = update.health.startTime }
        guard let start = periodStart else {
            periodStart = (update.wallTime, update.time)
            return
        }
        // A period ends with the first sample at least its length after its
        // start (half an interval early: samples jitter).
        if update.time - start.monotonic >= command.every - interval / 2 {
            writePeriod(end: (update.wallTime, update.time))
        }
    }

    /// After SIGHUP: the --json-lines file is opened again (logrotate moved
    /// it away); a failure is said, and retried at the next write.
    func reopen() {
        guard let linesFile else { return }
        do {
            try linesFile.reopen()
        } catch {
            Output.error("ifmeter export: reopening \(linesFile.path) after SIGHUP: \(error.call): \(error.message); retrying at the next write")
        }
    }

    func finished() {
        guard let last else { return }
        writePeriod(end: (last.wallTime, last.time))
    }

    private func report(_ what: String, _ result: () throws -> Void) {
        do {
            try result()
            if failing[what] == true { Output.error("ifmeter export: writing \(what) works again") }
            failing[what] = false
        } catch {
            // Once per failure streak; the previous file stays as it was.
            if failing[what] != true {
                Output.error("ifmeter export: \(error); the previous file is kept, retrying every \(Units.duration(command.every))")
            }
            failing[what] = true
        }
    }

    private func writePeriod(end: (wall: Double, monotonic: Double)) {
        guard let start = periodStart, let last else { return }
        let entries = accumulator.take()
        if let stateError = last.persistence?.lastError, !stateFailing {
            Output.error("ifmeter export: saving state failed: \(stateError); retrying")
            stateFailing = true
        } else if last.persistence?.lastError == nil {
            stateFailing = false
        }
        let totals = self.totals.rows
        if command.json != nil || command.jsonLines != nil {
            var periodReport = PeriodReport(
                host: host, source: last.health.source,
                period: PeriodReport.Period(
                    startWall: start.wall, endWall: end.wall, startMonotonic: start.monotonic, endMonotonic: end.monotonic),
                interfaces: totals, periodEntries: entries, since: since ?? start.wall, state: last.persistence?.info)
            periodReport.route = periodRoutes()
            let renderer = PeriodReportRenderer()
            if let json = command.json {
                if json == "-" {
                    report("stdout") { try Output.put(renderer.line(periodReport) + "\n") }
                } else {
                    let text = JSONWriter(indent: 2).string(renderer.value(periodReport)) + "\n"
                    report(json) { try AtomicFile.write(Array(text.utf8), to: json) }
                }
            }
            if command.jsonLines != nil {
                let line = renderer.line(periodReport) + "\n"
                if let linesFile {
                    report(command.jsonLines!) { try linesFile.append(line) }
                } else {
                    report("stdout") { try Output.put(line) }
                }
            }
        }
        if let textfile = command.textfile {
            let input = ScrapeCache.input(
                totals.map(ExpositionRow.init), health: last.health, families: command.families, version: IfmeterCLI.version,
                interval: interval)
            report(textfile) {
                try AtomicFile.write(to: textfile) { (put: (UnsafeRawBufferPointer) throws(SystemError) -> Void) throws(SystemError) in
                    // The renderer cannot throw: the first failed piece is kept and thrown after.
                    var failure: SystemError?
                    PrometheusTextRenderer().render(input, chunk: 64 * 1024) { piece in
                        guard failure == nil else { return }
                        do throws(SystemError) { try put(piece) } catch { failure = error }
                    }
                    if let failure { throw failure }
                }
            }
        }
        periodStart = end
        #if os(Linux)
        if let routes { outsideAtStart = Dictionary(routes.exposition.outside.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a }) }
        #endif
    }

    /// The probes' routes now, and each tunnel's outside bytes since the
    /// period began.
    private func periodRoutes() -> RouteExposition? {
        #if os(Linux)
        guard let routes else { return nil }
        var exposition = routes.exposition
        exposition.outside = exposition.outside.map { total in
            var period = total
            let before = outsideAtStart[total.key]
            period.rxBytes = total.rxBytes &- (before?.rxBytes ?? 0)
            period.txBytes = total.txBytes &- (before?.txBytes ?? 0)
            return period
        }
        return exposition
        #else
        return nil
        #endif
    }
}
