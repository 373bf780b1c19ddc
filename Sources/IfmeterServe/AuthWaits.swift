import Synchronization

/// Requests suspended until a verdict on their credentials: a request's
/// connection leaves libmicrohttpd's polling (no thread waits) until its
/// verdict resumes it, at once or after a delay (an unknown user is
/// answered as late as a wrong password would be). Stopping resumes every
/// request still waiting, as libmicrohttpd must have no suspended
/// connection when it stops. Time is given in milliseconds of a monotonic
/// clock, so tests move it; the server's timer calls `fire`.
package final class AuthWaits: Sendable {
    /// What a wait ended with.
    package enum Verdict: Sendable, Equatable {
        case allowed, refused
        /// No room to verify now: 503.
        case busy
        /// The server stops.
        case stopping
    }

    package typealias Ticket = UInt64

    private struct Wait {
        var resume: @Sendable (Verdict) -> Void
        var timed: (verdict: Verdict, dueMs: UInt64)?
    }

    private struct State {
        var waits: [Ticket: Wait] = [:]
        var next: Ticket = 1
        var closed = false
    }

    private let state = Mutex(State())
    private let wake: @Sendable () -> Void

    /// `wake` tells the timer that a delayed verdict is due sooner than it
    /// thought.
    package init(wake: @escaping @Sendable () -> Void = {}) {
        self.wake = wake
    }

    /// Registers a wait: `suspend` (the connection's suspension) runs under
    /// the lock, so no verdict can resume it first; `resume` runs once with
    /// the verdict. Nil when stopping: answer at once then.
    package func begin(suspend: () -> Void, resume: @escaping @Sendable (Verdict) -> Void) -> Ticket? {
        state.withLock { state in
            guard !state.closed else { return nil }
            let ticket = state.next
            state.next += 1
            state.waits[ticket] = Wait(resume: resume)
            suspend()
            return ticket
        }
    }

    /// Gives the wait its verdict: resumed now, or once `delayMs` have
    /// passed after `nowMs`. Once per ticket, from any thread; a ticket the
    /// stop already resumed is let go of.
    package func finish(_ ticket: Ticket, _ verdict: Verdict, delayMs: UInt64 = 0, nowMs: UInt64) {
        let timed = state.withLock { state -> Bool in
            guard var wait = state.waits[ticket] else { return false }
            if delayMs > 0 {
                wait.timed = (verdict, nowMs + delayMs)
                state.waits[ticket] = wait
                return true
            }
            state.waits[ticket] = nil
            wait.resume(verdict)
            return false
        }
        if timed { wake() }
    }

    /// Resumes the waits whose delay is up; the time the next one is due.
    @discardableResult
    package func fire(nowMs: UInt64) -> UInt64? {
        state.withLock { state in
            var next: UInt64?
            for (ticket, wait) in state.waits {
                guard let timed = wait.timed else { continue }
                if timed.dueMs <= nowMs {
                    state.waits[ticket] = nil
                    wait.resume(timed.verdict)
                } else {
                    next = min(next ?? timed.dueMs, timed.dueMs)
                }
            }
            return next
        }
    }

    /// Stopping: no new waits; every one still waiting is resumed now, with
    /// the verdict it was given or `.stopping`. A verification still running
    /// finds its ticket gone.
    package func close() {
        state.withLock { state in
            state.closed = true
            for (_, wait) in state.waits { wait.resume(wait.timed?.verdict ?? .stopping) }
            state.waits.removeAll()
        }
    }

    /// Requests waiting now.
    package var count: Int { state.withLock { $0.waits.count } }
}
