import Ifmeter
import IfmeterSystem
import Testing

/// Saved state: what restore refuses, and that a refusal leaves the meter
/// as it was. In this process's own namespace (no root needed): the
/// figures of these interfaces are not checked here, ArticleExampleTests
/// checks figures against bytes sent.
@Suite struct SavedStateTests {
    func refusal(_ meter: TrafficMeter, _ text: String) -> MeterError? {
        do {
            try meter.restore(text)
            return nil
        } catch {
            return error
        }
    }

    @Test func aStateGoesOnInTheSameBootAndIsGivenBackUntilTheFirstSample() throws {
        let first = try TrafficMeter()
        let empty = first.savedState()
        #expect(empty.contains("\"interfaces\":[]"), "nothing before the first sample")
        let reading = try first.sample()
        #expect(!reading.interfaces.isEmpty)
        let kept = first.savedState()
        for interface in reading.interfaces { #expect(kept.contains("\"name\":\"\(interface.name)\"")) }

        let next = try TrafficMeter()
        #expect(try next.restore(kept) == .sameBoot)
        // Saved again before a sample: the same text (it still names the
        // boot its counters belong to).
        #expect(next.savedState() == kept)
        #expect(refusal(next, kept) == .alreadyStarted, "one restore")
        let continued = try next.sample()
        for interface in continued.interfaces where interface.isPresent {
            #expect(interface.change != .baseline, "\(interface.name) goes on from its saved counters")
        }
        #expect(refusal(next, kept) == .alreadyStarted)
    }

    /// A state as a meter saves it, of one interface this machine lacks
    /// (`copies` times).
    static func handMade(boot: String, copies: Int = 1) -> String {
        let counters = #"{"rx_bytes":100,"rx_packets":3,"tx_bytes":200,"tx_packets":4}"#
        let entry =
            #"{"baseline":{"rx_bytes":0,"rx_packets":0,"tx_bytes":0,"tx_packets":0},"deleted_at":null,"events":{"deletions":0,"recreations":1,"resets":0,"wraps":0},"evidence":"name:en0","first_seen":0.5,"index":4,"kind":"wifi","last":\#(counters),"last_seen":1.0,"last_time":1.0,"name":"en0","quality":"exact","speed_bps":null,"totals":{"rx_bytes":10,"rx_packets":1,"tx_bytes":20,"tx_packets":2},"width":32}"#
        let entries = Array(repeating: entry, count: copies).joined(separator: ",")
        return #"{"boot":"\#(boot)","format":"ifmeter-meter-state/1","interfaces":[\#(entries)],"saved_at":1.0,"source":"getifaddrs"}"#
    }

    @Test func aRestoredInterfaceThatIsGoneKeepsItsTotals() throws {
        let boot = try #require(readBootID())
        let meter = try TrafficMeter()
        #expect(try meter.restore(Self.handMade(boot: boot)) == .sameBoot)
        let reading = try meter.sample()
        let en0 = try #require(reading["en0"], "a restored interface is in every reading")
        #expect(!en0.isPresent && en0.change == .absent && en0.change.note.isEmpty)
        #expect(en0.kind == .wifi && en0.kindEvidence == "name:en0" && en0.counterBits == 32)
        #expect(en0.sinceStart.receivedBytes == 10 && en0.sinceStart.sentBytes == 20 && en0.sinceStart.quality == .exact)
        #expect(en0.sinceLastSample.receivedBytes == 0 && en0.seconds == nil)
        #expect(en0.events.recreations == 1)
        // Saved again after a sample: written as it was read.
        let again = meter.savedState()
        #expect(
            again.contains(
                #""name":"en0","quality":"exact","speed_bps":null,"totals":{"rx_bytes":10,"rx_packets":1,"tx_bytes":20,"tx_packets":2},"width":32}"#))
    }

    @Test func whatRestoreRefusesLeavesTheMeterFresh() throws {
        let boot = try #require(readBootID())
        let good = Self.handMade(boot: boot)
        let meter = try TrafficMeter()
        func changed(_ from: String, _ to: String) -> String {
            precondition(good.contains(from))
            return good.replacingOccurrences(of: from, with: to)
        }
        let at = "interfaces[0] (\"en0\"): "
        let cases: [(String, MeterError)] = [
            ("", .invalidState("not JSON: unexpected end of JSON at byte 1")),
            ("[]", .invalidState("not a meter's saved state (\"format\" is not \"ifmeter-meter-state/1\")")),
            (
                changed("\"source\":\"getifaddrs\"", "\"source\":\"netlink\""),
                .invalidState("saved by the netlink source; this meter reads getifaddrs")
            ),
            (changed("\"boot\":\"\(boot)\"", "\"boot\":null"), .unknownBoot),
            (
                changed("\"quality\":\"exact\"", "\"quality\":\"good\""),
                .invalidState(at + "\"quality\" must be exact, wrap-corrected or lower-bound")
            ),
            (changed("\"width\":32", "\"width\":16"), .invalidState(at + "\"width\" must be 32 or 64")),
            (
                changed("\"index\":4", "\"index\":2147483648"),
                .invalidState(at + "\"index\" must be an interface index from 0 to 2147483647 or null")
            ),
            (
                changed("\"recreations\":1", "\"recreations\":4294967296"),
                .invalidState(at + "events \"recreations\" must be a count from 0 to 4294967295")
            ),
            (
                changed("\"totals\":{\"rx_bytes\":10", "\"totals\":{\"rx_bytes\":-4"),
                .invalidState(at + "totals: \"rx_bytes\" must be an unsigned integer up to 2^64-1")
            ),
            (changed("\"last_time\":1.0", "\"last_time\":1e13"), .invalidState(at + "last_time must be a time in seconds within ±1e12")),
            (Self.handMade(boot: boot, copies: 2), .invalidState("interfaces[1]: \"en0\" is saved twice")),
            (
                changed("\"saved_at\":1.0", "\"saved_at\":1e11"),
                .invalidState("saved at 100000000000.0 s of this boot, which is later than now")
            ),
        ]
        for (text, expected) in cases {
            let error = refusal(meter, text)
            if case .invalidState(let message) = expected, message.hasSuffix("later than now") {
                guard case .invalidState(let got)? = error else {
                    Issue.record("a save in this boot's future is refused, got \(String(describing: error))")
                    continue
                }
                #expect(got.hasPrefix(message))
            } else {
                #expect(error == expected)
            }
        }
        // None of those changed the meter: it still takes a good state.
        #expect(try meter.restore(good) == .sameBoot)
    }

    @Test func aRefusedStateStartsTheMeterAfresh() throws {
        let meter = try TrafficMeter()
        #expect(refusal(meter, "{\"format\":1}") != nil)
        #expect(refusal(meter, Self.handMade(boot: "another boot").replacingOccurrences(of: "\"width\":32", with: "\"width\":8")) != nil)
        let reading = try meter.sample()
        #expect(reading.interfaces.allSatisfy { $0.change == .baseline && $0.sinceStart.receivedBytes == 0 })
    }

    @Test func argumentsOutOfRangeAreRefused() {
        for rate in [0, -1, Double.infinity, Double.nan] {
            #expect(throws: MeterError.invalidArgument("maxBitsPerSecond must be a finite rate of at least 1 bit/s")) {
                _ = try TrafficMeter(maxBitsPerSecond: rate)
            }
        }
    }
}
