#if canImport(Darwin)
import Darwin
import IfmeterCore
import IfmeterSystem

// Compiled only on Apple platforms; never compiled here (docs/architecture.md
// says what has not been built on an Apple platform). Only the sysctl call:
// the parsing is InterfaceList2.swift's, tested on every platform.
extension InterfaceList2 {
    /// The kernel's NET_RT_IFLIST2 buffer: `sysctl {CTL_NET, PF_ROUTE, 0,
    /// 0, NET_RT_IFLIST2, 0}`, asked for its size first. An interface or
    /// address that comes between the two calls makes the second fail
    /// with ENOMEM: then it is asked once more.
    public static func readSysctl() throws(SystemError) -> [UInt8] {
        var mib: [Int32] = [CTL_NET, PF_ROUTE, 0, 0, NET_RT_IFLIST2, 0]
        let call = "sysctl(NET_RT_IFLIST2)"
        var attempt = 0
        while true {
            var size = 0
            guard sysctl(&mib, u_int(mib.count), nil, &size, nil, 0) == 0 else { throw SystemError.system(call) }
            // Room for a little growth, as the kernel leaves itself an eighth.
            var buffer = [UInt8](repeating: 0, count: size + size / 8 + 1)
            size = buffer.count
            let (result, code) = buffer.withUnsafeMutableBytes { bytes in
                let result = sysctl(&mib, u_int(mib.count), bytes.baseAddress, &size, nil, 0)
                return (result, result == 0 ? 0 : currentErrno())
            }
            if result == 0 { return Array(buffer.prefix(size)) }
            attempt += 1
            guard code == ENOMEM, attempt < 2 else { throw SystemError.system(call, code: code) }
        }
    }
}

extension InterfaceListSampler {
    /// Reads the kernel's interface list (`InterfaceList2.readSysctl`).
    public convenience init(options: SamplerOptions = SamplerOptions()) {
        self.init(options: options, read: { () throws(SystemError) -> [UInt8] in try InterfaceList2.readSysctl() })
    }
}
#endif
