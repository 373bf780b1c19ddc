import IfmeterRemoteWrite
import IfmeterSystem
import Testing

/// The sender's parts that are not the queue: IfmeterSystem's thread and
/// condition (what the sender sleeps on between pushes and retries) and
/// what a response's headers and body come to. No test waits on the clock:
/// waits end on a condition, with a deadline far past any load.
@Suite struct SenderPrimitivesTests {
    /// Far past any load; reached only when a test fails.
    static let deadline = 60.0

    @Test func aWakeEventSignalledBeforeTheWaitReturnsAtOnceAndClears() {
        let event = WakeEvent()
        #expect(!event.wait(0), "not signalled: a zero wait times out")
        event.signal()
        #expect(event.wait(Self.deadline), "signalled before the wait")
        #expect(!event.wait(0), "the wait cleared it")
        event.signal()
        event.signal()
        #expect(event.wait(0), "two signals are one wake-up")
        #expect(!event.wait(-1), "a negative wait is a zero one")
    }

    @Test func aThreadWaitingOnTheEventWakesWhenAnotherSignals() throws {
        let event = WakeEvent()
        // 0: not started; 1: waiting; 2: woke signalled; 3: timed out.
        let stage = ConditionLock(0)
        try startThread {
            stage.update { $0 = 1 }
            let woke = event.wait(Self.deadline)
            stage.update { $0 = woke ? 2 : 3 }
        }
        let started = stage.wait(seconds: Self.deadline, until: { $0 >= 1 }) { _, ready in ready }
        #expect(started)
        event.signal()
        let result = stage.wait(seconds: Self.deadline, until: { $0 >= 2 }) { value, _ in value }
        #expect(result == 2)
    }

    @Test func aConditionLockWaitEndsOnTheChangeOrAtItsTimeout() throws {
        let lock = ConditionLock([Int]())
        // Nothing changes: a short timeout ends the wait, not ready.
        let timedOut = lock.wait(seconds: 0.01, until: { !$0.isEmpty }) { _, ready in ready }
        #expect(!timedOut)
        // Four threads each add their number; the wait ends when all have.
        for n in 0..<4 { try startThread { lock.update { $0.append(n) } } }
        let all = lock.wait(seconds: Self.deadline, until: { $0.count == 4 }) { value, ready in ready ? value.sorted() : [] }
        #expect(all == [0, 1, 2, 3])
        // withLock changes without waking; the value is what it made.
        lock.withLock { $0 = [9] }
        #expect(lock.withLock { $0 } == [9])
    }

    // MARK: responses

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
