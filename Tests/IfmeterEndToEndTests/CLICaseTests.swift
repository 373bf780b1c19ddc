import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The command-line cases issue 15 lists, each with its message and exit
/// code: a pattern that matches nothing, a typo in an option or a
/// subcommand, and permission errors that say which privilege is missing.
/// (`--listen :PORT`, names and `[v6]:PORT` are in ServeTests; `--netns`
/// without CAP_SYS_ADMIN in NamespaceAndEventTests.)
@Suite(.blocking) struct CLICaseTests {
    @Test func aPatternThatMatchesNothingIsSaid() throws {
        let result = try ifmeter(["list", "--include", "wlan9", "--exclude", "nothing-like-this*"])
        #expect(result.status == 0, "an empty selection is not an error")
        #expect(result.err.contains("Warning: --include 'wlan9' matches no interface; see 'ifmeter list' for their names."), "\(result.err)")
        #expect(result.err.contains("Warning: --exclude 'nothing-like-this*' matches no interface"), "\(result.err)")
        let fine = try ifmeter(["list", "--include", "lo"])
        #expect(fine.status == 0 && !fine.err.contains("Warning"), "\(fine.err)")
        // replay: over every sample of the trace.
        let trace = repositoryRoot.appendingPathComponent("Fixtures/traces/recreation.jsonl").path
        let replay = try ifmeter(["replay", trace, "--format", "text", "--include", "wg0,wlan9"])
        #expect(replay.status == 0 && replay.out.contains("wg0"))
        #expect(replay.err == "Warning: --include 'wlan9' matches no interface in the trace.\n", "\(replay.err)")
    }

    @Test func typosGetADidYouMean() throws {
        for (arguments, message) in [
            (["serv"], "Error: unknown subcommand 'serv' (did you mean 'serve'?). See 'ifmeter --help'."),
            (["sampel"], "Error: unknown subcommand 'sampel' (did you mean 'sample'?). See 'ifmeter --help'."),
            (["sample", "--coutn", "2"], "Error: unknown option '--coutn' (did you mean '--count'?). See 'ifmeter sample --help'."),
            (["serve", "--listn", ":1"], "Error: unknown option '--listn' (did you mean '--listen'?). See 'ifmeter serve --help'."),
            (["list", "--incl", "x"], "Error: unknown option '--incl' (did you mean '--include'?). See 'ifmeter list --help'."),
            (["list", "--frobnicate"], "Error: unknown option '--frobnicate'. See 'ifmeter list --help'."),
            (["xyzzy"], "Error: unknown subcommand 'xyzzy'. See 'ifmeter --help'."),
        ] {
            let result = try ifmeter(arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.err == message + "\n", "\(arguments): \(result.err)")
        }
    }

    /// A folder another user owns: the error says whose it is, its mode,
    /// and who ifmeter runs as; for a folder on the way, which one.
    @Test func permissionErrorsSayWhatIsMissing() throws {
        try Netns.requireRoot()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-perm-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder + "/locked", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        chmod(folder, 0o755)
        chmod(folder + "/locked", 0o700)
        let binary = try ifmeterBinary()
        func asNobody(_ arguments: [String]) throws -> (out: String, err: String, status: Int32) {
            try run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary] + arguments, allowFailure: true)
        }
        let direct = try asNobody(["export", "--json", folder + "/locked/r.json", "--every", "1s"])
        #expect(direct.status == 1)
        #expect(
            direct.err.contains(
                "no permission to write in \(folder)/locked: it is owned by uid 0, gid 0, mode 0700, and ifmeter runs as uid 65534, gid 65534"),
            "\(direct.err)")
        let below = try asNobody(["export", "--json", folder + "/locked/sub/r.json", "--every", "1s"])
        #expect(below.status == 1)
        #expect(below.err.contains("\(folder)/locked, on the way, is owned by uid 0, gid 0, mode 0700"), "\(below.err)")
        // A state file that cannot be read is said to be so (not missing,
        // not damaged): exit 1.
        let state = try asNobody(["usage", "--state", folder + "/locked/state.db"])
        #expect(state.status == 1 && state.err.lowercased().contains("permission"), "\(state.err)")
    }
}

/// `usage` through a link to a state file a killed writer left: the WAL
/// beside the real file is read (found by an independent review: it was
/// looked for beside the link, and the read failed).
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct UsageThroughALinkTests {
    @Test func aLinkToAKilledWritersStateReadsEveryByte() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-link-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder + "/real", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folder + "/link", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // export saves every 300 ms here (the default is 5 minutes): the
        // saves after the traffic are in the WAL when it is killed.
        let live = try Background(
            [
                "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "export", "--state", folder + "/real/state.db", "--json", folder + "/r.json",
                "--interval", "100ms", "--every", "300ms", "--save-every", "300ms",
            ], name: "export-killed")
        func txBytes(_ json: String) throws -> UInt64 {
            guard case .array(let list)? = try JSONParser.parse(json)["interfaces"],
                let vA = list.first(where: { $0["name"]?.stringValue == pair.nameA }),
                case .array(let periods)? = vA["periods"]
            else { return 0 }
            return periods.compactMap { $0["tx_bytes"]?.uint64Value }.reduce(0, +)
        }
        // Its first report: the baseline is taken, the traffic is counted.
        try ExportReport.waitForFirst(folder + "/r.json")
        try pair.sendUDP(count: 200, payload: 1000)
        let sent = 200 * VethPair.frameBytes(payload: 1000)
        // Killed once a save holds the traffic (usage reads a running
        // writer's file read-only, and leaves its WAL alone).
        _ = try waitFor("export to save the \(sent) bytes sent") { () throws -> Bool? in
            let saved = try ifmeter(["usage", "--state", folder + "/real/state.db", "--format", "json"])
            guard saved.status == 0 else { return nil }
            return try txBytes(saved.out) >= sent ? true : nil
        }
        kill(live.process.processIdentifier, SIGKILL)
        _ = live.stop()
        try FileManager.default.createSymbolicLink(atPath: folder + "/link/state.db", withDestinationPath: folder + "/real/state.db")
        let direct = try ifmeter(["usage", "--state", folder + "/real/state.db", "--format", "json"])
        let linked = try ifmeter(["usage", "--state", folder + "/link/state.db", "--format", "json"])
        #expect(direct.status == 0, "\(direct.err)")
        #expect(linked.status == 0, "\(linked.err)")
        #expect(try txBytes(linked.out) == txBytes(direct.out))
        #expect(try txBytes(direct.out) >= sent)
    }
}

/// SIGHUP (an ssh session that closes, a pipe's end under nohup) ends the
/// plain-line live view cleanly, with a last save: it was the default
/// action, exit 129 and no clean-stop mark (found by an independent review).
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct HangupEndsPlainLiveCleanlyTests {
    @Test func sighupSavesAndStops() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-hup-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let live = try Background(
            ["ip", "netns", "exec", ns.name, try ifmeterBinary(), "live", "--state", folder + "/state.db", "--interval", "200ms"], name: "live-hup")
        // A line for lo: live sampled, and took its signals before that.
        _ = try waitFor("live's first line") {
            try live.requireRunning()
            return live.log.contains(" lo ") ? true : nil
        }
        kill(live.process.processIdentifier, SIGHUP)
        _ = live.process.wait(timeout: 60)
        #expect(!live.process.isRunning, "SIGHUP ends it")
        #expect(live.stop() == 0, "a clean stop, not the default action: \(live.log)")
        let running = try run(["sqlite3", folder + "/state.db", "SELECT value FROM meta WHERE key = 'running'"])
        #expect(running.out.trimmingCharacters(in: .whitespacesAndNewlines) != "1", "the clean stop is marked")
    }
}

/// `sample --wide` against what was sent: the packets, their rate, and no
/// errors or drops, all unmarked (exact); the heading is the time of day.
/// The traffic is sent once the first interval's row shows that sampling
/// has begun, and read from the rows after it: one, or two when a sample
/// fell while it went out.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct SampleWideTests {
    @Test func widePacketsErrorsAndDropsMatchWhatWasSent() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let sample = try Background(
            [
                "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "sample", "--watch", "--interval", "1500ms", "--wide",
                "--include", pair.nameA,
            ], name: "sample-wide")
        // Fields: name, kind, rx rate, tx rate, rx, tx (a number and a unit
        // each: 2-9), rx and tx packets (10, 11), packets per second (12,
        // 13), errors (14, 15), drops (16, 17), totals.
        func rows() -> [[String]] {
            sample.log.split(separator: "\n").filter { $0.hasPrefix(pair.nameA + " ") }.map { $0.split(separator: " ").map(String.init) }
        }
        _ = try waitFor("sample's first interval") {
            try sample.requireRunning()
            return rows().isEmpty ? nil : true
        }
        try pair.sendUDP(count: 25, payload: 300)
        let later = try waitFor("the 25 datagrams in sample's rows") { () throws -> [[String]]? in
            try sample.requireRunning()
            let later = Array(rows().dropFirst())
            return later.reduce(0) { $0 + (UInt64($1.count >= 22 ? $1[11] : "") ?? 0) } >= 25 ? later : nil
        }
        #expect(sample.stop() == 0, "\(sample.log)")
        let lines = sample.log.split(separator: "\n").map(String.init)
        let header = try #require(lines.first { $0.hasPrefix("INTERFACE") }).split(separator: " ").map(String.init)
        #expect(header.contains("PKT/S") && header.contains("ERR") && header.contains("DROP"), "\(lines)")
        #expect(later.allSatisfy { $0.count >= 22 }, "\(later)")
        // Each a plain number: a mark would make it fail to parse.
        #expect(later.compactMap { UInt64($0[11]) }.reduce(0, +) == 25, "the 25 datagrams sent, unmarked: \(later)")
        // Each row's interval, as the heading above it says it: sampling
        // keeps its grid, so an interval after a late sample is shorter
        // than the 1.5 s asked for (25 packets at 18/s: 1.39 s).
        var intervals: [Double] = []
        var current = 0.0
        for line in lines {
            if let open = line.range(of: "(interval "), let close = line[open.upperBound...].firstIndex(of: ")") {
                let words = line[open.upperBound..<close].split(separator: " ")
                current = (words.first.flatMap { Double($0) } ?? 0) / (words.last == "ms" ? 1000 : 1)
            } else if line.hasPrefix(pair.nameA + " ") {
                intervals.append(current)
            }
        }
        #expect(intervals.count > later.count, "every row under a heading: \(lines)")
        for (row, seconds) in zip(later, intervals.dropFirst()) {
            #expect([row[14], row[15], row[16], row[17]] == ["0", "0", "0", "0"], "\(row)")
            let packets = try #require(Double(row[11])), perSecond = try #require(Double(row[13]))
            // At most packets over the row's interval, rounded as shown;
            // and not nothing when there were packets. The rate's
            // arithmetic is the renderers' unit tests'.
            #expect(seconds > 0, "\(row): no interval in its heading")
            #expect(
                perSecond <= packets / seconds + 0.5 && (packets == 0 || perSecond > 0), "\(row[11]) packets at \(row[13])/s over \(seconds) s")
        }
        #expect(!lines.contains { $0.contains("≈") || $0.contains("~ ") || $0.contains("≥") }, "exact figures carry no mark")
        #expect(
            lines.contains { $0.range(of: #"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \S+ \(interval"#, options: .regularExpression) != nil },
            "the heading is the time of day: \(lines)")
    }
}
