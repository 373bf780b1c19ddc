import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
@testable import IfmeterServe
import IfmeterTestSupport
import Testing

/// serve's surfaces read one read model (issue 46): the scrape cache owns
/// it, the dashboard's board renders it and keeps no rows of its own, so a
/// board woken between samples shows the rates the model already worked
/// out, and the scrape's and the board's figures are one snapshot's.
@Suite struct OneReadModelTests {
    struct Waiter: PipelineWaiter {
        var waits: Int
        mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool {
            waits -= 1
            return waits >= 0
        }
    }

    /// Wakes the board after the second update and reads its document then.
    final class WakeAfterSecond: PipelineSink {
        let board: LiveBoard
        let cache: ScrapeCache
        var seen = 0
        var document: String?
        var snapshot: ModelSnapshot?
        init(_ board: LiveBoard, _ cache: ScrapeCache) {
            self.board = board
            self.cache = cache
        }
        func receive(_ update: borrowing PipelineUpdate) {
            seen += 1
            guard seen == 2 else { return }
            document = String(decoding: board.document(history: true).bytes, as: UTF8.self)
            snapshot = cache.model.snapshot()
        }
    }

    @Test func aBoardWokenBetweenSamplesShowsTheModelsRatesAndRows() throws {
        let cache = ScrapeCache(families: .ifmeter, version: "test", interval: 1)
        let board = LiveBoard(interval: 1, version: "test", cache: cache)
        let pipeline = Pipeline(
            source: ScriptedSource([
                .sample(10, [("eth0", 2, 1_000, 100), ("wg0", 3, 0, 0)]),
                .sample(11, [("eth0", 2, 5_000, 300), ("wg0", 3, 0, 0)]),
            ]), configuration: PipelineConfiguration(interval: 1, sampleLimit: 2),
            clock: PipelineClock(monotonic: { 0 }, wall: { 1_796_040_000 }))
        pipeline.add(sink: ScrapeFeed(cache: cache) {})
        pipeline.add(sink: LiveBoardFeed(board: board))
        let waker = WakeAfterSecond(board, cache)
        pipeline.add(sink: waker)
        var waiter = Waiter(waits: 3)
        pipeline.run(&waiter)
        let text = try #require(waker.document)
        let snapshot = try #require(waker.snapshot)
        let document = try JSONParser.parse(text)
        guard case .array(let rows)? = document["interfaces"] else { throw TestFailure("no interfaces in \(text)") }
        let eth0 = try #require(rows.first { $0["name"]?.stringValue == "eth0" })
        // Asleep until now, the board still shows the last interval's
        // rates: 4,000 and 200 bytes in 1 s, worked out by the model.
        #expect(eth0["rx_bytes_per_second"]?.doubleValue == 4_000)
        #expect(eth0["tx_bytes_per_second"]?.doubleValue == 200)
        // Its history starts at the next sample.
        #expect(eth0["history"] == .array([]))
        // Every row and figure is the model's snapshot's, of its generation.
        #expect(document["generation"]?.uint64Value == UInt64(snapshot.generation))
        #expect(rows.map { $0["name"]?.stringValue } == snapshot.rows.map(\.name))
        for (row, modelRow) in zip(rows, snapshot.rows) {
            #expect(row["rx_bytes"]?.uint64Value == modelRow.counters.value(.rxBytes))
            #expect(row["tx_bytes"]?.uint64Value == modelRow.counters.value(.txBytes))
            #expect(row["rx_bytes_per_second"]?.doubleValue == modelRow.rxRate)
        }
        // The scrape renders the same snapshot.
        var collector = SeriesCollector()
        cache.visitSeries(&collector)
        let exposed = collector.series.first { $0.name == "ifmeter_receive_bytes_total" && $0.labels.contains(.init("interface", "eth0")) }
        #expect(exposed?.value == .unsigned(5_000))
        #expect(eth0["rx_bytes"]?.uint64Value == 5_000)
    }
}
