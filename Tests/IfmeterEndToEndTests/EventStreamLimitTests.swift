import Foundation
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// serve's event stream (`/api/v1/events`, the dashboard's) over real
/// sockets (re-read of issue 33): 256 pages may follow it at once, the
/// 257th gets 503 and one line, a scrape is answered at once while they
/// follow, and a page that goes frees its place. EventChannelTests checks
/// the count in process; this checks serve keeps it.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct EventStreamLimitTests {
    static let port: UInt16 = 49731
    /// EventChannel's capacity, as serve builds it.
    static let capacity = 256

    /// A stream opened from `source` (a loopback address of `ns`): the
    /// socket and the status of its response's head, which is read whole
    /// and no further (the socket stays open, following the stream).
    static func openStream(_ ns: TestNamespace, from source: String, port: UInt16 = port) throws -> (fd: Int32, status: Int) {
        let fd = try RawHTTP.connect("127.0.0.1", port, in: ns.name, from: source)
        do {
            try RawHTTP.send(fd, "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\r\n")
            var head: [UInt8] = []
            var byte: UInt8 = 0
            while !head.reversed().starts(with: [10, 13, 10, 13]) {
                guard recv(fd, &byte, 1, 0) == 1 else {
                    throw TestFailure("the stream's head ended after \(head.count) bytes: \(String(decoding: head, as: UTF8.self))")
                }
                head.append(byte)
            }
            let status = String(decoding: head, as: UTF8.self).split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return (fd, status)
        } catch {
            close(fd)
            throw error
        }
    }

    @Test func theTwoHundredFiftySeventhPageGets503AndALeaverFreesItsPlace() throws {
        try Netns.requireRoot()
        // 258 sockets and more: the test's limit, not serve's.
        ServeHardeningTests.raiseDescriptorLimit()
        let ns = try TestNamespace()
        let server = try startServe(in: ns, port: Self.port, interval: "1s", name: "serve-events", ["--listen", "127.0.0.1:\(Self.port)"])
        defer { server.stop() }
        var streams: [Int32] = []
        defer { for fd in streams { close(fd) } }
        // From four addresses (64 each): under serve's per-address share of
        // connections (256), so only the channel's capacity can refuse.
        let sources = (2...5).map { "127.0.0.\($0)" }
        for n in 0..<Self.capacity {
            let stream = try Self.openStream(ns, from: sources[n % sources.count])
            streams.append(stream.fd)
            try #require(stream.status == 200, "stream \(n + 1) of \(Self.capacity): \(stream.status)")
        }

        // The 257th: refused, with one line and when to retry.
        let fd = try RawHTTP.connect("127.0.0.1", Self.port, in: ns.name, from: "127.0.0.6")
        defer { close(fd) }
        try RawHTTP.send(fd, "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:\(Self.port)\r\nConnection: close\r\n\r\n")
        let refused = try RawHTTP.read(fd)
        #expect(refused.status == 503)
        #expect(refused.text == "503 Service Unavailable: 256 pages are following this server already; try again later.\n", "\(refused.text)")
        #expect(refused.headers["retry-after"] == "10")
        // Not silent: serve's log says so.
        _ = try waitFor("the refusal in serve's log") {
            server.log.contains("refused an event stream (503): 256 pages are following already") ? true : nil
        }

        // A scrape while 256 follow is still answered (within the client's
        // own timeout; how fast is the benchmark's business, not a test's).
        let scrape = try RawHTTP.request("/metrics", port: Self.port, in: ns.name)
        #expect(scrape.status == 200)

        // Ten pages go: a new one is taken again, once serve saw them go.
        for fd in streams.suffix(10) { close(fd) }
        streams.removeLast(10)
        let again = try waitFor("a new stream after ten closed") { () throws -> Int32? in
            let stream = try Self.openStream(ns, from: "127.0.0.7")
            guard stream.status == 200 else {
                close(stream.fd)
                return nil
            }
            return stream.fd
        }
        streams.append(again)
        #expect(server.process.isRunning, "\(server.log)")
    }
}
