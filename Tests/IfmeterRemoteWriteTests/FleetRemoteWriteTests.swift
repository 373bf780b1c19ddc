import IfmeterCore
import IfmeterRemoteWrite
import IfmeterServe
import IfmeterSystem
import IfmeterTestSupport
import Synchronization
import Testing

/// Issue 30: what a fleet needs of remote write, piece by piece:
/// `write_relabel_configs` and `queue_config` in the config, series that
/// end with a stale marker, requests of at most `max_samples_per_send`,
/// and one line when a receiver comes back.
@Suite(.blocking) struct FleetRemoteWriteTests {
    static let text = """
        ifmeter_receive_bytes_total{interface="eth0",kind="ethernet"} 100
        ifmeter_receive_errors_total{interface="eth0",kind="ethernet"} 1
        ifmeter_receive_bytes_total{interface="wg0",kind="tunnel"} 50
        ifmeter_up 1

        """

    /// The series of a push's entries (protoc-free: the reference decoder
    /// of the tests beside this one reads what the encoder wrote).
    func decode(_ entries: [UInt8]) -> [(labels: [String: String], value: Double)] {
        var out: [(labels: [String: String], value: Double)] = []
        var at = 0
        func varint() -> Int {
            var v = 0, shift = 0
            while at < entries.count {
                let b = entries[at]
                at += 1
                v |= Int(b & 0x7F) << shift
                if b & 0x80 == 0 { break }
                shift += 7
            }
            return v
        }
        while at < entries.count {
            at += 1 // timeseries tag
            let end = varint() + at
            var labels: [String: String] = [:]
            var value = 0.0
            while at < end {
                let tag = entries[at]
                at += 1
                let length = varint()
                let fieldEnd = at + length
                if tag == 0x0A {
                    var name = "", text = ""
                    while at < fieldEnd {
                        let t = entries[at]
                        at += 1
                        let n = varint()
                        let s = String(decoding: entries[at..<at + n], as: UTF8.self)
                        if t == 0x0A { name = s } else { text = s }
                        at += n
                    }
                    labels[name] = text
                } else {
                    // Sample: tag 9 (double), 8 bytes, then the timestamp.
                    var bits: UInt64 = 0
                    for i in 0..<8 { bits |= UInt64(entries[at + 1 + i]) << (8 * UInt64(i)) }
                    value = Double(bitPattern: bits)
                    at = fieldEnd
                }
            }
            out.append((labels, value))
        }
        return out
    }

    @Test func theConfigReadsRelabelRulesAndQueueSettingsAndNamesTheLineOfAMistake() throws {
        let config = try RemoteWriteConfig.parse(
            """
            external_labels:
              site: lisbon
            write_relabel_configs:
              - source_labels: [__name__]
                regex: 'ifmeter_(receive|transmit)_(errors|drops)_total'
                action: drop
              - regex: kind
                action: labeldrop
              - source_labels: [instance, interface]
                separator: /
                target_label: link
            queue_config:
              capacity: 5000
              max_samples_per_send: 2000
              batch_send_deadline: 5s
              min_backoff: 30ms
              max_backoff: 2s
            """, folder: "/nonexistent")
        #expect(config.relabel.map(\.action) == [.drop, .labeldrop, .replace])
        #expect(config.relabel[2].separator == "/" && config.relabel[2].targetLabel == "link")
        #expect(config.queue.capacity == 5000 && config.queue.maxSamplesPerSend == 2000 && config.queue.batchSendDeadline == 5)
        #expect(config.queue.minBackoff == 0.03 && config.queue.maxBackoff == 2)
        let mistakes: [(String, Int?, String)] = [
            ("write_relabel_configs:\n  - action: hashmod\n", 2, "action 'hashmod' is not one ifmeter applies"),
            ("write_relabel_configs:\n  - source_labels: [a]\n    regex: '(unclosed'\n    target_label: b\n", 2, "does not compile"),
            ("write_relabel_configs:\n  - action: replace\n", 2, "action replace needs target_label"),
            ("write_relabel_configs:\n  - regex: a\n    modulus: 8\n", 3, "'modulus' (hashmod) is not supported"),
            ("write_relabel_configs:\n  - sourcelabels: [a]\n", 2, "unknown key 'sourcelabels'"),
            ("write_relabel_configs:\n  action: drop\n", 1, "must be a list"),
            ("queue_config:\n  max_samples_per_send: 0\n", 2, "a whole number from 1"),
            ("queue_config:\n  min_backoff: soon\n", 2, "a duration from 1ms to 1h"),
            ("queue_config:\n  max_shards: 4\n", 2, "not supported by ifmeter"),
            ("queue_config:\n  min_backoff: 10s\n  max_backoff: 1s\n", nil, "min_backoff is longer than max_backoff"),
        ]
        for (text, line, message) in mistakes {
            do throws(WebConfigError) {
                _ = try RemoteWriteConfig.parse(text, folder: "/nonexistent")
                Issue.record("accepted: \(text.debugDescription)")
            } catch {
                #expect(error.line == line && error.message.contains(message), "\(text.debugDescription): \(error)")
            }
        }
    }

    @Test func relabelRulesApplyAfterTheExternalLabelsAndOnlyOncePerSeries() throws {
        let rules = [
            try RelabelRule(action: .drop, sourceLabels: ["__name__"], regex: "ifmeter_receive_errors_total"),
            try RelabelRule(action: .labeldrop, regex: "kind"),
            try RelabelRule(sourceLabels: ["instance", "interface"], separator: "/", targetLabel: "link"),
        ]
        var encoder = SeriesEncoder(externalLabels: [("job", "ifmeter"), ("instance", "gw1")], relabel: rules)
        let (entries, count) = encoder.encode(Array(Self.text.utf8), timestampMs: 1000)
        let series = decode(entries)
        #expect(count == 3 && series.count == 3, "the errors series is dropped: \(series)")
        #expect(series.allSatisfy { $0.labels["kind"] == nil && $0.labels["job"] == "ifmeter" && $0.labels["instance"] == "gw1" })
        #expect(series.first { $0.labels["interface"] == "wg0" }?.labels["link"] == "gw1/wg0")
        // A missing source label is "" (Prometheus joins it all the same).
        #expect(series.first { $0.labels["__name__"] == "ifmeter_up" }?.labels["link"] == "gw1/")
        // A dropped series never gets a stale marker either.
        let (again, _) = encoder.encode(Array("ifmeter_up 1\n".utf8), timestampMs: 2000)
        let ended = decode(again).filter { $0.value.bitPattern == SeriesEncoder.staleMarker.bitPattern }
        #expect(ended.count == 2 && ended.allSatisfy { $0.labels["__name__"] == "ifmeter_receive_bytes_total" }, "\(ended)")
    }

    @Test func aSeriesThatEndsGetsAStaleMarkerAtTheNextPushAndAllDoAtTheEnd() throws {
        var encoder = SeriesEncoder(externalLabels: [("job", "ifmeter"), ("instance", "gw1")])
        _ = encoder.encode(Array(Self.text.utf8), timestampMs: 1000)
        // wg0 is forgotten (a tunnel gone).
        let next = Self.text.split(separator: "\n").filter { !$0.contains("wg0") }.joined(separator: "\n") + "\n"
        let (entries, count) = encoder.encode(Array(next.utf8), timestampMs: 2000)
        let series = decode(entries)
        #expect(count == 4)
        let stale = series.filter { $0.value.bitPattern == 0x7ff0_0000_0000_0002 }
        #expect(stale.count == 1 && stale[0].labels["interface"] == "wg0", "\(series)")
        #expect(series.last?.labels["interface"] == "wg0", "after the series' own samples")
        // Once: the next push has no marker for it.
        #expect(decode(encoder.encode(Array(next.utf8), timestampMs: 3000).0).allSatisfy { !$0.value.isNaN })
        // A stop ends every series.
        let (end, ended) = encoder.encodeEnd(timestampMs: 4000)
        #expect(ended == 3 && decode(end).allSatisfy { $0.value.bitPattern == SeriesEncoder.staleMarker.bitPattern })
    }

    @Test func requestsHoldAtMostMaxSamplesPerSend() throws {
        try RemoteWriteLibraries.load()
        var encoder = SeriesEncoder(externalLabels: [])
        let text = (0..<25).map { "ifmeter_up{interface=\"v\($0)\"} 1\n" }.joined()
        let (entries, count) = encoder.encode(Array(text.utf8), timestampMs: 1)
        let parts = RemoteWriteEncoding.split(entries, maxSeries: 10)
        #expect(parts.map(\.count) == [10, 10, 5] && count == 25)
        #expect(parts.flatMap(\.bytes) == entries, "cut at entry boundaries, nothing lost")
        // From disk too: records of 10 samples, requests of at most 20.
        let dir = try folder()
        defer { removeTree(dir) }
        let transport = RemoteWriteTests.ScriptedTransport([PostOutcome(status: 0, message: "down")])
        let writer = RemoteWriter(
            url: "http://x/api/v1/write", queue: try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20), transport: transport,
            maxSamplesPerSend: 20, log: Log.everyLine { _ in })
        for part in parts + parts { writer.enqueue(payload: try #require(RemoteWriteLibraries.compress(part.bytes)), samples: part.count) }
        var sizes: [UInt64] = []
        while let attempt = writer.sendOnce() {
            if case .sent = attempt { sizes.append(writer.status.sent) }
        }
        #expect(writer.status.sent == 50 && writer.status.queueSamples == 0)
        let perRequest = zip(sizes, [0] + sizes).map { $0 - $1 }
        #expect(perRequest.allSatisfy { $0 <= 20 }, "\(perRequest)")
    }

    @Test func aReceiverThatComesBackIsSaidOnceWithWhatWaited() throws {
        try RemoteWriteLibraries.load()
        let dir = try folder()
        defer { removeTree(dir) }
        let lines = Mutex<[String]>([])
        let transport = RemoteWriteTests.ScriptedTransport([
            PostOutcome(status: 0, message: "Connection refused"), PostOutcome(status: 503), PostOutcome(status: 0, message: "down"),
        ])
        let writer = RemoteWriter(
            url: "http://x/api/v1/write", queue: try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20), transport: transport, batchBytes: 1,
            minBackoff: 0.001, maxBackoff: 0.001, log: Log.everyLine { line in lines.withLock { $0.append(line) } })
        for _ in 0..<4 { writer.enqueue(payload: try #require(RemoteWriteLibraries.compress(RemoteWriteTests.request())), samples: 2) }
        try writer.start()
        defer { writer.stop() }
        let said = try waitFor("the recovery line") { lines.withLock { $0.first { $0.contains("is back") } } }
        #expect(said.contains("8 samples that waited were sent"), "\(said)")
        #expect(lines.withLock { $0.filter { $0.contains("is back") }.count } == 1)
    }

    func folder() throws -> String {
        let path = "/tmp/ifmeter-fleet-rw-\(UInt64.random(in: 0...UInt64.max))"
        try makeDirectory(path, mode: 0o700)
        return path
    }

    func removeTree(_ path: String) { _ = try? run(["rm", "-rf", path]) }
}
