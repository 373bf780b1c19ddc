import CIfmeterHTTP
import IfmeterCore
import IfmeterSystem

/// bcrypt verifications on a few threads of their own, off the request
/// path: a queue of at most `maxQueued` checks, `workers` at a time. The
/// queue's lock is held only to take or add a check, never while one runs.
package final class CryptPool: Sendable {
    /// Whether a password (no NUL) matches a hash: 1 yes, 0 no, -1 when the
    /// hash cannot be checked.
    package typealias Check = @Sendable (_ password: [UInt8], _ hash: String) -> Int32
    /// Called on a pool thread when a check is done: what it said and how
    /// long it took, in nanoseconds.
    package typealias Done = @Sendable (_ matched: Int32, _ nanoseconds: UInt64) -> Void

    private struct Job: Sendable {
        var password: [UInt8]
        var hash: String
        var done: Done
    }

    private struct State: Sendable {
        var queue: [Job] = []
        var running = 0
        var released = false
    }

    private enum Next {
        case job(Job)
        case wait
        case end
    }

    package let workers: Int
    package let maxQueued: Int
    private let state = ConditionLock(State())

    /// Starts `workers` threads (at least one). Throws when none can start.
    /// `clock` (seconds) times each check.
    package init(
        workers: Int, maxQueued: Int, check: @escaping Check = CryptPool.crypt,
        clock: @escaping @Sendable () -> Double = monotonicSeconds
    ) throws(SystemError) {
        self.maxQueued = maxQueued
        var started = 0
        var firstError: SystemError?
        for _ in 0..<max(1, workers) {
            do throws(SystemError) {
                try startThread { [state, check] in Self.work(state, check, clock) }
                started += 1
            } catch {
                firstError = firstError ?? error
            }
        }
        if started == 0 { throw firstError ?? SystemError(call: "pthread_create", message: "no thread") }
        self.workers = started
    }

    /// The threads finish what is queued and end.
    deinit { state.update { $0.released = true } }

    /// Queues a check of `password` against `hash`; with `onlyIfIdle`,
    /// refused unless a worker is free now. True when queued (`done` will
    /// run once), false when refused (full or busy: `done` will not run).
    package func submit(password: [UInt8], hash: String, onlyIfIdle: Bool, done: @escaping Done) -> Bool {
        state.update { state in
            let refused =
                state.released || state.queue.count >= maxQueued
                || (onlyIfIdle && (!state.queue.isEmpty || state.running >= workers))
            if !refused { state.queue.append(Job(password: password, hash: hash, done: done)) }
            return !refused
        }
    }

    /// Checks queued or running.
    package var load: Int { state.withLock { $0.queue.count + $0.running } }

    private static func work(_ state: ConditionLock<State>, _ check: Check, _ clock: @Sendable () -> Double) {
        while true {
            let next = state.wait(seconds: 3600, until: { !$0.queue.isEmpty || $0.released }) { state, ready -> Next in
                guard ready else { return .wait }
                guard !state.queue.isEmpty else { return .end } // released, and nothing left to do
                state.running += 1
                return .job(state.queue.removeFirst())
            }
            switch next {
            case .wait: continue
            case .end: return
            case .job(var job):
                let started = clock()
                let matched = check(job.password, job.hash)
                let took = UInt64(max(0, (clock() - started) * 1e9))
                for i in job.password.indices { job.password[i] = 0 }
                job.done(matched, took)
                state.update { $0.running -= 1 }
            }
        }
    }

    /// libcrypt's verdict (crypt_rn, compared in constant time).
    package static let crypt: Check = { password, hash in
        guard cryptLoaded else { return -1 }
        var copy = password + [0]
        defer { for i in copy.indices { copy[i] = 0 } }
        return copy.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { cifm_crypt_matches($0.baseAddress!, hash) }
        }
    }

    private static let cryptLoaded = cifm_crypt_load() == 0
}
