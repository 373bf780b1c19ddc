import Foundation
import IfmeterCore
import IfmeterExport
import IfmeterOutput
import IfmeterPipeline
import IfmeterSystem
import IfmeterTestSupport
import Synchronization
import Testing

func temporaryFolder() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-export-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// The exporter in process, fed by a scripted source one monotonic second
/// a sample: when a period ends, what a stop adds, what a failed write
/// says. No process, no clock: the pipeline is stepped.
@Suite struct ExporterTests {
    let noon = 1_796_040_000.0

    struct Run {
        var lines: [String] = []
        var log: [String] = []
    }

    /// Export of `samples` samples (eth0 sending 1000 bytes a second),
    /// a period every two seconds; `beforeSample` runs before each one.
    func export(
        samples: Int, json: String = "-", textfile: String? = nil, beforeSample: (Int) -> Void = { _ in }
    ) -> Run {
        let steps = (0..<samples).map { n in ScriptedSource.Step.sample(Double(n), [("eth0", 2, UInt64(n) * 1000, 0)]) }
        let wall = Mutex(noon)
        let pipeline = Pipeline(
            source: ScriptedSource(steps), configuration: PipelineConfiguration(interval: 1),
            clock: PipelineClock(monotonic: { 0 }, wall: { wall.withLock { $0 } }))
        let run = Mutex(Run())
        let exporter = Exporter(
            targets: Exporter.Targets(json: json, jsonLines: nil, textfile: textfile, every: 2, families: .ifmeter, version: "test"),
            linesFile: nil, host: "h", interval: 1, log: Log.everyLine(prefix: "ifmeter export: ") { line in run.withLock { $0.log.append(line) } },
            stdout: { line in run.withLock { $0.lines.append(line) } })
        pipeline.add(sink: exporter)
        for n in 0..<samples {
            wall.withLock { $0 = noon + Double(n) }
            beforeSample(n)
            pipeline.step()
        }
        pipeline.finish()
        return run.withLock { $0 }
    }

    func periods(_ run: Run) throws -> [JSONValue] {
        try run.lines.map { try #require(try JSONParser.parse($0)["period"]) }
    }

    @Test func aStopRightAfterAPeriodAddsNoEmptyPeriod() throws {
        // Samples at 0 to 4 s: periods end at 2 and 4 s, and the stop at 4 s
        // has nothing after the last one.
        let periods = try periods(export(samples: 5))
        #expect(periods.map { $0["seconds"] } == [.number(2.0), .number(2.0)], "\(periods)")
    }

    @Test func aStopWithinAPeriodWritesWhatThereIsOfIt() throws {
        let run = export(samples: 6)
        let periods = try periods(run)
        #expect(periods.map { $0["seconds"] } == [.number(2.0), .number(2.0), .number(1.0)], "\(periods)")
        let last = try JSONParser.parse(try #require(run.lines.last))
        guard case .array(let interfaces) = last["interfaces"], let eth0 = interfaces.first(where: { $0["name"]?.stringValue == "eth0" })
        else {
            Issue.record("no eth0 in \(run.lines.last ?? "")")
            return
        }
        #expect(eth0["period"]?["counters"]?["rx_bytes"]?.uint64Value == 1000, "\(eth0)")
        #expect(eth0["totals"]?["rx_bytes"]?.uint64Value == 5000, "\(eth0)")
    }

    @Test func aFailedWriteIsSaidOnceKeepsThePreviousFileAndSaysWhenItWorksAgain() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let target = folder + "/missing/report.json"
        // The folder appears after the second period failed.
        let run = export(samples: 8, json: target) { n in
            if n == 5 { try? FileManager.default.createDirectory(atPath: folder + "/missing", withIntermediateDirectories: false) }
        }
        #expect(run.log.count == 2, "\(run.log)")
        #expect(run.log.first?.contains("the previous file is kept, retrying every 2 s") == true, "\(run.log)")
        #expect(run.log.last == "ifmeter export: writing \(target) works again", "\(run.log)")
        let written = try JSONParser.parse(try String(contentsOfFile: target, encoding: .utf8))
        #expect(written["period"]?["seconds"] == .number(1.0), "the stop's period replaced the one before")
    }

    @Test func theTextfileIsTheExpositionOfTheTotals() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let textfile = folder + "/ifmeter.prom"
        _ = export(samples: 3, textfile: textfile)
        let text = try String(contentsOfFile: textfile, encoding: .utf8)
        #expect(text.contains("\nifmeter_receive_bytes_total{interface=\"eth0\",kind=\"ethernet\"} 2000\n"), "\(text.prefix(400))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["ifmeter.prom"], "no temporary file left")
    }
}
