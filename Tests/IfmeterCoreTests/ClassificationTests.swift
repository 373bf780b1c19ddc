import IfmeterCore
import Testing

@Suite struct ClassificationTests {
    @Test(arguments: [
        ("lo", InterfaceKind.loopback, "name:lo"), ("wlp2s0", .wifi, "name:wl*"), ("wwan0", .cellular, "name:wwan*"),
        ("rmnet_data0", .cellular, "name:rmnet*"), ("ccmni1", .cellular, "name:ccmni*"), ("pdp_ip0", .cellular, "name:pdp_ip*"),
        ("tun0", .tunnel, "name:tun*"), ("tap3", .tunnel, "name:tap*"), ("utun2", .tunnel, "name:utun*"),
        ("wg0", .tunnel, "name:wg*"), ("ipsec0", .tunnel, "name:ipsec*"), ("eth0", .ethernet, "name:eth*"),
        ("enp3s0", .ethernet, "name:en*"), ("em1", .ethernet, "name:em*"), ("veth12", .virtual, "name:veth*"),
        ("docker0", .virtual, "name:docker*"), ("br-1a2b", .virtual, "name:br-*"), ("virbr0", .virtual, "name:virbr*"),
        ("bridge0", .virtual, "name:bridge*"), ("vnet3", .virtual, "name:vnet*"), ("dummy0", .virtual, "name:dummy*"),
        ("ifb0", .virtual, "name:ifb*"), ("lo1", .other, "name:no-rule"), ("br0", .other, "name:no-rule"),
        ("bond0", .other, "name:no-rule"),
    ])
    func linuxNameRules(name: String, kind: InterfaceKind, evidence: String) {
        #expect(NameRules.classify(name, platform: .linux) == Classification(kind: kind, evidence: evidence))
    }

    @Test(arguments: [
        ("lo0", InterfaceKind.loopback), ("en0", .wifi), ("en1", .ethernet), ("pdp_ip1", .cellular), ("utun4", .tunnel),
        ("ipsec1", .tunnel), ("awdl0", .virtual), ("llw0", .virtual), ("bridge100", .virtual), ("anpi0", .virtual),
        ("ap1", .virtual), ("gif0", .other), ("lo", .other), ("wlan0", .other),
    ])
    func darwinNameRules(name: String, kind: InterfaceKind) {
        #expect(NameRules.classify(name, platform: .darwin).kind == kind)
    }

    @Test func kernelFactsComeBeforeNames() {
        // A tun named like Ethernet is a tunnel.
        #expect(Classifier.classify(name: "eth9", facts: KernelFacts(linkKind: "tun")) == Classification(kind: .tunnel, evidence: "link-kind:tun"))
        #expect(Classifier.classify(name: "wg-home", facts: KernelFacts(linkKind: "wireguard", arphrdType: 65534)).evidence == "link-kind:wireguard")
        #expect(Classifier.classify(name: "x", facts: KernelFacts(linkKind: "veth", arphrdType: 1)).kind == .virtual)
        #expect(
            Classifier.classify(name: "x", facts: KernelFacts(arphrdType: 772)) == Classification(kind: .loopback, evidence: "arphrd:loopback(772)"))
        #expect(Classifier.classify(name: "x", facts: KernelFacts(arphrdType: 519)).kind == .cellular)
        #expect(Classifier.classify(name: "x", facts: KernelFacts(arphrdType: 65534)).kind == .tunnel)
        #expect(Classifier.classify(name: "ppp0", facts: KernelFacts(arphrdType: 512)).evidence == "arphrd:ppp(512)")
        #expect(
            Classifier.classify(name: "eth1", facts: KernelFacts(arphrdType: 1, sysfsPhy80211: true, hasDevice: true))
                == Classification(kind: .wifi, evidence: "sysfs:phy80211"))
        #expect(Classifier.classify(name: "x", facts: KernelFacts(arphrdType: 1, devtype: "wwan", hasDevice: true)).kind == .cellular)
        #expect(
            Classifier.classify(name: "x", facts: KernelFacts(arphrdType: 1, hasDevice: true))
                == Classification(kind: .ethernet, evidence: "sysfs:device"))
        #expect(Classifier.classify(name: "x", facts: KernelFacts(arphrdType: 1, hasDevice: true, driver: "qmi_wwan")).kind == .cellular)
        // Unknown link kinds are software links, not names.
        #expect(
            Classifier.classify(name: "eth5", facts: KernelFacts(linkKind: "somethingnew", arphrdType: 1))
                == Classification(kind: .virtual, evidence: "link-kind:somethingnew"))
        // Nothing decisive: the name rules.
        #expect(Classifier.classify(name: "wwan0", facts: KernelFacts(arphrdType: 1)).evidence == "name:wwan*")
    }
}
