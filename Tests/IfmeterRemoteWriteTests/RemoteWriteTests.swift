import Foundation
import IfmeterCore
import IfmeterOutput
import IfmeterRemoteWrite
import IfmeterServe
import IfmeterSystem
import IfmeterTestSupport
import Synchronization
import Testing

/// Remote write's pieces: the encoder (decoded by the real protoc), the
/// exposition's series, the queue on disk and the retry rules.
@Suite(.blocking) struct RemoteWriteTests {
    static func temporaryFolder() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-rw-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    static func request() -> [UInt8] {
        var out = ProtobufWriter()
        RemoteWriteEncoding.appendTimeSeries(
            to: &out, labels: [("__name__", "ifmeter_transmit_bytes_total"), ("interface", "vA"), ("netns", "")], value: 123_456,
            timestampMs: 1_700_000_000_123)
        RemoteWriteEncoding.appendTimeSeries(
            to: &out, labels: [("__name__", "ifmeter_up"), ("host", "gw\"1\\é")], value: -0.5, timestampMs: 1_700_000_001_000)
        return out.bytes
    }

    @Test func protocDecodesTheRequest() throws {
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/request.bin"
        _ = FileManager.default.createFile(atPath: file, contents: Data(Self.request()))
        let raw = try run(["sh", "-c", "protoc --decode_raw < \(file)"])
        #expect(raw.status == 0, "\(raw.err)")
        #expect(raw.out.contains(#"2: "ifmeter_transmit_bytes_total""#), "\(raw.out)")
        #expect(raw.out.contains("2: 1700000000123"), "\(raw.out)")
        let proto = repositoryRoot.appendingPathComponent("Fixtures/remote-write").path
        let typed = try run(["sh", "-c", "protoc --proto_path=\(proto) --decode=prometheus.WriteRequest remote.proto < \(file)"])
        #expect(typed.status == 0, "\(typed.err)")
        let expected = """
            timeseries {
              labels {
                name: "__name__"
                value: "ifmeter_transmit_bytes_total"
              }
              labels {
                name: "interface"
                value: "vA"
              }
              labels {
                name: "netns"
              }
              samples {
                value: 123456
                timestamp: 1700000000123
              }
            }
            timeseries {
              labels {
                name: "__name__"
                value: "ifmeter_up"
              }
              labels {
                name: "host"
                value: "gw\\"1\\\\\\303\\251"
              }
              samples {
                value: -0.5
                timestamp: 1700000001000
              }
            }

            """
        // proto3 prints no empty string: netns's empty value is there on the wire (decode_raw).
        #expect(typed.out == expected, "\(typed.out)")
    }

    @Test func snappyRoundTrips() throws {
        try RemoteWriteLibraries.load()
        let body = Array(repeating: Self.request(), count: 50).flatMap { $0 }
        let compressed = try #require(RemoteWriteLibraries.compress(body))
        #expect(compressed.count < body.count / 5)
        #expect(RemoteWriteLibraries.uncompress(compressed) == body)
    }

    @Test func seriesOfTheExposition() {
        let text = """
            # HELP x_total X.
            # TYPE x_total counter
            x_total{interface="a\\"b",netns="n\\\\s"} 42
            ifmeter_up 1
            y{b="2",a="1"} +Inf

            """
        let series = ExpositionSeries.parse(Array(text.utf8))
        #expect(series.count == 3)
        #expect(series[0].labels == [.init("__name__", "x_total"), .init("interface", "a\"b"), .init("netns", "n\\s")])
        #expect(series[0].value == 42)
        #expect(series[1].labels == [.init("__name__", "ifmeter_up")])
        #expect(series[2].labels.map(\.name) == ["__name__", "a", "b"], "sorted")
        #expect(series[2].value == .infinity)
    }

    static func payload(_ n: Int, size: Int = 1000) -> [UInt8] {
        Array(repeating: UInt8(truncatingIfNeeded: n), count: size)
    }

    @Test func queueKeepsOrderAndDropsTheOldestPastItsBound() throws {
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // 64 KiB: 16 KiB segments, about 16 records of 1 KB each.
        let queue = try DiskQueue(folder: dir + "/q", maxBytes: 64 * 1024)
        for n in 0..<200 { try queue.append(payload: Self.payload(n), samples: 10) }
        let counts = queue.counts
        #expect(counts.bytes <= 64 * 1024)
        #expect(counts.droppedFull > 0)
        #expect(counts.droppedFull + counts.samples == 2000, "every sample is queued or counted dropped")
        // The oldest went: the first left is a late one, and order holds.
        var seen: [UInt8] = []
        while let batch = queue.peek(maxBytes: 3000) {
            for i in stride(from: 0, to: batch.payload.count, by: 1000) { seen.append(batch.payload[i]) }
            try queue.commit(batch)
        }
        let expectedFirst = UInt8(truncatingIfNeeded: 200 - Int(counts.samples / 10))
        #expect(seen.first == expectedFirst)
        #expect(seen.last == UInt8(truncatingIfNeeded: 199))
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $1 == $0 &+ 1 }, "oldest first, none missing: \(seen)")
        #expect(queue.counts.bytes == 0)
    }

    @Test func queueSurvivesReopenAndATornRecord() throws {
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let folder = dir + "/q"
        do {
            let queue = try DiskQueue(folder: folder, maxBytes: 1 << 20)
            for n in 0..<10 { try queue.append(payload: Self.payload(n, size: 100), samples: 1) }
            // Three sent.
            let batch = try #require(queue.peek(maxBytes: 3 * (DiskQueue.headerBytes + 100)))
            #expect(batch.samples == 3)
            try queue.commit(batch)
        }
        // A kill -9 in the middle of the last record: cut it short.
        let segment = try #require(listDirectory(folder).filter { $0.hasSuffix(".seg") }.sorted().last)
        let path = folder + "/" + segment
        let size = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: UInt64(size - 40))
        try handle.close()
        let reopened = try DiskQueue(folder: folder, maxBytes: 1 << 20)
        #expect(reopened.counts.samples == 6, "the unsent whole records, not the torn one")
        #expect(reopened.counts.droppedCorrupt == 1, "the torn record's sample is counted lost: \(reopened.openingNotes)")
        var firsts: [UInt8] = []
        while let batch = reopened.peek(maxBytes: 1 << 20) {
            for i in stride(from: 0, to: batch.payload.count, by: 100) { firsts.append(batch.payload[i]) }
            try reopened.commit(batch)
        }
        #expect(firsts == [3, 4, 5, 6, 7, 8])
        // Appends after the cut are whole records read back in order.
        try reopened.append(payload: Self.payload(42, size: 100), samples: 1)
        let again = try DiskQueue(folder: folder, maxBytes: 1 << 20)
        #expect(again.peek(maxBytes: 1 << 20)?.payload.first == 42)
        // A flipped byte fails the CRC: that record is lost (and counted),
        // the one after it is found again and kept.
        let corrupt = try DiskQueue(folder: dir + "/c", maxBytes: 1 << 20)
        for n in 0..<3 { try corrupt.append(payload: Self.payload(n, size: 100), samples: 1) }
        let cpath = dir + "/c/" + (try #require(listDirectory(dir + "/c").filter { $0.hasSuffix(".seg") }.first))
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: cpath)))
        bytes[DiskQueue.segmentHeaderBytes + DiskQueue.headerBytes + 100 + 40] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: cpath), options: .atomic)
        let damaged = try DiskQueue(folder: dir + "/c", maxBytes: 1 << 20)
        #expect(damaged.counts.samples == 2 && damaged.counts.droppedCorrupt == 1, "\(damaged.counts)")
    }

    @Test func aBatchInFlightAtAKillIsPostedAgainAloneWithItsBounds() throws {
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let folder = dir + "/q"
        do {
            let queue = try DiskQueue(folder: folder, maxBytes: 1 << 20)
            for n in 0..<5 { try queue.append(payload: Self.payload(n, size: 100), samples: 1) }
            let batch = try #require(queue.peek(maxBytes: 1 << 20))
            #expect(batch.samples == 5 && !batch.resent)
            try queue.markInFlight(batch)
            // Posted and accepted; more queued in the same segment, then a
            // kill before the commit.
            for n in 5..<8 { try queue.append(payload: Self.payload(n, size: 100), samples: 1) }
        }
        let reopened = try DiskQueue(folder: folder, maxBytes: 1 << 20)
        for n in 8..<10 { try reopened.append(payload: Self.payload(n, size: 100), samples: 1) }
        let again = try #require(reopened.peek(maxBytes: 1 << 20))
        #expect(again.resent && again.samples == 5, "the request in flight again, without the records queued since")
        #expect(stride(from: 0, to: again.payload.count, by: 100).map { again.payload[$0] } == [0, 1, 2, 3, 4])
        try reopened.markInFlight(again)
        try reopened.commit(again)
        var rest: [UInt8] = []
        while let next = reopened.peek(maxBytes: 1 << 20) {
            #expect(!next.resent)
            rest += stride(from: 0, to: next.payload.count, by: 100).map { next.payload[$0] }
            try reopened.commit(next)
        }
        #expect(rest == [5, 6, 7, 8, 9])
        #expect(try DiskQueue(folder: folder, maxBytes: 1 << 20).peek(maxBytes: 1 << 20) == nil, "acknowledged: nothing in flight after a restart")
    }

    @Test func aRefusedRepostIsCountedAsADuplicateNotADrop() throws {
        try RemoteWriteLibraries.load()
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A timeout after the receiver took the request; then it refuses the copy.
        let transport = ScriptedTransport([
            PostOutcome(status: 0, message: "Operation timed out"), PostOutcome(status: 400, message: "out of order sample"),
            PostOutcome(status: 0, message: "Connection reset"), PostOutcome(status: 401, message: "Unauthorized"),
        ])
        let writer = RemoteWriter(
            url: "http://example:9090/api/v1/write", queue: try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20), transport: transport,
            batchBytes: 1, log: Log.everyLine { _ in })
        writer.enqueue(payload: Self.request(), samples: 2)
        writer.enqueue(payload: Self.request(), samples: 2)
        // Queued after the first post: not joined to its copy.
        #expect(writer.sendOnce() == .retry(retryAfter: nil))
        writer.enqueue(payload: Self.request(), samples: 2)
        #expect(writer.sendOnce() == .drop)
        #expect(writer.status.duplicate == 2 && writer.status.droppedRejected == 0)
        // Any other refusal of a copy is a refusal.
        #expect(writer.sendOnce() == .retry(retryAfter: nil))
        #expect(writer.sendOnce() == .drop)
        #expect(writer.sendOnce() == .sent)
        #expect(writer.sendOnce() == nil)
        let status = writer.status
        #expect(status.duplicate == 2 && status.droppedRejected == 2 && status.sent == 2)
        let bodies = transport.bodies.withLock { $0 }
        #expect(bodies.count == 5 && bodies[0] == bodies[1], "the copy is byte for byte the first post")
        #expect(status.sentBytes == UInt64(bodies[1].count + bodies[3].count + bodies[4].count), "what went out, each try: \(status.sentBytes)")
    }

    @Test func pushesASampleEachIntervalWhateverTheJitter() throws {
        let cache = ScrapeCache(families: .ifmeter, version: "test", interval: 1)
        // Samples a second apart, each up to 60 ms late or early, with a
        // phase right on a multiple of 15 s.
        let jitter = [0.0, 0.06, -0.05, 0.03, -0.06, 0.05, -0.02, 0.04, -0.04, 0.01]
        let times = (0..<61).map { 1_700_000_010 + Double($0) + jitter[$0 % jitter.count] }
        let feed = RemoteWriteFeed(source: cache, writers: [], externalLabels: [], every: 15, sampleInterval: 1)
        let pushed = times.enumerated().filter { feed.due($0.element) }.map(\.offset)
        #expect(pushed == [0, 15, 30, 45, 60], "every 15th sample: \(pushed)")
        // Not longer than the sampling interval: every sample.
        for every in [0.0, 1.0] {
            let each = RemoteWriteFeed(source: cache, writers: [], externalLabels: [], every: every, sampleInterval: 1)
            #expect(times.allSatisfy { each.due($0) }, "every \(every)")
        }
        // A clock set back pushes at once.
        #expect(feed.due(1_700_000_000.5))
    }

    @Test func queuedPushesAreSnappyBlocksJoinedIntoOneRequest() throws {
        try RemoteWriteLibraries.load()
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let transport = ScriptedTransport([])
        let queue = try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20)
        let writer = RemoteWriter(url: "http://example/api/v1/write", queue: queue, transport: transport, log: Log.everyLine { _ in })
        for _ in 0..<3 { writer.enqueue(payload: Self.request(), samples: 2) }
        let raw = Self.request().count
        #expect(queue.counts.bytes < UInt64(3 * (raw + DiskQueue.headerBytes)), "compressed on disk: \(queue.counts.bytes) bytes")
        #expect(writer.sendOnce() == .sent)
        let bodies = transport.bodies.withLock { $0 }
        #expect(bodies.count == 1 && RemoteWriteLibraries.uncompress(bodies[0]) == Self.request() + Self.request() + Self.request())
        #expect(writer.status.sent == 6)
    }

    /// What parsing every line gives: the reference for `SeriesEncoder`;
    /// then a stale marker for each series of `previous` not in `text`.
    static func reference(_ text: String, previous: String = "", external: [(String, String)], timestampMs: Int64) -> ([UInt8], UInt32) {
        func labels(_ s: ExpositionSeries) -> [(String, String)] {
            var labels = s.labels.map { ($0.name, $0.value) }
            for (name, value) in external where !labels.contains(where: { $0.0 == name }) { labels.append((name, value)) }
            labels.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
            return labels
        }
        let series = ExpositionSeries.parse(Array(text.utf8))
        var out = ProtobufWriter()
        for s in series { RemoteWriteEncoding.appendTimeSeries(to: &out, labels: labels(s), value: s.value, timestampMs: timestampMs) }
        let now = Set(series.map { labels($0).map { "\($0.0)=\($0.1)" }.joined(separator: ",") })
        var stale: UInt32 = 0
        for s in ExpositionSeries.parse(Array(previous.utf8)) where !now.contains(labels(s).map { "\($0.0)=\($0.1)" }.joined(separator: ",")) {
            RemoteWriteEncoding.appendTimeSeries(to: &out, labels: labels(s), value: SeriesEncoder.staleMarker, timestampMs: timestampMs)
            stale += 1
        }
        return (out.bytes, UInt32(series.count) + stale)
    }

    @Test func theSeriesEncoderKeepsLabelsAndGivesWhatParsingEveryLineGives() {
        let external = [("host", "gw1"), ("interface", "never replaces"), ("Zone", "a")]
        var encoder = SeriesEncoder(externalLabels: external)
        let first = """
            # HELP ifmeter_receive_bytes Bytes received.
            # TYPE ifmeter_receive_bytes counter
            ifmeter_receive_bytes_total{interface="eth0",netns=""} 123456789
            ifmeter_receive_bytes_total{interface="tun\\"q} {x}",netns="a b"} 18446744073709551615
            ifmeter_up 1
            ifmeter_ratio{interface="wlan\\\\0\\n"} -1.5
            ifmeter_gauge{a="1"} +Inf
            ifmeter_gauge{a="2"} NaN
            ifmeter_gauge{a="3"} 1e21 1700000000000
            ifmeter_spaced{a="x", b="y z"} 7

            """
        var previous = ""
        for (n, text) in [
            first, first,
            first.replacingOccurrences(of: "123456789", with: "123456790").replacingOccurrences(of: "ifmeter_up 1\n", with: ""),
        ].enumerated() {
            let got = encoder.encode(Array(text.utf8), timestampMs: 1_700_000_000_000 + Int64(n))
            let want = Self.reference(text, previous: previous, external: external, timestampMs: 1_700_000_000_000 + Int64(n))
            #expect(got.1 == want.1 && got.0 == want.0, "push \(n): \(got.1) series against \(want.1)")
            previous = text
        }
        // ifmeter_up ended in the last push (its stale marker went then).
        #expect(encoder.encode(Array(first.utf8), timestampMs: 0).1 == 8)
        previous = first
        // Interfaces come and go (recreated under new names): each push ends
        // the last one's series; what is kept stays bounded by what a push has.
        for push in 0..<50 {
            let text = (0..<100).map { "ifmeter_up{interface=\"v\(push)-\($0)\"} 1\n" }.joined()
            let got = encoder.encode(Array(text.utf8), timestampMs: Int64(push))
            #expect(got.0 == Self.reference(text, previous: previous, external: external, timestampMs: Int64(push)).0, "push \(push)")
            previous = text
        }
        #expect(encoder.kept <= 2 * 100 + 64 + 100, "\(encoder.kept) series kept")
    }

    /// Calls `during` inside each post (a push arriving while it is in
    /// flight), then answers from the script.
    final class SlowTransport: RemoteWriteTransport {
        let inner: ScriptedTransport
        let during = Mutex<(@Sendable () -> Void)?>(nil)
        init(_ script: [PostOutcome]) { inner = ScriptedTransport(script) }
        func post(_ body: [UInt8]) -> PostOutcome {
            let hook = during.withLock { h in
                defer { h = nil }
                return h
            }
            hook?()
            return inner.post(body)
        }
    }

    static func segments(_ folder: String) -> [String] { listDirectory(folder).filter { $0.hasSuffix(".seg") || $0 == "ack" } }

    @Test func aReceiverThatKeepsUpCostsNoWriteToDisk() throws {
        try RemoteWriteLibraries.load()
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let transport = ScriptedTransport([])
        let writer = RemoteWriter(
            url: "http://example/api/v1/write", queue: try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20), transport: transport,
            log: Log.everyLine { _ in })
        for _ in 0..<20 {
            writer.enqueue(payload: Self.request(), samples: 2)
            #expect(writer.sendOnce() == .sent)
        }
        #expect(writer.sendOnce() == nil)
        #expect(writer.status.sent == 40 && transport.bodies.withLock { $0.count } == 20)
        #expect(Self.segments(dir + "/q").isEmpty, "no segment, no ack: \(listDirectory(dir + "/q"))")
    }

    @Test func aPushDuringAPostGoesToDiskAfterIt() throws {
        try RemoteWriteLibraries.load()
        for failing in [false, true] {
            let dir = try Self.temporaryFolder()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let transport = SlowTransport(failing ? [PostOutcome(status: 0, message: "Operation timed out")] : [])
            let queue = try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20)
            let writer = RemoteWriter(url: "http://example/api/v1/write", queue: queue, transport: transport, log: Log.everyLine { _ in })
            var first = ProtobufWriter(), second = ProtobufWriter()
            RemoteWriteEncoding.appendTimeSeries(to: &first, labels: [("__name__", "a")], value: 1, timestampMs: 1000)
            RemoteWriteEncoding.appendTimeSeries(to: &second, labels: [("__name__", "a")], value: 2, timestampMs: 2000)
            let later = second.bytes
            writer.enqueue(payload: first.bytes, samples: 1)
            transport.during.withLock { $0 = { writer.enqueue(payload: later, samples: 1) } }
            #expect(writer.sendOnce() == (failing ? .retry(retryAfter: nil) : .sent))
            // Both on disk now, in order (the first settled there if it was sent).
            #expect(queue.counts.samples == (failing ? 2 : 1), "failing \(failing): \(queue.counts)")
            if failing {
                let again = try #require(queue.peek(maxBytes: 1 << 20))
                #expect(again.resent && again.samples == 1, "the first is posted again alone")
            }
            while writer.sendOnce() != nil {}
            let bodies = transport.inner.bodies.withLock { $0 }.compactMap(RemoteWriteLibraries.uncompress)
            let expected = failing ? [first.bytes, first.bytes, second.bytes] : [first.bytes, second.bytes]
            #expect(bodies == expected, "failing \(failing): oldest first, each alone")
            #expect(writer.status.sent == 2 && queue.isEmpty)
            // Drained: back to memory.
            writer.enqueue(payload: first.bytes, samples: 1)
            #expect(queue.isEmpty && writer.sendOnce() == .sent)
        }
    }

    /// Bytes snappy cannot compress: a push as big on disk as in memory.
    static func incompressible(_ size: Int, seed: UInt64) -> [UInt8] {
        var x = seed | 1
        return (0..<size).map { _ in
            x ^= x << 13
            x ^= x >> 7
            x ^= x << 17
            return UInt8(truncatingIfNeeded: x)
        }
    }

    @Test func aSpillPastTheBoundNeverSettlesAPushNotSent() throws {
        try RemoteWriteLibraries.load()
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // 64 KiB: segments of 16 KiB, so each 40 KB push is a segment, and
        // two of them fill the bound.
        let queue = try DiskQueue(folder: dir + "/q", maxBytes: 64 * 1024)
        let transport = SlowTransport([])
        let writer = RemoteWriter(url: "http://example/api/v1/write", queue: queue, transport: transport, log: Log.everyLine { _ in })
        let pushes = (0..<3).map { Self.incompressible(40_000, seed: UInt64($0 + 1)) }
        writer.enqueue(payload: pushes[0], samples: 1)
        transport.during.withLock {
            $0 = {
                writer.enqueue(payload: pushes[1], samples: 1)
                writer.enqueue(payload: pushes[2], samples: 1)
            }
        }
        #expect(writer.sendOnce() == .sent)
        while writer.sendOnce() != nil {}
        let received = transport.inner.bodies.withLock { $0 }.compactMap(RemoteWriteLibraries.uncompress)
        let status = writer.status
        // Every push is received or counted dropped, none both, none lost.
        #expect(received.first == pushes[0])
        #expect(received.last == pushes[2], "the newest push is never settled by the first's success")
        let accounted = Set(received.map { pushes.firstIndex(of: $0) ?? -1 })
        #expect(!accounted.contains(-1) && accounted.count == received.count, "each received once, as pushed")
        #expect(UInt64(received.count) + status.droppedQueueFull == 3, "\(received.count) received, \(status.droppedQueueFull) dropped")
        #expect(status.sent == UInt64(received.count))
    }

    @Test func aKillDuringASpilledPostPostsItAgainAlone() throws {
        try RemoteWriteLibraries.load()
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let folder = dir + "/q"
        let transport = SlowTransport([])
        let writer = RemoteWriter(
            url: "http://example/api/v1/write", queue: try DiskQueue(folder: folder, maxBytes: 1 << 20), transport: transport,
            log: Log.everyLine { _ in })
        writer.enqueue(payload: Self.request(), samples: 2)
        writer.enqueue(payload: Self.request(), samples: 2)
        // Both go in one post; a third push comes during it; then a kill
        // -9 (the folder is read as the restart reads it).
        let restarted = Mutex<DiskQueue.Batch?>(nil)
        transport.during.withLock {
            $0 = {
                writer.enqueue(payload: [0x0A, 0x00], samples: 1)
                restarted.withLock { $0 = (try? DiskQueue(folder: folder, maxBytes: 1 << 20))?.peek(maxBytes: 1 << 20) }
            }
        }
        #expect(writer.sendOnce() == .sent)
        let first = try #require(restarted.withLock { $0 })
        #expect(first.resent && first.samples == 4, "the post in flight alone, as posted: \(first.samples) samples")
        #expect(RemoteWriter.body(first) == transport.inner.bodies.withLock { $0.first }, "byte for byte the body posted")
    }

    @Test func stopWritesThePushesInMemoryToDisk() throws {
        try RemoteWriteLibraries.load()
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let writer = RemoteWriter(
            url: "http://example/api/v1/write", queue: try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20),
            transport: ScriptedTransport([]), log: Log.everyLine { _ in })
        writer.enqueue(payload: Self.request(), samples: 2)
        writer.stop()
        let reopened = try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20)
        #expect(reopened.counts.samples == 2, "a SIGTERM keeps the push not yet sent")
    }

    /// The queue's folder is named by this hash of the URL: it must stay
    /// the same across versions (the published FNV-1a 64 test vectors).
    @Test func theQueueFolderHashIsFNV1a() {
        #expect(FNV1a.hash("".utf8) == 0xcbf2_9ce4_8422_2325)
        #expect(FNV1a.hash("a".utf8) == 0xaf63_dc4c_8601_ec8c)
        #expect(FNV1a.hash("foobar".utf8) == 0x8594_4171_f739_67e8)
    }

    @Test func retryClassification() {
        for status in [200, 204] { #expect(RetryPolicy.classify(PostOutcome(status: status)) == .sent) }
        for status in [0, 429, 500, 502, 503, 599] { #expect(RetryPolicy.classify(PostOutcome(status: status)) == .retry, "\(status)") }
        for status in [301, 400, 401, 403, 404, 413] { #expect(RetryPolicy.classify(PostOutcome(status: status)) == .drop, "\(status)") }
        #expect(RetryPolicy.delay(attempt: 1, retryAfter: nil, random: 1) == 0.1)
        #expect(RetryPolicy.delay(attempt: 4, retryAfter: nil, random: 1) == 0.8)
        #expect(RetryPolicy.delay(attempt: 4, retryAfter: nil, random: 0) == 0.4, "jitter down to half")
        #expect(RetryPolicy.delay(attempt: 20, retryAfter: nil, random: 1) == 5, "capped")
        #expect(RetryPolicy.delay(attempt: 1, retryAfter: 7, random: 1) == 7, "Retry-After honoured")
        #expect(RetryPolicy.delay(attempt: 1, retryAfter: 9999, random: 1) == 300)
    }

    /// Answers with the statuses it is given, in order, keeping the bodies.
    final class ScriptedTransport: RemoteWriteTransport {
        let script: Mutex<[PostOutcome]>
        let bodies = Mutex<[[UInt8]]>([])
        init(_ script: [PostOutcome]) { self.script = Mutex(script) }
        func post(_ body: [UInt8]) -> PostOutcome {
            bodies.withLock { $0.append(body) }
            var outcome = script.withLock { $0.isEmpty ? PostOutcome(status: 200) : $0.removeFirst() }
            // What a receiver that answered got; none for a failed connection.
            if outcome.status != 0 { outcome.uploadedBytes = body.count }
            return outcome
        }
    }

    @Test func writerRetriesThenSendsAndDropsRefusals() throws {
        try RemoteWriteLibraries.load()
        let dir = try Self.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let transport = ScriptedTransport([
            PostOutcome(status: 0, message: "Connection refused"), PostOutcome(status: 503), PostOutcome(status: 429, retryAfter: 2),
            PostOutcome(status: 200), PostOutcome(status: 400, message: "out of order"),
        ])
        let writer = RemoteWriter(
            url: "http://user:secret@example:9090/api/v1/write", queue: try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20),
            transport: transport, batchBytes: 1, log: Log.everyLine { _ in })
        #expect(writer.label == "http://example:9090/api/v1/write")
        writer.enqueue(payload: Self.request(), samples: 2)
        writer.enqueue(payload: Self.request(), samples: 2)
        #expect(writer.sendOnce() == .retry(retryAfter: nil))
        #expect(writer.sendOnce() == .retry(retryAfter: nil))
        #expect(writer.sendOnce() == .retry(retryAfter: 2))
        #expect(writer.sendOnce() == .sent)
        #expect(writer.sendOnce() == .drop)
        #expect(writer.sendOnce() == nil)
        let status = writer.status
        #expect(status.sent == 2 && status.retried == 6 && status.droppedRejected == 2 && status.queueSamples == 0)
        #expect(status.lastSuccess != nil)
        let first = try #require(transport.bodies.withLock { $0.first })
        #expect(RemoteWriteLibraries.uncompress(first) == Self.request(), "the body is the snappy block of the request")
    }
}
