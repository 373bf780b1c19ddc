import Foundation
import IfmeterCore
@testable import IfmeterSampling
import IfmeterTestSupport
import Testing

/// Where a netlink sample lives (issue 9: serve's memory at 4000
/// interfaces): built over the last sample when nothing holds that one,
/// never over one somebody holds, and refreshed in place.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct SampleStorageTests {
    private func storage(_ sample: Sample) -> UnsafeRawPointer? {
        sample.interfaces.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    @Test func aSampleIsBuiltOverTheLastOneWhenNobodyHoldsIt() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let sampler = try NetworkNamespace.perform(in: pair.a.name) {
            try NetlinkSampler(options: SamplerOptions(sysfs: nil, catalogRefreshSeconds: 3600))
        }
        let sent = 50 * VethPair.frameBytes(payload: 500)

        // The first sample is let go of: the second takes its storage.
        var first: UnsafeRawPointer?, firstTx: UInt64 = 0
        do {
            let sample = try sampler.read().sample
            first = storage(sample)
            firstTx = try sample.reading(pair.nameA).counters.txBytes
        }
        try pair.sendUDP(count: 50, payload: 500)
        let second = try sampler.read().sample
        #expect(storage(second) == first, "no second array of every link while the first is gone")
        #expect(try second.reading(pair.nameA).counters.txBytes - firstTx == sent)

        // The second is held: the third is built elsewhere, and the second
        // still says what it said.
        let held = try second.reading(pair.nameA).counters
        try pair.sendUDP(count: 50, payload: 500)
        let third = try sampler.read().sample
        #expect(storage(third) != storage(second), "a sample somebody holds is never written over")
        #expect(try second.reading(pair.nameA).counters == held)
        #expect(try third.reading(pair.nameA).counters.txBytes - held.txBytes == sent)
    }

    @Test func thePeriodicRefreshTakesNewFactsInPlace() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        // No link notifications: only the refresh (here at every sample)
        // can learn the new MTU and the new name.
        let sampler = try NetworkNamespace.perform(in: pair.a.name) {
            try NetlinkSampler(options: SamplerOptions(sysfs: nil, catalogRefreshSeconds: 0, linkEvents: false))
        }
        var address: UnsafeRawPointer?, before: UInt64 = 0, version: UInt64 = 0
        var engine = DeltaEngine()
        do {
            _ = try sampler.read() // the slow path: the templates are made
            let sample = try sampler.read().sample
            engine.apply(sample)
            address = storage(sample)
            let a = try sample.reading(pair.nameA)
            before = a.counters.txBytes
            version = a.factsVersion
            #expect(a.attributes?.mtu == 1500)
        }
        try pair.a.ip("link", "set", pair.nameA, "mtu", "1400")
        try pair.sendUDP(count: 20, payload: 300)
        let after = try sampler.read().sample
        let a = try after.reading(pair.nameA)
        #expect(a.attributes?.mtu == 1400, "the refresh read the new MTU")
        #expect(a.factsVersion > version, "under a new facts version, so the engine compares them")
        #expect(a.counters.txBytes - before == 20 * VethPair.frameBytes(payload: 300))
        #expect(storage(after) == address, "refreshed in place, not rebuilt from readings")
        // The engine, comparing the new facts, still counts every byte sent,
        // exactly, as one steady interval of the same series.
        let delta = try #require(engine.apply(after).first { $0.name == pair.nameA })
        #expect(delta.counters.txBytes == 20 * VethPair.frameBytes(payload: 300))
        #expect(delta.quality == .exact && delta.change == .steady, "\(delta.quality) \(delta.change)")

        // A link gone without a notification: the refresh finds it missing,
        // and the sample is rebuilt without it.
        try pair.b.ip("link", "del", pair.nameB)
        let gone = try sampler.read().sample
        #expect(!gone.interfaces.contains { $0.name == pair.nameA })
        #expect(gone.interfaces.contains { $0.name == "lo" })
    }
}

/// The link catalog's table: positions by index beside one array of
/// entries, the last entry moved into a removed one's place.
@Suite(.blocking) struct LinkTableTests {
    private func entry(_ index: Int, _ name: String) -> LinkEntry {
        LinkEntry(
            index: index, name: name, classification: Classification(kind: .virtual, evidence: "test"),
            attributes: LinkAttributes(), speedCeilingBps: nil, linkKind: "veth", arphrd: 1, hardware: nil, peer: nil)
    }

    @Test func findsEveryLinkAfterRemovalsAndReplacements() {
        var table = LinkTable()
        for index in [7, 3, 12, 1, 40] { table[index] = entry(index, "if\(index)") }
        #expect(table.count == 5)
        table.removeValue(forKey: 3) // from the middle: 40 moves into its place
        table.removeValue(forKey: 40) // the moved one
        table.removeValue(forKey: 99) // never there
        #expect(table.count == 3)
        #expect(table[3] == nil && table[40] == nil)
        for index in [7, 12, 1] { #expect(table[index]?.name == "if\(index)") }
        table[12] = entry(12, "renamed")
        table[5] = entry(999, "if5") // the key wins over the entry's index
        table[7] = nil
        #expect(table.count == 3)
        #expect(table[12]?.name == "renamed" && table[5]?.index == 5 && table[7] == nil)
        #expect(Set(table.indexes) == [12, 1, 5])
    }
}
