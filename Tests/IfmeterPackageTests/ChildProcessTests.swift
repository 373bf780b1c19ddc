import Foundation
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The test support's child processes: what every other test runs its
/// programs through.
@Suite(.blocking)
struct ChildProcessTests {
    func openDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
    }

    /// A program that cannot start leaves none of run()'s pipes open (a
    /// failed start used to leak the read ends and the input's write end:
    /// three descriptors each time). Other tests open descriptors at the
    /// same time (eight run at once, a namespace's or a server's each), so
    /// the margin is below one per start, not below the others' count: a
    /// leak of one descriptor a start leaves 1,000 more.
    @Test func aFailedStartLeavesNoDescriptorOpen() throws {
        let before = try openDescriptors()
        for _ in 0..<1000 {
            #expect(throws: TestFailure.self) { try run(["ifmeter-no-such-program"], input: "x") }
        }
        let after = try openDescriptors()
        #expect(after - before < 1000, "\(after - before) more descriptors open after 1,000 failed starts")
    }

    /// While it runs, a child has no exit status: not 0, which would pass
    /// for a clean exit.
    @Test func aRunningChildHasNoExitStatus() throws {
        let child = try ChildProcess(["sleep", "30"])
        #expect(child.isRunning)
        #expect(child.terminationStatus == -1)
        #expect(child.terminationReason == .uncaughtSignal)
        child.forceStop()
        #expect(!child.isRunning)
        #expect(child.terminationReason == .uncaughtSignal && child.terminationStatus == SIGKILL)
    }

    /// A child whose test failed before waiting for it is killed and
    /// reaped when it goes away, not left running.
    @Test func aChildNobodyWaitedForIsStopped() throws {
        var pid: pid_t = 0
        do {
            let child = try ChildProcess(["sleep", "30"])
            pid = child.processIdentifier
        }
        #expect(kill(pid, 0) == -1 && errno == ESRCH, "sleep \(pid) still there")
    }

    @Test func exitCodesAndSignalsAreDecoded() throws {
        #expect(try run(["sh", "-c", "exit 7"], allowFailure: true).status == 7)
        let killed = try ChildProcess(["sh", "-c", "kill -TERM $$"])
        killed.waitUntilExit(timeout: 10)
        #expect(killed.terminationReason == .uncaughtSignal && killed.terminationStatus == SIGTERM)
        let exited = try ChildProcess(["sh", "-c", "exit 255"])
        exited.waitUntilExit(timeout: 10)
        #expect(exited.terminationReason == .exit && exited.terminationStatus == 255)
    }

    /// Input bigger than a pipe holds goes in whole while both outputs are
    /// read; a child that reads none of it does not stop the test run
    /// (SIGPIPE).
    @Test func bigInputAndOutputs() throws {
        let text = String(repeating: "0123456789abcdef\n", count: 64 * 1024)
        let echoed = try run(["sh", "-c", "tee /dev/stderr"], input: text)
        #expect(echoed.out == text && echoed.err == text)
        #expect(try run(["true"], input: text).status == 0)
    }

    /// A program past its time limit is killed and named.
    /// (`run` throws only when it kills: a `sleep 30` left to finish
    /// would return status 0, and the expectation fails without a clock.)
    @Test func aHungProgramIsKilledAfterItsLimit() throws {
        #expect(throws: TestFailure.self) { try run(["sleep", "30"], timeout: 1) }
    }
}
