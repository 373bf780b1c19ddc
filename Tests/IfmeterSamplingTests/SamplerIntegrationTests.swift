import Foundation
import IfmeterCore
import IfmeterSampling
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Real interfaces in the test's own namespaces: veth pairs, tun devices,
/// real traffic, checked against the bytes sent.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct SamplerIntegrationTests {
    func counters(_ sample: Sample, _ name: String) throws -> Counters {
        try sample.reading(name).counters
    }

    @Test func netlinkDeltasMatchTheBytesSent() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let sampler = try NetworkNamespace.perform(in: pair.a.name) {
            try NetlinkSampler(options: SamplerOptions(sysfs: nil))
        }
        let peer = try NetworkNamespace.perform(in: pair.b.name) {
            try NetlinkSampler(options: SamplerOptions(sysfs: nil))
        }
        var engine = DeltaEngine()
        let before = try sampler.read().sample, peerBefore = try peer.read().sample
        engine.apply(before)
        try pair.sendUDP(count: 200, payload: 1000)
        let after = try sampler.read().sample, peerAfter = try peer.read().sample
        let deltas = engine.apply(after)

        let sent = 200 * VethPair.frameBytes(payload: 1000)
        let a0 = try counters(before, pair.nameA), a1 = try counters(after, pair.nameA)
        #expect(a1.txBytes - a0.txBytes == sent)
        #expect(a1.txPackets - a0.txPackets == 200)
        #expect(a1.rxBytes == a0.rxBytes, "nothing should come back (no ICMP, no ARP, no IPv6)")
        let b0 = try counters(peerBefore, pair.nameB), b1 = try counters(peerAfter, pair.nameB)
        #expect(b1.rxBytes - b0.rxBytes == sent)
        #expect(b1.rxPackets - b0.rxPackets == 200)

        let delta = try #require(deltas.first { $0.name == pair.nameA })
        #expect(delta.counters.txBytes == sent && delta.change == .steady && delta.quality == .exact)
        #expect(engine.totals(for: pair.nameA)?.totals.txBytes == sent)
        // 64-bit counters from the stats dump, and the veth's kind.
        let vA = try #require(after.interfaces.first { $0.name == pair.nameA })
        #expect(vA.width == .bits64)
        #expect(vA.classification == Classification(kind: .virtual, evidence: "link-kind:veth"))
        #expect(vA.index == (try pair.a.ifindex(pair.nameA)))
        #expect(vA.speedBps == nil, "a veth's 10 Gbit/s is no ceiling")
        #expect(vA.attributes?.operstate == "up" && vA.attributes?.mtu == 1500)
        #expect(after.interfaces.first { $0.name == "lo" }?.classification?.kind == .loopback)
    }

    @Test func getifaddrsAgreesWithNetlinkBelow4GiB() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let netlink = try NetworkNamespace.perform(in: pair.a.name) {
            try NetlinkSampler(options: SamplerOptions(sysfs: nil))
        }
        // getifaddrs opens its socket per call: each sample runs inside.
        let portable = try NetworkNamespace.perform(in: pair.a.name) {
            try GetifaddrsSampler(options: SamplerOptions(sysfs: nil))
        }
        func portableSample() throws -> Sample { try NetworkNamespace.perform(in: pair.a.name) { try portable.read().sample } }
        let n0 = try netlink.read().sample, g0 = try portableSample()
        try pair.sendUDP(count: 150, payload: 700)
        let n1 = try netlink.read().sample, g1 = try portableSample()
        for name in [pair.nameA, "lo"] {
            #expect(try counters(n1, name) == counters(g1, name), "\(name): both sources read the same counters")
        }
        #expect(try counters(g1, pair.nameA).txBytes - counters(g0, pair.nameA).txBytes == 150 * VethPair.frameBytes(payload: 700))
        #expect(try counters(n1, pair.nameA).txBytes - counters(n0, pair.nameA).txBytes == 150 * VethPair.frameBytes(payload: 700))
        let vA = try #require(g1.interfaces.first { $0.name == pair.nameA })
        #expect(vA.width == .bits32)
        #expect(vA.classification?.kind == .virtual)
        #expect(Set(n1.interfaces.map(\.name)) == Set(g1.interfaces.map(\.name)))
    }

    @Test func linkDumpFallbackReadsTheSameCounters() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let (stats, link) = try NetworkNamespace.perform(in: pair.a.name) {
            (
                try NetlinkSampler(options: SamplerOptions(sysfs: nil)),
                try NetlinkSampler(options: SamplerOptions(sysfs: nil, forceLinkDump: true))
            )
        }
        try pair.sendUDP(count: 20, payload: 100)
        let s = try stats.read().sample, l = try link.read().sample
        #expect(stats.mode == .stats && link.mode == .link)
        #expect(try counters(s, pair.nameA) == counters(l, pair.nameA))
        #expect(s.interfaces.map(\.name).sorted() == l.interfaces.map(\.name).sorted())
    }

    @Test func tunIsATunnelAndItsRecreationIsSeen() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let sampler = try NetworkNamespace.perform(in: ns.name) { try NetlinkSampler(options: SamplerOptions(sysfs: nil)) }
        func openTun() throws -> Int32 {
            let fd = try ns.openTun("tunT")
            try ns.ip("link", "set", "tunT", "up")
            return fd
        }
        func push(_ fd: Int32, count: Int, payload: Int) throws {
            let packet = ipv4Packet(payload: payload)
            for _ in 0..<count {
                guard write(fd, packet, packet.count) == packet.count else {
                    throw TestFailure("write to tun: \(String(cString: strerror(errno)))")
                }
            }
        }
        var engine = DeltaEngine()
        let first = try openTun()
        let firstIndex = try ns.ifindex("tunT")
        engine.apply(try sampler.read().sample) // before tunT has traffic
        try push(first, count: 10, payload: 100)
        let s1 = try sampler.read().sample
        engine.apply(s1)
        #expect(try counters(s1, "tunT").rxBytes == 10 * 128)
        let tun = try #require(s1.interfaces.first { $0.name == "tunT" })
        #expect(tun.classification == Classification(kind: .tunnel, evidence: "link-kind:tun"))
        #expect(tun.speedBps == nil, "tun's 10 Mbit/s is no ceiling")

        // Deleted (closing a non-persistent tun deletes it) and recreated
        // under the same name between two samples.
        close(first)
        let second = try openTun()
        defer { close(second) }
        let secondIndex = try ns.ifindex("tunT")
        #expect(secondIndex != firstIndex)
        try push(second, count: 3, payload: 50)
        let s2 = try sampler.read().sample
        let delta = try #require(engine.apply(s2).first { $0.name == "tunT" })
        #expect(delta.change == .recreated)
        #expect(delta.index == secondIndex)
        #expect(delta.counters.rxBytes == 3 * 78, "the new instance counts in full")
        // Without a deletion event the old instance's last traffic is unknown.
        #expect(delta.quality == .lowerBound)
        let totals = try #require(engine.totals(for: "tunT"))
        #expect(totals.events.recreations == 1)
        #expect(totals.totals.rxBytes == 10 * 128 + 3 * 78)
    }

    @Test func catalogFollowsLinkEventsWithoutDumps() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        for events in [true, false] {
            let sampler = try NetworkNamespace.perform(in: ns.name) {
                try NetlinkSampler(options: SamplerOptions(sysfs: nil, catalogRefreshSeconds: 3600, linkEvents: events))
            }
            _ = try sampler.read().sample
            _ = try sampler.read().sample
            _ = try sampler.read().sample
            #expect(sampler.catalogRefreshes == 1)
            try ns.ip("link", "add", "x7", "type", "veth", "peer", "name", "y7")
            let reading = try sampler.read()
            let s = reading.sample
            // With notifications the new links are known without a dump;
            // without, the changed set of indexes triggers one.
            #expect(sampler.catalogRefreshes == (events ? 1 : 2))
            #expect(s.interfaces.first { $0.name == "x7" }?.classification == Classification(kind: .virtual, evidence: "link-kind:veth"))
            if events { #expect(Set(reading.events.created.map(\.name)) == ["x7", "y7"]) }
            try ns.ip("link", "set", "x7", "name", "renamed7")
            let renamed = try sampler.read().sample
            // A rename keeps the index set: a notification tells at once,
            // otherwise the next periodic refresh.
            #expect(renamed.interfaces.contains { $0.name == "renamed7" } == events)
            try ns.ip("link", "del", "renamed7")
        }
    }
}
