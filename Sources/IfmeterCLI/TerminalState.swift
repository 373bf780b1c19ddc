#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

// What a signal handler needs to put the terminal back: set before any
// handler is installed, read-only afterwards.
nonisolated(unsafe) private var savedTermios = termios()
nonisolated(unsafe) private var termiosDescriptor: Int32 = -1
nonisolated(unsafe) private var wakePipe: (read: Int32, write: Int32) = (-1, -1)

/// Raw mode and the alternate screen for the live view, and the guarantee
/// that the terminal is restored: on return, on SIGINT, SIGTERM, SIGHUP,
/// SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM (each a clean stop), at exit, and
/// on a crash signal (then the signal is raised again).
enum TerminalState {
    static let entered = Atomic<Bool>(false)
    static let stop = Atomic<Bool>(false)
    static let resized = Atomic<Bool>(false)

    static var stopRequested: Bool { stop.load(ordering: .relaxed) }
    static var wakeRead: Int32 { wakePipe.read }

    static func enter() {
        termiosDescriptor = isatty(0) == 1 ? 0 : 1
        if tcgetattr(termiosDescriptor, &savedTermios) != 0 { termiosDescriptor = -1 }
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
            wakePipe = (fds[0], fds[1])
        }
        // Handlers first, so that nothing below can leave the terminal raw.
        // Every signal whose default would end the process stops the view
        // cleanly instead (the last save, the terminal restored): SIGQUIT
        // left it in the alternate screen with the cursor hidden.
        let stopping = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM]
        for sig in stopping { install(sig, stopHandler) }
        install(SIGWINCH, resizeHandler)
        for sig in [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP] { install(sig, crashHandler, resetOnce: true) }
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for sig in stopping + [SIGWINCH] { sigaddset(&unblock, sig) }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        atexit { restoreTerminal() }
        if termiosDescriptor >= 0 {
            var raw = savedTermios
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
            raw.c_iflag &= ~tcflag_t(IXON | ICRNL | BRKINT | INPCK | ISTRIP)
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 0
                cc[Int(VTIME)] = 0
            }
            tcsetattr(termiosDescriptor, TCSAFLUSH, &raw)
        }
        entered.store(true, ordering: .relaxed)
        // Alternate screen, cursor hidden, screen cleared once.
        try? Output.raw("\u{1B}[?1049h\u{1B}[?25l\u{1B}[2J\u{1B}[H")
    }

    static func restore() { restoreTerminal() }

    static func drainWakeups() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakePipe.read, &buffer, buffer.count) > 0 {}
    }

    static func takeResize() -> Bool { resized.exchange(false, ordering: .relaxed) }

    /// The terminal's size; 80x24 when it cannot be read.
    static func size() -> (width: Int, height: Int) {
        var ws = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 {
            return (Int(ws.ws_col), Int(ws.ws_row))
        }
        return (80, 24)
    }

    private static func install(_ sig: Int32, _ handler: @convention(c) (Int32) -> Void, resetOnce: Bool = false) {
        var action = sigaction()
        #if canImport(Glibc)
        action.__sigaction_handler.sa_handler = handler
        #else
        action.__sigaction_u.__sa_handler = handler
        #endif
        sigemptyset(&action.sa_mask)
        action.sa_flags = resetOnce ? Int32(truncatingIfNeeded: SA_RESETHAND) : 0
        sigaction(sig, &action, nil)
    }
}

private func wake() {
    var byte: UInt8 = 1
    _ = write(wakePipe.write, &byte, 1)
}

private let stopHandler: @convention(c) (Int32) -> Void = { _ in
    TerminalState.stop.store(true, ordering: .relaxed)
    wake()
}

private let resizeHandler: @convention(c) (Int32) -> Void = { _ in
    TerminalState.resized.store(true, ordering: .relaxed)
    wake()
}

/// Async-signal-safe: write(2) and tcsetattr(3) only.
private func restoreTerminal() {
    guard TerminalState.entered.exchange(false, ordering: .relaxed) else { return }
    let sequence: StaticString = "\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l"
    _ = write(1, sequence.utf8Start, sequence.utf8CodeUnitCount)
    if termiosDescriptor >= 0 { tcsetattr(termiosDescriptor, TCSAFLUSH, &savedTermios) }
}

private let crashHandler: @convention(c) (Int32) -> Void = { sig in
    restoreTerminal()
    // SA_RESETHAND put the default action back: die of the same signal.
    raise(sig)
}
