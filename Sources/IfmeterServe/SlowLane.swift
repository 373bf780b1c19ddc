import IfmeterCore
import IfmeterSystem

/// Answers that take long (the usage tables of a five-year state file take
/// seconds) worked out on a thread of their own, one at a time, while
/// their connections are suspended: the HTTP threads never wait on them,
/// so a scrape is answered whatever the dashboard or a script asks. At
/// most `capacity` wait their turn; past that one is refused at once (the
/// caller answers 503), never queued without bound, and at most
/// `perClient` (waiting or being worked out) of one client address, so one
/// address cannot take every place. Stopping answers every
/// waiting one with `stopping` and waits for the one being worked out, as
/// libmicrohttpd must have no suspended connection when it stops.
package final class SlowLane: Sendable {
    package typealias Work = @Sendable () -> HTTPResponse

    private struct Job: Sendable {
        let work: Work
        let client: PeerAddress?
        let resume: @Sendable (HTTPResponse) -> Void
    }

    private struct State: Sendable {
        var waiting: [Job] = []
        /// Jobs waiting or being worked out, by client address.
        var byClient: [PeerAddress: Int] = [:]
        var working = false
        var closed = false
        var started = false
    }

    package let capacity: Int
    /// Places one client address may hold.
    package let perClient: Int
    private let state = ConditionLock(State())
    private let stopping: HTTPResponse

    package init(capacity: Int = 16, perClient: Int? = nil, stopping: HTTPResponse) {
        self.capacity = capacity
        self.perClient = perClient ?? max(1, capacity / 4)
        self.stopping = stopping
    }

    /// What `submit` says.
    package enum Admission: Sendable, Equatable {
        case accepted
        /// Full, stopping, or without a thread.
        case full
        /// This client address holds `perClient` places already.
        case clientFull
    }

    /// `submit` for a job of no known client address: true when accepted.
    package func submit(_ work: @escaping Work, suspend: () -> Void, resume: @escaping @Sendable (HTTPResponse) -> Void) -> Bool {
        submit(work, client: nil, suspend: suspend, resume: resume) == .accepted
    }

    /// Queues `work`: `suspend` (the connection's suspension) runs under the
    /// lock, so the answer cannot resume it first; `resume` runs once with
    /// the answer, on the lane's thread (or the stopping one). False when
    /// full or stopping, or when the lane's thread cannot start: answer at
    /// once then. `client`'s jobs count against its share (nil: none).
    package func submit(
        _ work: @escaping Work, client: PeerAddress?, suspend: () -> Void, resume: @escaping @Sendable (HTTPResponse) -> Void
    ) -> Admission {
        let (accepted, start) = state.update { state -> (Admission, Bool) in
            guard !state.closed, state.waiting.count < capacity else { return (.full, false) }
            if let client {
                guard state.byClient[client, default: 0] < perClient else { return (.clientFull, false) }
                state.byClient[client, default: 0] += 1
            }
            let start = !state.started
            state.started = true
            state.waiting.append(Job(work: work, client: client, resume: resume))
            suspend()
            return (.accepted, start)
        }
        if start {
            do {
                try startThread { [self] in run() }
            } catch {
                // No thread: every job queued so far is answered as stopping.
                let jobs = state.update { state -> [Job] in
                    defer {
                        state.waiting.removeAll()
                        state.byClient.removeAll()
                        state.started = false
                    }
                    return state.waiting
                }
                for job in jobs { job.resume(stopping) }
            }
        }
        return accepted
    }

    private static func done(_ job: Job, _ state: inout State) {
        guard let client = job.client, let n = state.byClient[client] else { return }
        state.byClient[client] = n > 1 ? n - 1 : nil
    }

    /// The lane's thread: one job at a time until stopped.
    private func run() {
        while true {
            let job = state.wait(seconds: 3600, until: { $0.closed || !$0.waiting.isEmpty }) { state, _ -> Job? in
                guard !state.closed, !state.waiting.isEmpty else { return nil }
                state.working = true
                return state.waiting.removeFirst()
            }
            guard let job else {
                if state.withLock({ $0.closed }) { return }
                continue
            }
            let answer = job.work()
            job.resume(answer)
            state.update { state in
                state.working = false
                Self.done(job, &state)
            }
        }
    }

    /// Stopping: no new jobs; the waiting ones are answered `stopping` now,
    /// and this returns once the one being worked out has been answered.
    package func close() {
        let waiting = state.update { state -> [Job] in
            state.closed = true
            defer {
                for job in state.waiting { Self.done(job, &state) }
                state.waiting.removeAll()
            }
            return state.waiting
        }
        for job in waiting { job.resume(stopping) }
        while !state.wait(seconds: 3600, until: { !$0.working }, then: { _, ready in ready }) {}
    }

    /// Jobs waiting or being worked out now.
    package var pending: Int { state.withLock { $0.waiting.count + ($0.working ? 1 : 0) } }
}
