import IfmeterCore
import IfmeterLive
import Testing

/// A model fed `steps` one-second samples of interfaces sending at fixed
/// byte rates (rx, tx), starting at Unix time `t0`.
func steadyModel(
    _ rates: [(name: String, rx: UInt64, tx: UInt64)], steps: Int = 20, t0: Double = 1_795_000_000,
    extras: Bool = false
) -> LiveModel {
    var engine = DeltaEngine()
    var model = LiveModel(host: "h", source: "netlink", interval: 1)
    for step in 0..<steps {
        let n = UInt64(step)
        let interfaces = rates.enumerated().map { (i, r) in
            InterfaceSample(
                name: r.name, index: i + 1, classification: Classification(kind: .virtual, evidence: "link-kind:veth"), width: .bits64,
                counters: extras
                    ? Counters(
                        rxBytes: r.rx * n, txBytes: r.tx * n, rxPackets: 10 * n, txPackets: 20 * n, rxErrors: 3 * n, txErrors: 0,
                        rxDropped: 0, txDropped: 7 * n)
                    : Counters(rxBytes: r.rx * n, txBytes: r.tx * n, rxPackets: 10 * n, txPackets: 20 * n),
                attributes: LinkAttributes(operstate: "up", mtu: 9000))
        }
        model.feed(engine.apply(Sample(time: Double(step), interfaces: interfaces)), from: &engine, time: t0 + Double(step))
    }
    return model
}

func visibleText(_ lines: [String]) -> [String] { lines.map { $0.replacing(/\u{1B}\[[0-9;]*m/, with: "") } }

@Suite struct NaturalOrderTests {
    @Test func numbersInNamesCompareAsNumbers() {
        #expect(NaturalOrder.less("va2", "va19"))
        #expect(!NaturalOrder.less("va19", "va2"))
        #expect(NaturalOrder.less("eth9", "eth10"))
        #expect(NaturalOrder.less("va", "va1"))
        #expect(NaturalOrder.less("va1", "vb0"))
        #expect(NaturalOrder.less("va01", "va1") != NaturalOrder.less("va1", "va01"), "a total order even for equal numbers")
        let names = ["va19", "va2", "va10", "vb1", "lo", "va1"]
        #expect(names.sorted(by: NaturalOrder.less) == ["lo", "va1", "va2", "va10", "va19", "vb1"])
        // The own namespace first, then other namespaces in natural order.
        let keys = [SeriesKey(netns: "ns10", name: "a"), SeriesKey(netns: "ns2", name: "a"), SeriesKey(name: "z")]
        #expect(keys.sorted(by: NaturalOrder.less).map(\.description) == ["z", "ns2/a", "ns10/a"])
    }

    @Test func theNameSortIsNatural() {
        var model = steadyModel([("va19", 1, 1), ("va2", 1, 1), ("va10", 1, 1), ("vb1", 1, 1)], steps: 3)
        _ = model.handle(.character("s"))
        _ = model.handle(.character("s"))
        #expect(model.sort == .name)
        #expect(model.visible.map(\.name) == ["va2", "va10", "va19", "vb1"])
    }
}

@Suite struct LiveBarsTests {
    /// The bar characters of a row's rx and tx sparklines.
    func bars(_ screen: [String], _ name: String) -> (rx: String, tx: String) {
        let row = screen.first { $0.dropFirst(2).hasPrefix(name + " ") } ?? ""
        let cells = row.split(separator: " ").filter { $0.unicodeScalars.allSatisfy { ("▁"..."█").contains($0) || $0 == "·" } }
        return (cells.first.map(String.init) ?? "", cells.dropFirst().first.map(String.init) ?? "")
    }

    @Test func rxAndTxApartOnOneScaleThenPerRow() {
        // 2.8 MiB/s out of fast, 240 KiB/s out of slow; rx a tenth of tx.
        var model = steadyModel([("fast", 286_720, 2_936_013), ("slow", 24_576, 245_760)])
        var screen = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 20))
        #expect(screen[0].contains("bars: one scale, top 2.80 MiB/s"), "the scale in use is said: \(screen[0])")
        #expect(screen[1].contains("RECENT RX") && screen[1].contains("RECENT TX"))
        var fast = bars(screen, "fast"), slow = bars(screen, "slow")
        #expect(fast.tx.hasSuffix("████"), "the busiest tx fills the scale: \(fast)")
        #expect(fast.rx.hasSuffix("▁▁▁▁"), "its rx is a tenth: \(fast)")
        #expect(slow.tx.hasSuffix("▁▁▁▁"), "240 KiB/s on a 2.8 MiB/s scale is low: \(slow)")
        #expect(slow.rx.hasSuffix("····"), "24 KiB/s on a 2.8 MiB/s scale is a trickle: \(slow)")
        _ = model.handle(.character("a"))
        #expect(model.scale == .perRow)
        screen = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 20))
        #expect(screen[0].contains("bars: each row its own scale"))
        fast = bars(screen, "fast")
        slow = bars(screen, "slow")
        #expect(slow.tx.hasSuffix("████") && fast.tx.hasSuffix("████"), "each row on its own peak: \(slow) \(fast)")
        #expect(slow.rx.hasSuffix("▁▁▁▁"), "rx and tx of a row share its scale: \(slow)")
        // One log scale: the trickle shows, and the busiest still fills it.
        _ = model.handle(.character("a"))
        #expect(model.scale == .log)
        screen = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 20))
        #expect(screen[0].contains("bars: one log scale, top 2.80 MiB/s"), "\(screen[0])")
        fast = bars(screen, "fast")
        slow = bars(screen, "slow")
        #expect(fast.tx.hasSuffix("████"), "\(fast)")
        // log(1 + 24576) / log(1 + 2936013) = 0.68: six eighths; 240 KiB/s, seven.
        #expect(slow.rx.hasSuffix("▆▆▆▆") && slow.tx.hasSuffix("▇▇▇▇") && fast.rx.hasSuffix("▇▇▇▇"), "\(slow) \(fast)")
        _ = model.handle(.character("a"))
        #expect(model.scale == .shared)
    }

    @Test func anIdleRowCarriesNoMark() {
        let model = steadyModel([("lo", 0, 0), ("va1", 100, 100)], steps: 3)
        let screen = visibleText(LiveRenderer(color: false).render(model, width: 100, height: 12))
        let lo = screen.first { $0.contains("lo ") && $0.contains("virtual") } ?? ""
        #expect(lo.contains("0 B/s") && lo.contains("0 B"), "\(lo)")
        #expect(!screen.joined().contains("≈"), "exact figures carry no mark")
        #expect(screen.last!.contains("estimates from interface counters"), "the caveat stays")
        #expect(!screen.last!.contains("≥") && !screen.last!.contains("~"), "no legend for marks not shown: \(screen.last!)")
    }

    @Test func onlyTheMarksShownAreExplained() {
        let screen = visibleText(LiveRenderer(color: false).render(scenario(), width: 120, height: 30))
        let wwan = screen.first { $0.contains("wwan0") } ?? ""
        let enp = screen.first { $0.contains("enp3s0") } ?? ""
        #expect(wwan.contains("~"), "wrap-corrected: \(wwan)")
        #expect(enp.contains("≥"), "lower bound: \(enp)")
        let wlp = screen.first { $0.contains("wlp2s0") } ?? ""
        #expect(!wlp.contains("≈") && !wlp.contains("~") && !wlp.contains("≥"), "exact: no mark: \(wlp)")
        #expect(screen.last!.contains("≥ lower bound") && screen.last!.contains("~ wrap-corrected"), "\(screen.last!)")
        // Hide the cellular (wrapped) and ethernet (lower bound) rows: their legends go.
        var model = scenario()
        _ = model.handle(.character("2"))
        _ = model.handle(.character("4"))
        _ = model.handle(.character("3"))
        let fewer = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 30))
        #expect(!fewer.last!.contains("~") && !fewer.last!.contains("≥"), "\(fewer.last!)")
        // The route line's outside figures are estimates by difference: ≈ is explained when shown.
        #expect(!fewer.last!.contains("≈"))
        model.route = RouteSummary(probe: "192.0.2.1", interface: "tun0", viaTunnel: true, outsideRx: 100, outsideTx: 50)
        var routed = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 30))
        #expect(routed.contains { $0.contains("outside ≈↓100 B/s") } && routed.last!.contains("≈ outside: estimated"), "\(routed.last!)")
        model.route?.uncertain = true
        routed = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 30))
        #expect(routed.last!.contains("? outside: uncertain") && !routed.last!.contains("≈"), "\(routed.last!)")
    }
}

@Suite struct LiveDetailTests {
    @Test func detailShowsAddressesCountersAndAxes() {
        var model = steadyModel([("va1", 2048, 1_048_576)], steps: 10, extras: true)
        _ = model.handle(.enter)
        let key = SeriesKey(name: "va1")
        var screen = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 40)).joined(separator: "\n")
        #expect(screen.contains("addresses: reading…"), "before the driver read them")
        #expect(screen.contains("MTU 9000") && screen.contains(" · up"))
        model.addresses = LiveAddresses(key: key, time: model.now, mac: "02:00:00:00:77:01", ipv4: ["10.77.0.1/30"], ipv6: ["fd00::1/64"])
        screen = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 40)).joined(separator: "\n")
        #expect(screen.contains("MAC 02:00:00:00:77:01 · IPv4 10.77.0.1/30 · IPv6 fd00::1/64"))
        // 10 and 20 packets a second; 3 rx errors and 7 tx drops a second, 9 intervals.
        #expect(screen.contains("packets ↓10/s ↑20/s"), "\(screen)")
        #expect(screen.contains("errors ↓27 ↑0 (now 3.0/s)") && screen.contains("drops ↓0 ↑63 (now 7.0/s)"), "\(screen)")
        // Rate axes: a round top over the peak with its unit; a time axis.
        #expect(screen.contains("axis KiB/s") && screen.contains("axis MiB/s"))
        let lines = screen.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("     2 ┤") } && lines.contains { $0.hasPrefix("     1 ┤") }, "rx 2 KiB/s: top 2, middle 1")
        #expect(lines.contains { $0.hasPrefix("   0.5 ┤") }, "tx 1 MiB/s: top 1, middle 0.5")
        #expect(lines.filter { $0.hasPrefix("     0 ┤") }.count == 2)
        #expect(lines.contains { $0.hasSuffix("now") && $0.contains("-30s") && $0.contains("-1m") }, "a time axis")
        #expect(lines.filter { $0.contains("┤") || $0.contains("│") }.count == 12, "six rows a graph at 40 lines")
        // What PgDn moves by is what the list shows beside the detail.
        let list = lines.firstIndex { $0.hasPrefix("physical") }! - 2 // after the header and titles
        #expect(LiveRenderer(color: false).listRows(model, width: 120, height: 40) == list)
    }

    @Test func theSpanKeySwitchesToCoarserHistories() {
        // 100 B/s for 200 s, then 300 B/s for 200 s, one sample a second.
        var engine = DeltaEngine()
        var model = LiveModel(host: "h", source: "netlink", interval: 1)
        let t0 = 1_795_000_000.0 // a multiple of 40 and of 900
        var bytes: UInt64 = 0
        for step in 0...400 {
            if step > 0 { bytes += step <= 200 ? 100 : 300 }
            let s = InterfaceSample(name: "va1", index: 1, counters: Counters(rxBytes: bytes, txBytes: 0, rxPackets: 0, txPackets: 0))
            model.feed(engine.apply(Sample(time: Double(step), interfaces: [s])), from: &engine, time: t0 + Double(step))
        }
        let row = model.row("va1")!
        #expect(row.history(.recent, tx: false, last: 500).count == LiveModel.historyLength)
        let hour = row.history(.hour, tx: false, last: 500)
        #expect(hour.count == 11, "400 s in 40 s buckets, the last being filled: \(hour)")
        #expect(hour.first == 100 && hour[6] == 300 && hour.last == 300, "\(hour)")
        #expect(row.history(.day, tx: false, last: 500) == [200], "one 15 min bucket so far, the average")
        #expect(model.span == .recent)
        _ = model.handle(.enter)
        _ = model.handle(.character("t"))
        #expect(model.span == .hour)
        var screen = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 40)).joined(separator: "\n")
        #expect(screen.contains("last hour in 40 s steps"), "\(screen)")
        #expect(screen.contains("-15m") && screen.contains("-45m"))
        _ = model.handle(.character("\t"))
        #expect(model.span == .day)
        screen = visibleText(LiveRenderer(color: false).render(model, width: 120, height: 40)).joined(separator: "\n")
        #expect(screen.contains("last day in 15 m 0 s steps") || screen.contains("last day in 15 m steps"), "\(screen)")
        #expect(screen.contains("-6h") && screen.contains("-12h"))
        _ = model.handle(.character("t"))
        #expect(model.span == .recent)
    }

    @Test func bucketsWithNoSampleStayUnknown() {
        var history = BucketHistory(bucketSeconds: 10, capacity: 5)
        history.add(rx: 50, tx: 5, seconds: 1, at: 1000)
        history.add(rx: 70, tx: 5, seconds: 1, at: 1005)
        history.add(rx: 10, tx: 1, seconds: 1, at: 1031) // 1010 and 1020 saw nothing
        let rx = history.suffix(10, tx: false)
        #expect(rx.count == 4 && rx[0] == 60 && rx[1].isNaN && rx[2].isNaN && rx[3] == 10, "\(rx)")
        for t in stride(from: 1041.0, to: 1200, by: 10) { history.add(rx: 1, tx: 1, seconds: 1, at: t) }
        #expect(history.suffix(100, tx: true).count == 6, "bounded: the ring and the bucket being filled")
    }
}

@Suite struct LivePagingTests {
    @Test func pagesHomeAndEndThroughLongLists() {
        let names = (1...300).map { (name: "v\($0)", rx: UInt64(0), tx: UInt64(0)) }
        var model = steadyModel(names, steps: 2)
        _ = model.handle(.character("s"))
        _ = model.handle(.character("s")) // by name
        let renderer = LiveRenderer(color: false)
        model.pageSize = renderer.listRows(model, width: 100, height: 30)
        #expect(model.pageSize == 30 - 2 - 1 - 2, "header, titles, summary and footer aside")
        _ = model.handle(.home)
        #expect(model.selected?.name == "v1")
        _ = model.handle(.pageDown)
        #expect(model.selected?.name == "v26")
        var screen = visibleText(renderer.render(model, width: 100, height: 30))
        #expect(screen[2].hasPrefix("› v26 ") && screen[2 + 24].hasPrefix("  v50 "), "a page further, the selection keeps its place")
        _ = model.handle(.end)
        #expect(model.selected?.name == "v300")
        screen = visibleText(renderer.render(model, width: 100, height: 30))
        #expect(screen[2 + 24].hasPrefix("› v300 "), "the last row at the bottom")
        _ = model.handle(.pageUp)
        #expect(model.selected?.name == "v275")
        _ = model.handle(.character("g"))
        #expect(model.selected?.name == "v1")
        _ = model.handle(.character("G"))
        #expect(model.selected?.name == "v300")
    }

    @Test func theHelpListsTheNewKeys() {
        var model = scenario()
        _ = model.handle(.character("?"))
        let help = visibleText(LiveRenderer(color: false).render(model, width: 100, height: 30)).joined(separator: "\n")
        for text in ["PgUp PgDn", "Home End", "t, Tab", "last hour", "each row its own", "addresses"] {
            #expect(help.contains(text), "the help says \(text)")
        }
    }
}

@Suite struct PacketsModeTests {
    /// In packets mode "by rate" sorts by what the columns show: a chatty
    /// link of small packets goes above a bulk one of big packets.
    @Test func packetsModeSortsByPacketRate() {
        var engine = DeltaEngine()
        var model = LiveModel(host: "h", source: "netlink", interval: 1)
        for step in 0..<3 {
            let n = UInt64(step)
            let kind = Classification(kind: .virtual, evidence: "link-kind:veth")
            let interfaces = [
                InterfaceSample(
                    name: "bulk", index: 1, classification: kind,
                    counters: Counters(rxBytes: 1_000_000 * n, txBytes: 0, rxPackets: 700 * n, txPackets: 0)),
                InterfaceSample(
                    name: "chatty", index: 2, classification: kind,
                    counters: Counters(rxBytes: 100_000 * n, txBytes: 0, rxPackets: 1_500 * n, txPackets: 0)),
            ]
            model.feed(engine.apply(Sample(time: Double(step), interfaces: interfaces)), from: &engine, time: 1_795_000_000 + Double(step))
        }
        #expect(model.visible.map(\.name) == ["bulk", "chatty"], "by byte rate")
        _ = model.handle(.character("b"))
        _ = model.handle(.character("b"))
        #expect(model.packets)
        #expect(model.visible.map(\.name) == ["chatty", "bulk"], "by packet rate")
        let screen = visibleText(LiveRenderer(color: false).render(model, width: 100, height: 12))
        let chatty = screen.first { $0.dropFirst(2).hasPrefix("chatty ") } ?? ""
        #expect(chatty.contains("1.50k") && chatty.contains("0.0"), "\(chatty)")
    }
}
