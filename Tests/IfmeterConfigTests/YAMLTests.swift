import IfmeterConfig
import Testing

/// The YAML the configuration files are read with: libyaml's parse, kept
/// strict, every node with its line.
@Suite struct YAMLTests {
    @Test func blockAndFlowStyleQuotesCommentsAndLines() throws {
        let root = try #require(
            try YAML.parse(
                """
                ---
                # a comment
                plain: value   # a comment after it
                single: 'it''s # not a comment'
                double: "a\\"b\\\\c\\u00e9"
                empty:
                nested:
                  list:
                    - one
                    - {name: two}
                flow: [a, b]
                """))
        let entries = try root.mapping("the file")
        #expect(entries.map(\.key) == ["plain", "single", "double", "empty", "nested", "flow"])
        #expect(entries.map(\.line) == [3, 4, 5, 6, 7, 11])
        #expect(try entries[0].string() == "value")
        #expect(try entries[1].string() == "it's # not a comment")
        #expect(try entries[2].string() == #"a"b\cé"#)
        #expect(entries[3].value.isNull)
        #expect(try entries[3].string() == "")
        #expect(try entries[3].mapping().isEmpty)
        let list = try #require(try entries[4].mapping().first).list()
        #expect(list.count == 2 && list[0].line == 9)
        #expect(try list[0].string("an item") == "one")
        #expect(try list[1].mapping("an item").first?.key == "name")
        #expect(try entries[5].list().map { try $0.string("an item") } == ["a", "b"])
        #expect(try YAML.parse("") == nil)
        #expect(try YAML.parse("# only a comment\n") == nil)
    }

    @Test func whatAConfigNeverNeedsIsRefusedAtItsLine() {
        let cases: [(String, Int, String)] = [
            ("a: &x 1\nb: *x\n", 1, "an anchor"),
            ("a: [1]\nb: *x\n", 2, "an alias"),
            ("a: !!str 1\n", 1, "a tag"),
            ("a: 1\n---\nb: 2\n", 2, "a second document"),
            ("a: 1\nb: 2\na: 3\n", 3, "'a' is given twice"),
            ("? [a]\n: 1\n", 1, "a key must be a plain name"),
            ("a:\n\tb: 1\n", 2, "a tab in the indentation"),
            ("a: 'open\n", 1, "without its closing quote"),
            ("a: [1, 2\n", 1, "left open"),
            ("a: x\n  b: y\n", 2, "a ':' where none can be"),
            ("a:\n    b: x\n  c: y\n", 3, "indentation does not match"),
            (String(repeating: "[", count: 100), 1, "nested more than 64 deep"),
        ]
        for (text, line, message) in cases {
            do throws(ConfigError) {
                _ = try YAML.parse(text)
                Issue.record("accepted: \(text.debugDescription)")
            } catch {
                #expect(error.line == line && error.message.contains(message), "\(text.debugDescription): \(error)")
            }
        }
    }

    @Test func valuesOfTheWrongShapeSayWhatTheyShouldBe() throws {
        let entries = try #require(try YAML.parse("m: value\nl: {a: b}\ns: [1]\nb: maybe\n")).mapping("the file")
        #expect(throws: ConfigError(line: 1, message: "'m' must be a mapping (nested 'key: value' lines), not a value")) { try entries[0].mapping() }
        #expect(throws: ConfigError(line: 2, message: "'l' must be a list ('- ' items), not a mapping")) { try entries[1].list() }
        #expect(throws: ConfigError(line: 3, message: "'s' must be a value, not a list")) { try entries[2].string() }
        #expect(throws: ConfigError(line: 4, message: "'b' is true or false, not 'maybe'")) { try entries[3].bool() }
    }
}
