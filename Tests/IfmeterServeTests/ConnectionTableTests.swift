import IfmeterModel
import IfmeterOutput
import IfmeterSystem
import Synchronization
import Testing

@testable import IfmeterServe

/// The connection table's policy in-process, with no socket: which
/// connection a limit, the request deadline or the send budget closes.
/// Time is the tests' own (milliseconds handed in).
@Suite struct ConnectionTableTests {
    /// The descriptors the table closed, in order.
    private final class Closed: Sendable {
        let fds = Mutex<[Int32]>([])
        var list: [Int32] { fds.withLock { $0 } }
    }

    private func table(connections: Int = 10, perClient: Int = 10, deadlineMs: UInt64 = 5000, budget: Int = 1000) -> (ConnectionTable, Closed) {
        let closed = Closed()
        let table = ConnectionTable(
            limits: .init(connections: connections, perClient: perClient, requestDeadlineMs: deadlineMs, sendBudget: budget),
            close: { fd in closed.fds.withLock { $0.append(fd) } })
        return (table, closed)
    }

    private let a = PeerAddress(family: .ipv4, bytes: [192, 0, 2, 1])
    private let b = PeerAddress(family: .ipv4, bytes: [192, 0, 2, 2])

    @Test func aNewConnectionPastTheLimitClosesTheOldestStillWaiting() {
        let (table, closed) = table(connections: 3)
        let first = table.opened(fd: 10, client: a, nowMs: 100)
        _ = table.opened(fd: 11, client: b, nowMs: 200)
        _ = table.opened(fd: 12, client: a, nowMs: 300)
        table.markBusy(first) // answering: not evictable
        _ = table.opened(fd: 13, client: b, nowMs: 400)
        #expect(closed.list == [11])
        #expect(table.counts.evicted == 1)
        #expect(table.openCount == 3)
    }

    @Test func thePerClientLimitClosesThatClientsOldest() {
        let (table, closed) = table(perClient: 2)
        _ = table.opened(fd: 10, client: a, nowMs: 100)
        _ = table.opened(fd: 11, client: b, nowMs: 50)
        _ = table.opened(fd: 12, client: a, nowMs: 200)
        _ = table.opened(fd: 13, client: a, nowMs: 300)
        #expect(closed.list == [10]) // not b's, older as it is
        #expect(table.counts.evicted == 1)
    }

    @Test func withNoOtherWaitingTheNewOneIsClosedItself() {
        let (table, closed) = table(connections: 1)
        let first = table.opened(fd: 10, client: a, nowMs: 100)
        table.markBusy(first)
        _ = table.opened(fd: 11, client: b, nowMs: 200)
        #expect(closed.list == [11])
        #expect(table.openCount == 1)
    }

    @Test func equalTimesCloseTheFirstOpened() {
        let (table, closed) = table(connections: 2)
        _ = table.opened(fd: 10, client: a, nowMs: 100)
        _ = table.opened(fd: 11, client: a, nowMs: 100)
        _ = table.opened(fd: 12, client: a, nowMs: 100)
        #expect(closed.list == [10])
    }

    @Test func theDeadlineClosesASlowRequestAndAnIdleKeptAliveOneApart() {
        let (table, closed) = table(deadlineMs: 5000)
        let slow = table.opened(fd: 10, client: a, nowMs: 0)
        table.requestStarted(slow)
        let kept = table.opened(fd: 11, client: a, nowMs: 0)
        table.requestStarted(kept)
        table.markBusy(kept)
        table.requestEnded(kept, completed: true, nowMs: 1000) // then nothing
        let busy = table.opened(fd: 12, client: a, nowMs: 0)
        table.markBusy(busy)
        table.sweep(nowMs: 5000)
        #expect(closed.list.isEmpty) // not past it yet
        table.sweep(nowMs: 5001)
        #expect(closed.list == [10])
        table.sweep(nowMs: 6001)
        #expect(closed.list == [10, 11])
        #expect(table.counts == HTTPConnectionCounts(deadline: 1, idle: 1, evicted: 0, budget: 0))
        table.sweep(nowMs: 60_000) // a busy one only the idle timeout guards; closed ones once
        #expect(closed.list == [10, 11])
    }

    @Test func aClosedConnectionLeavesTheTable() {
        let (table, closed) = table(connections: 1)
        let first = table.opened(fd: 10, client: a, nowMs: 0)
        table.closed(first)
        _ = table.opened(fd: 11, client: a, nowMs: 1)
        #expect(closed.list.isEmpty)
        #expect(table.openCount == 1)
    }

    @Test func theSendBudgetClosesTheResponseThatStartedFirst() {
        let (table, closed) = table(budget: 1000)
        let one = table.opened(fd: 10, client: a, nowMs: 0)
        let two = table.opened(fd: 11, client: a, nowMs: 0)
        let three = table.opened(fd: 12, client: a, nowMs: 0)
        let first = table.charge(400, for: one, nowMs: 10)
        _ = table.charge(400, for: two, nowMs: 20)
        #expect(table.sendBytes == 800)
        _ = table.charge(400, for: three, nowMs: 30)
        #expect(closed.list == [10])
        #expect(table.counts.budget == 1)
        #expect(table.sendBytes == 800)
        table.release(first) // its memory, let go of later: not counted twice
        #expect(table.sendBytes == 800)
    }

    @Test func aResponseOverTheWholeBudgetIsServedAnyway() {
        let (table, closed) = table(budget: 100)
        let one = table.opened(fd: 10, client: a, nowMs: 0)
        let charge = table.charge(500, for: one, nowMs: 0)
        #expect(closed.list.isEmpty)
        #expect(table.sendBytes == 500)
        table.release(charge)
        #expect(table.sendBytes == 0)
    }

    @Test func aReleasedResponseIsNoLongerClosedForTheBudget() {
        let (table, closed) = table(budget: 1000)
        let one = table.opened(fd: 10, client: a, nowMs: 0)
        let two = table.opened(fd: 11, client: a, nowMs: 0)
        table.release(table.charge(600, for: one, nowMs: 0))
        _ = table.charge(600, for: two, nowMs: 1)
        #expect(closed.list.isEmpty)
        #expect(table.sendBytes == 600)
    }

    /// Only a connection's current response is the one to close for the
    /// budget: not one it sent before, nor one of a connection that closed
    /// (both still charged until let go of).
    @Test func onlyAnOpenConnectionsCurrentResponseIsClosedForTheBudget() {
        let (table, closed) = table(budget: 700)
        let one = table.opened(fd: 10, client: a, nowMs: 0)
        let two = table.opened(fd: 11, client: a, nowMs: 0)
        let three = table.opened(fd: 12, client: a, nowMs: 0)
        _ = table.charge(300, for: one, nowMs: 1) // then replaced by
        _ = table.charge(300, for: one, nowMs: 5)
        _ = table.charge(300, for: two, nowMs: 2)
        table.closed(two)
        _ = table.charge(300, for: three, nowMs: 6)
        // Over the budget still, with nothing else to close: served anyway.
        #expect(closed.list == [10], "the only current response of another open connection")
        #expect(table.counts.budget == 1)
        #expect(table.sendBytes == 900)
    }

    @Test func theClientKeyCutsIPv6ToItsSlash64AndMapsIPv4() {
        let v4 = BasicAuthenticator.Client(PeerAddress(family: .ipv4, bytes: [10, 0, 0, 1]))
        #expect(v4 == BasicAuthenticator.Client(high: 0, low: 0x0000_ffff_0a00_0001))
        let host1 = PeerAddress(family: .ipv6, bytes: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, 1])
        let host2 = PeerAddress(family: .ipv6, bytes: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1] + [9, 9, 9, 9, 9, 9, 9, 9])
        #expect(BasicAuthenticator.Client(host1) == BasicAuthenticator.Client(host2))
        let mapped = PeerAddress(family: .ipv6, bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1])
        #expect(BasicAuthenticator.Client(mapped) == v4)
    }
}
