// `make bench`: the cost of one full sample at 10, 100, 1000 and 4000
// interfaces (veth pairs in a namespace made for the run), for ifmeter's
// samplers side by side with minimal C loops: the raw RTM_GETSTATS dump
// (the practical limit), the raw RTM_GETLINK dump and /proc/net/dev.
import CIfmeterLinux
import Glibc
import IfmeterCore
import IfmeterSampling

func fail(_ message: String) -> Never {
    let line = Array("ifmeter-bench: \(message)\n".utf8)
    _ = write(2, line, line.count)
    exit(1)
}

/// Runs a program and waits; returns its exit status.
@discardableResult
func spawn(_ arguments: [String], quiet: Bool = true) -> Int32 {
    var pid = pid_t()
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if quiet { posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0) }
    let argv = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let rc = posix_spawnp(&pid, arguments[0], &actions, nil, argv, environ)
    guard rc == 0 else { fail("cannot run \(arguments[0]): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

func now() -> Double { monotonicSeconds() }

/// Removes `ifmbench-PID` namespaces whose process is gone.
func removeStaleNamespaces() {
    guard let dir = opendir("/run/netns") else { return }
    var stale: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafePointer(to: entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
        }
        guard name.hasPrefix("ifmbench-"), let pid = Int32(name.dropFirst("ifmbench-".count)) else { continue }
        if kill(pid, 0) != 0 && errno == ESRCH { stale.append(name) }
    }
    closedir(dir)
    for name in stale { spawn(["ip", "netns", "del", name]) }
}

/// Runs every method once per round, in a rotating order, until each has
/// run `minRounds` times and about `budget` seconds have passed; returns the
/// median seconds per call of each. Interleaving keeps a slow phase of the
/// machine from landing on one method only.
func measure(_ methods: [(String, () throws -> Void)], budget: Double = 2.5, minRounds: Int = 25) throws -> [Row] {
    for (_, body) in methods { try body() }  // warm up: caches, first catalog fill
    var times = [[Double]](repeating: [], count: methods.count)
    let start = now()
    var round = 0
    while round < minRounds || now() - start < budget {
        for offset in methods.indices {
            let m = (round + offset) % methods.count
            let t0 = now()
            try methods[m].1()
            times[m].append(now() - t0)
        }
        round += 1
        if round >= 2000 { break }
    }
    return methods.indices.map { m in
        let sorted = times[m].sorted()
        return Row(method: methods[m].0, seconds: sorted[sorted.count / 2])
    }
}

let namespace = "ifmbench-\(getpid())"
guard geteuid() == 0 else { fail("needs root to create the namespace \(namespace) and its veth pairs") }
// Namespaces left by an earlier run that was killed.
removeStaleNamespaces()
guard geteuid() == 0 else { fail("needs root to create the namespace \(namespace) and its veth pairs") }
guard spawn(["ip", "netns", "add", namespace]) == 0 else { fail("ip netns add \(namespace) failed") }
atexit { spawn(["ip", "netns", "del", "ifmbench-\(getpid())"]) }
signal(SIGINT) { _ in exit(130) }
signal(SIGTERM) { _ in exit(143) }

/// Adds veth pairs until the namespace holds `total` interfaces (with lo);
/// returns the number of pairs.
func grow(to total: Int, from pairs: Int) -> Int {
    let namespace = "ifmbench-\(getpid())"
    let wanted = total / 2
    guard wanted > pairs else { return pairs }
    let path = "/tmp/\(namespace).batch"
    var text = ""
    for n in pairs..<wanted { text += "link add b\(n)x type veth peer name b\(n)y\n" }
    guard let file = fopen(path, "w") else { fail("cannot write \(path)") }
    fputs(text, file)
    fclose(file)
    defer { unlink(path) }
    guard spawn(["ip", "-n", namespace, "-batch", path]) == 0 else { fail("ip -batch failed at \(wanted) pairs") }
    return wanted
}

struct Row {
    var method: String
    var seconds: Double
}

let sizes = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let targets = sizes.isEmpty ? [10, 100, 1000, 4000] : sizes
print("ifmeter-bench: one full sample, median of repeated runs; \(targets.map(String.init).joined(separator: ", ")) interfaces")
print("(veth pairs in namespace \(namespace), plus lo; interface counts include lo)")
var rssLine = ""
var pairs = 0
for target in targets {
    pairs = grow(to: target, from: pairs)
    let count = 1 + 2 * pairs
    let rows: [Row] = try NetworkNamespace.perform(in: namespace) {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 16, alignment: 8)
        defer { buffer.deallocate() }
        let fd = cifm_raw_netlink_open(1 << 20)
        guard fd >= 0 else { fail("netlink socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var seq: UInt32 = 1
        var sum: UInt64 = 0
        func check(_ n: Int, _ what: String) {
            if n != count { fail("\(what) saw \(n) interfaces, expected \(count)") }
        }
        let procBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: 8 << 20)
        defer { procBuffer.deallocate() }
        let netlink = try NetlinkSampler(options: SamplerOptions(sysfs: nil))
        let portable = try GetifaddrsSampler(options: SamplerOptions(sysfs: nil))
        var engine = DeltaEngine()
        let sample = try netlink.sample()
        var t = sample.time
        // The sampler and its practical limit alternate, so both see the
        // same machine; the other methods run in blocks of their own (run
        // between the others, they would find the caches cold).
        return try measure([
            ("raw RTM_GETSTATS dump (C)", {
                seq += 1
                check(cifm_raw_getstats_dump(fd, buffer, 1 << 16, seq, &sum), "RTM_GETSTATS")
            }),
            ("ifmeter netlink sampler", { check(try netlink.sample().interfaces.count, "netlink sampler") }),
        ]) + measure([("raw RTM_GETLINK dump (C)", {
                seq += 1
                check(cifm_raw_getlink_dump(fd, buffer, 1 << 16, seq, &sum), "RTM_GETLINK")
            })], budget: 1)
            + measure([("read /proc/net/dev (C)", { check(cifm_raw_proc_net_dev(procBuffer, 8 << 20, &sum), "/proc/net/dev") })], budget: 1)
            + measure([("libnl link cache refill", { try netlink.refreshCatalog() })], budget: 1)
            + measure([("ifmeter getifaddrs sampler", { check(try portable.sample().interfaces.count, "getifaddrs sampler") })], budget: 1)
            + measure([("delta engine, one sample", {
                t += 1
                engine.apply(Sample(time: t, interfaces: sample.interfaces))
            })], budget: 1)
    }
    let raw = rows[0].seconds
    print("")
    print("\(count) interfaces")
    print("  " + "method".padding(30) + "us/sample".leftPadding(12) + "us/iface".leftPadding(10) + "x raw GETSTATS".leftPadding(16))
    for row in rows {
        print("  " + row.method.padding(30) + Units.fixed(row.seconds * 1e6, 1).leftPadding(12)
            + Units.fixed(row.seconds * 1e6 / Double(count), 3).leftPadding(10)
            + Units.fixed(row.seconds / raw, 2).leftPadding(16))
    }
    fflush(nil)
    if target == targets.last {
        // Peak RSS of a whole `ifmeter sample` run at this size.
        let binary = CommandLine.arguments[0].split(separator: "/").dropLast().joined(separator: "/")
        let path = (CommandLine.arguments[0].hasPrefix("/") ? "/" : "") + binary + "/ifmeter"
        let words: [String] = ["ip", "netns", "exec", namespace, path, "sample"]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { word in strdup(word) } + [nil]
        defer { argv.forEach { free($0) } }
        var peak = 0
        let status = cifm_run_peak_rss(argv, &peak)
        if status != 0 { fail("ifmeter sample exited \(status)") }
        rssLine = "peak RSS of 'ifmeter sample' at \(count) interfaces: \(Units.fixed(Double(peak) / 1024, 1)) MiB (target: under 20 MB)"
    }
}
print("")
print(rssLine)
print("anchors measured for the issue at 4001 interfaces: RTM_GETSTATS 0.8 ms, /proc/net/dev 3.5 ms, RTM_GETLINK 6.3 ms,")
print("libnl cache refill 24 ms, getifaddrs 32 ms, node_exporter netdev scrape 267 ms; target: netlink sampler within 1.5x of RTM_GETSTATS")

extension String {
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
    func leftPadding(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
