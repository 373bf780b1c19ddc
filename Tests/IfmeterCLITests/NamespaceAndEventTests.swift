import CIfmeterTestSupport
import Foundation
import IfmeterCore
import IfmeterSampling
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// --netns from outside the namespace, and deletion events in traces.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized)
struct NamespaceAndEventTests {
    func interfaces(_ json: String) throws -> [String: JSONValue] {
        guard case .array(let list)? = try JSONParser.parse(json)["interfaces"] else { throw TestFailure("no interfaces") }
        return Dictionary(uniqueKeysWithValues: list.compactMap { i in i["name"]?.stringValue.map { ($0, i) } })
    }

    @Test func countsSeenFromOutsideMatchThoseInside() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        try pair.sendUDP(count: 25, payload: 400)
        for source in ["netlink", "getifaddrs"] {
            let outside = try ifmeter(["sample", "--format", "json", "--netns", pair.a.name, "--source", source])
            let inside = try ifmeter(["sample", "--format", "json", "--source", source], in: pair.a)
            #expect(outside.status == 0 && inside.status == 0, "\(outside.err)\(inside.err)")
            let o = try interfaces(outside.out), i = try interfaces(inside.out)
            #expect(Set(o.keys) == Set(i.keys) && Set(o.keys) == ["lo", "vA"], "\(source): the namespace's links, not this one's")
            #expect(o["vA"]?["counters"] == i["vA"]?["counters"], "\(source)")
            #expect(o["vA"]?["counters"]?["tx_bytes"]?.uint64Value == 25 * VethPair.frameBytes(payload: 400))
            #expect(o["vA"]?["kind"]?.stringValue == "virtual")
        }
        let missing = try ifmeter(["list", "--netns", "no-such-namespace-\(getpid())"])
        #expect(missing.status == 64 && missing.err.contains("no network namespace"), "\(missing.err)")
        let bad = try ifmeter(["list", "--netns", "../etc"])
        #expect(bad.status == 64)
    }

    @Test func recordWritesDeletionsAndReplayCountsThem() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-events-\(UUID().uuidString).jsonl").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recorder = try Background(["ip", "netns", "exec", ns.name, try ifmeterBinary(), "record", "--interval", "300ms", "-o", path], name: "record")
        Thread.sleep(forTimeInterval: 0.5)
        var sent = 0
        for n in 0..<5 {
            let fd = try NetworkNamespace.perform(in: ns.name) { cifm_tun_open("tunR", 0) }
            guard fd >= 0 else { throw TestFailure("tun: \(String(cString: strerror(errno)))") }
            try ns.ip("link", "set", "tunR", "up")
            let packet = ipv4Packet(payload: 100 + n)
            for _ in 0..<10 { _ = write(fd, packet, packet.count) }
            sent += 10 * packet.count
            Thread.sleep(forTimeInterval: 0.05)
            close(fd)
        }
        Thread.sleep(forTimeInterval: 0.7)
        #expect(recorder.stop() == 0)
        let trace = try String(contentsOfFile: path, encoding: .utf8)
        #expect(trace.split(separator: "\n").filter { $0.contains(#""event":"deleted""#) }.count == 5)
        let report = try JSONParser.parse(try ifmeter(["replay", path]).out)
        guard case .array(let list)? = report["interfaces"], let tun = list.first(where: { $0["name"]?.stringValue == "tunR" }) else {
            throw TestFailure("no tunR in the report")
        }
        #expect(tun["totals"]?["rx_bytes"]?.uint64Value == UInt64(sent), "every instance's final counters")
        #expect(tun["quality"]?.stringValue == "exact")
        #expect(tun["events"]?["deletions"]?.uint64Value == 5)
    }
}
