#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import Glibc
import IfmeterCore
import IfmeterSystem

extension GetifaddrsSampler {
    /// Every link of getifaddrs with statistics: on Linux its AF_PACKET
    /// entries carry a `struct rtnl_link_stats` (32-bit counters), and an
    /// addressless link (a tun) one without a hardware address, found by name.
    static func entries(kernelStats wanted: Bool) throws(SystemError) -> [Entry] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { throw SystemError.system("getifaddrs") }
        defer { freeifaddrs(list) }
        var found: [Entry] = []
        var cursor = list
        while let ifa = cursor {
            defer { cursor = ifa.pointee.ifa_next }
            var stats = cifm_stats32()
            var index: Int32 = 0, hatype: Int32 = 0
            guard cifm_ifaddrs_stats32(ifa, &stats) == 0 else { continue }
            if cifm_ifaddrs_packet_info(ifa, &index, &hatype) != 0 {
                // No hardware address (a tun): found by name.
                index = Int32(if_nametoindex(ifa.pointee.ifa_name))
                hatype = -1
                guard index > 0 else { continue }
            }
            let counters = Counters(
                rxBytes: UInt64(stats.rx_bytes), txBytes: UInt64(stats.tx_bytes),
                rxPackets: UInt64(stats.rx_packets), txPackets: UInt64(stats.tx_packets),
                rxErrors: UInt64(stats.rx_errors), txErrors: UInt64(stats.tx_errors),
                rxDropped: UInt64(stats.rx_dropped), txDropped: UInt64(stats.tx_dropped))
            var kernelStats: KernelLinkStats?
            if wanted {
                var fields = [UInt64](repeating: 0, count: 24)
                if cifm_ifaddrs_kernel_stats(ifa, &fields) == 0 { kernelStats = KernelLinkStats(values: fields) }
            }
            found.append((InterfaceName.decode(cString: ifa.pointee.ifa_name), Int(index), Int(hatype), counters, kernelStats))
        }
        return found
    }
}
#endif
