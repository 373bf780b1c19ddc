import IfmeterSystem
import Synchronization

/// A `Log` whose lines a test reads: every line kept (none held back)
/// unless the test asks for limits as a command sets them, on a clock
/// the test moves.
package final class CapturedLog: Sendable {
    private final class State: Sendable {
        let said = Mutex<[String]>([])
        let now = Mutex<Double>(100)
    }

    private let state = State()
    package let log: Log

    /// Every line (`Log.everyLine`), or with `every`, at most `burst` per
    /// `every` seconds of the test's clock from each site.
    package init(prefix: String = "", every: Double? = nil, burst: Int = 1) {
        let state = state
        let sink: Log.Sink = { line in state.said.withLock { $0.append(line) } }
        if let every {
            log = Log(prefix: prefix, every: every, burst: burst, clock: { state.now.withLock { $0 } }, sink: sink)
        } else {
            log = Log.everyLine(prefix: prefix, sink: sink)
        }
    }

    package var lines: [String] { state.said.withLock { $0 } }

    /// Moves the log's clock on.
    package func advance(_ seconds: Double) { state.now.withLock { $0 += seconds } }
}
