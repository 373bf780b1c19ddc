import Foundation
import IfmeterTestSupport
import Testing

/// docs/architecture.md lists every target of Package.swift in three
/// tables (modules, C targets, test targets), and says for each C target
/// what reaches it; these tests keep the lists equal to the package, so
/// the document cannot drift from it again.
@Suite(.blocking) struct ArchitectureDocTests {
    static func document() throws -> String {
        try String(contentsOf: repositoryRoot.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
    }

    /// The rows of the table whose header's first cell is `header`, each
    /// as its cells (trimmed).
    static func table(_ header: String, in text: String) throws -> [[String]] {
        let lines = text.components(separatedBy: "\n")
        guard
            let start = lines.firstIndex(where: {
                $0.hasPrefix("|") && $0.split(separator: "|").first?.trimmingCharacters(in: .whitespaces) == header
            })
        else { throw TestFailure("docs/architecture.md has no table headed \(header)") }
        var rows: [[String]] = []
        for line in lines[(start + 2)...] {
            guard line.hasPrefix("|") else { break }
            rows.append(
                line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast().map { $0.trimmingCharacters(in: .whitespaces) })
        }
        return rows
    }

    /// The names in backticks in a cell, a leading `Sources/` dropped.
    static func names(_ cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
            .map { String($0.element.hasPrefix("Sources/") ? $0.element.dropFirst("Sources/".count) : $0.element) }
    }

    /// The first name in backticks of column `column` of every row.
    static func firstNames(_ rows: [[String]], column: Int) throws -> [String] {
        try rows.map { row in
            guard row.count > column, let name = names(row[column]).first else {
                throw TestFailure("a row without a name in backticks in column \(column + 1): \(row)")
            }
            return name
        }
    }

    static func expectSame(_ listed: [String], _ package: [String], _ what: String) {
        #expect(Set(listed).count == listed.count, "\(what) lists a target twice: \(listed)")
        let missing = Set(package).subtracting(listed).sorted(), extra = Set(listed).subtracting(package).sorted()
        #expect(missing.isEmpty, "docs/architecture.md's \(what) lacks Package.swift's \(missing)")
        #expect(extra.isEmpty, "docs/architecture.md's \(what) lists \(extra), which Package.swift has not")
    }

    @Test func theModuleTableIsPackageSwiftsSwiftTargets() throws {
        let targets = try PackageTarget.all.get()
        let listed = try Self.firstNames(Self.table("Layer", in: Self.document()), column: 1)
        let package = targets.filter { $0.kind == .swift }.map(\.name)
        #expect(package.count > 10, "\(package.count) Swift targets in Package.swift")
        Self.expectSame(listed, package, "module table")
    }

    @Test func theCTargetTableIsPackageSwiftsCTargets() throws {
        let targets = try PackageTarget.all.get()
        let rows = try Self.table("C target", in: Self.document())
        let package = targets.filter { $0.kind == .c }
        #expect(package.count >= 10, "\(package.count) C targets in Package.swift")
        Self.expectSame(try Self.firstNames(rows, column: 0), package.map(\.name), "C target table")

        // "Reached from": every target that imports it or declares it.
        var reached: [String: Set<String>] = [:]
        for use in try LayeringTests.cUses(of: targets) { reached[use.cTarget, default: []].insert(use.module) }
        for target in targets where target.kind == .c {
            for dependency in target.dependencies { reached[dependency, default: []].insert(target.name) }
        }
        for row in rows where row.count >= 4 {
            guard let name = Self.names(row[0]).first else { continue }
            let listed = Set(Self.names(row[3])), actual = reached[name] ?? []
            #expect(
                listed == actual,
                "docs/architecture.md says \(name) is reached from \(listed.sorted()); it is from \(actual.sorted())")
        }
    }

    @Test func theTestTargetTableIsPackageSwiftsTestTargets() throws {
        let targets = try PackageTarget.all.get()
        let listed = try Self.firstNames(Self.table("Test target", in: Self.document()), column: 0)
        let package = targets.filter { $0.kind == .test }.map(\.name)
        #expect(package.count > 5, "\(package.count) test targets in Package.swift")
        Self.expectSame(listed, package, "test target table")
    }

    @Test func tablesAreReadAsWritten() throws {
        let text = """
            | C target | Kind |
            |---|---|
            | `CA` | x, `not this` |
            | `Sources/CB` | y |

            | other |
            """
        let rows = try Self.table("C target", in: text)
        #expect(try Self.firstNames(rows, column: 0) == ["CA", "CB"])
        #expect(Self.names(rows[0][1]) == ["not this"])
        #expect(throws: TestFailure.self) { try Self.table("Layer", in: text) }
    }
}
