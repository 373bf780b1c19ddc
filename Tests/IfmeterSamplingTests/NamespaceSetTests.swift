import Foundation
import IfmeterCore
import IfmeterSampling
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Several namespaces as one source, and the honesty of deletions across
/// them: a veth's receive counters are exact only when its peer's deletion
/// is seen too; never is a lower bound above the truth.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct NamespaceSetTests {
    func set(_ names: [String]) throws -> NamespaceSet {
        try NamespaceSet(.named(names), kind: .netlink, options: SamplerOptions(sysfs: nil))
    }

    /// Applies readings until the engine has seen `name` deleted.
    func readUntilDeleted(_ source: any CounterSource, _ engine: inout DeltaEngine, _ key: SeriesKey) throws {
        for _ in 0..<40 {
            _ = engine.apply(try source.read())
            if engine.totals(for: key)?.deletedAt != nil { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw TestFailure("\(key) was not seen deleted")
    }

    @Test func aVethDeletedAfterABurstIsExactWhenBothEndsAreWatched() throws {
        try Netns.requireRoot()
        let sent = 40 * VethPair.frameBytes(payload: 700)
        for watchBoth in [false, true] {
            let pair = try VethPair()
            let source = try set(watchBoth ? [pair.a.name, pair.b.name] : [pair.a.name])
            var engine = DeltaEngine()
            _ = engine.apply(try source.read())
            // A burst from A to B, then the pair is deleted at once.
            try pair.sendUDP(count: 40, payload: 700)
            try pair.a.ip("link", "del", pair.nameA)
            let vA = SeriesKey(netns: pair.a.name, name: pair.nameA), vB = SeriesKey(netns: pair.b.name, name: pair.nameB)
            try readUntilDeleted(source, &engine, vA)
            let a = try #require(engine.totals(for: vA))
            #expect(a.totals.txBytes == sent, "transmit counters are complete")
            if watchBoth {
                try readUntilDeleted(source, &engine, vB)
                let b = try #require(engine.totals(for: vB))
                #expect(b.totals.rxBytes == sent && b.quality == .exact, "B's receive counters are A's transmit counters, to the byte")
                #expect(a.quality == .exact)
            } else {
                #expect(a.quality == .lowerBound, "its peer's part of the receive counters is unknown")
                #expect(a.totals.rxBytes == 0, "and never above the truth (nothing came back)")
            }
        }
    }

    @Test func namespacesThatComeAndGoAreFollowed() throws {
        try Netns.requireRoot()
        let first = try TestNamespace()
        let source = try NamespaceSet(.all, kind: .netlink, options: SamplerOptions(sysfs: nil))
        #expect(source.namespaces.first == "" && source.namespaces.contains(first.name))
        var engine = DeltaEngine()
        _ = engine.apply(try source.read())
        // A new namespace with a veth pair inside, then traffic, then it goes.
        let second = try TestNamespace()
        try second.ip("link", "add", "n1", "type", "veth", "peer", "name", "n2")
        try second.ip("link", "set", "n1", "up")
        try second.ip("link", "set", "n2", "up")
        _ = engine.apply(try source.read())
        #expect(source.namespaces.contains(second.name))
        try second.waitForCarrier("n1")
        try sendFrames(in: second.name, interface: "n1", count: 30, size: 400)
        let truth = try sysfsCounters(second, "n1")
        second.remove()
        _ = engine.apply(try source.read())
        #expect(!source.namespaces.contains(second.name))
        let n1 = try #require(engine.totals(for: SeriesKey(netns: second.name, name: "n1")))
        #expect(n1.events.deletions == 1 && !n1.present, "a namespace that went away deleted its interfaces")
        #expect(n1.totals.txBytes == truth.txBytes && n1.quality == .exact, "with the finals read before it closed")
    }

    /// Veths deleted and recreated at random under traffic, in a watched
    /// namespace whose peers are, or are not, watched too: every total
    /// labelled exact equals what was sent, and every lower bound is at
    /// most that.
    @Test(arguments: [UInt64(1), 2, 3])
    func neverALowerBoundAboveTheTruth(seed: UInt64) throws {
        try Netns.requireRoot()
        var rng = SplitMix64(seed: seed)
        let a = try TestNamespace(), b = try TestNamespace()
        let watchBoth = seed % 2 == 0
        let source = try set(watchBoth ? [a.name, b.name] : [a.name])
        var engine = DeltaEngine()
        let names = ["r0", "r1", "r2"]
        var alive = Set<String>()
        // What went through each end since the baseline: tx of the A end,
        // rx of the A end (sent from the B end).
        var sentFromA: [String: UInt64] = [:], sentFromB: [String: UInt64] = [:]
        func create(_ name: String) throws {
            try a.ip("link", "add", name, "type", "veth", "peer", "name", name + "p", "netns", b.name)
            try a.ip("link", "set", name, "up")
            try b.ip("link", "set", name + "p", "up")
            try a.waitForCarrier(name)
            alive.insert(name)
        }
        for name in names { try create(name) }
        _ = engine.apply(try source.read())
        for _ in 0..<12 {
            for name in alive.sorted() {
                let out = Int.random(in: 0...20, using: &rng), back = Int.random(in: 0...20, using: &rng)
                try sendFrames(in: a.name, interface: name, count: out, size: 300)
                try sendFrames(in: b.name, interface: name + "p", count: back, size: 300)
                sentFromA[name, default: 0] += UInt64(out * 300)
                sentFromB[name, default: 0] += UInt64(back * 300)
            }
            let victim = names[Int.random(in: 0..<names.count, using: &rng)]
            if alive.contains(victim), Bool.random(using: &rng) {
                try a.ip("link", "del", victim)
                alive.remove(victim)
            } else if !alive.contains(victim) {
                try create(victim)
            }
            _ = engine.apply(try source.read())
        }
        // Every veth left deleted seen so, then one reading more.
        for name in names where !alive.contains(name) {
            try readUntilDeleted(source, &engine, SeriesKey(netns: a.name, name: name))
        }
        _ = engine.apply(try source.read())
        let deletions = names.compactMap { engine.totals(for: SeriesKey(netns: a.name, name: $0))?.events.deletions }.reduce(0, +)
        #expect(deletions > 0, "seed \(seed): the run deleted veths")
        for name in names {
            let totals = try #require(engine.totals(for: SeriesKey(netns: a.name, name: name)))
            let tx = totals.totals.txBytes, rx = totals.totals.rxBytes
            let trueTx = sentFromA[name, default: 0], trueRx = sentFromB[name, default: 0]
            if totals.quality == .exact {
                #expect(tx == trueTx && rx == trueRx, "seed \(seed) \(name): exact \(tx)/\(rx), truth \(trueTx)/\(trueRx)")
            } else {
                #expect(tx <= trueTx && rx <= trueRx, "seed \(seed) \(name): lower bound \(tx)/\(rx) above \(trueTx)/\(trueRx)")
            }
            if watchBoth { #expect(totals.quality == .exact, "seed \(seed) \(name): both ends watched") }
        }
    }

    @Test func getifaddrsSamplesATunWithoutAnAddress() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let fd = try ns.openTun("tunA")
        defer { close(fd) }
        try ns.ip("link", "set", "tunA", "up")
        let packet = ipv4Packet(payload: 100)
        for _ in 0..<7 { _ = write(fd, packet, packet.count) }
        let sample = try set([ns.name]).read().sample
        let portable = try NamespaceSet(.named([ns.name]), kind: .getifaddrs, options: SamplerOptions(sysfs: nil)).read().sample
        let tun = try #require(portable.interfaces.first { $0.name == "tunA" }, "getifaddrs lists the tun though it has no address")
        #expect(tun.counters.rxBytes == UInt64(7 * packet.count) && tun.width == .bits32)
        #expect(tun.kind == .tunnel)
        #expect(Set(portable.interfaces.map(\.name)) == Set(sample.interfaces.map(\.name)))
    }

    @Test func aRenameMovesTheSeriesAndKeepsEveryByte() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let source = try set([ns.name])
        var engine = DeltaEngine()
        _ = engine.apply(try source.read())
        // Created under a temporary name and renamed at once, as container
        // tools do: no series is left under the temporary name.
        try ns.ip("link", "add", "vca", "type", "veth", "peer", "name", "vcb")
        try ns.ip("link", "set", "vca", "name", "wwan9")
        try ns.ip("link", "set", "wwan9", "up")
        try ns.ip("link", "set", "vcb", "up")
        _ = engine.apply(try source.read())
        #expect(engine.totals(for: SeriesKey(netns: ns.name, name: "vca")) == nil)
        // A rename with traffic on both sides of it.
        try ns.waitForCarrier("wwan9")
        try sendFrames(in: ns.name, interface: "wwan9", count: 10, size: 400)
        _ = engine.apply(try source.read())
        try sendFrames(in: ns.name, interface: "wwan9", count: 5, size: 400)
        try ns.ip("link", "set", "wwan9", "down")
        try ns.ip("link", "set", "wwan9", "name", "wwan7")
        try ns.ip("link", "set", "wwan7", "up")
        try sendFrames(in: ns.name, interface: "wwan7", count: 3, size: 400)
        _ = engine.apply(try source.read())
        let truth = try sysfsCounters(ns, "wwan7")
        let moved = try #require(engine.totals(for: SeriesKey(netns: ns.name, name: "wwan7")))
        #expect(engine.totals(for: SeriesKey(netns: ns.name, name: "wwan9")) == nil, "the series moved")
        #expect(moved.totals.txBytes + moved.baseline.txBytes == truth.txBytes && moved.quality == .exact)
    }
}
