import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import IfmeterRoute
import IfmeterSystem

/// Writes a report every period: the deltas of the period's samples summed
/// (a failed sample adds nothing), and the totals at its end. The last
/// period is written when the pipeline finishes (after the last save).
package final class Exporter: PipelineSink {
    /// Where reports go, and how often.
    package struct Targets: Sendable {
        /// `--json FILE` (replaced each period) or `-` (a line on stdout).
        package var json: String?
        /// `--json-lines FILE` (appended) or `-`.
        package var jsonLines: String?
        /// `--textfile FILE`: the Prometheus exposition, replaced each period.
        package var textfile: String?
        package var every: Double
        package var families: ExpositionFamilies
        package var version: String

        package init(json: String?, jsonLines: String?, textfile: String?, every: Double, families: ExpositionFamilies, version: String) {
            self.json = json
            self.jsonLines = jsonLines
            self.textfile = textfile
            self.every = every
            self.families = families
            self.version = version
        }
    }

    let command: Targets
    let linesFile: JSONLinesFile?
    let host: String
    /// Says a line on stderr (a write failing, and working again): the
    /// command's log, "ifmeter export: " before each line.
    let log: Log
    /// Writes a line to stdout (`-` targets).
    let stdout: (String) throws -> Void
    private var accumulator = PeriodAccumulator()
    private var periodStart: (wall: Double, monotonic: Double)?
    /// What the last update said, kept for the period's end.
    private var last: (wallTime: Double, time: Double, health: PipelineHealth, persistence: PersistenceStatus?)?
    /// Every interface's totals, kept from the updates' changes.
    private var totals = TotalsView<InterfaceTotals> { $0 }
    private let interval: Double
    private var since: Double?
    private var failing: [String: Bool] = [:]
    #if os(Linux)
    /// `--probe`: the route feed, and its outside totals at the period's start.
    package var routes: RouteFeed?
    #endif
    private var outsideAtStart: [OutsideTotal.Key: OutsideTotal] = [:]

    package init(
        targets: Targets, linesFile: JSONLinesFile?, host: String, interval: Double, log: Log,
        stdout: @escaping (String) throws -> Void
    ) {
        command = targets
        self.linesFile = linesFile
        self.host = host
        self.interval = interval
        self.log = log
        self.stdout = stdout
    }

    package func receive(_ update: borrowing PipelineUpdate) {
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
    package func reopen() {
        guard let linesFile else { return }
        do {
            try linesFile.reopen()
        } catch {
            log.warning("reopening \(linesFile.path) after SIGHUP: \(error.call): \(error.message); retrying at the next write")
        }
    }

    package func finished() {
        // A period that just ended has nothing after it: a stop then adds
        // no period of 0 seconds with no rates over the last real one.
        guard let last, let start = periodStart, last.time > start.monotonic else { return }
        writePeriod(end: (last.wallTime, last.time))
    }

    private func report(_ what: String, _ result: () throws -> Void) {
        do {
            try result()
            if failing[what] == true { log.info("writing \(what) works again") }
            failing[what] = false
        } catch {
            // Once per failure streak; the previous file stays as it was.
            if failing[what] != true {
                log.warning("\(error); the previous file is kept, retrying every \(Units.duration(command.every))")
            }
            failing[what] = true
        }
    }

    private func writePeriod(end: (wall: Double, monotonic: Double)) {
        guard let start = periodStart, let last else { return }
        let entries = accumulator.take()
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
                    report("stdout") { try stdout(renderer.line(periodReport) + "\n") }
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
                    report("stdout") { try stdout(line) }
                }
            }
        }
        if let textfile = command.textfile {
            let input = ExpositionInput(
                totals.map(ExpositionRow.init), health: last.health, families: command.families, version: command.version,
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
