import Foundation
import IfmeterCore
import IfmeterSampling
import Testing

let fixtures = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

/// Fake sysfs trees of real devices, classified as the live sampler would.
@Suite struct SysfsFixtureTests {
    let sysfs = SysfsReader(root: fixtures.appendingPathComponent("sysfs").path)

    func classify(_ name: String, linkKind: String? = nil) -> Classification {
        let facts = sysfs.read(name)
        return Classifier.classify(name: name, facts: facts.merged(linkKind: linkKind, arphrdType: nil))
    }

    @Test func treeListsTheFixtures() {
        #expect(sysfs.names() == ["br0", "enp3s0", "rmnet_data0", "tun0", "veth0", "wg0", "wlp2s0", "wwan0"])
    }

    @Test func wifiCard() {
        let facts = sysfs.read("wlp2s0")
        #expect(facts.facts.sysfsWireless && facts.facts.sysfsPhy80211 && facts.facts.hasDevice)
        #expect(facts.facts.devtype == "wlan")
        #expect(facts.facts.driver == "iwlwifi")
        #expect(facts.ifindex == 3 && facts.mtu == 1500 && facts.operstate == "up")
        #expect(classify("wlp2s0") == Classification(kind: .wifi, evidence: "sysfs:phy80211"))
    }

    @Test func qmiModemInRawIPMode() {
        // ARPHRD_NONE like a tun, but sysfs knows better.
        let facts = sysfs.read("wwan0")
        #expect(facts.facts.arphrdType == 65534)
        #expect(facts.facts.driver == "qmi_wwan")
        #expect(classify("wwan0") == Classification(kind: .cellular, evidence: "sysfs:DEVTYPE=wwan"))
    }

    @Test func rmnetModem() {
        #expect(classify("rmnet_data0") == Classification(kind: .cellular, evidence: "arphrd:rawip(519)"))
        #expect(classify("rmnet_data0", linkKind: "rmnet") == Classification(kind: .cellular, evidence: "link-kind:rmnet"))
    }

    @Test func tun() {
        #expect(classify("tun0", linkKind: "tun") == Classification(kind: .tunnel, evidence: "link-kind:tun"))
        #expect(classify("tun0") == Classification(kind: .tunnel, evidence: "sysfs:tun_flags"))
        // tun reports 10 Mb/s, but it is no hardware: not a ceiling.
        #expect(sysfs.read("tun0").speedBps == 10_000_000)
        #expect(!sysfs.read("tun0").facts.hasDevice)
    }

    @Test func wireguard() {
        #expect(classify("wg0", linkKind: "wireguard") == Classification(kind: .tunnel, evidence: "link-kind:wireguard"))
        #expect(classify("wg0") == Classification(kind: .tunnel, evidence: "sysfs:DEVTYPE=wireguard"))
    }

    @Test func bridge() {
        #expect(classify("br0") == Classification(kind: .virtual, evidence: "sysfs:DEVTYPE=bridge"))
        #expect(classify("br0", linkKind: "bridge") == Classification(kind: .virtual, evidence: "link-kind:bridge"))
    }

    @Test func nic() {
        let facts = sysfs.read("enp3s0")
        #expect(facts.speedBps == 1_000_000_000)
        #expect(facts.facts.driver == "e1000e")
        #expect(classify("enp3s0") == Classification(kind: .ethernet, evidence: "sysfs:device"))
    }

    @Test func veth() {
        #expect(classify("veth0", linkKind: "veth") == Classification(kind: .virtual, evidence: "link-kind:veth"))
        #expect(classify("veth0") == Classification(kind: .virtual, evidence: "name:veth*"))
    }

    @Test func missingInterfaceReadsAsNothing() {
        let facts = sysfs.read("nosuch0")
        #expect(facts.ifindex == nil && facts.facts == KernelFacts())
        #expect(classify("nosuch0") == Classification(kind: .other, evidence: "name:no-rule"))
    }
}
