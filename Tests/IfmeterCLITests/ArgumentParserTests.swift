@testable import IfmeterCLI
import Testing

@Suite struct ArgumentParserTests {
    func failure(_ arguments: [String], _ command: any Command.Type) -> CLIError? {
        do {
            _ = try command.init(ParsedArguments.parse(arguments, spec: command.spec))
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [
        (["--interval", "0"], "invalid value '0' for '--interval <duration>'"),
        (["--interval", "-5"], "invalid value '-5' for '--interval <duration>'"),
        (["--interval", "abc"], "invalid value 'abc' for '--interval <duration>'"),
        (["--interval"], "missing value for '-i|--interval <duration>'"),
        (["--bogus"], "unknown option '--bogus'"),
        (["-x"], "unknown option '-x'"),
        (["--count", "0"], "invalid value '0' for '--count <n>'"),
        (["--count", "2", "--watch"], "cannot be used together"),
        (["--format", "xml"], "unknown format 'xml'"),
        (["--kind", "modem"], "unknown kind 'modem'"),
        (["--source", "proc"], "unknown source 'proc'"),
        (["--max-rate", "fast"], "invalid value 'fast' for '--max-rate <rate>'"),
        (["--bits=yes"], "'--bits' takes no value"),
        (["--interval", "1s", "--interval", "2s"], "given more than once"),
        (["extra"], "unexpected argument 'extra'"),
    ])
    func sampleRejects(arguments: [String], fragment: String) throws {
        let error = try #require(failure(arguments, SampleCommand.self))
        #expect(error.exitCode == 64)
        #expect(error.line.hasPrefix("Error: "))
        #expect(error.line.contains(fragment), "\(error.line)")
        #expect(error.line.hasSuffix("See 'ifmeter sample --help'."))
        #expect(!error.line.contains("\n"))
    }

    @Test func valuesAndListsParse() throws {
        let p = try ParsedArguments.parse(
            ["--interval=500ms", "-n", "3", "--include", "eth*,wl*", "--include", "tun0", "--kind", "wifi,tunnel"],
            spec: SampleCommand.spec)
        let command = try SampleCommand(p)
        #expect(command.setup.configuration.interval == 0.5)
        #expect(command.count == 3)
        #expect(command.setup.configuration.sampleLimit == 4, "N intervals are N+1 samples")
        #expect(command.setup.configuration.filter.include == ["eth*", "wl*", "tun0"])
        #expect(command.setup.configuration.filter.kinds == [.wifi, .tunnel])
    }

    @Test func replayNeedsAFile() throws {
        let error = try #require(failure([], ReplayCommand.self))
        #expect(error.line.contains("missing argument <file>"))
        #expect(error.exitCode == 64)
    }

    @Test func recordDurationBecomesIntervals() throws {
        let command = try RecordCommand(ParsedArguments.parse(["--duration", "2m", "--interval", "10s"], spec: RecordCommand.spec))
        #expect(command.setup.configuration.sampleLimit == 13, "12 intervals of 10 s")
        #expect(failure(["--duration", "1m", "--count", "3"], RecordCommand.self)?.exitCode == 64)
    }

    /// Issue 29, finding 10: `serve --remote-write ''` blamed
    /// `--remote-write-queue` ("needs '--remote-write URL'"): an empty URL
    /// was dropped as no URL at all. It is refused as what it is.
    @Test(arguments: ["", " ", ",", " , "])
    func anEmptyRemoteWriteURLIsNamed(url: String) throws {
        for extra in [[], ["--remote-write-queue", "/tmp/q"], ["--state", "/tmp/s.db"]] {
            let error = try #require(failure(["--remote-write", url] + extra, ServeCommand.self))
            #expect(error.exitCode == 64)
            #expect(error.line.contains("for '--remote-write <url>': the URL is empty"), "\(error.line)")
            #expect(!error.line.contains("needs"), "\(error.line)")
        }
    }

    @Test func helpHasUsageAndOptions() {
        for command in IfmeterCLI.commands {
            let help = command.spec.help
            #expect(help.contains("OVERVIEW: "))
            #expect(help.contains("USAGE: \(command.spec.name)"))
            #expect(help.contains("OPTIONS:"))
            #expect(help.contains("-h, --help"))
            #expect(!help.contains("--sysfs-root"), "hidden options stay hidden")
        }
    }
}
