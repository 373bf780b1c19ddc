#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterPipeline
import IfmeterSampling
import Synchronization

/// Writes whole strings to a file descriptor, retrying partial writes, so a
/// line is never left half-written by an interrupted call.
enum Output {
    static func put(_ text: String, to fd: Int32 = 1) throws(CLIError) {
        var bytes = Array(text.utf8)
        if bytes.isEmpty { return }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .runtime("write failed: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
        bytes.removeAll()
    }

    /// stderr: one line, errors ignored (there is nowhere else to report).
    static func error(_ line: String) {
        try? put(line + "\n", to: 2)
    }

    static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }
}

/// SIGINT and SIGTERM ask the running command to stop at its next wait.
///
/// Single-threaded commands install a handler (`install`). Commands that
/// start threads call `block` first: the threads inherit the blocked mask,
/// so a signal stays pending for the main thread, which takes it in
/// `sleepUntil` with sigtimedwait (a handler could run on any thread and
/// leave the main thread asleep).
enum StopSignal {
    static let received = Atomic<Int32>(0)
    static let blocked = Atomic<Bool>(false)

    static var stopSignals: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        return set
    }

    static func install() {
        // A parent may have started us with these blocked (threads of
        // Dispatch-based programs block them, and exec keeps the mask).
        var unblock = stopSignals
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        for sig in [SIGINT, SIGTERM] {
            var action = sigaction()
            #if canImport(Glibc)
            action.__sigaction_handler.sa_handler = { signal in StopSignal.received.store(signal, ordering: .relaxed) }
            #else
            action.__sigaction_u.__sa_handler = { signal in StopSignal.received.store(signal, ordering: .relaxed) }
            #endif
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0  // no SA_RESTART: a sleep returns at once
            sigaction(sig, &action, nil)
        }
    }

    /// Blocks SIGINT and SIGTERM in this thread and every thread it starts
    /// from now on; `sleepUntil` then takes them.
    static func block() {
        var set = stopSignals
        pthread_sigmask(SIG_BLOCK, &set, nil)
        blocked.store(true, ordering: .relaxed)
    }

    static var requested: Bool { received.load(ordering: .relaxed) != 0 }
}

/// Sleeps until `deadline` on the monotonic clock; returns false when a stop
/// signal came first.
func sleepUntil(_ deadline: Double) -> Bool {
    if StopSignal.blocked.load(ordering: .relaxed) {
        var set = StopSignal.stopSignals
        while !StopSignal.requested {
            let remaining = deadline - monotonicSeconds()
            if remaining <= 0 { return true }
            var timeout = timespec(tv_sec: Int(remaining), tv_nsec: Int((remaining - Double(Int(remaining))) * 1e9))
            let signal = sigtimedwait(&set, nil, &timeout)
            if signal > 0 { StopSignal.received.store(signal, ordering: .relaxed) }
        }
        return false
    }
    var ts = timespec(tv_sec: Int(deadline), tv_nsec: Int((deadline - Double(Int(deadline))) * 1e9))
    while !StopSignal.requested {
        let rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil)
        if rc == 0 { return !StopSignal.requested }
        if rc != EINTR { return !StopSignal.requested }
    }
    return false
}

/// The machine's host name.
func hostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown" }
    return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Reads a whole file as bytes. Missing files are usage errors (the argument
/// names nothing); other failures are runtime errors.
func readWholeFile(_ path: String, command: String) throws(CLIError) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 {
        let code = errno
        if code == ENOENT { throw .usage("no such file '\(path)'", command: command) }
        throw .runtime("cannot open '\(path)': \(String(cString: strerror(code)))")
    }
    defer { close(fd) }
    var st = stat()
    if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
        throw .usage("'\(path)' is a folder, not a file", command: command)
    }
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw .runtime("cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        if n == 0 { break }
        data.append(contentsOf: chunk[..<n])
    }
    return data
}

/// What a system error means for a person, by errno.
enum Describe {
    /// Why a file cannot be written into its folder.
    static func folderProblem(_ error: SystemError, for path: String) -> String {
        let folder = AtomicFile.folder(of: path)
        switch error.errno {
        case ENOENT: return "the folder \(folder) does not exist"
        case ENOTDIR: return "\(folder) is not a folder"
        case EACCES, EPERM: return "no permission to write in \(folder) (\(error.call): \(error.message))"
        default: return "cannot write in \(folder): \(error.message)"
        }
    }
}
