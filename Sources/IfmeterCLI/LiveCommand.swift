#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterLive
import IfmeterSampling
import IfmeterService

struct LiveCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter live",
        abstract: "Watch every interface live in the terminal (plain lines when stdout is not one).",
        discussion: """
            Keys: q quit, arrows or j/k select, Enter detail, b bits/bytes, s sort,
            f or / filter, 1..7 show or hide kinds, p pause, r zero totals, ? help.
            When stdout is not a terminal, prints one plain line per interface per
            interval instead.
            """,
        options: [CommonOptions.bits] + MonitorOptions.common)

    let arguments: ParsedArguments
    let interval: Double
    let bits: Bool
    let filter: InterfaceFilter
    let configuration: EngineConfiguration
    let state: StateOptions?

    init(_ p: ParsedArguments) throws(CLIError) {
        arguments = p
        state = MonitorOptions.stateOptions(p, saveEvery: 10)
        interval = try CommonOptions.duration(p, "--interval", default: 1)
        bits = p.flag("--bits")
        filter = try CommonOptions.filter(p)
        configuration = try CommonOptions.engineConfiguration(p)
        _ = try CommonOptions.sourceKind(p)
    }

    func run() throws(CLIError) {
        let source = try CommonOptions.openSource(arguments)
        var engine = DeltaEngine(configuration: configuration)
        var persistence: StatePersistence?
        if let state {
            do {
                persistence = try StatePersistence(options: state, engine: &engine)
            } catch {
                throw .runtime(error.message)
            }
        }
        defer { persistence?.saveIfDue(engine, force: true) }
        if Output.isTerminal(1) {
            try LiveTerminal(source: source, command: self, persistence: persistence).run(&engine)
        } else {
            try plainLines(source, &engine, persistence)
        }
    }

    /// One line per interface per interval, for pipes and files.
    func plainLines(_ source: any CounterSource, _ engine: inout DeltaEngine, _ persistence: StatePersistence?) throws(CLIError) {
        StopSignal.install()
        // Not inside `persistence?.record(...)`: optional chaining would skip
        // the sample when there is no state file.
        let baseline = engine.apply(try CommonOptions.take(source, filter).sample)
        persistence?.record(baseline)
        try Output.put("# ifmeter live: \(source.sourceName) every \(Units.duration(interval)), one line per interface per interval. "
            + "Figures are estimates from interface counters (protocol overhead included, not per-app); ≥ lower bound, ~ wrap-corrected.\n")
        let start = monotonicSeconds()
        var n = 0
        while true {
            n += 1
            guard sleepUntil(start + Double(n) * interval) else { return }
            let (events, sample) = try CommonOptions.take(source, filter)
            let deltas = engine.apply(events, sample)
            persistence?.record(deltas)
            persistence?.saveIfDue(engine, force: false)
            let clock = LiveRenderer.clock(wallClock())
            var text = ""
            for delta in deltas.sorted(by: { $0.name < $1.name }) {
                let totals = engine.totals(for: delta.name)
                let mark = Caveats.mark(delta.quality), totalMark = Caveats.mark(totals?.quality ?? .exact)
                let rx = delta.rate(.rxBytes).map { Units.rate(bytesPerSecond: $0, bits: bits) } ?? "-"
                let tx = delta.rate(.txBytes).map { Units.rate(bytesPerSecond: $0, bits: bits) } ?? "-"
                text += "\(clock) \(delta.name) \(delta.classification.kind.rawValue) rx \(mark)\(rx) tx \(mark)\(tx)"
                text += " total rx \(totalMark)\(Units.bytes(totals?.totals.rxBytes ?? 0)) tx \(totalMark)\(Units.bytes(totals?.totals.txBytes ?? 0))"
                text += " \((totals?.quality ?? .exact).name)"
                let note = IntervalRenderer.note(delta.change)
                if !note.isEmpty { text += " (\(note))" }
                text += "\n"
            }
            try Output.put(text)
        }
    }
}

/// The terminal side of the live view: raw mode, the alternate screen, keys,
/// resizes, and restoring the terminal however the program ends.
final class LiveTerminal {
    let source: any CounterSource
    let command: LiveCommand
    let persistence: StatePersistence?
    var model: LiveModel
    let renderer: LiveRenderer

    init(source: any CounterSource, command: LiveCommand, persistence: StatePersistence?) {
        self.source = source
        self.command = command
        self.persistence = persistence
        model = LiveModel(host: hostName(), source: source.sourceName, interval: command.interval)
        model.bits = command.bits
        let noColor = (getenv("NO_COLOR").map { String(cString: $0) } ?? "").isEmpty == false
        let dumb = getenv("TERM").map { String(cString: $0) } == "dumb"
        renderer = LiveRenderer(color: !noColor && !dumb)
    }

    func run(_ engine: inout DeltaEngine) throws(CLIError) {
        TerminalState.enter()
        defer { TerminalState.restore() }
        let baseline = engine.apply(try CommonOptions.take(source, command.filter).sample)
        persistence?.record(baseline)
        model.update(deltas: [], totals: engine.interfaces, time: wallClock())
        var next = monotonicSeconds() + command.interval
        draw()
        var keysOpen = true
        while !TerminalState.stopRequested {
            let timeout = max(0, next - monotonicSeconds())
            var fds = [
                pollfd(fd: keysOpen ? 0 : -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: TerminalState.wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let rc = poll(&fds, 2, Int32(min(timeout * 1000 + 1, 60_000)))
            if rc < 0, errno != EINTR { break }
            if fds[1].revents != 0 { TerminalState.drainWakeups() }
            if TerminalState.stopRequested { break }
            var redraw = TerminalState.takeResize()
            if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                var buffer = [UInt8](repeating: 0, count: 256)
                let n = read(0, &buffer, buffer.count)
                if n > 0 {
                    for key in KeyDecoder.decode(Array(buffer[..<n])) {
                        switch model.handle(key) {
                        case .quit: return
                        case .zeroTotals:
                            engine.zeroTotals()
                            model.update(deltas: [], totals: engine.interfaces, time: wallClock())
                            redraw = true
                        case .redraw: redraw = true
                        case .none: break
                        }
                    }
                } else if n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN) {
                    // The terminal hung up: nobody is watching any more.
                    if isatty(0) == 1 || fds[0].revents & Int16(POLLHUP) != 0 { return }
                    keysOpen = false  // stdin was a file or pipe that ended
                }
            } else if fds[0].revents & Int16(POLLNVAL) != 0 {
                keysOpen = false
            }
            if monotonicSeconds() >= next {
                let (events, sample) = try CommonOptions.take(source, command.filter)
                let deltas = engine.apply(events, sample)
                persistence?.record(deltas)
                persistence?.saveIfDue(engine, force: false)
                engine.forget(notSeenSince: sample.time - 3600)
                model.update(deltas: deltas, totals: engine.interfaces, time: wallClock())
                next += command.interval
                if next < monotonicSeconds() { next = monotonicSeconds() + command.interval }
                redraw = true
            }
            if redraw { draw() }
        }
    }

    /// One write per frame: home, then every line at full width. A terminal
    /// that cannot be written any more (hung up) ends the view.
    func draw() {
        let (width, height) = TerminalState.size()
        let lines = renderer.render(model, width: width, height: height)
        do {
            try Output.put("\u{1B}[H" + lines.joined(separator: "\r\n"))
        } catch {
            TerminalState.stop.store(true, ordering: .relaxed)
        }
    }
}

/// Turns terminal bytes into keys.
enum KeyDecoder {
    static func decode(_ bytes: [UInt8]) -> [LiveKey] {
        var keys: [LiveKey] = []
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == 0x1B {
                if i + 2 < bytes.count, bytes[i + 1] == UInt8(ascii: "[") || bytes[i + 1] == UInt8(ascii: "O") {
                    let c = bytes[i + 2]
                    switch c {
                    case UInt8(ascii: "A"): keys.append(.up); i += 3; continue
                    case UInt8(ascii: "B"): keys.append(.down); i += 3; continue
                    case UInt8(ascii: "H"): keys.append(.home); i += 3; continue
                    case UInt8(ascii: "F"): keys.append(.end); i += 3; continue
                    case UInt8(ascii: "C"), UInt8(ascii: "D"): i += 3; continue
                    case UInt8(ascii: "5"), UInt8(ascii: "6"), UInt8(ascii: "1"), UInt8(ascii: "4"):
                        if i + 3 < bytes.count, bytes[i + 3] == UInt8(ascii: "~") {
                            keys.append(c == UInt8(ascii: "5") ? .pageUp : c == UInt8(ascii: "6") ? .pageDown : c == UInt8(ascii: "1") ? .home : .end)
                            i += 4
                            continue
                        }
                    default: break
                    }
                    // An unknown sequence: skip to its final byte.
                    var j = i + 2
                    while j < bytes.count, !(0x40...0x7E).contains(bytes[j]) { j += 1 }
                    i = j + 1
                    continue
                }
                keys.append(.escape)
                i += 1
                continue
            }
            switch b {
            case 0x03: keys.append(.interrupt)
            case 0x0D, 0x0A: keys.append(.enter)
            case 0x7F, 0x08: keys.append(.backspace)
            case 0x20...0x7E: keys.append(.character(Character(UnicodeScalar(b))))
            default:
                // UTF-8 text for the filter.
                var j = i + 1
                while j < bytes.count, bytes[j] & 0xC0 == 0x80 { j += 1 }
                if let text = String(validating: bytes[i..<j], as: UTF8.self), let c = text.first { keys.append(.character(c)) }
                i = j
                continue
            }
            i += 1
        }
        return keys
    }
}
