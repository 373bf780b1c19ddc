// Every program a test starts goes through here: started as a user's shell
// would start it, and never waited for without a limit, so a hung child is
// a failed test that names it rather than a test run that never ends.
import CIfmeterTestSupport
import Foundation
import IfmeterCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif
import IfmeterSystem

/// A program the test started (`spawn`: no signal blocked, only stdin,
/// stdout and stderr inherited).
package final class ChildProcess: Sendable {
    package enum TerminationReason: Sendable { case exit, uncaughtSignal }

    package let processIdentifier: pid_t
    /// The command line, for messages.
    package let command: String
    /// Running, or reaped with its wait status (nil: reaped by someone
    /// else, the status unknown). Reaping and signalling happen under the
    /// lock: two threads never reap twice, and a signal never goes to a
    /// pid that was reaped (and may have been reused).
    private let reaped = Mutex<Reaped?>(nil)
    private struct Reaped {
        var status: Int32?
        /// User and system CPU seconds, all its threads (wait4's rusage).
        var cpuSeconds: Double?
    }

    /// Starts `arguments` (the program is searched in PATH) with stdin,
    /// stdout and stderr on the given descriptors (nil: /dev/null).
    package init(_ arguments: [String], stdin: Int32? = nil, stdout: Int32? = nil, stderr: Int32? = nil) throws {
        command = arguments.joined(separator: " ")
        BlockingTrait.expectLane("Starting \(arguments.first ?? "a process")")
        do {
            processIdentifier = try Self.spawn(arguments, stdio: [stdin, stdout, stderr])
        } catch {
            throw TestFailure("cannot start \(command): \(error)")
        }
    }

    /// Starts `arguments` (searched in PATH) as a user's shell would: no
    /// signal blocked, every signal at its default (in the test run's
    /// process group, so ^C on it stops them all), with stdin, stdout and
    /// stderr on `stdio`'s descriptors (nil: /dev/null) and every other
    /// descriptor closed. The caller's thread may block signals (Dispatch
    /// and Swift concurrency threads do), and a child that inherited that
    /// mask would ignore SIGINT and SIGTERM and not be stopped by SIGTTOU.
    private static func spawn(_ arguments: [String], stdio: [Int32?]) throws(SystemError) -> pid_t {
        func check(_ rc: Int32, _ call: String) throws(SystemError) {
            if rc != 0 { throw .system(call, code: rc) }
        }
        var actions = posix_spawn_file_actions_t()
        try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, fd) in stdio.enumerated() {
            let target = Int32(target)
            if let fd {
                try check(posix_spawn_file_actions_adddup2(&actions, fd, target), "posix_spawn_file_actions_adddup2(\(fd), \(target))")
            } else {
                try check(
                    posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0),
                    "posix_spawn_file_actions_addopen(\(target), /dev/null)")
            }
        }
        try check(cifm_spawn_closefrom(&actions, 3), "posix_spawn_file_actions_addclosefrom_np(3)")
        var attributes = posix_spawnattr_t()
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        try check(posix_spawnattr_setsigmask(&attributes, &none), "posix_spawnattr_setsigmask")
        try check(posix_spawnattr_setsigdefault(&attributes, &all), "posix_spawnattr_setsigdefault")
        try check(posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)), "posix_spawnattr_setflags")
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        try check(posix_spawnp(&pid, argv[0]!, &actions, &attributes, argv, environ), "posix_spawnp(\(arguments.first ?? ""))")
        return pid
    }

    /// Reaps the child if it has exited; true when it has.
    private func poll() -> Bool {
        reaped.withLock { Self.reap(processIdentifier, &$0) }
    }

    private static func reap(_ pid: pid_t, _ state: inout Reaped?) -> Bool {
        if state != nil { return true }
        var raw: Int32 = 0
        var usage = rusage()
        let rc = wait4(pid, &raw, WNOHANG, &usage)
        if rc == pid {
            func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
            state = Reaped(status: raw, cpuSeconds: seconds(usage.ru_utime) + seconds(usage.ru_stime))
            return true
        }
        // ECHILD: reaped elsewhere (never here); gone, how is unknown.
        if rc < 0, errno == ECHILD { state = Reaped(status: nil); return true }
        return false
    }

    package var isRunning: Bool { !poll() }

    /// The CPU seconds it has used, user and system, all its threads: read
    /// from /proc while it runs, from its rusage once it has ended. CPU
    /// time, unlike wall time, does not grow with the machine's load. Nil
    /// when it cannot be read. /proc is read holding the lock that reaps
    /// it: the pid cannot be reaped, and reused, meanwhile.
    package var cpuSeconds: Double? {
        whileRunning(Self.processorSeconds) ?? reaped.withLock { $0?.cpuSeconds }
    }

    /// User and system seconds from /proc/PID/stat.
    private static func processorSeconds(_ processIdentifier: pid_t) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(processIdentifier)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return nil }
        // After "(comm)": state is field 3, utime 14 and stime 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Waits up to `timeout` seconds; returns false when it is still running.
    package func wait(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var pause = 0.001
        while !poll() {
            if Date() >= deadline { return false }
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 2, 0.02)
        }
        return true
    }

    /// Whether the child has `signal` blocked or caught (/proc's SigBlk
    /// and SigCgt): a stop signal sent before then ends it by the
    /// signal's default action, as any program that has not yet set up
    /// its handling, and says nothing of how it stops. Nil once it ended
    /// or when /proc cannot be read.
    package func handles(_ signal: Int32) -> Bool? {
        whileRunning { pid in
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
            let bit = UInt64(1) << UInt64(signal - 1)
            for line in status.split(separator: "\n") where line.hasPrefix("SigBlk:") || line.hasPrefix("SigCgt:") {
                guard let mask = UInt64(line.split(separator: "\t").last ?? "", radix: 16) else { return nil }
                if mask & bit != 0 { return true }
            }
            return false
        }
    }

    /// Sends `signal` to the child while it runs.
    package func signal(_ signal: Int32) {
        reaped.withLock { state in
            if !Self.reap(processIdentifier, &state) { kill(processIdentifier, signal) }
        }
    }

    /// Kills the child and reaps it.
    package func forceStop() {
        signal(SIGKILL)
        _ = wait(timeout: 10)
    }

    /// Waits for the child to exit; one that is still running after
    /// `timeout` seconds is killed, and its status then says so (signal
    /// 9), which fails the test that expected an exit.
    package func waitUntilExit(timeout: Double = ChildProcess.defaultTimeout) {
        if !wait(timeout: timeout) { forceStop() }
    }

    /// The wait status; nil while it runs (or when it was reaped elsewhere).
    private var rawStatus: Int32? { poll() ? reaped.withLock { $0?.status } : nil }

    /// How it ended; `.uncaughtSignal` too while it runs (no exit yet).
    package var terminationReason: TerminationReason {
        guard let raw = rawStatus else { return .uncaughtSignal }
        return raw & 0x7F == 0 ? .exit : .uncaughtSignal
    }

    /// The exit code, or the signal that ended it (as Foundation's Process);
    /// -1 while it runs, so that no test takes a child it never saw end
    /// for one that exited 0.
    package var terminationStatus: Int32 {
        guard let raw = rawStatus else { return -1 }
        return raw & 0x7F == 0 ? (raw >> 8) & 0xFF : raw & 0x7F
    }

    /// A child nobody waited for (its test failed first) is killed and
    /// reaped: no process left running, no zombie.
    deinit {
        if isRunning { forceStop() }
    }

    /// How long any one program a test runs may take before it is killed.
    package static let defaultTimeout: Double = 180

    /// The timeout, in milliseconds, of the poll(2) the child's main thread
    /// is blocked in; nil while it runs or is blocked in anything else.
    /// ifmeter polls only to wait between samples (sleepUntil, the live
    /// screen's keys): a sampler blocked in poll took the sample before the
    /// wait, and takes the next one only once that poll returns. Read from
    /// /proc/PID/syscall (poll on x86_64; ppoll, its timeout read from the
    /// child's memory, on arm64).
    package var pollTimeout: Int? { whileRunning { pid in Self.pollTimeout(pid) } }

    /// `body`'s reading of the child's /proc, taken holding the lock that
    /// reaps it: not once it has ended (the pid may be another process's by
    /// then), and it cannot be reaped meanwhile.
    package func whileRunning<T: Sendable>(_ body: (pid_t) -> T?) -> T? {
        reaped.withLock { state -> T? in Self.reap(processIdentifier, &state) ? nil : body(processIdentifier) }
    }

    private static func pollTimeout(_ processIdentifier: pid_t) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(processIdentifier)/syscall", encoding: .utf8) else { return nil }
        // The number in decimal, then the arguments in hexadecimal.
        let words = text.split(separator: " ")
        guard words.count >= 4, let number = Int(words[0]) else { return nil }
        let fields = words.map { UInt64($0.dropFirst(2), radix: 16) }
        #if arch(x86_64)
        guard number == 7, let timeout = fields[3] else { return nil }
        return Int(Int32(truncatingIfNeeded: timeout))
        #elseif arch(arm64)
        guard number == 73, let address = fields[3], address != 0 else { return nil }
        let memory = open("/proc/\(processIdentifier)/mem", O_RDONLY | O_CLOEXEC)
        guard memory >= 0 else { return nil }
        defer { close(memory) }
        var spec = timespec()
        guard pread(memory, &spec, MemoryLayout<timespec>.size, off_t(bitPattern: address)) == MemoryLayout<timespec>.size else { return nil }
        return spec.tv_sec * 1000 + spec.tv_nsec / 1_000_000
        #else
        return nil
        #endif
    }
}

/// Runs a program and returns its stdout and stderr; throws with its
/// stderr when it fails, and when it has not finished within `timeout`
/// seconds (it is killed then).
@discardableResult
package func run(
    _ arguments: [String], input: String? = nil, allowFailure: Bool = false,
    timeout: Double = ChildProcess.defaultTimeout
) throws -> (out: String, err: String, status: Int32) {
    _ = ignoreSIGPIPE
    // Every descriptor is closed on every way out, a failed start included.
    var descriptors: [Int32] = []
    defer { descriptors.forEach { close($0) } }
    func pipePair() throws -> (read: Int32, write: Int32) {
        let pipe = try closeOnExecPipe()
        descriptors += [pipe.read, pipe.write]
        return pipe
    }
    func closeNow(_ fd: Int32) {
        close(fd)
        descriptors.removeAll { $0 == fd }
    }
    let out = try pipePair(), err = try pipePair()
    let inPipe = try input.map { _ in try pipePair() }
    let child: ChildProcess
    do {
        defer {
            closeNow(out.write)
            closeNow(err.write)
            if let inPipe { closeNow(inPipe.read) }
        }
        child = try ChildProcess(arguments, stdin: inPipe?.read, stdout: out.write, stderr: err.write)
    }
    var pending = Array((input ?? "").utf8)[...]
    var inFD = inPipe?.write ?? -1
    if inFD >= 0 { _ = fcntl(inFD, F_SETFL, fcntl(inFD, F_GETFL) | O_NONBLOCK) }
    var open = [out.read, err.read]
    var collected: [Int32: [UInt8]] = [out.read: [], err.read: []]
    let deadline = Date().addingTimeInterval(timeout)
    var buffer = [UInt8](repeating: 0, count: 65536)
    // Reads both outputs (and feeds the input) together, so neither pipe
    // fills while the other is read.
    while !open.isEmpty || inFD >= 0 {
        let left = deadline.timeIntervalSinceNow
        if left <= 0 { break }
        var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        if inFD >= 0 { fds.append(pollfd(fd: inFD, events: Int16(POLLOUT), revents: 0)) }
        let ready = Glibc.poll(&fds, nfds_t(fds.count), Int32(min(left, 1) * 1000))
        if ready < 0, errno != EINTR { break }
        for entry in fds where entry.revents != 0 {
            if entry.fd == inFD {
                let n = pending.withUnsafeBytes { write(inFD, $0.baseAddress, $0.count) }
                if n > 0 { pending = pending.dropFirst(n) }
                if pending.isEmpty || (n < 0 && errno != EAGAIN && errno != EINTR) {
                    closeNow(inFD)
                    inFD = -1
                }
            } else {
                let n = read(entry.fd, &buffer, buffer.count)
                if n > 0 {
                    collected[entry.fd]!.append(contentsOf: buffer[..<n])
                } else if n == 0 || errno != EINTR {
                    open.removeAll { $0 == entry.fd }
                }
            }
        }
    }
    let text = { (fd: Int32) in String(decoding: collected[fd]!, as: UTF8.self) }
    if !open.isEmpty || !child.wait(timeout: max(deadline.timeIntervalSinceNow, 0)) {
        child.forceStop()
        throw TestFailure(
            "\(child.command) did not finish within \(Int(timeout)) s and was killed; "
                + "stdout so far: \(text(out.read).suffix(2000).debugDescription), "
                + "stderr so far: \(text(err.read).suffix(2000).debugDescription)")
    }
    let result = (text(out.read), text(err.read), child.terminationStatus)
    if !allowFailure, result.2 != 0 {
        throw TestFailure("\(child.command) exited \(result.2): \(result.1)")
    }
    return result
}

/// A pipe whose two ends are closed on exec (pipe2), so that no child a
/// test starts meanwhile on another thread holds one.
func closeOnExecPipe() throws -> (read: Int32, write: Int32) {
    var fds: [Int32] = [-1, -1]
    guard cifm_pipe_cloexec(&fds) == 0 else { throw TestFailure("\(SystemError.system("pipe2"))") }
    return (fds[0], fds[1])
}

/// A child that exits before reading all its input must not kill the
/// test process with SIGPIPE (children start with it at its default).
let ignoreSIGPIPE: Void = { signal(SIGPIPE, SIG_IGN) }()

/// Runs a program that leaves a daemon behind (tmux) and waits for it:
/// with every descriptor but /dev/null closed, so the daemon holds none
/// of the test's pipes.
package func runDetached(_ arguments: [String]) throws {
    let child = try ChildProcess(arguments)
    child.waitUntilExit()
    if child.terminationStatus != 0 || child.terminationReason != .exit {
        throw TestFailure("\(child.command) failed (status \(child.terminationStatus))")
    }
}
