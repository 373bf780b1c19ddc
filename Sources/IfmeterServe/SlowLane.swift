import IfmeterCore
import IfmeterSystem

/// Answers that take long (the usage tables of a five-year state file take
/// seconds) worked out on a thread of their own, one at a time, while
/// their connections are suspended: the HTTP threads never wait on them,
/// so a scrape is answered whatever the dashboard or a script asks. At
/// most `capacity` wait their turn; past that one is refused at once (the
/// caller answers 503), never queued without bound. Stopping answers every
/// waiting one with `stopping` and waits for the one being worked out, as
/// libmicrohttpd must have no suspended connection when it stops.
public final class SlowLane: Sendable {
    public typealias Work = @Sendable () -> HTTPResponse

    private struct Job: Sendable {
        let work: Work
        let resume: @Sendable (HTTPResponse) -> Void
    }

    private struct State: Sendable {
        var waiting: [Job] = []
        var working = false
        var closed = false
        var started = false
    }

    public let capacity: Int
    private let state = ConditionLock(State())
    private let stopping: HTTPResponse

    public init(capacity: Int = 16, stopping: HTTPResponse) {
        self.capacity = capacity
        self.stopping = stopping
    }

    /// Queues `work`: `suspend` (the connection's suspension) runs under the
    /// lock, so the answer cannot resume it first; `resume` runs once with
    /// the answer, on the lane's thread (or the stopping one). False when
    /// full or stopping, or when the lane's thread cannot start: answer at
    /// once then.
    public func submit(_ work: @escaping Work, suspend: () -> Void, resume: @escaping @Sendable (HTTPResponse) -> Void) -> Bool {
        let (accepted, start) = state.update { state -> (Bool, Bool) in
            guard !state.closed, state.waiting.count < capacity else { return (false, false) }
            let start = !state.started
            state.started = true
            state.waiting.append(Job(work: work, resume: resume))
            suspend()
            return (true, start)
        }
        if start {
            do {
                try startThread { [self] in run() }
            } catch {
                // No thread: every job queued so far is answered as stopping.
                let jobs = state.update { state -> [Job] in
                    defer {
                        state.waiting.removeAll()
                        state.started = false
                    }
                    return state.waiting
                }
                for job in jobs { job.resume(stopping) }
            }
        }
        return accepted
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
            state.update { $0.working = false }
        }
    }

    /// Stopping: no new jobs; the waiting ones are answered `stopping` now,
    /// and this returns once the one being worked out has been answered.
    public func close() {
        let waiting = state.update { state -> [Job] in
            state.closed = true
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for job in waiting { job.resume(stopping) }
        while !state.wait(seconds: 3600, until: { !$0.working }, then: { _, ready in ready }) {}
    }

    /// Jobs waiting or being worked out now.
    public var pending: Int { state.withLock { $0.waiting.count + ($0.working ? 1 : 0) } }
}
