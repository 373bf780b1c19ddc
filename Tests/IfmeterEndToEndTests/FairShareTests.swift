import Foundation
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Fair shares of serve's event streams (issue 45, part 5), with the real
/// binary and headless Chromium: one address holding 260 streams takes only
/// its quarter, so another address's page follows the samples; a page
/// opened while every stream is taken follows them within 15 s of their
/// release (the bound), trying again after the 503 as Retry-After
/// says.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct FairShareTests {
    /// The per-address share serve gives: a quarter of 256.
    static let share = 64

    /// The page's sample number (`data-generation`), from the first read
    /// or a stream's event.
    static func generation(_ browser: Browser) throws -> Int {
        try browser.evaluate("Number(document.body.dataset.generation || 0)")
    }

    /// What the page had besides the refusals it was sent (Chromium logs
    /// each failed load as a network problem).
    static func problemsBesidesRefusals(_ browser: Browser) throws -> [BrowserProblem] {
        try browser.problems().filter { !($0.kind == "network" && $0.message.contains("status of 503")) }
    }

    @Test func oneAddressHolding260StreamsLeavesAnotherAddressesPageItsSamples() throws {
        try Netns.requireRoot()
        ServeHardeningTests.raiseDescriptorLimit()
        let ns = try TestNamespace()
        let port: UInt16 = 49764
        let server = try startServe(in: ns, port: port, interval: "1s", name: "serve-share", ["--listen", "127.0.0.1:\(port)"])
        defer { server.stop() }
        var streams: [Int32] = []
        defer { for fd in streams { close(fd) } }
        var statuses: [Int: Int] = [:]
        for _ in 0..<260 {
            // (Past 256 connections of one address, serve closes one: 0.)
            guard let stream = try? EventStreamLimitTests.openStream(ns, from: "127.0.0.2", port: port) else {
                statuses[0, default: 0] += 1
                continue
            }
            statuses[stream.status, default: 0] += 1
            if stream.status == 200 { streams.append(stream.fd) } else { close(stream.fd) }
        }
        #expect(statuses == [200: Self.share, 503: 260 - Self.share], "\(statuses)")
        // The refusal says why, in one line, and when to retry.
        let fd = try RawHTTP.connect("127.0.0.1", port, in: ns.name, from: "127.0.0.2")
        defer { close(fd) }
        try RawHTTP.send(fd, "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
        let answer = try RawHTTP.read(fd)
        #expect(answer.status == 503)
        #expect(
            answer.text
                == "503 Service Unavailable: this address follows this server with 64 pages already (the most one address may); close one or try again later.\n",
            "\(answer.text)")
        #expect(answer.headers["retry-after"] == "10")
        _ = try waitFor("the refusal in serve's log") {
            server.log.contains("refused an event stream (503): one address follows with 64 pages already") ? true : nil
        }

        // A page from 127.0.0.1 (Chromium's address for serve's) follows
        // the samples: its figures move by the stream, not by a reload.
        let browser = try Browser(in: ns)
        try browser.load("http://127.0.0.1:\(port)/")
        try browser.waitUntil("Number(document.body.dataset.generation || 0) > 0")
        let first = try Self.generation(browser)
        try browser.waitUntil("Number(document.body.dataset.generation) >= \(first + 2)")
        #expect(try browser.evaluate("document.body.dataset.stream", as: String.self) == "open")
        let problems = try Self.problemsBesidesRefusals(browser)
        #expect(problems.isEmpty, "\(problems)")
        #expect(server.process.isRunning)
    }

    @Test func aPageOpenedWhileEveryStreamIsTakenFollowsWithin15sOfTheirRelease() throws {
        try Netns.requireRoot()
        ServeHardeningTests.raiseDescriptorLimit()
        let ns = try TestNamespace()
        let port: UInt16 = 49765
        let server = try startServe(in: ns, port: port, interval: "1s", name: "serve-release", ["--listen", "127.0.0.1:\(port)"])
        defer { server.stop() }
        var streams: [Int32] = []
        defer { for fd in streams { close(fd) } }
        // Every place, from four addresses (their whole share each).
        for n in 0..<256 {
            let stream = try EventStreamLimitTests.openStream(ns, from: "127.0.0.\(2 + n % 4)", port: port)
            streams.append(stream.fd)
            try #require(stream.status == 200, "stream \(n + 1): \(stream.status)")
        }
        let browser = try Browser(in: ns)
        try browser.load("http://127.0.0.1:\(port)/")
        // Its first figures come from /api/v1/interfaces; its stream is refused.
        try browser.waitUntil("Number(document.body.dataset.generation || 0) > 0")
        _ = try waitFor("the page's stream refused") {
            server.log.contains("refused an event stream (503): 256 pages are following already") ? true : nil
        }
        // (revert check)
        let before = try Self.generation(browser)
        _ = try browser.screenshot("refused")

        // The 256 go; the page follows the samples within 15 s.
        for fd in streams { close(fd) }
        streams = []
        let released = Date()
        try browser.waitUntil("Number(document.body.dataset.generation) > \(before)", timeout: 15)
        let took = Date().timeIntervalSince(released); print("RELEASE-TO-FOLLOW", took)
        #expect(took <= 15, "the page followed \(took) s after the release")
        #expect(try browser.evaluate("document.body.dataset.stream", as: String.self) == "open")
        try browser.waitUntil("document.getElementById('status').textContent.startsWith('Updated')")
        _ = try browser.screenshot("following")
        let problems = try Self.problemsBesidesRefusals(browser)
        #expect(problems.isEmpty, "\(problems)")
        #expect(server.process.isRunning)
    }
}
