// The `.blocking` trait: tests that hold a thread while they wait (on a
// child process, a namespace's traffic, a server, a designed pause) run on
// threads of their own instead of Swift concurrency's cooperative pool.
//
// Swift Testing runs every test as a task on that pool, which has one
// thread per core. A synchronous test that waits for a process holds one of
// those threads for as long as it waits, so on this two-core machine two
// such tests ran at a time and the others, the pure unit tests among them,
// queued behind them: the run took the sum of the waits over two. With the
// trait each test case waits on a thread of its own, at most `Lanes.width`
// test cases at once, and the pool stays free for the tests that compute.
import Foundation

// A build with the static Swift library (`make bench`'s release build of
// every target) has no Testing module; nothing there runs tests.
#if canImport(Testing)
import Testing

/// Runs each test case of the suite or test it is given to on threads of
/// its own, at most `BlockingTrait.width` of them at once (the rest wait
/// without holding a thread). For tests that start processes, make
/// namespaces or otherwise wait on the outside world.
package struct BlockingTrait: TestTrait, SuiteTrait, TestScoping {
    /// How many blocking test cases run at once: `IFMETER_TEST_LANES`, or
    /// two per core. They mostly wait, but what they wait on (ifmeter, a
    /// Prometheus, Chromium, a namespace's traffic) shares the cores: at
    /// four per core both cores stayed near 100 % and about one run in two
    /// lost a test whose deadline or scenario assumed fewer at once.
    package static let width: Int = {
        if let text = ProcessInfo.processInfo.environment["IFMETER_TEST_LANES"], let lanes = Int(text), lanes > 0 {
            return lanes
        }
        return max(2, 2 * ProcessInfo.processInfo.activeProcessorCount)
    }()

    static let lanes = Lanes(width: width)

    package var isRecursive: Bool { true }

    /// A scope for each test case only: a suite holding a lane while its
    /// tests wait for one could leave none free.
    package func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Given twice (a suite's and a test's own), the second is a no-op:
        // taking a second lane could leave every lane held by a test
        // waiting for another.
        if Self.inLane {
            try await function()
            return
        }
        await Self.lanes.take()
        let start = ContinuousClock.now
        defer {
            Self.lanes.give()
            LaneLog.shared?.record(test: test, testCase: testCase, held: ContinuousClock.now - start)
        }
        try await Self.$inLane.withValue(true) {
            try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) {
                try await function()
            }
        }
    }

    @TaskLocal static var inLane = false

    /// Records an issue when a test that is not `.blocking` is about to
    /// block its thread on `what` (the helpers that start processes, make
    /// namespaces and poll call this). Threads a test starts itself are
    /// not checked: only the test's own task holds a pool thread.
    package static func expectLane(_ what: @autoclosure () -> String) {
        guard !inLane, let test = Test.current, withUnsafeCurrentTask(body: { $0 != nil }) else { return }
        Issue.record(
            "\(what()) in a test that is not .blocking: it would hold one of the cooperative pool's few threads. Add .blocking to its @Suite.",
            sourceLocation: test.sourceLocation)
    }
}

extension Trait where Self == BlockingTrait {
    /// The test's cases wait on threads of their own (see `BlockingTrait`).
    package static var blocking: Self { BlockingTrait() }
}

/// With `IFMETER_TEST_LANE_LOG=FILE`, each blocking test case appends how
/// long it held its lane (seconds, a tab, the test's name; "(…)" for one case of several) to
/// FILE: `sort -rn FILE | head` shows which waits make the run long.
final class LaneLog: @unchecked Sendable {
    static let shared: LaneLog? = ProcessInfo.processInfo.environment["IFMETER_TEST_LANE_LOG"].flatMap(LaneLog.init(path:))
    private let lock = NSLock()
    private let handle: FileHandle

    /// Appends: make test runs swift test twice, and both runs' cases count.
    init?(path: String) {
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
        handle.seekToEndOfFile()
        self.handle = handle
    }

    func record(test: Test, testCase: Test.Case?, held: Duration) {
        let seconds = Double(held.components.seconds) + Double(held.components.attoseconds) / 1e18
        let arguments = testCase?.isParameterized == true ? "…" : ""
        let line = String(format: "%.3f", seconds) + "\t\(test.id)(\(arguments))\n"
        lock.lock()
        defer { lock.unlock() }
        handle.write(Data(line.utf8))
    }
}

/// A counting semaphore whose waiters suspend instead of blocking; first
/// come, first served.
final class Lanes: @unchecked Sendable {
    private let lock = NSLock()
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { free = width }

    func take() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.lock()
            if free > 0 {
                free -= 1
                lock.unlock()
                continuation.resume()
            } else {
                waiting.append(continuation)
                lock.unlock()
            }
        }
    }

    func give() {
        lock.lock()
        if waiting.isEmpty {
            free += 1
            lock.unlock()
        } else {
            let next = waiting.removeFirst()
            lock.unlock()
            next.resume()
        }
    }
}

/// A task executor that runs every job it is given on a new thread, so a
/// job that blocks holds no other job up. Jobs of a blocking test are few
/// (its start and each resumption after an await).
final class ThreadPerJobExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = ThreadPerJobExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let thread = Thread { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
#else
/// Without the Testing module (a static release build), nothing to check.
package enum BlockingTrait {
    package static func expectLane(_ what: @autoclosure () -> String) {}
}
#endif
