import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Each signal a process can be sent, to serve, export and both live
/// modes, with a state file: it ends with the state saved (the file says
/// the writer stopped cleanly) and the terminal restored, or it is
/// handled and the command goes on. And closed standard descriptors.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct SignalScenarios {
    enum Mode: String, CaseIterable, Sendable { case serve, export, livePlain, liveTerminal }

    /// What a signal must do to a mode: stop it cleanly, or leave it running.
    static func stops(_ signal: Int32, _ mode: Mode) -> Bool {
        switch signal {
        case SIGPIPE: false
        case SIGUSR1: mode == .livePlain || mode == .liveTerminal // serve and export reopen their files
        default: true
        }
    }

    static let signals: [(String, Int32)] = [
        ("QUIT", SIGQUIT), ("USR1", SIGUSR1), ("USR2", SIGUSR2), ("ALRM", SIGALRM), ("PIPE", SIGPIPE), ("TERM", SIGTERM),
    ]

    func writer(_ state: String) throws -> String? {
        let result = try ifmeter(["usage", "--state", state, "--format", "json"])
        return try JSONParser.parse(result.out)["state"]?["writer"]?.stringValue
    }

    /// The time of the state file's last save (meta 'saved'), read only.
    func lastSave(_ state: String) throws -> Double? {
        let result = try run(["sqlite3", "-readonly", state, "SELECT value FROM meta WHERE key = 'saved'"], allowFailure: true)
        return Double(result.out.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Waits for a save later than the last one now (saves come every
    /// 200 ms here): the writer went on after what came before this call.
    func waitForAnotherSave(_ state: String, _ what: String) throws {
        let last = try lastSave(state) ?? 0
        _ = try waitFor(what) { try (lastSave(state) ?? 0) > last ? true : nil }
    }

    /// Finding 6 of the hardening issue: SIGQUIT left the interactive live
    /// view in the alternate screen with the cursor hidden (exit 131), and
    /// SIGUSR1, SIGUSR2 and SIGALRM killed serve and export with no save.
    @Test(arguments: Mode.allCases)
    func everySignalEndsCleanlyOrIsHandled(mode: Mode) throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        for (name, signal) in Self.signals {
            let dir = try ScenarioFolder("signal-\(mode.rawValue)-\(name)")
            let state = dir["state.db"]
            let common = ["--state", state, "--save-every", "200ms"]
            switch mode {
            case .liveTerminal:
                let tmux = try LiveTerminalTests.Tmux(width: 100, height: 30)
                try tmux.keys(
                    "ip netns exec \(ns.name) \(try ifmeterBinary()) live --interval 200ms \(common.joined(separator: " ")); echo EXITED $?", "Enter")
                _ = try tmux.waitFor("ifmeter ·")
                let pid = try waitFor("the live view's pid") { () -> Int32? in
                    let out = try run(["pgrep", "-f", "live --interval 200ms --state \(state)"], allowFailure: true).out
                    return out.split(separator: "\n").compactMap { Int32($0) }.max()
                }
                kill(pid, signal)
                if Self.stops(signal, mode) {
                    let screen = try tmux.waitFor("EXITED 0")
                    #expect(!screen.contains("ifmeter ·"), "\(name): the alternate screen is gone: \(screen)")
                    let modes = try tmux.stty()
                    #expect(modes.contains("icanon") && modes.contains("echo") && !modes.contains("-icanon"), "\(name): \(modes)")
                    #expect(try writer(state) == "stopped", "\(name): the last save and the clean-stop mark")
                } else {
                    try waitForAnotherSave(state, "a save after \(name)")
                    #expect(try run(["pgrep", "-f", state], allowFailure: true).status == 0, "\(name) is handled: live goes on")
                    try tmux.keys("q")
                    _ = try tmux.waitFor("EXITED 0")
                }
            default:
                let process: Background
                switch mode {
                case .serve: process = try startServe(in: ns, common)
                case .export:
                    process = try Scenario.start(ns, "export", common + ["--interval", "200ms", "--every", "300ms", "--json-lines", dir["r.jsonl"]])
                default: process = try Scenario.start(ns, "live", common + ["--interval", "200ms"])
                }
                _ = try waitFor("the first save") { try writer(state) == "running" ? true : nil }
                process.process.signal(signal)
                if Self.stops(signal, mode) {
                    #expect(process.process.wait(timeout: 60), "\(mode) \(name): stopped")
                    #expect(
                        process.process.terminationReason == .exit && process.process.terminationStatus == 0,
                        "\(mode) \(name): exit \(process.process.terminationStatus)\n\(process.log)")
                    #expect(try writer(state) == "stopped", "\(mode) \(name): saved and marked stopped")
                } else {
                    try waitForAnotherSave(state, "a save after \(name)")
                    #expect(process.process.isRunning, "\(mode) \(name) is handled: it goes on\n\(process.log)")
                    if mode == .export, signal == SIGUSR1 {
                        // Reopened as on SIGHUP: a file moved away is made anew.
                        try FileManager.default.moveItem(atPath: dir["r.jsonl"], toPath: dir["r.jsonl.1"])
                        process.process.signal(SIGUSR1)
                        _ = try waitFor("a new r.jsonl") { FileManager.default.fileExists(atPath: dir["r.jsonl"]) ? true : nil }
                    }
                    #expect(process.stop() == 0)
                }
            }
        }
    }

    /// `saved_at` of a state file, as `usage` says it.
    func savedAt(_ state: String) throws -> String? {
        let result = try ifmeter(["usage", "--state", state, "--format", "json"])
        return try JSONParser.parse(result.out)["state"]?["saved_at"]?.stringValue
    }

    /// Issue 23: saves come every 5 minutes by default, so SIGHUP is how a
    /// user (or a script before a planned power-off) makes one now. serve
    /// and export save on SIGHUP and go on: traffic received before the
    /// signal is in the file, exact, even after a kill -9 right after it.
    /// (export writes a report every 200 ms, where the test sees what it
    /// counted; it saves no more for that.)
    @Test(arguments: ["serve", "export"])
    func sighupSavesNowAndGoesOn(command: String) throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try ScenarioFolder("sighup-\(command)")
        let state = dir["state.db"]
        // The default pace: no save of its own comes during the test.
        let common = ["--state", state, "--boot-id-file", try dir.bootFile()]
        let process =
            command == "serve"
            ? try startServe(in: ns, common)
            : try Scenario.start(ns, "export", common + ["--interval", "200ms", "--every", "200ms", "--json", dir["r.json"]])
        _ = try waitFor("the first save") { try writer(state) == "running" ? true : nil }
        let tun = try KillAndRestartScenarios.Tun(ns, "tunH")
        try KillAndRestartScenarios().waitForSeen(command, ns, dir, process, "tunH")
        tun.receive(25)
        // Sampled: the save SIGHUP asks for has it.
        if command == "serve" {
            _ = try waitFor("serve to count tunH's \(tun.received) bytes") {
                let rx = Scenario.metric(try Scenario.scrape(ns), "ifmeter_receive_bytes_total")
                return rx.contains { $0.key.contains(#"interface="tunH""#) && $0.value >= Double(tun.received) } ? true : nil
            }
        } else {
            try ExportReport.waitForTotal(dir["r.json"], "tunH", "rx_bytes", atLeast: tun.received)
        }
        let before = try Scenario.usage(state)
        #expect((before["tunH"]?.rx ?? 0) == 0, "nothing saved yet at the 5-minute pace: \(before)")
        // The second of saved_at moves only when a later second saves:
        // the clock is let pass the first save's second.
        let saved = try #require(try lastSave(state))
        _ = try waitFor("a second later than the first save") { Date().timeIntervalSince1970 >= saved.rounded(.down) + 1 ? true : nil }
        let first = try savedAt(state)
        process.process.signal(SIGHUP)
        let after = try waitFor("the save SIGHUP asks for") { () -> [String: UsageFigures]? in
            let usage = try Scenario.usage(state)
            return usage["tunH"]?.rx == tun.received ? usage : nil
        }
        #expect(after["tunH"]?.quality == "exact", "\(after)")
        #expect(try savedAt(state) != first, "saved_at moved")
        #expect(process.process.isRunning, "\(command) goes on after SIGHUP\n\(process.log)")
        process.process.signal(SIGKILL)
        process.process.waitUntilExit()
        let killed = try Scenario.usage(state)
        #expect(killed["tunH"]?.rx == tun.received && killed["tunH"]?.quality == "exact", "after kill -9: \(killed)")
    }

    /// Finding 6: started with `2>&-`, the JSON Lines file took descriptor 2
    /// and a log line landed in it; with `>&-`, `--json -` reports went into
    /// the JSON Lines file. Closed standard descriptors are /dev/null now.
    @Test func closedStandardDescriptorsTakeNoFile() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try ScenarioFolder("closed-fds")
        for (redirect, extra) in [("2>&-", ["--include", "no-such-name"]), (">&-", ["--json", "-"])] {
            let file = dir["r-\(redirect.count)-\(UUID().uuidString.prefix(4)).jsonl"]
            let command = ([try ifmeterBinary(), "export", "--interval", "100ms", "--every", "200ms", "--json-lines", file] + extra)
                .map { "'\($0)'" }.joined(separator: " ")
            let exporter = try Background(["ip", "netns", "exec", ns.name, "sh", "-c", "exec \(command) \(redirect)"], name: "closed-fds")
            // Two periods written: the first sample's warning, and a period's
            // report on stdout, came before the second line.
            _ = try waitFor("two periods in \(file)") { () throws -> Bool? in
                try exporter.requireRunning()
                let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
                return text.filter { $0 == "\n" }.count >= 2 ? true : nil
            }
            #expect(exporter.stop() == 0)
            let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
            #expect(!lines.isEmpty)
            for line in lines {
                let report = try? JSONParser.parse(String(line))
                #expect(report?["schema"]?.stringValue == "ifmeter.export", "\(redirect): not a report line: \(line.prefix(200))")
            }
        }
    }
}
