import Foundation
import IfmeterServe
import IfmeterTestSupport
import Testing

/// The gzip of a render, given in pieces: whatever room it is told to
/// expect (none, a few bytes, too little, about right, far too much), the
/// output is the same valid gzip of the whole, and keeps no room beyond its
/// size. (Under 4 bytes, growing by a quarter grew by nothing: it hung.)
@Suite(.blocking) struct GzipWriterTests {
    /// Exposition-like text: 3000 lines of 60 to 90 bytes.
    private let text: [UInt8] = Array(
        (0..<3000).map { "ifmeter_interface_receive_bytes_total{interface=\"veth\($0)\",kind=\"virtual\"} \($0 * 7919)\n" }
            .joined().utf8)

    private func gunzip(_ bytes: [UInt8]) throws -> [UInt8] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-gzip-\(getpid())-\(UUID().uuidString).gz").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return Array(try run(["gzip", "-dc", path]).out.utf8)
    }

    @Test(arguments: [0, 1, 3, 100, 8 * 1024, 40 * 1024, 4 << 20])
    func anyExpectedSizeGivesTheSameWhole(expected: Int) throws {
        let writer = try #require(GzipWriter(expectedSize: expected))
        var offset = 0
        while offset < text.count {
            let end = min(offset + 4096, text.count)
            text[offset..<end].withUnsafeBytes { writer.write($0) }
            offset = end
        }
        let body = try #require(writer.finish())
        #expect(writer.inputBytes == UInt64(text.count))
        #expect(body.count < text.count / 5, "\(body.count) bytes for \(text.count)")
        #expect(try gunzip(body.bytes) == text)
        #expect(mallocUsableSize(body.base) < body.count + 4096, "cut to its size, whatever room it was given")
    }
}
