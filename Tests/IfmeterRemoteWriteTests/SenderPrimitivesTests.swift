import IfmeterRemoteWrite
import IfmeterSystem
import Testing

/// The sender's parts that are neither the queue nor IfmeterSystem's
/// thread and condition (ThreadPrimitivesTests in IfmeterSystemTests):
/// what a response's headers and body come to.
@Suite struct SenderPrimitivesTests {
    static func header(_ text: String, now: Double = 1000, date: [UInt8]? = nil, when: Int64? = nil) -> Double? {
        var reader = ResponseReader()
        reader.header(Array(text.utf8), now: { now }) { value in
            if let date { #expect(value == date) }
            return when
        }
        return reader.retryAfter
    }

    @Test func retryAfterIsSecondsOrAnHTTPDateAndOtherHeadersAreIgnored() {
        #expect(Self.header("Retry-After: 120\r\n") == 120)
        #expect(Self.header("retry-after:\t 7.5 \r\n") == 7.5, "any case, blanks trimmed, fractions kept")
        #expect(Self.header("RETRY-AFTER:0\r\n") == 0)
        #expect(Self.header("Retry-After: 1e3\r\n") == 1000, "strtod's syntax")
        #expect(Self.header("Content-Type: text/plain\r\n") == nil)
        #expect(Self.header("Retry-After:") == nil, "no value at all")
        // Not a number: an HTTP date, from now (whole seconds), never negative.
        let date = "Wed, 21 Oct 2015 07:28:00 GMT"
        #expect(Self.header("Retry-After: \(date)\r\n", now: 1000.9, date: Array(date.utf8), when: 1030) == 30)
        #expect(Self.header("Retry-After: \(date)\r\n", now: 2000, when: 1030) == 0, "a date past is now")
        #expect(Self.header("Retry-After: -3\r\n", date: Array("-3".utf8), when: nil) == nil, "a negative number is no date either")
        #expect(Self.header("Retry-After: soon\r\n", when: nil) == nil)
        // The last one wins (redirects bring several).
        var reader = ResponseReader()
        reader.header(Array("Retry-After: 5\r\n".utf8), now: { 0 }) { _ in nil }
        reader.header(Array("Retry-After: 9\r\n".utf8), now: { 0 }) { _ in nil }
        #expect(reader.retryAfter == 9)
    }

    @Test func aBodyKeepsItsStartForTheLogAndIsStoppedPast64KiB() {
        var reader = ResponseReader()
        func take(_ chunk: [UInt8]) -> Bool { reader.body(chunk) }
        #expect(take(Array("bad sample: ".utf8)))
        #expect(take([UInt8](repeating: 0x61, count: 1000)))
        #expect(reader.text == "bad sample: " + String(repeating: "a", count: ResponseReader.kept - 12))
        #expect(!reader.bodyCut)
        // Up to the cap is read; a byte past it stops the transfer.
        #expect(take([UInt8](repeating: 0x62, count: ResponseReader.bodyCap - reader.bodyBytes)))
        #expect(!reader.bodyCut)
        #expect(!take([0x63]))
        #expect(reader.bodyCut)
        // A NUL ends what the log shows.
        var nul = ResponseReader()
        let read = nul.body(Array("ok".utf8) + [0] + Array("hidden".utf8))
        #expect(read)
        #expect(nul.text == "ok")
    }
}
