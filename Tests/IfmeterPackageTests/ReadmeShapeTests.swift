import Foundation
import IfmeterTestSupport
import Testing

/// The README stays a page a user reads to the end: at most 300 lines,
/// opening with `make run` and `make test`, and the detail lives in
/// `docs/*.md`, every one of which the README links. Every relative link
/// in the README and in `docs/*.md` leads to a file that exists, and a
/// `#anchor` to a heading in it.
struct ReadmeShapeTests {
    static func text(_ file: String) throws -> String {
        try String(contentsOfFile: repositoryRoot.appendingPathComponent(file).path, encoding: .utf8)
    }

    static func markdownFiles() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("docs").path)
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    /// The link targets of a Markdown text (`[text](target)` and
    /// `![alt](target)`), outside code blocks and inline code.
    static func links(_ text: String) -> [(line: Int, target: String)] {
        var found: [(Int, String)] = []
        for (number, line) in Markdown.prose(text) {
            let outsideCode = line.split(separator: "`", omittingEmptySubsequences: false)
                .enumerated().filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: " ")
            let regex = try! NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#)
            let range = NSRange(outsideCode.startIndex..., in: outsideCode)
            for match in regex.matches(in: outsideCode, range: range) {
                if let r = Range(match.range(at: 1), in: outsideCode) { found.append((number, String(outsideCode[r]))) }
            }
        }
        return found
    }

    /// The relative links in `file` (whose text is `text`) that lead
    /// nowhere, as `file line N: target (why)`.
    static func brokenLinks(in file: String, text: String, exists: (String) -> String?) -> [String] {
        links(text).compactMap { line, target in
            if target.contains("://") || target.hasPrefix("mailto:") { return nil }
            let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            let resolved = parts[0].isEmpty ? file : relative(parts[0], from: file)
            guard let content = exists(resolved) else {
                return "\(file) line \(line): \(target) (no file \(resolved))"
            }
            if parts.count == 2, resolved.hasSuffix(".md"), !Markdown.anchors(content).contains(parts[1]) {
                return "\(file) line \(line): \(target) (no heading #\(parts[1]) in \(resolved))"
            }
            return nil
        }
    }

    /// `target` as a path from the repository's root, for a link in `file`.
    static func relative(_ target: String, from file: String) -> String {
        var components = file.split(separator: "/").dropLast().map(String.init)
        for part in target.split(separator: "/").map(String.init) {
            switch part {
            case ".": continue
            case "..": if components.popLast() == nil { components.append("..") }
            default: components.append(part)
            }
        }
        return components.joined(separator: "/")
    }

    static func onDisk(_ path: String) -> String? {
        let full = repositoryRoot.appendingPathComponent(path).path
        guard FileManager.default.fileExists(atPath: full) else { return nil }
        return (try? String(contentsOfFile: full, encoding: .utf8)) ?? ""
    }

    @Test func readmeIsShort() throws {
        var lines = try Self.text("README.md").components(separatedBy: "\n")
        while lines.last?.isEmpty == true { lines.removeLast() }
        #expect(lines.count <= 300, "README.md has \(lines.count) lines; the detail goes to docs/")
    }

    @Test func readmeOpensWithTheTwoCommands() throws {
        let opening = try Self.text("README.md").components(separatedBy: "\n").prefix(15).joined(separator: "\n")
        #expect(opening.contains("make run"), "README.md's first lines name `make run`")
        #expect(opening.contains("make test"), "README.md's first lines name `make test`")
    }

    @Test func everyRelativeLinkResolves() throws {
        var broken: [String] = []
        for file in try Self.markdownFiles() {
            broken += Self.brokenLinks(in: file, text: try Self.text(file), exists: Self.onDisk)
        }
        #expect(broken.isEmpty, "broken links:\n\(broken.joined(separator: "\n"))")
    }

    @Test func readmeLinksEveryDocument() throws {
        let linked = Set(Self.links(try Self.text("README.md")).map { $0.target.split(separator: "#").first.map(String.init) ?? "" })
        let missing = try Self.markdownFiles().dropFirst().filter { !linked.contains($0) }
        #expect(missing.isEmpty, "README.md does not link \(missing.joined(separator: ", "))")
    }

    /// The checker itself finds a missing file, a missing heading and a
    /// link in a subfolder, and leaves code alone.
    @Test func brokenLinksAreFound() {
        let files = ["docs/a.md": "# A page\n\n## Its part: `--flag`, two\n", "README.md": ""]
        let text = """
            [ok](docs/a.md) [ok](docs/a.md#its-part---flag-two) [ok](#top)
            [gone](docs/b.md) [no heading](docs/a.md#nowhere)
            `[code](nowhere.md)`
            ```
            [fenced](nowhere.md)
            ```
            # Top
            """
        let broken = Self.brokenLinks(in: "README.md", text: text, exists: { $0 == "README.md" ? text : files[$0] })
        #expect(
            broken == [
                "README.md line 2: docs/b.md (no file docs/b.md)",
                "README.md line 2: docs/a.md#nowhere (no heading #nowhere in docs/a.md)",
            ])
        #expect(Self.brokenLinks(in: "docs/a.md", text: "[up](../README.md) [sibling](a.md#a-page)", exists: { files[$0] }).isEmpty)
    }
}
