#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
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
        options: [CommonOptions.bits] + RouteOptions.specs + CommonOptions.monitoring)

    let setup: SamplingSetup
    let bits: Bool
    /// Routes are followed when one namespace is watched.
    let routes: RouteSettings?

    init(_ p: ParsedArguments) throws(CLIError) {
        bits = p.flag("--bits")
        setup = try SamplingSetup(p, saveEvery: 10)
        let named = try CommonOptions.namespaceNames(p)?.count ?? 0
        let several = p.flag("--all-netns") || named > 1
        if several, p.has("--probe") { throw p.usage("'--probe' asks one namespace's routing tables: give one --netns, not several") }
        if several { try RouteOptions.check(p) }
        routes = several ? nil : try RouteOptions.settings(p, command: "live")
    }

    func run() throws(CLIError) {
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
            if let state = setup.state { pipeline.add(enricher: PlanFeed(path: state.path) { screen.model.plans = $0 }) }
            pipeline.add(sink: screen)
            TerminalState.enter()
            defer { TerminalState.restore() }
            var waiter = KeyWaiter(screen: screen)
            pipeline.run(&waiter)
        } else {
            let lines = PlainLines(source: pipeline.source.sourceName, interval: setup.configuration.interval, bits: bits)
            try Output.put(lines.header)
            pipeline.add(sink: lines)
            StopSignal.install(hangupStops: true)
            var waiter = SignalWaiter(stop: { lines.failure != nil })
            pipeline.run(&waiter)
        }
    }
}

/// One line per interface per interval, for pipes and files.
final class PlainLines: PipelineSink {
    let header: String
    let bits: Bool
    private(set) var failure: CLIError?
    /// Every interface's totals, kept from the updates' changes.
    private var totals = TotalsView<InterfaceTotals> { $0 }

    init(source: String, interval: Double, bits: Bool) {
        self.bits = bits
        header = "# ifmeter live: \(source) every \(Units.duration(interval)), one line per interface per interval. \(Caveat.inline)\n"
    }

    func receive(_ update: borrowing PipelineUpdate) {
        totals.apply(update)
        guard failure == nil, case .sampled = update.outcome, !update.isBaseline else { return }
        let clock = LiveRenderer.clock(update.wallTime)
        var text = ""
        for delta in update.deltas.sorted(by: { $0.key < $1.key }) {
            let totals = self.totals[delta.key]
            let mark = delta.quality.liveMark, totalMark = (totals?.quality ?? .exact).liveMark
            let rx = delta.rate(.rxBytes).map { Units.rate(bytesPerSecond: $0, bits: bits) } ?? "-"
            let tx = delta.rate(.txBytes).map { Units.rate(bytesPerSecond: $0, bits: bits) } ?? "-"
            text += "\(clock) \(delta.key.display) \(delta.classification.kind.rawValue) rx \(mark)\(rx) tx \(mark)\(tx)"
            text += " total rx \(totalMark)\(Units.bytes(totals?.totals.rxBytes ?? 0)) tx \(totalMark)\(Units.bytes(totals?.totals.txBytes ?? 0))"
            text += " \((totals?.quality ?? .exact).name)"
            if !delta.change.note.isEmpty { text += " (\(delta.change.note))" }
            text += "\n"
        }
        do {
            try Output.put(text)
        } catch {
            failure = error
        }
    }
}

/// The terminal side of the live view: the model fed by the pipeline,
/// drawn after each update and each key.
final class LiveScreen: PipelineSink {
    var model: LiveModel
    let renderer: LiveRenderer

    init(pipeline: Pipeline, bits: Bool) {
        model = LiveModel(host: hostName(), source: pipeline.source.sourceName, interval: pipeline.configuration.interval)
        model.unit = bits ? .bits : .bytes
        let noColor = (getenv("NO_COLOR").map { String(cString: $0) } ?? "").isEmpty == false
        let dumb = getenv("TERM").map { String(cString: $0) } == "dumb"
        renderer = LiveRenderer(color: !noColor && !dumb)
    }

    func receive(_ update: borrowing PipelineUpdate) {
        model.update(deltas: update.deltas, changed: update.changed, forgotten: update.forgotten, time: update.wallTime)
        draw()
    }

    /// One write per frame: home, then every line at full width. A terminal
    /// that cannot be written any more (hung up) ends the view.
    func draw() {
        let (width, height) = TerminalState.size()
        readAddressesIfDue()
        model.pageSize = renderer.listRows(model, width: width, height: height)
        let lines = renderer.render(model, width: width, height: height)
        do {
            try Output.raw("\u{1B}[H" + lines.joined(separator: "\r\n"))
        } catch {
            StopSignal.request()
        }
    }
}

extension LiveScreen {
    /// The selected interface's addresses, read only while its detail is
    /// open: when the selection changes, and every 10 s.
    func readAddressesIfDue() {
        guard model.detailOpen, let key = model.selected else { return }
        let now = wallClock()
        if let known = model.addresses, known.key == key, now - known.time < 10 { return }
        model.addresses = AddressReader.read(key, at: now)
    }

    private func wallClock() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Reads one interface's MAC, IPv4 and IPv6 addresses with getifaddrs, in
/// the namespace it lives in (entering another one needs root).
enum AddressReader {
    static func read(_ key: SeriesKey, at time: Double) -> LiveAddresses {
        #if os(Linux)
        if !key.netns.isEmpty {
            do {
                return try NetworkNamespace.perform(in: key.netns) { readHere(key, at: time) }
            } catch {
                return LiveAddresses(key: key, time: time, failure: "not read in namespace \(key.netns): \(error)")
            }
        }
        #endif
        return readHere(key, at: time)
    }

    static func readHere(_ key: SeriesKey, at time: Double) -> LiveAddresses {
        var result = LiveAddresses(key: key, time: time)
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else {
            result.failure = "getifaddrs: \(String(cString: strerror(errno)))"
            return result
        }
        defer { freeifaddrs(list) }
        var entry = list
        while let ifa = entry {
            defer { entry = ifa.pointee.ifa_next }
            guard let name = ifa.pointee.ifa_name, InterfaceName.decode(cString: name) == key.name, let address = ifa.pointee.ifa_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
                var sin = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                inet_ntop(AF_INET, &sin.sin_addr, &text, socklen_t(text.count))
                result.ipv4.append(string(text) + prefix(ifa.pointee.ifa_netmask, length: 4, offset: 4))
            case AF_INET6:
                var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
                var sin6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                inet_ntop(AF_INET6, &sin6.sin6_addr, &text, socklen_t(text.count))
                result.ipv6.append(string(text) + prefix(ifa.pointee.ifa_netmask, length: 16, offset: 8))
            #if os(Linux)
            case AF_PACKET:
                // struct sockaddr_ll: sll_halen at byte 11, sll_addr[8] at 12.
                let raw = UnsafeRawPointer(address)
                let length = min(Int(raw.load(fromByteOffset: 11, as: UInt8.self)), 8)
                let bytes = (0..<length).map { raw.load(fromByteOffset: 12 + $0, as: UInt8.self) }
                if length > 0, bytes.contains(where: { $0 != 0 }) {
                    result.mac = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: ":")
                }
            #endif
            default: break
            }
        }
        return result
    }

    private static func string(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `/24`: the bits set in a netmask of `length` bytes at `offset` in its sockaddr.
    private static func prefix(_ mask: UnsafeMutablePointer<sockaddr>?, length: Int, offset: Int) -> String {
        guard let mask else { return "" }
        let raw = UnsafeRawPointer(mask)
        var bits = 0
        for n in 0..<length { bits += raw.load(fromByteOffset: offset + n, as: UInt8.self).nonzeroBitCount }
        return "/\(bits)"
    }
}

/// Waits for the next sample while reading keys, resizes and signals; the
/// view's keys act at once (`r` zeroes the pipeline's totals).
struct KeyWaiter: PipelineWaiter {
    let screen: LiveScreen
    var keysOpen = true

    mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool {
        while !TerminalState.stopRequested {
            let timeout = deadline - monotonicSeconds()
            if timeout <= 0 { return true }
            var fds = [
                pollfd(fd: keysOpen ? 0 : -1, events: Int16(POLLIN), revents: 0),
                pollfd(fd: TerminalState.wakeRead, events: Int16(POLLIN), revents: 0),
            ] + pipeline.source.eventDescriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let rc = poll(&fds, nfds_t(fds.count), Int32(min(timeout * 1000 + 1, 60_000)))
            if rc < 0, errno != EINTR { return false }
            if fds[1].revents != 0 { TerminalState.drainWakeups() }
            // Link notifications, read when they come (timed then).
            if fds.dropFirst(2).contains(where: { $0.revents != 0 }), pipeline.readEvents() { return true }
            if TerminalState.stopRequested { return false }
            var redraw = TerminalState.takeResize()
            if fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                var buffer = [UInt8](repeating: 0, count: 256)
                let n = read(0, &buffer, buffer.count)
                if n > 0 {
                    for key in KeyDecoder.decode(Array(buffer[..<n])) {
                        switch screen.model.handle(key) {
                        case .quit: return false
                        case .zeroTotals:
                            // Publishes the zeroed totals, which redraws.
                            pipeline.zeroTotals()
                        case .redraw: redraw = true
                        case .none: break
                        }
                    }
                } else if n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN) {
                    // The terminal hung up: nobody is watching any more.
                    if isatty(0) == 1 || fds[0].revents & Int16(POLLHUP) != 0 { return false }
                    keysOpen = false  // stdin was a file or pipe that ended
                }
            } else if fds[0].revents & Int16(POLLNVAL) != 0 {
                keysOpen = false
            }
            if redraw { screen.draw() }
        }
        return false
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
