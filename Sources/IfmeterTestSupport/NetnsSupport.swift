// Helpers shared by the test targets: namespaces, veth pairs, traffic,
// running the ifmeter binary. Linked by tests only.
import CIfmeterTestSupport
import Foundation
import IfmeterCore
import IfmeterSampling

#if canImport(Glibc)
import Glibc
#endif
import IfmeterSystem

/// Integration tests need root to make network namespaces. Without root
/// they skip with this reason, unless IFMETER_REQUIRE_NETNS=1 (set by
/// `.ci/run`), which makes them run and fail instead.
package enum Netns {
    package static let isRoot = geteuid() == 0
    package static let required = ProcessInfo.processInfo.environment["IFMETER_REQUIRE_NETNS"] == "1"
    package static let enabled = isRoot || required
    package static let reason =
        "skipped: creating network namespaces needs root (run as root; IFMETER_REQUIRE_NETNS=1 turns this skip into a failure)"

    /// Fails the test when it must run but cannot.
    package static func requireRoot() throws {
        if !isRoot {
            throw TestFailure("IFMETER_REQUIRE_NETNS=1 but not running as root: network namespace tests cannot run")
        }
    }
}

package struct TestFailure: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// The room a block from malloc really has (malloc_usable_size): tests
/// check that a kept buffer holds no slack.
package func mallocUsableSize(_ block: UnsafeRawPointer?) -> Int { cifm_usable_size(block) }

extension Sample {
    /// The reading of the interface named `name`; a failure that lists the
    /// names the sample has when it has no such one.
    package func reading(_ name: String) throws -> InterfaceSample {
        guard let reading = interfaces.first(where: { $0.name == name }) else {
            throw TestFailure("\(name) not in sample: \(interfaces.map(\.name))")
        }
        return reading
    }
}

/// A network namespace of the test's own, with a unique name, removed when
/// the value goes away (also when the test fails). Namespaces left by a
/// crashed test run are removed by the next run.
package final class TestNamespace: @unchecked Sendable {
    package let name: String
    private static let counter = Counter()
    private static let cleaned: Void = removeStale()

    package convenience init() throws {
        try self.init(named: Self.uniqueName())
    }

    /// A namespace of this name (one from `uniqueName`, so that a crashed
    /// run's is cleaned up); a test that recreates one under the same name
    /// makes each instance with this.
    package init(named name: String) throws {
        _ = Self.cleaned
        self.name = name
        try run(["ip", "netns", "add", name])
        // No IPv6: no router or neighbour solicitations to blur the counts.
        try exec(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
        try exec(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])
        try ip("link", "set", "lo", "up")
    }

    deinit { remove() }

    /// A name no other namespace of this test run has.
    package static func uniqueName() -> String {
        "ifmt-\(getpid())-\(counter.next())-\(UInt16.random(in: 0...UInt16.max))"
    }

    package func remove() {
        _ = try? run(["ip", "netns", "del", name], allowFailure: true)
    }

    /// `ip -n NAME ...`
    @discardableResult
    package func ip(_ arguments: String...) throws -> String {
        try run(["ip", "-n", name] + arguments).out
    }

    /// Waits until `device`'s carrier is up (LOWER_UP, no NO-CARRIER): it
    /// comes a moment after `up` (linkwatch), and until then a veth drops
    /// what it is given, uncounted.
    package func waitForCarrier(_ device: String, timeout: Double = 60) throws {
        // Polled often: every veth pair a test makes waits here.
        _ = try waitFor("\(device)'s carrier", timeout: timeout, every: 0.02) {
            let link = try ip("-o", "link", "show", "dev", device)
            return link.contains("LOWER_UP") && !link.contains("NO-CARRIER") ? true : nil
        }
    }

    /// Creates a tun (or tap) device in this namespace; closing the returned
    /// descriptor deletes it. A device of the same name closed just before
    /// may still exist for a moment: a process spawned meanwhile by a test
    /// running in parallel holds a copy of its descriptor until it execs
    /// (EBUSY), so that is waited out (waitFor's deadline). errno is read on
    /// the thread that entered the namespace.
    package func openTun(_ device: String, tap: Bool = false) throws -> Int32 {
        let what = "\(tap ? "tap" : "tun") \(device)"
        return try waitFor("\(what) to be free of the last one's descriptor (EBUSY)", every: 0.01) { () throws -> Int32? in
            let opened: Result<Int32, SystemError>
            do {
                opened = try NetworkNamespace.perform(in: name, { Result { () throws(SystemError) in try Self.attachTun(device, tap: tap) } })
            } catch {
                throw WaitAborted("\(what): entering \(name): \(error)")
            }
            switch opened {
            case .success(let fd): return fd
            case .failure(let error) where error.errno == EBUSY: return nil
            case .failure(let error): throw WaitAborted("\(what): \(error)")
            }
        }
    }

    /// Opens /dev/net/tun and attaches it to the tun (or tap) device
    /// `device`, created in the calling thread's namespace (TUNSETIFF, no
    /// packet information before each packet).
    static func attachTun(_ device: String, tap: Bool) throws(SystemError) -> Int32 {
        let fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw .system("open(/dev/net/tun)") }
        var attached = false
        defer { if !attached { close(fd) } }
        let rc = withUnsafeTemporaryAllocation(byteCount: Int(CIFM_TUN_REQUEST_SIZE), alignment: 16) { request in
            cifm_tun_request(request.baseAddress, device, tap ? 1 : 0)
            return ioctl(fd, UInt(cifm_tunsetiff()), request.baseAddress!)
        }
        guard rc == 0 else { throw .system("ioctl(\(device), TUNSETIFF)") }
        attached = true
        return fd
    }

    /// `ip netns exec NAME ...`: a command inside, with sysfs remounted for it.
    @discardableResult
    package func exec(_ arguments: [String], allowFailure: Bool = false) throws -> (out: String, err: String, status: Int32) {
        try run(["ip", "netns", "exec", name] + arguments, allowFailure: allowFailure)
    }

    package func ifindex(_ interface: String) throws -> Int {
        let text = try ip("-o", "link", "show", "dev", interface)
        guard let index = Int(text.split(separator: ":").first ?? "") else { throw TestFailure("no index in \(text)") }
        return index
    }

    /// Namespaces named by a test process that no longer runs.
    static func removeStale() {
        guard let list = try? run(["ip", "netns", "list"], allowFailure: true).out else { return }
        for line in list.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            let parts = name.split(separator: "-")
            guard parts.count == 4, parts[0] == "ifmt", let pid = Int32(parts[1]) else { continue }
            if kill(pid, 0) != 0, errno == ESRCH {
                _ = try? run(["ip", "netns", "del", name], allowFailure: true)
            }
        }
    }

    final class Counter: @unchecked Sendable {
        private var value = 0
        private let lock = NSLock()
        func next() -> Int {
            lock.lock()
            defer { lock.unlock() }
            value += 1
            return value
        }
    }
}

/// Two namespaces joined by a veth pair, quiet: no IPv6, static neighbours
/// (no ARP), so the only frames are the ones a test sends.
package final class VethPair: @unchecked Sendable {
    package let a: TestNamespace, b: TestNamespace
    package let nameA: String, nameB: String
    package let ipA = "10.77.0.1", ipB = "10.77.0.2"
    package let macA = "02:00:00:00:77:01", macB = "02:00:00:00:77:02"

    /// `nameA` in A, `nameB` in B (the README's examples name them as a
    /// reader's machine would).
    package init(nameA: String = "vA", nameB: String = "vB") throws {
        self.nameA = nameA
        self.nameB = nameB
        a = try TestNamespace()
        b = try TestNamespace()
        try a.ip("link", "add", nameA, "address", macA, "type", "veth", "peer", "name", nameB, "address", macB, "netns", b.name)
        try a.ip("addr", "add", ipA + "/30", "dev", nameA)
        try b.ip("addr", "add", ipB + "/30", "dev", nameB)
        try a.ip("neigh", "add", ipB, "lladdr", macB, "dev", nameA, "nud", "permanent")
        try b.ip("neigh", "add", ipA, "lladdr", macA, "dev", nameB, "nud", "permanent")
        try a.ip("link", "set", nameA, "up")
        try b.ip("link", "set", nameB, "up")
        // The carrier comes up a moment later (linkwatch); until then the
        // veth drops what it is given, uncounted. Both ends.
        try a.waitForCarrier(nameA)
        try b.waitForCarrier(nameB)
    }

    /// Bytes a veth counts for one UDP datagram: Ethernet, IPv4, UDP headers.
    package static func frameBytes(payload: Int) -> UInt64 { UInt64(14 + 20 + 8 + payload) }

    /// Opens a UDP socket bound to B's address (so no ICMP comes back), sends
    /// `count` datagrams of `payload` bytes from A, and closes both.
    package func sendUDP(count: Int, payload: Int, port: UInt16 = 9999) throws {
        try IfmeterTestSupport.sendUDP(from: a, to: ipB, in: b, port: port, count: count, payload: payload)
    }
}

/// Sends `count` UDP datagrams of `payload` bytes from namespace `from` to
/// `ip`, where a socket bound in `receiver`'s namespace takes them (so no
/// ICMP comes back); `pace` microseconds between datagrams.
package func sendUDP(
    from sender: TestNamespace, to ip: String, in receiver: TestNamespace, port: UInt16, count: Int, payload: Int, pace: UInt32 = 0
) throws {
    // The port, or the next free one: a run with eight tests at once once
    // found `port` taken in a namespace of the test's own (cause not found;
    // `ss` says by what, below). The bytes counted do not depend on it.
    let (socket, bound) = try NetworkNamespace.perform(in: receiver.name) { () throws -> (Int32, UInt16) in
        for candidate in port..<(port &+ 64) where candidate >= port {
            do {
                return (try udpSocket(bindTo: ip, port: candidate), candidate)
            } catch let failure as TestFailure where failure.description.contains("Address already in use") {
                continue
            }
        }
        throw TestFailure("bind: every UDP port from \(port) to \(port &+ 63) is in use on \(ip)")
    }
    defer { close(socket) }
    if bound != port {
        let holders = (try? receiver.exec(["ss", "-uanp"], allowFailure: true).out) ?? ""
        print("sendUDP: \(ip):\(port) was taken in \(receiver.name), so \(bound) took the datagrams; ss -uanp there:\n\(holders)")
    }
    try NetworkNamespace.perform(in: sender.name) { () throws in
        let fd = try udpSocket(bindTo: nil, port: 0)
        defer { close(fd) }
        var to = sockaddrIn(ip, bound)
        let data = [UInt8](repeating: 0x5A, count: payload)
        for _ in 0..<count {
            let n = withUnsafePointer(to: &to) { ptr in
                ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, data, data.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard n == payload else { throw TestFailure("sendto \(ip): \(String(cString: strerror(errno)))") }
            if pace > 0 { usleep(pace) }
        }
    }
}

package func sockaddrIn(_ ip: String, _ port: UInt16) -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    inet_pton(AF_INET, ip, &addr.sin_addr)
    return addr
}

package func udpSocket(bindTo ip: String?, port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
    if let ip {
        var addr = sockaddrIn(ip, port)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw TestFailure("bind: \(String(cString: strerror(errno)))") }
    }
    return fd
}

/// An IPv4/UDP packet from 10.88.0.2 to 10.99.99.99 (no route, dropped
/// quietly after the tun counts it), `payload` bytes of data.
package func ipv4Packet(payload: Int) -> [UInt8] {
    let total = 20 + 8 + payload
    var p = [UInt8](repeating: 0, count: total)
    p[0] = 0x45
    p[2] = UInt8(total >> 8); p[3] = UInt8(total & 0xFF)
    p[8] = 64; p[9] = 17
    p[12...15] = [10, 88, 0, 2]
    p[16...19] = [10, 99, 99, 99]
    var sum: UInt32 = 0
    for i in stride(from: 0, to: 20, by: 2) { sum += UInt32(p[i]) << 8 | UInt32(p[i + 1]) }
    while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
    let checksum = ~UInt16(sum)
    p[10] = UInt8(checksum >> 8); p[11] = UInt8(checksum & 0xFF)
    p[20] = 0x30; p[21] = 0x39; p[22] = 0x00; p[23] = 0x09 // ports 12345 → 9
    p[24] = UInt8((8 + payload) >> 8); p[25] = UInt8((8 + payload) & 0xFF)
    return p
}

/// The ifmeter executable built beside the test runner (IFMETER_BIN overrides).
package func ifmeterBinary() throws -> String {
    if let path = ProcessInfo.processInfo.environment["IFMETER_BIN"] { return path }
    var candidates: [String] = []
    let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    candidates.append(runner.deletingLastPathComponent().appendingPathComponent("ifmeter").path)
    if let exe = Bundle.main.executablePath {
        candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("ifmeter").path)
    }
    for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    throw TestFailure("no ifmeter binary next to the test runner (\(candidates)); run 'swift build' first or set IFMETER_BIN")
}

/// Runs ifmeter with arguments, returning stdout, stderr and the exit code.
package func ifmeter(_ arguments: [String], input: String? = nil, in namespace: TestNamespace? = nil) throws
    -> (out: String, err: String, status: Int32)
{
    let binary = try ifmeterBinary()
    let command = namespace.map { ["ip", "netns", "exec", $0.name, binary] } ?? [binary]
    return try run(command + arguments, input: input, allowFailure: true)
}

/// The repository's root, from this file's path.
package let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// Validates JSON files against `schemas/ifmeter-report.v2.schema.json`
/// (or another file of `schemas/`) with check-jsonschema (PyPI, installed
/// by `make test` in .build/venv).
package func checkJSONSchema(_ files: [String], schema name: String = "ifmeter-report.v2.schema.json") throws -> (ok: Bool, output: String) {
    let tool =
        ProcessInfo.processInfo.environment["IFMETER_CHECK_JSONSCHEMA"]
        ?? repositoryRoot.appendingPathComponent(".build/venv/bin/check-jsonschema").path
    guard FileManager.default.isExecutableFile(atPath: tool) else {
        throw TestFailure("check-jsonschema is missing at \(tool): run 'make test' (scripts/ensure-venv installs it)")
    }
    let schema = repositoryRoot.appendingPathComponent("schemas/" + name).path
    let result = try run([tool, "--schemafile", schema] + files, allowFailure: true)
    return (result.status == 0, result.out + result.err)
}

/// Sends `count` Ethernet frames of `size` bytes (headers included) out of
/// `interface` in the namespace through a packet socket: broadcast, of an
/// experimental EtherType (0x88B5), so nothing answers them.
package func sendFrames(in namespace: String, interface: String, count: Int, size: Int = 300) throws {
    try NetworkNamespace.perform(in: namespace) { () throws in
        let fd = socket(AF_PACKET, Int32(SOCK_RAW.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("packet socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_ll()
        address.sll_family = UInt16(AF_PACKET)
        address.sll_ifindex = Int32(if_nametoindex(interface))
        address.sll_halen = 6
        guard address.sll_ifindex > 0 else { throw TestFailure("no interface \(interface)") }
        var frame = [UInt8](repeating: 0x5A, count: max(size, 60))
        for i in 0..<6 { frame[i] = 0xFF }
        frame[6...11] = [0x02, 0, 0, 0, 0x88, 0x01]
        frame[12] = 0x88
        frame[13] = 0xB5
        for _ in 0..<count {
            let sent = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, frame, frame.count, 0, $0, socklen_t(MemoryLayout<sockaddr_ll>.size))
                }
            }
            guard sent == frame.count else { throw TestFailure("sendto(\(interface)): \(String(cString: strerror(errno)))") }
        }
    }
}

/// An interface's eight counters as sysfs says them, read inside its
/// namespace (`ip netns exec` mounts that namespace's sysfs).
package func sysfsCounters(_ namespace: TestNamespace, _ interface: String) throws -> Counters {
    let names = CounterKey.allCases.map(\.jsonKey)
    let script = names.map { "cat /sys/class/net/\(interface)/statistics/\($0)" }.joined(separator: "; ")
    let values = try namespace.exec(["sh", "-c", script]).out.split(separator: "\n").compactMap { UInt64($0) }
    guard values.count == names.count else { throw TestFailure("sysfs counters of \(interface): \(values)") }
    var counters = Counters()
    for (key, value) in zip(CounterKey.allCases, values) { counters[key] = value }
    return counters
}
