import Foundation
@testable import IfmeterCLI
import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import IfmeterSampling
import IfmeterTestSupport
import Testing

/// A new output format, a new counter source and a new subcommand each take
/// a file of their own and one line in one other file (docs/architecture.md,
/// "Adding to ifmeter"). Each is done here, in the test target, the way the
/// document says, and works through the same pieces as the real ones.
@Suite(.blocking) struct ExtensionPointTests {
    /// A toy format: one CSV line per interface of a replayed report. A real
    /// one is this file in Sources/IfmeterOutput plus a line in
    /// `ReportFormats.all`, which is all `replay --format` consults.
    struct CSVRenderer: ReportRenderer {
        func render(_ report: Report) -> String {
            report.interfaces.map { i in "\(i.key.display),\(i.totals.rxBytes),\(i.totals.txBytes),\(i.quality.name)" }
                .joined(separator: "\n") + "\n"
        }
    }

    @Test func aToyOutputFormat() throws {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("Fixtures/traces/recreation.jsonl"), encoding: .utf8)
        var reader = TraceReader()
        var engine = DeltaEngine()
        for line in text.split(separator: "\n") {
            if let record = try reader.read(line: Array(line.utf8)) { engine.apply(record) }
        }
        let csv = CSVRenderer().render(Report(engine: engine, header: reader.header))
        #expect(csv.split(separator: "\n").first == "tun0,2100,1100,exact", "\(csv)")
        #expect(csv.contains("wg0,600,250,lower-bound"))
        // The command's formats are the list's, whatever it holds.
        let format = try #require(ReplayCommand.spec.options.first { $0.long == "--format" })
        #expect(format.choices == ReportFormats.names)
        #expect(ReportFormats.renderer("text", bits: false) is TextReportRenderer)
    }

    /// A toy source: two readings of one interface. A real one is this class
    /// in Sources/IfmeterSampling plus a `SourceKind` case and its line in
    /// `makeCounterSource` (Sources.swift), from which `--source` takes its
    /// choices.
    final class ToySource: CounterSource {
        let sourceName = "toy"
        private var reads = 0
        func read() throws(SystemError) -> SourceReading {
            reads += 1
            let counters = Counters(rxBytes: UInt64(reads) * 1000, txBytes: 0, rxPackets: UInt64(reads), txPackets: 0)
            return SourceReading(
                sample: Sample(
                    time: Double(reads),
                    interfaces: [
                        InterfaceSample(name: "toy0", index: 1, counters: counters)
                    ]))
        }
    }

    final class Totals: PipelineSink {
        var view = TotalsView<InterfaceTotals> { $0 }
        func receive(_ update: borrowing PipelineUpdate) { view.apply(update) }
    }

    @Test func aToyCounterSource() {
        let pipeline = Pipeline(source: ToySource(), configuration: PipelineConfiguration(sampleLimit: 3))
        let totals = Totals()
        pipeline.add(sink: totals)
        for _ in 0..<3 { pipeline.step() }
        #expect(totals.view[SeriesKey(name: "toy0")]?.totals.rxBytes == 2000 && totals.view[SeriesKey(name: "toy0")]?.quality == .exact)
        let source = CommonOptions.source.first { $0.long == "--source" }
        #expect(source?.choices == SourceKind.allCases.map(\.rawValue), "--source offers every kind the list has")
    }

    /// A toy subcommand: a real one is this struct in Sources/IfmeterCLI
    /// plus its line in `IfmeterCLI.commands`; its help, man page and
    /// completions come from its spec.
    struct HelloCommand: Command {
        static let nameOption = Option("--name", value: "name", help: "Whom to greet.", default: "world")
        static let spec = CommandSpec(name: "ifmeter hello", abstract: "Say hello.", discussion: "", options: [nameOption.spec])
        let name: String
        init(_ p: ParsedArguments) throws(CLIError) { name = p[Self.nameOption] ?? "world" }
        func run() throws(CLIError) {}
    }

    @Test func aToySubcommand() throws {
        let parsed = try ParsedArguments.parse(["--name", "ifmeter"], spec: HelloCommand.spec)
        #expect(try HelloCommand(parsed).name == "ifmeter")
        #expect(HelloCommand.spec.help.contains("USAGE: ifmeter hello") && HelloCommand.spec.help.contains("--name <name>"))
        let pages = ManPages(commands: IfmeterCLI.commands.map { $0.spec } + [HelloCommand.spec]).pages
        #expect(pages.contains { $0.fileName == "ifmeter-hello.1" && $0.text.contains("Whom to greet") })
        #expect(CompletionScript().script(for: .bash).contains("list") && IfmeterCLI.commands.count == 12)
    }
}
