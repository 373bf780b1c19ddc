import CNetlink
import IfmeterSampling
import Testing

/// libnl-3's sockets are what the sampler stands on (libnl-route-3 is not
/// linked any more: ifmeter parses its own messages).
@Suite struct LibnlLinkageTests {
    @Test func aLibnlSocketConnectsToRouteNetlink() {
        let socket = nl_socket_alloc()
        defer { nl_socket_free(socket) }
        #expect(socket != nil && nl_connect(socket, NETLINK_ROUTE) == 0)
    }

    @Test func samplerOpensWithoutANamespace() throws {
        // The sampler needs no privilege: it reads this namespace's links.
        let sampler = try NetlinkSampler(options: SamplerOptions(sysfs: nil))
        let sample = try sampler.read().sample
        #expect(sample.interfaces.contains { $0.name == "lo" && $0.classification?.kind == .loopback })
        #expect(sampler.mode == .stats)
    }
}
