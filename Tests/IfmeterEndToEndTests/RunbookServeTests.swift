import Foundation
import IfmeterTestSupport
import Testing

/// Issue 48, part 2: every alert's `runbook_url` leads somewhere a person
/// can open. The real `ifmeter serve` answers `/runbooks` with a page that
/// has, for each alert of the shipped rules, the anchor its `runbook_url`
/// names; a browser opened at one shows that section.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct RunbookServeTests {
    /// Each alert of the shipped rules and its runbook_url's base and fragment.
    static func runbooks() throws -> [(alert: String, base: String, fragment: String)] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("dist/prometheus/ifmeter-rules.yml"), encoding: .utf8)
        var result: [(String, String, String)] = []
        var alert: String?
        for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line.hasPrefix("- alert:") {
                alert = line.dropFirst("- alert:".count).trimmingCharacters(in: .whitespaces)
            } else if line.hasPrefix("runbook_url:"), let name = alert {
                let url = line.dropFirst("runbook_url:".count).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
                let parts = url.split(separator: "#", maxSplits: 1).map(String.init)
                result.append((name, parts[0], parts.count == 2 ? parts[1] : ""))
                alert = nil
            }
        }
        return result
    }

    /// The values of every `id="..."` in a page.
    static func ids(_ page: String) -> Set<String> {
        Set(page.components(separatedBy: " id=\"").dropFirst().compactMap { $0.split(separator: "\"", maxSplits: 1).first.map(String.init) })
    }

    @Test func serveAnswersARunbookAnchorForEveryAlertOfTheRules() throws {
        try Netns.requireRoot()
        let runbooks = try Self.runbooks()
        #expect(runbooks.count >= 19, "\(runbooks.map(\.alert))")
        for runbook in runbooks {
            // The alerting host's serve, at its default port.
            #expect(runbook.base == "http://{{ stripPort $labels.instance }}:9874/runbooks", "\(runbook.alert): \(runbook.base)")
        }
        let ns = try TestNamespace()
        let port: UInt16 = 19_400
        let server = try startLoopbackServe(in: ns, port: port)
        defer { server.stop() }
        let answer = try RawHTTP.request("/runbooks", port: port, in: ns.name)
        #expect(answer.status == 200 && answer.headers["content-type"] == "text/html; charset=utf-8", "\(answer.status) \(answer.headers)")
        #expect(answer.headers["content-security-policy"]?.contains("default-src 'none'") == true)
        let ids = Self.ids(answer.text)
        for runbook in runbooks {
            #expect(!runbook.fragment.isEmpty && ids.contains(runbook.fragment), "\(runbook.alert): no id \(runbook.fragment) in /runbooks")
            #expect(answer.text.contains(">\(runbook.alert)</h2>"), "\(runbook.alert) has its heading")
        }
        let head = try RawHTTP.request("/runbooks", method: "HEAD", port: port, in: ns.name)
        #expect(head.status == 200 && head.body.isEmpty && head.headers["content-type"] == "text/html; charset=utf-8")
        // The same Host check as every answer: a name serve does not know is refused.
        let rebound = try RebindingTests.get("/runbooks", host: "rebind.attacker.test", port: port, in: ns)
        #expect(rebound.status == 421 && rebound.text == RebindingTests.refusal("rebind.attacker.test"), "\(rebound.status) \(rebound.text)")
    }

    /// Opened at an alert's fragment, the page shows that section at the top.
    @Test func aBrowserOpenedAtAnAlertsFragmentShowsItsSection() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let port: UInt16 = 19_401
        let server = try startLoopbackServe(in: ns, port: port)
        defer { server.stop() }
        let browser = try Browser(in: ns)
        try browser.setViewport(width: 800, height: 600)
        let fragment = try #require(Self.runbooks().first { $0.alert == "IfmeterStateNotSaved" }?.fragment)
        _ = try browser.load("http://127.0.0.1:\(port)/runbooks#\(fragment)")
        try browser.waitUntil("document.getElementById('\(fragment)') !== null")
        // `| 0`: a -0 does not come back through the DevTools protocol as a value.
        let top = try browser.evaluate("Math.round(document.getElementById('\(fragment)').getBoundingClientRect().top) | 0", as: Int.self)
        let scrolled = try browser.evaluate("Math.round(window.scrollY) | 0", as: Int.self)
        #expect(scrolled > 0 && abs(top) <= 2, "the section is at the top: its heading at \(top), scrolled \(scrolled)")
        try browser.expectNoProblems()
    }
}
