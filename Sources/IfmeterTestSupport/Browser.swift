// A headless Chromium for browser tests of serve's pages (issue 33).
//
// `Browser` starts Debian's chromium in its new headless mode through
// Selenium and chromium-driver: `scripts/browser-driver`, a Python process
// that lives as long as the Browser and takes one JSON command a line on
// stdin, answering one JSON line on stdout. Given a TestNamespace, the
// driver (so chromedriver and Chromium too) runs inside it, where the
// test's `ifmeter serve --listen 127.0.0.1:PORT` is. Each Browser has a
// fresh profile in a temporary folder; closing it (`close()`, or deinit
// when a test fails first) quits Chromium, kills whatever is left of the
// driver's process group and removes the folder.
//
//     let browser = try Browser(in: ns, trusting: [pki.dir + "/server.crt"])
//     try browser.setViewport(width: 390, height: 844)
//     try browser.authenticate(user: "alice", password: "secret")
//     try browser.load("https://127.0.0.1:49700/")
//     try browser.waitUntil("document.querySelector('h1') !== null")
//     let title: String = try browser.evaluate("document.querySelector('h1').textContent")
//     #expect(try browser.problems().isEmpty)
//     #expect(try !browser.widths().overflows)
//     _ = try browser.screenshot("phone")  // .build/test-artifacts/Suite.test()-phone.png
//
// Problems are what a test fails on: console.error calls, uncaught
// exceptions and rejections, failed loads (Chromium's browser log, which
// outlives navigations) and every dialog (alert, confirm, prompt, print:
// they never open; each is recorded and returns what a dismissed one
// does). Waits poll a condition up to a deadline; none is a fixed sleep.
import Foundation
#if canImport(Testing)
import Testing
#endif

#if canImport(Glibc)
import Glibc
#endif

/// Something a page did that a test should fail on.
package struct BrowserProblem: Decodable, Sendable, Equatable, CustomStringConvertible {
    /// "dialog" (alert, confirm, prompt, print), "console" (console.error),
    /// "exception" (uncaught, rejections included), "network" (a failed
    /// load), or another source of Chromium's log.
    package var kind: String
    package var message: String
    package var description: String { "\(kind): \(message)" }
}

/// A headless Chromium with a page of its own (see the top of this file).
package final class Browser {
    /// The viewport's and the document's widths, in CSS pixels.
    package struct Widths: Decodable, Sendable, CustomStringConvertible {
        package var innerWidth: Int
        package var scrollWidth: Int
        /// The page scrolls sideways.
        package var overflows: Bool { scrollWidth > innerWidth }
        package var description: String { "scrollWidth \(scrollWidth), innerWidth \(innerWidth)" }
    }

    /// A screenshot written by `screenshot(_:)`.
    package struct Screenshot: Sendable {
        package var path: String
        package var width: Int
        package var height: Int
    }

    /// The profile, the driver's log and chromedriver's: removed by `close()`.
    package let temporaryDirectory: String
    /// The driver's process group (its pid): Chromium and chromedriver are in it.
    package let processGroup: pid_t
    private let process: ChildProcess
    private var toDriver: Int32
    private var fromDriver: Int32
    private var pending: [UInt8] = []
    private var closed = false
    private var logPath: String { temporaryDirectory + "/driver.log" }

    /// Where screenshots go: `.build/test-artifacts` in the repository.
    package static let artifacts = repositoryRoot.appendingPathComponent(".build/test-artifacts").path

    /// Starts Chromium (in `namespace` when given) with a 1280x800
    /// viewport. TLS: certificates are checked as usual, except that those
    /// of `trusting` (PEM files) are accepted for their public key, and
    /// every error is ignored with `ignoreCertificateErrors`.
    /// `hostResolverRules` is Chromium's `--host-resolver-rules` (`MAP
    /// rebind.attacker.test 127.0.0.1`: that name resolves to that address,
    /// as a DNS rebinding attacker's would).
    package init(
        in namespace: TestNamespace? = nil, trusting certificates: [String] = [], ignoreCertificateErrors: Bool = false,
        hostResolverRules: String? = nil
    ) throws {
        _ = ignoreSIGPIPE
        temporaryDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-browser-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: temporaryDirectory, withIntermediateDirectories: true)
        var descriptors: [Int32] = []
        defer { descriptors.forEach { Glibc.close($0) } }
        do {
            var arguments = [
                repositoryRoot.appendingPathComponent("scripts/browser-driver").path, "--user-data-dir", temporaryDirectory + "/profile",
                "--chromedriver-log", temporaryDirectory + "/chromedriver.log",
            ]
            for certificate in certificates { arguments += ["--trust-spki", try Self.publicKeyHash(certificate)] }
            if ignoreCertificateErrors { arguments.append("--ignore-certificate-errors") }
            if let hostResolverRules { arguments += ["--host-resolver-rules", hostResolverRules] }
            if let namespace { arguments = ["ip", "netns", "exec", namespace.name] + arguments }
            func pipePair() throws -> (read: Int32, write: Int32) {
                let pipe = try closeOnExecPipe()
                descriptors += [pipe.read, pipe.write]
                return pipe
            }
            let input = try pipePair(), output = try pipePair()
            let log = open(temporaryDirectory + "/driver.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard log >= 0 else { throw TestFailure("cannot create the driver's log: \(String(cString: strerror(errno)))") }
            descriptors.append(log)
            process = try ChildProcess(arguments, stdin: input.read, stdout: output.write, stderr: log)
            processGroup = process.processIdentifier
            // Ours to keep: the driver's ends are closed here, so that its
            // exit is an end of file.
            toDriver = input.write
            fromDriver = output.read
            descriptors.removeAll { $0 == input.write || $0 == output.read }
            descriptors.forEach { Glibc.close($0) }
            descriptors = []
        } catch {
            try? FileManager.default.removeItem(atPath: temporaryDirectory)
            throw error
        }
        do {
            let ready: String = try readReply(what: "Chromium to start", timeout: 90)
            guard ready == "ready" else { throw TestFailure("the browser driver said \(ready) instead of ready") }
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Quits Chromium, kills what is left of the driver's process group and
    /// removes the temporary folder. Safe to call twice.
    package func close() {
        guard !closed else { return }
        closed = true
        if process.isRunning, (try? send(["cmd": "quit"])) != nil {
            _ = process.wait(timeout: 20)
        }
        Glibc.close(toDriver)
        Glibc.close(fromDriver)
        // Whatever quitting left (or all of it, when the driver hung).
        kill(-processGroup, SIGKILL)
        process.forceStop()
        let deadline = Date().addingTimeInterval(10)
        while !Self.livingMembers(of: processGroup).isEmpty, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        try? FileManager.default.removeItem(atPath: temporaryDirectory)
    }

    /// The processes of group `group` that are not zombies.
    package static func livingMembers(of group: pid_t) -> [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { return nil }
            // After "(comm)": state, ppid, pgrp.
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            guard fields.count > 2, fields[0] != "Z", fields[0] != "X", pid_t(fields[2]) == group else { return nil }
            return pid
        }
    }

    /// Sets the viewport to exactly `width` by `height` CSS pixels (a
    /// device metrics override: a headless window is at least 500 wide),
    /// for this page and the next ones; throws unless `window.innerWidth`
    /// and `innerHeight` then say so.
    package func setViewport(width: Int, height: Int) throws {
        let size: [Int] = try command(["cmd": "viewport", "width": width, "height": height], what: "the viewport")
        guard size == [width, height] else { throw TestFailure("asked for a \(width)x\(height) viewport, the page has \(size)") }
    }

    /// Sends `headers` with every request from now on (subresources too).
    package func setHeaders(_ headers: [String: String]) throws {
        let _: String? = try command(["cmd": "headers", "headers": headers], what: "the headers")
    }

    /// HTTP basic auth for every request: an `Authorization` header (URLs
    /// with user:password@ do not reach subresources reliably).
    package func authenticate(user: String, password: String) throws {
        try setHeaders(["Authorization": "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()])
    }

    /// Loads `url` and waits for its load event (60 s at most); returns the
    /// URL the browser ended on. Throws, with what it says, when Chromium
    /// shows its error page instead (a refused certificate, a 401 without
    /// the right credentials, no server).
    @discardableResult
    package func load(_ url: String) throws -> String {
        struct Loaded: Decodable { var url: String }
        let loaded: Loaded = try command(["cmd": "load", "url": url], what: "loading \(url)", timeout: 90)
        return loaded.url
    }

    /// The value of the JavaScript `expression` in the page (a promise is
    /// awaited), decoded from its JSON; throws with the exception it threw.
    package func evaluate<T: Decodable>(_ expression: String, as type: T.Type = T.self) throws -> T {
        try command(["cmd": "evaluate", "expression": expression], what: "evaluating \(expression)")
    }

    /// Waits until the JavaScript `expression` is truthy, evaluating it
    /// every 50 ms for up to `timeout` seconds; throws with its last value
    /// or exception when it never was.
    package func waitUntil(_ expression: String, timeout: Double = 60) throws {
        BlockingTrait.expectLane("Waiting for \(expression)")
        let _: JSONAny = try command(
            ["cmd": "wait", "expression": expression, "timeout": timeout], what: "waiting for \(expression)", timeout: timeout + 30)
    }

    /// Every problem since the browser started, in order: console errors,
    /// uncaught exceptions, failed loads and dialogs. Not the failure of
    /// the /favicon.ico Chromium asks every origin for by itself.
    package func problems() throws -> [BrowserProblem] {
        try command(["cmd": "problems"], what: "the problems")
    }

    /// Throws, listing them, when the page had any problem.
    package func expectNoProblems() throws {
        let problems = try problems()
        if !problems.isEmpty {
            throw TestFailure("the page had \(problems.count) problem(s):\n" + problems.map { "  \($0)" }.joined(separator: "\n"))
        }
    }

    /// The viewport's width and the document's (scrollWidth): the page
    /// scrolls sideways when the second is the larger.
    package func widths() throws -> Widths {
        try evaluate("({innerWidth: window.innerWidth, scrollWidth: document.documentElement.scrollWidth})")
    }

    /// Saves the viewport as a PNG in `.build/test-artifacts`, named after
    /// the running test and `label` (`Suite.test-label.png`); returns
    /// where and its size.
    package func screenshot(_ label: String) throws -> Screenshot {
        try FileManager.default.createDirectory(atPath: Self.artifacts, withIntermediateDirectories: true)
        #if canImport(Testing)
        let test = Test.current.map { $0.id.nameComponents.joined(separator: ".").replacingOccurrences(of: "()", with: "") } ?? "browser"
        #else
        let test = "browser"
        #endif
        let name = (test + "-" + label).map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" }
        let path = Self.artifacts + "/" + String(name) + ".png"
        let size: [Int] = try command(["cmd": "screenshot", "path": path], what: "the screenshot")
        guard size.count == 2 else { throw TestFailure("the screenshot's size: \(size)") }
        return Screenshot(path: path, width: size[0], height: size[1])
    }

    // MARK: The driver's protocol

    /// Any JSON value, read and dropped.
    private struct JSONAny: Decodable {
        init(from decoder: Decoder) throws {}
    }

    private struct Envelope: Decodable {
        var ok: Bool
        var error: String?
    }

    private struct Value<T: Decodable>: Decodable {
        var value: T
    }

    private func send(_ message: [String: Any]) throws {
        var line = try JSONSerialization.data(withJSONObject: message)
        line.append(10)
        try line.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = write(toDriver, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { throw TestFailure("the browser driver is gone: \(String(cString: strerror(errno)))\(logTail)") }
                offset += n
            }
        }
    }

    private func command<T: Decodable>(_ message: [String: Any], what: String, timeout: Double = 60) throws -> T {
        guard !closed else { throw TestFailure("\(what): the browser is closed") }
        BlockingTrait.expectLane(what)
        try send(message)
        return try readReply(what: what, timeout: timeout)
    }

    /// The next reply line, decoded; throws with its error, or with the
    /// driver's log when it does not answer within `timeout` seconds.
    private func readReply<T: Decodable>(what: String, timeout: Double) throws -> T {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let newline = pending.firstIndex(of: 10) {
                let line = Data(pending[..<newline])
                pending.removeSubrange(...newline)
                let envelope = try JSONDecoder().decode(Envelope.self, from: line)
                guard envelope.ok else { throw TestFailure("\(what): \(envelope.error ?? "failed")") }
                do {
                    return try JSONDecoder().decode(Value<T>.self, from: line).value
                } catch {
                    throw TestFailure("\(what): cannot decode \(String(decoding: line, as: UTF8.self)) as \(T.self): \(error)")
                }
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw TestFailure("\(what): the browser driver did not answer within \(Int(timeout)) s\(logTail)") }
            var entry = pollfd(fd: fromDriver, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, Int32(min(left, 1) * 1000))
            if ready < 0, errno != EINTR { throw TestFailure("poll: \(String(cString: strerror(errno)))") }
            guard ready > 0 else { continue }
            let n = read(fromDriver, &buffer, buffer.count)
            if n > 0 {
                pending.append(contentsOf: buffer[..<n])
            } else if n == 0 || errno != EINTR {
                throw TestFailure("\(what): the browser driver exited\(logTail)")
            }
        }
    }

    /// The end of the driver's stderr and of chromedriver's log, for messages.
    private var logTail: String {
        var tail = ""
        for (name, path) in [("its log", logPath), ("chromedriver's", temporaryDirectory + "/chromedriver.log")] {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if !text.isEmpty { tail += "; \(name) ends: " + String(text.suffix(2000)) }
        }
        return tail
    }

    /// The base64 SHA-256 of a PEM certificate's public key (what
    /// Chromium's --ignore-certificate-errors-spki-list takes), by openssl.
    static func publicKeyHash(_ certificate: String) throws -> String {
        let key = try run(["openssl", "x509", "-in", certificate, "-noout", "-pubkey"]).out
        let der = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-spki-\(UUID().uuidString).der").path
        defer { try? FileManager.default.removeItem(atPath: der) }
        try run(["openssl", "pkey", "-pubin", "-outform", "der", "-out", der], input: key)
        let digest = try run(["openssl", "dgst", "-sha256", "-hex", der]).out
        guard let hex = digest.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines), hex.count == 64 else {
            throw TestFailure("openssl dgst said \(digest)")
        }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { throw TestFailure("openssl dgst said \(digest)") }
            bytes.append(byte)
            index = next
        }
        return Data(bytes).base64EncodedString()
    }
}
