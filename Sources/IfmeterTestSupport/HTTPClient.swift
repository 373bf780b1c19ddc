import Foundation
import IfmeterSampling

#if canImport(Glibc)
import Glibc
#endif
import IfmeterSystem

/// A response as the tests read it.
package struct HTTPResult: Sendable {
    package var status: Int
    /// Header names in lower case.
    package var headers: [String: String]
    package var body: [UInt8]
    package var text: String { String(decoding: body, as: UTF8.self) }
}

/// A minimal HTTP/1.1 client on a raw socket, inside a namespace when
/// given one, so tests can also send what no well-behaved client would.
package enum RawHTTP {
    /// Connects to `host:port` (inside `namespace`; from the IPv4 address
    /// `source` when given, so that many connections need not share one
    /// client address), returns the socket.
    package static func connect(
        _ host: String, _ port: UInt16, in namespace: String?, from source: String? = nil, timeout: Double = 5
    ) throws -> Int32 {
        let open = { () throws -> Int32 in
            let v6 = host.contains(":")
            let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
            var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            let rc: Int32
            if v6 {
                var addr = sockaddr_in6()
                addr.sin6_family = sa_family_t(AF_INET6)
                addr.sin6_port = port.bigEndian
                inet_pton(AF_INET6, host, &addr.sin6_addr)
                rc = withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
                }
            } else {
                if let source {
                    var from = sockaddrIn(source, 0)
                    let bound = withUnsafePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                    }
                    guard bound == 0 else {
                        let message = String(cString: strerror(errno))
                        close(fd)
                        throw TestFailure("bind \(source): \(message)")
                    }
                }
                var addr = sockaddrIn(host, port)
                rc = withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
            }
            guard rc == 0 else {
                let message = String(cString: strerror(errno))
                close(fd)
                throw TestFailure("connect \(host):\(port): \(message)")
            }
            return fd
        }
        if let namespace { return try NetworkNamespace.perform(in: namespace, open) }
        return try open()
    }

    package static func send(_ fd: Int32, _ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// Reads one response: by Content-Length, chunked, or to the end of
    /// the stream.
    package static func read(_ fd: Int32) throws -> HTTPResult {
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        var headerEnd: Int?
        var length: Int?
        var chunked = false
        while true {
            if let end = headerEnd {
                if let length, data.count >= end + length { break }
                if chunked, dechunk(Array(data[end...])) != nil { break }
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n < 0 { throw TestFailure("recv: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            data.append(contentsOf: chunk[..<n])
            if headerEnd == nil, let range = find([13, 10, 13, 10], in: data) {
                headerEnd = range + 4
                let head = String(decoding: data[..<range], as: UTF8.self)
                for line in head.split(separator: "\r\n").dropFirst() {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    guard parts.count == 2 else { continue }
                    let value = parts[1].trimmingCharacters(in: .whitespaces)
                    if parts[0].lowercased() == "content-length" { length = Int(value) }
                    if parts[0].lowercased() == "transfer-encoding", value.lowercased() == "chunked" { chunked = true }
                }
            }
        }
        guard let end = headerEnd else {
            throw TestFailure("no complete response (\(data.count) bytes: \(String(decoding: data.prefix(200), as: UTF8.self)))")
        }
        let head = String(decoding: data[..<(end - 4)], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        let rest = Array(data[end...])
        let body = chunked ? (dechunk(rest) ?? rest) : Array(rest.prefix(length ?? rest.count))
        return HTTPResult(status: status, headers: headers, body: body)
    }

    /// The body of a complete chunked transfer, or nil while incomplete.
    static func dechunk(_ data: [UInt8]) -> [UInt8]? {
        var body: [UInt8] = []
        var i = 0
        while true {
            guard let lineEnd = find([13, 10], in: Array(data[i...])).map({ $0 + i }) else { return nil }
            let sizeText = String(decoding: data[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText, radix: 16) else { return nil }
            let start = lineEnd + 2
            if size == 0 { return body }
            guard data.count >= start + size + 2 else { return nil }
            body.append(contentsOf: data[start..<(start + size)])
            i = start + size + 2
        }
    }

    /// GET (or another method) with `Connection: close`. `timeout`: how
    /// long a send or a read may wait (a test that only needs the answer,
    /// however slow, gives a generous one).
    package static func request(
        _ path: String, method: String = "GET", host: String = "127.0.0.1", port: UInt16, in namespace: String?,
        headers: [String: String] = [:], timeout: Double = 5
    ) throws -> HTTPResult {
        let fd = try connect(host, port, in: namespace, timeout: timeout)
        defer { close(fd) }
        var text = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        try send(fd, text)
        return try read(fd)
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<(i + needle.count)]) == needle { return i }
        }
        return nil
    }
}

/// A background process the test started (ifmeter serve, prometheus, ...),
/// terminated when the value goes away.
package final class Background: Sendable {
    package let process: ChildProcess
    package let stderrPath: String
    /// What it is, in its log's file name and in failures.
    package let name: String

    package init(_ arguments: [String], name: String) throws {
        self.name = name
        stderrPath = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-\(name)-\(UUID().uuidString).log").path
        let log = open(stderrPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw TestFailure("cannot create \(stderrPath): \(String(cString: strerror(errno)))") }
        defer { close(log) }
        process = try ChildProcess(arguments, stdout: log, stderr: log)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: stderrPath)
    }

    package var log: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// SIGTERM, then SIGKILL after `grace` seconds; returns the exit status.
    /// The grace is generous: a clean stop (a last save) on a busy machine
    /// can take seconds, and a healthy process is gone long before.
    @discardableResult
    package func stop(grace: Double = 60) -> Int32 {
        process.signal(SIGTERM)
        process.waitUntilExit(timeout: grace)
        return process.terminationStatus
    }

    /// For a `waitFor` body: ends the wait at once when it has exited (what
    /// is waited for can no longer come), with its log.
    package func requireRunning() throws {
        guard process.isRunning else { throw WaitAborted("\(name) exited: \(log)") }
    }

    /// Resident memory in KiB (VmRSS), while it runs.
    package var residentKiB: Int? {
        process.whileRunning { pid -> Int? in
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
            for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
                return Int(line.split(separator: " ").dropFirst().first ?? "")
            }
            return nil
        }
    }
}

/// Thrown from inside a `waitFor` body when what is waited for can no
/// longer happen (the process that would do it exited): the wait ends at
/// once instead of at its deadline. Any other error means "not yet".
package struct WaitAborted: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Polls until `body` returns a value, or fails after `timeout` seconds.
/// The default is generous on purpose: a deadline only decides how long a
/// broken test takes to fail, and a short one failed a sound test when the
/// machine was busy (a plan that showed on /metrics after more than 10 s
/// while a release build and another test run shared both cores). `body`
/// runs every `every` seconds; what it throws counts as "not yet" (the
/// last error is in the failure), but `WaitAborted`, which fails at once.
package func waitFor<T>(_ what: String, timeout: Double = 60, every: Double = 0.1, _ body: () throws -> T?) throws -> T {
    BlockingTrait.expectLane("Waiting for \(what)")
    let deadline = Date().addingTimeInterval(timeout)
    var lastError: Error?
    while Date() < deadline {
        do {
            if let value = try body() { return value }
        } catch let error as WaitAborted {
            throw TestFailure("waiting for \(what): \(error)")
        } catch {
            lastError = error
        }
        Thread.sleep(forTimeInterval: every)
    }
    throw TestFailure("timed out waiting for \(what)\(lastError.map { ": \($0)" } ?? "")")
}

/// `startServe` listening on 127.0.0.1:`port` only, in `ns` (plus
/// `extra`): what a browser in the namespace opens.
package func startLoopbackServe(in ns: TestNamespace, port: UInt16, _ extra: [String] = []) throws -> Background {
    try startServe(in: ns, port: port, ["--listen", "127.0.0.1:\(port)"] + extra)
}

/// Starts `ifmeter serve` in `ns` (every `interval`, plus `extra`; with
/// `environment` set, its log named `name`; run by `wrapper`, a command
/// that ends by running its arguments, when given) and waits until it
/// says it listens on `port`. serve says so after its first sample, once
/// its socket answers: plain HTTP or TLS, with or without basic auth.
package func startServe(
    in ns: TestNamespace, port: UInt16 = 9874, interval: String = "300ms", environment: [String: String] = [:],
    name: String = "serve", wrapper: [String] = [], _ extra: [String] = []
) throws -> Background {
    let env = environment.isEmpty ? [] : ["env"] + environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    let server = try Background(
        ["ip", "netns", "exec", ns.name] + env + wrapper + [try ifmeterBinary(), "serve", "--interval", interval] + extra, name: name)
    _ = try waitFor("ifmeter serve to listen on port \(port)") { () throws -> Bool? in
        try server.requireRunning()
        let said = server.log.split(separator: "\n").contains { $0.contains("listening on http") && $0.contains(":\(port)/metrics") }
        return said ? true : nil
    }
    return server
}
