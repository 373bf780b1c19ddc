import Foundation
import IfmeterCore

/// One target of Package.swift, as `swift package dump-package` gives it.
package struct PackageTarget: Sendable {
    package enum Kind: Sendable, Equatable {
        /// A Swift module (a library, an executable, the tests' support).
        case swift
        /// A C target: a system library (a module map) or C sources.
        case c
        /// A test target.
        case test
    }

    /// One dependency: a target's name, and the platforms its condition
    /// names (nil without a condition: every platform).
    package struct Dependency: Sendable, Equatable {
        package let name: String
        package let platforms: [String]?

        package init(name: String, platforms: [String]?) {
            self.name = name
            self.platforms = platforms
        }

        /// SwiftPM's names of Apple's platforms, as dump-package spells them.
        package static let applePlatforms: Set<String> = ["macos", "ios", "tvos", "watchos", "visionos", "maccatalyst", "driverkit"]

        /// Whether SwiftPM builds it on some Apple platform.
        package var reachesApplePlatforms: Bool { platforms.map { !Self.applePlatforms.isDisjoint(with: $0) } ?? true }
    }

    package let name: String
    package let kind: Kind
    /// The targets it declares it depends on, in Package.swift's order.
    package var dependencies: [String] { conditionalDependencies.map(\.name) }
    /// The same, with their platform conditions.
    package var conditionalDependencies: [Dependency]

    package init(name: String, kind: Kind, conditionalDependencies: [Dependency]) {
        self.name = name
        self.kind = kind
        self.conditionalDependencies = conditionalDependencies
    }

    /// Its folder: `Sources/<name>`, or `Tests/<name>` for a test target
    /// (Package.swift sets no paths).
    package var folder: URL { repositoryRoot.appendingPathComponent((kind == .test ? "Tests/" : "Sources/") + name) }

    /// The package's targets, read once per test run: `dump-package` is
    /// the manifest as SwiftPM evaluates it, so no test parses Swift.
    package static let all: Result<[PackageTarget], TestFailure> = {
        do { return .success(try load()) } catch let failure as TestFailure { return .failure(failure) } catch {
            return .failure(TestFailure("\(error)"))
        }
    }()

    package static func load() throws -> [PackageTarget] {
        let dump = try run(
            [
                "swift", "package", "--package-path", repositoryRoot.path, "--scratch-path",
                NSTemporaryDirectory() + "ifmeter-dump-package", "dump-package",
            ],
            allowFailure: true)
        guard dump.status == 0 else { throw TestFailure("swift package dump-package: \(dump.err)") }
        guard case .array(let targets)? = try JSONParser.parse(dump.out)["targets"] else {
            throw TestFailure("dump-package gave no targets")
        }
        return try targets.map { target in
            guard let name = target["name"]?.stringValue, let type = target["type"]?.stringValue else {
                throw TestFailure("a target without a name or type in dump-package")
            }
            var dependencies: [Dependency] = []
            if case .array(let list)? = target["dependencies"] {
                for dependency in list {
                    // {"byName": ["X", null]}, {"target": ["X", {"platformNames": ["linux"]}]}, …
                    guard case .object(let kinds) = dependency, let first = kinds.values.first,
                        case .array(let parts) = first, let other = parts.first?.stringValue
                    else { throw TestFailure("\(name): a dependency dump-package spells in a way not known here") }
                    var platforms: [String]?
                    if parts.count > 1, case .array(let names)? = parts[parts.count - 1]["platformNames"] {
                        platforms = names.compactMap(\.stringValue)
                    }
                    dependencies.append(Dependency(name: other, platforms: platforms))
                }
            }
            let kind: Kind
            switch type {
            case "test": kind = .test
            case "system": kind = .c
            case "regular", "executable":
                kind = try hasSwift(in: repositoryRoot.appendingPathComponent("Sources/" + name)) ? .swift : .c
            default: throw TestFailure("\(name): a target type not known here: \(type)")
            }
            return PackageTarget(name: name, kind: kind, conditionalDependencies: dependencies)
        }
    }

    private static func hasSwift(in folder: URL) throws -> Bool {
        guard let files = FileManager.default.enumerator(atPath: folder.path) else {
            throw TestFailure("no folder \(folder.path)")
        }
        for case let file as String in files where file.hasSuffix(".swift") { return true }
        return false
    }

    /// The files under the target's folder whose names end in one of
    /// `suffixes`, as paths relative to the repository, sorted.
    package func files(endingIn suffixes: [String]) -> [String] {
        guard let files = FileManager.default.enumerator(atPath: folder.path) else { return [] }
        var found: [String] = []
        for case let file as String in files where suffixes.contains(where: { file.hasSuffix($0) }) {
            let path = folder.appendingPathComponent(file).path
            let root = repositoryRoot.path.hasSuffix("/") ? repositoryRoot.path : repositoryRoot.path + "/"
            found.append(path.hasPrefix(root) ? String(path.dropFirst(root.count)) : path)
        }
        return found.sorted()
    }
}

extension [PackageTarget] {
    /// The targets a product's `targets` bring along on an Apple platform:
    /// themselves and every dependency whose condition does not leave it
    /// out there, recursively, sorted by name.
    package func appleClosure(of roots: [String]) -> [PackageTarget] {
        let byName = Dictionary(uniqueKeysWithValues: map { ($0.name, $0) })
        var seen: Set<String> = [], todo = roots
        while let name = todo.popLast() {
            guard seen.insert(name).inserted, let target = byName[name] else { continue }
            todo += target.conditionalDependencies.filter(\.reachesApplePlatforms).map(\.name)
        }
        return filter { seen.contains($0.name) }.sorted { $0.name < $1.name }
    }
}
