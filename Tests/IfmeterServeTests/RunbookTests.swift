import Foundation
import IfmeterCore
@testable import IfmeterServe
import IfmeterTestSupport
import Testing

/// Issue 48, part 2: the alerts' runbook has one source (`Runbooks.markdown`),
/// which docs/alerts.md is, and serve answers it as a page at `/runbooks`
/// whose anchors are the fragments of the rules' `runbook_url`s. In
/// process; `RunbookServeTests` asks the real binary.
@Suite struct RunbookTests {
    let routes = ServeRoutes(cache: ScrapeCache(families: .ifmeter, version: "9.8.7", interval: 1), version: "9.8.7")

    func header(_ response: HTTPResponse, _ name: String) -> String? {
        response.headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    func text(_ response: HTTPResponse) -> String {
        guard case .bytes(let body) = response.payload else { return "" }
        return String(decoding: body.bytes, as: UTF8.self)
    }

    /// No second copy kept by hand: docs/alerts.md is what
    /// `ifmeter --generate-runbook` prints.
    @Test func docsAlertsIsTheRunbookServeAnswers() throws {
        let docs = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/alerts.md"), encoding: .utf8)
        #expect(
            docs == Runbooks.markdown + "\n",
            "docs/alerts.md differs from Runbooks.markdown (Sources/IfmeterServe/Runbooks.swift, the source): edit that and run `ifmeter --generate-runbook > docs/alerts.md`"
        )
    }

    @Test func runbooksIsAPageWithEveryAlertAsAnAnchor() throws {
        for method in ["GET", "HEAD"] {
            let response = routes.respond(to: HTTPRequest(method: method, path: "/runbooks", headers: [:]))
            #expect(response.status == 200, "\(method)")
            #expect(header(response, "Content-Type") == "text/html; charset=utf-8")
            let policy = header(response, "Content-Security-Policy") ?? ""
            #expect(policy.contains("default-src 'none'") && policy.contains("style-src 'self'") && !policy.contains("unsafe"))
            #expect(header(response, "X-Content-Type-Options") == "nosniff" && header(response, "X-Frame-Options") == "DENY")
        }
        let page = text(routes.respond(to: HTTPRequest(method: "GET", path: "/runbooks", headers: [:])))
        #expect(page.hasPrefix("<!DOCTYPE html>") && page.contains("<title>ifmeter: alerts</title>"))
        #expect(page.contains(#"<span class="version">9.8.7</span>"#))
        #expect(page.contains(#"<link rel="stylesheet" href="/dashboard.css">"#) && !page.contains("<script"))
        #expect(page.contains(#"<h2 id="ifmeterhostsilent">IfmeterHostSilent</h2>"#), "\(page.prefix(3000))")
        #expect(page.contains("<p><strong>What it means.</strong> Nothing has come from the host for 5 minutes and more:"))
        // Every heading of the Markdown is an anchor of the page.
        let headings = Runbooks.markdown.split(separator: "\n").filter { $0.hasPrefix("## ") }.map { $0.dropFirst(3) }
        #expect(headings.count >= 19)
        for heading in headings {
            #expect(page.contains("<h2 id=\"\(heading.lowercased())\">\(heading)</h2>"), "\(heading)")
        }
    }

    @Test func theRendererEscapesEverythingAndLinksOnlyWhereThePageLeads() {
        let html = MarkdownHTML.render(
            """
            # A <b>"title"</b> & more
            Text with <script>alert(1)</script>, `<code> & "quotes"` and **strong `code`**.
            [a wiki](https://wiki.example/a?x=1&y="2") [the metrics](metrics.md#rules-and-alerts) [here](#a-btitlebb--more)
            [bad](javascript:alert) [spaced](https://x.example/a b) [unclosed](http://x
            ## Same
            ## Same

            ```
            sed 's|<a>|&|' "x"
            ```
            """)
        let expected = """
            <h1 id="a-btitleb--more">A &lt;b&gt;&quot;title&quot;&lt;/b&gt; &amp; more</h1>
            <p>Text with &lt;script&gt;alert(1)&lt;/script&gt;, <code>&lt;code&gt; &amp; &quot;quotes&quot;</code> and <strong>strong <code>code</code></strong>.
            <a href="https://wiki.example/a?x=1&amp;y=&quot;2&quot;">a wiki</a> the metrics <a href="#a-btitlebb--more">here</a>
            bad spaced [unclosed](http://x</p>
            <h2 id="same">Same</h2>
            <h2 id="same-1">Same</h2>
            <pre><code>sed &apos;s|&lt;a&gt;|&amp;|&apos; &quot;x&quot;</code></pre>

            """
        #expect(html == expected, "\(html)")
    }
}
