@testable import IfmeterCLI
import Testing

/// Issue 32: an option is declared once, as a handle whose spec goes into
/// the command's spec, and read back by that handle.
@Suite struct ArgumentParserHandleTests {
    static let verbose = Flag("--verbose", short: "-v", help: "Say more.")
    static let name = Option("--name", value: "name", help: "Whom to greet.", default: "world")
    static let tag = ListOption("--tag", value: "tag", help: "A tag.")
    static let unused = Option("--unused", value: "x", help: "Declared, never given.")
    static let spec = CommandSpec(
        name: "ifmeter toy", abstract: "A toy.", options: [verbose.spec, name.spec, tag.spec, unused.spec])

    @Test func handlesDeclareWhatTheSpecSays() {
        #expect(Self.verbose.spec.isFlag && !Self.verbose.spec.repeatable && Self.verbose.spec.short == "-v")
        #expect(!Self.name.spec.isFlag && !Self.name.spec.repeatable && Self.name.spec.valueName == "name")
        #expect(Self.name.spec.defaultText == "world")
        #expect(!Self.tag.spec.isFlag && Self.tag.spec.repeatable)
        #expect(Self.spec.help.contains("--tag <tag>") && Self.spec.help.contains("Repeat or separate with commas."))
    }

    @Test func readByHandle() throws {
        let p = try ParsedArguments.parse(["-v", "--name=ifmeter", "--tag", "a,b", "--tag", "c,"], spec: Self.spec)
        #expect(p[Self.verbose])
        #expect(p[Self.name] == "ifmeter")
        #expect(p[Self.tag] == ["a", "b", "c"])
        #expect(p.given(Self.tag) == ["a,b", "c,"])
        #expect(p.has(Self.verbose) && p.has(Self.name) && p.has(Self.tag) && !p.has(Self.unused))
        #expect(p[Self.unused] == nil)
        #expect(p.declares(Self.unused) && !p.declares(CommonOptions.interval))
    }

    @Test func nothingGiven() throws {
        let p = try ParsedArguments.parse([], spec: Self.spec)
        #expect(!p[Self.verbose] && p[Self.name] == nil && p[Self.tag].isEmpty && !p.has(Self.tag))
        // A list option given only empty values is given, with no value.
        let empty = try ParsedArguments.parse(["--tag", ","], spec: Self.spec)
        #expect(empty.has(Self.tag) && empty[Self.tag].isEmpty)
    }

    /// `helping` describes the same option otherwise: only the help
    /// differs, and a handle reads it whichever declaration a command has.
    @Test func helpingKeepsTheRest() throws {
        let other = Self.tag.helping("Another tag.")
        #expect(other.spec.long == "--tag" && other.spec.valueName == "tag" && other.spec.repeatable && other.spec.help == "Another tag.")
        let flag = CommonOptions.allNetns.helping("Every namespace.")
        #expect(flag.spec.isFlag && flag.spec.long == "--all-netns")
        let state = DefaultState.option
        #expect(state.spec.long == CommonOptions.state.spec.long && state.spec.valueName == CommonOptions.state.spec.valueName)
        let p = try ParsedArguments.parse(["--state", "/x.db"], spec: UsageCommand.spec)
        #expect(p[CommonOptions.state] == "/x.db" && p[DefaultState.option] == "/x.db")
    }

    /// Every command declares each option once.
    @Test func noCommandDeclaresAnOptionTwice() {
        for command in IfmeterCLI.commands {
            let longs = command.spec.options.map(\.long)
            #expect(Set(longs).count == longs.count, "\(command.spec.name): \(longs)")
            let shorts = command.spec.options.compactMap(\.short)
            #expect(Set(shorts).count == shorts.count, "\(command.spec.name): \(shorts)")
        }
    }
}
