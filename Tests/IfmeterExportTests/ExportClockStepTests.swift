import Foundation
import IfmeterCore
import IfmeterExport
import IfmeterOutput
import IfmeterPipeline
import IfmeterSystem
import IfmeterTestSupport
import Synchronization
import Testing

/// A wall clock a test moves: it steps back and forward as NTP or an
/// administrator would, while the samples' monotonic times go on.
final class SteppedWall: Sendable {
    let now: Mutex<Double>
    init(_ start: Double) { now = Mutex(start) }
    func set(_ value: Double) { now.withLock { $0 = value } }
    func read() -> Double { now.withLock { $0 } }
}

/// Issue 29, finding 9: an export period whose start was after its end
/// (`01:00:11Z` to `00:00:26Z`, `"seconds": 15`) said nothing of the wall
/// clock that stepped. A period across a step says so: `clock_step_seconds`
/// (the wall-clock span less the monotonic one) and a sentence in `note`.
@Suite(.blocking) struct ExportClockStepTests {
    let noon = 1_796_040_000.0

    /// Export's JSON reports (one a line, `--json -`) of a pipeline whose
    /// samples come every monotonic second, the wall clock reading
    /// `walls[n]` at sample n; a period is two seconds (the last one ends at the stop).
    func reports(walls: [Double]) throws -> [String] {
        let wall = SteppedWall(walls[0])
        let steps = walls.indices.map { n in ScriptedSource.Step.sample(Double(n), [("eth0", 2, UInt64(n) * 1000, 0)]) }
        let pipeline = Pipeline(
            source: ScriptedSource(steps), configuration: PipelineConfiguration(interval: 1),
            clock: PipelineClock(monotonic: { 0 }, wall: { wall.read() }))
        let lines = Mutex<[String]>([])
        let exporter = Exporter(
            targets: Exporter.Targets(json: "-", jsonLines: nil, textfile: nil, every: 2, families: .ifmeter, version: "test"),
            linesFile: nil, host: "h", interval: 1, log: Log.everyLine { Issue.record("export said: \($0)") },
            stdout: { line in lines.withLock { $0.append(line) } })
        pipeline.add(sink: exporter)
        for time in walls {
            wall.set(time)
            pipeline.step()
        }
        pipeline.finish()
        return lines.withLock { $0 }
    }

    @Test func aPeriodAcrossAWallClockStepSaysSo() throws {
        let walls = [
            noon, noon + 1, noon + 2 - 3600, // back an hour: the period ends before it starts
            noon + 3 - 3600, noon + 4 - 3600 + 86400, // forward a day
            noon + 5.4 - 3600 + 86400, // 0.4 s of slew and reading: no step (the last period, written at the stop)
        ]
        let lines = try reports(walls: walls)
        let periods = try lines.map { try #require(try JSONParser.parse($0)["period"]) }
        #expect(periods.count == 3, "\(periods)")
        let back = periods[0]
        #expect(back["start"]?.stringValue == "2026-11-30T12:00:00.000Z" && back["end"]?.stringValue == "2026-11-30T11:00:02.000Z")
        #expect(back["seconds"] == .number(2.0) && back["clock_step_seconds"] == .number(-3600.0), "\(back)")
        let backNote = try #require(back["note"]?.stringValue)
        #expect(backNote.contains("wall clock stepped back 1 h 0 m during this period") && backNote.contains("monotonic"), "\(backNote)")
        #expect(periods[1]["clock_step_seconds"] == .number(86400.0))
        #expect(periods[1]["note"]?.stringValue?.contains("wall clock stepped forward 1 d 0 h during this period") == true, "\(periods[1])")
        #expect(periods[2]["clock_step_seconds"] == .number(0.0) && periods[2]["note"] == nil, "\(periods[2])")

        // Version 2 of the export report, and its schema says so.
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let files = lines.indices.map { "\(folder)/report\($0).json" }
        // (The schema names the product's sources; the script's is renamed.)
        for (line, file) in zip(lines, files) {
            try line.replacingOccurrences(of: #""source":"scripted""#, with: #""source":"netlink""#).write(
                toFile: file, atomically: true, encoding: .utf8)
        }
        #expect(try JSONParser.parse(lines[0])["schema_version"] == .number(2))
        let schema = try checkJSONSchema(files, schema: "ifmeter-report.v2.schema.json")
        #expect(schema.ok, "\(schema.output)")
    }

    /// `sample --count` and `--watch` print each interval under its wall
    /// time: across a step the headings went back an hour with no word.
    /// Each update carries the step since the sample before (the pipeline
    /// reads both clocks), and the interval's text and JSON say it.
    @Test func anIntervalAcrossAWallClockStepSaysSo() throws {
        let wall = SteppedWall(noon)
        let pipeline = Pipeline(
            source: ScriptedSource((0..<4).map { .sample(Double($0), [("eth0", 2, UInt64($0) * 1000, 0)]) }),
            configuration: PipelineConfiguration(interval: 1), clock: PipelineClock(monotonic: { 0 }, wall: { wall.read() }))
        let steps = [(noon, 0.0), (noon + 1, 0), (noon + 2 - 3600, -3600), (noon + 3.2 - 3600, 0)].map { time, step in
            wall.set(time)
            return (pipeline.step().clockStepSeconds, step)
        }
        for (n, (got, expected)) in steps.enumerated() { #expect(got == expected, "sample \(n)") }

        let deltas = [
            InterfaceDelta(
                name: "eth0", classification: Classification(kind: .ethernet, evidence: "scripted"), index: 2, change: .steady,
                counters: .zero, seconds: 1, quality: .exact, time: 2)
        ]
        var shown = Set<Quality>()
        let text = IntervalRenderer().text(
            deltas: deltas, totals: { _ in nil }, time: 2, seconds: 1, heading: "2026-11-30 11:00:02 UTC", clockStep: -3600, shown: &shown)
        #expect(text.hasPrefix("2026-11-30 11:00:02 UTC (interval 1 s)\nThe wall clock stepped back 1 h 0 m during this interval: "), "\(text)")
        let json = IntervalRenderer().json(deltas: deltas, totals: { _ in nil }, time: 2, seconds: 1, clockStep: -3600)
        #expect(json["clock_step_seconds"] == .number(-3600.0) && json["note"]?.stringValue?.contains("stepped back 1 h 0 m") == true)
        let steady = IntervalRenderer().json(deltas: deltas, totals: { _ in nil }, time: 2, seconds: 1)
        #expect(steady["clock_step_seconds"] == nil && steady["note"] == nil, "an interval without a step is as before")
    }

    /// The tolerance grows with the period: NTP slews a clock by up to
    /// 500 ppm, so an hour's period may drift 1.8 s without a step.
    @Test func slewIsNoStep() {
        #expect(ClockStep.seconds(wall: (noon, noon + 3601.8), monotonic: (0, 3600)) == 0)
        #expect(ClockStep.seconds(wall: (noon, noon + 1.5), monotonic: (0, 0.4)) == 1.1)
        #expect(ClockStep.seconds(wall: (noon, noon + 15), monotonic: (0, 15)) == 0)
        #expect(ClockStep.seconds(wall: (noon, .nan), monotonic: (0, 15)) == 0, "no reading, no claim")
        #expect(ClockStep.sentence(0, during: "this period") == nil)
    }
}
