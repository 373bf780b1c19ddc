import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ifmeter serve` inside the tests' own namespaces: checked by promtool,
/// OpenMetrics' reference parser, node_exporter, and abused.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ServeTests {
    static let port: UInt16 = 9874

    /// Starts `ifmeter serve` in `ns` and waits until it answers.
    func serve(_ ns: TestNamespace, _ extra: [String] = []) throws -> Background {
        try startServe(in: ns, port: Self.port, extra)
    }

    func metrics(_ ns: TestNamespace, openMetrics: Bool = false) throws -> HTTPResult {
        let accept =
            openMetrics
            ? "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
            : "*/*"
        return try RawHTTP.request("/metrics", port: Self.port, in: ns.name, headers: ["Accept": accept])
    }

    /// A sample's value from a text exposition.
    func value(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.split(separator: " ").last ?? "")
        }
        return nil
    }

    /// Waits until serve in `ns` took `atLeast` samples (a scrape before
    /// its first sample has no interfaces), and returns that scrape's text.
    @discardableResult
    func waitForSamples(_ ns: TestNamespace, _ server: Background, atLeast: Double) throws -> String {
        try waitFor("serve to take \(Int(atLeast)) samples") {
            try server.requireRunning()
            let text = try metrics(ns).text
            return (value(text, "ifmeter_samples_total") ?? 0) >= atLeast ? text : nil
        }
    }

    @Test func promtoolAcceptsTheTextFormatAndTheParserOpenMetrics() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        try pair.a.ip("tuntap", "add", "mode", "tun", "dev", "tun\"q") // a quote in a label value
        let server = try serve(pair.a, ["--compat", "node"])
        defer { server.stop() }
        try waitForSamples(pair.a, server, atLeast: 1)
        let text = try metrics(pair.a)
        #expect(text.status == 200)
        #expect(text.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
        let promtool = try run(["promtool", "check", "metrics"], input: text.text, allowFailure: true)
        #expect(promtool.status == 0, "promtool: \(promtool.out)\(promtool.err)")
        #expect(text.text.contains(#"interface="tun\"q""#))
        #expect(!text.text.contains("# EOF"))
        for line in text.text.split(separator: "\n") where line.hasPrefix("# HELP ifmeter_") {
            #expect(line.contains("from interface counters") && line.contains("not per-app"), "\(line)")
        }

        let om = try metrics(pair.a, openMetrics: true)
        #expect(om.headers["content-type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8")
        #expect(om.text.hasSuffix("# EOF\n"))
        #expect(om.text.contains("# TYPE ifmeter_receive_bytes counter\n"))
        #expect(om.text.contains("ifmeter_samples_created "))
        #expect(!om.text.contains("ifmeter_receive_bytes_created"), "no _created where the start is unknown")
        let parser = """
            import sys
            from prometheus_client.openmetrics.parser import text_string_to_metric_families
            families = list(text_string_to_metric_families(sys.stdin.read()))
            print(len(families))
            """
        let parsed = try run(["/usr/bin/python3", "-c", parser], input: om.text, allowFailure: true)
        #expect(parsed.status == 0, "OpenMetrics parser: \(parsed.err)")
        #expect((Int(parsed.out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) > 30)
        #expect(server.stop() == 0, "SIGTERM stops it cleanly: \(server.log)")
    }

    @Test func countersContinueTheKernelsAndNodeCompatMatchesNodeExporter() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        try pair.sendUDP(count: 10, payload: 100) // before ifmeter starts
        let server = try serve(pair.a, ["--compat", "node"])
        defer { server.stop() }
        let exporter = try Background(
            [
                "ip", "netns", "exec", pair.a.name, "prometheus-node-exporter", "--collector.disable-defaults", "--collector.netdev",
                "--web.listen-address=127.0.0.1:9100",
            ], name: "node-exporter")
        defer { exporter.stop() }
        let node = try waitFor("node_exporter") { try? RawHTTP.request("/metrics", port: 9100, in: pair.a.name) }
        let ours = try waitForSamples(pair.a, server, atLeast: 2)
        // The veth is quiet: both read the same kernel counters.
        var compared = 0
        for line in node.text.split(separator: "\n") where line.hasPrefix("node_network_") && line.contains("device=\"vA\"") {
            let series = String(line.split(separator: " ").first!)
            #expect(value(ours, series) == Double(line.split(separator: " ").last!), "\(series)")
            compared += 1
        }
        #expect(compared == 17, "node_exporter 1.5 has 17 netdev families")
        // ifmeter's own counter starts at the kernel's, so it equals node_exporter's.
        #expect(value(ours, #"ifmeter_transmit_bytes_total{interface="vA",kind="virtual"}"#) == Double(10 * VethPair.frameBytes(payload: 100)))
        #expect(
            value(
                ours,
                #"ifmeter_interface_info{evidence="link-kind:veth",index=""# + "\(try pair.a.ifindex("vA"))"
                    + #"",interface="vA",kind="virtual",operstate="up",width="64"}"#) == 1)
        #expect(value(ours, #"ifmeter_interface_quality{interface="vA",kind="virtual",quality="exact"}"#) == 1)
        #expect(value(ours, #"ifmeter_interface_up{interface="vA",kind="virtual"}"#) == 1)
        #expect(value(ours, #"ifmeter_interface_mtu_bytes{interface="vA",kind="virtual"}"#) == 1500)
        #expect(value(ours, #"ifmeter_interface_speed_bytes{interface="vA",kind="virtual"}"#) == 1_250_000_000)
        #expect((value(ours, "ifmeter_samples_total") ?? 0) >= 2)
        #expect(value(ours, "ifmeter_sample_errors_total") == 0)
        let nodeOnly = try serve(try TestNamespace(), ["--compat", "node-only"])
        nodeOnly.stop()
    }

    @Test func httpSurface() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let server = try serve(ns)
        defer { server.stop() }
        let head = try RawHTTP.request("/metrics", method: "HEAD", port: Self.port, in: ns.name)
        #expect(head.status == 200 && head.body.isEmpty && Int(head.headers["content-length"] ?? "0")! > 1000)
        let post = try RawHTTP.request("/metrics", method: "POST", port: Self.port, in: ns.name)
        #expect(post.status == 405 && post.headers["allow"] == "GET, HEAD")
        #expect(try RawHTTP.request("/nope", port: Self.port, in: ns.name).status == 404)
        let index = try RawHTTP.request("/", port: Self.port, in: ns.name)
        #expect(index.status == 200 && index.text.contains("href=\"/metrics\"") && index.text.contains("not per-app"))
        let gzipped = try RawHTTP.request("/metrics", port: Self.port, in: ns.name, headers: ["Accept-Encoding": "gzip"])
        #expect(gzipped.headers["content-encoding"] == "gzip")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-gz-\(UUID().uuidString).gz").path
        try Data(gzipped.body).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let decompressed = try run(["gzip", "-dc", path]).out
        #expect(decompressed.contains("# TYPE ifmeter_receive_bytes_total counter"))
        let refused = try RawHTTP.request("/metrics", port: Self.port, in: ns.name, headers: ["Accept-Encoding": "gzip;q=0"])
        #expect(refused.headers["content-encoding"] == nil)
    }

    @Test func listensOnEveryAddressWhenTold() throws {
        try Netns.requireRoot()
        for listen in ["0.0.0.0:\(Self.port)", "[::]:\(Self.port)"] {
            let ns = try TestNamespace()
            let server = try serve(ns, ["--listen", listen])
            #expect(try RawHTTP.request("/metrics", port: Self.port, in: ns.name).status == 200, "\(listen) serves IPv4 too")
            #expect(server.stop() == 0)
        }
    }

    /// `:PORT` (every address), a name, and `[v6]:PORT` are all listened on.
    @Test func listenAcceptsPortOnlyNamesAndIPv6() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        try ns.exec(["sysctl", "-qw", "net.ipv6.conf.lo.disable_ipv6=0"]) // ::1, for [::1] and :PORT
        for (listen, host) in [
            (":\(Self.port)", "127.0.0.1"), (":\(Self.port)", "::1"), ("localhost:\(Self.port)", "127.0.0.1"),
            ("[::1]:\(Self.port)", "::1"),
        ] {
            let server = try startServe(in: ns, port: Self.port, name: "serve-listen", ["--listen", listen])
            let answer = try RawHTTP.request("/metrics", host: host, port: Self.port, in: ns.name)
            #expect(answer.status == 200, "\(listen) on \(host)")
            #expect(server.stop() == 0)
        }
    }

    @Test func portInUseAndBadAddressesAreClearErrors() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let first = try serve(ns)
        defer { first.stop() }
        let second = try ifmeter(["serve", "--listen", "127.0.0.1:\(Self.port)"], in: ns)
        #expect(second.status == 1)
        #expect(second.err.contains("cannot listen on 127.0.0.1:\(Self.port): Address already in use"), "\(second.err)")
        let notLocal = try ifmeter(["serve", "--listen", "192.0.2.1:9999"], in: ns)
        #expect(notLocal.status == 1 && notLocal.err.contains("Cannot assign requested address"), "\(notLocal.err)")
        let malformed = try ifmeter(["serve", "--listen", "localhost"])
        #expect(malformed.status == 64 && malformed.err.contains("expected HOST:PORT"))
        let name = try ifmeter(["serve", "--listen", "no-such-host.invalid:80"])
        #expect(name.status == 1 && name.err.contains("cannot resolve 'no-such-host.invalid'"), "\(name.err)")
        // libmicrohttpd is loaded when serving starts: a missing one is one clear line.
        let missing = try run(
            [
                "env", "IFMETER_LIBMICROHTTPD=/nonexistent/libmicrohttpd.so", "ip", "netns", "exec", ns.name,
                try ifmeterBinary(), "serve", "--listen", "127.0.0.1:9875",
            ], allowFailure: true)
        #expect(missing.status == 1 && missing.err.contains("cannot load libmicrohttpd"), "\(missing.err)")
        #expect(missing.err.split(separator: "\n").count == 1)
    }

    @Test func seriesLifetimeDropsGoneInterfaces() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        try ns.ip("link", "add", "gone0", "type", "veth", "peer", "name", "gone1")
        let server = try serve(ns, ["--series-lifetime", "1s"])
        defer { server.stop() }
        #expect(try waitForSamples(ns, server, atLeast: 1).contains(#"interface="gone0""#))
        try ns.ip("link", "del", "gone0")
        // The first scrape after a sample saw the deletion: it either marks
        // gone0 gone, as it must, or (wrongly) dropped it already.
        let gone = #"ifmeter_interface_present{interface="gone0",kind="virtual"} 0"#
        let soon = try waitFor("serve to sample gone0's deletion") {
            let text = try metrics(ns).text
            return text.contains(gone) || !text.contains(#"interface="gone0""#) ? text : nil
        }
        #expect(soon.contains(gone), "kept for a while, marked gone")
        // Then dropped once its lifetime (1 s) is over.
        _ = try waitFor("serve to drop gone0's series") { try metrics(ns).text.contains(#"interface="gone0""#) ? nil : true }
    }

    @Test func abuseDoesNotStopOtherScrapes() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let server = try serve(ns)
        defer { server.stop() }
        _ = try metrics(ns)
        let before = try #require(server.residentKiB)

        // Malformed request lines: 400, and the server carries on. A line
        // with no method and path at all is closed without an answer.
        for line in ["GET /metrics\r\n\r\n", "\u{01}\u{02} / HTTP/1.1\r\nHost: x\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"] {
            let socket = try RawHTTP.connect("127.0.0.1", Self.port, in: ns.name)
            try RawHTTP.send(socket, line)
            let bad = try RawHTTP.read(socket)
            close(socket)
            #expect(bad.status == 400, "\(line.debugDescription)")
        }
        let garbage = try RawHTTP.connect("127.0.0.1", Self.port, in: ns.name)
        try RawHTTP.send(garbage, "GARBAGE\r\n\r\n")
        var byte: UInt8 = 0
        #expect(recv(garbage, &byte, 1, 0) <= 0, "closed")
        close(garbage)

        // Oversized headers: refused, not buffered without bound.
        let big = try RawHTTP.connect("127.0.0.1", Self.port, in: ns.name)
        try? RawHTTP.send(big, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 200_000) + "\r\n\r\n")
        let refused = try? RawHTTP.read(big)
        close(big)
        #expect(refused == nil || [413, 431, 400].contains(refused!.status), "got \(refused?.status ?? 0)")

        // 500 idle connections, and a slow client trickling its request.
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for _ in 0..<500 { idle.append(try RawHTTP.connect("127.0.0.1", Self.port, in: ns.name)) }
        let slow = try RawHTTP.connect("127.0.0.1", Self.port, in: ns.name)
        defer { close(slow) }
        let request = Array("GET /metrics HTTP/1.1\r\nHost: x\r\n")
        for (n, character) in request.enumerated() where n < 12 {
            try RawHTTP.send(slow, String(character))
            // Answered, not left waiting for a slot (the request's own
            // deadline would end it without an answer): no guess at time.
            let scrape = try metrics(ns)
            #expect(scrape.status == 200, "a scrape among 500 idle connections and a slow client")
            Thread.sleep(forTimeInterval: 0.05) // the slow client's pace, on purpose
        }
        let after = try #require(server.residentKiB)
        #expect(after - before < 32 * 1024, "RSS grew from \(before) KiB to \(after) KiB")
        #expect(server.process.isRunning)
    }

    @Test func textfileExportIsAtomicAndValid() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-textfile-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/ifmeter.prom"
        let exporter = try Background(
            ["ip", "netns", "exec", ns.name, try ifmeterBinary(), "export", "--textfile", path, "--every", "200ms", "--interval", "100ms"],
            name: "export")
        _ = try waitFor("the textfile") { FileManager.default.fileExists(atPath: path) ? true : nil }
        // Readers only ever see whole files.
        for _ in 0..<20 {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.hasSuffix("\n") && text.contains("ifmeter_build_info"))
            // Reads spread over several rewrites (every 200 ms), on purpose.
            Thread.sleep(forTimeInterval: 0.03)
        }
        #expect(exporter.stop() == 0)
        let promtool = try run(["promtool", "check", "metrics"], input: try String(contentsOfFile: path, encoding: .utf8), allowFailure: true)
        #expect(promtool.status == 0, "\(promtool.out)\(promtool.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["ifmeter.prom"], "no temporary files left")
        let missing = try ifmeter(["export", "--textfile", dir + "/no/such/folder/x.prom"])
        #expect(missing.status == 1 && missing.err.contains("does not exist"), "\(missing.err)")
    }
}
