import IfmeterSystem
import Synchronization
import Testing

/// The one logger: lines held back by where they are said, never by
/// their words, on a clock the test moves (issue 46).
@Suite struct LogTests {
    final class Captured: Sendable {
        let lines = Mutex<[String]>([])
        let now = Mutex<Double>(100)
        var all: [String] { lines.withLock { $0 } }
        func advance(_ seconds: Double) { now.withLock { $0 += seconds } }
    }

    func log(_ captured: Captured, minimum: LogLevel = .info, burst: Int = 1) -> Log {
        Log(prefix: "ifmeter serve: ", minimum: minimum, every: 10, burst: burst, clock: { captured.now.withLock { $0 } }) { line in
            captured.lines.withLock { $0.append(line) }
        }
    }

    @Test func linesOfOneSiteAreHeldBackWhateverTheirWords() {
        let captured = Captured()
        let log = log(captured)
        // One place in the code, whatever each line's words.
        func refuse(_ peer: Int, _ why: String) { log.warning("refused a request from 10.0.0.\(peer): \(why)") }
        for n in 0..<5 { refuse(n, n == 3 ? "another reason" : "too many") }
        #expect(captured.all == ["ifmeter serve: refused a request from 10.0.0.0: too many"])
        captured.advance(9.5)
        refuse(8, "too many")
        #expect(captured.all.count == 1, "still within 10 s")
        captured.advance(0.5)
        refuse(9, "too many")
        #expect(captured.all.last == "ifmeter serve: refused a request from 10.0.0.9: too many (and 5 more messages like it in the last 10 s)")
    }

    @Test func twoSitesNeverHideEachOther() {
        let captured = Captured()
        let log = log(captured)
        for _ in 0..<3 {
            log.warning("the same words")
            log.warning("the same words")
        }
        #expect(captured.all == ["ifmeter serve: the same words", "ifmeter serve: the same words"])
    }

    @Test func aBurstIsWrittenThenHeld() {
        let captured = Captured()
        let log = log(captured, burst: 3)
        for n in 0..<5 { log.info("reloaded \(n)") }
        #expect(captured.all == ["ifmeter serve: reloaded 0", "ifmeter serve: reloaded 1", "ifmeter serve: reloaded 2"])
    }

    @Test func linesBelowTheMinimumAreDroppedUnbuilt() {
        let captured = Captured()
        let log = log(captured, minimum: .warning)
        let built = Mutex(0)
        func words() -> String {
            built.withLock { $0 += 1 }
            return "detail"
        }
        log.debug(words())
        log.info(words())
        log.error("kept")
        #expect(captured.all == ["ifmeter serve: kept"])
        #expect(built.withLock { $0 } == 0, "a dropped line's words are never made")
    }

    @Test func manySitesShareOneEntryPastTheLimit() {
        let captured = Captured()
        let log = log(captured)
        for n in 0..<100 { log.write(.info, "site \(n)", site: LogSite(file: "F.swift", line: UInt(n))) }
        #expect(captured.all.count == 65, "64 sites of their own and one shared: \(captured.all.count)")
    }

    /// `Log.everyLine` (state saves, export: said once per change
    /// already) holds nothing back, however close its lines.
    @Test func everyLineHoldsNothingBack() {
        let lines = Mutex<[String]>([])
        let log = Log.everyLine(prefix: "ifmeter export: ") { line in lines.withLock { $0.append(line) } }
        for n in 0..<3 { log.warning("writing the textfile failed \(n)") }
        #expect(lines.withLock { $0 }.count == 3)
    }

    /// `separate()`: the same sites, counted apart (one writer per
    /// receiver), with the same prefix, limits and clock.
    @Test func aSeparateLogCountsItsSitesApart() {
        let captured = Captured()
        let log = log(captured)
        let other = log.separate()
        // One call site, as a writer's.
        func fail(_ log: Log) { log.warning("remote write failed") }
        for target in [log, other, log, other] { fail(target) }
        #expect(captured.all == ["ifmeter serve: remote write failed", "ifmeter serve: remote write failed"])
        captured.advance(10)
        fail(other)
        #expect(captured.all.last == "ifmeter serve: remote write failed (and 1 more messages like it in the last 10 s)")
    }
}
