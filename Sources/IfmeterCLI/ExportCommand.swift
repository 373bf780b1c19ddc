#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterSampling
import IfmeterService
import Synchronization

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
            previous file and is retried the next period. SIGINT or SIGTERM write
            the current period, then stop.
            """,
        options: [
            OptionSpec("--json", value: "path", help: "Replace this file with each period's JSON report ('-' for stdout)."),
            OptionSpec("--json-lines", value: "path", help: "Append each period's JSON report as one line ('-' for stdout)."),
            OptionSpec("--max-size", value: "size", help: "Rotate the --json-lines file past this size, like 10MB or 512KiB.", default: "10MB"),
            OptionSpec("--keep", value: "n", help: "Rotated --json-lines files to keep (PATH.1 ... PATH.N).", default: "5"),
            OptionSpec("--textfile", value: "path", help: "Write the Prometheus text exposition here."),
            OptionSpec("--every", value: "duration", help: "Length of a period: time between writes.", default: "15s"),
            MonitorOptions.compat,
            OptionSpec("--series-lifetime", value: "duration", help: "Drop an interface this long after it went away.",
                       default: "5m"),
        ] + MonitorOptions.common)

    let textfile: String?
    let json: String?
    let jsonLines: String?
    let maxSize: Int
    let keep: Int
    let every: Double
    let families: ExpositionFamilies
    let configuration: Monitor.Configuration

    init(_ p: ParsedArguments) throws(CLIError) {
        textfile = p.value("--textfile")
        json = p.value("--json")
        jsonLines = p.value("--json-lines")
        guard textfile != nil || json != nil || jsonLines != nil else {
            throw p.usage("nothing to export: give --json PATH, --json-lines PATH or --textfile PATH")
        }
        if json == "-" && jsonLines == "-" { throw p.usage("only one of --json and --json-lines can write to stdout") }
        if let text = p.value("--max-size") {
            guard let bytes = Units.parseRate(text), bytes >= 1024 else {
                throw p.usage("invalid value '\(text)' for '--max-size <size>': expected a size of at least 1KiB, like 10MB or 512KiB")
            }
            maxSize = Int(bytes)
        } else {
            maxSize = 10_000_000
        }
        keep = try CommonOptions.positiveInt(p, "--keep") ?? 5
        every = try CommonOptions.duration(p, "--every", default: 15)
        families = try MonitorOptions.families(p)
        let lifetime = try CommonOptions.duration(p, "--series-lifetime", default: 300)
        configuration = try MonitorOptions.configuration(
            p, seriesLifetime: lifetime, kernelStats: families != .ifmeter, saveEvery: every)
    }

    func run() throws(CLIError) {
        // A folder that is missing or read-only is an error now, not later.
        for path in [textfile, json, jsonLines].compactMap({ $0 }) where path != "-" {
            do {
                try AtomicFile.checkWritable(path)
            } catch {
                throw .runtime("cannot export to \(path): \(error)")
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
                throw .runtime("cannot export to \(jsonLines): \(error)")
            }
        }
        StopSignal.block()
        let accumulator = Mutex(PeriodAccumulator())
        let monitor = try MonitorOptions.start(configuration) { state in
            accumulator.withLock { $0.add(state.lastDeltas) }
        }
        defer { monitor.stop() }
        let host = hostName()
        let startWall = wallClock()
        var periodStart = (wall: startWall, monotonic: monotonicSeconds())
        var failing: [String: Bool] = [:]
        var stateFailing = false

        func report(_ what: String, _ result: () throws -> Void) {
            do {
                try result()
                if failing[what] == true { Output.error("ifmeter export: writing \(what) works again") }
                failing[what] = false
            } catch {
                // Once per failure streak; the previous file stays as it was.
                if failing[what] != true {
                    Output.error("ifmeter export: \(error); the previous file is kept, retrying every \(Units.duration(every))")
                }
                failing[what] = true
            }
        }

        func writePeriod() {
            let state = monitor.current
            let end = (wall: wallClock(), monotonic: monotonicSeconds())
            let entries = accumulator.withLock { $0.take() }
            if let stateError = state.stateError, !stateFailing {
                Output.error("ifmeter export: saving state failed: \(stateError); retrying")
                stateFailing = true
            } else if state.stateError == nil {
                stateFailing = false
            }
            if json != nil || jsonLines != nil {
                let periodReport = PeriodReport(
                    host: host, source: state.sourceName,
                    period: PeriodReport.Period(
                        startWall: periodStart.wall, endWall: end.wall, startMonotonic: periodStart.monotonic,
                        endMonotonic: end.monotonic),
                    interfaces: state.interfaces, periodEntries: entries, since: startWall, state: state.stateInfo)
                let renderer = PeriodReportRenderer()
                if let json {
                    if json == "-" {
                        report("stdout") { try Output.put(renderer.line(periodReport) + "\n") }
                    } else {
                        let text = JSONWriter(indent: 2).string(renderer.value(periodReport)) + "\n"
                        report(json) { try AtomicFile.write(Array(text.utf8), to: json) }
                    }
                }
                if let jsonLines {
                    let line = renderer.line(periodReport) + "\n"
                    if let linesFile {
                        report(jsonLines) { try linesFile.append(line) }
                    } else {
                        report("stdout") { try Output.put(line) }
                    }
                }
            }
            if let textfile {
                let input = ScrapeCache.input(state, families: families, version: IfmeterCLI.version, interval: configuration.interval)
                report(textfile) { try AtomicFile.write(PrometheusTextRenderer().render(input), to: textfile) }
            }
            periodStart = end
        }

        let loopStart = monotonicSeconds()
        var period = 0
        while sleepUntil(loopStart + Double(period + 1) * every) {
            writePeriod()
            period += 1
        }
        // Stopped: the current period is written, then the state saved (the
        // monitor's stop).
        writePeriod()
    }
}
