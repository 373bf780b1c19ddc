import Foundation
import IfmeterRemoteWrite
import IfmeterSystem
import IfmeterTestSupport
import Testing

/// A writer's lines go through serve's one logger (issue 46): two lines of
/// different words from one call site are one kind, held back together,
/// while the same call site of two writers (two receivers) are two, as the
/// sites of two places in the code are.
@Suite struct RemoteWriteLogTests {
    /// A writer to `http://<name>/api/v1/write`, its queue in `dir/<name>`,
    /// one push waiting.
    func writer(_ name: String, _ outcomes: [PostOutcome], log: Log, in dir: String) throws -> RemoteWriter {
        let writer = RemoteWriter(
            url: "http://\(name)/api/v1/write", queue: try DiskQueue(folder: dir + "/" + name.prefix { $0 != ":" }, maxBytes: 1 << 20),
            transport: RemoteWriteTests.ScriptedTransport(outcomes), batchBytes: 1, log: log)
        writer.enqueue(payload: RemoteWriteTests.request(), samples: 2)
        return writer
    }

    @Test func linesOfOneSiteAreOneKindWhateverTheirWordsAndTwoReceiversAreApart() throws {
        try RemoteWriteLibraries.load()
        let dir = try RemoteWriteTests.temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let said = CapturedLog(prefix: "ifmeter serve: ", every: 10)
        let first = try writer(
            "first:9090",
            [
                PostOutcome(status: 0, message: "Connection refused"), PostOutcome(status: 503, message: "overloaded"),
                PostOutcome(status: 500, message: "broken"),
            ], log: said.log, in: dir)
        let second = try writer("second", [PostOutcome(status: 0, message: "Connection refused")], log: said.log, in: dir)

        // One site ("...; retrying"), two different lines: the second held back.
        #expect(first.sendOnce() == .retry(retryAfter: nil))
        #expect(first.sendOnce() == .retry(retryAfter: nil))
        // The same site in another writer: its own kind, said.
        #expect(second.sendOnce() == .retry(retryAfter: nil))
        #expect(
            said.lines == [
                "ifmeter serve: remote write http://first:9090/api/v1/write: Connection refused; retrying",
                "ifmeter serve: remote write http://second/api/v1/write: Connection refused; retrying",
            ])
        // Ten seconds on, the next line of that site says what was held back.
        said.advance(10)
        #expect(first.sendOnce() == .retry(retryAfter: nil))
        #expect(
            said.lines.last
                == "ifmeter serve: remote write http://first:9090/api/v1/write: HTTP 500: broken; retrying (and 1 more messages like it in the last 10 s)"
        )
        #expect(said.lines.count == 3)
    }
}
