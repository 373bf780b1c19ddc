import Foundation
import IfmeterServe
import Testing

/// `/api/v1/usage`'s and `/usage.png`'s statuses follow from the failure's
/// case (`UsageQueryError`), in process: a state file not there now is
/// 503 with Retry-After, one that cannot be read (a folder, a file that
/// is no state file) 500, a name the picture cannot draw alone 400.
@Suite struct UsageEndpointTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-usage-endpoint-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func theStatusIsTheFailuresCase() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let garbage = dir + "/notes.db"
        try String(repeating: "not a state file\n", count: 300).write(toFile: garbage, atomically: true, encoding: .utf8)
        for (path, status) in [(dir + "/missing.db", 503), (dir, 500), (garbage, 500)] {
            for granularity in ["hour", "day"] {
                let answer = UsageEndpoint.tables(state: path, query: UsageQuery(granularity: granularity))
                #expect(answer.status == status, "\(path) \(granularity): \(answer.status)")
                let retry = answer.headers.contains { $0.0 == "Retry-After" }
                #expect(retry == (status == 503), "\(path) \(granularity): Retry-After only when it may come")
            }
            #expect(UsageEndpoint.image(state: path, query: UsageQuery(granularity: "summary")).status == status, "\(path): the picture")
        }
        let pattern = UsageEndpoint.image(state: dir + "/missing.db", query: UsageQuery(granularity: "day", interface: "v*"))
        #expect(pattern.status == 400)
    }
}
