import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// `ifmeter` run inside the tests' own namespaces with real traffic.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct LiveCommandTests {
    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-live-\(UUID().uuidString).jsonl").path
    }

    /// Starts ifmeter inside a namespace without waiting for it.
    func start(_ arguments: [String], in namespace: TestNamespace) throws -> ChildProcess {
        try ChildProcess(["ip", "netns", "exec", namespace.name, try ifmeterBinary()] + arguments)
    }

    func interfaces(_ report: JSONValue) throws -> [String: JSONValue] {
        guard case .array(let list)? = report["interfaces"] else { throw TestFailure("no interfaces array") }
        return Dictionary(uniqueKeysWithValues: list.compactMap { i in i["name"]?.stringValue.map { ($0, i) } })
    }

    /// Waits until the trace at `path` has `count` whole lines (a header,
    /// then a line per sample).
    func waitForLines(_ path: String, _ count: Int, of recorder: ChildProcess) throws {
        _ = try waitFor("\(count) lines in \(path)") { () throws -> Bool? in
            // Whether it ran is taken before the read: record --count may
            // write its last lines and exit in between.
            let running = recorder.isRunning
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if text.filter({ $0 == "\n" }).count >= count { return true }
            guard running else { throw WaitAborted("record exited with \(text.count) bytes written") }
            return nil
        }
    }

    @Test func recordThenReplayCountsTheBytesSent() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let path = temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recorder = try start(["record", "--interval", "400ms", "--count", "4", "-o", path], in: pair.a)
        // The header and the first sample: the traffic falls after it.
        try waitForLines(path, 2, of: recorder)
        try pair.sendUDP(count: 100, payload: 1200)
        recorder.waitUntilExit()
        #expect(recorder.terminationStatus == 0)

        let trace = try String(contentsOfFile: path, encoding: .utf8)
        let lines = trace.split(separator: "\n")
        #expect(lines.count == 6, "a header and 5 samples")
        let header = try JSONParser.parse(String(lines[0]))
        #expect(header["trace"]?.stringValue == "ifmeter/1" && header["source"]?.stringValue == "netlink")
        let sample = try JSONParser.parse(String(lines[1]))
        let vA = try #require(try interfaces(sample)[pair.nameA])
        #expect(vA["index"]?.uint64Value != nil && vA["kind"]?.stringValue == "virtual" && vA["width"]?.uint64Value == 64)

        let replay = try ifmeter(["replay", path])
        #expect(replay.status == 0)
        let report = try JSONParser.parse(replay.out)
        let totals = try #require(try interfaces(report)[pair.nameA])
        #expect(totals["totals"]?["tx_bytes"]?.uint64Value == 100 * VethPair.frameBytes(payload: 1200))
        #expect(totals["totals"]?["tx_packets"]?.uint64Value == 100)
        #expect(totals["quality"]?.stringValue == "exact")
        #expect(totals["evidence"]?.stringValue == "link-kind:veth")
    }

    @Test func listAndSampleClassifyFromKernelFacts() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        try pair.a.ip("tuntap", "add", "mode", "tun", "dev", "tun9")
        let list = try ifmeter(["list", "--format", "json"], in: pair.a)
        #expect(list.status == 0, "\(list.err)")
        let listed = try interfaces(try JSONParser.parse(list.out))
        #expect(listed["tun9"]?["kind"]?.stringValue == "tunnel")
        #expect(listed["tun9"]?["evidence"]?.stringValue == "link-kind:tun")
        #expect(listed["vA"]?["kind"]?.stringValue == "virtual")
        #expect(listed["lo"]?["kind"]?.stringValue == "loopback")
        #expect(listed["vA"]?["hardware"] == .bool(false), "sysfs is read inside the namespace")
        #expect(listed["vA"]?["reported_speed_bps"]?.uint64Value == 10_000_000_000)
        #expect(listed["vA"]?["speed_bps"] == .null)

        let text = try ifmeter(["list", "--kind", "tunnel"], in: pair.a)
        #expect(text.out.contains("tun9") && !text.out.contains("vA"))

        let portable = try interfaces(try JSONParser.parse(try ifmeter(["list", "--format", "json", "--source", "getifaddrs"], in: pair.a).out))
        #expect(portable["vA"]?["width"]?.uint64Value == 32)

        let intervals = try ifmeter(["sample", "--count", "2", "--interval", "200ms", "--format", "json", "--include", "v*"], in: pair.a)
        #expect(intervals.status == 0)
        let objects = try intervals.out.split(separator: "\n").map { try JSONParser.parse(String($0)) }
        #expect(objects.count == 2)
        for object in objects {
            #expect(object["estimate"] == .bool(true))
            #expect(try interfaces(object).keys.sorted() == ["vA"])
        }
        let snapshot = try ifmeter(["sample"], in: pair.a)
        #expect(snapshot.out.contains("not per-app accounting") && snapshot.out.contains("tun9"))
    }

    @Test func anInterruptedRecordingIsStillAValidTrace() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        for signal in [SIGINT, SIGKILL] {
            let path = temporaryPath()
            defer { try? FileManager.default.removeItem(atPath: path) }
            let recorder = try start(["record", "--interval", "100ms", "-o", path], in: ns)
            // A header and two samples written, then the signal.
            try waitForLines(path, 3, of: recorder)
            // Signal ifmeter itself, not `ip netns exec` (which execs it: same pid).
            kill(recorder.processIdentifier, signal)
            recorder.waitUntilExit()
            if signal == SIGINT { #expect(recorder.terminationStatus == 0) }
            let trace = try String(contentsOfFile: path, encoding: .utf8)
            #expect(trace.hasSuffix("\n"), "no half-written line")
            #expect(trace.split(separator: "\n").count >= 3)
            let replay = try ifmeter(["replay", path])
            #expect(replay.status == 0, "\(replay.err)")
        }
    }
}
