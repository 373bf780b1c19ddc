import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The headless-Chromium harness (IfmeterTestSupport's Browser, issue 33)
/// against serve's page and small pages of the test's own, each in a
/// namespace of its own: what a dashboard's browser tests will stand on.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct BrowserHarnessTests {
    @Test func readsServesPageInsideTheNamespaceAndLeavesNothingBehind() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let server = try startLoopbackServe(in: ns, port: 49700)
        defer { server.stop() }
        let browser = try Browser(in: ns)
        try browser.load("http://127.0.0.1:49700/")
        try browser.waitUntil("document.querySelector('h1') !== null")
        let heading: String = try browser.evaluate("document.querySelector('h1').textContent")
        #expect(heading.hasPrefix("ifmeter "), "\(heading)")
        #expect(try browser.evaluate("document.title", as: String.self) == "ifmeter")
        let text: String = try browser.evaluate("document.body.innerText")
        #expect(text.contains(Caveat.sentence), "\(text)")
        let links: [String] = try browser.evaluate("[...document.querySelectorAll('a')].map(a => a.href)")
        #expect(links.contains("http://127.0.0.1:49700/metrics"), "\(links)")
        // The link leads somewhere: the page's own fetch of it, from inside.
        let metrics: String = try browser.evaluate("fetch('/metrics').then(r => r.text())")
        #expect(metrics.contains("ifmeter_interface_"), "\(metrics.prefix(300))")
        try browser.expectNoProblems()

        let group = browser.processGroup, folder = browser.temporaryDirectory
        #expect(Browser.livingMembers(of: group).count >= 3, "the driver, chromedriver and Chromium run in the driver's group")
        browser.close()
        #expect(Browser.livingMembers(of: group).isEmpty, "processes left: \(Browser.livingMembers(of: group))")
        #expect(!FileManager.default.fileExists(atPath: folder))
        #expect(throws: TestFailure.self) { try browser.load("http://127.0.0.1:49700/") }
    }

    @Test func aKilledDriverIsCleanedUpToo() throws {
        try Netns.requireRoot()
        var browser: Browser? = try Browser()
        let group = browser!.processGroup, folder = browser!.temporaryDirectory
        // A driver that died under the test: the next command says so, and
        // letting go of the browser still kills Chromium and removes the folder.
        kill(group, SIGKILL)
        #expect(throws: TestFailure.self) { try browser!.evaluate("1", as: Int.self) }
        browser = nil
        #expect(Browser.livingMembers(of: group).isEmpty, "processes left: \(Browser.livingMembers(of: group))")
        #expect(!FileManager.default.fileExists(atPath: folder))
    }

    @Test func tlsAndBasicAuthWithTheRightCredentials() throws {
        try Netns.requireRoot()
        let pki = try TestPKI()
        let ns = try TestNamespace()
        let config = try pki.writeTLSAndBasicAuth()
        let server = try startLoopbackServe(in: ns, port: 49701, ["--web-config", config])
        defer { server.stop() }
        let url = "https://127.0.0.1:49701/"

        // The server's certificate trusted for its key: TLS is checked, not ignored.
        let browser = try Browser(in: ns, trusting: [pki.dir + "/server.crt"])
        try browser.authenticate(user: pki.user, password: pki.password)
        #expect(try browser.load(url) == url)
        try browser.waitUntil("document.querySelector('h1') !== null")
        #expect(try browser.evaluate("document.querySelector('h1').textContent", as: String.self).hasPrefix("ifmeter "))
        // The header goes with the page's own requests too.
        #expect(try browser.evaluate("fetch('/metrics').then(r => r.status)", as: Int.self) == 200)
        try browser.expectNoProblems()
        browser.close()

        // A wrong password: Chromium's error page, and the load says so.
        let wrong = try Browser(in: ns, trusting: [pki.dir + "/server.crt"])
        try wrong.authenticate(user: pki.user, password: "wrong")
        #expect {
            try wrong.load(url)
        } throws: {
            "\($0)".contains("Chromium shows an error page for \(url)")
        }
        let problems = try wrong.problems()
        #expect(problems.contains { $0.kind == "network" && $0.message.contains("401") }, "\(problems)")
        wrong.close()

        // Without trusting the certificate: Chromium refuses it.
        let untrusting = try Browser(in: ns)
        try untrusting.authenticate(user: pki.user, password: pki.password)
        #expect {
            try untrusting.load(url)
        } throws: {
            "\($0)".contains("ERR_CERT_AUTHORITY_INVALID")
        }
    }

    @Test func dialogsConsoleErrorsAndExceptionsAreReported() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-pages-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "<!DOCTYPE html><title>quiet</title><p id=p>quiet</p><script>console.log('fine'); console.warn('fine too')</script>\n"
            .write(toFile: dir + "/quiet.html", atomically: true, encoding: .utf8)
        try """
        <!DOCTYPE html><title>loud</title><p>loud</p><img src="/missing.png" alt="">
        <script>
        alert("hello");
        const sure = confirm("sure?");
        const name = prompt("name?", "x");
        console.error("something broke");
        Promise.reject(new Error("nobody caught this"));
        setTimeout(() => { window.done = {sure: sure, name: name}; throw new Error("thrown late"); }, 50);
        </script>

        """.write(toFile: dir + "/loud.html", atomically: true, encoding: .utf8)
        let server = try Background(
            ["ip", "netns", "exec", ns.name, "/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir, "49702"],
            name: "http-server")
        defer { server.stop() }
        _ = try waitFor("python3 -m http.server to answer") { () throws -> Bool? in
            try server.requireRunning()
            return (try? RawHTTP.request("/quiet.html", port: 49702, in: ns.name))?.status == 200 ? true : nil
        }

        let browser = try Browser(in: ns)
        try browser.load("http://127.0.0.1:49702/quiet.html")
        try browser.waitUntil("document.getElementById('p') !== null")
        try browser.expectNoProblems()

        try browser.load("http://127.0.0.1:49702/loud.html")
        try browser.waitUntil("window.done !== undefined")
        // A dialog never blocks the page: each returns what a dismissed one does.
        struct Done: Decodable, Equatable {
            var sure: Bool
            var name: String?
        }
        #expect(try browser.evaluate("window.done", as: Done.self) == Done(sure: false, name: nil))
        // The browser log can lag the page by a moment: wait for the last one.
        _ = try waitFor("the late exception in the browser's log") { try browser.problems().count >= 7 ? true : nil }
        let problems = try browser.problems()
        #expect(problems.filter { $0.kind == "dialog" }.map(\.message) == ["alert: hello", "confirm: sure?", "prompt: name?"], "\(problems)")
        #expect(problems.contains { $0.kind == "console" && $0.message.contains("something broke") }, "\(problems)")
        #expect(problems.contains { $0.kind == "exception" && $0.message.contains("nobody caught this") }, "\(problems)")
        #expect(problems.contains { $0.kind == "exception" && $0.message.contains("thrown late") }, "\(problems)")
        #expect(problems.contains { $0.kind == "network" && $0.message.contains("/missing.png") }, "\(problems)")
        #expect(problems.count == 7, "\(problems)")
        #expect(throws: TestFailure.self) { try browser.expectNoProblems() }

        // Problems outlive navigations: a test that checks at its end sees them all.
        try browser.load("http://127.0.0.1:49702/quiet.html")
        #expect(try browser.problems() == problems)

        // Values come back decoded; exceptions and conditions never met are errors.
        #expect(try browser.evaluate("({a: [1, 2.5], b: null})", as: [String: [Double]?].self) == ["a": [1, 2.5], "b": nil])
        #expect(try browser.evaluate("Promise.resolve('later')", as: String.self) == "later")
        do {
            let _: Int = try browser.evaluate("undefinedName + 1")
            Issue.record("an exception was not reported")
        } catch {
            #expect("\(error)".contains("ReferenceError: undefinedName is not defined"), "\(error)")
        }
        do {
            try browser.waitUntil("document.title === 'never'", timeout: 0.5)
            Issue.record("a condition never met was reported met")
        } catch {
            #expect("\(error)".contains("did not become true within 0.5 s"), "\(error)")
        }
    }

    @Test func screenshotsAtBothSizesAndNoSidewaysScrollOnServesPage() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let server = try startLoopbackServe(in: ns, port: 49703)
        defer { server.stop() }
        let browser = try Browser(in: ns)
        for (width, height) in [(1280, 800), (390, 844)] {
            try browser.setViewport(width: width, height: height)
            try browser.load("http://127.0.0.1:49703/")
            try browser.waitUntil("document.querySelector('h1') !== null")
            let widths = try browser.widths()
            #expect(widths.innerWidth == width)
            #expect(!widths.overflows, "at \(width) wide: \(widths)")
            let shot = try browser.screenshot("\(width)x\(height)")
            #expect(
                shot.path.hasSuffix(
                    "/.build/test-artifacts/BrowserHarnessTests.screenshotsAtBothSizesAndNoSidewaysScrollOnServesPage-\(width)x\(height).png"))
            #expect(shot.width == width && shot.height == height, "\(shot)")
            let png = try PNG(path: shot.path)
            #expect(png.width == width && png.height == height, "\(shot.path): \(png.width)x\(png.height)")
        }
        try browser.expectNoProblems()
        // The check sees a page that does scroll sideways (the width set
        // through the CSSOM: the dashboard's policy refuses style attributes).
        let _: Int = try browser.evaluate(
            "(() => { const d = document.createElement('div'); d.style.width = '2000px'; d.textContent = 'wide'; document.body.append(d); return 0; })()"
        )
        let widths = try browser.widths()
        #expect(widths.overflows && widths.scrollWidth >= 2000, "\(widths)")
    }
}

/// A PNG file checked chunk by chunk: the signature, every chunk's CRC, an
/// IHDR first and an IEND last with nothing after it.
struct PNG {
    var width = 0, height = 0

    init(path: String) throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { throw TestFailure("\(path): no PNG signature") }
        func word(_ at: Int) -> Int { bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        var offset = 8
        var types: [String] = []
        while offset + 12 <= bytes.count {
            let length = word(offset)
            guard offset + 12 + length <= bytes.count else { throw TestFailure("\(path): a chunk runs past the end") }
            let body = bytes[(offset + 4)..<(offset + 8 + length)]
            guard Self.crc32(body) == UInt32(word(offset + 8 + length)) else { throw TestFailure("\(path): a bad CRC at \(offset)") }
            let type = String(decoding: body.prefix(4), as: UTF8.self)
            if type == "IHDR" { (width, height) = (word(offset + 8), word(offset + 12)) }
            types.append(type)
            offset += 12 + length
        }
        guard types.first == "IHDR", types.last == "IEND", types.contains("IDAT"), offset == bytes.count else {
            throw TestFailure("\(path): chunks \(types), \(bytes.count - offset) bytes after them")
        }
    }

    static func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
