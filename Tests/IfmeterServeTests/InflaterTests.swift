import Testing

@testable import IfmeterServe

/// The inflater that sends a gzip render as plain text, block by block:
/// the text comes back whole, what it holds is counted for the send
/// budget, and a broken body is an error, not a short answer.
@Suite struct InflaterTests {
    private let text = Array((0..<2000).map { "ifmeter_interface_receive_bytes_total{interface=\"eth\($0)\"} \($0 * 31)\n" }.joined().utf8)

    private func render() throws -> HTTPBody {
        let writer = try #require(GzipWriter())
        text.withUnsafeBytes { writer.write($0) }
        return try #require(writer.finish())
    }

    @Test func givesBackTheTextInBlocks() throws {
        let inflater = try #require(Inflater(try render()))
        // Its state, zlib's (some 7 KB) and the 16 KiB window.
        #expect(inflater.heldBytes > 16 * 1024 + 7000)
        #expect(try inflater.readAll() == text)
    }

    @Test func aBrokenBodyIsAnError() throws {
        var bytes = try render().bytes
        bytes.removeLast(bytes.count / 2)
        let inflater = try #require(Inflater(HTTPBody(bytes)))
        var block = [UInt8](repeating: 0, count: 32 * 1024)
        var result: Int? = 1
        while let n = result, n > 0 {
            result = block.withUnsafeMutableBytes { inflater.read(into: $0.baseAddress!, max: $0.count) }
        }
        #expect(result == nil)
    }
}

extension Inflater {
    /// The whole text, read block by block as a client reads it.
    func readAll() throws -> [UInt8] {
        var out: [UInt8] = []
        var block = [UInt8](repeating: 0, count: 32 * 1024)
        while true {
            let n = try #require(block.withUnsafeMutableBytes { read(into: $0.baseAddress!, max: $0.count) })
            if n == 0 { return out }
            out += block[0..<n]
        }
    }
}
