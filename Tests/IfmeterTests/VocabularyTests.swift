import Ifmeter
import IfmeterCore
import Testing

/// The library's words are the vocabulary's, and its kinds Apple's names.
@Suite struct VocabularyTests {
    @Test func kindsAndQualitiesAreTheCoresOwn() {
        #expect(Ifmeter.InterfaceKind.allCases.map(\.name) == IfmeterCore.InterfaceKind.allCases.map(\.rawValue))
        #expect(Ifmeter.InterfaceKind.allCases.filter(\.isPhysical) == [.wifi, .cellular, .ethernet])
        #expect(Ifmeter.Quality.allCases.map(\.name) == ["exact", "wrap-corrected", "lower-bound"])
        #expect(Ifmeter.Quality.allCases.map { $0.marked("5 MB") } == ["5 MB", "~ 5 MB", "≥ 5 MB"])
        #expect(Ifmeter.Quality.exact < .wrapCorrected && Ifmeter.Quality.wrapCorrected < .lowerBound)
        #expect(CounterChange.recreated.note == DeltaChange.recreated.note)
        #expect(CounterChange.restartedAfterReboot.note == "restarted after a reboot")
    }

    /// What the docs say of Apple's names: the getifaddrs sampler names
    /// kinds there with these rules (platform darwin).
    @Test func appleNamesAreTheKindsTheDocsName() {
        let expected: [String: IfmeterCore.InterfaceKind] = [
            "en0": .wifi, "en1": .ethernet, "pdp_ip0": .cellular, "pdp_ip1": .cellular, "utun0": .tunnel, "utun4": .tunnel,
            "ipsec0": .tunnel, "lo0": .loopback, "awdl0": .virtual, "llw0": .virtual, "bridge0": .virtual, "gif0": .other,
        ]
        for (name, kind) in expected {
            #expect(NameRules.classify(name, platform: .darwin).kind == kind, "\(name)")
        }
    }
}
