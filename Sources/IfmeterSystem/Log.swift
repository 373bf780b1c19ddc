import IfmeterCore
import Synchronization

/// How much a line matters: a log shows its own level and above.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case debug, info, warning, error

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Where a line is said: the file and line of the call. A log holds its
/// lines back by this, never by their words, so that lines whose words
/// change (a count, a path, a peer's address) are one kind, and lines of
/// two places never hide each other.
public struct LogSite: Hashable, Sendable, CustomStringConvertible {
    public let file: String
    public let line: UInt

    public init(file: String = #fileID, line: UInt = #line) {
        self.file = file
        self.line = line
    }

    public var description: String { "\(file):\(line)" }
}

/// The one logger of a long-running command (serve, export): lines with a
/// level, written through one sink (stderr, or a test's), at most `burst`
/// per `every` seconds from each call site, and the next line from that
/// site says how many were held back. The modules below the commands
/// take a `Log` and say what happened; only the command decides where it
/// goes, so library code never prints.
///
///     log.warning("remote write \(url): \(error)")   // its site: this line
public final class Log: Sendable {
    public typealias Sink = @Sendable (String) -> Void

    private let prefix: String
    private let minimum: LogLevel
    private let every: Double
    private let burst: Int
    private let sink: Sink
    private let clock: @Sendable () -> Double
    /// Each site's lines written within the last `every` seconds (when),
    /// and how many were held back since the last one written. Past
    /// `sites` call sites, the rest share one entry.
    private let state = Mutex<[LogSite: (written: [Double], held: Int)]>([:])
    static let sites = 64
    static let shared = LogSite(file: "", line: 0)

    /// - Parameters:
    ///   - prefix: put before every line ("ifmeter serve: ").
    ///   - minimum: lines below this level are dropped.
    ///   - every, burst: at most `burst` lines per `every` seconds from one site.
    ///   - clock: seconds on a monotonic clock (tests move their own).
    public init(
        prefix: String, minimum: LogLevel = .info, every: Double = 10, burst: Int = 1, clock: @escaping @Sendable () -> Double = monotonicSeconds,
        sink: @escaping Sink
    ) {
        self.prefix = prefix
        self.minimum = minimum
        self.every = every
        self.burst = burst
        self.clock = clock
        self.sink = sink
    }

    /// A log that holds no line back (`every` 0): for lines their writer
    /// already says once per change (a state save failing, then working
    /// again), and for tests that keep every line.
    public static func everyLine(prefix: String = "", minimum: LogLevel = .info, sink: @escaping Sink) -> Log {
        Log(prefix: prefix, minimum: minimum, every: 0, sink: sink)
    }

    /// A log like this one (prefix, level, limits, clock, sink) whose sites
    /// are counted apart from this one's: for one of several alike (a
    /// writer per remote write receiver), whose lines, said at the same
    /// call sites, must not hide another's.
    public func separate() -> Log {
        Log(prefix: prefix, minimum: minimum, every: every, burst: burst, clock: clock, sink: sink)
    }

    public func debug(_ message: @autoclosure () -> String, file: String = #fileID, line: UInt = #line) {
        write(.debug, message(), site: LogSite(file: file, line: line))
    }

    public func info(_ message: @autoclosure () -> String, file: String = #fileID, line: UInt = #line) {
        write(.info, message(), site: LogSite(file: file, line: line))
    }

    public func warning(_ message: @autoclosure () -> String, file: String = #fileID, line: UInt = #line) {
        write(.warning, message(), site: LogSite(file: file, line: line))
    }

    public func error(_ message: @autoclosure () -> String, file: String = #fileID, line: UInt = #line) {
        write(.error, message(), site: LogSite(file: file, line: line))
    }

    /// A line from `site`, unless that site said `burst` lines within the
    /// last `every` seconds; a line written after some were held back says
    /// how many.
    public func write(_ level: LogLevel, _ message: @autoclosure () -> String, site: LogSite) {
        guard level >= minimum else { return }
        let now = clock()
        let held = state.withLock { state -> Int? in
            var key = site
            if state[key] == nil, state.count >= Self.sites { key = Self.shared }
            var entry = state[key] ?? ([], 0)
            entry.written.removeAll { now - $0 >= every }
            guard entry.written.count < burst else {
                entry.held += 1
                state[key] = entry
                return nil
            }
            let held = entry.held
            entry.written.append(now)
            entry.held = 0
            state[key] = entry
            return held
        }
        guard let held else { return }
        let more = held > 0 ? " (and \(held) more messages like it in the last \(Units.duration(every)))" : ""
        sink(prefix + message() + more)
    }
}
