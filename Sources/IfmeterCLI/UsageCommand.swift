import IfmeterCore
import IfmeterImage
import IfmeterOutput
import IfmeterPipeline
import IfmeterSampling
import IfmeterStore
import IfmeterSystem

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
    /// Where the tables go: stdout, or (serve's `/api/v1/usage`) this,
    /// and then no warning goes to stderr (the JSON's `state` says them).
    var output: ((String) throws(CLIError) -> Void)?

    /// serve's `/usage.png`: the image goes here instead of `--png`'s file.
    var imageOutput: (([UInt8]) -> Void)?

    func emit(_ text: String) throws(CLIError) {
        if let output { try output(text) } else { try Output.put(text) }
    }

    func warn(_ text: String) { if output == nil { Output.error(text) } }

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

    /// The instant tables are made at: now, or `IFMETER_USAGE_NOW` (a Unix
    /// time) when set, so that a test prints one table several ways at one
    /// instant instead of guessing that no second passed between them.
    static func clock() -> Double { environment("IFMETER_USAGE_NOW").flatMap(Double.init).flatMap { $0.isFinite ? $0 : nil } ?? wallClock() }

    /// From when this table needs hours: before it, a state file's day rows
    /// stand for them (one row per interface per day). The day to month
    /// tables need none; `--check` today's (a limit per hour), `--summary`
    /// the last 24 hours', `--begin`/`--end` with a time of day those from
    /// that day on; `--hourly` every hour (nil).
    func hoursFrom(now: Int64, zone: LocalZone = .system) -> Int64? {
        if granularity == .hour, !check, !summary, !oneline { return nil }
        let calendar = PeriodCalendar(zone: zone)
        var from = Int64.max
        if check { from = calendar.period(.day, containing: now).start }
        if summary { from = calendar.period(.day, containing: calendar.period(.day, containing: now).start - 1).start }
        for bound in [begin, end].compactMap({ $0 }) {
            let day = calendar.period(.day, containing: bound)
            if day.start != bound { from = min(from, day.start) }
        }
        return from
    }

    /// `--hourly` without a chart: the file's hours a chunk at a time,
    /// each written as it is read, so memory holds one chunk of them
    /// whatever the file's size (five years of 20 interfaces: 876,000).
    func streamHours() throws(CLIError) {
        let head: UsageSnapshot
        do {
            head = try StateStore.hourStreamHead(path: path)
        } catch {
            throw CLIError.reading(error, command: Self.spec.name)
        }
        var unmatched = UnmatchedPatterns(filter)
        unmatched.see(head.names.map(StateStore.key))
        let note = UsageFilterNote(filter: filter, snapshot: head)
        if output == nil {
            unmatched.warn(what: path)
            note.warnKinds(what: path)
        }
        let wall = Self.clock()
        let now = Int64(wall.rounded(.down))
        var template = UsageTable(slices: [], plans: head.plans, granularity: .hour, zone: .system, now: now)
        template.saves = head.saves
        template.path = path
        template.wallTime = wall
        template.emptyNote = note.text(path: path)
        if format != "text", let warning = head.saves.warning(now: wall, zone: .system) { warn(warning) }
        var stream = UsageStream(table: template, format: format)
        var failure: CLIError?
        func put(_ text: String) -> Bool {
            guard failure == nil else { return false }
            do throws(CLIError) {
                try emit(format == "text" ? Output.forPeople(text) : text)
                return true
            } catch {
                failure = error
                return false
            }
        }
        _ = put(stream.textHead(path: path) + stream.start())
        let names = head.names.filter { filter.admits(StateStore.key($0)) }.sorted { StateStore.key($0) < StateStore.key($1) }
        do {
            try StateStore.streamHours(path: path, names: names, from: begin, to: end, limit: limit) { name, kind, slices, whole in
                let admitted = slices.filter { filter.admits(StateStore.key($0.name), kind: $0.kind) }
                let table = UsageTable(
                    slices: admitted, plans: head.plans, granularity: .hour, zone: .system, now: now, begin: begin, end: end)
                guard var interface = table.interfaces.first else { return true }
                interface.kind = kind
                interface.alias = head.aliases[name]
                return put(stream.add(interface, whole: whole))
            }
        } catch {
            throw CLIError.reading(error, command: Self.spec.name)
        }
        _ = put(stream.finish(path: path))
        if let failure { throw failure }
    }

    /// The tables (no chart, no check), one interface at a time: its
    /// slices grouped, its table written, then the next, so memory holds
    /// the slices and one interface's table.
    func writeTables(_ snapshot: inout UsageSnapshot, names: [String], note: UsageFilterNote, wall: Double) throws(CLIError) {
        let now = Int64(wall.rounded(.down))
        var byName = Dictionary(grouping: granularity == .fiveMinutes ? snapshot.fiveMinutes : snapshot.slices, by: \.name)
        snapshot.slices = []
        snapshot.fiveMinutes = []
        var shown = Set(byName.keys)
        if granularity == .cycle {
            // Planned interfaces known to the file, even without usage.
            for name in names where Plan.find(for: name, in: snapshot.plans) != nil { shown.insert(name) }
        }
        var template = UsageTable(slices: [], plans: snapshot.plans, granularity: granularity, top: top, zone: .system, now: now)
        template.saves = snapshot.saves
        template.path = path
        template.wallTime = wall
        template.emptyNote = note.text(path: path)
        if format != "text", let warning = snapshot.saves.warning(now: wall, zone: .system) { warn(warning) }
        var stream = UsageStream(table: template, format: format)
        let put = { (text: String) throws(CLIError) in try emit(format == "text" ? Output.forPeople(text) : text) }
        try put(stream.textHead(path: path) + stream.start())
        let cache = PeriodCache()
        for name in shown.map({ (key: StateStore.key($0), name: $0) }).sorted(by: { $0.key < $1.key }).map(\.name) {
            let table = UsageTable(
                slices: byName.removeValue(forKey: name) ?? [], plans: snapshot.plans, granularity: granularity, top: top, zone: .system,
                now: now, names: [name], kinds: snapshot.kinds, begin: begin, end: end, limit: limit, cache: cache)
            for var interface in table.interfaces {
                interface.alias = snapshot.aliases[interface.stored]
                try put(stream.add(interface, whole: true))
            }
        }
        try put(stream.finish(path: path))
    }

    func run() throws(CLIError) {
        if granularity == .hour, svg == nil, png == nil { return try streamHours() }
        // The charts' files are checked before anything is read.
        let svg = try self.svg.map { given throws(CLIError) in
            try CommandLinePath.output(given, option: Options.svg.spec.long, command: Self.spec.name, writing: .replaced)
        }
        let png =
            imageOutput != nil
            ? self.png
            : try self.png.map { given throws(CLIError) in
                try CommandLinePath.output(given, option: Options.png.spec.long, command: Self.spec.name, writing: .replaced)
            }
        var snapshot: UsageSnapshot
        do {
            // --check judges the current cycles (31 days at most) and
            // limits: it reads those days (a year's for a year limit), not
            // years of hours.
            var since: Int64?
            if check {
                let yearly = try StateStore.plans(path: path, verify: false).contains { $0.limits.contains { $0.period == .year } }
                since = Int64(Self.clock()) - (yearly ? 367 : 32) * 86400
            }
            snapshot = try StateStore.snapshot(path: path, since: since, hoursFrom: hoursFrom(now: Int64(Self.clock())))
        } catch {
            throw CLIError.reading(error, command: Self.spec.name)
        }
        // Names without usage: their kind from the interfaces table; one
        // not known there is kept only without --kind.
        let names = snapshot.names.filter { name in
            guard filter.kinds != nil else { return filter.admits(StateStore.key(name)) }
            return snapshot.kinds[name].map { filter.admits(StateStore.key(name), kind: $0) } ?? false
        }
        var unmatched = UnmatchedPatterns(filter)
        unmatched.see((Set(snapshot.names).union(snapshot.slices.lazy.map(\.name))).sorted().map(StateStore.key))
        let note = UsageFilterNote(filter: filter, snapshot: snapshot)
        if output == nil {
            unmatched.warn(what: path)
            note.warnKinds(what: path)
        }
        // Filtered in place: a five-year file's slices are held once.
        let admitted = { (s: UsageSlice) in filter.admits(StateStore.key(s.name), kind: s.kind) }
        snapshot.slices.removeAll { !admitted($0) }
        snapshot.fiveMinutes.removeAll { !admitted($0) }
        let plans = snapshot.plans
        let wall = Self.clock()
        let now = Int64(wall.rounded(.down))
        if !check, !oneline, svg == nil, png == nil {
            return try writeTables(&snapshot, names: names, note: note, wall: wall)
        }
        let hourSlices = snapshot.slices
        let slices = granularity == .fiveMinutes ? snapshot.fiveMinutes : hourSlices
        var table = UsageTable(
            slices: slices, plans: plans, granularity: check ? .cycle : granularity, top: top, zone: .system, now: now,
            names: names, kinds: snapshot.kinds, begin: begin, end: end, limit: limit)
        for n in table.interfaces.indices { table.interfaces[n].alias = snapshot.aliases[table.interfaces[n].stored] }
        table.saves = snapshot.saves
        table.path = path
        table.wallTime = wall
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
        let picture =
            summary
            ? UsageSummary(
                slices: hourSlices, plans: plans, names: names, kinds: snapshot.kinds, zone: .system, now: now, savedAt: snapshot.saves.savedAt)
            : nil
        if let svg {
            let chart = picture.map { UsageSummaryChart(summary: $0).svg() } ?? UsageChart(table: table).svg()
            do {
                try AtomicFile.write(Array(chart.utf8), to: svg)
            } catch {
                throw .runtime("cannot write the chart \(TerminalText.escaped(svg)): \(error)")
            }
        }
        if let png {
            let image: [UInt8]
            do {
                image = try picture.map { s throws(CairoError) in try UsagePNG.summary(s) } ?? UsagePNG.chart(table)
            } catch {
                // cairo is loaded on the first picture; without it nothing is drawn.
                if let reason = (error as? CairoError)?.unloaded {
                    throw .runtime("cannot draw the PNG: libcairo.so.2 could not be loaded (\(reason)). Hint: apt-get install libcairo2")
                }
                throw .runtime("cannot draw the image \(TerminalText.escaped(png)): \(error)")
            }
            if let imageOutput {
                imageOutput(image)
                return
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
