import Foundation
import IfmeterSystem
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// DNS rebinding (issue 45, part 4): serve answers only requests whose Host
/// names it (an address, a name of one label, the machine's names, an
/// --allow-host name); a page of another name that its author pointed at
/// 127.0.0.1 reads nothing, in Chromium too. A real Prometheus scraping
/// serve by the machine's host name keeps working.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct RebindingTests {
    /// One request on its own connection, with `host` as its Host header
    /// (nil: none) and `version` as its HTTP version.
    static func get(_ path: String, host: String?, port: UInt16, in ns: TestNamespace, version: String = "HTTP/1.1") throws -> HTTPResult {
        let fd = try RawHTTP.connect("127.0.0.1", port, in: ns.name)
        defer { close(fd) }
        try RawHTTP.send(fd, "GET \(path) \(version)\r\n" + (host.map { "Host: \($0)\r\n" } ?? "") + "Connection: close\r\n\r\n")
        return try RawHTTP.read(fd)
    }

    static func refusal(_ name: String) -> String {
        "421 Misdirected Request: this server does not answer to the name '\(name)' (a page of another site could use such a name to read it: DNS rebinding); if it is this server's name, start serve with --allow-host rebind.attacker.test.\n"
    }

    @Test func aRebindingNameGets421AndOneLineWhileTheServersOwnNamesAreAnswered() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-rebind-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49760
        let server = try startLoopbackServe(in: ns, port: port, ["--state", dir + "/state.db"])
        defer { server.stop() }

        // Every path, its port or not, any case, a trailing dot: refused,
        // with one line and none of the data.
        for (path, host) in [
            ("/api/v1/interfaces", "rebind.attacker.test:\(port)"), ("/api/v1/routes", "rebind.attacker.test"),
            ("/api/v1/usage", "REBIND.Attacker.Test.:\(port)"), ("/metrics", "rebind.attacker.test"), ("/", "rebind.attacker.test."),
            ("/api/v1/events", "rebind.attacker.test:\(port)"),
        ] {
            let refused = try Self.get(path, host: host, port: port, in: ns)
            #expect(refused.status == 421, "\(path) for \(host): \(refused.status) \(refused.text.prefix(200))")
            #expect(refused.text == Self.refusal(host), "\(path) for \(host): \(refused.text.prefix(300))")
        }
        _ = try waitFor("the refusal in serve's log") {
            server.log.contains("refused a request for host 'rebind.attacker.test:\(port)' (421)") ? true : nil
        }

        // Its own names: addresses (IPv6 in brackets), localhost in any
        // case with a trailing dot, the machine's host name, no Host at all
        // (HTTP/1.0).
        for host in ["127.0.0.1:\(port)", "127.0.0.1", "[::1]:\(port)", "LocalHost.:\(port)", "localhost", hostName(), "\(hostName()):\(port)"] {
            let answered = try Self.get("/api/v1/interfaces", host: host, port: port, in: ns)
            #expect(answered.status == 200 && answered.text.contains("\"interfaces\""), "\(host): \(answered.status) \(answered.text.prefix(200))")
        }
        let old = try Self.get("/metrics", host: nil, port: port, in: ns, version: "HTTP/1.0")
        #expect(old.status == 200 && old.text.contains("ifmeter_receive_bytes_total"), "HTTP/1.0 without Host: \(old.status) \(old.text.prefix(200))")
        #expect(server.process.isRunning)
    }

    @Test func allowHostAnswersAConfiguredNameAndABadOneIsAUsageError() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let port: UInt16 = 49761
        let server = try startLoopbackServe(in: ns, port: port, ["--allow-host", "Metrics.Example.ORG.,scrape.example.net"])
        defer { server.stop() }
        for host in ["metrics.example.org:\(port)", "METRICS.example.org.", "scrape.example.net"] {
            let answered = try Self.get("/metrics", host: host, port: port, in: ns)
            #expect(answered.status == 200, "\(host): \(answered.status) \(answered.text.prefix(200))")
        }
        let other = try Self.get("/metrics", host: "other.example.org", port: port, in: ns)
        #expect(other.status == 421)

        let bad = try run([try ifmeterBinary(), "serve", "--listen", "127.0.0.1:1", "--allow-host", "bad name.example"], allowFailure: true)
        #expect(bad.status == 64)
        #expect(
            bad.err
                == "Error: invalid value 'bad name.example' for '--allow-host <name>': expected a host name like metrics.example.org (letters, digits, '-' and '_' between dots), or * for any. See 'ifmeter serve --help'.\n",
            "\(bad.err)")
    }

    @Test func aPageOfARebindingNameCannotReadTheAPIsInChromium() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-rebind-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49762
        let server = try startLoopbackServe(in: ns, port: port, ["--state", dir + "/state.db"])
        defer { server.stop() }
        // The attacker's name resolves to this machine, as after rebinding:
        // for the browser, the page and serve's APIs are one origin.
        let browser = try Browser(in: ns, hostResolverRules: "MAP rebind.attacker.test 127.0.0.1")
        try browser.load("http://rebind.attacker.test:\(port)/")
        let origin: String = try browser.evaluate("location.origin")
        #expect(origin == "http://rebind.attacker.test:\(port)")
        // The page itself is the refusal, and so is what its script reads.
        let page: String = try browser.evaluate("document.body.innerText")
        #expect(page.hasPrefix("421 Misdirected Request"), "\(page.prefix(200))")
        #expect(try browser.evaluate("document.querySelector('#interfaces') === null", as: Bool.self))
        let read: [[String]] = try browser.evaluate(
            "Promise.all(['/api/v1/interfaces', '/api/v1/routes', '/api/v1/usage', '/metrics'].map((u) => fetch(u).then(async (r) => [u, String(r.status), await r.text()])))"
        )
        #expect(read.count == 4)
        for answer in read {
            #expect(answer[1] == "421", "\(answer[0]): \(answer[1]) \(answer[2].prefix(200))")
            #expect(answer[2].hasPrefix("421 Misdirected Request: this server does not answer to the name 'rebind.attacker.test:\(port)'"))
        }
        // The same browser by serve's own address reads the dashboard.
        try browser.load("http://127.0.0.1:\(port)/")
        try browser.waitUntil("Number(document.body.dataset.generation || 0) > 0")
        #expect(server.process.isRunning)
    }

    @Test func prometheusScrapesServeByTheMachinesHostName() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        // A host name with dots (a name of one label is answered anyway):
        // serve's own (a UTS namespace of its own), and the namespace's
        // /etc/hosts (`ip netns exec` mounts /etc/netns/NS/hosts over it)
        // resolves it for Prometheus.
        let name = "scrape-\(ns.name.suffix(8).lowercased().filter { $0.isLetter || $0.isNumber }).ifmeter.test"
        let etc = "/etc/netns/\(ns.name)"
        try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(atPath: etc)
            _ = rmdir("/etc/netns") // only when no other namespace has one
        }
        try "127.0.0.1 localhost\n127.0.0.1 \(name)\n".write(toFile: etc + "/hosts", atomically: true, encoding: .utf8)
        let port: UInt16 = 49763
        let serve = try Background(
            [
                "ip", "netns", "exec", ns.name, "unshare", "--uts", "sh", "-c",
                "hostname \(name) && exec \(try ifmeterBinary()) serve --interval 500ms --listen 127.0.0.1:\(port)",
            ], name: "serve-hostname")
        defer { serve.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-prom-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try """
        global:
          scrape_interval: 1s
        scrape_configs:
          - job_name: ifmeter
            static_configs:
              - targets: ['\(name):\(port)']
        """.write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
        let prometheus = try Background(
            [
                "ip", "netns", "exec", ns.name, "prometheus", "--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/data",
                "--web.listen-address=127.0.0.1:9090", "--log.level=warn",
            ], name: "prometheus-hostname")
        defer { prometheus.stop() }
        // Prometheus's own word on the target: up, and serve's series.
        let health = try waitFor("Prometheus to scrape serve by \(name)") { () throws -> String? in
            try serve.requireRunning()
            try prometheus.requireRunning()
            let targets = try RawHTTP.request("/api/v1/targets", port: 9090, in: ns.name).text
            guard targets.contains("\"scrapeUrl\":\"http://\(name):\(port)/metrics\""), !targets.contains("\"health\":\"unknown\"") else {
                return nil
            }
            return targets
        }
        #expect(health.contains("\"health\":\"up\""), "\(health.prefix(1500))")
        #expect(!serve.log.contains("refused a request"), "\(serve.log)")
    }
}
