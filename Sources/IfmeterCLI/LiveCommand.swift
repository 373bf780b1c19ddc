import IfmeterCore
import Synchronization
import IfmeterLive
import IfmeterPipeline
import IfmeterRoute
import IfmeterSampling
import IfmeterSystem

struct LiveCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter live",
        abstract: "Watch every interface live in the terminal (plain lines when stdout is not one).",
        discussion: """
            Keys: q quit, arrows or j/k select, PgUp/PgDn/Home/End page, Enter detail,
            t span of the detail graphs, a bar scale (one, per row, log), b bytes/bits/packets,
            s sort, f or / filter, 1..7 show or hide kinds, p pause, r zero totals, ? help.
            When stdout is not a terminal, prints one plain line per interface per
            interval instead.
            """,
        options: [CommonOptions.bits.spec] + RouteOptions.specs + CommonOptions.monitoring)

    let setup: SamplingSetup
    let bits: Bool
    /// Routes are followed when one namespace is watched.
    let routes: RouteSettings?

    init(_ p: ParsedArguments) throws(CLIError) {
        bits = p[CommonOptions.bits]
        setup = try SamplingSetup(p, saveEvery: StateOptions.defaultSaveEvery)
        let named = try CommonOptions.namespaceNames(p)?.count ?? 0
        let several = p[CommonOptions.allNetns] || named > 1
        if several, p.has(RouteOptions.probe) { throw p.usage("'--probe' asks one namespace's routing tables: give one --netns, not several") }
        if several { try RouteOptions.check(p) }
        routes = several ? nil : try RouteOptions.settings(p, command: "live")
    }

    func run() throws(CLIError) {
        // Before the state file says "running": a stop signal from then on
        // ends with a save, never with the default action (the live view
        // adds SIGWINCH when it takes the terminal).
        StopSignal.install(hangupStops: true)
        let pipeline = try setup.pipeline()
        if Output.isTerminal(1) {
            let screen = LiveScreen(pipeline: pipeline, bits: bits)
            #if os(Linux)
            // Enrichers run before the screen: each frame shows its sample's
            // route and the plans read for it.
            if let routes, let feed = try? RouteFeed(options: routes, publish: { _ in }) {
                pipeline.add(enricher: feed)
                feed.onPublish = { [unowned screen, unowned feed] in screen.model.route = feed.summary }
            }
            #endif
            if let persistence = pipeline.persistence {
                pipeline.add(
                    enricher: PlanFeed(
                        persistence: persistence, deliver: { screen.model.plans = $0 }, aliases: { screen.model.aliases = $0 }))
            }
            pipeline.add(sink: screen)
            // Said after the screen is gone: a line on stderr would tear it.
            let said = LinesHeld()
            pipeline.sayStateSaves(Log.everyLine(prefix: "ifmeter live: ") { line in said.lines.withLock { $0.append(line) } })
            do {
                TerminalState.enter()
                defer { TerminalState.restore() }
                var waiter = KeyWaiter(screen: screen)
                pipeline.run(&waiter)
            }
            for line in said.lines.withLock({ $0 }) { Output.error(line) }
        } else {
            let lines = PlainLines(source: pipeline.source.sourceName, interval: setup.configuration.interval, bits: bits)
            try Output.put(Output.forPeople(lines.header))
            pipeline.add(sink: lines)
            pipeline.sayStateSaves(Log.everyLine(prefix: "ifmeter live: ", sink: { Output.error($0) }))
            var waiter = SignalWaiter(stop: { lines.failure != nil })
            pipeline.run(&waiter)
            try pipeline.checkLastSave()
            // Stopped by a failed write: said (or quiet when the reader went away).
            if let failure = lines.failure { throw Output.failure(failure) }
            return
        }
        try pipeline.checkLastSave()
    }
}

/// Lines kept to say later.
final class LinesHeld: Sendable {
    let lines = Mutex<[String]>([])
}
