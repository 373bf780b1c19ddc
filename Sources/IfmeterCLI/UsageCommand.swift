import IfmeterCore
import IfmeterImage
import IfmeterOutput
import IfmeterPipeline
import IfmeterSampling
import IfmeterStore
import IfmeterSystem
import IfmeterUsage

struct UsageCommand: Command {
    enum Options {
        static let hourly = Flag("--hourly", help: "One row per local hour.")
        static let daily = Flag("--daily", help: "One row per day (the default).")
        static let monthly = Flag("--monthly", help: "One row per month.")
        static let yearly = Flag("--yearly", help: "One row per year.")
        static let cycle = Flag("--cycle", help: "One row per billing cycle, by each interface's plan.")
        static let top = Option("--top", value: "n", help: "The N days with the most traffic (rx + tx).")
        static let fiveminutes = Flag("--fiveminutes", help: "One row per five minutes (kept 48 hours).")
        static let oneline = Flag("--oneline", help: "One line per interface for scripts and status bars (fields above).")
        static let summary = Flag(
            "--summary", help: "With --svg or --png: today, this cycle, all time and the last 24 hours in one picture.")
        static let check = Flag(
            "--check", help: "Check every plan's quota in its current cycle; exit 0 under, 3 over, 4 unknown, 5 projected over.")
        static let begin = Option("--begin", value: "date", help: "Only usage from this local date or time on: 2026-11-01 or 2026-11-01T08:00.")
        static let end = Option("--end", value: "date", help: "Only usage before this local time, or up to the end of this local date.")
        static let limit = Option("--limit", value: "n", help: "At most N rows per interface, the latest (with --top, the biggest).")
        static let svg = Option("--svg", value: "file", help: "Also draw the periods as an SVG bar chart in this file.")
        static let png = Option(
            "--png", value: "file", help: "Also draw the periods as a PNG image (vnstati's) in this file, its figures in a tEXt chunk.")
        static let format = Option(
            "--format", value: "format", help: "text, json or csv.", default: "text", choices: ["text", "json", "csv"])
        /// Refused: usage's figures are byte totals, not rates.
        static let bits = Flag("--bits", help: "Not for usage: its figures are byte totals.", hidden: true)

        /// The options that choose the rows, one at most, and the period
        /// each makes a row of (`--oneline` is its own format, by the day).
        static let views: [(option: any OptionHandle, granularity: UsagePeriodKind)] = [
            (hourly, .hour), (daily, .day), (monthly, .month), (yearly, .year), (cycle, .cycle), (top, .top), (fiveminutes, .fiveMinutes),
            (oneline, .day),
        ]
    }

    static let spec = CommandSpec(
        name: "ifmeter usage",
        abstract: "Hourly to yearly totals, billing cycles, top days, quota checks and charts from a state file.",
        discussion: """
            Reads the state file that serve, live or export keep with --state (it
            may be in use). Periods are local time. Traffic is saved per local
            hour: each sampling interval's traffic is split across the hours it
            spans in proportion to its time in each, so no period takes another's
            bytes. --cycle shows billing cycles by each interface's plan (see
            'ifmeter plan'; the calendar month without one). --check exits 0 when
            every planned interface is under its quota, 3 when one is over (a
            lower bound over the quota is over for certain), 4 when a lower bound
            is under its quota (under cannot be proven), 5 when all are under but
            one is projected over by its cycle's end (its use so far extended at
            its average rate so far, an estimate); the same for each plan's
            limits per hour, day, month or year ('plan set --limit'), in the
            period holding now. --fiveminutes shows five-minute slots, which
            serve, live and export keep for 48 hours (vnStat's 5MinuteHours).
            --oneline prints one line per interface, fields separated by ';':
              1;NAME;KIND;DAY;RX;TX;TOTAL;QUALITY;MONTH;RX;TX;TOTAL;QUALITY;
              SINCE;RX;TX;TOTAL;QUALITY
            1 is the format's version; NAME the stored name (NS/NAME for another
            namespace's); KIND its kind or 'unknown'; DAY today (local
            YYYY-MM-DD), then today's rx, tx and total bytes; MONTH this month
            (YYYY-MM) and its bytes; SINCE the first day with usage (empty with
            none) and all time's bytes. Every figure is a whole number of bytes;
            each group ends with its QUALITY: exact, wrap-corrected, or
            lower-bound (the true figure is at least the one given). A ';', a
            '\\' or a control character in a name is written \\xHH.
            --summary with --svg or --png draws one picture (vnstati -s): per
            interface today, this cycle and all time with their average rates
            and the share of a quota or limit used, and the last 24 hours by
            hour, as of the state file's last save. --png draws what --svg
            draws, as a PNG image; the figures it shows are in its tEXt chunk
            'ifmeter:figures' (JSON, usage --format json's names).
            Without --state: $IFMETER_STATE, else /var/lib/ifmeter/state.db for
            root, else $XDG_STATE_HOME/ifmeter/state.db or
            ~/.local/state/ifmeter/state.db.
            """,
        options: [
            DefaultState.option.spec,
            Options.hourly.spec,
            Options.daily.spec,
            Options.monthly.spec,
            Options.yearly.spec,
            Options.cycle.spec,
            Options.top.spec,
            Options.fiveminutes.spec,
            Options.oneline.spec,
            Options.summary.spec,
            Options.check.spec,
            Options.begin.spec,
            Options.end.spec,
            Options.limit.spec,
            Options.svg.spec,
            Options.png.spec,
            Options.format.spec,
            Options.bits.spec,
            CommandLinePath.allowForeignFiles.spec,
        ] + CommonOptions.filters + CommonOptions.namespaceFilters)

    let path: String
    let granularity: UsagePeriodKind
    let top: Int?
    let format: String
    let check: Bool
    let svg: String?
    let png: String?
    let oneline: Bool
    let summary: Bool
    let filter: InterfaceFilter
    /// `--begin`, `--end` (Unix times) and `--limit`.
    let begin: Int64?
    let end: Int64?
    let limit: Int?
    func emit(_ text: String) throws(CLIError) { try Output.put(text) }

    func warn(_ text: String) { Output.error(text) }

    /// `--begin` or `--end` as a Unix time in `zone` (LocalZone's reading).
    static func localTime(_ p: ParsedArguments, _ option: Option, end: Bool, zone: LocalZone = .system) throws(CLIError) -> Int64? {
        guard let text = p[option] else { return nil }
        guard let time = zone.unix(localDateOrTime: text, end: end) else {
            throw p.usage("invalid value '\(TerminalText.escaped(text))' for '\(option.spec.long) <date>': expected \(LocalZone.localTimeForm)")
        }
        return time
    }

    init(_ p: ParsedArguments) throws(CLIError) {
        if p[Options.bits] {
            throw p.usage("'\(Options.bits.spec.long)' does not apply to usage: its figures are byte totals, not rates")
        }
        let chosen = Options.views.filter { p.has($0.option) }
        if chosen.count > 1 {
            throw p.usage("'\(chosen[0].option.spec.long)' and '\(chosen[1].option.spec.long)' cannot be used together")
        }
        top = try CommonOptions.positiveInt(p, Options.top)
        granularity = chosen.first?.granularity ?? .day
        format = try CommonOptions.format(p, Options.format, allowed: ["text", "json", "csv"], default: "text")
        check = p[Options.check]
        if check, chosen.contains(where: { $0.option.spec.long != Options.cycle.spec.long }) {
            throw p.usage("'--check' looks at the current cycle; it cannot be used with '\(chosen[0].option.spec.long)'")
        }
        if check, p.has(Options.format) || p.has(Options.svg) || p.has(Options.png) {
            throw p.usage("'--check' prints its verdict as text; leave out '--format', '--svg' and '--png'")
        }
        for option in [Options.svg, Options.png] {
            if let file = p[option], file.isEmpty || file.hasSuffix("/") {
                throw p.usage("invalid value '\(TerminalText.escaped(file))' for '\(option.spec.long) <file>': expected a file name")
            }
        }
        svg = p[Options.svg]
        png = p[Options.png]
        if let svg, svg == png { throw p.usage("'--svg' and '--png' name the same file '\(TerminalText.escaped(svg))'") }
        oneline = p[Options.oneline]
        summary = p[Options.summary]
        if oneline, p.has(Options.format) || p.has(Options.svg) || p.has(Options.png) {
            throw p.usage("'--oneline' is its own format; leave out '--format', '--svg' and '--png'")
        }
        if summary, svg == nil, png == nil { throw p.usage("'--summary' draws a picture: it needs '--svg FILE' or '--png FILE'") }
        if summary, let other = chosen.first {
            throw p.usage("'--summary' shows its own periods; it cannot be used with '\(other.option.spec.long)'")
        }
        var filter = try CommonOptions.filter(p)
        filter.namespaces = try CommonOptions.namespaceNames(p).map(Set.init)
        self.filter = filter
        begin = try Self.localTime(p, Options.begin, end: false)
        end = try Self.localTime(p, Options.end, end: true)
        if let begin, let end, begin >= end { throw p.usage("'--begin' must be before '--end'") }
        limit = try CommonOptions.positiveInt(p, Options.limit)
        if oneline || summary, begin != nil || end != nil || limit != nil {
            throw p.usage(
                "'\((oneline ? Options.oneline : Options.summary).spec.long)' shows its own periods; leave out '--begin', '--end' and '--limit'")
        }
        if check, begin != nil || end != nil || limit != nil {
            throw p.usage("'--check' judges the current cycle; leave out '--begin', '--end' and '--limit'")
        }
        path = DefaultState.resolve(p)
    }

    /// What the options ask for, typed (`--include` and the other
    /// filters apart, as `filter`).
    var request: UsageRequest { UsageRequest(granularity: granularity, begin: begin, end: end, limit: limit) }

    /// A store's failure as the command says it.
    func failure(_ error: UsageQueryError) -> CLIError {
        switch error {
        case .unavailable(let error), .failed(let error): CLIError.reading(error, command: Self.spec.name)
        case .badParameter(_, let message), .drawing(let message): CLIError.runtime(message)
        }
    }

    /// The tables (no chart, no check): `UsageDocument`'s pieces, each
    /// written as it is read (the hours a chunk at a time, through one
    /// open of the file), so memory holds one chunk of them whatever the
    /// file's size (five years of 20 interfaces: 876,000 hours).
    func writeTables() throws(CLIError) {
        let wall = UsageRequest.clock()
        let write = { (pieces: UsagePieces) throws(CLIError) in
            let document: UsageDocument
            do throws(UsageQueryError) {
                document = try UsageDocument(request, pieces: pieces, format: format, filter: filter, top: top, wall: wall)
            } catch {
                throw failure(error)
            }
            var unmatched = UnmatchedPatterns(filter)
            unmatched.see(document.known.names.map(StateStore.key))
            let note = UsageFilterNote(filter: filter, names: document.known.names, kinds: document.known.kinds)
            unmatched.warn(what: path)
            note.warnKinds(what: path)
            document.emptyNote = note.text(path: path)
            if format != "text", let warning = document.head.saves.warning(now: wall, zone: .system) { warn(warning) }
            while true {
                let piece: String?
                do throws(UsageQueryError) {
                    piece = try document.piece()
                } catch {
                    throw failure(error)
                }
                guard let piece else { return }
                try emit(format == "text" ? Output.forPeople(piece) : piece)
            }
        }
        // The hours through one open of the file; the other tables read
        // their day rows at once.
        guard granularity == .hour else { return try write(.eachOpen(path: path)) }
        let written: Result<Void, CLIError>
        do {
            written = try UsagePieces.session(path: path, write)
        } catch {
            throw CLIError.reading(error, command: Self.spec.name)
        }
        try written.get()
    }

    func run() throws(CLIError) {
        if !check, !oneline, svg == nil, png == nil { return try writeTables() }
        // The charts' files are checked before anything is read.
        let svg = try self.svg.map { given throws(CLIError) in
            try CommandLinePath.output(given, option: Options.svg.spec.long, command: Self.spec.name, writing: .replaced)
        }
        let png = try self.png.map { given throws(CLIError) in
            try CommandLinePath.output(given, option: Options.png.spec.long, command: Self.spec.name, writing: .replaced)
        }
        let wall = UsageRequest.clock()
        let now = Int64(wall.rounded(.down))
        let whole: UsageWhole
        do throws(UsageQueryError) {
            whole = try UsageWhole(request, path: path, filter: filter, top: top, wall: wall, check: check, summary: summary, oneline: oneline)
        } catch {
            throw failure(error)
        }
        let snapshot = whole.snapshot
        let names = whole.names
        var unmatched = UnmatchedPatterns(filter)
        unmatched.see(whole.known.names.map(StateStore.key))
        let note = UsageFilterNote(filter: filter, names: whole.known.names, kinds: whole.known.kinds)
        unmatched.warn(what: path)
        note.warnKinds(what: path)
        let plans = snapshot.plans
        let hourSlices = snapshot.slices
        var table = whole.table
        if table.interfaces.isEmpty { table.emptyNote = note.text(path: path) }
        // Output a script parses (JSON, CSV) keeps its format; a stale
        // file's warning goes to stderr beside it (text and --check put it
        // first in their own output).
        if format != "text", !check, let warning = snapshot.saves.warning(now: wall, zone: .system) { warn(warning) }
        if oneline {
            if let warning = snapshot.saves.warning(now: wall, zone: .system) { Output.error(warning) }
            let lines = UsageOneLine(slices: hourSlices, names: names, kinds: snapshot.kinds, zone: .system, now: now)
            if lines.lines.isEmpty { Output.error(table.emptyNote ?? "No usage recorded yet in \(TerminalText.escaped(path)).") }
            return try Output.put(lines.text)
        }
        if check {
            let result = table.check(plans: plans, slices: hourSlices)
            try Output.put(Output.forPeople(result.lines.joined(separator: "\n") + "\n" + Caveat.sentence + "\n"))
            if result.exitCode != 0 { throw .status(result.exitCode) }
            return
        }
        // The summary's figures stand at the file's last save.
        if let svg {
            let chart = summary ? UsageSummaryChart(summary: whole.summary()).svg() : UsageChart(table: table).svg()
            do {
                try AtomicFile.write(Array(chart.utf8), to: svg)
            } catch {
                throw .runtime("cannot write the chart \(TerminalText.escaped(svg)): \(error)")
            }
        }
        if let png {
            let image: [UInt8]
            do {
                image = try whole.png(summary: summary)
            } catch {
                // cairo is loaded on the first picture; without it nothing is drawn.
                if let reason = error.unloaded {
                    throw .runtime("cannot draw the PNG: libcairo.so.2 could not be loaded (\(reason)). Hint: apt-get install libcairo2")
                }
                throw .runtime("cannot draw the image \(TerminalText.escaped(png)): \(error)")
            }
            do {
                try AtomicFile.write(image, to: png)
            } catch {
                throw .runtime("cannot write the image \(TerminalText.escaped(png)): \(error)")
            }
        }
        switch format {
        case "json": try emit(JSONWriter(indent: 2).string(table.json()) + "\n")
        case "csv": try Output.put(table.csv())
        default: try Output.put(Output.forPeople(table.text(path: path)))
        }
    }
}
