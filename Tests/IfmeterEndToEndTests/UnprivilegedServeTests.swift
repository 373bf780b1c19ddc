import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ifmeter serve` as ifmeter-serve.service runs it, where systemd cannot be
/// asked (it is not PID 1 in every test machine): as another user, with no
/// capability at all and no way to gain one (setpriv), in a namespace of its
/// own. Sampling the own namespace needs no privilege: it samples, serves,
/// saves its state and stops cleanly on SIGTERM. Root is needed to switch
/// users and make the namespace.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct UnprivilegedServeTests {
    @Test func serveNeedsNoPrivilege() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        defer { ns.remove() }
        let nobody: uid_t = 65534
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-nobody-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(chown(folder.path, nobody, nobody) == 0 && chmod(folder.path, 0o700) == 0)
        let state = folder.appendingPathComponent("state.db").path
        let server = try Background(
            [
                "ip", "netns", "exec", ns.name, "setpriv", "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
                try ifmeterBinary(), "serve", "--state", state, "--interval", "300ms",
            ],
            name: "serve-nobody")
        let metrics = try waitFor("serve as nobody to sample lo") { () throws -> String? in
            try server.requireRunning()
            let text = try? RawHTTP.request("/metrics", port: 9874, in: ns.name).text
            return text.flatMap { $0.contains("ifmeter_receive_bytes_total{interface=\"lo\"") ? $0 : nil }
        }
        #expect(metrics.contains("ifmeter_samples_total"))
        // Traffic on lo (scrapes) in a sampled interval, for the usage
        // tables: a scrape shows more received on lo than the first one did.
        func loReceived(_ text: String) -> Double {
            Scenario.metric(text, "ifmeter_receive_bytes_total").first { $0.key.contains(#"interface="lo""#) }?.value ?? 0
        }
        let first = loReceived(metrics)
        for _ in 0..<3 { _ = try RawHTTP.request("/metrics", port: 9874, in: ns.name) }
        _ = try waitFor("serve to sample the scrapes' traffic on lo") {
            loReceived(try RawHTTP.request("/metrics", port: 9874, in: ns.name).text) > first ? true : nil
        }
        // The process itself: another user, no capability, no new privileges.
        let status = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/status", encoding: .utf8)
        let fields = Dictionary(
            status.split(separator: "\n").compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }, uniquingKeysWith: { a, _ in a })
        #expect(fields["Name"] == "ifmeter")
        #expect(fields["Uid"]?.split(separator: "\t").allSatisfy { $0 == "\(nobody)" } == true, "\(fields["Uid"] ?? "")")
        for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            #expect(fields[set] == "0000000000000000", "\(set)")
        }
        #expect(fields["NoNewPrivs"] == "1")
        #expect(server.stop() == 0, "\(server.log)")
        #expect(server.log.contains("ifmeter serve: stopped"))
        // What it saved, as nobody, is there for root to read.
        var info = stat()
        #expect(stat(state, &info) == 0 && info.st_uid == nobody)
        let usage = try ifmeter(["usage", "--state", state, "--format", "json"])
        #expect(usage.status == 0, "\(usage.err)")
        #expect(usage.out.contains("\"lo\""), "\(usage.out)")
    }
}
