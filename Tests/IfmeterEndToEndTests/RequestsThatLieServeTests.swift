import Foundation
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 45, part 6's HTTP items, against the real serve (and the real
/// binary's stdout): each was a line that lied or a silence.
/// `Tests/IfmeterServeTests/RequestsThatLieTests.swift` checks the same
/// policies in process.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct RequestsThatLieServeTests {
    func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-lies-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// `ifmeter_http_server_errors_total` lines with a count above 0.
    func serverErrors(_ port: UInt16, _ ns: TestNamespace) throws -> [String] {
        try RawHTTP.request("/metrics", port: port, in: ns.name).text.split(separator: "\n")
            .filter { $0.hasPrefix("ifmeter_http_server_errors_total{") && !$0.hasSuffix(" 0") }.map(String.init)
    }

    /// A `%00`, a key given twice, `history=2`, a key `/api/v1/routes`
    /// does not read and `begin` after `end`: each one 400 line naming the
    /// key, none counted as the server's failure.
    @Test func aQueryIsReadAsSentAndEachMistakeIsTheClients() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49741
        let server = try startLoopbackServe(in: ns, port: port, ["--state", dir + "/state.db"])
        defer { server.stop() }
        let refused: [(String, String)] = [
            (
                "/api/v1/usage?interface=lo%00anything",
                "invalid interface: its value holds %00 (a NUL byte), which no value here holds; leave it out"
            ),
            ("/api/v1/usage?limit=1%00garbage", "invalid limit: its value holds %00 (a NUL byte), which no value here holds; leave it out"),
            ("/api/v1/usage?limit=1&limit=2", "'limit' is given twice; give each parameter once"),
            ("/usage.png?granularity=day&granularity=summary", "'granularity' is given twice; give each parameter once"),
            ("/api/v1/interfaces?history=2", "invalid history '2'; use history=1 for the last minutes' rates, or leave it out"),
            ("/api/v1/routes?probe=1.1.1.1", "unknown parameter 'probe'; /api/v1/routes takes no parameters"),
            (
                "/api/v1/usage?begin=2026-11-02&end=2026-11-01",
                "begin '2026-11-02' is not before end '2026-11-01': give begin before end (an end date takes its whole day)"
            ),
            (
                "/usage.png?begin=2026-11-01T10:00&end=2026-11-01T09:00",
                "begin '2026-11-01T10:00' is not before end '2026-11-01T09:00': give begin before end (an end date takes its whole day)"
            ),
        ]
        for (target, message) in refused {
            let answer = try RawHTTP.request(target, port: port, in: ns.name)
            #expect(answer.status == 400 && answer.text == "400 Bad Request: \(message).\n", "\(target): \(answer.status) \(answer.text)")
        }
        // What was asked well is still answered.
        for target in ["/api/v1/usage?interface=lo&limit=1", "/api/v1/interfaces?history=1", "/api/v1/routes"] {
            #expect(try RawHTTP.request(target, port: port, in: ns.name).status == 200, "\(target)")
        }
        #expect(try serverErrors(port, ns).isEmpty)
        #expect(!server.log.contains("answered"), "\(server.log)")
    }

    /// `/usage.png` without libcairo (hidden under /dev/null in a mount
    /// namespace of serve's own): the client's 500 names no file of the
    /// server, serve's log has the detail, and the answer is counted.
    @Test func aServerErrorNamesNoFileOfTheServer() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49742
        let hide = #"mount --bind /dev/null "$(ldconfig -p | sed -n 's/.*libcairo\.so\.2 (.*) => //p' | head -n 1)" && exec "$0" "$@""#
        let server = try startServe(
            in: ns, port: port, wrapper: ["unshare", "--mount", "sh", "-c", hide], ["--listen", "127.0.0.1:\(port)", "--state", dir + "/state.db"])
        defer { server.stop() }
        let answer = try RawHTTP.request("/usage.png?granularity=summary", port: port, in: ns.name)
        #expect(answer.status == 500)
        #expect(answer.text == "500 Internal Server Error: ifmeter could not answer this request; serve's log says why.\n", "\(answer.text)")
        #expect(!answer.text.contains("/"), "no path: \(answer.text)")
        let said = try waitFor("the detail in serve's log") { () throws -> String? in
            try server.requireRunning()
            return server.log.split(separator: "\n").first { $0.contains("answered /usage.png with 500") }.map(String.init)
        }
        #expect(said.contains("libcairo.so.2 could not be loaded (/"), "the log has the library's path: \(said)")
        #expect(try serverErrors(port, ns) == ["ifmeter_http_server_errors_total{code=\"500\",path=\"/usage.png\"} 1"])
    }

    /// The file descriptors of serve that are sockets.
    func sockets(_ server: Background) -> Int? {
        server.process.whileRunning { pid -> Int? in
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return nil }
            return entries.filter {
                ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) ?? "").hasPrefix("socket:")
            }
            .count
        }
    }

    /// Pages that follow the event stream and go (closed, or reset as a
    /// killed browser's are): once serve has let go of their sockets, its
    /// log has no "Failed to send the chunked response body".
    @Test func aClosedPageIsNoErrorInTheLog() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let port: UInt16 = 49743
        let server = try startLoopbackServe(in: ns, port: port)
        defer { server.stop() }
        let before = try waitFor("serve's sockets") { sockets(server) }
        var streams: [Int32] = []
        for n in 0..<6 {
            let fd = try RawHTTP.connect("127.0.0.1", port, in: ns.name, timeout: 30)
            streams.append(fd)
            try RawHTTP.send(fd, "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            // Following: a sample's event has arrived.
            var seen: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !String(decoding: seen, as: UTF8.self).contains("event: sample") {
                let got = recv(fd, &buffer, buffer.count, 0)
                guard got > 0 else { throw TestFailure("stream \(n) ended: \(String(decoding: seen, as: UTF8.self))") }
                seen += buffer[..<got]
            }
            if n % 2 == 1 {
                // Reset on close, as a killed browser's connection is.
                var linger = linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
            }
        }
        #expect(sockets(server) == before + streams.count)
        for fd in streams { close(fd) }
        _ = try waitFor("serve to let go of the closed pages") { () throws -> Bool? in
            try server.requireRunning()
            return sockets(server) == before ? true : nil
        }
        #expect(!server.log.contains("Failed to send the chunked response body"), "\(server.log)")
    }

    /// A link whose name is broken percent-encoding (`#i=%E0%A4%A`) in
    /// headless Chromium: no uncaught URIError, the page says the link is
    /// malformed, and the interface shown before is gone; a good link
    /// after it shows its interface again.
    @Test func aMalformedLinkIsSaidAndShowsNoInterface() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let port: UInt16 = 49744
        let server = try startLoopbackServe(in: ns, port: port)
        defer { server.stop() }
        let browser = try Browser(in: ns)
        defer { browser.close() }
        try browser.load("http://127.0.0.1:\(port)/#i=lo")
        try browser.waitUntil(
            "document.getElementById('detail-title').textContent === 'lo' && document.getElementById('facts').textContent.includes('Kind')")
        _ = try browser.evaluate("(location.hash = '#i=%E0%A4%A', true)", as: Bool.self)
        try browser.waitUntil("document.getElementById('detail-title').textContent === 'Malformed link'")
        let said: String = try browser.evaluate("document.getElementById('detail').textContent")
        #expect(said.contains("#i=%E0%A4%A names no interface: its percent-encoding is broken"), "\(said)")
        #expect(!said.contains("Kind") && !said.contains("Received"), "the interface shown before is gone: \(said)")
        #expect(try browser.evaluate("document.getElementById('graph').childElementCount", as: Int.self) == 0)
        #expect(try browser.evaluate("document.getElementById('overview').hidden", as: Bool.self))
        // A sample later, still no interface's facts (the page does not bring lo back).
        let generation: String = try browser.evaluate("document.body.dataset.generation || ''")
        try browser.waitUntil("(document.body.dataset.generation || '') !== \(RequestsThatLieServeTests.quoted(generation))")
        #expect(try browser.evaluate("document.getElementById('detail-title').textContent", as: String.self) == "Malformed link")
        _ = try browser.evaluate("(location.hash = '#i=lo', true)", as: Bool.self)
        try browser.waitUntil("document.getElementById('detail-title').textContent === 'lo'")
        try browser.expectNoProblems()
    }

    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "\\'") + "'" }

    /// stdout a pipe whose reader has gone: each command that writes there
    /// ends quietly with 141 (what a shell shows for `yes | head -1`), as
    /// `ifmeter usage | head -1` should, instead of "Error: write failed:
    /// Broken pipe" and 1.
    @Test func aClosedStdoutEndsEveryCommandQuietly() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state.db", trace = dir + "/trace.jsonl", config = dir + "/ifmeter.yml"
        #expect(try ifmeter(["plan", "set", "lo", "--state", state, "--cycle-start", "1", "--quota", "1GB"], in: ns).status == 0)
        #expect(try ifmeter(["record", "--count", "1", "--interval", "100ms", "-o", trace], in: ns).status == 0)
        try "interval: 1s\n".write(toFile: config, atomically: true, encoding: .utf8)
        let commands: [[String]] = [
            ["list"], ["list", "--format", "json"], ["sample"], ["sample", "--count", "1", "--interval", "100ms"],
            ["sample", "--watch", "--interval", "100ms", "--format", "json"], ["record", "--count", "1", "--interval", "100ms"], ["replay", trace],
            ["replay", trace, "--format", "text"], ["usage", "--state", state], ["usage", "--state", state, "--hourly"],
            ["usage", "--state", state, "--format", "json"], ["plan", "list", "--state", state], ["config", "check", config],
            ["route"], ["live", "--interval", "100ms"], ["--help"], ["usage", "--help"],
        ]
        for arguments in commands {
            var fds: [Int32] = [-1, -1]
            try #require(pipe(&fds) == 0)
            close(fds[0]) // the reader has gone before the first write
            let errPath = dir + "/err"
            let err = open(errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            let child = try ChildProcess(["ip", "netns", "exec", ns.name, try ifmeterBinary()] + arguments, stdout: fds[1], stderr: err)
            close(fds[1])
            close(err)
            child.waitUntilExit()
            let said = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
            #expect(child.terminationReason == .exit && child.terminationStatus == 141, "\(arguments): \(child.terminationStatus) \(said)")
            #expect(!said.contains("Broken pipe") && !said.contains("Error"), "\(arguments): \(said)")
        }
    }
}
