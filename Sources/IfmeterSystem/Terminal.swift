#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

// What a crash handler needs to put the terminal back: set before any
// handler is installed, read-only afterwards.
nonisolated(unsafe) private var savedTermios = termios()
nonisolated(unsafe) private var termiosDescriptor: Int32 = -1

/// Raw mode and the alternate screen for the live view, and the guarantee
/// that the terminal is restored: on return, on every signal that stops a
/// command (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM:
/// each a clean stop, through `StopSignal`), at exit, and on a crash
/// signal (then the signal is raised again).
public enum TerminalState {
    static let entered = Atomic<Bool>(false)

    /// A stop was asked for (a signal, or the terminal went away).
    public static var stopRequested: Bool { StopSignal.requested }
    /// Readable when a signal came (resize or stop): for the view's wait.
    public static var wakeRead: Int32 { StopSignal.pipe.read }

    public static func enter() {
        termiosDescriptor = isatty(0) == 1 ? 0 : 1
        if tcgetattr(termiosDescriptor, &savedTermios) != 0 { termiosDescriptor = -1 }
        // Handlers first, so that nothing below can leave the terminal raw:
        // every signal whose default would end the process stops the view
        // cleanly instead (SIGQUIT left it in the alternate screen).
        StopSignal.install(hangupStops: true, resize: true)
        for sig in [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP] { StopSignal.handle(sig, with: crashHandler, resetOnce: true) }
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
        try? writeAll(Array("\u{1B}[?1049h\u{1B}[?25l\u{1B}[2J\u{1B}[H".utf8), to: 1)
    }

    public static func restore() { restoreTerminal() }

    public static func drainWakeups() { StopSignal.drainWakeups() }

    public static func takeResize() -> Bool { StopSignal.takeResize() }

    /// The terminal's size; 80x24 when it cannot be read.
    public static func size() -> (width: Int, height: Int) {
        var ws = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &ws) == 0, ws.ws_col > 0, ws.ws_row > 0 {
            return (Int(ws.ws_col), Int(ws.ws_row))
        }
        return (80, 24)
    }
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
