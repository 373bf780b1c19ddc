import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterRemoteWrite
import Synchronization
import Testing

/// Issue 48, finding 1, in process: which interfaces' series each push
/// carries. A gone interface is pushed once more, with its final value,
/// and left out after (its stale marker goes then), however many others go
/// at the same time; one that comes back and goes again between two pushes
/// has its new final value pushed.
@Suite struct GoneInterfaceTests {
    /// The rows of an engine's interfaces, and the names each push kept.
    final class Rows: SeriesSource {
        let rows = Mutex<[ExpositionRow]>([])
        let kept = Mutex<[[String]]>([])

        func visitSeries(_ visitor: inout some SeriesVisitor, keeping: (ExpositionRow) -> Bool) {
            var input = TypedSeriesFixture.input(.ifmeter)
            input.interfaces = rows.withLock { $0 }
            var names: [String] = []
            input.visitSeries(&visitor) { row in
                let keep = keeping(row)
                if keep { names.append(row.name) }
                return keep
            }
            kept.withLock { $0.append(names) }
        }

        func setRemoteWrite(_ statuses: [RemoteWriteStatus]) {}
    }

    func link(_ name: String, index: Int, bytes: UInt64) -> InterfaceSample {
        InterfaceSample(
            name: name, index: index, classification: Classification(kind: .virtual, evidence: "test"),
            counters: Counters(rxBytes: bytes, txBytes: bytes, rxPackets: 1, txPackets: 1))
    }

    @Test func aGoneInterfaceIsPushedOnceWithItsFinalValueWhateverGoesBesideIt() {
        var engine = DeltaEngine()
        let source = Rows()
        let feed = RemoteWriteFeed(source: source, writers: [], externalLabels: [])
        func push(_ interfaces: [InterfaceSample], at t: Double) -> [String] {
            engine.apply(Sample(time: t, interfaces: interfaces))
            source.rows.withLock { $0 = engine.interfaces.map(ExpositionRow.init) }
            _ = feed.encode(timestampMs: Int64(t * 1000))
            return source.kept.withLock { $0.last ?? [] }
        }
        #expect(push([link("a0", index: 2, bytes: 10), link("b0", index: 3, bytes: 10)], at: 1) == ["a0", "b0"])
        #expect(push([link("a0", index: 2, bytes: 20)], at: 2) == ["a0", "b0"], "b0 gone: its final value")
        #expect(push([link("a0", index: 2, bytes: 30)], at: 3) == ["a0"], "then its stale marker")
        // a0 goes while b0 is still left out: a0's final value is pushed
        // all the same (asked twice, the filter once dropped it).
        #expect(push([], at: 4) == ["a0"])
        #expect(push([], at: 5) == [])
        // b0 comes back and goes again between two pushes: its new final
        // value is pushed, once.
        engine.apply(Sample(time: 5.5, interfaces: [link("b0", index: 3, bytes: 50)]))
        #expect(push([], at: 6) == ["b0"])
        #expect(push([], at: 7) == [])
    }
}
