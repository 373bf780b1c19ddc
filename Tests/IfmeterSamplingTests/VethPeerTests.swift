#if os(Linux)
import IfmeterCore
@testable import IfmeterSampling
import Testing

/// `VethPeers.complete` on deletion events as the kernel announces them:
/// each end's final receive counters are under-reported (listed), and only
/// the end created second names its peer (`ip link add P type veth peer
/// name Q` registers Q first and announces it before P exists; at deletion
/// neither names the other). Pure: no namespace needed.
struct VethPeerTests {
    static let veth = Classification(kind: .virtual, evidence: "link-kind:veth")

    /// A veth's deletion as the sampler makes it: receive counters
    /// under-reported (here 0, as the kernel says them), `peer` when known.
    static func deletion(
        _ name: String, index: Int, netns: String = "", tx: UInt64, txPackets: UInt64, peer: PeerLink? = nil
    ) -> DeletionEvent {
        DeletionEvent(
            time: 1,
            interface: InterfaceSample(
                name: name, netns: netns, index: index, classification: veth, width: .bits64,
                counters: Counters(rxBytes: 0, txBytes: tx, rxPackets: 0, txPackets: txPackets)),
            lowerBound: DeletionFinals.lowerBound(linkKind: "veth"), peer: peer)
    }

    /// Issue 29, finding 8: the end created first named no peer, so its
    /// deletion stayed a lower bound though its peer's was in the same
    /// batch. The peer that names it completes it too, in either order.
    @Test(arguments: [false, true])
    func theEndThatNamesNoPeerIsCompletedByTheEndThatNamesIt(firstCreatedFirst: Bool) {
        let q = Self.deletion("q0", index: 2, tx: 300, txPackets: 3)
        let p = Self.deletion("p0", index: 3, tx: 700, txPackets: 7, peer: PeerLink(index: 2))
        var events = firstCreatedFirst ? [q, p] : [p, q]
        VethPeers.complete(&events)
        let byName = Dictionary(uniqueKeysWithValues: events.map { ($0.interface.name, $0) })
        #expect(byName["q0"]?.lowerBound == [], "\(events)")
        #expect(byName["q0"]?.interface.counters == Counters(rxBytes: 700, txBytes: 300, rxPackets: 7, txPackets: 3))
        #expect(byName["p0"]?.lowerBound == [], "\(events)")
        #expect(byName["p0"]?.interface.counters == Counters(rxBytes: 300, txBytes: 700, rxPackets: 3, txPackets: 7))
    }

    /// The same across namespaces: P in `a` names Q by index and the id
    /// `a` gives `b`; Q in `b` names nothing.
    @Test func theEndInAnotherNamespaceIsCompletedToo() {
        var events = [
            Self.deletion("q0", index: 5, netns: "b", tx: 40, txPackets: 1),
            Self.deletion("p0", index: 5, netns: "a", tx: 90, txPackets: 2, peer: PeerLink(index: 5, netnsID: 7)),
        ]
        VethPeers.complete(&events, namespaces: { id, from in id == 7 && from == "a" ? ["b"] : [] })
        #expect(events.allSatisfy { $0.lowerBound.isEmpty }, "\(events)")
        #expect(events[0].interface.counters.rxBytes == 90 && events[0].interface.counters.rxPackets == 2)
        #expect(events[1].interface.counters.rxBytes == 40 && events[1].interface.counters.rxPackets == 1)
    }

    /// An end whose peer's deletion was not seen keeps its receive
    /// counters listed: what its peer sent after the last sample is
    /// unknown. A deletion naming another interface as its peer does not
    /// complete it.
    @Test func anEndWhosePeerWentUnseenStaysListed() {
        var events = [
            Self.deletion("q0", index: 2, tx: 300, txPackets: 3),
            Self.deletion("p9", index: 9, tx: 700, txPackets: 7, peer: PeerLink(index: 8)),
            Self.deletion("q1", index: 2, netns: "other", tx: 1, txPackets: 1),
        ]
        VethPeers.complete(&events)
        #expect(events.allSatisfy { $0.lowerBound == DeletionFinals.lowerBound(linkKind: "veth") }, "\(events)")
        #expect(events.allSatisfy { $0.interface.counters.rxBytes == 0 })
    }

    /// What the engine makes of a pair born and gone between two samples
    /// (both ends' deletions in one reading): exact once completed, each
    /// end's totals its own finals.
    @Test func aCompletedPairIsExactInTheEngine() {
        var engine = DeltaEngine()
        engine.apply(Sample(time: 0, interfaces: []))
        var events = [
            Self.deletion("q0", index: 2, tx: 0, txPackets: 0),
            Self.deletion("p0", index: 3, tx: 0, txPackets: 0, peer: PeerLink(index: 2)),
        ]
        VethPeers.complete(&events)
        engine.apply(SourceReading(events: LinkEvents(deleted: events), sample: Sample(time: 1, interfaces: [])))
        for name in ["p0", "q0"] {
            let totals = engine.totals(for: name)
            #expect(totals?.quality == .exact && totals?.events.deletions == 1, "\(name): \(String(describing: totals))")
        }
    }
}
#endif
