import CNetlink
import IfmeterSampling
import Testing

/// libnl-route registers its cache types ("route/link", ...) from a library
/// constructor; if the linker dropped the library, only a lookup by name
/// would notice, at run time.
@Suite struct LibnlLinkageTests {
    @Test func routeLinkCacheTypeIsRegistered() {
        #expect(nl_cache_ops_lookup("route/link") != nil)
    }

    @Test func samplerOpensWithoutANamespace() throws {
        // The sampler needs no privilege: it reads this namespace's links.
        let sampler = try NetlinkSampler(options: SamplerOptions(sysfs: nil))
        let sample = try sampler.read().sample
        #expect(sample.interfaces.contains { $0.name == "lo" && $0.classification?.kind == .loopback })
        #expect(sampler.mode == .stats)
    }
}
