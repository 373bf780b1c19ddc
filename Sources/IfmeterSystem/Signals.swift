#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import Synchronization

/// Writes all of `bytes` to `fd`, retrying partial and interrupted writes,
/// so a line is never left half-written.
public func writeAll(_ bytes: [UInt8], to fd: Int32) throws(SystemError) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 {
            if errno == EINTR { continue }
            throw SystemError.system("write")
        }
        offset += n
    }
}

/// Whether `fd` is a terminal.
public func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

/// An environment variable, when set.
public func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

/// What every run starts with, before it opens anything.
public enum ProcessStart {
    /// Standard descriptors that are closed (`2>&-`, `>&-`) are opened on
    /// /dev/null first: otherwise the first file ifmeter opens would take
    /// that number, and a log line or a report meant for stderr or stdout
    /// would land in a JSON Lines file or a socket. SIGPIPE is ignored: a
    /// reader that went away makes a write fail (EPIPE), and the command
    /// stops as on any failed write, with its last save, instead of dying.
    public static func prepare() {
        for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            let opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY)
            // open gives the lowest free number, which is `fd`; anything
            // else is moved there.
            if opened >= 0, opened != fd {
                _ = dup2(opened, fd)
                _ = close(opened)
            }
        }
        signal(SIGPIPE, SIG_IGN)
    }
}

/// The one signal mechanism: every handler sets a flag and writes a byte to
/// one self-pipe that every wait polls, so a wait returns at once.
///
/// SIGINT, SIGTERM, SIGQUIT, SIGUSR2 and SIGALRM ask the running command to
/// stop at its next wait (a clean stop: the last period written, the state
/// saved). SIGHUP and SIGUSR1, where a command installs `hangup` (serve,
/// export), ask it to save and reopen its output files, and it goes on (for
/// logrotate); elsewhere they stop it too. SIGWINCH, for the live view,
/// says the terminal was resized. Commands that start threads (serve)
/// `block` the signals first, so the threads inherit them blocked, then
/// `install`, which unblocks them in the calling thread only: the handler
/// then always runs on the waiting thread.
public enum StopSignal {
    public static let received = Atomic<Int32>(0)
    public static let hangups = Atomic<Int>(0)
    public static let resized = Atomic<Bool>(false)
    nonisolated(unsafe) public static var pipe: (read: Int32, write: Int32) = (-1, -1)

    /// Signals that stop a command cleanly, with its last save: the usual
    /// three, and SIGUSR2 and SIGALRM, whose default would kill it with no
    /// save. (SIGUSR1 reopens files where SIGHUP does, and stops elsewhere.)
    public static let stopping = [SIGINT, SIGTERM, SIGQUIT, SIGUSR2, SIGALRM]
    /// SIGHUP and SIGUSR1 save and reopen (serve, export; installed with
    /// `hangup`).
    public static let reopens = Atomic<Bool>(false)
    /// SIGHUP stops like SIGTERM (installed with `hangupStops`).
    public static let hangupStops = Atomic<Bool>(false)

    static func set(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        return set
    }

    /// `hangup`: SIGHUP and SIGUSR1 save and reopen instead of ending the
    /// process. `hangupStops`: SIGHUP (the terminal or the session went)
    /// stops it cleanly, with a last save, instead of killing it.
    /// `resize`: SIGWINCH is taken too (the live view).
    public static func install(hangup: Bool = false, hangupStops: Bool = false, resize: Bool = false) {
        if hangupStops { Self.hangupStops.store(true, ordering: .relaxed) }
        if hangup { Self.reopens.store(true, ordering: .relaxed) }
        openPipe()
        // SIGUSR1 is always taken (logrotate configs copied from nginx's
        // send it): it reopens where SIGHUP does, and stops elsewhere.
        var signals = stopping + [SIGUSR1] + (hangup || hangupStops ? [SIGHUP] : [])
        for sig in signals { handle(sig, with: signalHandler) }
        if resize {
            handle(SIGWINCH, with: resizeHandler)
            signals.append(SIGWINCH)
        }
        // A parent may have started us with these blocked (threads of
        // Dispatch-based programs block them, and exec keeps the mask).
        var unblock = set(signals)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }

    /// Asks for a stop from code (the terminal went away), as a signal does.
    public static func request() {
        received.store(SIGTERM, ordering: .relaxed)
        wake()
    }

    /// Blocks the stop signals and SIGHUP in this thread and every thread it
    /// starts from now on; `install` then unblocks them in this thread alone.
    public static func block() {
        var blocked = set(stopping + [SIGHUP, SIGUSR1])
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
    }

    public static var requested: Bool { received.load(ordering: .relaxed) != 0 }

    /// Whether a SIGHUP (or a reopening SIGUSR1) came since the last call.
    public static func takeHangup() -> Bool {
        hangups.exchange(0, ordering: .relaxed) != 0
    }

    /// Whether a SIGWINCH came since the last call.
    public static func takeResize() -> Bool { resized.exchange(false, ordering: .relaxed) }

    /// Takes the wake-up bytes, so the pipe is quiet again.
    public static func drainWakeups() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(pipe.read, &buffer, buffer.count) > 0 {}
    }

    static func openPipe() {
        guard pipe.read < 0 else { return }
        var fds: [Int32] = [-1, -1]
        #if canImport(Glibc)
        let made = Glibc.pipe(&fds) == 0
        #else
        let made = Darwin.pipe(&fds) == 0
        #endif
        guard made else { return }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        pipe = (fds[0], fds[1])
    }

    /// Installs `handler` for `sig`; `resetOnce` puts the default back
    /// after the first (for crash signals that re-raise themselves).
    static func handle(_ sig: Int32, with handler: @convention(c) (Int32) -> Void, resetOnce: Bool = false) {
        var action = sigaction()
        #if canImport(Glibc)
        action.__sigaction_handler.sa_handler = handler
        #else
        action.__sigaction_u.__sa_handler = handler
        #endif
        sigemptyset(&action.sa_mask)
        // No SA_RESTART: a wait returns at once.
        action.sa_flags = resetOnce ? Int32(truncatingIfNeeded: SA_RESETHAND) : 0
        sigaction(sig, &action, nil)
    }
}

/// Async-signal-safe: one byte to the pipe.
private func wake() {
    var byte: UInt8 = 1
    _ = write(StopSignal.pipe.write, &byte, 1)
}

private let signalHandler: @convention(c) (Int32) -> Void = { signal in
    let reopen =
        signal == SIGUSR1
        ? StopSignal.reopens.load(ordering: .relaxed)
        : signal == SIGHUP && !StopSignal.hangupStops.load(ordering: .relaxed)
    if reopen {
        StopSignal.hangups.add(1, ordering: .relaxed)
    } else {
        StopSignal.received.store(signal, ordering: .relaxed)
    }
    wake()
}

private let resizeHandler: @convention(c) (Int32) -> Void = { _ in
    StopSignal.resized.store(true, ordering: .relaxed)
    wake()
}

/// Sleeps until `deadline` on the monotonic clock; returns false when a stop
/// signal came first. While it waits, `readable` runs whenever one of
/// `watching` has data (link notifications, read when they come; the list
/// is asked again after, as it can change), and ends the wait when it
/// returns true; `hangup` runs after a SIGHUP.
public func sleepUntil(
    _ deadline: Double, watching: () -> [Int32] = { [] }, readable: () -> Bool = { false }, hangup: () -> Void = {}
) -> Bool {
    var watched = watching()
    var fds = [pollfd(fd: StopSignal.pipe.read, events: Int16(POLLIN), revents: 0)]
    fds += watched.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    while !StopSignal.requested {
        if StopSignal.takeHangup() {
            hangup()
            continue
        }
        let remaining = deadline - monotonicSeconds()
        if remaining <= 0 { return true }
        for n in fds.indices { fds[n].revents = 0 }
        let rc = poll(&fds, nfds_t(fds.count), Int32(min(remaining * 1000 + 1, 60_000)))
        if rc < 0, errno != EINTR { return !StopSignal.requested }
        if rc > 0, fds[0].revents != 0 {
            // Drain the wake-up bytes (a SIGHUP's, or a stop's).
            var buffer = [UInt8](repeating: 0, count: 64)
            while read(StopSignal.pipe.read, &buffer, buffer.count) > 0 {}
        }
        if rc > 0, fds.dropFirst().contains(where: { $0.revents != 0 }) {
            if readable() { return !StopSignal.requested }
            let now = watching()
            if now != watched {
                watched = now
                fds = [fds[0]] + watched.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            }
        }
    }
    return false
}

/// What a system error means for a person, by errno.
public enum Describe {
    /// Why a file cannot be written into its folder.
    /// `: it (or /a, on the way) is owned by uid 0 with mode 0700, and this
    /// runs as uid 65534`: which privilege is missing, in facts.
    public static func whoCannot(_ folder: String) -> String {
        var path = folder
        var st = stat()
        // The nearest folder that can be looked at, on the way to `folder`.
        while stat(path, &st) != 0 {
            guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "" }
            path = String(path[..<slash])
        }
        let mode = String(st.st_mode & 0o7777, radix: 8)
        let owner = "owned by uid \(st.st_uid), gid \(st.st_gid), mode 0\(mode)"
        let on = path == folder ? "it is" : "\(path), on the way, is"
        return ": \(on) \(owner), and ifmeter runs as uid \(geteuid()), gid \(getegid())"
    }

    public static func folderProblem(_ error: SystemError, for path: String) -> String {
        let folder = AtomicFile.folder(of: path)
        switch error.errno {
        case ENOENT: return "the folder \(folder) does not exist"
        case ENOTDIR: return "\(folder) is not a folder"
        case EACCES, EPERM: return "no permission to write in \(folder)\(Self.whoCannot(folder)) (\(error.call): \(error.message))"
        default: return "cannot write in \(folder): \(error.message)"
        }
    }
}

/// `2026-11-30 23:31:02 CET`: a wall-clock time as `sample` heads an
/// interval with it, in the local zone with its abbreviation.
public func localTimeLabel(_ unix: Double) -> String {
    var t = time_t(unix.rounded(.down))
    var parts = tm()
    localtime_r(&t, &parts)
    var buffer = [CChar](repeating: 0, count: 64)
    let n = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S %Z", &parts)
    return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
