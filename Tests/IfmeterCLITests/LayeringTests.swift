import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// The layout shows the design (docs/architecture.md): every dependency
/// arrow between ifmeter's modules points down its layers, and only the
/// system layer, the samplers, the tests' support and the benchmark call
/// the C library through Glibc or Darwin.
@Suite struct LayeringTests {
    /// From the bottom: a module may depend only on modules of lower layers
    /// (and on C targets).
    static let layers: [[String]] = [
        ["IfmeterCore"],
        ["IfmeterOutput"],
        ["IfmeterSystem"],
        ["IfmeterSampling", "IfmeterConfig"],
        ["IfmeterStore", "Ifmeter"],
        ["IfmeterPipeline"],
        ["IfmeterServe", "IfmeterRoute", "IfmeterLive"],
        ["IfmeterExport", "IfmeterRemoteWrite"],
        ["IfmeterCLI"],
        ["ifmeter"],
    ]

    /// Where `import Glibc` (or Darwin) may appear.
    static let callingC: Set<String> = ["IfmeterSystem", "IfmeterSampling", "IfmeterTestSupport", "ifmeter-bench"]

    static func layer(of module: String) -> Int? { layers.firstIndex { $0.contains(module) } }

    @Test func everyDependencyPointsDown() throws {
        let dump = try run(
            ["swift", "package", "--scratch-path", NSTemporaryDirectory() + "ifmeter-dump-package", "dump-package"],
            allowFailure: true)
        try #require(dump.status == 0, "swift package dump-package: \(dump.err)")
        guard case .array(let targets)? = try JSONParser.parse(dump.out)["targets"] else { throw TestFailure("no targets") }
        var checked = 0
        for target in targets {
            guard let name = target["name"]?.stringValue, target["type"]?.stringValue != "test" else { continue }
            guard name.hasPrefix("Ifmeter") || name == "ifmeter" else { continue }
            guard let own = Self.layer(of: name) else {
                if name != "IfmeterTestSupport" { Issue.record("\(name) is in no layer of docs/architecture.md") }
                continue
            }
            guard case .array(let dependencies)? = target["dependencies"] else { continue }
            for dependency in dependencies {
                guard case .object(let kinds) = dependency, let first = kinds.values.first,
                    case .array(let parts) = first, let other = parts.first?.stringValue
                else { continue }
                guard let below = Self.layer(of: other) else { continue } // a C target
                #expect(below < own, "\(name) (layer \(own)) depends on \(other) (layer \(below)): the arrow must point down")
                checked += 1
            }
        }
        #expect(checked > 20, "\(checked) arrows checked")
    }

    @Test func onlyTheSystemLayerAndTheSamplersCallTheCLibrary() throws {
        let sources = repositoryRoot.appendingPathComponent("Sources")
        let modules = try FileManager.default.contentsOfDirectory(atPath: sources.path)
        var offenders: [String] = []
        for module in modules where !Self.callingC.contains(module) {
            let folder = sources.appendingPathComponent(module)
            guard let files = FileManager.default.enumerator(atPath: folder.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    if trimmed == "import Glibc" || trimmed == "import Darwin" || trimmed.hasPrefix("import Glibc.") {
                        offenders.append("\(module)/\(file)")
                    }
                }
            }
        }
        #expect(offenders.isEmpty, "import Glibc or Darwin outside the system layer and the samplers: \(offenders)")
    }
}
