import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--remote-write-config` against real receivers in the test's namespace:
/// a Prometheus behind HTTPS with a client certificate required and basic
/// auth (its own `--web.config.file`), and a bearer-token receiver (Python:
/// Prometheus's web config has no bearer tokens). Each with what an
/// operator gets wrong: a wrong password, no client certificate, a CA that
/// did not sign the server, a token rotated in its file.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct RemoteWriteAuthTests {
    /// serve pushing to `url` (its /metrics on `scrapePort`, for its own
    /// remote write counters).
    func serve(_ ns: TestNamespace, _ url: String, config: String, scrapePort: UInt16, dir: String) throws -> Background {
        try Background(
            [
                "ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--listen", "127.0.0.1:\(scrapePort)", "--interval", "200ms",
                "--remote-write-interval", "200ms", "--remote-write-queue", dir + "/queue-\(scrapePort)", "--remote-write", url,
                "--remote-write-config", config,
            ], name: "serve-rw-auth")
    }

    func metric(_ ns: TestNamespace, _ port: UInt16, _ prefix: String) -> Double? {
        guard let text = try? RawHTTP.request("/metrics", port: port, in: ns.name).text else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
    }

    @Test func httpsWithAClientCertificateAndBasicAuthAgainstPrometheus() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let pki = try TestPKI()
        defer { withExtendedLifetime(pki) {} }
        let dir = pki.dir
        let port: UInt16 = 49594
        try """
        tls_server_config:
          cert_file: \(dir)/server.crt
          key_file: \(dir)/server.key
          client_auth_type: RequireAndVerifyClientCert
          client_ca_file: \(dir)/ca.crt
        basic_auth_users:
          \(pki.user): '\(pki.hash)'

        """.write(toFile: dir + "/web.yml", atomically: true, encoding: .utf8)
        try "global:\n  scrape_interval: 15s\n".write(toFile: dir + "/prometheus.yml", atomically: true, encoding: .utf8)
        let prometheus = try Background(
            [
                "ip", "netns", "exec", ns.name, "prometheus", "--config.file=\(dir)/prometheus.yml", "--storage.tsdb.path=\(dir)/data",
                "--web.listen-address=127.0.0.1:\(port)", "--web.enable-remote-write-receiver", "--web.config.file=\(dir)/web.yml",
                "--log.level=warn",
            ], name: "prometheus-tls")
        defer { _ = prometheus.stop() }
        try pki.password.write(toFile: dir + "/password", atomically: true, encoding: .utf8)
        func config(_ name: String, password: String = "password", cert: Bool = true, ca: String = "ca.crt") throws -> String {
            let path = dir + "/" + name
            try """
            basic_auth:
              username: \(pki.user)
              password_file: \(password)
            tls_config:
              ca_file: \(ca)
            \(cert ? "  cert_file: client.crt\n  key_file: client.key\n" : "")external_labels:
              case: \(name.split(separator: ".")[0])

            """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        try "not the password".write(toFile: dir + "/wrong", atomically: true, encoding: .utf8)
        let url = "https://127.0.0.1:\(port)/api/v1/write"
        // Prometheus is up when its TLS port answers (to curl with the right
        // credentials).
        func query(_ promql: String) throws -> String {
            try run([
                "ip", "netns", "exec", ns.name, "curl", "-sS", "--fail", "--cacert", dir + "/ca.crt", "--cert", dir + "/client.crt", "--key",
                dir + "/client.key", "-u", "\(pki.user):\(pki.password)", "--get", "--data-urlencode", "query=\(promql)",
                "https://127.0.0.1:\(port)/api/v1/query",
            ]).out
        }
        _ = try waitFor("Prometheus over TLS") { try? query("up") }

        let good = try serve(ns, url, config: try config("good.yml"), scrapePort: 49595, dir: dir)
        defer { _ = good.stop() }
        let wrongPassword = try serve(ns, url, config: try config("wrongpassword.yml", password: "wrong"), scrapePort: 49596, dir: dir)
        defer { _ = wrongPassword.stop() }
        let noCertificate = try serve(ns, url, config: try config("nocert.yml", cert: false), scrapePort: 49597, dir: dir)
        defer { _ = noCertificate.stop() }
        let strangeCA = try serve(ns, url, config: try config("strangeca.yml", ca: "other-ca.crt"), scrapePort: 49598, dir: dir)
        defer { _ = strangeCA.stop() }

        // The right credentials: accepted, and the series are in Prometheus.
        _ = try waitFor("samples accepted over TLS") { () -> Double? in
            guard let sent = metric(ns, 49595, "ifmeter_remote_write_samples_sent_total{"), sent > 0 else { return nil }
            return sent
        }
        let stored = try waitFor("the series in Prometheus") { () -> String? in
            let out = try query(#"ifmeter_samples_total{case="good"}"#)
            return out.contains(#""case":"good""#) ? out : nil
        }
        #expect(stored.contains(#""__name__":"ifmeter_samples_total""#), "\(stored)")
        #expect(metric(ns, 49595, #"ifmeter_remote_write_samples_dropped_total{reason="rejected""#) == 0)
        #expect((metric(ns, 49595, "ifmeter_remote_write_sent_bytes_total{") ?? 0) > 0)

        // A wrong password: Prometheus answers 401, a refusal, dropped and counted.
        let rejected = try waitFor("the wrong password refused") { () -> Double? in
            guard let n = metric(ns, 49596, #"ifmeter_remote_write_samples_dropped_total{reason="rejected""#), n > 0 else { return nil }
            return n
        }
        #expect(rejected > 0 && metric(ns, 49596, "ifmeter_remote_write_samples_sent_total{") == 0)
        #expect(wrongPassword.log.contains("HTTP 401"), "\(wrongPassword.log.suffix(600))")
        #expect(!wrongPassword.log.contains(pki.password) && !wrongPassword.log.contains("not the password"), "no password in the log")

        // No client certificate, or a CA that did not sign the server: no
        // request goes through; the samples wait and are retried.
        for (process, port, name) in [(noCertificate, UInt16(49597), "no client certificate"), (strangeCA, UInt16(49598), "another CA")] {
            _ = try waitFor("\(name): retried") { () -> Double? in
                guard let n = metric(ns, port, "ifmeter_remote_write_samples_retried_total{"), n > 0 else { return nil }
                return n
            }
            #expect(metric(ns, port, "ifmeter_remote_write_samples_sent_total{") == 0, "\(name)")
            #expect((metric(ns, port, "ifmeter_remote_write_queue_samples{") ?? 0) > 0, "\(name): the samples wait")
            #expect(process.log.contains("retrying"), "\(name): \(process.log.suffix(600))")
        }
        #expect(strangeCA.log.contains("SSL certificate problem"), "libcurl's detailed message: \(strangeCA.log.suffix(600))")
        let none = try query(#"count(ifmeter_samples_total{case=~"wrongpassword|nocert|strangeca"})"#)
        #expect(none.contains(#""result":[]"#), "nothing from the wrong credentials reached Prometheus: \(none)")
        print("remote write over TLS: good sent, wrong password \(rejected) rejected; \(strangeCA.log.split(separator: "\n").last ?? "")")
    }

    @Test func aBearerTokenIsReadFromItsFileBeforeEveryRequest() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-rw-bearer-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49599
        // Accepts the token in `accepted`, re-read on every request; counts
        // what it accepted and refused in files.
        let receiver = """
            import http.server, sys
            d = sys.argv[1]
            class H(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def do_POST(self):
                    self.rfile.read(int(self.headers.get("Content-Length", 0)))
                    want = "Bearer " + open(d + "/accepted").read().strip()
                    ok = self.headers.get("Authorization") == want
                    with open(d + ("/ok" if ok else "/refused"), "a") as f: f.write(self.headers.get("Authorization", "-") + "\\n")
                    self.send_response(204 if ok else 401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                def log_message(self, *a): pass
            http.server.HTTPServer(("127.0.0.1", \(port)), H).serve_forever()
            """
        try receiver.write(toFile: dir + "/receiver.py", atomically: true, encoding: .utf8)
        try "first-token".write(toFile: dir + "/accepted", atomically: true, encoding: .utf8)
        try "first-token\n".write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        try "bearer_token_file: token\n".write(toFile: dir + "/rw.yml", atomically: true, encoding: .utf8)
        let python = try Background(["ip", "netns", "exec", ns.name, "python3", dir + "/receiver.py", dir], name: "bearer-receiver")
        defer { _ = python.stop() }
        func lines(_ name: String) -> [String] {
            ((try? String(contentsOfFile: dir + "/" + name, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        let serve = try serve(ns, "http://127.0.0.1:\(port)/api/v1/write", config: dir + "/rw.yml", scrapePort: 49600, dir: dir)
        defer { _ = serve.stop() }
        _ = try waitFor("requests with the first token") { lines("ok").count >= 3 ? true : nil }
        #expect(lines("ok").allSatisfy { $0 == "Bearer first-token" }, "the newline of the file is not part of the token")
        // Rotated: the file changes first, then the receiver.
        try "second-token\n".write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        try "second-token".write(toFile: dir + "/accepted", atomically: true, encoding: .utf8)
        _ = try waitFor("requests with the rotated token") { lines("ok").contains("Bearer second-token") ? true : nil }
        // A request may have raced the two writes; none after is refused:
        // three more requests go through, and no refusal comes meanwhile.
        let refusedBefore = lines("refused").count
        let okNow = lines("ok").count
        _ = try waitFor("three more requests with the rotated token") { lines("ok").count >= okNow + 3 ? true : nil }
        #expect(lines("refused").count == refusedBefore, "no restart needed: \(lines("refused"))")
        let rejected = try #require(metric(ns, 49600, #"ifmeter_remote_write_samples_dropped_total{reason="rejected""#))
        #expect((rejected == 0) == (refusedBefore == 0), "refusals counted: \(rejected) samples in \(refusedBefore) requests")
        // The token file gone: no request without credentials, the samples wait.
        try FileManager.default.removeItem(atPath: dir + "/token")
        let okBefore = lines("ok").count
        let retried = try waitFor("retries without a token") { () -> Double? in
            serve.log.contains("cannot read the bearer token file") ? metric(ns, 49600, "ifmeter_remote_write_samples_retried_total{") : nil
        }
        // More retries after those: still nothing sent.
        _ = try waitFor("more retries without a token") { () -> Bool? in
            (metric(ns, 49600, "ifmeter_remote_write_samples_retried_total{") ?? 0) > retried ? true : nil
        }
        #expect(lines("ok").count == okBefore && lines("refused").count == refusedBefore, "nothing sent without the token")
        #expect((metric(ns, 49600, "ifmeter_remote_write_queue_samples{") ?? 0) > 0)
        print("remote write bearer: \(lines("ok").count) accepted, \(refusedBefore) refused around the rotation, \(retried) retried without a file")
    }

    /// The default pace is a scrape's, 15 s, whatever the sampling interval:
    /// in 4 s of samples every 200 ms, one push (the first sample).
    @Test func theDefaultPushIntervalIsFifteenSeconds() throws {
        try Netns.requireRoot()
        let help = try ifmeter(["serve", "--help"]).out
        #expect(help.contains("--remote-write-interval") && help.contains("15s"), "\(help)")
        let ns = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-rw-pace-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let port: UInt16 = 49601
        try """
        import http.server, sys
        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with open(sys.argv[1] + "/requests", "a") as f: f.write("1\\n")
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
            def log_message(self, *a): pass
        http.server.HTTPServer(("127.0.0.1", \(port)), H).serve_forever()
        """.write(toFile: dir + "/receiver.py", atomically: true, encoding: .utf8)
        let python = try Background(["ip", "netns", "exec", ns.name, "python3", dir + "/receiver.py", dir], name: "pace-receiver")
        defer { _ = python.stop() }
        let requests = { ((try? String(contentsOfFile: dir + "/requests", encoding: .utf8)) ?? "").split(separator: "\n").count }
        let serve = try Background(
            [
                "ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--listen", "none", "--interval", "200ms",
                "--remote-write-queue", dir + "/queue", "--remote-write", "http://127.0.0.1:\(port)/api/v1/write",
            ], name: "serve-pace")
        defer { _ = serve.stop() }
        _ = try waitFor("the first push") { requests() >= 1 ? true : nil }
        // The window watched, 4 s by design: 20 samples, well within the
        // 15 s pace; a push per sample would show as many requests.
        Thread.sleep(forTimeInterval: 4)
        #expect(requests() == 1, "\(requests()) pushes in 4 s of samples every 200 ms: \(serve.log)")
    }
}
