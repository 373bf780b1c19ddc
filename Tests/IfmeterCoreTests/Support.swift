import Foundation
import IfmeterCore
import Testing

/// The repository's `Fixtures/` folder, found from this file's path.
let fixtures = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

/// Reads a whole trace text into records, with its header.
func readTrace(_ text: String) throws -> (TraceHeader, [TraceRecord]) {
    var reader = TraceReader()
    var records: [TraceRecord] = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if let record = try reader.read(line: Array(line.utf8)) { records.append(record) }
    }
    return (reader.header, records)
}

/// Replays a trace text through a fresh engine.
func replay(_ text: String, configuration: EngineConfiguration? = nil) throws -> (DeltaEngine, TraceHeader) {
    let (header, records) = try readTrace(text)
    var engine = DeltaEngine(configuration: configuration ?? EngineConfiguration(platform: header.platform))
    for record in records { engine.apply(record) }
    return (engine, header)
}

func totals(_ engine: DeltaEngine, _ name: String) -> [UInt64] {
    guard let t = engine.totals(for: name) else { return [] }
    return CounterKey.required.map { t.totals.value($0) }
}
