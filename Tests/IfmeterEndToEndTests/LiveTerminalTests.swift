import Foundation
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ifmeter live` in a real terminal: tmux, inside the test's namespace.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct LiveTerminalTests {
    /// A tmux server of the test's own (its own socket), with one shell.
    final class Tmux {
        let socket = "ifmt-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        init(width: Int, height: Int) throws {
            try runDetached([
                "tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "live", "-x", "\(width)", "-y", "\(height)",
                "env PS1='$ ' TERM=xterm-256color bash --norc --noprofile",
            ])
        }
        deinit { try? runDetached(["tmux", "-L", socket, "kill-server"]) }
        func keys(_ keys: String...) throws { try run(["tmux", "-L", socket, "send-keys", "-t", "live"] + keys) }
        func screen() throws -> String { try run(["tmux", "-L", socket, "capture-pane", "-p", "-t", "live"]).out }
        func waitFor(_ text: String, timeout: Double = 60) throws -> String {
            try IfmeterTestSupport.waitFor("'\(text)' on the screen", timeout: timeout) {
                let s = try screen()
                return s.contains(text) ? s : nil
            }
        }
        /// Runs `stty -a` in the shell and returns its output. The marker
        /// it waits for is computed by the shell, so the typed command line
        /// (which shows at once) cannot match it.
        func stty() throws -> String {
            try keys("clear; stty -a | tr ' ;' '\\n\\n' | grep -E '^-?(icanon|echo)$' | tr '\\n' ' '; echo STTY-$((40+2))", "Enter")
            return try waitFor("STTY-42")
        }
    }

    @Test func keysScreenAndRestoredTerminal() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let tmux = try Tmux(width: 100, height: 30)
        let binary = try ifmeterBinary()
        try tmux.keys("ip netns exec \(pair.a.name) \(binary) live --interval 300ms; echo EXITED $?", "Enter")
        _ = try tmux.waitFor("ifmeter ·")
        try pair.sendUDP(count: 2000, payload: 1200)
        var screen = try waitFor("traffic on the screen") {
            let s = try tmux.screen()
            return s.contains("MiB/s") || s.contains("KiB/s") ? s : nil
        }
        #expect(screen.contains("vA") && screen.contains("virtual") && screen.contains("loopback"))
        #expect(screen.contains("estimates from interface counters") && !screen.contains("≈"), "exact figures carry no mark")
        // Sorted by rate, the busy veth is on top, and the selection with
        // it: until a key moves it, the selection is the top row (not lo,
        // first by name before any traffic, which would end at the bottom).
        let rows = screen.split(separator: "\n").map(String.init)
        let top = rows.firstIndex { $0.contains("NAME") }.map { rows[$0 + 1] } ?? ""
        #expect(top.contains("vA") && top.contains("MiB/s"), "the busiest interface is on top: \(screen)")
        #expect(top.hasPrefix("› vA"), "\(screen)")
        try tmux.keys("k")
        screen = try tmux.waitFor("› vA")
        try tmux.keys("Enter")
        screen = try tmux.waitFor("events:")
        #expect(screen.contains("link-kind:veth") && screen.contains("rx  now"))
        // To lo, up or down: the rows sort by rate, so where lo is depends on
        // whether the burst's rate is still shown. Once vA's rates read 0
        // the order no longer moves; then the key is chosen from it.
        let settled = try waitFor("vA's rates to fall to nothing") { () throws -> [String]? in
            let rows = try tmux.screen().split(separator: "\n").map(String.init)
            let quiet = rows.contains { $0.range(of: #"vA\s+virtual\s+0 B/s\s+0 B/s"#, options: .regularExpression) != nil }
            return quiet ? rows : nil
        }
        let loRow = settled.firstIndex { $0.range(of: #"^.\s?lo\s"#, options: .regularExpression) != nil } ?? 0
        let vARow = settled.firstIndex { $0.range(of: #"^.\s?vA\s"#, options: .regularExpression) != nil } ?? 0
        try tmux.keys(loRow > vARow ? "j" : "k")
        _ = try tmux.waitFor("arphrd:loopback(772)")
        try tmux.keys("s")
        _ = try tmux.waitFor("by total")
        // b: bytes, bits, packets, and back.
        try tmux.keys("b")
        _ = try tmux.waitFor("· bits")
        try tmux.keys("b")
        screen = try tmux.waitFor("RX pkt/s")
        let vA = screen.split(separator: "\n").first { $0.dropFirst(2).hasPrefix("vA ") }.map(String.init) ?? ""
        #expect(screen.contains("· packets") && !vA.isEmpty && !vA.contains("B/s"), "packets per second in the list: \(vA)")
        try tmux.keys("b")
        _ = try tmux.waitFor("RX/s")
        try tmux.keys("q")
        screen = try tmux.waitFor("EXITED 0")
        #expect(!screen.contains("ifmeter ·"), "the alternate screen is gone")
        let modes = try tmux.stty()
        #expect(modes.contains("icanon") && !modes.contains("-icanon") && !modes.contains("-echo"), "terminal restored: \(modes)")

        // SIGTERM restores it too.
        try tmux.keys("clear; ip netns exec \(pair.a.name) \(binary) live --interval 301ms; echo EXITED $?", "Enter")
        _ = try tmux.waitFor("ifmeter ·")
        let pid = try run(["pgrep", "-f", "live --interval 301ms"]).out.split(separator: "\n").first.map(String.init) ?? ""
        try run(["kill", "-TERM", pid])
        _ = try tmux.waitFor("EXITED 0")
        let after = try tmux.stty()
        #expect(after.contains("icanon") && !after.contains("-icanon") && !after.contains("-echo"), "restored after SIGTERM: \(after)")
    }

    @Test func bareIfmeterResizeAndACrashSignal() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let tmux = try Tmux(width: 100, height: 30)
        // No command on a terminal: the live view.
        try tmux.keys("ip netns exec \(ns.name) \(try ifmeterBinary()); echo EXITED $?", "Enter")
        _ = try tmux.waitFor("ifmeter · ")
        try run(["tmux", "-L", tmux.socket, "resize-window", "-t", "live", "-x", "50", "-y", "20"])
        let narrow = try waitFor("the narrow layout") {
            let s = try tmux.screen()
            return s.contains("ifmeter netlink") ? s : nil
        }
        #expect(narrow.split(separator: "\n").allSatisfy { $0.count <= 50 })
        // A crash signal: the terminal is restored, then the signal kills it.
        let pid = try run(["pgrep", "-f", "\(try ifmeterBinary())$"]).out.split(separator: "\n").first.map(String.init) ?? ""
        try run(["kill", "-SEGV", pid])
        _ = try tmux.waitFor("EXITED 139")
        let modes = try tmux.stty()
        #expect(modes.contains("icanon") && !modes.contains("-icanon") && !modes.contains("-echo"), "restored after SIGSEGV: \(modes)")
    }

    @Test func aVanishedTerminalEndsTheView() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let tmux = try Tmux(width: 80, height: 24)
        try tmux.keys("ip netns exec \(ns.name) \(try ifmeterBinary()) live --interval 302ms", "Enter")
        _ = try tmux.waitFor("ifmeter ·")
        try runDetached(["tmux", "-L", tmux.socket, "kill-server"])
        _ = try waitFor("ifmeter live to exit after its terminal went away") {
            try run(["pgrep", "-f", "live --interval 302ms"], allowFailure: true).status != 0 ? true : nil
        }
    }

    @Test func narrowAndNoColour() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let tmux = try Tmux(width: 40, height: 15)
        try tmux.keys("NO_COLOR=1 ip netns exec \(ns.name) \(try ifmeterBinary()) live; echo EXITED $?", "Enter")
        let screen = try tmux.waitFor("not per-app")
        for line in screen.split(separator: "\n", omittingEmptySubsequences: false).prefix(14) {
            #expect(line.count <= 40)
        }
        #expect(screen.contains("› lo"))
        try tmux.keys("C-c")
        _ = try tmux.waitFor("EXITED 0")
    }

    /// rx and tx bars apart, the detail pane (addresses, packets, errors,
    /// drops, both axes) and an idle row without marks, at 120x40.
    @Test func barsApartAndTheDetailPane() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        try pair.a.exec(["sysctl", "-qw", "net.ipv6.conf.\(pair.nameA).disable_ipv6=0"])
        try pair.a.ip("addr", "add", "fd00:77::1/64", "dev", pair.nameA, "nodad")
        let tmux = try Tmux(width: 120, height: 40)
        try tmux.keys("ip netns exec \(pair.a.name) \(try ifmeterBinary()) live --interval 300ms; echo EXITED $?", "Enter")
        _ = try tmux.waitFor("RECENT TX")
        // Out of vA only (B's socket takes them, so nothing comes back),
        // paced over about four sampling intervals each time (a burst per
        // look fell into one sample, or none, when the machine was busy):
        // every sample in between has traffic, so bars stand side by side.
        let busy = try waitFor("vA's tx bars") {
            try sendUDP(from: pair.a, to: pair.ipB, in: pair.b, port: 9999, count: 400, payload: 1200, pace: 3000)
            let s = try tmux.screen()
            let row = s.split(separator: "\n").first { $0.dropFirst(2).hasPrefix("vA ") }.map(String.init) ?? ""
            return row.contains("█") && row.filter({ "▄▅▆▇█".contains($0) }).count >= 3 ? s : nil
        }
        let rows = busy.split(separator: "\n").map(String.init)
        let vA = rows.first { $0.dropFirst(2).hasPrefix("vA ") } ?? ""
        let titles = rows.first { $0.contains("RECENT RX") } ?? ""
        let rxColumn = titles.range(of: "RECENT RX")!.lowerBound.utf16Offset(in: titles)
        let txColumn = titles.range(of: "RECENT TX")!.lowerBound.utf16Offset(in: titles)
        let cells = Array(vA)
        let rxBars = String(cells[rxColumn..<txColumn]), txBars = String(cells[txColumn..<min(cells.count, txColumn + (txColumn - rxColumn))])
        #expect(txBars.contains("█") && !rxBars.contains("█"), "tx drawn apart from rx: rx '\(rxBars)' tx '\(txBars)'")
        #expect(busy.contains("bars: one scale, top"), "the scale is said")
        let lo = rows.first { $0.dropFirst(2).hasPrefix("lo ") } ?? ""
        #expect(lo.contains(" 0 B/s") && !lo.contains("≈") && !lo.contains("~") && !lo.contains("≥"), "an idle row without marks: \(lo)")
        // The detail of vA.
        // Up a row at a time until vA is chosen (with a deadline: a list
        // that never shows it fails here, not at the test's time limit).
        /// The row the cursor is on: the name after "› ".
        func chosen(_ screen: String) -> String? {
            screen.split(separator: "\n").lazy.compactMap { row in row.range(of: "› ").map { String(row[$0.upperBound...].prefix { $0 != " " }) } }
                .first
        }
        _ = try waitFor("vA chosen with k") { () throws -> Bool? in
            let screen = try tmux.screen()
            if screen.contains("› vA") { return true }
            let before = chosen(screen)
            try tmux.keys("k")
            // The key's redraw before the next look, or it could skip past
            // vA: the cursor leaves its row (vA is above it).
            _ = try waitFor("the cursor to move up from \(before ?? "no row")") { chosen(try tmux.screen()) != before ? true : nil }
            return nil
        }
        try tmux.keys("Enter")
        let detail = try tmux.waitFor("MAC \(pair.macA)")
        #expect(detail.contains("IPv4 \(pair.ipA)/30") && detail.contains("fd00:77::1/64"), "addresses: \(detail)")
        #expect(detail.contains("MTU 1500") && detail.contains(" · up"))
        #expect(detail.contains("packets ↓") && detail.contains("errors ↓0 ↑0") && detail.contains("drops ↓"), "\(detail)")
        #expect(detail.contains("axis MiB/s") || detail.contains("axis KiB/s"), "a labelled rate axis")
        let axis = detail.split(separator: "\n").first { $0.hasSuffix("now") } ?? ""
        #expect(axis.contains("-30s"), "a time axis: \(detail)")
        try tmux.keys("t")
        _ = try tmux.waitFor("last hour in 40 s steps")
        _ = try tmux.waitFor("-45m")
        try tmux.keys("q")
        _ = try tmux.waitFor("EXITED 0")
    }

    /// 300 interfaces (150 veth pairs): natural order, PgDn, End, Home.
    @Test func pagingThroughThreeHundredInterfaces() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let batch = (1...150).map { "link add p\($0) type veth peer name q\($0)" }.joined(separator: "\n") + "\n"
        _ = try run(["ip", "-n", ns.name, "-batch", "-"], input: batch)
        let tmux = try Tmux(width: 100, height: 30)
        try tmux.keys("ip netns exec \(ns.name) \(try ifmeterBinary()) live --interval 500ms; echo EXITED $?", "Enter")
        _ = try tmux.waitFor("p10 ")
        try tmux.keys("s", "s")
        _ = try tmux.waitFor("by name")
        try tmux.keys("Home")
        var screen = try tmux.waitFor("› lo")
        func names(_ screen: String) -> [String] {
            screen.split(separator: "\n").map(String.init).filter { $0.hasPrefix("  ") || $0.hasPrefix("› ") }
                .compactMap { $0.dropFirst(2).split(separator: " ").first.map(String.init) }.filter { $0 != "NAME" }
        }
        let firstPage = names(screen)
        #expect(Array(firstPage.prefix(4)) == ["lo", "p1", "p2", "p3"], "natural order: \(firstPage)")
        #expect(firstPage.contains("p10") && firstPage.firstIndex(of: "p9")! < firstPage.firstIndex(of: "p10")!)
        try tmux.keys("PgDn")
        // A page further: the row after the last one shown, selected at the top.
        let next = "p\(firstPage.count)"
        screen = try tmux.waitFor("› \(next) ")
        #expect(names(screen).first == next, "\(screen)")
        try tmux.keys("End")
        screen = try tmux.waitFor("› q150 ")
        #expect(names(screen).last == "q150" && names(screen).count == firstPage.count)
        try tmux.keys("PgUp")
        screen = try tmux.waitFor("› q\(150 - firstPage.count) ")
        try tmux.keys("Home")
        screen = try tmux.waitFor("› lo ")
        // capture-pane can catch a frame half drawn: the whole first page
        // comes back within a moment.
        let back = try? waitFor("the first page again") { names(try tmux.screen()) == firstPage ? true : nil }
        let shown = (try? tmux.screen()).map(names) ?? []
        #expect(back == true, "\(shown)")
        try tmux.keys("q")
        _ = try tmux.waitFor("EXITED 0")
    }

    @Test func plainLinesWhenNotATerminal() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let process = try Background(["ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "live", "--interval", "200ms"], name: "live-plain")
        // Lines of vA before the traffic and after it, then the stop.
        let vALines = { process.log.split(separator: "\n").filter { $0.contains(" vA virtual rx ") }.count }
        let before = try waitFor("a line of vA") { vALines() > 0 ? vALines() : nil }
        try pair.sendUDP(count: 10, payload: 100)
        _ = try waitFor("a line of vA after the traffic") { vALines() > before ? true : nil }
        #expect(process.stop() == 0)
        let lines = process.log.split(separator: "\n")
        #expect(lines.first?.hasPrefix("# ifmeter live") == true)
        #expect(lines.contains { $0.contains(" vA virtual rx ") && $0.contains(" total rx ") })
        #expect(!process.log.contains("\u{1B}"), "no escape codes in plain lines")
        // Bare `ifmeter` with no terminal prints its help instead.
        let bare = try ifmeter([])
        #expect(bare.status == 0 && bare.out.contains("USAGE: ifmeter"))
    }
}
