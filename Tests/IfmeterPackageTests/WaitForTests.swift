import Foundation
import IfmeterTestSupport
import Testing

/// The tests' own waiting: `waitFor` polls until a condition holds, an
/// error meaning "not yet", but a `WaitAborted` ends it at once (a child
/// that exited cannot make the condition true: waiting out the deadline
/// only made a broken test take a minute to fail). Judged by how often the
/// body ran, not by the clock.
@Suite(.blocking) struct WaitForTests {
    struct NotYet: Error {}

    final class Calls: @unchecked Sendable {
        var count = 0
    }

    @Test func otherErrorsMeanNotYet() throws {
        let calls = Calls()
        let value = try waitFor("the third try", every: 0.001) { () throws -> Int? in
            calls.count += 1
            if calls.count < 3 { throw NotYet() }
            return calls.count
        }
        #expect(value == 3 && calls.count == 3)
    }

    @Test func anAbortEndsTheWaitAtTheFirstTry() throws {
        let calls = Calls()
        do {
            // (A deadline of its own: were the abort taken for "not yet",
            // the test would fail after 5 s, not the default 60.)
            _ = try waitFor("something a dead child would do", timeout: 5, every: 0.001) { () throws -> Bool? in
                calls.count += 1
                throw WaitAborted("the child exited: its log")
            }
            Issue.record("waitFor returned")
        } catch let failure as TestFailure {
            #expect(failure.description == "waiting for something a dead child would do: the child exited: its log")
        }
        #expect(calls.count == 1, "the body ran \(calls.count) times")
    }

    /// What the waits on a child call: it ends a wait once the child has
    /// exited, naming it and giving its log.
    @Test func aBackgroundThatExitedEndsTheWait() throws {
        let child = try Background(["sh", "-c", "echo gone >&2"], name: "short-lived")
        child.process.waitUntilExit()
        let calls = Calls()
        do {
            _ = try waitFor("a line that will not come", timeout: 5, every: 0.001) { () throws -> Bool? in
                calls.count += 1
                try child.requireRunning()
                return nil
            }
            Issue.record("waitFor returned")
        } catch let failure as TestFailure {
            #expect(failure.description == "waiting for a line that will not come: short-lived exited: gone\n", "\(failure)")
        }
        #expect(calls.count == 1, "the body ran \(calls.count) times")
    }

    /// A child's CPU time from /proc while it runs and from its rusage
    /// once reaped (ChildProcess, beside waitFor: what the CPU-time stop
    /// test stands on): the same figure either side of its end.
    @Test func aChildsCPUTimeIsReadRunningAndReaped() throws {
        // Some CPU in a shell loop, then sleep: its CPU time stops moving,
        // to be read while it still runs.
        let child = try ChildProcess(["sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exec sleep 60"])
        defer { child.forceStop() }
        let running = try waitFor("the loop's CPU time, read while it sleeps") { () throws -> Double? in
            guard child.isRunning else { throw WaitAborted("the shell exited") }
            let comm = child.whileRunning { pid in try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) }
            guard comm == "sleep\n", let seconds = child.cpuSeconds else { return nil }
            return seconds
        }
        #expect(running > 0, "the loop used some CPU")
        child.signal(SIGTERM)
        child.waitUntilExit()
        #expect(!child.isRunning)
        #expect(child.whileRunning { $0 } == nil, "no /proc reading once it has ended")
        let reaped = try #require(child.cpuSeconds, "CPU time after the end")
        // /proc counts in clock ticks (10 ms), rusage in microseconds.
        #expect(abs(reaped - running) < 0.05, "running \(running) s, reaped \(reaped) s")
    }
}
