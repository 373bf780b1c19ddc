import Foundation
import IfmeterCore
@testable import IfmeterCLI
@testable import IfmeterServe
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A temporary folder with a CA, a server certificate for 127.0.0.1, a
/// client certificate, a client certificate from another CA, and a bcrypt
/// hash; made with openssl and htpasswd when the test runs. The keys are
/// EC P-256: forty RSA-2048 keys made over a run cost about 9 s of CPU.
final class TestPKI {
    let dir: String
    let user = "prometheus"
    let password = "s3cret pass:word"
    let hash: String

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-pki-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func openssl(_ arguments: [String]) throws {
            try run(["openssl"] + arguments)
        }
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: dir + "/san.ext", atomically: true, encoding: .utf8)
        for ca in ["ca", "other-ca"] {
            try openssl([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", "\(dir)/\(ca).key", "-out", "\(dir)/\(ca).crt", "-days", "2", "-subj", "/CN=ifmeter test \(ca)",
            ])
        }
        for (name, ca, ext) in [("server", "ca", true), ("client", "ca", false), ("stranger", "other-ca", false)] {
            try openssl([
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", "\(dir)/\(name).key", "-out", "\(dir)/\(name).csr", "-subj", "/CN=\(name == "server" ? "127.0.0.1" : name)",
            ])
            try openssl(
                [
                    "x509", "-req", "-in", "\(dir)/\(name).csr", "-CA", "\(dir)/\(ca).crt", "-CAkey", "\(dir)/\(ca).key",
                    "-CAcreateserial", "-out", "\(dir)/\(name).crt", "-days", "2",
                ] + (ext ? ["-extfile", "\(dir)/san.ext"] : []))
        }
        let line = try run(["htpasswd", "-nbBC", "10", user, password]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        hash = String(line.split(separator: ":", maxSplits: 1)[1])
        #expect(hash.hasPrefix("$2y$10$"))
    }

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    /// Writes `text` as `name` in the folder; returns its path.
    func write(_ name: String, _ text: String) throws -> String {
        let path = dir + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `web.yml`: TLS with the server's certificate and basic auth for
    /// `user` (what the browser tests put serve behind); returns its path.
    func writeTLSAndBasicAuth() throws -> String {
        try write(
            "web.yml",
            """
            tls_server_config:
              cert_file: server.crt
              key_file: server.key
            basic_auth_users:
              \(user): '\(hash)'

            """)
    }
}

@Suite(.serialized, .blocking)
struct WebConfigParsingTests {
    @Test func theExporterToolkitFormatParses() throws {
        let config = try WebConfig.parse(
            """
            ---
            # exporter-toolkit's example, with comments and quotes
            basic_auth_users:
              alice: "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"   # a comment
              bob: '$2b$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'
            """, folder: "/nonexistent")
        #expect(config.tls == nil)
        #expect(config.users["alice"] == "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi")
        #expect(config.users["bob"]?.hasPrefix("$2b$") == true)
    }

    @Test func mistakesNameTheLineAndWhatToDo() {
        let cases: [(String, Int?, String)] = [
            ("tls_server_config:\n  cert_file: a\n  key_fil: b\n", 3, "unknown key 'key_fil' in tls_server_config"),
            ("tls_server_confg:\n  cert_file: a\n", 1, "unknown key 'tls_server_confg'; expected tls_server_config or basic_auth_users"),
            ("basic_auth_users:\n  alice: plain\n", 2, "not a bcrypt hash"),
            ("basic_auth_users:\n\talice: x\n", 2, "a tab in the indentation"),
            ("basic_auth_users:\n  - alice\n", 1, "'basic_auth_users' must be a mapping (nested 'key: value' lines), not a list"),
            ("basic_auth_users: {alice: x}\n", 1, "the password of 'alice' is not a bcrypt hash"),
            ("http_server_config:\n  http2: false\n", 1, "'http_server_config' is not supported"),
            ("tls_server_config:\n  cipher_suites: x\n", 2, "'cipher_suites' is not supported by ifmeter; remove it"),
            ("basic_auth_users:\n  alice: '$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n  alice: x\n", 3, "'alice' is given twice"),
            ("basic_auth_users:\n  alice: 'unterminated\n", 2, "without its closing"),
            (
                "tls_server_config:\n  cert_file: /nonexistent/server.crt\n  key_file: /nonexistent/server.key\n", 2,
                "cannot read cert_file '/nonexistent/server.crt'"
            ),
            ("tls_server_config:\n  key_file: k\n", 1, "needs cert_file and key_file"),
            ("basic_auth_users:\n  alice: x\n   bob: y\n", 3, "a key with a value cannot have keys nested under it"),
            ("basic_auth_users:\n    alice: x\n  bob: y\n", 3, "indentation does not match"),
            // Costs libxcrypt cannot check (3: no password ever matches) or
            // that would take a core for minutes (17 and up; 31: days).
            (
                "basic_auth_users:\n  alice: '$2y$03$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n", 2,
                "the bcrypt cost of 'alice' is 3, outside the 4 to 16"
            ),
            (
                "basic_auth_users:\n  alice: '$2y$17$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n", 2,
                "the bcrypt cost of 'alice' is 17, outside the 4 to 16"
            ),
            ("basic_auth_users:\n  bob: '$2b$31$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n", 2, "the bcrypt cost of 'bob' is 31"),
            ("basic_auth_users:\n  alice: '$2y$1x$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi'\n", 2, "not a bcrypt hash"),
            // Asking for auth or TLS and naming nothing must not serve without them.
            ("basic_auth_users:\n", 1, "basic_auth_users names no user"),
            ("# users\nbasic_auth_users:   # none yet\n", 2, "basic_auth_users names no user"),
            ("tls_server_config:\n", 1, "tls_server_config names no cert_file and key_file"),
        ]
        for (text, line, message) in cases {
            do throws(WebConfigError) {
                _ = try WebConfig.parse(text, folder: "/nonexistent")
                Issue.record("accepted: \(text.debugDescription)")
            } catch {
                #expect(
                    error.line == line && error.message.contains(message),
                    "\(text.debugDescription): line \(error.line.map(String.init) ?? "-"): \(error.message)")
            }
        }
    }

    @Test func badFilesAreOneErrorLineAndExit65BeforeServing() throws {
        let pki = try TestPKI()
        // Port 19150 in case a mistake let the server start: outside any namespace, in ifmeter's test range.
        let listen = ["--listen", "127.0.0.1:19150"]
        let unknown = try pki.write("unknown.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS11\n")
        var result = try ifmeter(["serve", "--web-config", unknown] + listen)
        #expect(result.status == 65, "\(result.err)")
        #expect(result.err == "Error: web config \(unknown):4: min_version TLS11 is not supported by ifmeter (too old); use TLS12 or TLS13\n")

        // A key that does not belong to the certificate: GnuTLS says so, before serving.
        let mismatched = try pki.write("mismatch.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n")
        result = try ifmeter(["serve", "--web-config", mismatched] + listen)
        #expect(
            result.status == 65 && result.err.hasPrefix("Error: web config \(mismatched): tls_server_config: cert_file and key_file:"),
            "\(result.err)")
        #expect(result.err.split(separator: "\n").count == 1 && !result.err.contains("listening"))

        let caWithoutAuth = try pki.write("ca.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n")
        result = try ifmeter(["serve", "--web-config", caWithoutAuth] + listen)
        #expect(
            result.status == 65 && result.err.contains("\(caWithoutAuth):4: client_ca_file is set but client_auth_type is NoClientCert"),
            "\(result.err)")

        result = try ifmeter(["serve", "--web-config", pki.dir + "/missing.yml"] + listen)
        #expect(
            result.status == 64 && result.err.contains("cannot read the web config") && result.err.contains("See 'ifmeter serve --help'"),
            "\(result.err)")
    }

    @Test func costsFourToSixteenAreAccepted() throws {
        let config = try WebConfig.parse(
            """
            basic_auth_users:
              low: '$2y$04$1UsdL5z3DmGrn0i6IXoxWeliFjC3y6EHR8msuVyv/Y23nO9muo3v2'
              high: '$2y$16$9IyA068dxYhXirPzQUDhXuYT7GrmSpwygsoCLYoF89NHZTihY89Qu'
            """, folder: "/nonexistent")
        #expect(config.users.count == 2 && !config.asksForNothing)
        for text in ["", "# nothing yet\n", "---\n# a comment\n\n"] {
            #expect(try WebConfig.parse(text, folder: "/nonexistent").asksForNothing, "\(text.debugDescription)")
        }
    }

    @Test func helpDocumentsTheWebConfig() throws {
        let help = try ifmeter(["serve", "--help"]).out
        #expect(help.contains("--web-config <file>"))
        #expect(help.contains("tls_server_config:") && help.contains("basic_auth_users:") && help.contains("RequireAndVerifyClientCert"))
        #expect(help.contains("Not supported"))
    }
}

/// HTTPS, client certificates and basic auth with curl, and a real
/// Prometheus scraping over TLS with basic auth, in the test's namespace.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct WebConfigServeTests {
    static let port: UInt16 = 9874

    /// `ifmeter serve --web-config CONFIG` in a namespace of its own, on a
    /// port of ours, given at most 10 s (a start that hangs fails).
    /// serve with `config`, which must exit by itself: one that opened a
    /// FIFO would wait for a writer forever, and `run` kills it at the
    /// deadline and throws, so a wait fails the test without a clock.
    func serveOnce(_ config: String) throws -> (err: String, status: Int32) {
        let ns = try TestNamespace()
        let result = try run(
            ["ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--listen", "127.0.0.1:9872", "--web-config", config],
            allowFailure: true, timeout: 60)
        return (result.err, result.status)
    }

    @Test func costsOutsideFourToSixteenAndEmptyUsersAreOneLineAndExit65() throws {
        try Netns.requireRoot()
        let fixture = try AuthFixture(hash: "$2y$31$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi", password: "")
        let expensive = try fixture.config()
        var result = try serveOnce(expensive)
        #expect(result.status == 65, "\(result)")
        #expect(
            result.err
                == "Error: web config \(expensive):2: the bcrypt cost of 'prometheus' is 31, outside the 4 to 16 ifmeter accepts; make a new hash with 'htpasswd -nBC 10 prometheus'\n"
        )
        let none = try fixture.write("none.yml", "# who may scrape\nbasic_auth_users:\n")
        result = try serveOnce(none)
        #expect(result.status == 65 && result.err.hasPrefix("Error: web config \(none):2: basic_auth_users names no user;"), "\(result)")
        #expect(result.err.split(separator: "\n").count == 1)
    }

    /// A FIFO (or a folder) where a file should be is refused at once, not
    /// opened and waited on: as --web-config a usage error (64), as a file
    /// the config names bad data (65).
    @Test func aFIFOOrAFolderInsteadOfAFileIsRefusedAtOnce() throws {
        try Netns.requireRoot()
        let fixture = try AuthFixture(hash: "", password: "")
        let fifo = fixture.dir + "/web.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        var result = try serveOnce(fifo)
        #expect(result.status == 64, "\(result)")
        #expect(
            result.err
                == "Error: cannot read the web config '\(fifo)': not a regular file (a FIFO); name a readable YAML file with '--web-config'. See 'ifmeter serve --help'.\n"
        )
        result = try serveOnce(fixture.dir)
        #expect(result.status == 64 && result.err.contains("not a regular file (a folder)"), "\(result)")

        #expect(mkfifo(fixture.dir + "/cert.fifo", 0o600) == 0 && mkfifo(fixture.dir + "/ca.fifo", 0o600) == 0)
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        _ = try fixture.write("server.crt", pem)
        _ = try fixture.write("server.key", pem)
        let cert = try fixture.write("cert.yml", "tls_server_config:\n  cert_file: cert.fifo\n  key_file: server.key\n")
        result = try serveOnce(cert)
        #expect(result.status == 65, "\(result)")
        #expect(
            result.err
                == "Error: web config \(cert):2: cannot read cert_file '\(fixture.dir)/cert.fifo': not a regular file (a FIFO); fix the path (relative paths start at the config's folder)\n"
        )
        let ca = try fixture.write(
            "ca.yml",
            """
            tls_server_config:
              cert_file: server.crt
              key_file: server.key
              client_auth_type: RequireAndVerifyClientCert
              client_ca_file: ca.fifo
            """)
        result = try serveOnce(ca)
        #expect(result.status == 65 && result.err.contains("\(ca):5: cannot read client_ca_file"), "\(result)")
    }

    /// A config that asks for nothing (empty, comments only) serves as
    /// without one, and says so.
    @Test func aConfigThatAsksForNothingServesWithAWarning() throws {
        try Netns.requireRoot()
        let fixture = try AuthFixture(hash: "", password: "")
        for (name, text) in [("empty.yml", ""), ("comments.yml", "# TLS and users to come\n---\n")] {
            let ns = try TestNamespace()
            let config = try fixture.write(name, text)
            let server = try startServe(in: ns, port: 9873, ["--listen", "127.0.0.1:9873", "--web-config", config])
            defer { server.stop() }
            #expect(try RawHTTP.request("/metrics", port: 9873, in: ns.name).status == 200)
            let warning =
                "Warning: the web config \(config) names neither tls_server_config nor basic_auth_users: serving plain HTTP without authentication, as without --web-config."
            #expect(server.log.split(separator: "\n").first.map(String.init) == warning, "\(name): \(server.log)")
        }
    }

    func serve(_ ns: TestNamespace, config: String) throws -> Background {
        let server = try startServe(in: ns, interval: "500ms", ["--web-config", config])
        #expect(server.log.contains("listening on https://"), "\(server.log)")
        return server
    }

    /// curl inside the namespace: the HTTP status (0 when no response) and curl's exit code.
    func curl(_ ns: TestNamespace, _ pki: TestPKI, _ extra: [String], url: String = "https://127.0.0.1:9874/metrics") throws -> (
        status: Int, exit: Int32, headers: String
    ) {
        let result = try ns.exec(
            ["curl", "-sS", "-o", "/dev/null", "-D", "-", "-w", "\n%{http_code}", "--max-time", "5", "--cacert", pki.dir + "/ca.crt"] + extra + [url],
            allowFailure: true)
        let status = Int(result.out.split(separator: "\n").last ?? "") ?? 0
        return (status, result.status, result.out)
    }

    @Test func tlsClientCertificatesAndBasicAuthWithCurl() throws {
        try Netns.requireRoot()
        let pki = try TestPKI()
        let ns = try TestNamespace()
        let config = try pki.write(
            "web.yml",
            """
            tls_server_config:
              cert_file: server.crt
              key_file: server.key
              client_auth_type: RequireAndVerifyClientCert
              client_ca_file: ca.crt
            basic_auth_users:
              \(pki.user): '\(pki.hash)'
            """)
        let server = try serve(ns, config: config)
        defer { server.stop() }
        let cert = ["--cert", pki.dir + "/client.crt", "--key", pki.dir + "/client.key"]
        let good = ["-u", "\(pki.user):\(pki.password)"]

        let ok = try curl(ns, pki, cert + good)
        #expect(ok.status == 200, "TLS, client certificate and the right password: \(ok)")
        #expect(try curl(ns, pki, cert + good).status == 200, "again, from the cache")
        let wrong = try curl(ns, pki, cert + ["-u", "\(pki.user):wrong"])
        #expect(wrong.status == 401 && wrong.headers.contains("WWW-Authenticate: Basic"), "wrong password: \(wrong)")
        let nobody = try curl(ns, pki, cert + ["-u", "nobody:\(pki.password)"])
        #expect(nobody.status == 401, "unknown user: \(nobody)")
        let none = try curl(ns, pki, cert)
        #expect(none.status == 401 && none.headers.contains("WWW-Authenticate: Basic"), "no credentials: \(none)")

        let noCert = try curl(ns, pki, good)
        #expect(noCert.status != 200 && noCert.exit != 0, "no client certificate: refused in the handshake: \(noCert)")
        let stranger = try curl(ns, pki, ["--cert", pki.dir + "/stranger.crt", "--key", pki.dir + "/stranger.key"] + good)
        #expect(stranger.status != 200, "a certificate from another CA: \(stranger)")
        let plain = try curl(ns, pki, good, url: "http://127.0.0.1:9874/metrics")
        #expect(plain.status != 200, "plain HTTP to the TLS port: \(plain)")
        #expect(server.process.isRunning)
    }

    @Test func anOptionalClientCertificateMustStillVerify() throws {
        try Netns.requireRoot()
        let pki = try TestPKI()
        let ns = try TestNamespace()
        let config = try pki.write(
            "optional.yml",
            """
            tls_server_config:
              cert_file: server.crt
              key_file: server.key
              client_auth_type: VerifyClientCertIfGiven
              client_ca_file: ca.crt
            """)
        let server = try serve(ns, config: config)
        defer { server.stop() }
        #expect(try curl(ns, pki, []).status == 200, "no certificate: fine")
        #expect(try curl(ns, pki, ["--cert", pki.dir + "/client.crt", "--key", pki.dir + "/client.key"]).status == 200)
        let stranger = try curl(ns, pki, ["--cert", pki.dir + "/stranger.crt", "--key", pki.dir + "/stranger.key"])
        #expect(stranger.status != 200, "a certificate from another CA: \(stranger)")
    }

    @Test func minVersionTLS13RefusesTLS12() throws {
        try Netns.requireRoot()
        let pki = try TestPKI()
        let ns = try TestNamespace()
        let config = try pki.write("web13.yml", "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS13\n")
        let server = try serve(ns, config: config)
        defer { server.stop() }
        #expect(try curl(ns, pki, ["--tlsv1.3"]).status == 200)
        let old = try curl(ns, pki, ["--tlsv1.2", "--tls-max", "1.2"])
        #expect(old.status == 0 && old.exit != 0, "a TLS 1.2 client: \(old)")
    }

    @Test func prometheusScrapesOverTLSWithBasicAuth() throws {
        try Netns.requireRoot()
        let pki = try TestPKI()
        let ns = try TestNamespace()
        let config = try pki.write(
            "web.yml",
            """
            tls_server_config:
              cert_file: server.crt
              key_file: server.key
              min_version: TLS12
            basic_auth_users:
              \(pki.user): "\(pki.hash)"
            """)
        let server = try serve(ns, config: config)
        defer { server.stop() }
        _ = try pki.write("password", pki.password)
        _ = try pki.write(
            "prometheus.yml",
            """
            global:
              scrape_interval: 1s
            scrape_configs:
              - job_name: ifmeter
                scheme: https
                tls_config:
                  ca_file: \(pki.dir)/ca.crt
                basic_auth:
                  username: \(pki.user)
                  password_file: \(pki.dir)/password
                static_configs:
                  - targets: ['127.0.0.1:9874']
              - job_name: ifmeter-wrong-password
                scheme: https
                tls_config:
                  ca_file: \(pki.dir)/ca.crt
                basic_auth:
                  username: \(pki.user)
                  password: wrong
                static_configs:
                  - targets: ['127.0.0.1:9874']
            """)
        let prometheus = try Background(
            [
                "ip", "netns", "exec", ns.name, "prometheus", "--config.file=\(pki.dir)/prometheus.yml",
                "--storage.tsdb.path=\(pki.dir)/data", "--web.listen-address=127.0.0.1:9090", "--log.level=warn",
            ], name: "prometheus")
        defer { prometheus.stop() }
        let targets = try waitFor("Prometheus to scrape both jobs") { () -> String? in
            let text = try? RawHTTP.request("/api/v1/targets", port: 9090, in: ns.name).text
            // The refused job's first scrape may time out (its 401 comes
            // after the throttle's wait): wait for a scrape it refused.
            guard let text, text.contains(#""health":"up""#), text.contains(#""health":"down""#), text.contains("401 Unauthorized") else {
                return nil
            }
            return text
        }
        #expect(targets.contains("401 Unauthorized"), "the wrong password is refused: \(targets)")
        func value(_ promql: String) throws -> String? {
            let path = "/api/v1/query?query=" + promql.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let data = Data(try RawHTTP.request(path, port: 9090, in: ns.name).body)
            let json = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            let result = (json?["data"] as? [String: Any])?["result"] as? [[String: Any]]
            return (result?.first?["value"] as? [Any])?.last as? String
        }
        #expect(try value(#"up{job="ifmeter"}"#) == "1", "scraped over TLS with basic auth")
        #expect(try value(#"up{job="ifmeter-wrong-password"}"#) == "0")
        #expect(Double(try value(#"ifmeter_samples_total{job="ifmeter"}"#) ?? "") ?? 0 >= 1, "ifmeter's own series arrived")
    }
}
