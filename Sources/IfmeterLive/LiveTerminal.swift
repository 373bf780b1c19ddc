import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import IfmeterSampling
import IfmeterSystem

/// One line per interface per interval, for pipes and files.
package final class PlainLines: PipelineSink {
    package let header: String
    let bits: Bool
    /// Lines in ASCII (a locale without UTF-8: `>=` for `≥`).
    let ascii: Bool
    /// The write that failed, which ends the run.
    package private(set) var failure: SystemError?
    /// Every interface's totals, kept from the updates' changes.
    private var totals = TotalsView<InterfaceTotals> { $0 }

    package init(source: String, interval: Double, bits: Bool, ascii: Bool = !localeUsesUTF8()) {
        self.bits = bits
        self.ascii = ascii
        header = "# ifmeter live: \(source) every \(Units.duration(interval)), one line per interface per interval. \(Caveat.inline)\n"
    }

    package func receive(_ update: borrowing PipelineUpdate) {
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
        do throws(SystemError) {
            try writeAll(Array(TerminalText.escaped(ascii ? ASCIIText.folded(text) : text, keeping: "\n").utf8), to: 1)
        } catch {
            failure = error
        }
    }
}

/// The terminal side of the live view: the model fed by the pipeline,
/// drawn after each update and each key.
package final class LiveScreen: PipelineSink {
    package var model: LiveModel
    let renderer: LiveRenderer

    package init(pipeline: Pipeline, bits: Bool) {
        model = LiveModel(host: hostName(), source: pipeline.source.sourceName, interval: pipeline.configuration.interval)
        model.unit = bits ? .bits : .bytes
        let noColor = (environment("NO_COLOR") ?? "").isEmpty == false
        let dumb = environment("TERM") == "dumb"
        renderer = LiveRenderer(color: !noColor && !dumb, ascii: !localeUsesUTF8())
    }

    package func receive(_ update: borrowing PipelineUpdate) {
        model.update(deltas: update.deltas, changed: update.changed, forgotten: update.forgotten, time: update.wallTime)
        draw()
    }

    /// One write per frame: home, then every line at full width. A terminal
    /// that cannot be written any more (hung up) ends the view.
    package func draw() {
        let (width, height) = TerminalState.size()
        readAddressesIfDue()
        model.pageSize = renderer.listRows(model, width: width, height: height)
        let lines = renderer.render(model, width: width, height: height)
        do throws(SystemError) {
            try writeAll(Array(("\u{1B}[H" + lines.joined(separator: "\r\n")).utf8), to: 1)
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
        let read = InterfaceAddresses.read(key)
        model.addresses = LiveAddresses(key: key, time: now, mac: read.mac, ipv4: read.ipv4, ipv6: read.ipv6, failure: read.failure)
    }
}

/// Waits for the next sample while reading keys, resizes and signals; the
/// view's keys act at once (`r` zeroes the pipeline's totals).
package struct KeyWaiter: PipelineWaiter {
    let screen: LiveScreen
    var keysOpen = true

    package init(screen: LiveScreen) { self.screen = screen }

    package mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool {
        while !TerminalState.stopRequested {
            let timeout = deadline - monotonicSeconds()
            if timeout <= 0 { return true }
            let watched = [keysOpen ? 0 : -1, TerminalState.wakeRead] + pipeline.source.eventDescriptors
            guard let results = waitForInput(watched, timeout: timeout) else { return false }
            if results[1].any { TerminalState.drainWakeups() }
            // Link notifications, read when they come (timed then).
            if results.dropFirst(2).contains(where: \.any), pipeline.readEvents() { return true }
            if TerminalState.stopRequested { return false }
            var redraw = TerminalState.takeResize()
            let keys = results[0]
            if keys.readable || keys.hungUp || keys.failed {
                switch readOnce(0) {
                case .bytes(let bytes):
                    for key in KeyDecoder.decode(bytes) {
                        switch screen.model.handle(key) {
                        case .quit: return false
                        case .zeroTotals:
                            // Publishes the zeroed totals, which redraws.
                            pipeline.zeroTotals()
                        case .redraw: redraw = true
                        case .none: break
                        }
                    }
                case .end, .failed:
                    // The terminal hung up: nobody is watching any more.
                    if isTerminal(0) || keys.hungUp { return false }
                    keysOpen = false // stdin was a file or pipe that ended
                case .nothing:
                    break
                }
            } else if keys.invalid {
                keysOpen = false
            }
            if redraw { screen.draw() }
        }
        return false
    }
}

/// Turns terminal bytes into keys.
package enum KeyDecoder {
    package static func decode(_ bytes: [UInt8]) -> [LiveKey] {
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
