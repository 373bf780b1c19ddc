import Foundation
import IfmeterSampling
import Synchronization

#if canImport(Glibc)
import Glibc
#endif
import IfmeterSystem

/// A real tunnel between the two namespaces of a veth pair: a tun in each
/// (`tA` 10.78.0.1 and `tB` 10.78.0.2, point to point), and a forwarder in
/// this process that carries each tun's packets as UDP over the veth (port
/// 5555 on both ends), as a VPN client does. Its underlay is the veth.
package final class UDPTunnel: @unchecked Sendable {
    package let pair: VethPair
    package let tunA: String, tunB: String
    package let ipA = "10.78.0.1", ipB = "10.78.0.2"
    package static let port: UInt16 = 5555
    private var fds: [Int32] = []
    /// What the forwarding threads share with this value; they hold it,
    /// not the tunnel, so the tunnel (and its namespaces) can go away.
    private final class Control: Sendable {
        let stopping = Atomic<Bool>(false)
        let finished = DispatchGroup()
        /// Packets the forwarder wrote into B's tun: carried all the way.
        let deliveredToB = Atomic<Int>(0)
    }
    private let control = Control()

    package init(over pair: VethPair, tunA: String = "tA", tunB: String = "tB") throws {
        self.pair = pair
        self.tunA = tunA
        self.tunB = tunB
        let tunnelA = try pair.a.openTun(tunA), tunnelB = try pair.b.openTun(tunB)
        fds = [tunnelA, tunnelB]
        for (ns, tun, local, peer) in [(pair.a, tunA, ipA, ipB), (pair.b, tunB, ipB, ipA)] {
            try ns.ip("addr", "add", local + "/32", "peer", peer + "/32", "dev", tun)
            try ns.ip("link", "set", tun, "up")
        }
        let socketA = try NetworkNamespace.perform(in: pair.a.name) { try udpSocket(bindTo: pair.ipA, port: Self.port) }
        let socketB = try NetworkNamespace.perform(in: pair.b.name) { try udpSocket(bindTo: pair.ipB, port: Self.port) }
        fds += [socketA, socketB]
        // tun -> UDP to the other end; UDP -> tun.
        start { [pair] buffer in try Self.carry(from: tunnelA, buffer) { try Self.send($0, on: socketA, to: pair.ipB) } }
        start { [pair] buffer in try Self.carry(from: tunnelB, buffer) { try Self.send($0, on: socketB, to: pair.ipA) } }
        start { buffer in try Self.carry(from: socketA, buffer) { _ = write(tunnelA, $0.baseAddress, $0.count) } }
        start { [control] buffer in
            try Self.carry(from: socketB, buffer) {
                if write(tunnelB, $0.baseAddress, $0.count) > 0 { control.deliveredToB.add(1, ordering: .relaxed) }
            }
        }
    }

    deinit { stop() }

    /// Stops the forwarder and closes the tuns (which deletes them).
    package func stop() {
        guard !control.stopping.exchange(true, ordering: .relaxed) else { return }
        control.finished.wait()
        for fd in fds { close(fd) }
    }

    private func start(_ body: @escaping @Sendable (UnsafeMutableRawBufferPointer) throws -> Bool) {
        let control = self.control
        control.finished.enter()
        Thread.detachNewThread {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 8)
            defer {
                buffer.deallocate()
                control.finished.leave()
            }
            while !control.stopping.load(ordering: .relaxed) {
                guard (try? body(buffer)) == true else { continue }
            }
        }
    }

    /// Waits up to 50 ms for one packet on `fd` and hands it on.
    private static func carry(from fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, _ forward: (UnsafeRawBufferPointer) throws -> Void) throws
        -> Bool
    {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 50) == 1 else { return false }
        let n = read(fd, buffer.baseAddress, buffer.count)
        guard n > 0 else { return false }
        try forward(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
        return true
    }

    private static func send(_ packet: UnsafeRawBufferPointer, on fd: Int32, to ip: String) throws {
        var to = sockaddrIn(ip, port)
        _ = withUnsafePointer(to: &to) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, packet.baseAddress, packet.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }

    /// Sends `count` UDP datagrams of `payload` bytes from A to `ip` (B's
    /// end of the tunnel or of the veth) at `port`, where a socket in B
    /// receives them (so no ICMP comes back).
    /// Returns once the forwarder carried them all into B's tun, when A's
    /// route to `ip` is the tunnel.
    package func sendUDP(to ip: String, port: UInt16, count: Int, payload: Int) throws {
        let throughTheTunnel = try pair.a.ip("route", "get", ip).contains(" dev \(tunA) ")
        let before = control.deliveredToB.load(ordering: .relaxed)
        // Paced, so that the forwarder's socket buffers never drop.
        try IfmeterTestSupport.sendUDP(from: pair.a, to: ip, in: pair.b, port: port, count: count, payload: payload, pace: 200)
        guard throughTheTunnel else { return }
        // The last datagrams through the forwarder.
        _ = try waitFor("\(count) datagrams to \(ip) through the tunnel") {
            control.deliveredToB.load(ordering: .relaxed) - before >= count ? true : nil
        }
    }
}
