import IfmeterCore
import Testing

@Suite struct UnitsAndFilterTests {
    @Test func sizesUseIECUnits() {
        #expect(Units.bytes(UInt64(0)) == "0 B")
        #expect(Units.bytes(UInt64(1023)) == "1023 B")
        #expect(Units.bytes(UInt64(1536)) == "1.50 KiB")
        #expect(Units.bytes(UInt64(10 * 1024 * 1024)) == "10.0 MiB")
        #expect(Units.bytes(UInt64(300) * 1_073_741_824) == "300 GiB")
        #expect(Units.bytes(UInt64.max) == "16.0 EiB")
    }

    @Test func ratesInBytesOrBits() {
        #expect(Units.rate(bytesPerSecond: 125_000, bits: true) == "1.00 Mbit/s")
        #expect(Units.rate(bytesPerSecond: 2048, bits: false) == "2.00 KiB/s")
        #expect(Units.rate(bytesPerSecond: 10, bits: true) == "80 bit/s")
    }

    @Test func fixedDecimals() {
        #expect(Units.fixed(1.005, 1) == "1.0")
        #expect(Units.fixed(2.25, 1) == "2.3")
        #expect(Units.fixed(-0.04, 1) == "0.0")
        #expect(Units.fixed(-3.5, 0) == "-4")
        #expect(Units.fixed(12, 3) == "12.000")
        #expect(Units.grouped(1_234_567) == "1,234,567")
    }

    @Test func durations() {
        #expect(Units.parseDuration("500ms") == 0.5)
        #expect(Units.parseDuration("0.5s") == 0.5)
        #expect(Units.parseDuration("2m") == 120)
        #expect(Units.parseDuration("10") == 10)
        #expect(Units.parseDuration("1h") == 3600)
        for bad in ["", "abc", "-5", "5x", "ms", "1e3", "inf", "1.2.3s"] { #expect(Units.parseDuration(bad) == nil, "\(bad)") }
    }

    @Test func rates() {
        #expect(Units.parseRate("10Gbit") == 1.25e9)
        #expect(Units.parseRate("100Mbps") == 12.5e6)
        #expect(Units.parseRate("125MB") == 125e6)
        #expect(Units.parseRate("1MiB/s") == 1_048_576)
        #expect(Units.parseRate("1.25e9") == 1.25e9)
        for bad in ["", "fast", "-1Gbit", "0"] { #expect(Units.parseRate(bad) == nil, "\(bad)") }
    }

    @Test func globs() {
        #expect(Glob.matches("veth*", "veth0"))
        #expect(!Glob.matches("veth*", "eth0"))
        #expect(Glob.matches("*0", "wlan0"))
        #expect(Glob.matches("e?h[0-9]", "eth3"))
        #expect(!Glob.matches("eth[!0-3]", "eth2"))
        #expect(Glob.matches("eth[!0-3]", "eth7"))
        #expect(Glob.matches("*", ""))
        #expect(Glob.matches("a*b*c", "axxbyyc"))
        #expect(!Glob.matches("a*b*c", "axxbyy"))
        #expect(Glob.matches("br-[", "br-["))
    }

    @Test func filters() {
        let f = InterfaceFilter(include: ["e*", "wl*"], exclude: ["eth1"], kinds: [.ethernet, .wifi])
        #expect(f.admits(name: "eth0", kind: .ethernet))
        #expect(!f.admits(name: "eth1", kind: .ethernet))
        #expect(!f.admits(name: "enp1", kind: .virtual))
        #expect(!f.admits(name: "tun0", kind: .wifi))
        #expect(InterfaceFilter().admits(name: "anything", kind: .other))
    }
}

@Suite struct DurationFormatTests {
    @Test func durationsForPeople() {
        #expect(Units.duration(0.25) == "250 ms")
        #expect(Units.duration(1) == "1 s")
        #expect(Units.duration(1.5) == "1.5 s")
        #expect(Units.duration(12.25) == "12.3 s")
        #expect(Units.duration(125) == "2 m 5 s")
        #expect(Units.duration(7300) == "2 h 1 m")
        #expect(Units.duration(0.9999) == "1 s")
        #expect(Units.duration(59.99) == "1 m 0 s")
    }
}
