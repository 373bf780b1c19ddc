import Foundation
import IfmeterTestSupport
import Testing

/// The release binary is linked for a small resident set (Makefile,
/// RELEASE_FLAGS; issue 9): packed relative relocations, no exported
/// symbols, libstdc++ inside, and the functions scripts/hot-functions.txt
/// names laid out first. Checked on .build/release/ifmeter: `make test`
/// builds it beside the test run and runs this suite after it
/// (scripts/test-beside-release), so CI (IFMETER_REQUIRE_NETNS=1)
/// requires it; a bare
/// `swift test` without one skips.
@Suite(
    .enabled(
        if: ReleaseBuild.binary != nil || ReleaseBuild.required,
        Comment(rawValue: "no release build: `make test` or `make release` makes one")), .blocking)
struct ReleaseLinkTests {
    private func releaseBinary() throws -> String {
        try #require(ReleaseBuild.binary, "no release build: `make test` builds one before the tests")
    }

    @Test func relocationsArePackedAndNothingIsExported() throws {
        let binary = try releaseBinary()
        let dynamic = try run(["readelf", "-dW", binary]).out
        #expect(dynamic.contains("(RELR)"), "relative relocations packed (DT_RELR)")
        #expect(!dynamic.contains("libstdc++"), "libstdc++ linked in, not loaded")
        // libnl-route-3 is not used (docs/architecture.md): not loaded either.
        #expect(!dynamic.contains("libnl-route-3") && dynamic.contains("libnl-3"), "libnl-3 only")
        // cairo is loaded on the first `usage --png` (CIfmeterImage), not
        // linked: every command, serve included, would load it and the 17
        // libraries under it at start-up.
        #expect(!dynamic.contains("libcairo"), "libcairo is loaded with dlopen, not NEEDED")
        let exported = try run(["nm", "-D", "--defined-only", binary]).out
        #expect(exported.isEmpty, "exported: \(exported.prefix(300))")
    }

    @Test func theHotFunctionsComeFirst() throws {
        let binary = try releaseBinary()
        let listed = Set(
            try String(contentsOf: repositoryRoot.appendingPathComponent("scripts/hot-functions.txt"), encoding: .utf8)
                .split(separator: "\n").map(String.init))
        // ifmeter's own functions (each in its own section): every listed
        // one lies before every other one.
        var hot: [UInt64] = [], cold: [UInt64] = []
        for line in try run(["nm", "--defined-only", binary]).out.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, fields[1] == "t" || fields[1] == "T", let address = UInt64(fields[0], radix: 16),
                fields[2].hasPrefix("$s"), fields[2].prefix(24).contains("Ifmeter")
            else { continue }
            if listed.contains(String(fields[2])) { hot.append(address) } else { cold.append(address) }
        }
        #expect(hot.count > 300, "only \(hot.count) of the listed functions are in the binary: re-record them (make hot-functions)")
        let lastHot = try #require(hot.max()), firstCold = try #require(cold.min())
        #expect(lastHot < firstCold, "a listed function at \(String(lastHot, radix: 16)) after an unlisted one at \(String(firstCold, radix: 16))")
    }
}

enum ReleaseBuild {
    /// .build/release/ifmeter, when there is one. (SwiftPM keeps a binary
    /// whose sources were rewritten unchanged, so its age says little; the
    /// Makefile links again when the layout list changed.)
    static var binary: String? {
        let release = repositoryRoot.appendingPathComponent(".build/release/ifmeter").path
        return FileManager.default.isExecutableFile(atPath: release) ? release : nil
    }

    static var required: Bool { ProcessInfo.processInfo.environment["IFMETER_REQUIRE_NETNS"] == "1" }
}
