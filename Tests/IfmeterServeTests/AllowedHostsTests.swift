import IfmeterServe
import Testing

/// Which Host headers serve answers (issue 45, DNS rebinding), in process:
/// addresses, names of one label, the machine's and the configured names,
/// with the port, ASCII case and a trailing dot ignored; any other name is
/// refused with 421 and one line.
@Suite struct AllowedHostsTests {
    let hosts = AllowedHosts(
        configured: ["Metrics.Example.ORG.", "scrape.example.net"], listen: ListenAddress(parsing: "ifmeter.lan.example:9874"),
        hostName: { "Box.Example.Com" })

    @Test func addressesLocalNamesAndTheMachinesNamesAreAnswered() {
        for host in [
            nil, "127.0.0.1", "127.0.0.1:9874", "10.1.2.3:80", "[::1]", "[::1]:9874", "[2001:db8::1]:1", "[::ffff:127.0.0.1]:9874", "::1", "::1:9874",
            "fe80::1",
            "localhost", "localhost:9874", "LOCALHOST", "localhost.", "localhost.:9874", "vm", "x", "prometheus-1:9874",
            "box.example.com", "BOX.EXAMPLE.COM.:9874", "ifmeter.lan.example:9874", "metrics.example.org", "Metrics.Example.Org.:443",
            "scrape.example.net:9874",
        ] {
            #expect(hosts.judge(host) == .allowed, "\(host ?? "no Host")")
        }
    }

    @Test func otherNamesAndMalformedHostsAreRefused() {
        for host in [
            "rebind.attacker.test", "rebind.attacker.test:9874", "REBIND.attacker.test.", "rebind.attacker.test.:9874",
            "127.0.0.1.attacker.test", "localhost.attacker.test", "box.example.com.attacker.test", "example.org", "metrics.example.org.evil",
            "[::1", "[::1]x", "g::1:9874", "[rebind.attacker.test]:80", "[127.0.0.1]", "127.0.0.1:abc", "127.0.0.1:123456", "localhost:1:2", "",
            ":9874", ".",
        ] {
            #expect(hosts.judge(host) == .refused(host), "\(host)")
        }
    }

    @Test func theHostNameIsAskedAtEachRequest() {
        let name = NameBox()
        let hosts = AllowedHosts(configured: [], listen: nil, hostName: { name.value })
        #expect(hosts.judge("old.example.com") == .allowed)
        name.value = "new.example.com"
        #expect(hosts.judge("old.example.com") == .refused("old.example.com"))
        #expect(hosts.judge("new.example.com:9874") == .allowed)
    }

    @Test func aStarAllowsEveryName() {
        let any = AllowedHosts(configured: ["*"], listen: nil, hostName: { "vm" })
        #expect(any.judge("rebind.attacker.test:1") == .allowed)
        #expect(any.judge("[::1") == .allowed)
    }

    @Test func theRefusalIsOneLineNamingTheNameAndTheOption() {
        let refusal = AllowedHosts.refusal("Rebind.Attacker.Test.:9874")
        #expect(refusal.status == 421)
        guard case .bytes(let body) = refusal.payload else {
            Issue.record("a text answer")
            return
        }
        let text = String(decoding: body.bytes, as: UTF8.self)
        #expect(
            text
                == "421 Misdirected Request: this server does not answer to the name 'Rebind.Attacker.Test.:9874' (a page of another site could use such a name to read it: DNS rebinding); if it is this server's name, start serve with --allow-host rebind.attacker.test.\n"
        )
        // A control character in the header is shown escaped, never raw.
        guard case .bytes(let escaped) = AllowedHosts.refusal("a\u{1B}[31m.example").payload else { return }
        #expect(!escaped.bytes.contains(0x1B))
    }

    @Test func configuredNamesMustBeHostNames() {
        #expect(AllowedHosts.normalized("Metrics.Example.ORG.") == "metrics.example.org")
        #expect(AllowedHosts.normalized("my_host-1.lan") == "my_host-1.lan")
        for bad in ["", ".", "a..b", "a b", "a:9874", "[::1]", "é.example", String(repeating: "a", count: 64) + ".example", "*.example.org"] {
            #expect(AllowedHosts.normalized(bad) == nil, "\(bad)")
        }
    }
}

/// A host name the test changes.
final class NameBox: @unchecked Sendable {
    var value = "old.example.com"
}
