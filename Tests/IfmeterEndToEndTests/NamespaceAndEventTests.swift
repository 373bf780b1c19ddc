import Foundation
import IfmeterCore
import IfmeterSampling
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// --netns from outside the namespace, and deletion events in traces.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct NamespaceAndEventTests {
    func interfaces(_ json: String) throws -> [String: JSONValue] {
        guard case .array(let list)? = try JSONParser.parse(json)["interfaces"] else { throw TestFailure("no interfaces") }
        return Dictionary(uniqueKeysWithValues: list.compactMap { i in i["name"]?.stringValue.map { ($0, i) } })
    }

    /// The lines of a trace written so far (an unfinished last one left out).
    func traceLines(_ path: String) -> [JSONValue] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }

    /// Whether a trace line is a deletion event (of `name`, when given).
    func isDeletion(_ line: JSONValue, of name: String? = nil) -> Bool {
        line["event"]?.stringValue == "deleted" && (name == nil || line["interface"]?["name"]?.stringValue == name)
    }

    /// Waits until `count` deletions (of `name`, when given) are in the
    /// trace, and a sample after the last of them.
    func waitForDeletions(_ path: String, _ count: Int, of name: String? = nil) throws {
        _ = try waitFor("\(count) deletions and a sample after them in \(path)") { () -> Bool? in
            let lines = traceLines(path)
            guard lines.filter({ isDeletion($0, of: name) }).count >= count,
                let deletion = lines.lastIndex(where: { isDeletion($0, of: name) }),
                let sample = lines.lastIndex(where: { $0["interfaces"] != nil })
            else { return nil }
            return sample > deletion ? true : nil
        }
    }

    /// CLOCK_MONOTONIC, the clock of a trace's `t`.
    func monotonicNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    @Test func countsSeenFromOutsideMatchThoseInside() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        try pair.sendUDP(count: 25, payload: 400)
        for source in ["netlink", "getifaddrs"] {
            let outside = try ifmeter(["sample", "--format", "json", "--netns", pair.a.name, "--source", source])
            let inside = try ifmeter(["sample", "--format", "json", "--source", source], in: pair.a)
            #expect(outside.status == 0 && inside.status == 0, "\(outside.err)\(inside.err)")
            let o = try interfaces(outside.out), i = try interfaces(inside.out)
            #expect(Set(o.keys) == Set(i.keys) && Set(o.keys) == ["lo", "vA"], "\(source): the namespace's links, not this one's")
            #expect(o["vA"]?["counters"] == i["vA"]?["counters"], "\(source)")
            #expect(o["vA"]?["counters"]?["tx_bytes"]?.uint64Value == 25 * VethPair.frameBytes(payload: 400))
            #expect(o["vA"]?["kind"]?.stringValue == "virtual")
        }
        let missing = try ifmeter(["list", "--netns", "no-such-namespace-\(getpid())"])
        #expect(missing.status == 64 && missing.err.contains("no network namespace"), "\(missing.err)")
        let bad = try ifmeter(["list", "--netns", "../etc"])
        #expect(bad.status == 64)
    }

    @Test func recordWritesDeletionsAndReplayCountsThem() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-events-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recorder = try Background(
            ["ip", "netns", "exec", ns.name, try ifmeterBinary(), "record", "--interval", "300ms", "-o", path], name: "record")
        // Its first sample: it is reading link events.
        _ = try waitFor("record's first sample") {
            try recorder.requireRunning()
            return traceLines(path).contains { $0["interfaces"] != nil } ? true : nil
        }
        var sent = 0
        for n in 0..<5 {
            let fd = try ns.openTun("tunR")
            try ns.ip("link", "set", "tunR", "up")
            let packet = ipv4Packet(payload: 100 + n)
            for _ in 0..<10 { _ = write(fd, packet, packet.count) }
            sent += 10 * packet.count
            // Each instance lives 50 ms, on purpose: a life shorter than an
            // interval, its counts known only from its deletion.
            Thread.sleep(forTimeInterval: 0.05)
            close(fd)
        }
        try waitForDeletions(path, 5)
        #expect(recorder.stop() == 0)
        let trace = try String(contentsOfFile: path, encoding: .utf8)
        #expect(trace.split(separator: "\n").filter { $0.contains(#""event":"deleted""#) }.count == 5)
        let replay = try ifmeter(["replay", path])
        try #require(replay.status == 0, "\(replay.err)\n\(trace)")
        let report = try JSONParser.parse(replay.out)
        guard case .array(let list)? = report["interfaces"], let tun = list.first(where: { $0["name"]?.stringValue == "tunR" }) else {
            throw TestFailure("no tunR in the report")
        }
        #expect(tun["totals"]?["rx_bytes"]?.uint64Value == UInt64(sent), "every instance's final counters")
        #expect(tun["quality"]?.stringValue == "exact")
        #expect(tun["events"]?["deletions"]?.uint64Value == 5)
    }

    @Test func severalNamespacesAtOnceSayWhichIsWhich() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        try pair.sendUDP(count: 12, payload: 300)
        let json = try ifmeter(["sample", "--format", "json", "--netns", "\(pair.a.name),\(pair.b.name)"])
        #expect(json.status == 0, "\(json.err)")
        guard case .array(let list)? = try JSONParser.parse(json.out)["interfaces"] else { throw TestFailure("no interfaces") }
        let keys = Set(
            list.compactMap { i -> String? in
                guard let name = i["name"]?.stringValue, let netns = i["netns"]?.stringValue else { return nil }
                return netns + "/" + name
            })
        #expect(keys == ["\(pair.a.name)/lo", "\(pair.a.name)/vA", "\(pair.b.name)/lo", "\(pair.b.name)/vB"])
        // --include matches NS/NAME too; text output names the namespace.
        let text = try ifmeter(["list", "--netns", pair.a.name, "--netns", pair.b.name, "--include", "\(pair.b.name)/*"])
        #expect(text.status == 0 && text.out.contains("\(pair.b.name)/vB") && !text.out.contains("/vA"), "\(text.out)")
        // Entering a namespace needs a privilege, and the error says which.
        let unprivileged = try run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", try ifmeterBinary(), "list", "--netns", pair.a.name],
            allowFailure: true)
        #expect(unprivileged.status == 1 && unprivileged.err.contains("CAP_SYS_ADMIN"), "\(unprivileged.err)")
    }

    @Test func deletionsAreTimedWhenReadAndVethFinalsListWhatIsUnderReported() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-veth-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recorder = try Background(
            ["ip", "netns", "exec", pair.a.name, try ifmeterBinary(), "record", "--interval", "1s", "-o", path], name: "record")
        // A sample's time `t`, however late it is seen.
        let sampled = try waitFor("a sample from record") { () throws -> Double? in
            try recorder.requireRunning()
            return traceLines(path).last(where: { $0["interfaces"] != nil })?["t"]?.doubleValue
        }
        // The deletion is meant for the middle of an interval still to come
        // (samples every second from `t`), apart from both samples; a
        // loaded machine may place it nearer, and the check below holds
        // wherever it falls.
        var middle = sampled + 0.5
        while middle < monotonicNow() { middle += 1 }
        Thread.sleep(forTimeInterval: middle - monotonicNow())
        try pair.sendUDP(count: 20, payload: 500)
        try pair.a.ip("link", "del", pair.nameA)
        try waitForDeletions(path, 1, of: "vA")
        #expect(recorder.stop() == 0)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { try JSONParser.parse(String($0)) }
        let samples = lines.filter { $0["interfaces"] != nil }.compactMap { $0["t"]?.doubleValue }
        let deletion = try #require(lines.first { $0["event"]?.stringValue == "deleted" && $0["interface"]?["name"]?.stringValue == "vA" })
        let t = try #require(deletion["t"]?.doubleValue)
        let before = try #require(samples.last { $0 <= t }), after = try #require(samples.first { $0 >= t })
        // Strictly between them: a deletion stamped with a sample's time
        // (the next one's, or the last one's) would equal it. Where between
        // them it falls depends on the machine's load, and is not checked.
        #expect(before < t && t < after, "timed when read, between the samples (\(before) < \(t) < \(after))")
        #expect(deletion["interface"]?["lower_bound"] == .array([.string("rx_bytes"), .string("rx_packets")]))
        #expect(
            deletion["interface"]?["tx_bytes"]?.uint64Value == 20 * VethPair.frameBytes(payload: 500)
                + (try #require(
                    lines.first { $0["interfaces"] != nil }?["interfaces"].flatMap { list -> UInt64? in
                        guard case .array(let items) = list else { return nil }
                        return items.first { $0["name"]?.stringValue == "vA" }?["tx_bytes"]?.uint64Value
                    })))
        let report = try JSONParser.parse(try ifmeter(["replay", path, "--include", "vA"]).out)
        guard case .array(let interfaces)? = report["interfaces"] else { throw TestFailure("no report") }
        #expect(interfaces.first?["quality"]?.stringValue == "lower-bound")
        #expect(interfaces.first?["totals"]?["tx_bytes"]?.uint64Value == 20 * VethPair.frameBytes(payload: 500))
    }

    /// serve --all-netns while 50 namespaces with veth pairs come and go
    /// under traffic: every scrape is answered, and at the end each
    /// namespace's counters equal what sysfs says there.
    @Test func serveFollowsFiftyNamespacesThatComeAndGo() throws {
        try Netns.requireRoot()
        // Not beside a test of the whole machine's namespaces (or of a thousand interfaces).
        MachineWideInterfaces.take()
        defer { MachineWideInterfaces.give() }
        let host = try TestNamespace()
        let port: UInt16 = 9881
        let server = try startServe(
            in: host, port: port, interval: "200ms", name: "serve-all-netns", ["--all-netns", "--listen", "127.0.0.1:\(port)"])
        defer { server.stop() }
        var namespaces: [TestNamespace] = []
        var scrapes = 0
        for n in 0..<50 {
            let ns = try TestNamespace()
            try ns.ip("link", "add", "c0", "type", "veth", "peer", "name", "c1")
            try ns.ip("link", "set", "c0", "up")
            try ns.ip("link", "set", "c1", "up")
            namespaces.append(ns)
            if n % 3 == 2 {
                // Some go again, with their traffic.
                let gone = namespaces.removeFirst()
                try? sendFrames(in: gone.name, interface: "c0", count: 5)
                gone.remove()
            }
            if n % 5 == 4 {
                for ns in namespaces.suffix(4) { try? sendFrames(in: ns.name, interface: "c0", count: 7, size: 200) }
                // Answered, however slowly a loaded machine renders it.
                let scrape = try RawHTTP.request("/metrics", port: port, in: host.name, timeout: 60)
                #expect(scrape.status == 200, "answered while namespaces come and go")
                scrapes += 1
            }
        }
        for ns in namespaces { try sendFrames(in: ns.name, interface: "c0", count: 3, size: 500) }
        // Two samples more than a scrape after the traffic shows: the
        // second of them began after it.
        let seen = Scenario.metric(try Scenario.scrape(host, port: port), "ifmeter_samples_total")[""] ?? 0
        let text = try waitFor("serve to sample after the traffic") { () throws -> String? in
            let text = try Scenario.scrape(host, port: port)
            return (Scenario.metric(text, "ifmeter_samples_total")[""] ?? 0) >= seen + 2 ? text : nil
        }
        #expect(scrapes == 10)
        for ns in namespaces {
            let truth = try sysfsCounters(ns, "c0")
            let line = text.split(separator: "\n").first {
                $0.hasPrefix("ifmeter_transmit_bytes_total{") && $0.contains("interface=\"c0\"") && $0.contains("netns=\"\(ns.name)\"")
            }
            let value = line.flatMap { UInt64($0.split(separator: " ").last ?? "") }
            #expect(value == truth.txBytes, "\(ns.name): serve says \(String(describing: value)), sysfs \(truth.txBytes)")
        }
        #expect(server.process.isRunning, "serve kept running: \(server.log)")
    }
}
