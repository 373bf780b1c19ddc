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
///
/// Text is written with control characters escaped (newlines kept): a name
/// from the kernel or a trace cannot reach the terminal as an escape
/// sequence, whichever path it took into a message. Only the live screen,
/// which draws with escape sequences of its own, writes `raw`.
enum Output {
    static func put(_ text: String, to fd: Int32 = 1) throws(CLIError) {
        try raw(TerminalText.escaped(text, keeping: "\n"), to: fd)
    }

    /// Writes the text as it is: for the live screen's own escape sequences.
    static func raw(_ text: String, to fd: Int32 = 1) throws(CLIError) {
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

/// What every run starts with, before it opens anything.
enum ProcessStart {
    /// Standard descriptors that are closed (`2>&-`, `>&-`) are opened on
    /// /dev/null first: otherwise the first file ifmeter opens would take
    /// that number, and a log line or a report meant for stderr or stdout
    /// would land in a JSON Lines file or a socket. SIGPIPE is ignored: a
    /// reader that went away makes a write fail (EPIPE), and the command
    /// stops as on any failed write, with its last save, instead of dying.
    static func prepare() {
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

/// SIGINT, SIGTERM and SIGQUIT ask the running command to stop at its next
/// wait (a clean stop: the last period written, the state saved). SIGHUP,
/// where a command installs it (serve, export), asks it to save and reopen
/// its output files, and it goes on (for logrotate).
///
/// The handler sets a flag and writes a byte to a pipe that every wait
/// polls, so a wait returns at once. Commands that start threads (serve)
/// `block` the signals first, so the threads inherit them blocked, then
/// `install`, which unblocks them in the calling thread only: the handler
/// then always runs on the waiting thread.
enum StopSignal {
    static let received = Atomic<Int32>(0)
    static let hangups = Atomic<Int>(0)
    nonisolated(unsafe) static var pipe: (read: Int32, write: Int32) = (-1, -1)

    /// Signals that stop a command cleanly, with its last save: the usual
    /// three, and SIGUSR2 and SIGALRM, whose default would kill it with no
    /// save. (SIGUSR1 reopens files where SIGHUP does, and stops elsewhere.)
    static let stopping = [SIGINT, SIGTERM, SIGQUIT, SIGUSR2, SIGALRM]
    /// SIGHUP and SIGUSR1 save and reopen (serve, export; installed with
    /// `hangup`).
    static let reopens = Atomic<Bool>(false)

    static func set(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        return set
    }

    /// SIGHUP stops like SIGTERM (installed with `hangupStops`).
    static let hangupStops = Atomic<Bool>(false)

    /// `hangup`: SIGHUP saves and reopens instead of ending the process.
    /// `hangupStops`: SIGHUP (the terminal or the session went) stops it
    /// cleanly, with a last save, instead of killing it.
    static func install(hangup: Bool = false, hangupStops: Bool = false) {
        if hangupStops { Self.hangupStops.store(true, ordering: .relaxed) }
        if hangup { Self.reopens.store(true, ordering: .relaxed) }
        if pipe.read < 0 {
            var fds: [Int32] = [-1, -1]
            if Glibc.pipe(&fds) == 0 {
                for fd in fds {
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                }
                pipe = (fds[0], fds[1])
            }
        }
        // SIGUSR1 is always taken (logrotate configs copied from nginx's
        // send it): it reopens where SIGHUP does, and stops elsewhere.
        let signals = stopping + [SIGUSR1] + (hangup || hangupStops ? [SIGHUP] : [])
        for sig in signals {
            var action = sigaction()
            let handler: @convention(c) (Int32) -> Void = { signal in
                let reopen = signal == SIGUSR1 ? StopSignal.reopens.load(ordering: .relaxed)
                    : signal == SIGHUP && !StopSignal.hangupStops.load(ordering: .relaxed)
                if reopen {
                    StopSignal.hangups.add(1, ordering: .relaxed)
                } else {
                    StopSignal.received.store(signal, ordering: .relaxed)
                }
                var byte: UInt8 = 1
                _ = write(StopSignal.pipe.write, &byte, 1)
            }
            #if canImport(Glibc)
            action.__sigaction_handler.sa_handler = handler
            #else
            action.__sigaction_u.__sa_handler = handler
            #endif
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0  // no SA_RESTART: a wait returns at once
            sigaction(sig, &action, nil)
        }
        // A parent may have started us with these blocked (threads of
        // Dispatch-based programs block them, and exec keeps the mask).
        var unblock = set(signals)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }

    /// Blocks the stop signals and SIGHUP in this thread and every thread it
    /// starts from now on; `install` then unblocks them in this thread alone.
    static func block() {
        var blocked = set(stopping + [SIGHUP, SIGUSR1])
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
    }

    static var requested: Bool { received.load(ordering: .relaxed) != 0 }

    /// Whether a SIGHUP came since the last call.
    static func takeHangup() -> Bool {
        hangups.exchange(0, ordering: .relaxed) != 0
    }
}

/// Sleeps until `deadline` on the monotonic clock; returns false when a stop
/// signal came first. While it waits, `readable` runs whenever one of
/// `watching` has data (link notifications, read when they come; the list
/// is asked again after, as it can change), and ends the wait when it
/// returns true; `hangup` runs after a SIGHUP.
func sleepUntil(
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

/// The machine's host name.
func hostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown" }
    return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// What a system error means for a person, by errno.
enum Describe {
    /// Why a file cannot be written into its folder.
    /// `: it (or /a, on the way) is owned by uid 0 with mode 0700, and this
    /// runs as uid 65534`: which privilege is missing, in facts.
    static func whoCannot(_ folder: String) -> String {
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

    static func folderProblem(_ error: SystemError, for path: String) -> String {
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
func localTimeLabel(_ unix: Double) -> String {
    var t = time_t(unix.rounded(.down))
    var parts = tm()
    localtime_r(&t, &parts)
    var buffer = [CChar](repeating: 0, count: 64)
    let n = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S %Z", &parts)
    return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
