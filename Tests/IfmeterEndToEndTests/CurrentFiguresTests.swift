import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// serve's usage tables are current within one sample (issue 46): the
/// state file's rows plus what was counted since its last save, as the
/// plan gauges are. With the default 5-minute save interval, traffic sent
/// a moment ago is in today's row, this hour's and this five minutes'
/// before any save; the `usage` command, which reads the file alone,
/// shows it as of its last save and says when that was.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct CurrentFiguresTests {
    func sentOn(_ document: JSONValue?, _ interface: String) -> UInt64? {
        guard case .array(let rows)? = document?["interfaces"] else { return nil }
        guard let row = rows.first(where: { $0["name"]?.stringValue == interface }) else { return 0 }
        guard case .array(let periods)? = row["periods"] else { return nil }
        return periods.reduce(0) { $0 + ($1["tx_bytes"]?.uint64Value ?? 0) }
    }

    @Test func trafficSentAMomentAgoIsInTheTablesBeforeAnySave() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-current-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db"
        let port: UInt16 = 19459
        // The default save interval (5 minutes): no save comes during the test.
        let server = try startServe(in: pair.a, port: port, ["--listen", "127.0.0.1:\(port)", "--state", state])
        defer { server.stop() }
        func saves() throws -> UInt64? {
            let text = try RawHTTP.request("/metrics", port: port, in: pair.a.name).text
            return text.split(separator: "\n").first { $0.hasPrefix("ifmeter_state_saves_total ") }?.split(separator: " ").last
                .flatMap { UInt64($0) }
        }
        _ = try waitFor("serve's first sample") { try saves() }
        let savesBefore = try saves()
        try pair.sendUDP(count: 200, payload: 900)
        let sent = 200 * VethPair.frameBytes(payload: 900)
        for granularity in ["day", "hour", "fiveminutes", "month", "year"] {
            let shown = try waitFor("vA's \(granularity) rows to hold what was sent") { () throws -> UInt64? in
                let response = try RawHTTP.request("/api/v1/usage?granularity=\(granularity)&interface=vA", port: port, in: pair.a.name)
                guard response.status == 200 else { throw TestFailure("\(granularity): \(response.status) \(response.text)") }
                guard let tx = sentOn(try JSONParser.parse(response.text), "vA") else { throw TestFailure("\(granularity): \(response.text)") }
                return tx >= sent ? tx : nil
            }
            #expect(shown >= sent, "\(granularity)")
        }
        // All of it before a save: the file has not been written since.
        #expect(try saves() == savesBefore, "no save came between: the figures were the file's plus the unsaved")
        // The command reads the file: what it holds as of its last save,
        // which its document names.
        let cli = try ifmeter(["usage", "--state", state, "--format", "json", "--daily", "--include", "vA"])
        #expect(cli.status == 0, "\(cli.err)")
        let document = try JSONParser.parse(cli.out)
        #expect((sentOn(document, "vA") ?? 0) < sent, "usage shows the file as of its last save: \(cli.out)")
        #expect(document["state"]?["saved_at"].map { $0 != .null } == true, "usage says as of when: \(cli.out)")
    }
}
