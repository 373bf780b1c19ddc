import IfmeterModel
import IfmeterOutput
import IfmeterSystem
import Synchronization

/// Every open connection of a server: when it started waiting for a
/// request, whether a whole request has arrived (then it is busy with the
/// response, which the idle timeout guards), its client, and the response
/// being inflated for it. The policy that keeps slow or broken clients
/// from starving the others, apart from the sockets:
///
/// - **Eviction.** A new connection past the per-client or the overall
///   limit closes the oldest connection still waiting for its request (of
///   that client, for the per-client limit), so a fresh client is always
///   served.
/// - **The request deadline.** `sweep` closes connections whose request is
///   not whole by the deadline, however steadily they trickle bytes
///   (libmicrohttpd's own timeout restarts on every byte).
/// - **The send budget.** Each plain-text response inflated as the client
///   reads is charged what it holds; a new one past the budget closes the
///   connection whose response started first, until it fits.
///
/// Closing is `close(fd)`, shutdown(2) in the server: libmicrohttpd sees
/// the end of the stream and cleans up as usual (and reports the
/// connection closed, under this table's lock, before it closes the
/// descriptor, so a closed descriptor is never reused meanwhile). Time is
/// given in milliseconds of a monotonic clock, so tests move it.
package final class ConnectionTable: Sendable {
    package struct Limits: Sendable {
        package var connections: Int
        package var perClient: Int
        package var requestDeadlineMs: UInt64
        package var sendBudget: Int

        package init(connections: Int, perClient: Int, requestDeadlineMs: UInt64, sendBudget: Int) {
            self.connections = connections
            self.perClient = perClient
            self.requestDeadlineMs = requestDeadlineMs
            self.sendBudget = sendBudget
        }
    }

    /// A connection's entry.
    package typealias ID = UInt64
    /// A response's charge against the send budget.
    package typealias Charge = UInt64

    private struct Entry {
        var fd: Int32
        var client: PeerAddress?
        var sinceMs: UInt64 // start of the wait for the current request
        var busy = false // a whole request arrived; the response is going out
        var shut = false // already closed by the table
        var served = false // a response went out on it
        var started = false // a request line arrived since the last response
    }

    private struct State {
        var entries: [ID: Entry] = [:]
        var nextID: ID = 1
        var open = 0 // listed and not closed by the table
        var counts = HTTPConnectionCounts(deadline: 0, idle: 0, evicted: 0, budget: 0)
        var charges: [Charge: Charged] = [:]
        var nextCharge: Charge = 1
        var sendBytes = 0
    }

    /// A response being inflated: what it holds, for which connection
    /// (nil once that one closed, or sent another response meanwhile: then
    /// it is no longer the one to close), and since when.
    private struct Charged {
        var bytes: Int
        var connection: ID?
        var sinceMs: UInt64
    }

    package let limits: Limits
    private let state = Mutex(State())
    private let close: @Sendable (Int32) -> Void

    /// `close` shuts a connection's socket down.
    package init(limits: Limits, close: @escaping @Sendable (Int32) -> Void) {
        self.limits = limits
        self.close = close
    }

    /// A connection opened: listed, and room made for it when it is past a
    /// limit (it is closed itself when no other one waits for a request).
    package func opened(fd: Int32, client: PeerAddress?, nowMs: UInt64) -> ID {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.entries[id] = Entry(fd: fd, client: client, sinceMs: nowMs)
            state.open += 1
            if let client {
                let same = state.entries.values.count { !$0.shut && $0.client == client }
                if same > limits.perClient {
                    shut(oldestWaiting(state, client: client, except: id) ?? id, &state)
                    state.counts.evicted += 1
                }
            }
            if state.open > limits.connections {
                shut(oldestWaiting(state, client: nil, except: id) ?? id, &state)
                state.counts.evicted += 1
            }
            return id
        }
    }

    /// libmicrohttpd closed the connection: unlisted. A response of its
    /// still charged stays so until it is let go of (`release`).
    package func closed(_ id: ID) {
        state.withLock { state in
            guard let entry = state.entries.removeValue(forKey: id) else { return }
            if !entry.shut { state.open -= 1 }
            detachCharges(of: id, &state)
        }
    }

    /// A request line arrived: a deadline from here on is a slow request,
    /// not a kept-alive connection left idle.
    package func requestStarted(_ id: ID) {
        state.withLock { $0.entries[id]?.started = true }
    }

    /// The request is whole (a response is queued, or it waits for a
    /// verdict on its credentials): the deadline no longer applies.
    package func markBusy(_ id: ID) {
        state.withLock { $0.entries[id]?.busy = true }
    }

    /// A request ended (answered when `completed`, or aborted): the
    /// connection waits for the next one, under the deadline again.
    package func requestEnded(_ id: ID, completed: Bool, nowMs: UInt64) {
        state.withLock { state in
            guard var entry = state.entries[id] else { return }
            entry.busy = false
            entry.sinceMs = nowMs
            if completed { entry.served = true }
            entry.started = false
            state.entries[id] = entry
        }
    }

    /// Closes the connections whose request is not whole by the deadline.
    package func sweep(nowMs: UInt64) {
        state.withLock { state in
            for (id, entry) in state.entries
            where !entry.busy && !entry.shut && nowMs > entry.sinceMs && nowMs - entry.sinceMs > limits.requestDeadlineMs {
                shut(id, &state)
                // After a response with no request line since: a kept-alive
                // connection left idle (a scraper between scrapes).
                if entry.served && !entry.started { state.counts.idle += 1 } else { state.counts.deadline += 1 }
            }
        }
    }

    /// Charges `bytes` for a response being inflated for connection `id`,
    /// closing the connections whose response started first (other than
    /// this one) while it does not fit; the new one is charged in any case.
    package func charge(_ bytes: Int, for id: ID, nowMs: UInt64) -> Charge {
        state.withLock { state in
            while state.sendBytes + bytes > limits.sendBudget {
                let oldest = state.charges.filter { $0.value.connection.map { $0 != id } ?? false }
                    .min { ($0.value.sinceMs, $0.key) < ($1.value.sinceMs, $1.key) }
                guard let (charge, charged) = oldest else { break }
                // Its memory goes when libmicrohttpd sees the end of the
                // stream and lets go of the response, a moment later: not
                // counted since.
                release(charge, &state)
                shut(charged.connection!, &state)
                state.counts.budget += 1
            }
            // (A response of its before: not sent, and not its to close.)
            detachCharges(of: id, &state)
            let charge = state.nextCharge
            state.nextCharge += 1
            state.charges[charge] = Charged(bytes: bytes, connection: state.entries[id] == nil ? nil : id, sinceMs: nowMs)
            state.sendBytes += bytes
            return charge
        }
    }

    /// The response charged `charge` is let go of: its bytes leave the budget.
    package func release(_ charge: Charge) {
        state.withLock { release(charge, &$0) }
    }

    /// Connections closed by the table so far, by reason.
    package var counts: HTTPConnectionCounts { state.withLock { $0.counts } }
    /// Connections listed and not closed by the table.
    package var openCount: Int { state.withLock { $0.open } }
    /// Bytes charged to the send budget now.
    package var sendBytes: Int { state.withLock { $0.sendBytes } }

    private func release(_ charge: Charge, _ state: inout State) {
        if let charged = state.charges.removeValue(forKey: charge) { state.sendBytes -= charged.bytes }
    }

    private func detachCharges(of id: ID, _ state: inout State) {
        for (charge, charged) in state.charges where charged.connection == id { state.charges[charge]!.connection = nil }
    }

    /// Closes `id` once (a connection over the per-client limit may also
    /// be the only one left to evict for the overall limit).
    private func shut(_ id: ID, _ state: inout State) {
        guard let entry = state.entries[id], !entry.shut else { return }
        close(entry.fd)
        state.entries[id]!.shut = true
        state.open -= 1
    }

    /// The oldest connection still waiting for its request (of `client`
    /// when given), other than `except`.
    private func oldestWaiting(_ state: State, client: PeerAddress?, except: ID) -> ID? {
        state.entries.filter { id, entry in
            id != except && !entry.busy && !entry.shut && (client == nil || entry.client == client)
        }.min { ($0.value.sinceMs, $0.key) < ($1.value.sinceMs, $1.key) }?.key
    }
}
