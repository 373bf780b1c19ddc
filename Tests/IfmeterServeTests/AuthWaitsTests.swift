import IfmeterSystem
import Synchronization
import Testing

@testable import IfmeterServe

/// Requests waiting for a verdict on their credentials, in-process: a
/// verdict resumes its request once, a delayed one when the tests' clock
/// says so, and a stop resumes every one still waiting.
@Suite struct AuthWaitsTests {
    private final class Log: Sendable {
        let entries = Mutex<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var list: [String] { entries.withLock { $0 } }
    }

    private func begin(_ waits: AuthWaits, _ name: String, _ log: Log) -> AuthWaits.Ticket? {
        waits.begin(suspend: { log.add("suspend \(name)") }, resume: { log.add("resume \(name) \($0)") })
    }

    @Test func aVerdictResumesItsRequestOnce() throws {
        let log = Log()
        let waits = AuthWaits()
        let ticket = try #require(begin(waits, "a", log))
        #expect(log.list == ["suspend a"])
        waits.finish(ticket, .allowed, nowMs: 0)
        waits.finish(ticket, .refused, nowMs: 0) // (a second verdict: let go of)
        #expect(log.list == ["suspend a", "resume a allowed"])
        #expect(waits.count == 0)
    }

    @Test func aDelayedVerdictWaitsForTheClock() throws {
        let log = Log()
        let pokes = Mutex(0)
        let waits = AuthWaits(wake: { pokes.withLock { $0 += 1 } })
        let early = try #require(begin(waits, "early", log))
        let late = try #require(begin(waits, "late", log))
        waits.finish(late, .refused, delayMs: 900, nowMs: 1000)
        waits.finish(early, .refused, delayMs: 300, nowMs: 1000)
        #expect(pokes.withLock { $0 } == 2) // the timer is told
        #expect(waits.fire(nowMs: 1299) == 1300)
        #expect(log.list == ["suspend early", "suspend late"])
        #expect(waits.fire(nowMs: 1300) == 1900)
        #expect(log.list.last == "resume early refused")
        #expect(waits.fire(nowMs: 5000) == nil)
        #expect(log.list.last == "resume late refused")
    }

    @Test func aStopResumesEveryWaitAndRefusesNewOnes() throws {
        let log = Log()
        let waits = AuthWaits()
        let judging = try #require(begin(waits, "judging", log))
        let delayed = try #require(begin(waits, "delayed", log))
        waits.finish(delayed, .refused, delayMs: 60_000, nowMs: 0)
        waits.close()
        #expect(Set(log.list.suffix(2)) == ["resume judging stopping", "resume delayed refused"])
        #expect(begin(waits, "late", log) == nil)
        waits.finish(judging, .allowed, nowMs: 0) // the check ends after the stop: nothing left to resume
        #expect(log.list.count == 4)
    }
}

/// The bcrypt pool with a check the test holds up: a bounded queue, the
/// idle-only submissions refused while a worker is busy, every check done
/// once, and the load counted.
@Suite struct CryptPoolTests {
    @Test func theQueueIsBoundedAndEveryCheckRunsOnce() throws {
        let gate = ConditionLock(false)
        let done = ConditionLock([Int32]())
        let started = ConditionLock(0)
        let pool = try CryptPool(workers: 1, maxQueued: 2) { password, _ in
            started.update { $0 += 1 }
            gate.wait(seconds: 60, until: { $0 }) { _, _ in }
            return password == Array("right".utf8) ? 1 : 0
        }
        let record: CryptPool.Done = { matched, _ in done.update { $0.append(matched) } }
        #expect(pool.submit(password: Array("right".utf8), hash: "h", onlyIfIdle: false, done: record))
        // The worker takes the first, then holds on the gate.
        #expect(started.wait(seconds: 60, until: { $0 == 1 }) { _, ready in ready })
        #expect(pool.load == 1)
        #expect(!pool.submit(password: [], hash: "h", onlyIfIdle: true, done: record)) // no worker idle
        #expect(pool.submit(password: Array("wrong".utf8), hash: "h", onlyIfIdle: false, done: record))
        #expect(pool.submit(password: Array("wrong".utf8), hash: "h", onlyIfIdle: false, done: record))
        #expect(pool.load == 3)
        #expect(!pool.submit(password: [], hash: "h", onlyIfIdle: false, done: record)) // queue full
        gate.update { $0 = true }
        let results = done.wait(seconds: 60, until: { $0.count == 3 }) { results, _ in results }
        #expect(results == [1, 0, 0])
        done.wait(seconds: 60, until: { _ in pool.load == 0 }) { _, _ in }
        #expect(pool.load == 0)
        #expect(pool.submit(password: [], hash: "h", onlyIfIdle: true, done: record)) // idle again
    }

    @Test func libcryptChecksABcryptHash() {
        // htpasswd -nbBC 4 u secret
        let hash = "$2y$04$Di5F9/yMmMpwuXLfPNbx7egYPrggtdSH/AKKRvccfDhUajp1jZreG"
        #expect(CryptPool.crypt(Array("secret".utf8), hash) == 1)
        #expect(CryptPool.crypt(Array("not it".utf8), hash) == 0)
    }
}
