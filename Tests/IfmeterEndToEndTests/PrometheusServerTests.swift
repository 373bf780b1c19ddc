import Foundation
import IfmeterCore
import IfmeterSampling
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real Prometheus server scraping `ifmeter serve` every second, both in
/// the test's namespace: its queries must see the bytes sent, and no false
/// counter reset when a tun is deleted and recreated.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct PrometheusServerTests {
    func query(_ ns: TestNamespace, _ promql: String, at time: Double? = nil) throws -> Double? {
        var path = "/api/v1/query?query=" + promql.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        if let time { path += "&time=" + String(format: "%.3f", time) }
        let response = try RawHTTP.request(path, port: 9090, in: ns.name)
        guard response.status == 200 else { throw TestFailure("query \(promql): HTTP \(response.status) \(response.text)") }
        let json = try JSONParser.parse(response.text)
        guard json["status"]?.stringValue == "success" else { throw TestFailure("query \(promql): \(response.text)") }
        guard case .array(let results)? = json["data"]?["result"], let first = results.first,
            case .array(let pair)? = first["value"], pair.count == 2
        else { return nil }
        return pair[1].stringValue.flatMap(Double.init)
    }

    static let vA = #"ifmeter_transmit_bytes_total{interface="vA"}"#

    /// Waits until Prometheus holds a scrape of vA taken after `time`.
    func waitForScrape(_ ns: TestNamespace, after time: Double) throws {
        _ = try waitFor("Prometheus to scrape ifmeter after \(time)") {
            try query(ns, "timestamp(\(Self.vA))").map { $0 > time } == true ? true : nil
        }
    }

    @Test func prometheusSeesTheBytesAndNoFalseReset() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let ns = pair.a
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-prom-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try """
        global:
          scrape_interval: 1s
          evaluation_interval: 1s
        scrape_configs:
          - job_name: ifmeter
            static_configs:
              - targets: ['127.0.0.1:9874']
        """.write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
        let serve = try Background(["ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--interval", "500ms"], name: "serve")
        defer { serve.stop() }
        let prometheus = try Background(
            [
                "ip", "netns", "exec", ns.name, "prometheus", "--config.file=\(dir)/prometheus.yml",
                "--storage.tsdb.path=\(dir)/data", "--web.listen-address=127.0.0.1:9090", "--log.level=warn",
            ], name: "prometheus")
        defer { prometheus.stop() }
        _ = try waitFor("Prometheus to scrape ifmeter") {
            try query(ns, Self.vA)
        }
        // A scrape after t0 and before the traffic: the increase() window
        // below starts with a sample that has none of it.
        let t0 = Date().timeIntervalSince1970
        try waitForScrape(ns, after: t0)
        let before = try #require(try query(ns, Self.vA, at: t0))

        // Known traffic through the veth.
        try pair.sendUDP(count: 300, payload: 1000)
        let sent = 300 * Double(VethPair.frameBytes(payload: 1000))

        // A tun with traffic, deleted and recreated with more traffic.
        func openTun() throws -> Int32 {
            let fd = try ns.openTun("tunT")
            try ns.ip("link", "set", "tunT", "up")
            return fd
        }
        func push(_ fd: Int32, count: Int, payload: Int) {
            let packet = ipv4Packet(payload: payload)
            for _ in 0..<count { _ = write(fd, packet, packet.count) }
        }
        let first = try openTun()
        push(first, count: 20, payload: 100)
        // The first instance is sampled and scraped before its deletion.
        _ = try waitFor("Prometheus to scrape the first tunT's bytes") {
            try query(ns, #"ifmeter_receive_bytes_total{interface="tunT"}"#) == Double(20 * 128) ? true : nil
        }
        close(first)
        let second = try openTun()
        defer { close(second) }
        push(second, count: 10, payload: 200)
        let tunBytes = Double(20 * 128 + 10 * 228)
        _ = try waitFor("Prometheus to scrape both tunT's bytes and vA's") { () throws -> Bool? in
            guard try query(ns, #"ifmeter_receive_bytes_total{interface="tunT"}"#) == tunBytes else { return nil }
            return try query(ns, Self.vA).map { $0 - before >= sent } == true ? true : nil
        }
        // increase() extrapolates to its window's ends, by up to a scrape
        // interval (1 s) each: the window spans 8 s of scrapes by design,
        // so that this stays within the 30 % allowed below.
        try waitForScrape(ns, after: t0 + 8)
        let t1 = Date().timeIntervalSince1970

        let after = try #require(try query(ns, Self.vA, at: t1))
        #expect(after - before == sent, "exactly the frames sent: \(after - before) vs \(sent)")
        let window = Int((t1 - t0).rounded(.up))
        let increase = try #require(try query(ns, #"increase(ifmeter_transmit_bytes_total{interface="vA"}[\#(window)s])"#, at: t1))
        #expect(increase >= sent * 0.99 && increase <= sent * 1.3, "increase() \(increase) for \(sent) sent (it extrapolates)")

        #expect(try query(ns, #"ifmeter_receive_bytes_total{interface="tunT"}"#, at: t1) == tunBytes, "both instances, never down")
        #expect(try query(ns, #"resets(ifmeter_receive_bytes_total{interface="tunT"}[1m])"#, at: t1) == 0, "no false reset")
        #expect(try query(ns, #"resets(ifmeter_transmit_bytes_total{interface="vA"}[1m])"#, at: t1) == 0)
        #expect(try query(ns, #"ifmeter_interface_recreations_total{interface="tunT"}"#, at: t1) == 1)
        // The deletion notification carried the old instance's final counters.
        #expect(try query(ns, #"ifmeter_interface_deletions_total{interface="tunT"}"#, at: t1) == 1)
        #expect(
            try query(ns, #"ifmeter_interface_quality{interface="tunT",quality="exact"}"#, at: t1) == 1,
            "a recreation with its deletion event is exact")
        #expect(try query(ns, #"up{job="ifmeter"}"#, at: t1) == 1)
        let targets = try RawHTTP.request("/api/v1/targets", port: 9090, in: ns.name).text
        #expect(targets.contains(#""health":"up""#) && targets.contains(#""lastError":"""#), "\(targets)")
    }
}
