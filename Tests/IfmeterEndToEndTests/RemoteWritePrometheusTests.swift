import Foundation
import IfmeterCore
import IfmeterRemoteWrite
import IfmeterSampling
import IfmeterServe
import IfmeterSystem
import IfmeterTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve --remote-write` against a real Prometheus receiver, both in the
/// test's namespace: an outage of the receiver with a kill -9 of ifmeter
/// in it loses no sample; an unreachable receiver fills a bounded queue,
/// whose oldest samples go.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct RemoteWritePrometheusTests {
    static let prometheusPort: UInt16 = 49590

    struct Receiver {
        let dir: String
        let ns: TestNamespace
        func start(port: UInt16 = RemoteWritePrometheusTests.prometheusPort) throws -> Background {
            try Background(
                [
                    "ip", "netns", "exec", ns.name, "prometheus", "--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/data",
                    "--web.listen-address=127.0.0.1:\(port)", "--web.enable-remote-write-receiver", "--log.level=warn",
                ], name: "prometheus")
        }
    }

    func get(_ ns: TestNamespace, _ path: String, port: UInt16 = prometheusPort) throws -> JSONValue? {
        guard let response = try? RawHTTP.request(path, port: port, in: ns.name), response.status == 200 else { return nil }
        let json = try JSONParser.parse(response.text)
        return json["status"]?.stringValue == "success" ? json["data"] : nil
    }

    func encode(_ promql: String) -> String { promql.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }

    /// The raw samples of one series over `range` seconds up to `time`.
    func samples(_ ns: TestNamespace, _ selector: String, range: Int, at time: Double, port: UInt16 = prometheusPort) throws -> [(Double, Double)] {
        let data = try get(ns, "/api/v1/query?query=\(encode("\(selector)[\(range)s]"))&time=\(String(format: "%.3f", time))", port: port)
        guard case .array(let results)? = data?["result"], let first = results.first, case .array(let values)? = first["values"] else { return [] }
        return values.compactMap { pair in
            guard case .array(let p) = pair, p.count == 2, let t = p[0].doubleValue, let v = p[1].stringValue.flatMap(Double.init) else { return nil }
            return (t, v)
        }
    }

    func scalar(_ ns: TestNamespace, _ promql: String, at time: Double) throws -> Double? {
        let data = try get(ns, "/api/v1/query?query=\(encode(promql))&time=\(String(format: "%.3f", time))")
        guard case .array(let results)? = data?["result"], let first = results.first, case .array(let pair)? = first["value"], pair.count == 2 else {
            return nil
        }
        return pair[1].stringValue.flatMap(Double.init)
    }

    func folder() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-rw-prom-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try "global:\n  scrape_interval: 15s\n".write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
        return dir
    }

    @Test func anOutageAndAKillLoseNoSample() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let ns = pair.a
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = Receiver(dir: dir, ns: ns)
        var prometheus: Background? = try receiver.start()
        defer { _ = prometheus?.stop() }
        let serveArguments = [
            "ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--listen", "none", "--interval", "1s", "--state", dir + "/state.db",
            "--remote-write", "http://127.0.0.1:\(Self.prometheusPort)/api/v1/write", "--remote-write-interval", "1s", "--external-label",
            "host=test1",
        ]
        var serve = try Background(serveArguments, name: "serve")
        defer { _ = serve.stop() }
        let selector = #"ifmeter_transmit_bytes_total{interface="vA",host="test1"}"#
        _ = try waitFor("Prometheus to receive ifmeter's samples") {
            try scalar(ns, selector, at: Date().timeIntervalSince1970)
        }
        /// Waits until the queue is drained: the receiver's newest sample
        /// is recent (pushes go every second).
        func drained(_ what: String) throws {
            _ = try waitFor(what, timeout: 60) { () -> Bool? in
                let now = Date().timeIntervalSince1970
                guard let last = try samples(ns, selector, range: 10, at: now).last else { return nil }
                return now - last.0 < 3 ? true : nil
            }
        }
        // What was queued before Prometheus listened, sent.
        try drained("the backlog to reach Prometheus")
        // While the receiver keeps up, pushes go from memory: the queue's
        // segments (left from the start, before Prometheus listened) stop growing.
        let queueRoot = dir + "/state.db.remote-write"
        let queued = { () -> Int in
            (FileManager.default.enumerator(atPath: queueRoot)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".seg") }
                .reduce(0) { $0 + ((try? FileManager.default.attributesOfItem(atPath: queueRoot + "/" + $1)[.size] as? Int) ?? 0) }
        }
        let healthy = queued()
        let t0 = Date().timeIntervalSince1970
        // A sample in the window before its traffic: the window's first.
        let atT0 = try waitFor("a sample taken after t0 in Prometheus") { () -> Double? in
            try samples(ns, selector, range: 30, at: Date().timeIntervalSince1970).last { $0.0 > t0 }?.1
        }
        /// Waits until Prometheus has a sample taken after `time` whose
        /// counter is at least `atLeast` (the traffic before it pushed).
        func pushed(after time: Double, atLeast: Double) throws {
            _ = try waitFor("a sample after \(time) with the counter at \(atLeast) in Prometheus", timeout: 60) { () -> Bool? in
                let last = try samples(ns, selector, range: 30, at: Date().timeIntervalSince1970).last
                return last.map { $0.0 > time && $0.1 >= atLeast } == true ? true : nil
            }
        }
        var sent = 0.0
        func traffic(_ count: Int) throws {
            try pair.sendUDP(count: count, payload: 1000)
            sent += Double(count) * Double(VethPair.frameBytes(payload: 1000))
        }
        try traffic(100)
        // Its samples pushed, then the queue looked at.
        try pushed(after: Date().timeIntervalSince1970, atLeast: atT0 + sent)
        #expect(queued() == healthy, "nothing written while healthy")
        // The receiver goes away for 60 s.
        _ = prometheus?.stop()
        prometheus = nil
        let outage = Date()
        try traffic(200)
        Thread.sleep(forTimeInterval: 12) // past a state save (every 10 s)
        try traffic(300)
        // (Judged below, whether it came or not.)
        _ = try? waitFor("the queue to grow on disk") { queued() > healthy ? true : nil }
        #expect(queued() > healthy, "in the outage the pushes wait on disk")
        // kill -9 in the outage, then the same --state (and queue) again.
        serve.process.signal(SIGKILL)
        _ = serve.process.wait(timeout: 10)
        let killedAt = Date().timeIntervalSince1970
        serve = try Background(serveArguments, name: "serve")
        try traffic(400)
        Thread.sleep(forTimeInterval: max(0, 60 - Date().timeIntervalSince(outage)))
        prometheus = try receiver.start()
        try traffic(50)
        let lastTraffic = Date().timeIntervalSince1970
        try drained("the queue to drain")
        // The last traffic in a sample Prometheus has (judged below).
        _ = try? pushed(after: lastTraffic, atLeast: atT0 + sent)
        let t1 = Date().timeIntervalSince1970
        let window = Int((t1 - t0).rounded(.up))
        let series = try samples(ns, selector, range: window, at: t1)
        let first = try #require(series.first), last = try #require(series.last)
        #expect(last.1 - first.1 == sent, "the counter over the window, \(last.1 - first.1), equals the bytes sent, \(sent)")
        let gaps = zip(series, series.dropFirst()).map { $1.0 - $0.0 }
        let largest = gaps.max() ?? 0
        // No sample lost, told by serve's own count rather than by the
        // time between samples (a loaded machine takes a sample late, and
        // a late one is not a lost one): ifmeter_samples_total, pushed with
        // every sample, goes up by one from each sample Prometheus has to
        // the next, within a process. It starts again at the restart,
        // whose first sample, 1, is there too. What the killed serve took
        // after its last sample that reached the disk queue is not known.
        let counts = try samples(ns, #"ifmeter_samples_total{host="test1"}"#, range: window, at: t1)
        #expect(counts.map(\.0) == series.map(\.0), "the same samples carry both series")
        let steps = zip(counts, counts.dropFirst())
        let restarts = steps.filter { $1.1 <= $0.1 }
        #expect(
            restarts.count == 1 && restarts.first.map { $0.0.0 <= killedAt && killedAt <= $0.1.0 && $0.1.1 == 1 } == true,
            "one restart, across the kill at \(killedAt), its first sample there: \(restarts)")
        let lost = steps.filter { $1.1 > $0.1 + 1 }.map { (at: $0.0, missing: $1.1 - $0.1 - 1) }
        #expect(lost.isEmpty, "samples serve took that Prometheus does not have: \(lost)")
        let restartGaps = restarts.map { ($0.0.0, $0.1.0 - $0.0.0) }
        let increase = try #require(try scalar(ns, "increase(\(selector)[\(window)s])", at: t1))
        #expect(increase >= sent * 0.99 && increase <= sent * 1.3, "increase() \(increase) for \(sent) sent (it extrapolates)")
        #expect(try scalar(ns, "resets(\(selector)[\(window)s])", at: t1) == 0)
        // Over exactly the samples' span (first to last, to the
        // millisecond), increase() does not extrapolate: the bytes sent.
        let span = Int(((last.0 - first.0) * 1000).rounded())
        let exact = try #require(try scalar(ns, "increase(\(selector)[\(span)ms])", at: last.0))
        #expect(exact == sent, "increase() over the samples' \(span) ms: \(exact) for \(sent) sent")
        #expect(try scalar(ns, #"ifmeter_remote_write_samples_retried_total{host="test1"}"#, at: t1).map { $0 > 0 } == true)
        print(
            "remote write outage: sent \(sent) bytes, raw difference \(last.1 - first.1), increase() \(increase) (over the samples' span: \(exact)), \(series.count) samples over \(window) s, largest gap \(largest) s, restart gaps \(restartGaps)"
        )
    }

    /// Issue 48, finding 1: a deleted interface's series ends at the push
    /// after its deletion (its final value, then the stale marker), as a
    /// scrape of node_exporter would end it, not after --series-lifetime
    /// (5 minutes by default), which /metrics keeps. Created again, it
    /// resumes, its total never lower than before.
    @Test func aDeletedInterfacesSeriesEndsAtTheNextPushAndResumesWhenItComesBack() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49603, servePort: UInt16 = 19346
        let prometheus = try Receiver(dir: dir, ns: ns).start(port: port)
        defer { _ = prometheus.stop() }
        /// A veth pair of the namespace's own; frames sent on gone0 are
        /// its transmit bytes, and go nowhere but its peer.
        func addLink() throws {
            _ = try ns.ip("link", "add", "gone0", "type", "veth", "peer", "name", "gone0p")
            _ = try ns.ip("link", "set", "gone0p", "up")
            _ = try ns.ip("link", "set", "gone0", "up")
            try ns.waitForCarrier("gone0")
        }
        try addLink()
        let serve = try startServe(
            in: ns, port: servePort, interval: "1s", name: "serve-gone",
            [
                "--listen", "127.0.0.1:\(servePort)", "--remote-write", "http://127.0.0.1:\(port)/api/v1/write", "--remote-write-interval", "1s",
                "--external-label", "host=gone", "--remote-write-queue", dir + "/queue",
            ])
        defer { _ = serve.stop() }
        let selector = #"ifmeter_transmit_bytes_total{interface="gone0",host="gone"}"#
        func sent(_ frames: Int) throws -> Double {
            try sendFrames(in: ns.name, interface: "gone0", count: frames, size: 300)
            return Double(frames * 300)
        }
        /// The newest value Prometheus has of the series.
        func newest() throws -> (Double, Double)? {
            try samples(ns, selector, range: 600, at: Date().timeIntervalSince1970, port: port).last
        }
        let first = try sent(40)
        _ = try waitFor("the traffic in Prometheus") { () throws -> Bool? in
            try serve.requireRunning()
            return try newest()?.1 == first ? true : nil
        }
        _ = try ns.ip("link", "del", "gone0")
        let deleted = Date().timeIntervalSince1970
        // Gone from instant queries: the stale marker came.
        _ = try waitFor("the series to end in Prometheus") { () throws -> Bool? in
            try serve.requireRunning()
            return try get(ns, "/api/v1/query?query=\(encode(selector))", port: port).flatMap { data -> Bool? in
                guard case .array(let results)? = data["result"] else { return nil }
                return results.isEmpty ? true : nil
            }
        }
        let after = try samples(ns, selector, range: 600, at: Date().timeIntervalSince1970, port: port)
        #expect(after.last?.1 == first, "the last value is every byte sent: \(after)")
        #expect(after.filter { $0.0 > deleted }.count <= 1, "one push after the deletion (the final value), then the stale marker: \(after)")
        // A scraper still sees the final value (--series-lifetime).
        let exposition = try RawHTTP.request("/metrics", port: servePort, in: ns.name).text
        #expect(exposition.contains(#"ifmeter_transmit_bytes_total{interface="gone0""#), "\(exposition)")
        // Back: the series resumes where it was, and goes on counting.
        try addLink()
        let second = try sent(25)
        _ = try waitFor("the series back in Prometheus") { () throws -> Bool? in
            try serve.requireRunning()
            return try newest()?.1 == first + second ? true : nil
        }
        let values = try samples(ns, selector, range: 600, at: Date().timeIntervalSince1970, port: port).map(\.1)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 <= $1 }, "never lower: no reset for increase() to see: \(values)")
    }

    @Test func anUnreachableReceiverFillsTheQueueAndTheOldestGo() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let ns = pair.a
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49592
        // Forty more veth pairs beside vA: each push carries their series
        // too, so the 1 MiB queue fills in seconds instead of a minute.
        let pairs = dir + "/pairs.batch"
        try (0..<40).map { "link add q\($0)a type veth peer name q\($0)b\n" }.joined().write(toFile: pairs, atomically: true, encoding: .utf8)
        try run(["ip", "-n", ns.name, "-batch", pairs])
        let serve = try Background(
            [
                "ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--listen", "127.0.0.1:49591", "--interval", "100ms",
                "--remote-write-queue", dir + "/queue", "--remote-write-queue-max", "1MiB",
                "--remote-write", "http://127.0.0.1:\(port)/api/v1/write", "--remote-write-interval", "100ms",
            ], name: "serve")
        defer { _ = serve.stop() }
        func metric(_ name: String) throws -> Double? {
            guard let text = try? RawHTTP.request("/metrics", port: 49591, in: ns.name).text else { return nil }
            return text.split(separator: "\n").first { $0.hasPrefix(name) }
                .flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        }
        let dropped = try waitFor("drops for room", timeout: 120) { () -> Double? in
            guard let d = try metric(#"ifmeter_remote_write_samples_dropped_total{reason="queue_full""#), d > 0 else { return nil }
            return d
        }
        let queueBytes = try #require(try metric("ifmeter_remote_write_queue_bytes{"))
        #expect(queueBytes <= 1024 * 1024 && queueBytes > 512 * 1024, "\(queueBytes) bytes queued")
        #expect(try metric("ifmeter_remote_write_samples_retried_total{").map { $0 > 0 } == true)
        #expect(try metric("ifmeter_remote_write_samples_sent_total{") == 0)
        #expect(try metric("ifmeter_remote_write_sent_bytes_total{") == 0, "no connection: no byte went out")
        let text = try RawHTTP.request("/metrics", port: 49591, in: ns.name).text
        let promtool = try run(["promtool", "check", "metrics"], input: text, allowFailure: true)
        #expect(promtool.status == 0, "promtool on the remote write families: \(promtool.out)\(promtool.err)")
        // A receiver appears: what it gets starts after the dropped samples.
        let prometheus = try Receiver(dir: dir, ns: ns).start(port: port)
        defer { _ = prometheus.stop() }
        let reached = try? waitFor("the queue to reach the receiver", timeout: 120) { () -> Double? in
            try samples(ns, "ifmeter_samples_total", range: 600, at: Date().timeIntervalSince1970, port: port).first?.1
        }
        let start = try #require(
            reached, "no sample reached the receiver; serve said: \(serve.log.suffix(2000)); prometheus: \(prometheus.log.suffix(2000))")
        #expect(start > 1, "the oldest samples (ifmeter_samples_total from 1) went first: the earliest received is \(start)")
        print(
            "remote write full queue: \(dropped) samples dropped for room, \(queueBytes) bytes queued, earliest received ifmeter_samples_total \(start)"
        )
    }

    /// A request Prometheus accepted just before a kill, whose `ack` was not
    /// written: after the restart it is posted again alone (Prometheus
    /// refuses the copy: out of order), and the samples queued since go in
    /// the next request. Joined, Prometheus would refuse them all.
    @Test func aRequestAcceptedBeforeAKillIsNotJoinedToNewerSamples() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49593
        let prometheus = try Receiver(dir: dir, ns: ns).start(port: port)
        defer { _ = prometheus.stop() }
        let url = "http://127.0.0.1:\(port)/api/v1/write"
        _ = try waitFor("Prometheus to listen") { try get(ns, "/api/v1/status/buildinfo", port: port) }
        let t0 = Int64(Date().timeIntervalSince1970 * 1000) - 60_000
        func record(_ n: Int) -> [UInt8] {
            var out = ProtobufWriter()
            RemoteWriteEncoding.appendTimeSeries(
                to: &out, labels: [("__name__", "ifmeter_test_resend"), ("run", "1")], value: Double(n), timestampMs: t0 + Int64(n) * 1000)
            // Queued as the writer queues: a snappy block.
            return RemoteWriteLibraries.compress(out.bytes) ?? []
        }
        try RemoteWriteLibraries.load()
        let queueFolder = dir + "/queue"
        let transport = try CurlTransport(
            url: url, settings: RemoteWriteConfig(), userAgent: "ifmeter-test")
        do {
            let queue = try DiskQueue(folder: queueFolder, maxBytes: 1 << 20)
            for n in 0..<5 { try queue.append(payload: record(n), samples: 1) }
            let batch = try #require(queue.peek(maxBytes: 1 << 20))
            try queue.markInFlight(batch)
            let body = try #require(RemoteWriter.body(batch))
            let outcome = try NetworkNamespace.perform(in: ns.name) { transport.post(body) }
            #expect(outcome.status / 100 == 2, "accepted: \(outcome)")
            // Samples go on being queued (in the same segment); then a kill
            // before the commit.
            for n in 5..<8 { try queue.append(payload: record(n), samples: 1) }
        }
        let queue = try DiskQueue(folder: queueFolder, maxBytes: 1 << 20)
        for n in 8..<10 { try queue.append(payload: record(n), samples: 1) }
        let lines = Mutex<[String]>([])
        let writer = RemoteWriter(url: url, queue: queue, transport: transport, log: Log.everyLine { line in lines.withLock { $0.append(line) } })
        let first = try NetworkNamespace.perform(in: ns.name) { writer.sendOnce() }
        let second = try NetworkNamespace.perform(in: ns.name) { writer.sendOnce() }
        let third = try NetworkNamespace.perform(in: ns.name) { writer.sendOnce() }
        let logged = lines.withLock { $0 }
        #expect(first == .drop && second == .sent && third == .sent, "\([first, second, third]): \(logged)")
        let status = writer.status
        #expect(status.duplicate == 5 && status.droppedRejected == 0 && status.sent == 5, "\(status)")
        #expect(status.sentBytes > 0, "libcurl's count of the bodies that went out")
        let values = try samples(ns, #"ifmeter_test_resend{run="1"}"#, range: 120, at: Date().timeIntervalSince1970, port: port).map(\.1)
        #expect(values == (0..<10).map(Double.init), "every sample once, none lost: \(values)")
        print("remote write re-post after a kill: \(logged.joined(separator: " | "))")
    }
}
