import IfmeterTestSupport
import Synchronization
import Testing

@testable import Ifmeter
@testable import IfmeterSampling

/// The 64-bit source of Apple platforms (`sysctl` NET_RT_IFLIST2, issue 34)
/// through the library's meter: on Linux the kernel's call does not exist,
/// so the meter reads buffers laid out after XNU's headers
/// (IfmeterTestSupport's IfList2Fixture) through the same parser and
/// sampler an Apple platform uses.
@Suite struct SysctlSourceTests {
    typealias F = IfList2Fixture

    @Test func eachSourceSaysHowWideItsCountersAre() {
        #expect(TrafficMeter.Source.getifaddrs.counterBits == 32)
        #expect(TrafficMeter.Source.netlink.counterBits == 64)
        #expect(TrafficMeter.Source.sysctl.counterBits == 64)
        // Linux keeps getifaddrs as the default (earlier state restores);
        // Apple platforms get the 64-bit sysctl one.
        #expect(TrafficMeter.Source.platformDefault == .getifaddrs)
    }

    @Test func theSysctlSourceIsApplesAlone() {
        #expect(
            throws: MeterError.unavailable("the sysctl source (NET_RT_IFLIST2) exists on Apple platforms only; use netlink or getifaddrs")
        ) { try TrafficMeter(source: .sysctl) }
    }

    /// en0 and utun3 as one buffer, with their received and sent bytes.
    static func buffer(en0: (UInt64, UInt64), utun3: (UInt64, UInt64)) -> [UInt8] {
        var wifi = F.en0, tunnel = F.utun3
        (wifi.ibytes, wifi.obytes) = en0
        (tunnel.ibytes, tunnel.obytes) = utun3
        return F.interfaceInfo2(wifi) + F.newAddress(index: 4) + F.interfaceInfo2(tunnel)
    }

    /// A meter reading `buffers` one per sample, at `times` seconds.
    static func meter(_ buffers: [[UInt8]], times: [Double]) -> TrafficMeter {
        let next = Atomic<Int>(0)
        let sampler = InterfaceListSampler(read: { buffers[min(next.add(1, ordering: .relaxed).oldValue, buffers.count - 1)] })
        let clock = Atomic<Int>(0)
        sampler.clock = { times[min(clock.add(1, ordering: .relaxed).oldValue, times.count - 1)] }
        return TrafficMeter(source: .sysctl, reader: sampler)
    }

    /// Across 4 GiB, and an hour between two samples: exact, where a 32-bit
    /// source would have to call the hour's figure a lower bound (a whole
    /// wrap could hide in it) and could not tell 9 GB from 9 GB - 4 GiB.
    @Test func aReplayAcrossFourGiBIsExact() throws {
        let meter = Self.meter(
            [
                Self.buffer(en0: (4_294_967_000, 100), utun3: (10, 4_294_966_000)),
                Self.buffer(en0: (4_294_968_000, 1_100), utun3: (20, 4_294_968_296)),
                Self.buffer(en0: (9_000_000_000, 5_000_000_100), utun3: (30, 12_000_000_000)),
            ], times: [0, 1, 3601])
        #expect(meter.source == .sysctl)
        _ = try meter.sample()
        let second = try meter.sample()
        let third = try meter.sample()
        let en0 = try #require(third.interfaces.first { $0.name == "en0" })
        let utun3 = try #require(third.interfaces.first { $0.name == "utun3" })
        #expect(en0.counterBits == 64 && utun3.counterBits == 64)
        #expect(second.interfaces.first { $0.name == "en0" }?.sinceLastSample.receivedBytes == 1_000)
        #expect(en0.sinceLastSample.receivedBytes == 9_000_000_000 - 4_294_968_000)
        #expect(en0.sinceStart.receivedBytes == 9_000_000_000 - 4_294_967_000)
        #expect(en0.sinceStart.sentBytes == 5_000_000_000)
        #expect(utun3.sinceStart.sentBytes == 12_000_000_000 - 4_294_966_000)
        #expect(utun3.sinceStart.receivedBytes == 20)
        for interface in [en0, utun3] {
            #expect(interface.sinceStart.quality == .exact)
            #expect(interface.sinceLastSample.quality == .exact)
            #expect(!interface.mayHaveMissedWrap)
            #expect(interface.change == .steady)
            #expect(interface.events.wraps == 0 && interface.events.resets == 0)
        }
        #expect(en0.kind == .wifi && utun3.kind == .tunnel)
    }

    /// Saved state names the source, and a sysctl meter takes it back.
    @Test func savedStateSaysSysctlAndRestores() throws {
        let first = Self.meter([Self.buffer(en0: (4_294_967_000, 0), utun3: (0, 0))], times: [0])
        _ = try first.sample()
        let saved = first.savedState()
        #expect(saved.contains("\"source\": \"sysctl\"") || saved.contains("\"source\":\"sysctl\""))
        let next = Self.meter([Self.buffer(en0: (4_294_969_000, 0), utun3: (0, 0))], times: [1])
        #expect(try next.restore(saved) == .sameBoot)
        let en0 = try #require(try next.sample().interfaces.first { $0.name == "en0" })
        #expect(en0.sinceStart.receivedBytes == 2_000 && en0.sinceStart.quality == .exact)
    }
}
