import Foundation
import IfmeterCore
import IfmeterSampling
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's word at deletion, checked per link kind: for every kind this
/// kernel lets a test create, traffic goes through it, sysfs is read just
/// before the deletion, and the deletion event's final counters must equal
/// sysfs's, or be listed as under-reported (`lower_bound`) and be no more
/// than sysfs's. The sampler's table (`DeletionFinals`) is what this test
/// found: only a veth under-reports (its receive counters are its peer's).
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct LinkKindFinalsTests {
    /// Creates `xa` of a kind in the namespace and puts traffic through it
    /// both ways where the kind allows; returns what deletes it.
    func create(_ kind: String, in ns: TestNamespace) throws -> () throws -> Void {
        func up(_ names: String...) throws { for name in names { try ns.ip("link", "set", name, "up") } }
        func lower() throws {
            try ns.ip("link", "add", "base", "type", "veth", "peer", "name", "basep")
            try up("base", "basep")
        }
        let delete: () throws -> Void = { _ = try ns.ip("link", "del", "xa") }
        switch kind {
        case "veth":
            try ns.ip("link", "add", "xa", "type", "veth", "peer", "name", "xb")
            try up("xa", "xb")
            try ns.waitForCarrier("xa")
            try sendFrames(in: ns.name, interface: "xa", count: 40)
            try sendFrames(in: ns.name, interface: "xb", count: 25, size: 500)
            return delete
        case "tun", "tap":
            let fd = try ns.openTun("xa", tap: kind == "tap")
            try up("xa")
            // Received: what the descriptor writes. Sent: what the stack
            // routes or sends out of it.
            let packet =
                kind == "tun"
                ? ipv4Packet(payload: 200)
                : [UInt8](repeating: 0xFF, count: 6) + [0x02, 0, 0, 0, 0x88, 0x02, 0x88, 0xB5]
                    + [UInt8](repeating: 0x5A, count: 200)
            for _ in 0..<30 { _ = write(fd, packet, packet.count) }
            if kind == "tap" { try sendFrames(in: ns.name, interface: "xa", count: 20) }
            // Closing the descriptor deletes the device.
            return { close(fd) }
        case "macvlan", "macvtap":
            try lower()
            try ns.ip("link", "add", "xa", "link", "base", "type", kind, "mode", "bridge")
            try up("xa")
            try ns.waitForCarrier("base")
            try sendFrames(in: ns.name, interface: "xa", count: 30)
            try sendFrames(in: ns.name, interface: "basep", count: 20)
            return delete
        case "bridge":
            try lower()
            // Without multicast snooping: a snooping bridge sends two IGMP
            // reports of its own (224.0.0.106) in its first second up,
            // maybe between the sysfs read and the deletion.
            try ns.ip("link", "add", "xa", "type", "bridge", "mcast_snooping", "0")
            try ns.ip("link", "set", "base", "master", "xa")
            try up("xa")
            try ns.waitForCarrier("base")
            try waitForForwarding(ns, "base")
            try sendFrames(in: ns.name, interface: "xa", count: 30)
            try sendFrames(in: ns.name, interface: "basep", count: 20)
            return delete
        case "vxlan":
            // Encapsulated to this very host: what it sends comes back.
            try ns.ip("link", "add", "xa", "type", "vxlan", "id", "7", "dstport", "4789", "local", "127.0.0.1", "remote", "127.0.0.1", "dev", "lo")
            try up("xa")
            try sendFrames(in: ns.name, interface: "xa", count: 30)
            return delete
        case "ifb":
            try ns.ip("link", "add", "xa", "type", "ifb")
            try up("xa")
            try sendFrames(in: ns.name, interface: "xa", count: 30)
            return delete
        default:
            throw TestFailure("no recipe for \(kind)")
        }
    }

    /// Until the bridge port `name` forwards (its state, as `ip -d` says).
    func waitForForwarding(_ ns: TestNamespace, _ name: String) throws {
        _ = try waitFor("\(name) to forward") { () -> Bool? in
            try ns.ip("-d", "-o", "link", "show", "dev", name).contains("state forwarding") ? true : nil
        }
    }

    /// The interface's counters once the traffic sent is all counted: two
    /// reads a poll apart alike.
    func settledCounters(_ ns: TestNamespace, _ name: String) throws -> Counters {
        var last: Counters?
        return try waitFor("\(name)'s counters to settle") { () -> Counters? in
            let now = try sysfsCounters(ns, name)
            defer { last = now }
            return now == last ? now : nil
        }
    }

    @Test(arguments: ["veth", "tun", "tap", "macvlan", "macvtap", "bridge", "vxlan", "ifb"])
    func finalCountersAreCompleteOrListed(kind: String) throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let sampler = try NetworkNamespace.perform(in: ns.name) { try NetlinkSampler(options: SamplerOptions(sysfs: nil)) }
        let delete = try create(kind, in: ns)
        _ = try sampler.read()
        let truth = try settledCounters(ns, "xa")
        #expect(truth.anyNonZero, "\(kind): something went through it (vxlan here counts transmit errors)")
        try delete()
        var events: [DeletionEvent] = []
        let event = try waitFor("\(kind): the deletion event of xa", every: 0.05) { () throws -> DeletionEvent? in
            events += try sampler.read().events.deleted
            return events.first { $0.interface.name == "xa" }
        }
        for key in CounterKey.allCases {
            let said = event.interface.counters.value(key), sysfsValue = truth.value(key)
            if event.lowerBound.contains(key) {
                #expect(said <= sysfsValue, "\(kind) \(key.jsonKey): a lower bound above the truth (\(said) > \(sysfsValue))")
            } else {
                #expect(said == sysfsValue, "\(kind) \(key.jsonKey): the event says \(said), sysfs \(sysfsValue), and it is not listed")
            }
        }
        if kind == "veth" {
            // Its peer was deleted with it, in the same namespace: its
            // transmit counters completed this end's receive counters.
            #expect(event.lowerBound.isEmpty, "the peer's deletion was seen: nothing is under-reported")
            let peer = try #require(events.first { $0.interface.name == "xb" })
            #expect(peer.lowerBound.isEmpty && peer.interface.counters.rxBytes == truth.txBytes)
        } else {
            #expect(event.lowerBound.isEmpty, "\(kind) is complete on this kernel")
        }
    }
}
