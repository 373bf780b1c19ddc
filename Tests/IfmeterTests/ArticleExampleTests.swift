// The code of the article "Counting an interface's traffic in an app"
// (Sources/Ifmeter/Ifmeter.docc/CountingInterfaceTraffic.md): each region
// between an `article-code` pair of lines is one of its code blocks, byte
// for byte, in order (`articleCodeIsTheTestedCode` checks it). The tests
// below run it on Linux, in network namespaces of their own with a veth
// named en0 and a tun named utun0, and check it against the bytes sent.

// article-code-begin
import Ifmeter

/// What many apps ship: the counter now minus the counter last time.
func naiveBytesSince(previous: UInt32, current: UInt32) -> Int64 {
    Int64(current) - Int64(previous)
}
// article-code-end

// article-code-begin
/// One line for each interface the app shows (Wi-Fi, cellular, VPN
/// tunnels): what it moved since the last look and since the meter
/// started, each figure marked when it is not exact; then the caveats.
func statusLines(_ reading: TrafficReading) -> [String] {
    var lines: [String] = []
    for interface in reading.interfaces
    where interface.name == "en0" || interface.name.hasPrefix("pdp_ip") || interface.name.hasPrefix("utun") {
        let last = interface.sinceLastSample, total = interface.sinceStart
        var line = "\(interface.name) (\(interface.kind.name)): "
        line += last.quality.marked("\(last.receivedBytes) B") + " in, "
        line += last.quality.marked("\(last.sentBytes) B") + " out; since start "
        line += total.quality.marked("\(total.receivedBytes) B") + " in, "
        line += total.quality.marked("\(total.sentBytes) B") + " out"
        if !interface.change.note.isEmpty { line += " [\(interface.change.note)]" }
        lines.append(line)
    }
    return lines + reading.caveats
}
// article-code-end

// article-code-begin
/// At launch: a meter that goes on from the state kept at the last
/// launch. A state it cannot use (unreadable, or a boot it cannot
/// identify) is left aside: the meter then starts afresh.
func openMeter(kept: String?) throws -> (meter: TrafficMeter, restored: RestoreOutcome?) {
    let meter = try TrafficMeter()
    guard let kept else { return (meter, nil) }
    return (meter, try? meter.restore(kept))
}

/// When the app leaves the foreground: a last sample, so that a reboot
/// before the next launch loses as little as can be, and the state to
/// keep (in UserDefaults, or a file) until then.
func stateToKeep(_ meter: TrafficMeter) throws -> String {
    _ = try meter.sample()
    return meter.savedState()
}
// article-code-end

// article-code-begin
/// Counters as wide as the platform gives: 64-bit through `sysctl` on
/// Apple platforms (the default there) or netlink on Linux, getifaddrs'
/// 32-bit ones where neither opens; and a line that says which.
func widestMeter() throws -> (meter: TrafficMeter, said: String) {
    var meter: TrafficMeter?
    for source in [TrafficMeter.Source.sysctl, .netlink] where meter == nil {
        meter = try? TrafficMeter(source: source)
    }
    let chosen = try meter ?? TrafficMeter(source: .getifaddrs)
    return (chosen, "\(chosen.source.rawValue): \(chosen.source.counterBits)-bit counters")
}
// article-code-end

import Foundation
import IfmeterSampling
import IfmeterSystem
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite(.blocking) struct ArticleCodeTests {
    /// The article's code blocks, in order.
    static func articleBlocks() throws -> [String] {
        let path = repositoryRoot.appendingPathComponent("Sources/Ifmeter/Ifmeter.docc/CountingInterfaceTraffic.md").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var blocks: [String] = [], current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else if current != nil {
                current!.append(line)
            }
        }
        if current != nil { throw TestFailure("an unclosed code block in \(path)") }
        return blocks
    }

    /// This file's regions of article code, in order.
    static func testedRegions() throws -> [String] {
        let text = try String(contentsOfFile: #filePath, encoding: .utf8)
        var regions: [String] = [], current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "// article-code-begin" {
                current = []
            } else if line == "// article-code-end" {
                regions.append(current!.joined(separator: "\n"))
                current = nil
            } else if current != nil {
                current!.append(line)
            }
        }
        return regions
    }

    @Test func articleCodeIsTheTestedCode() throws {
        let blocks = try Self.articleBlocks(), regions = try Self.testedRegions()
        #expect(regions.count == 4)
        #expect(blocks.count == regions.count, "every code block of the article is a region of this file, and back")
        for (n, (block, region)) in zip(blocks, regions).enumerated() {
            #expect(block == region, "article code block \(n + 1) differs from region \(n + 1) of ArticleExampleTests.swift")
        }
    }

    @Test func theNaiveSubtractionIsWrongAfterAWrapAndAReset() {
        // A 32-bit counter 296 bytes short of 4 GiB, then 500 bytes later.
        #expect(naiveBytesSince(previous: 4_294_967_000, current: 500) == -4_294_966_500, "796 bytes moved")
        // An interface recreated: its new counter starts again from 0.
        #expect(naiveBytesSince(previous: 1_000_000, current: 1_200) < 0)
    }
}

/// The article's code on real interfaces: a veth named en0 (its peer in a
/// second namespace) and a tun named utun0, in namespaces of the test's own.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct ArticleExampleTests {
    /// The namespaces, en0 (veth, 10.77.0.1) and utun0 (tun, up).
    final class Setup {
        let pair: VethPair
        var tun: Int32

        init() throws {
            pair = try VethPair(nameA: "en0", nameB: "peer0")
            tun = -1
            tun = try openTun()
        }

        deinit { if tun >= 0 { close(tun) } }

        var namespace: String { pair.a.name }

        func openTun() throws -> Int32 {
            let fd = try pair.a.openTun("utun0")
            try pair.a.ip("link", "set", "utun0", "up")
            return fd
        }

        /// Closes utun0 (which deletes it) and makes it again.
        func recreateTun() throws {
            close(tun)
            tun = -1
            tun = try openTun()
        }

        /// Bytes en0 counts as sent: `count` UDP datagrams of `payload`.
        func sendOnEn0(count: Int, payload: Int) throws -> UInt64 {
            try pair.sendUDP(count: count, payload: payload)
            return UInt64(count) * VethPair.frameBytes(payload: payload)
        }

        /// Bytes utun0 counts as received: `count` IPv4 packets written
        /// into it, of `payload` bytes of UDP data each.
        func receiveOnUtun0(count: Int, payload: Int) throws -> UInt64 {
            let packet = ipv4Packet(payload: payload)
            for _ in 0..<count {
                guard write(tun, packet, packet.count) == packet.count else {
                    throw TestFailure("write to utun0: \(String(cString: strerror(errno)))")
                }
            }
            return UInt64(count * packet.count)
        }

        /// Runs `body` in en0's namespace: getifaddrs opens its socket on
        /// each call, so a meter is made and sampled there.
        func inside<T>(_ body: () throws -> T) throws -> T {
            try NetworkNamespace.perform(in: namespace, body)
        }
    }

    static let estimate =
        "Estimates from interface counters: they include protocol overhead (headers, retransmissions) and are not per-app accounting."

    @Test func theArticleCountsWhatWasSentAndSaysWhatHappened() throws {
        try Netns.requireRoot()
        let setup = try Setup()
        let (meter, restored) = try setup.inside { try openMeter(kept: nil) }
        #expect(restored == nil)
        #expect(meter.source == .getifaddrs)

        let baseline = try setup.inside { try meter.sample() }
        #expect(baseline.secondsSinceLastSample == nil)
        #expect(
            statusLines(baseline) == [
                "en0 (virtual): 0 B in, 0 B out; since start 0 B in, 0 B out [baseline]",
                "utun0 (tunnel): 0 B in, 0 B out; since start 0 B in, 0 B out [baseline]",
                Self.estimate,
            ])
        // On Linux the kinds are the kernel's: a veth named en0 is no Wi-Fi.
        let en0 = try #require(baseline["en0"])
        #expect(en0.kind == .virtual && en0.kindEvidence == "link-kind:veth" && en0.counterBits == 32)
        #expect(baseline["utun0"]?.kind == .tunnel && baseline["utun0"]?.kindEvidence == "link-kind:tun")

        let sent = try setup.sendOnEn0(count: 200, payload: 1000)
        let received = try setup.receiveOnUtun0(count: 10, payload: 100)
        #expect(sent == 200 * 1042 && received == 10 * 128)
        let second = try setup.inside { try meter.sample() }
        #expect(
            statusLines(second) == [
                "en0 (virtual): 0 B in, \(sent) B out; since start 0 B in, \(sent) B out",
                "utun0 (tunnel): \(received) B in, 0 B out; since start \(received) B in, 0 B out",
                Self.estimate,
            ])
        #expect(second["en0"]?.sinceLastSample.sentPackets == 200)
        #expect(second["en0"]?.change == .steady && second["en0"]?.mayHaveMissedWrap == false)
        #expect(second["utun0"]?.sinceLastSample.receivedPackets == 10)

        // A VPN reconnecting: utun0 deleted and made again. getifaddrs sees
        // no deletion, so the old instance's last traffic is unknown.
        _ = try setup.receiveOnUtun0(count: 4, payload: 60)
        try setup.recreateTun()
        let afterRecreation = try setup.receiveOnUtun0(count: 3, payload: 50)
        let third = try setup.inside { try meter.sample() }
        #expect(
            statusLines(third) == [
                "en0 (virtual): 0 B in, 0 B out; since start 0 B in, \(sent) B out",
                "utun0 (tunnel): ≥ \(afterRecreation) B in, ≥ 0 B out; since start ≥ \(received + afterRecreation) B in, ≥ 0 B out [recreated]",
                Self.estimate,
                "≥ marks a lower bound: some traffic could not be seen (a counter reset, or an interface recreated without a deletion event); the true value is at least the figure.",
                "≥ also marks 32-bit counters read so long after the reading before that a whole wrap (4 GiB) could have passed unseen.",
                "Figures without a mark are exact readings of the counters.",
            ])
        let utun0 = try #require(third["utun0"])
        #expect(utun0.change == .recreated && utun0.events.recreations == 1 && utun0.events.summary == "1 recreation")
        #expect(utun0.sinceLastSample.quality == .lowerBound && utun0.mayHaveMissedWrap == false)

        // The next launch, in the same boot: the totals go on exactly, and
        // what en0 sent while the app was away is counted.
        let kept = try setup.inside { try stateToKeep(meter) }
        let whileAway = try setup.sendOnEn0(count: 50, payload: 500)
        let (next, outcome) = try setup.inside { try openMeter(kept: kept) }
        #expect(outcome == .sameBoot)
        let first = try setup.inside { try next.sample() }
        let line = try #require(statusLines(first).first)
        #expect(line == "en0 (virtual): 0 B in, \(whileAway) B out; since start 0 B in, \(sent + whileAway) B out")
        #expect(first["en0"]?.sinceStart.quality == .exact)
        #expect(first["utun0"]?.sinceStart.receivedBytes == received + afterRecreation)
        #expect(first["utun0"]?.events.recreations == 1, "restored with the totals")
    }

    /// Contract v1.2's gap rule: 32-bit counters read 3 s apart could hide
    /// a whole wrap at the default ceiling (10 Gbit/s: 2.75 s), so the
    /// figures are lower bounds; netlink's 64-bit counters stay exact.
    @Test func thirtyTwoBitFiguresReadFarApartAreLowerBounds() throws {
        try Netns.requireRoot()
        let setup = try Setup()
        let portable = try setup.inside { try TrafficMeter() }
        // The article's widest meter: no sysctl on Linux, so netlink.
        let (netlink, said) = try setup.inside { try widestMeter() }
        #expect(said == "netlink: 64-bit counters" && portable.source == .getifaddrs && portable.source.counterBits == 32)
        _ = try setup.inside { try (portable.sample(), netlink.sample()) }
        Thread.sleep(forTimeInterval: 3)
        let sent = try setup.sendOnEn0(count: 100, payload: 700)
        let (a, b) = try setup.inside { try (portable.sample(), netlink.sample()) }
        let en0 = try #require(a["en0"]), wide = try #require(b["en0"])
        #expect(try #require(a.secondsSinceLastSample) >= 3)
        #expect(en0.sinceLastSample.sentBytes == sent && wide.sinceLastSample.sentBytes == sent)
        #expect(en0.change == .steady && en0.mayHaveMissedWrap && en0.sinceLastSample.quality == .lowerBound)
        #expect(en0.sinceStart.quality == .lowerBound && en0.events.summary == "-", "nothing was seen to happen")
        #expect(statusLines(a).first == "en0 (virtual): ≥ 0 B in, ≥ \(sent) B out; since start ≥ 0 B in, ≥ \(sent) B out")
        #expect(
            a.caveats.contains(
                "≥ also marks 32-bit counters read so long after the reading before that a whole wrap (4 GiB) could have passed unseen."))
        #expect(wide.counterBits == 64 && !wide.mayHaveMissedWrap && wide.sinceLastSample.quality == .exact)
        #expect(b.caveats == [Self.estimate])

        // A lower ceiling the app vouches for (100 Mbit/s) allows 275 s.
        let slow = try setup.inside { try TrafficMeter(maxBitsPerSecond: 100e6) }
        _ = try setup.inside { try slow.sample() }
        Thread.sleep(forTimeInterval: 3)
        let more = try setup.sendOnEn0(count: 10, payload: 100)
        let c = try setup.inside { try slow.sample() }
        #expect(c["en0"]?.sinceLastSample.sentBytes == more && c["en0"]?.sinceLastSample.quality == .exact)
    }

    /// Saved before a reboot (the boot id in the state is another's): the
    /// counters started over, so they count in full and are a lower bound.
    @Test func afterARebootTheCountersCountInFullAsALowerBound() throws {
        try Netns.requireRoot()
        let setup = try Setup()
        let (meter, _) = try setup.inside { try openMeter(kept: nil) }
        _ = try setup.inside { try meter.sample() }
        let sent = try setup.sendOnEn0(count: 20, payload: 300)
        let kept = try setup.inside { try stateToKeep(meter) }
        let boot = try #require(readBootID())
        #expect(kept.contains("\"boot\":\"\(boot)\""))
        let rebooted = kept.replacingOccurrences(of: boot, with: "00000000-0000-0000-0000-000000000000")

        let (next, outcome) = try setup.inside { try openMeter(kept: rebooted) }
        #expect(outcome == .afterReboot)
        _ = try setup.sendOnEn0(count: 5, payload: 100)
        let reading = try setup.inside { try next.sample() }
        let kernel = try sysfsCounters(setup.pair.a, "en0")
        let en0 = try #require(reading["en0"])
        #expect(en0.change == .restartedAfterReboot && en0.events.resets == 1)
        #expect(en0.sinceLastSample.sentBytes == kernel.txBytes, "in full: the counter since the interface began")
        #expect(en0.sinceStart.sentBytes == sent + kernel.txBytes)
        #expect(en0.sinceLastSample.quality == .lowerBound && en0.sinceStart.quality == .lowerBound)
        #expect(statusLines(reading).first?.hasSuffix("[restarted after a reboot]") == true)
    }

    /// Netlink hears the deletion, with the final counters: a recreation
    /// loses nothing and stays exact.
    @Test func netlinkCountsARecreationExactly() throws {
        try Netns.requireRoot()
        let setup = try Setup()
        let meter = try setup.inside { try TrafficMeter(source: .netlink) }
        _ = try meter.sample()
        let before = try setup.receiveOnUtun0(count: 10, payload: 100)
        _ = try meter.sample()
        let last = try setup.receiveOnUtun0(count: 4, payload: 60)
        try setup.recreateTun()
        let after = try setup.receiveOnUtun0(count: 3, payload: 50)
        let reading = try meter.sample()
        let utun0 = try #require(reading["utun0"])
        #expect(utun0.change == .recreated && utun0.counterBits == 64)
        #expect(utun0.sinceLastSample.receivedBytes == last + after && utun0.sinceLastSample.quality == .exact)
        #expect(utun0.sinceStart.receivedBytes == before + last + after && utun0.sinceStart.quality == .exact)
        #expect(utun0.events.summary == "1 recreation, 1 deletion")
        #expect(
            statusLines(reading).contains(
                "utun0 (tunnel): \(last + after) B in, 0 B out; since start \(before + last + after) B in, 0 B out [recreated]"))
    }
}
