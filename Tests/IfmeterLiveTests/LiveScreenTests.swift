import Foundation
import IfmeterCore
import IfmeterLive
import Testing

let fixtures = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

/// A model built from a made-up run: Wi-Fi and cellular traffic, a VPN
/// tunnel riding inside, a 32-bit wrap, a counter reset, a recreated tun and
/// a deleted veth.
func scenario() -> LiveModel {
    var engine = DeltaEngine()
    var model = LiveModel(host: "testhost", source: "netlink", interval: 1)
    var packets: UInt64 = 0
    func s(
        _ name: String, _ index: Int, _ kind: InterfaceKind, _ rx: UInt64, _ tx: UInt64, width: CounterWidth = .bits64,
        evidence: String = "link-kind:x"
    ) -> InterfaceSample {
        InterfaceSample(
            name: name, index: index, classification: Classification(kind: kind, evidence: evidence), width: width,
            counters: Counters(rxBytes: rx, txBytes: tx, rxPackets: min(rx, packets), txPackets: min(tx, packets)),
            attributes: LinkAttributes(operstate: "up", mtu: 1500, reportedSpeedBps: kind == .wifi ? 866_000_000 : nil))
    }
    let t0 = 1_795_000_000.0
    var rxWifi: UInt64 = 1_000_000, rxCell: UInt64 = 4_294_000_000, rxTun: UInt64 = 500_000, rxEth: UInt64 = 9_000_000
    for step in 0..<12 {
        let t = Double(step)
        var interfaces = [
            s("wlp2s0", 3, .wifi, rxWifi, rxWifi / 10, evidence: "sysfs:phy80211"),
            s("wwan0", 9, .cellular, rxCell, 2_000_000, width: .bits32, evidence: "sysfs:DEVTYPE=wwan"),
            s("enp3s0", 2, .ethernet, rxEth, 1_000_000, evidence: "sysfs:device"),
            s("lo", 1, .loopback, 5000, 5000, evidence: "arphrd:loopback(772)"),
            s("tun0", step < 6 ? 7 : 11, .tunnel, rxTun, rxTun / 4, evidence: "link-kind:tun"),
        ]
        if step < 8 { interfaces.append(s("veth9a", 20, .virtual, 100 * UInt64(step), 50, evidence: "link-kind:veth")) }
        let deltas = engine.apply(Sample(time: t, interfaces: interfaces))
        packets += 100
        model.feed(deltas, from: &engine, time: t0 + t)
        rxWifi += 250_000 * UInt64(step % 4 + 1)
        rxCell = (rxCell + 300_000) & 0xFFFF_FFFF // wraps at 4 GiB
        rxTun = step == 5 ? 1000 : rxTun + 120_000 // recreated after step 5
        rxEth = step == 9 ? 10 : rxEth + 1_000_000 // reset after step 9
    }
    return model
}

extension LiveModel {
    /// One update as the pipeline makes it: the deltas and the engine's changes.
    mutating func feed(_ deltas: [InterfaceDelta], from engine: inout DeltaEngine, time: Double) {
        let (changed, forgotten) = engine.takeChanges()
        update(deltas: deltas, changed: changed.compactMap(engine.totals(for:)), forgotten: forgotten, time: time)
    }
}

@Suite struct LiveScreenTests {
    static let cases: [(name: String, width: Int, height: Int, color: Bool, prepare: @Sendable (inout LiveModel) -> Void)] = [
        ("overview-100x30", 100, 30, false, { _ in }),
        (
            "detail-100x34", 100, 34, false,
            { m in
                _ = m.handle(.down)
                _ = m.handle(.enter)
            }
        ),
        ("narrow-40x15", 40, 15, false, { _ in }),
        ("wide-bits-140x24", 140, 24, false, { m in _ = m.handle(.character("b")) }),
        (
            "packets-120x24", 120, 24, false,
            { m in
                _ = m.handle(.character("b"))
                _ = m.handle(.character("b"))
            }
        ),
        (
            "sorted-by-name-filtered-80x20", 80, 20, false,
            { m in
                _ = m.handle(.character("s"))
                _ = m.handle(.character("s"))
                for key: LiveKey in [.character("f"), .character("w"), .enter] { _ = m.handle(key) }
            }
        ),
        (
            "kinds-hidden-editing-filter-80x20", 80, 20, false,
            { m in
                _ = m.handle(.character("3")) // tunnel
                _ = m.handle(.character("5")) // loopback
                for key: LiveKey in [.character("/"), .character("e"), .character("n")] { _ = m.handle(key) }
            }
        ),
        ("help-80x24", 80, 24, false, { m in _ = m.handle(.character("?")) }),
        ("colour-100x30", 100, 30, true, { m in _ = m.handle(.down) }),
        ("too-small-30x6", 30, 6, false, { _ in }),
    ]

    @Test(arguments: cases.map(\.name))
    func screenMatchesGolden(name: String) throws {
        let c = Self.cases.first { $0.name == name }!
        var model = scenario()
        c.prepare(&model)
        let lines = LiveRenderer(color: c.color).render(model, width: c.width, height: c.height)
        #expect(lines.count == c.height)
        for line in lines {
            let visible = line.replacing(/\u{1B}\[[0-9;]*m/, with: "")
            #expect(visible.unicodeScalars.count == c.width, "every line fills the width: \(visible)")
        }
        if !c.color { #expect(!lines.joined().contains("\u{1B}"), "no colour codes") }
        let rendered = lines.joined(separator: "\n") + "\n"
        let golden = fixtures.appendingPathComponent("screens/\(name).txt")
        if ProcessInfo.processInfo.environment["IFMETER_RECORD_GOLDEN"] == "1" {
            try rendered.write(to: golden, atomically: true, encoding: .utf8)
            Issue.record("re-recorded \(golden.lastPathComponent); review it, then run again without IFMETER_RECORD_GOLDEN")
            return
        }
        #expect(rendered == (try String(contentsOf: golden, encoding: .utf8)), "\(name) differs from its golden screen")
    }

    @Test func theScenarioHasWhatTheScreensShow() {
        let model = scenario()
        #expect(model.row("wwan0")?.quality == .wrapCorrected)
        #expect(model.row("enp3s0")?.quality == .lowerBound)
        #expect(model.row("tun0")?.events.recreations == 1)
        #expect(model.row("veth9a")?.present == false)
        #expect(model.row("tun0")?.recentEvents.map(\.text).contains("recreated") == true)
    }

    @Test func goneInterfacesLingerThenGo() {
        var model = scenario()
        #expect(model.row("veth9a") != nil)
        model.update(deltas: [], changed: [], forgotten: [], time: model.now + 5)
        #expect(model.row("veth9a") != nil, "a gone interface lingers")
        model.update(deltas: [], changed: [], forgotten: [], time: model.now + 60)
        #expect(model.row("veth9a") == nil, "and then goes")
        #expect(model.row("tun0") != nil, "present ones stay")
        model.update(deltas: [], changed: [], forgotten: [SeriesKey(name: "tun0")], time: model.now + 1)
        #expect(model.row("tun0") == nil, "forgotten by the engine: gone at once")
    }

    @Test func summaryKeepsTunnelTrafficApart() {
        let lines = LiveRenderer(color: false).render(scenario(), width: 120, height: 30)
        let summary = lines.first { $0.hasPrefix("physical") } ?? ""
        #expect(summary.contains("tunnel") && summary.contains("inside physical, not added"))
    }
}

@Suite struct LiveKeyTests {
    @Test func selectionSortPauseAndKinds() {
        var model = scenario()
        let first = model.selected
        #expect(model.handle(.character("j")) == .redraw)
        #expect(model.selected != first)
        #expect(model.handle(.character("k")) == .redraw)
        #expect(model.selected == first)
        #expect(model.handle(.up) == .redraw && model.selected == first, "stays at the top")
        _ = model.handle(.character("s"))
        #expect(model.sort == .total)
        _ = model.handle(.character("s"))
        #expect(model.sort == .name)
        #expect(model.visible.map(\.name) == model.visible.map(\.name).sorted())
        _ = model.handle(.character("p"))
        #expect(model.paused)
        let frozen = model.now
        model.update(deltas: [], changed: [], forgotten: [SeriesKey(name: "lo")], time: frozen + 5)
        #expect(model.now == frozen && model.row("lo") != nil, "paused: the figures stay still")
        _ = model.handle(.character("7"))
        #expect(model.hiddenKinds == [.other])
        _ = model.handle(.character("6"))
        #expect(!model.visible.contains { $0.kind == .virtual })
        #expect(model.handle(.character("r")) == .zeroTotals)
        #expect(model.handle(.character("q")) == .quit)
        #expect(model.handle(.interrupt) == .quit)
    }

    @Test func filterEditing() {
        var model = scenario()
        for key: LiveKey in [.character("/"), .character("w"), .character("x"), .backspace, .enter] { _ = model.handle(key) }
        #expect(model.filter == "w")
        #expect(Set(model.visible.map(\.name)) == ["wlp2s0", "wwan0"])
        // Editing starts from the filter in use.
        for key: LiveKey in [.character("f"), .backspace, .character("*"), .character("n"), .character("0"), .enter] { _ = model.handle(key) }
        #expect(Set(model.visible.map(\.name)) == ["tun0", "wwan0"])
        for key: LiveKey in [.character("f"), .character("z"), .escape] { _ = model.handle(key) }
        #expect(model.filter == "*n0", "Escape keeps the old filter")
        #expect(model.handle(.character("q")) == .quit)
    }

    @Test func detailAndHelp() {
        var model = scenario()
        _ = model.handle(.enter)
        #expect(model.detailOpen)
        _ = model.handle(.escape)
        #expect(!model.detailOpen)
        _ = model.handle(.character("?"))
        #expect(model.helpOpen)
        _ = model.handle(.character("x"))
        #expect(!model.helpOpen, "any key closes the help")
    }
}

@Suite struct LiveEventNoteTests {
    @Test func aDeletionShowsAsItHappens() {
        var engine = DeltaEngine()
        var model = LiveModel(host: "h", source: "netlink", interval: 1)
        let tun = InterfaceSample(name: "tun0", index: 7, counters: Counters(rxBytes: 10, txBytes: 10, rxPackets: 1, txPackets: 1))
        model.feed(engine.apply(Sample(time: 0, interfaces: [tun])), from: &engine, time: 100)
        var final = tun
        final.counters = Counters(rxBytes: 50, txBytes: 10, rxPackets: 2, txPackets: 1)
        let deleted = engine.apply(DeletionEvent(time: 0.5, interface: final)).map { [$0] } ?? []
        model.feed(deleted + engine.apply(Sample(time: 1, interfaces: [])), from: &engine, time: 101)
        #expect(model.note?.text == "tun0 deleted")
        #expect(model.row("tun0")?.recentEvents.last?.text == "deleted")
        let screen = LiveRenderer(color: false).render(model, width: 80, height: 12).joined(separator: "\n")
        #expect(screen.contains("tun0 deleted"))
    }
}
