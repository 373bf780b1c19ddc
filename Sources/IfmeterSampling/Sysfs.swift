import IfmeterCore
import IfmeterSystem

/// What `/sys/class/net/NAME/` says about one interface.
public struct SysfsFacts: Sendable, Hashable {
    public var facts = KernelFacts()
    public var ifindex: Int?
    public var operstate: String?
    public var mtu: UInt32?
    /// The driver's reported speed in bits per second, when it reports one.
    public var speedBps: UInt64?

    public init() {}

    /// These facts with what netlink said: netlink's link kind and ARPHRD
    /// type win over sysfs's `type` file.
    public func merged(linkKind: String?, arphrdType: Int?) -> KernelFacts {
        var merged = facts
        merged.linkKind = linkKind
        if let arphrdType { merged.arphrdType = arphrdType }
        return merged
    }
}

/// Reads interface facts from a sysfs tree. The root is a parameter so tests
/// read fake trees under `Fixtures/sysfs/`.
public struct SysfsReader: Sendable, Hashable {
    /// The folder holding one folder per interface (`/sys/class/net`).
    public var root: String

    public init(root: String = "/sys/class/net") { self.root = root }

    /// Reads what the tree holds for `name`; absent files leave fields empty.
    public func read(_ name: String) -> SysfsFacts {
        let dir = root + "/" + name
        var out = SysfsFacts()
        out.facts.sysfsWireless = pathExists(dir + "/wireless")
        out.facts.sysfsPhy80211 = pathExists(dir + "/phy80211")
        out.facts.sysfsTunFlags = pathExists(dir + "/tun_flags")
        out.facts.hasDevice = pathExists(dir + "/device")
        if out.facts.hasDevice, let target = readLink(dir + "/device/driver") {
            out.facts.driver = target.split(separator: "/").last.map(String.init)
        }
        if let uevent = readSmallFile(dir + "/uevent") {
            for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
                out.facts.devtype = String(line.dropFirst("DEVTYPE=".count))
            }
        }
        out.facts.arphrdType = readInt(dir + "/type")
        out.ifindex = readInt(dir + "/ifindex")
        out.operstate = readSmallFile(dir + "/operstate").map { $0.trimmingNewline() }
        out.mtu = readInt(dir + "/mtu").flatMap { UInt32(exactly: $0) }
        out.speedBps = Self.bitsPerSecond(readInt(dir + "/speed"))
        return out
    }

    /// Only the speed (for a periodic re-read of hardware links).
    public func speedBps(_ name: String) -> UInt64? {
        Self.bitsPerSecond(readInt(root + "/" + name + "/speed"))
    }

    /// A `speed` file's Mbit/s as bit/s: the kernel's figure is 32 bits
    /// (-1 for unknown); anything not from 1 to 2^32-1 (a file in a
    /// --sysfs-root tree may say anything) is no known speed, never an
    /// overflow.
    static func bitsPerSecond(_ mbps: Int?) -> UInt64? {
        guard let mbps, mbps > 0, mbps <= Int(UInt32.max) else { return nil }
        return UInt64(mbps) * 1_000_000
    }

    /// What node_exporter's netclass collector reads from sysfs and netlink
    /// does not carry: `speed` and `duplex` (answered only while the link
    /// is up), `dev_id`, `name_assign_type` and `addr_assign_type`. A file
    /// that cannot be read leaves its field nil, as node_exporter leaves
    /// the metric out.
    public func netclass(_ name: String) -> SysfsNetclass {
        let dir = root + "/" + name + "/"
        var out = SysfsNetclass()
        out.speedMbps = readInt(dir + "speed").flatMap { Int32(exactly: $0) }
        out.duplex = readSmallFile(dir + "duplex", limit: 64).map { $0.trimmingNewline() }
        out.devID = readSmallFile(dir + "dev_id", limit: 64).flatMap { text -> UInt16? in
            let digits = text.trimmingNewline()
            return digits.hasPrefix("0x") ? UInt16(digits.dropFirst(2), radix: 16) : UInt16(digits)
        }
        out.nameAssignType = readInt(dir + "name_assign_type").flatMap { UInt8(exactly: $0) }
        out.addressAssignType = readInt(dir + "addr_assign_type").flatMap { UInt8(exactly: $0) }
        return out
    }

    /// Interface names in the tree, sorted.
    public func names() -> [String] {
        listDirectory(root).sorted()
    }

    private func readInt(_ path: String) -> Int? {
        readSmallFile(path).flatMap { Int($0.trimmingNewline()) }
    }
}

extension String {
    func trimmingNewline() -> String {
        var s = Substring(self)
        while let last = s.last, last == "\n" || last == " " || last == "\r" { s = s.dropLast() }
        return String(s)
    }
}
