import Foundation
import IfmeterTestSupport
import Testing

/// The `Ifmeter` product as an Apple platform would build it (issue 34),
/// as far as Linux can show it: the manifest brings no C along, the
/// portable build (scripts/portable-check, which `make test` runs) fails
/// on a Linux-only symbol in shared code, its stand-ins say what the
/// Darwin files declare, and docs/library.md lists what it cannot see.
@Suite(.blocking) struct PortableLibraryTests {
    /// The library's modules, and none other, on an Apple platform.
    static let closure = ["Ifmeter", "IfmeterCore", "IfmeterSampling", "IfmeterSystem"]

    @Test func noCTargetReachesTheLibraryOnApplePlatforms() throws {
        let targets = try PackageTarget.all.get()
        let closure = targets.appleClosure(of: ["Ifmeter"])
        #expect(closure.map(\.name) == Self.closure)
        let c = closure.filter { $0.kind != .swift }.map(\.name)
        #expect(c.isEmpty, "C targets reach Ifmeter on Apple platforms without `.when(platforms: [.linux])`: \(c)")
        // On Linux the same modules do use C: the conditions are what keep it out.
        let linux = Set(closure.flatMap(\.dependencies))
        #expect(linux.isSuperset(of: ["CNetlink", "CIfmeterLinux"]))
    }

    /// The rule above, shown to fail: the same manifest with one condition
    /// taken away brings libnl to Apple platforms.
    @Test func aDependencyWithoutItsConditionIsFound() throws {
        var targets = try PackageTarget.all.get()
        let sampling = try #require(targets.firstIndex { $0.name == "IfmeterSampling" })
        let netlink = try #require(targets[sampling].conditionalDependencies.firstIndex { $0.name == "CNetlink" })
        #expect(targets[sampling].conditionalDependencies[netlink].platforms == ["linux"])
        targets[sampling].conditionalDependencies[netlink] = .init(name: "CNetlink", platforms: nil)
        let c = targets.appleClosure(of: ["Ifmeter"]).filter { $0.kind != .swift }.map(\.name)
        #expect(c == ["CNetlink"])
    }

    /// A shared file of IfmeterSampling that names a Linux-only type (as
    /// Sources.swift once named NamespaceSelection, issue 34): the portable
    /// build fails and says which. A copy of the package is built, with the
    /// file added; the tree is not touched.
    @Test func thePortableBuildFailsOnALinuxOnlySymbolInSharedCode() throws {
        let folder = NSTemporaryDirectory() + "ifmeter-portable-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let broken = folder + "/Broken.swift"
        try "/// Shared code that uses the netlink sampler unguarded.\nfunc brokenSource() -> NetlinkSampler.Type { NetlinkSampler.self }\n"
            .write(toFile: broken, atomically: true, encoding: .utf8)
        let result = try run(
            [
                "/usr/bin/env", "IFMETER_PORTABLE_DIR=\(folder)/package",
                repositoryRoot.appendingPathComponent("scripts/portable-check").path, "--add", "IfmeterSampling=\(broken)",
            ], allowFailure: true, timeout: 600)
        #expect(result.status != 0)
        #expect(result.out.contains("cannot find type 'NetlinkSampler' in scope"), "\(result.out.suffix(3000))\n\(result.err.suffix(2000))")
        // The script read the same closure from the manifest as the test.
        #expect(result.out.contains("portable-check: Ifmeter's closure is " + Self.closure.joined(separator: ", ")))
    }

    /// The files wrapped whole in `#if canImport(Darwin)`, per module.
    static func darwinFiles() throws -> [(module: String, path: String)] {
        try PackageTarget.all.get().appleClosure(of: ["Ifmeter"]).flatMap { target in
            try target.files(endingIn: [".swift"]).filter { path in
                let text = try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)
                return text.hasPrefix("#if canImport(Darwin)\n")
            }.map { (target.name, $0) }
        }
    }

    static func declarations(_ text: String) -> [String] {
        text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            $0.range(of: #"^(public |package |internal )?(static |convenience )?(func|init|var|let)[ (]"#, options: .regularExpression) != nil
        }
    }

    /// A stand-in declares, line for line, what a Darwin file of its
    /// module declares: a changed signature there cannot go unseen here.
    @Test func theStandInsDeclareWhatTheDarwinFilesDo() throws {
        let darwin = try Self.darwinFiles()
        #expect(!darwin.isEmpty)
        let folder = repositoryRoot.appendingPathComponent("scripts/portable-stand-ins")
        let standIns = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
        #expect(!standIns.isEmpty)
        for file in standIns {
            let module = String(file.dropLast(".swift".count))
            #expect(Self.closure.contains(module), "scripts/portable-stand-ins/\(file) names no module of Ifmeter")
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            var declared: Set<String> = []
            for (_, path) in darwin where path.hasPrefix("Sources/\(module)/") {
                declared.formUnion(Self.declarations(try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)))
            }
            for line in Self.declarations(text) {
                #expect(declared.contains(line), "scripts/portable-stand-ins/\(file): '\(line)' is in no Darwin file of \(module)")
            }
        }
    }

    /// The C library import every file of the system layer starts with:
    /// the same POSIX names from either, no Darwin code of its own.
    static let importBlock = "#if canImport(Glibc)\nimport Glibc\n#elseif canImport(Darwin)\nimport Darwin\n#endif"

    /// docs/library.md names every file of the library's modules with Darwin
    /// code in it (a Darwin file, or a Glibc/Darwin branch beyond the import):
    /// what the portable build cannot see. Exactly those.
    @Test func theLibraryPageListsEveryFileWithDarwinCode() throws {
        let page = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/library.md"), encoding: .utf8)
        var found = 0
        for target in try PackageTarget.all.get().appleClosure(of: ["Ifmeter"]) {
            for path in target.files(endingIn: [".swift"]) {
                let text = try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)
                let rest = text.replacingOccurrences(of: Self.importBlock, with: "")
                let darwin = rest.contains("canImport(Darwin)") || rest.contains("canImport(Glibc)")
                let listed = page.contains("`\(path)`")
                if darwin { found += 1 }
                #expect(
                    darwin == listed, "docs/library.md \(listed ? "lists" : "does not list") \(path), which has \(darwin ? "" : "no ")Darwin code")
            }
        }
        #expect(found > 0)
    }
}
