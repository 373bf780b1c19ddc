import IfmeterCore
import IfmeterOutput
import IfmeterPipeline
@testable import IfmeterServe
import IfmeterTestSupport
import Testing

/// The dashboard's figures from a scripted pipeline: totals equal to the
/// exposition's for the same sample, rates from the last interval, the
/// last minutes of rates, a deleted interface kept with its total.
@Suite struct LiveBoardTests {
    struct Waiter: PipelineWaiter {
        var waits: Int
        mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool {
            waits -= 1
            return waits >= 0
        }
    }

    func run(_ steps: [ScriptedSource.Step]) -> (LiveBoard, ScrapeCache) {
        let pipeline = Pipeline(
            source: ScriptedSource(steps), configuration: PipelineConfiguration(interval: 1, sampleLimit: steps.count),
            clock: PipelineClock(monotonic: { 0 }, wall: { 1_796_040_000 }))
        let board = LiveBoard(interval: 1, version: "test")
        let cache = ScrapeCache(families: .ifmeter, version: "test", interval: 1)
        pipeline.add(sink: ScrapeFeed(cache: cache) {})
        pipeline.add(sink: LiveBoardFeed(board: board))
        var waiter = Waiter(waits: steps.count + 1)
        pipeline.run(&waiter)
        return (board, cache)
    }

    func document(_ board: LiveBoard, history: Bool = true) throws -> [String: JSONValue] {
        let text = String(decoding: board.document(history: history).bytes, as: UTF8.self)
        #expect(!text.contains("\n"), "one line: an event's data")
        var rows: [String: JSONValue] = [:]
        guard case .array(let list)? = try JSONParser.parse(text)["interfaces"] else { return [:] }
        for row in list { rows[row["name"]?.stringValue ?? ""] = row }
        return rows
    }

    func exposed(_ cache: ScrapeCache, _ name: String, _ direction: String) -> UInt64? {
        guard let rendered = cache.rendered(openMetrics: false), let inflater = Inflater(rendered.gzipped) else { return nil }
        var text: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 64 * 1024)
        while let n = block.withUnsafeMutableBytes({ inflater.read(into: $0.baseAddress!, max: $0.count) }), n > 0 { text += block.prefix(n) }
        let prefix = "ifmeter_\(direction)_bytes_total{"
        for line in String(decoding: text, as: UTF8.self).split(separator: "\n")
        where line.hasPrefix(prefix) && line.contains("interface=\"\(name)\"") {
            return line.split(separator: " ").last.flatMap { UInt64($0) }
        }
        return nil
    }

    func pair(_ value: JSONValue) -> (Double, Double) {
        guard case .array(let two) = value, two.count == 2, let rx = two[0].doubleValue, let tx = two[1].doubleValue else { return (-1, -1) }
        return (rx, tx)
    }

    @Test func totalsAreTheExpositionsAndRatesTheLastIntervals() throws {
        let (board, cache) = run([
            .sample(10, [("eth0", 2, 1_000, 500), ("wg0", 3, 0, 0)]),
            .sample(11, [("eth0", 2, 3_000, 900), ("wg0", 3, 0, 0)]),
            .sample(13, [("eth0", 2, 7_000, 900), ("wg0", 3, 100, 50)]),
        ])
        let rows = try document(board)
        let eth0 = try #require(rows["eth0"])
        #expect(eth0["rx_bytes"]?.uint64Value == 7_000 && eth0["tx_bytes"]?.uint64Value == 900)
        #expect(eth0["rx_bytes"]?.uint64Value == exposed(cache, "eth0", "receive"))
        #expect(eth0["tx_bytes"]?.uint64Value == exposed(cache, "eth0", "transmit"))
        // 4,000 bytes over the last 2 s; nothing sent.
        #expect(eth0["rx_bytes_per_second"]?.doubleValue == 2_000 && eth0["tx_bytes_per_second"]?.doubleValue == 0)
        #expect(rows["wg0"]?["rx_bytes_per_second"]?.doubleValue == 50 && rows["wg0"]?["tx_bytes_per_second"]?.doubleValue == 25)
        #expect(eth0["quality"]?.stringValue == "exact" && eth0["kind"]?.stringValue == "ethernet" && eth0["evidence"]?.stringValue == "scripted")
        // One point per sample: the baseline's, then each interval's.
        guard case .array(let history)? = eth0["history"] else {
            Issue.record("history asked for")
            return
        }
        #expect(history.map { pair($0).0 } == [0, 2_000, 2_000] && history.map { pair($0).1 } == [0, 400, 0])
        #expect(try document(board, history: false)["eth0"]?["history"] == nil)
        try expectFragmentsAreTheWholeRender(board)
    }

    /// The document a page follows, made from the rows' kept fragments, is
    /// byte for byte the whole render's (JSONWriter's) without history.
    func expectFragmentsAreTheWholeRender(_ board: LiveBoard) throws {
        let fragments = String(decoding: board.document(history: false).bytes, as: UTF8.self)
        guard case .object(var whole) = try JSONParser.parse(String(decoding: board.document(history: true).bytes, as: UTF8.self)),
            case .array(let rows)? = whole["interfaces"]
        else { throw TestFailure("no interfaces") }
        whole["interfaces"] = .array(
            rows.map { row in
                guard case .object(var o) = row else { return row }
                o["history"] = nil
                return .object(o)
            })
        #expect(fragments == JSONWriter().string(.object(whole)))
    }

    @Test func aDeletedInterfaceKeepsItsTotalAndStopsMoving() throws {
        let (board, _) = run([
            .sample(10, [("eth0", 2, 0, 0), ("tun0", 9, 0, 0)]),
            .sample(11, [("eth0", 2, 0, 0), ("tun0", 9, 5_000, 1_000)]),
            .sample(12, [("eth0", 2, 0, 0)], deleted: [scriptedDeletion(11.5, "tun0", 9, 6_000, 1_000)]),
            .sample(13, [("eth0", 2, 0, 0)]),
        ])
        let tun0 = try #require(try document(board)["tun0"])
        #expect(tun0["present"] == .bool(false))
        #expect(tun0["rx_bytes"]?.uint64Value == 6_000, "the deletion's final counters")
        #expect(tun0["events"]?["deletions"]?.uint64Value == 1)
        #expect(tun0["rx_bytes_per_second"]?.doubleValue == 0)
        try expectFragmentsAreTheWholeRender(board)
    }

    @Test func anEventHoldsOnlyWhatMovedSinceTheSampleBefore() throws {
        let board = LiveBoard(interval: 1, version: "test")
        #expect(board.events.join(), "a page follows")
        let pipeline = Pipeline(
            source: ScriptedSource([
                .sample(10, [("eth0", 2, 1_000, 0), ("wg0", 3, 0, 0)]),
                .sample(11, [("eth0", 2, 3_000, 0), ("wg0", 3, 0, 0)]),
                .sample(12, [("eth0", 2, 3_000, 0), ("wg0", 3, 0, 0)]),
            ]), configuration: PipelineConfiguration(interval: 1, sampleLimit: 3),
            clock: PipelineClock(monotonic: { 0 }, wall: { 1_796_040_000 }))
        let seen = Collector()
        pipeline.add(sink: LiveBoardFeed(board: board))
        pipeline.add(sink: seen)
        var waiter = Waiter(waits: 4)
        pipeline.run(&waiter)
        guard case .event(_, let body) = board.events.next(after: 0, suspend: {}, resume: {}) else {
            Issue.record("an event was published")
            return
        }
        let text = String(decoding: body.bytes, as: UTF8.self)
        let data = try #require(text.split(separator: "\n").first(where: { $0.hasPrefix("data: ") })?.dropFirst(6))
        let event = try JSONParser.parse(String(data))
        #expect(event["partial"] == .bool(true))
        #expect(event["since"]?.uint64Value == UInt64(seen.sequences.dropLast().last ?? -1))
        #expect(event["generation"]?.uint64Value == UInt64(seen.sequences.last ?? -1))
        // The last sample moved eth0's rate (2,000 to 0); wg0 stayed idle.
        guard case .array(let rows)? = event["interfaces"] else { throw TestFailure("no interfaces") }
        #expect(rows.map { $0["name"]?.stringValue } == ["eth0"])
        #expect(rows.first?["rx_bytes_per_second"]?.doubleValue == 0 && rows.first?["rx_bytes"]?.uint64Value == 3_000)
    }

    final class Collector: PipelineSink {
        var sequences: [Int] = []
        func receive(_ update: borrowing PipelineUpdate) { if update.outcome == .sampled { sequences.append(update.sequence) } }
    }

    @Test func aBoardWithACacheSleepsUntilAskedThenStartsFromTheScrapesTotals() throws {
        let cache = ScrapeCache(families: .ifmeter, version: "test", interval: 1)
        let board = LiveBoard(interval: 1, version: "test", cache: cache)
        let source = ScriptedSource([
            .sample(10, [("eth0", 2, 1_000, 0)]),
            .sample(11, [("eth0", 2, 5_000, 0)]),
            .sample(12, [("eth0", 2, 8_000, 0)]),
        ])
        let pipeline = Pipeline(
            source: source, configuration: PipelineConfiguration(interval: 1, sampleLimit: 3),
            clock: PipelineClock(monotonic: { 0 }, wall: { 1_796_040_000 }))
        pipeline.add(sink: ScrapeFeed(cache: cache) {})
        pipeline.add(sink: LiveBoardFeed(board: board))
        final class WakeAfterSecond: PipelineSink {
            let board: LiveBoard
            var seen = 0
            var asleep: Int?
            init(_ board: LiveBoard) { self.board = board }
            func receive(_ update: borrowing PipelineUpdate) {
                seen += 1
                // Asleep, the board followed nothing; asked, it takes the scrape's totals.
                if seen == 2 {
                    asleep = board.generation
                    board.wake()
                }
            }
        }
        let waker = WakeAfterSecond(board)
        pipeline.add(sink: waker)
        var waiter = Waiter(waits: 4)
        pipeline.run(&waiter)
        #expect(waker.asleep == 0, "a sleeping board keeps nothing")
        let eth0 = try #require(try document(board)["eth0"])
        #expect(eth0["rx_bytes"]?.uint64Value == 8_000 && eth0["rx_bytes"]?.uint64Value == exposed(cache, "eth0", "receive"))
        // Rates from the first sample after it woke: 3,000 bytes in 1 s.
        #expect(eth0["rx_bytes_per_second"]?.doubleValue == 3_000)
        guard case .array(let history)? = eth0["history"] else { throw TestFailure("no history") }
        #expect(history.map { pair($0).0 } == [3_000])
    }

    /// Every event's and both documents' bytes from a small script, as
    /// they were served when the board had two renderers: one renderer now
    /// writes them all, and must write exactly these (sorted keys, rates
    /// to a thousandth, histories from the Float points kept, quoting).
    @Test func theBytesServedArePinned() throws {
        let board = LiveBoard(interval: 2.5, version: "pin\"1")
        #expect(board.events.join(), "a page follows")
        final class Events: PipelineSink {
            let board: LiveBoard
            var seen = 0
            var bodies: [String] = []
            init(_ board: LiveBoard) { self.board = board }
            func receive(_ update: borrowing PipelineUpdate) {
                guard case .event(let number, let body) = board.events.next(after: seen, suspend: {}, resume: {}) else { return }
                seen = number
                bodies.append(String(decoding: body.bytes, as: UTF8.self))
                // The documents between samples: rows' kept bytes and fresh ones side by side.
                if number == 3 {
                    for history in [false, true] { bodies.append(String(decoding: board.document(history: history).bytes, as: UTF8.self)) }
                }
            }
        }
        let pipeline = Pipeline(
            source: ScriptedSource([
                .sample(10, [("eth0", 2, 1_000, 500), ("q\"t", 9, 0, 0)]),
                .sample(13, [("eth0", 2, 2_000, 600), ("q\"t", 9, 5_000, 1_000)]),
                .sample(14, [("eth0", 2, 2_000, 600)], deleted: [scriptedDeletion(13.5, "q\"t", 9, 6_000, 1_001)]),
                .sample(16, [("eth0", 2, 2_000_002_007, 600)]),
                .sample(17, [("eth0", 2, 2_000_002_007, 600)]),
            ]), configuration: PipelineConfiguration(interval: 2.5, seriesLifetime: 2.5, sampleLimit: 5),
            clock: PipelineClock(monotonic: { 0 }, wall: { 1_796_040_000.0625 }))
        let events = Events(board)
        pipeline.add(sink: LiveBoardFeed(board: board))
        pipeline.add(sink: events)
        var waiter = Waiter(waits: 6)
        pipeline.run(&waiter)
        let plain = String(decoding: board.document(history: false).bytes, as: UTF8.self)
        let full = String(decoding: board.document(history: true).bytes, as: UTF8.self)
        // Each sample's event, both documents after the deletion's sample
        // (the third), both at the end (the deleted row forgotten).
        let head = [
            #"{"caveats":["Estimates from interface counters: they include protocol overhead (headers,"#,
            #" retransmissions) and are not per-app accounting.","#,
            #""≥ marks a lower bound: some traffic could not be seen (a counter reset,"#,
            #" or an interface recreated without a deletion event); the true value is at least the figure.","#,
            #""~ marks a figure corrected for a 32-bit counter wrap; a figure without a mark is an exact reading of the counters."],"#,
            #""estimate":true,"#,
        ].joined()
        let tail = #""time":1796040000.063,"version":"pin\"1"}"#
        let e0 = #"{"events":{"deletions":0,"recreations":0,"resets":0,"wraps":0},"evidence":"scripted","#
        let e1 = #"{"events":{"deletions":1,"recreations":0,"resets":0,"wraps":0},"evidence":"scripted","#
        let event = "event: sample\ndata: "
        let expected: [String] = [
            [
                event, head, #""forgotten":[],"generation":1,"interfaces":["#, e0,
                #""kind":"ethernet","name":"eth0","netns":"","present":true,"quality":"exact","rx_bytes":1000,"#,
                #""rx_bytes_per_second":0,"since":1796040000.063,"tx_bytes":500,"tx_bytes_per_second":0},"#, e0,
                #""kind":"ethernet","name":"q\"t","netns":"","present":true,"quality":"exact","rx_bytes":0,"#,
                #""rx_bytes_per_second":0,"since":1796040000.063,"tx_bytes":0,"tx_bytes_per_second":0}],"interval_seconds":2.5,"#,
                #""partial":true,"schema":"ifmeter.interfaces","schema_version":2,"seconds":0,"since":0,"#, tail, "\n\n",
            ].joined(),
            [
                event, head, #""forgotten":[],"generation":2,"interfaces":["#, e0,
                #""kind":"ethernet","name":"eth0","netns":"","present":true,"quality":"exact","rx_bytes":2000,"#,
                #""rx_bytes_per_second":333.333,"since":1796040000.063,"tx_bytes":600,"tx_bytes_per_second":33.333},"#, e0,
                #""kind":"ethernet","name":"q\"t","netns":"","present":true,"quality":"exact","rx_bytes":5000,"#,
                #""rx_bytes_per_second":1666.667,"since":1796040000.063,"tx_bytes":1000,"tx_bytes_per_second":333.333}],"#,
                #""interval_seconds":2.5,"partial":true,"schema":"ifmeter.interfaces","schema_version":2,"seconds":3,"#, #""since":1,"#, tail,
                "\n\n",
            ].joined(),
            [
                event, head, #""forgotten":[],"generation":3,"interfaces":["#, e0,
                #""kind":"ethernet","name":"eth0","netns":"","present":true,"quality":"exact","rx_bytes":2000,"#,
                #""rx_bytes_per_second":0,"since":1796040000.063,"tx_bytes":600,"tx_bytes_per_second":0},"#, e1,
                #""kind":"ethernet","name":"q\"t","netns":"","present":false,"quality":"exact","rx_bytes":6000,"#,
                #""rx_bytes_per_second":2000,"since":1796040000.063,"tx_bytes":1001,"tx_bytes_per_second":2}],"interval_seconds":2.5,"#,
                #""partial":true,"schema":"ifmeter.interfaces","schema_version":2,"seconds":1,"since":2,"#, tail, "\n\n",
            ].joined(),
            [
                head, #""generation":3,"interfaces":["#, e0,
                #""kind":"ethernet","name":"eth0","netns":"","present":true,"quality":"exact","rx_bytes":2000,"#,
                #""rx_bytes_per_second":0,"since":1796040000.063,"tx_bytes":600,"tx_bytes_per_second":0},"#, e1,
                #""kind":"ethernet","name":"q\"t","netns":"","present":false,"quality":"exact","rx_bytes":6000,"#,
                #""rx_bytes_per_second":2000,"since":1796040000.063,"tx_bytes":1001,"tx_bytes_per_second":2}],"interval_seconds":2.5,"#,
                #""schema":"ifmeter.interfaces","schema_version":2,"seconds":1,"#, tail,
            ].joined(),
            [
                head, #""generation":3,"interfaces":["#, e0,
                #""history":[[0,0],[333.333,33.333],[0,0]],"kind":"ethernet","name":"eth0","netns":"","present":true,"#,
                #""quality":"exact","rx_bytes":2000,"rx_bytes_per_second":0,"since":1796040000.063,"tx_bytes":600,"tx_bytes_per_second":0},"#, e1,
                #""history":[[0,0],[1666.667,333.333],[2000,2]],"kind":"ethernet","name":"q\"t","netns":"","#,
                #""present":false,"quality":"exact","rx_bytes":6000,"rx_bytes_per_second":2000,"since":1796040000.063,"tx_bytes":1001,"#,
                #""tx_bytes_per_second":2}],"interval_seconds":2.5,"schema":"ifmeter.interfaces","schema_version":2,"#, #""seconds":1,"#, tail,
            ].joined(),
            [
                event, head, #""forgotten":[],"generation":4,"interfaces":["#, e0,
                #""kind":"ethernet","name":"eth0","netns":"","present":true,"quality":"exact","rx_bytes":2000002007,"#,
                #""rx_bytes_per_second":1000000003.5,"since":1796040000.063,"tx_bytes":600,"tx_bytes_per_second":0},"#, e1,
                #""kind":"ethernet","name":"q\"t","netns":"","present":false,"quality":"exact","rx_bytes":6000,"#,
                #""rx_bytes_per_second":0,"since":1796040000.063,"tx_bytes":1001,"tx_bytes_per_second":0}],"interval_seconds":2.5,"#,
                #""partial":true,"schema":"ifmeter.interfaces","schema_version":2,"seconds":2,"since":3,"#, tail, "\n\n",
            ].joined(),
            [
                event, head, #""forgotten":[{"name":"q\"t","netns":""}],"generation":5,"interfaces":["#, e0,
                #""kind":"ethernet","name":"eth0","netns":"","present":true,"quality":"exact","rx_bytes":2000002007,"#,
                #""rx_bytes_per_second":0,"since":1796040000.063,"tx_bytes":600,"tx_bytes_per_second":0}],"interval_seconds":2.5,"#,
                #""partial":true,"schema":"ifmeter.interfaces","schema_version":2,"seconds":1,"since":4,"#, tail, "\n\n",
            ].joined(),
            [
                head, #""generation":5,"interfaces":["#, e0,
                #""kind":"ethernet","name":"eth0","netns":"","present":true,"quality":"exact","rx_bytes":2000002007,"#,
                #""rx_bytes_per_second":0,"since":1796040000.063,"tx_bytes":600,"tx_bytes_per_second":0}],"interval_seconds":2.5,"#,
                #""schema":"ifmeter.interfaces","schema_version":2,"seconds":1,"#, tail,
            ].joined(),
            [
                head, #""generation":5,"interfaces":["#, e0,
                #""history":[[0,0],[333.333,33.333],[0,0],[1000000000,0],[0,0]],"kind":"ethernet","name":"eth0","#,
                #""netns":"","present":true,"quality":"exact","rx_bytes":2000002007,"rx_bytes_per_second":0,"since":1796040000.063,"#,
                #""tx_bytes":600,"tx_bytes_per_second":0}],"interval_seconds":2.5,"schema":"ifmeter.interfaces","#,
                #""schema_version":2,"seconds":1,"#, tail,
            ].joined(),
        ]
        let served = events.bodies + [plain, full]
        #expect(served.count == expected.count)
        for (n, (got, want)) in zip(served, expected).enumerated() { #expect(got == want, "response \(n)") }
    }

    @Test func theHistoryKeepsTheLastMinuteOnly() throws {
        let steps = (0...(LiveBoard.historyLength + 5)).map { n in
            ScriptedSource.Step.sample(Double(n), [("eth0", 2, UInt64(n) * 1_000, 0)])
        }
        let (board, _) = run(steps)
        guard case .array(let history)? = try document(board)["eth0"]?["history"] else {
            Issue.record("history asked for")
            return
        }
        #expect(history.count == LiveBoard.historyLength)
        #expect(history.allSatisfy { pair($0).0 == 1_000 })
    }
}
