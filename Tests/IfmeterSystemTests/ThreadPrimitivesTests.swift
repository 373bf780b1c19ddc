import IfmeterSystem
import Testing

/// IfmeterSystem's one thread, timer and condition primitive (what remote
/// write's sender sleeps on between pushes and retries). No test waits on
/// the clock: waits end on a condition, with a deadline far past any load.
@Suite struct ThreadPrimitivesTests {
    /// Far past any load; reached only when a test fails.
    static let deadline = 60.0

    @Test func aWakeEventSignalledBeforeTheWaitReturnsAtOnceAndClears() {
        let event = WakeEvent()
        #expect(!event.wait(0), "not signalled: a zero wait times out")
        event.signal()
        #expect(event.wait(Self.deadline), "signalled before the wait")
        #expect(!event.wait(0), "the wait cleared it")
        event.signal()
        event.signal()
        #expect(event.wait(0), "two signals are one wake-up")
        #expect(!event.wait(-1), "a negative wait is a zero one")
    }

    @Test func aThreadWaitingOnTheEventWakesWhenAnotherSignals() throws {
        let event = WakeEvent()
        // 0: not started; 1: waiting; 2: woke signalled; 3: timed out.
        let stage = ConditionLock(0)
        try startThread {
            stage.update { $0 = 1 }
            let woke = event.wait(Self.deadline)
            stage.update { $0 = woke ? 2 : 3 }
        }
        let started = stage.wait(seconds: Self.deadline, until: { $0 >= 1 }) { _, ready in ready }
        #expect(started)
        event.signal()
        let result = stage.wait(seconds: Self.deadline, until: { $0 >= 2 }) { value, _ in value }
        #expect(result == 2)
    }

    @Test func aConditionLockWaitEndsOnTheChangeOrAtItsTimeout() throws {
        let lock = ConditionLock([Int]())
        // Nothing changes: a short timeout ends the wait, not ready.
        let timedOut = lock.wait(seconds: 0.01, until: { !$0.isEmpty }) { _, ready in ready }
        #expect(!timedOut)
        // Four threads each add their number; the wait ends when all have.
        for n in 0..<4 { try startThread { lock.update { $0.append(n) } } }
        let all = lock.wait(seconds: Self.deadline, until: { $0.count == 4 }) { value, ready in ready ? value.sorted() : [] }
        #expect(all == [0, 1, 2, 3])
        // withLock changes without waking; the value is what it made.
        lock.withLock { $0 = [9] }
        #expect(lock.withLock { $0 } == [9])
    }
}
