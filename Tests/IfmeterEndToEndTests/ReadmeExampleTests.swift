import Foundation
import IfmeterTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every example in the README and in `docs/*.md` is run: each code block
/// with `$ ifmeter` lines carries a `<!-- example: SETUP -->` line before it, naming the
/// machine it ran on (namespaces, interfaces, traffic, files), which this
/// test builds; then each command runs there and its output must read as
/// the README shows it. Figures move from run to run, so numbers and units
/// are compared as "a number" and "a unit"; every word, column, row and
/// mark must match. A `...` line in the README stands for any lines. A
/// command ending in ` &` runs in the background until the block ends.
///
/// To re-record the blocks from a run on purpose:
/// `IFMETER_RECORD_README=1 swift test --filter ReadmeExampleTests` (the
/// test then fails, so a re-recording is always looked at); it rewrites
/// every file that holds examples.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ReadmeExampleTests {
    struct Block {
        var setup: String
        /// Line indexes of the opening and closing fences.
        var open: Int, close: Int
        var commands: [(command: String, expected: [String])]
    }

    /// The files whose examples run, relative to the repository: the
    /// README, then every `docs/*.md`.
    static func exampleFiles() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("docs").path)
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    static func path(_ file: String) -> String { repositoryRoot.appendingPathComponent(file).path }

    static func blocks(_ lines: [String], file: String = "README.md") throws -> [Block] {
        var blocks: [Block] = []
        var i = 0
        while i < lines.count {
            guard lines[i].hasPrefix("```") else {
                i += 1
                continue
            }
            let open = i
            var close = i + 1
            while close < lines.count, !lines[close].hasPrefix("```") { close += 1 }
            let body = Array(lines[(open + 1)..<min(close, lines.count)])
            i = close + 1
            // A block with a `$ ifmeter` line must be marked; a marked block
            // runs whatever its `$` lines are (`$ timeout 2 ifmeter ...`).
            let marker = open > 0 ? lines[open - 1] : ""
            let marked = marker.hasPrefix("<!-- example: ") && marker.hasSuffix(" -->")
            guard body.contains(where: { $0.hasPrefix("$ ifmeter") }) || (marked && body.contains(where: { $0.hasPrefix("$ ") })) else { continue }
            guard marked else {
                throw TestFailure("\(file) line \(open + 1): an example block without '<!-- example: SETUP -->' before it, so no test runs it")
            }
            var block = Block(setup: String(marker.dropFirst("<!-- example: ".count).dropLast(" -->".count)), open: open, close: close, commands: [])
            for line in body {
                if line.hasPrefix("$ ") {
                    block.commands.append((String(line.dropFirst(2)), []))
                } else if !block.commands.isEmpty {
                    block.commands[block.commands.count - 1].expected.append(line)
                }
            }
            blocks.append(block)
        }
        return blocks
    }

    /// Numbers become `#`, byte units `U`, runs of spaces one space, this
    /// machine's name `HOST`. The `T` of an RFC 3339 time is set apart
    /// from its hour first, so that `T09:` and `T21:` read alike.
    static func normalized(_ line: String) -> String {
        var s = line
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? ""
        if !host.isEmpty {
            s = s.replacingOccurrences(of: "host \(host)", with: "host HOST")
            s = s.replacingOccurrences(of: "\"host\": \"\(host)\"", with: "\"host\": \"HOST\"")
        }
        s = s.replacingOccurrences(of: #"(?<=[0-9])T(?=[0-9]{2}:)"#, with: "T ", options: .regularExpression)
        s = s.replacingOccurrences(of: #"(?<![A-Za-z_])[0-9]+([.,:][0-9]+)*"#, with: "#", options: .regularExpression)
        s = s.replacingOccurrences(of: #"#( ?)(B|KiB|MiB|GiB|TiB)\b"#, with: "#$1U", options: .regularExpression)
        // Durations: an interval of 999 ms or 1 s.
        s = s.replacingOccurrences(of: #"#( ?)(ms|s|m|h|d)\b"#, with: "#$1T", options: .regularExpression)
        s = s.replacingOccurrences(of: #"\s+"#, with: " ", options: .regularExpression)
        return s.trimmingCharacters(in: .whitespaces)
    }

    /// Whether `actual` reads as `expected` (with `...` lines as wildcards).
    static func matches(_ expected: [String], _ actual: [String]) -> Bool {
        func trimmed(_ lines: [String]) -> [String] {
            var lines = lines
            while lines.last?.isEmpty == true { lines.removeLast() }
            return lines
        }
        let e = trimmed(expected).map(normalized), a = trimmed(actual).map(normalized)
        func match(_ i: Int, _ j: Int) -> Bool {
            if i == e.count { return j == a.count }
            if e[i] == "..." { return (j...a.count).contains { match(i + 1, $0) } }
            return j < a.count && e[i] == a[j] && match(i + 1, j + 1)
        }
        return match(0, 0)
    }

    /// Where a block's commands run, and what keeps running meanwhile.
    final class Machine: @unchecked Sendable {
        var namespace: TestNamespace?
        let folder: String
        var keep: [AnyObject] = []
        /// What the block's ` &` commands started, stopped when it ends.
        var background: [(command: String, process: Background)] = []
        var traffic: (@Sendable () throws -> Void)?
        private let stopping = Atomic<Bool>(false)
        private let running = Atomic<Bool>(false)

        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-readme-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }

        deinit {
            stopTraffic()
            try? FileManager.default.removeItem(atPath: folder)
        }

        func startTraffic() {
            guard let traffic else { return }
            running.store(true, ordering: .relaxed)
            Thread.detachNewThread { [self] in
                while !stopping.load(ordering: .relaxed) { try? traffic() }
                running.store(false, ordering: .relaxed)
            }
        }

        func stopTraffic() {
            stopping.store(true, ordering: .relaxed)
            while running.load(ordering: .relaxed) { Thread.sleep(forTimeInterval: 0.01) }
        }

        /// A command ending in ` &`: started in the machine, in the block's
        /// folder, and left running until `stopBackground`.
        func start(_ command: String, binary: String) throws {
            let line = String(command.dropLast(2)).replacingOccurrences(of: "ifmeter ", with: binary + " ")
            let shell = ["sh", "-c", "cd '\(folder)' && exec \(line)"]
            background.append(
                (command, try Background((namespace.map { ["ip", "netns", "exec", $0.name] } ?? []) + shell, name: "readme-background")))
        }

        /// Stops what `start` started (SIGTERM), and returns what did not
        /// stop cleanly, with its log.
        func stopBackground() -> [String] {
            defer { background = [] }
            return background.compactMap { command, process in
                let status = process.stop()
                return status == 0 ? nil : "'\(command)' exited \(status): \(process.log)"
            }
        }

        func run(_ command: String, binary: String) throws -> (output: [String], status: Int32) {
            let line = command.replacingOccurrences(of: "ifmeter ", with: binary + " ")
            let shell = ["sh", "-c", "cd '\(folder)' && \(line)"]
            let result = try IfmeterTestSupport.run((namespace.map { ["ip", "netns", "exec", $0.name] } ?? []) + shell, allowFailure: true)
            var output = (result.out + result.err).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if output.last == "" { output.removeLast() }
            return (output, result.status)
        }
    }

    /// Builds the machine a block names.
    func machine(_ setup: String) throws -> Machine {
        let m = try Machine()
        switch setup {
        case "veth-tun":
            // A namespace with a veth pair (veth0 here, its peer in another
            // namespace) carrying UDP, and a tun device that is down.
            let pair = try VethPair(nameA: "veth0", nameB: "veth0")
            let tun = try pair.a.openTun("tun0")
            m.keep = [pair, TunHolder(tun)]
            m.namespace = pair.a
            m.traffic = {
                try pair.sendUDP(count: 50, payload: 1200)
                Thread.sleep(forTimeInterval: 0.05)
            }
        case "repo":
            // No machine: files of the repository.
            try FileManager.default.createSymbolicLink(
                atPath: m.folder + "/Fixtures", withDestinationPath: repositoryRoot.appendingPathComponent("Fixtures").path)
        case "broken-trace":
            try """
            {"trace": "ifmeter/1", "platform": "linux", "source": "hand-made"}
            {"t": 0, "interfaces": [{"name": "eth0", "index": 2, "rx_bytes": 100, "tx_bytes": 100, "rx_packets": 1, "tx_packets": 1}]}
            {"t": 1, "interfaces": [{"name": "eth0", "index": 2, "rx_bytes": 200, "tx_bytes": 150, "rx_packets": 2, "tx_packets": 2}]}
            {"t": 2, "interfaces": [{"name": "eth0", "index": 2, "rx_bytes": 300, "tx_bytes": 190, "rx_packets": 3, "tx_packets": 3}]}
            {"t": 3, "interfaces": [{"name": "eth0", "index": 2, "rx_bytes": -4, "tx_bytes": 200, "rx_packets": 4, "tx_packets": 4}]}

            """.write(toFile: m.folder + "/broken.jsonl", atomically: true, encoding: .utf8)
        case "usage":
            // export --state ran while 1.24 MB went out of wan0.
            let pair = try VethPair(nameA: "wan0", nameB: "wan0")
            m.keep = [pair]
            m.namespace = pair.a
            let export = try Background(
                [
                    "ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "export", "--state", m.folder + "/state.db", "--json",
                    m.folder + "/r.json",
                    "--interval", "200ms", "--every", "500ms",
                ], name: "readme-export")
            // Its baseline taken, then the bytes counted, before the stop.
            try ExportReport.waitForFirst(m.folder + "/r.json")
            try pair.sendUDP(count: 1000, payload: 1200)
            try ExportReport.waitForTotal(m.folder + "/r.json", "wan0", atLeast: 1000 * VethPair.frameBytes(payload: 1200))
            #expect(export.stop() == 0, "\(export.log)")
        case "route-tunnel", "route-split":
            // tun0 carried as UDP over eth0 (a veth) by a forwarder; the
            // default route on the tunnel, or around it.
            let pair = try VethPair(nameA: "eth0", nameB: "eth0")
            let tunnel = try UDPTunnel(over: pair, tunA: "tun0", tunB: "tun0")
            m.keep = [pair, tunnel]
            m.namespace = pair.a
            if setup == "route-tunnel" {
                try pair.a.ip("route", "add", "default", "dev", "tun0")
                m.traffic = {
                    try tunnel.sendUDP(to: tunnel.ipB, port: 9200, count: 100, payload: 1200)
                    try tunnel.sendUDP(to: pair.ipB, port: 9201, count: 25, payload: 1200)
                }
            } else {
                try pair.a.ip("route", "add", "default", "via", pair.ipB, "dev", "eth0")
            }
        default:
            throw TestFailure("unknown example setup '\(setup)'")
        }
        return m
    }

    final class TunHolder {
        let fd: Int32
        init(_ fd: Int32) { self.fd = fd }
        deinit { close(fd) }
    }

    @Test func everyExampleRunsAsShown() throws {
        try Netns.requireRoot()
        let binary = try ifmeterBinary()
        let record = ProcessInfo.processInfo.environment["IFMETER_RECORD_README"] == "1"
        var count = 0, rewritten: [String] = []
        for file in try Self.exampleFiles() {
            var lines = try String(contentsOfFile: Self.path(file), encoding: .utf8).components(separatedBy: "\n")
            let blocks = try Self.blocks(lines, file: file)
            count += blocks.count
            let recorded = try run(blocks, file: file, binary: binary, record: record)
            if record, !recorded.isEmpty {
                for (block, body) in recorded.reversed() {
                    lines.replaceSubrange((block.open + 1)..<block.close, with: body)
                }
                try lines.joined(separator: "\n").write(toFile: Self.path(file), atomically: true, encoding: .utf8)
                rewritten.append(file)
            }
        }
        #expect(count >= 7, "the examples were found")
        if record {
            Issue.record(
                "re-recorded the examples of \(rewritten.joined(separator: ", ")); review the diff, then run again without IFMETER_RECORD_README")
        }
    }

    /// Runs one file's blocks; returns each block with the body a run printed.
    func run(_ blocks: [Block], file: String, binary: String, record: Bool) throws -> [(Block, [String])] {
        var recorded: [(Block, [String])] = []
        for block in blocks {
            let m = try machine(block.setup)
            m.startTraffic()
            defer { m.stopTraffic() }
            var previous: Int32 = 0
            var body: [String] = []
            for (command, expected) in block.commands {
                var result: (output: [String], status: Int32)
                if command == "echo $?" {
                    result = (["\(previous)"], 0)
                } else if command.hasSuffix(" &") {
                    try m.start(command, binary: binary)
                    result = ([], 0)
                } else {
                    result = try m.run(command, binary: binary)
                }
                body.append("$ " + command)
                // A command with a trailing comment and nothing shown: only
                // that it works.
                if expected.isEmpty, command.contains("  #") {
                    #expect(result.status == 0, "\(file) line \(block.open + 1): '\(command)' failed: \(result.output.joined(separator: "\n"))")
                } else {
                    // The blank lines the README leaves between commands.
                    var output = result.output
                    while output.last?.isEmpty == true { output.removeLast() }
                    body += output + expected.reversed().prefix { $0.isEmpty }
                    if !record {
                        #expect(
                            Self.matches(expected, result.output),
                            "\(file) line \(block.open + 1), '\(command)' printed:\n\(result.output.joined(separator: "\n"))\nwhere \(file) shows:\n\(expected.joined(separator: "\n"))"
                        )
                    }
                }
                previous = result.status
            }
            for failure in m.stopBackground() {
                Issue.record("\(file) line \(block.open + 1): \(failure)")
            }
            recorded.append((block, body))
        }
        return recorded
    }

    @Test func normalizingKeepsWordsAndMarks() {
        #expect(Self.normalized("veth0      virtual  3.76 KiB/s  ≥ 334 KiB") == "veth0 virtual # U/s ≥ # U")
        #expect(Self.normalized("(interval 999 ms)") == Self.normalized("(interval 1 s)"))
        #expect(Self.matches(["a 1", "...", "z"], ["a 7", "b", "c", "z"]))
        #expect(!Self.matches(["a 1", "z"], ["a 7", "b", "z"]))
        #expect(!Self.matches(["≥ 1 B"], ["1 B"]), "a mark is a word")
        #expect(Self.normalized("saved 2026-12-01T09:07:07+00:00") == Self.normalized("saved 2026-12-02T21:17:08+00:00"), "any time of day")
        #expect(Self.normalized("veth0 tun10") != Self.normalized("veth1 tun1"), "names keep their digits")
    }
}
