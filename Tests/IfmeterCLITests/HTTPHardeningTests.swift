import Foundation
import IfmeterCore
import IfmeterSampling
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Sends `bytes` on a fresh connection and reads until the server closes
/// it (or `timeout` seconds pass): the status of every response in what
/// came back, and whether the server closed the connection.
func exchange(_ bytes: String, port: UInt16, in ns: TestNamespace, timeout: Double = 2) throws -> (statuses: [Int], closed: Bool, text: String) {
    let fd = try RawHTTP.connect("127.0.0.1", port, in: ns.name, timeout: 1)
    defer { close(fd) }
    try RawHTTP.send(fd, bytes)
    var data: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    var closed = false
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 100) > 0 else { continue }
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 {
            closed = true
            break
        }
        data += buffer[..<n]
    }
    let text = String(decoding: data, as: UTF8.self)
    // Status lines: "HTTP/1.1 NNN" at the start or after a response's end.
    var statuses: [Int] = []
    var rest = text[...]
    while let range = rest.range(of: "HTTP/1.1 ") {
        let code = rest[range.upperBound...].prefix(3)
        if let status = Int(code), range.lowerBound == rest.startIndex || rest[..<range.lowerBound].hasSuffix("\n") {
            statuses.append(status)
        }
        rest = rest[range.upperBound...]
    }
    return (statuses, closed, text)
}

/// Requests whose body length two parsers could read differently (RFC
/// 9112 §6.3) are refused with 400 and the connection closed, so a second
/// request hidden in the first one's bytes is never answered.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized)
struct HTTPSmugglingTests {
    static let port: UInt16 = 9876
    static let smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

    @Test func ambiguousBodyLengthsAre400AndClose() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let server = try startServe(in: ns, port: Self.port, ["--listen", "127.0.0.1:\(Self.port)"])
        defer { server.stop() }
        let cases: [(String, String)] = [
            ("Content-Length and Transfer-Encoding", "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + Self.smuggled),
            ("Transfer-Encoding and Content-Length", "GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n" + Self.smuggled),
            ("two Content-Length values", "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 36\r\n\r\n" + Self.smuggled),
            ("a Transfer-Encoding other than chunked", "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + Self.smuggled),
            ("Transfer-Encoding twice", "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + Self.smuggled),
            ("Transfer-Encoding in HTTP/1.0", "POST /metrics HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + Self.smuggled),
        ]
        for (what, bytes) in cases {
            let result = try exchange(bytes, port: Self.port, in: ns)
            #expect(result.statuses == [400] && result.closed, "\(what): \(result.statuses), closed: \(result.closed): \(result.text.prefix(300).debugDescription)")
            #expect(!result.text.contains("404"), "\(what): the smuggled request was answered")
        }
        // What is not ambiguous is served as before: the same length twice,
        // a chunked body alone, and pipelined requests on one connection.
        let same = try exchange("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", port: Self.port, in: ns)
        #expect(same.statuses == [200], "the same Content-Length twice: \(same.statuses)")
        let chunked = try exchange("POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n", port: Self.port, in: ns)
        #expect(chunked.statuses == [405], "a chunked body alone: \(chunked.statuses)")
        let pipelined = try exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", port: Self.port, in: ns)
        #expect(pipelined.statuses == [200, 404] && pipelined.closed, "two pipelined requests: \(pipelined.statuses)")
        #expect(server.process.isRunning)
    }
}
