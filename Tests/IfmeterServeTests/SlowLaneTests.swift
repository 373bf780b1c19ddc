import Foundation
import IfmeterSystem
import IfmeterTestSupport
import Synchronization
import Testing

@testable import IfmeterServe

/// The slow lane: answers that take long worked out off the HTTP threads,
/// one at a time, a bounded number waiting, all answered at a stop.
@Suite(.blocking) struct SlowLaneTests {
    /// A gate a job waits at until the test opens it.
    final class Gate: Sendable {
        private let open = ConditionLock(false)
        func wait() { open.wait(seconds: 60, until: { $0 }, then: { _, _ in }) }
        func release() { open.update { $0 = true } }
    }

    final class Answers: Sendable {
        let list = Mutex<[Int]>([])
        func add(_ response: HTTPResponse) { list.withLock { $0.append(response.status) } }
        var statuses: [Int] { list.withLock { $0 } }
    }

    static let stopping = HTTPResponse(status: 503, text: "stopping\n")

    @Test func aJobIsWorkedOutElsewhereAndResumesItsConnection() throws {
        let lane = SlowLane(capacity: 2, stopping: Self.stopping)
        let answers = Answers()
        var suspended = false
        let caller = pthread_self()
        let ranOn = Answers()
        let accepted = lane.submit(
            {
                ranOn.list.withLock { $0.append(pthread_equal(pthread_self(), caller) != 0 ? 1 : 0) }
                return HTTPResponse(status: 200, text: "done\n")
            }, suspend: { suspended = true },
            resume: { answers.add($0) })
        #expect(accepted)
        #expect(suspended, "suspended before submit returns")
        _ = try waitFor("the answer") { answers.statuses == [200] ? true : nil }
        #expect(ranOn.statuses == [0], "worked out on another thread")
        lane.close()
    }

    @Test func pastItsCapacityOneIsRefusedAndAStopAnswersEveryOne() throws {
        let lane = SlowLane(capacity: 2, stopping: Self.stopping)
        let gate = Gate()
        let answers = Answers()
        let started = Answers()
        func submit(_ status: Int) -> Bool {
            lane.submit(
                {
                    started.list.withLock { $0.append(status) }
                    gate.wait()
                    return HTTPResponse(status: status, text: "\(status)\n")
                }, suspend: {}, resume: { answers.add($0) })
        }
        #expect(submit(201))
        // The first is being worked out (it waits at the gate); two wait their turn.
        _ = try waitFor("the first at work") { started.statuses == [201] ? true : nil }
        #expect(submit(202))
        #expect(submit(203))
        #expect(!submit(204), "a third waiting one is refused")
        #expect(lane.pending == 3)
        // The stop answers the two waiting at once, then waits for the first.
        let closed = Answers()
        try startThread {
            lane.close()
            closed.list.withLock { $0.append(1) }
        }
        _ = try waitFor("the waiting ones answered") { answers.statuses == [503, 503] ? true : nil }
        #expect(closed.statuses.isEmpty, "the stop waits for the one at work")
        gate.release()
        _ = try waitFor("the stop") { closed.statuses == [1] ? true : nil }
        #expect(answers.statuses == [503, 503, 201])
        #expect(!submit(205), "nothing is taken after a stop")
    }

    /// One address holds at most its share of the places (waiting or being
    /// worked out): its next is refused while another address's is taken;
    /// an answer frees its place.
    @Test func oneAddressHoldsAtMostItsShare() throws {
        let lane = SlowLane(capacity: 8, stopping: Self.stopping)
        #expect(lane.perClient == 2)
        let gate = Gate()
        let answers = Answers()
        let a = PeerAddress(family: .ipv4, bytes: [127, 0, 0, 2])
        let b = PeerAddress(family: .ipv4, bytes: [127, 0, 0, 3])
        func submit(_ status: Int, _ client: PeerAddress) -> SlowLane.Admission {
            lane.submit(
                {
                    gate.wait()
                    return HTTPResponse(status: status, text: "\(status)\n")
                }, client: client, suspend: {}, resume: { answers.add($0) })
        }
        #expect(submit(201, a) == .accepted)
        #expect(submit(202, a) == .accepted)
        #expect(submit(203, a) == .clientFull, "a third from one address")
        #expect(submit(204, b) == .accepted, "another address's")
        #expect(lane.pending == 3)
        gate.release()
        _ = try waitFor("every answer") { answers.statuses.count == 3 ? true : nil }
        #expect(answers.statuses == [201, 202, 204])
        #expect(submit(205, a) == .accepted, "answered, its places are free again")
        _ = try waitFor("that answer") { answers.statuses.count == 4 ? true : nil }
        lane.close()
    }

    /// A free port on loopback (bound, then let go: the server takes it).
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw TestFailure("no free port: \(String(cString: strerror(errno)))") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// A server with one HTTP thread: while a slow answer is worked out,
    /// a scrape on that same thread is answered, then the slow one comes;
    /// one still waiting at the stop is answered 503.
    @Test func aSlowAnswerHoldsNoHTTPThread() throws {
        let port = try Self.freePort()
        let gate = Gate()
        var limits = HTTPLimits()
        limits.threads = 1
        let server = try HTTPServer(
            address: ListenAddress(host: "127.0.0.1", port: port), limits: limits, log: Log.everyLine { _ in },
            handler: { request in
                request.path == "/slow"
                    ? .later {
                        gate.wait()
                        return HTTPResponse(status: 200, text: "slow\n")
                    } : HTTPResponse(status: 200, text: "fast\n")
            })
        defer { server.stop() }
        let slow = try RawHTTP.connect("127.0.0.1", port, in: nil, timeout: 30)
        defer { close(slow) }
        try RawHTTP.send(slow, "GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        _ = try waitFor("the slow request at work") { server.slowRequests == 1 ? true : nil }
        let fast = try RawHTTP.request("/metrics", port: port, in: nil)
        #expect(fast.status == 200 && fast.text == "fast\n")
        gate.release()
        do {
            let answer = try RawHTTP.read(slow)
            #expect(answer.status == 200 && answer.text == "slow\n")
        } catch {
            Issue.record("the slow answer, once worked out: \(error)")
        }

        // At the stop, one still being worked out is answered first.
        let late = Gate()
        let server2 = try HTTPServer(
            address: ListenAddress(host: "127.0.0.1", port: try Self.freePort()), limits: limits, log: Log.everyLine { _ in },
            handler: { _ in
                .later {
                    late.wait()
                    return HTTPResponse(status: 200, text: "late\n")
                }
            })
        let waiting = try RawHTTP.connect("127.0.0.1", server2.address.port, in: nil, timeout: 30)
        defer { close(waiting) }
        let queued = try RawHTTP.connect("127.0.0.1", server2.address.port, in: nil, timeout: 30)
        defer { close(queued) }
        try RawHTTP.send(waiting, "GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        _ = try waitFor("the first at work") { server2.slowRequests == 1 ? true : nil }
        try RawHTTP.send(queued, "GET /b HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        _ = try waitFor("the second waiting") { server2.slowRequests == 2 ? true : nil }
        // Released once the stop has answered the waiting one (two become one).
        try startThread {
            let deadline = Date().addingTimeInterval(30)
            while server2.slowRequests != 1, Date() < deadline { usleep(10_000) }
            late.release()
        }
        server2.stop()
        // Each was resumed before libmicrohttpd stopped (else the stop would
        // not return): answered, unless the stop closed it first.
        for (fd, status) in [(queued, 503), (waiting, 200)] {
            if let answer = try? RawHTTP.read(fd) { #expect(answer.status == status) }
        }
        #expect(server2.slowRequests == 0)
    }
}
