import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// serve's dashboard in headless Chromium (issue 33), under traffic sent in
/// the test's namespaces: the page's totals are /metrics' and a recreated
/// interface keeps its total; hostile names stay text and run nothing; the
/// page works behind basic auth and TLS, follows the event stream there,
/// and fits a phone. Screenshots go to .build/test-artifacts.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct DashboardBrowserTests {
    /// A counter of `name` on /metrics (ifmeter's family, without labels' order).
    func metric(_ ns: TestNamespace, port: UInt16, _ family: String, _ name: String) throws -> UInt64? {
        let text = try RawHTTP.request("/metrics", port: port, in: ns.name).text
        for line in text.split(separator: "\n") where line.hasPrefix(family + "{") && line.contains("interface=\"\(name)\"") {
            return line.split(separator: " ").last.flatMap { UInt64($0) }
        }
        return nil
    }

    /// The page's figure (bytes, as the cell keeps it) for interface `key`.
    func shown(_ browser: Browser, _ key: String, _ cell: String) throws -> UInt64? {
        let value: String? = try browser.evaluate(
            "(() => { const row = [...document.querySelectorAll('#interfaces tbody tr')].find(r => r.dataset.key === \(quoted(key)));"
                + " return row ? row.querySelector('td.\(cell)').dataset.bytes : null; })()")
        return value.flatMap { UInt64($0) }
    }

    func quoted(_ text: String) -> String {
        var out = ""
        JSONWriter.quote(text, into: &out)
        return out
    }

    @Test func thePageShowsWhatMetricsSaysAndARecreatedInterfaceKeepsItsTotal() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let port: UInt16 = 49720
        let server = try startLoopbackServe(in: pair.a, port: port)
        defer { server.stop() }
        let browser = try Browser(in: pair.a)
        try browser.setViewport(width: 1280, height: 800)
        try browser.load("http://127.0.0.1:\(port)/")
        try browser.waitUntil("document.querySelector('#interfaces tbody tr[data-key=\"vA\"]') !== null")

        // Traffic: the page's rate moves, and when it stops its totals are
        // the exposition's (the same sample's: a scrape between samples
        // gives the same bytes).
        // Sent in bursts until the page shows a rate: a page that is slow
        // skips samples, so one burst's single sample could pass it by.
        var bursts: UInt64 = 0
        _ = try waitFor("a rate on the page") { () throws -> Bool? in
            try pair.sendUDP(count: 50, payload: 1000)
            bursts += 1
            let moving: Bool = try browser.evaluate(
                "[...document.querySelectorAll('#interfaces tbody tr[data-key=\"vA\"] td.tx-rate')].some(c => Number(c.dataset.bytes) > 0)")
            return moving ? true : nil
        }
        let sent = bursts * 50 * VethPair.frameBytes(payload: 1000)
        let agreed = try waitFor("the page's vA total to be /metrics'") { () throws -> UInt64? in
            guard let exposed = try metric(pair.a, port: port, "ifmeter_transmit_bytes_total", "vA"), exposed >= sent else { return nil }
            return try shown(browser, "vA", "tx-total") == exposed ? exposed : nil
        }
        #expect(agreed >= sent)

        // Deleted and made again under the same name: the page keeps the
        // total (the deletion's final counters plus the new link's).
        try pair.a.ip("link", "del", pair.nameA)
        try pair.a.ip(
            "link", "add", pair.nameA, "address", pair.macA, "type", "veth", "peer", "name", pair.nameB, "address", pair.macB, "netns", pair.b.name)
        try pair.a.ip("addr", "add", pair.ipA + "/30", "dev", pair.nameA)
        try pair.b.ip("addr", "add", pair.ipB + "/30", "dev", pair.nameB)
        try pair.a.ip("neigh", "add", pair.ipB, "lladdr", pair.macB, "dev", pair.nameA, "nud", "permanent")
        try pair.a.ip("link", "set", pair.nameA, "up")
        try pair.b.ip("link", "set", pair.nameB, "up")
        _ = try waitFor("the new veth's carrier") { () throws -> Bool? in
            try pair.a.ip("-o", "link", "show", "dev", pair.nameA).contains("LOWER_UP") ? true : nil
        }
        try pair.sendUDP(count: 100, payload: 1000)
        let after = try waitFor("the page's vA total after the recreation to be /metrics'") { () throws -> UInt64? in
            guard let exposed = try metric(pair.a, port: port, "ifmeter_transmit_bytes_total", "vA"),
                exposed >= agreed + 100 * VethPair.frameBytes(payload: 1000)
            else { return nil }
            return try shown(browser, "vA", "tx-total") == exposed ? exposed : nil
        }
        #expect(after >= agreed + 100 * VethPair.frameBytes(payload: 1000), "nothing lost to the recreation")
        let recreations: Int = try browser.evaluate(
            "fetch('/api/v1/interfaces').then(r => r.json()).then(d => d.interfaces.find(i => i.name === 'vA').events.recreations + d.interfaces.find(i => i.name === 'vA').events.deletions)"
        )
        #expect(recreations >= 1, "the page's data says the link was recreated")
        _ = try browser.screenshot("desktop")
        try browser.expectNoProblems()
    }

    @Test func namesWithMarkupQuotesAndControlsAreTextAndRunNothing() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let names = ["<script>", "\"><b>x", "a'b\"c", "\u{202E}evil", "x\u{1B}[31m", "<i>i", "&amp;"]
        for (n, name) in names.enumerated() { try ns.ip("link", "add", "name", name, "type", "veth", "peer", "name", "peer\(n)") }
        let port: UInt16 = 49721
        let server = try startLoopbackServe(in: ns, port: port)
        defer { server.stop() }
        let browser = try Browser(in: ns)
        try browser.load("http://127.0.0.1:\(port)/")
        try browser.waitUntil("document.querySelectorAll('#interfaces tbody tr').length >= \(2 * names.count + 1)")
        let keys: [String] = try browser.evaluate("[...document.querySelectorAll('#interfaces tbody tr')].map(r => r.querySelector('a').textContent)")
        for name in names { #expect(keys.contains(name), "\(name.debugDescription) shown as it is: \(keys)") }
        // No element came from a name: one script (the page's own), no b or i.
        #expect(try browser.evaluate("document.querySelectorAll('script').length", as: Int.self) == 1)
        #expect(try browser.evaluate("document.querySelectorAll('#interfaces b, #interfaces i, #interfaces script').length", as: Int.self) == 0)
        // An interface's own page, by its name in the address, is text too.
        _ = try browser.evaluate("(location.hash = '#i=' + encodeURIComponent('<script>'), true)", as: Bool.self)
        try browser.waitUntil("document.getElementById('detail-title').textContent === '<script>'")
        #expect(try browser.evaluate("document.querySelectorAll('#detail script, #detail b').length", as: Int.self) == 0)
        try browser.expectNoProblems()
    }

    @Test func behindBasicAuthAndTLSItFollowsTheStreamAndFitsAPhone() throws {
        try Netns.requireRoot()
        let pki = try TestPKI()
        let ns = try TestNamespace()
        let config = try pki.writeTLSAndBasicAuth()
        let port: UInt16 = 49722
        let server = try startLoopbackServe(in: ns, port: port, ["--web-config", config, "--state", pki.dir + "/state.db", "--probe", "127.0.0.2"])
        defer { server.stop() }
        let browser = try Browser(in: ns, trusting: [pki.dir + "/server.crt"])
        try browser.authenticate(user: pki.user, password: pki.password)
        try browser.setViewport(width: 390, height: 844)
        try browser.load("https://127.0.0.1:\(port)/")
        try browser.waitUntil("Number(document.body.dataset.generation || 0) > 0")
        let first: Int = try browser.evaluate("Number(document.body.dataset.generation)")
        // Samples arrive by the event stream, through TLS and the password.
        try browser.waitUntil("Number(document.body.dataset.generation) >= \(first + 3)")
        let widths = try browser.widths()
        #expect(widths.innerWidth == 390 && !widths.overflows, "\(widths)")
        _ = try browser.screenshot("phone")
        // An interface's page: its facts and its tables' place, still no sideways scroll.
        _ = try browser.evaluate("(location.hash = '#i=lo', true)", as: Bool.self)
        try browser.waitUntil("document.querySelector('#facts dd') !== null && !document.getElementById('detail').hidden")
        // The usage tables, read through /api/v1/usage from serve's state file.
        try browser.waitUntil("document.querySelectorAll('#tables section.usage[data-granularity]').length === 4")
        // serve --probe's verdict: the probe leaves by lo, outside the tunnels.
        try browser.waitUntil("document.getElementById('route').textContent.includes('Traffic to 127.0.0.2 leaves by lo')")
        // The summary picture, from /usage.png, drawn and loaded.
        try browser.waitUntil("(() => { const i = document.querySelector('#tables img'); return i !== null && i.complete && i.naturalWidth > 0; })()")
        #expect(try !browser.widths().overflows)
        _ = try browser.screenshot("phone-interface")
        try browser.setViewport(width: 1280, height: 800)
        _ = try browser.evaluate("(location.hash = '', true)", as: Bool.self)
        try browser.waitUntil("!document.getElementById('overview').hidden")
        _ = try browser.screenshot("desktop-tls")
        try browser.expectNoProblems()
    }
}

/// One vocabulary for a person (issue 46): the page's rates are in the
/// unit the commands use (bytes per second) until the bit/s toggle asks
/// for bits, and stay so after a reload; every time is in one form; each
/// total says since when, in JSON as a timestamp and on the page in words;
/// an alias is shown beside its name in the API and on the page.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct DashboardVocabularyTests {
    @Test func unitsTimesSinceAndAliasesAreSaidAlike() throws {
        try Netns.requireRoot()
        let pair = try VethPair()
        let folder = try ScenarioFolder("vocabulary")
        let state = folder["state.db"]
        let port: UInt16 = 19458
        let server = try startLoopbackServe(in: pair.a, port: port, ["--state", state])
        defer { server.stop() }
        // Given while serve writes the file: it shows from the next sample.
        let alias = try ifmeter(["state", "alias", "vA", "uplink", "--state", state])
        #expect(alias.status == 0, "\(alias.err)")
        try pair.sendUDP(count: 50, payload: 1000)

        // The API: since as a Unix time no later than now, the alias.
        let document = try waitFor("vA with its alias in /api/v1/interfaces") { () throws -> JSONValue? in
            let doc = try JSONParser.parse(try RawHTTP.request("/api/v1/interfaces", port: port, in: pair.a.name).text)
            guard case .array(let rows)? = doc["interfaces"] else { return nil }
            return rows.first { $0["name"]?.stringValue == "vA" && $0["alias"]?.stringValue == "uplink" }
        }
        let since = try #require(document["since"]?.doubleValue, "vA's since: \(document)")
        #expect(since > 1_600_000_000 && since <= Date().timeIntervalSince1970 + 1)

        let browser = try Browser(in: pair.a)
        try browser.setViewport(width: 1280, height: 800)
        try browser.load("http://127.0.0.1:\(port)/")
        try browser.waitUntil("document.querySelector('#interfaces tbody tr[data-key=\"vA\"] td.rx-rate') !== null")
        // The name with its alias; the rate in bytes per second.
        let name: String = try browser.evaluate("document.querySelector('#interfaces tbody tr[data-key=\"vA\"] a').textContent")
        #expect(name == "uplink (vA)")
        let rate = "document.querySelector('#interfaces tbody tr[data-key=\"vA\"] td.rx-rate').textContent"
        #expect(try browser.evaluate(rate, as: String.self).hasSuffix("B/s"), "the commands' unit by default")
        // Times in one form: HH:MM:SS, 24-hour.
        try browser.waitUntil("/^Updated [0-2][0-9]:[0-5][0-9]:[0-5][0-9] · every /.test(document.getElementById('status').textContent)")
        // Since when, in words: the legend (one start for all) and each total.
        let legend: String = try browser.evaluate("document.getElementById('since-all').textContent")
        #expect(
            legend.range(of: #"from when serve first saw each interface \(20\d\d-\d\d-\d\d [0-2]\d:[0-5]\d\)$"#, options: .regularExpression) != nil,
            "\(legend)")
        let title: String = try browser.evaluate(
            "document.querySelector('#interfaces tbody tr[data-key=\"vA\"] td.rx-total').title")
        #expect(
            title.range(
                of: #"^the kernel's count when serve first saw it \(20\d\d-\d\d-\d\d [0-2]\d:[0-5]\d\), plus all since$"#, options: .regularExpression
            )
                != nil, "\(title)")
        // The toggle: bits at once, and still after a reload.
        _ = try browser.evaluate("document.getElementById('units').click(), true", as: Bool.self)
        try browser.waitUntil("\(rate).endsWith('bit/s')")
        #expect(try browser.evaluate("document.getElementById('units').getAttribute('aria-pressed')", as: String.self) == "true")
        try browser.load("http://127.0.0.1:\(port)/")
        try browser.waitUntil("document.querySelector('#interfaces tbody tr[data-key=\"vA\"] td.rx-rate') !== null")
        try browser.waitUntil("\(rate).endsWith('bit/s')")
        // The interface's page: its alias in the title, since in the facts.
        try browser.load("http://127.0.0.1:\(port)/#i=vA")
        try browser.waitUntil("document.getElementById('detail-title').textContent === 'uplink (vA)'")
        try browser.waitUntil("document.getElementById('facts').textContent.includes('Totals fromthe kernel\\'s count when serve first saw it (20')")
        try browser.expectNoProblems()
        _ = try browser.screenshot("vocabulary-1280")
    }
}
