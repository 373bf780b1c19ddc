#if canImport(Darwin)
import Darwin
import IfmeterCore
import IfmeterSystem

// Compiled only on Apple platforms; never compiled here (docs/architecture.md
// says what has not been built on an Apple platform).
extension GetifaddrsSampler {
    /// Every link of getifaddrs with statistics: on Darwin its AF_LINK
    /// entries carry an `if_data` (32-bit counters; no transmit drops).
    static func entries(kernelStats: Bool) throws(SystemError) -> [Entry] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { throw SystemError.system("getifaddrs") }
        defer { freeifaddrs(list) }
        var found: [Entry] = []
        var cursor = list
        while let ifa = cursor {
            defer { cursor = ifa.pointee.ifa_next }
            guard let addr = ifa.pointee.ifa_addr, addr.pointee.sa_family == UInt8(AF_LINK),
                let data = ifa.pointee.ifa_data
            else { continue }
            let d = data.assumingMemoryBound(to: if_data.self).pointee
            let index = addr.withMemoryRebound(to: sockaddr_dl.self, capacity: 1) { Int($0.pointee.sdl_index) }
            let counters = Counters(
                rxBytes: UInt64(d.ifi_ibytes), txBytes: UInt64(d.ifi_obytes),
                rxPackets: UInt64(d.ifi_ipackets), txPackets: UInt64(d.ifi_opackets),
                rxErrors: UInt64(d.ifi_ierrors), txErrors: UInt64(d.ifi_oerrors),
                rxDropped: UInt64(d.ifi_iqdrops), txDropped: nil)
            found.append((InterfaceName.decode(cString: ifa.pointee.ifa_name), index, Int(d.ifi_type), counters, nil))
        }
        return found
    }
}
#endif
