#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterSystem

/// One interface's MAC, IPv4 and IPv6 addresses, read with getifaddrs for
/// that interface only, in the namespace it lives in (entering another
/// one needs root): the live view's detail pane, never the sampling path.
public struct InterfaceAddresses: Sendable, Equatable {
    public var mac: String?
    /// `10.0.0.1/24`
    public var ipv4: [String] = []
    /// `fe80::1/64`
    public var ipv6: [String] = []
    /// Why they could not be read, when they could not.
    public var failure: String?

    public init(mac: String? = nil, ipv4: [String] = [], ipv6: [String] = [], failure: String? = nil) {
        self.mac = mac
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.failure = failure
    }

    public static func read(_ key: SeriesKey) -> InterfaceAddresses {
        #if os(Linux) && !IFMETER_PORTABLE_CHECK
        if !key.netns.isEmpty {
            do {
                return try NetworkNamespace.perform(in: key.netns) { readHere(key) }
            } catch {
                return InterfaceAddresses(failure: "not read in namespace \(key.netns): \(error)")
            }
        }
        #endif
        return readHere(key)
    }

    static func readHere(_ key: SeriesKey) -> InterfaceAddresses {
        var result = InterfaceAddresses()
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else {
            result.failure = "getifaddrs: \(SystemError.system("getifaddrs").message)"
            return result
        }
        defer { freeifaddrs(list) }
        var entry = list
        while let ifa = entry {
            defer { entry = ifa.pointee.ifa_next }
            guard let name = ifa.pointee.ifa_name, InterfaceName.decode(cString: name) == key.name, let address = ifa.pointee.ifa_addr else {
                continue
            }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
                var sin = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                inet_ntop(AF_INET, &sin.sin_addr, &text, socklen_t(text.count))
                result.ipv4.append(string(text) + prefix(ifa.pointee.ifa_netmask, length: 4, offset: 4))
            case AF_INET6:
                var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
                var sin6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                inet_ntop(AF_INET6, &sin6.sin6_addr, &text, socklen_t(text.count))
                result.ipv6.append(string(text) + prefix(ifa.pointee.ifa_netmask, length: 16, offset: 8))
            #if os(Linux) && !IFMETER_PORTABLE_CHECK
            case AF_PACKET:
                // struct sockaddr_ll: sll_halen at byte 11, sll_addr[8] at 12.
                let raw = UnsafeRawPointer(address)
                let length = min(Int(raw.load(fromByteOffset: 11, as: UInt8.self)), 8)
                let bytes = (0..<length).map { raw.load(fromByteOffset: 12 + $0, as: UInt8.self) }
                if length > 0, bytes.contains(where: { $0 != 0 }) {
                    result.mac = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: ":")
                }
            #elseif canImport(Darwin)
            case AF_LINK:
                // struct sockaddr_dl, sdl_len bytes long: read by the
                // shared parser (InterfaceList2.swift), tested everywhere.
                let bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(address), count: Int(address.pointee.sa_len))
                if let link = try? LinkLayerAddress.parse(bytes), let mac = link.macText, link.address.contains(where: { $0 != 0 }) {
                    result.mac = mac
                }
            #endif
            default: break
            }
        }
        return result
    }

    private static func string(_ text: [CChar]) -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `/24`: the bits set in a netmask of `length` bytes at `offset` in its sockaddr.
    private static func prefix(_ mask: UnsafeMutablePointer<sockaddr>?, length: Int, offset: Int) -> String {
        guard let mask else { return "" }
        let raw = UnsafeRawPointer(mask)
        var bits = 0
        for n in 0..<length { bits += raw.load(fromByteOffset: offset + n, as: UInt8.self).nonzeroBitCount }
        return "/\(bits)"
    }
}
