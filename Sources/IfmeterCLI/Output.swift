import IfmeterCore
import IfmeterSystem

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
        do {
            try writeAll(Array(text.utf8), to: fd)
        } catch {
            throw failure(error)
        }
    }

    /// How a command whose output could not be written ends: a reader
    /// that went away (`ifmeter usage | head -1`: EPIPE) ends it quietly
    /// with 141, what a shell reports for `yes | head -1` (128 + SIGPIPE);
    /// any other failure is said, and ends it with 1.
    static func failure(_ error: SystemError) -> CLIError {
        error.isBrokenPipe ? .status(readerWentAway) : .runtime("write failed: \(error.message)")
    }

    /// The status of a command whose reader went away.
    static let readerWentAway: Int32 = 141

    /// stderr: one line, errors ignored (there is nowhere else to report).
    static func error(_ line: String) {
        try? put(forPeople(line) + "\n", to: 2)
    }

    /// The locale takes UTF-8 (LC_ALL, LC_CTYPE, LANG); read once.
    static let utf8 = localeUsesUTF8()

    /// Text for people (tables, reports, help, messages) as the locale can
    /// show it: with ASCII stand-ins (`>=` for `≥`) unless it takes UTF-8.
    /// Data (JSON, CSV, traces, completions) is written as it is.
    static func forPeople(_ text: String) -> String { utf8 ? text : ASCIIText.folded(text) }

    static func isTerminal(_ fd: Int32) -> Bool { IfmeterSystem.isTerminal(fd) }
}
